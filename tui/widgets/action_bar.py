"""The action bar: Start, the lab's status line, and the big red TERMINATE button.

TERMINATE sits at the bottom of the main screen, above the key bar, in every layout, and bound to a
key at app level with priority, so it works whatever has focus. It never asks for confirmation
(the pod costs money while a dialog waits) and pressing it again does nothing extra: the app
records the first request and ignores the rest. Its label follows the lab's own events:
terminating… → verifying… → gone ✓, so "gone" means the provider said so.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, Static

from tplab.viewmodel.fold import LabState

LABELS = {
    "idle": "TERMINATE",
    "requested": "TERMINATING…",
    "terminating": "TERMINATING…",
    "verifying": "VERIFYING GONE…",
    "gone": "POD GONE ✓",
    "no-pod": "NO POD ✓",
}


@dataclass
class TerminatePressed(Message):
    """The user asked to terminate (button or key)."""


@dataclass
class StartPressed(Message):
    """The user asked to start the lab."""


#: how each ending reads: a stop by the user is not a failure, a stub is a result
_DONE_STYLE = {"COMPLETE": "bold green", "STOPPED": "bold yellow", "INTERRUPTED": "bold yellow",
               "EDUCATIONAL_STUB": "bold yellow"}


def status_text(state: LabState, sweep: str | None = None, mode: str = "live") -> Text:
    """One line: where the lab is, or how it ended."""
    t = Text()
    if mode == "replay":
        t.append(" REPLAY ", style="bold black on cyan")
        t.append(" no pod: a recorded lab played back · ", style="dim")
    elif mode == "past":
        t.append(" PAST LAB ", style="bold black on cyan")
        t.append(" ", style="dim")
    if state.mock and mode == "live":
        t.append(" MOCK ", style="bold black on yellow")
        t.append(" ")
    if sweep:
        t.append(sweep, style="bold yellow")
        return t
    if state.starting and state.events == 0:
        t.append("starting · ", style="dim")
        t.append(state.starting, style="bold")
        return t
    if state.idle:
        t.append("idle · press ", style="dim")
        t.append("s", style="bold")
        t.append(" to start a lab", style="dim")
        return t
    if state.done:
        t.append(state.done_status or "ENDED",
                 style=_DONE_STYLE.get(state.done_status or "", "bold red"))
        if state.done_reason:
            t.append(f" · {state.done_reason}")
        if state.out_dir:
            t.append(f" · {state.out_dir}", style="dim")
        return t
    t.append("phase ", style="dim")
    t.append(state.phase or "…", style="bold")
    if state.job_phase:
        t.append(" · job ", style="dim")
        t.append(state.job_phase, style="bold")
    if state.fatal_error:
        t.append(f" · {state.fatal_error}", style="bold red")
    return t


class ActionBar(Horizontal):
    DEFAULT_CSS = """
    ActionBar { height: 3; padding: 0 1; background: $panel; }
    ActionBar #start { width: 12; min-width: 8; height: 3; margin-right: 1; }
    ActionBar #lab-status { width: 1fr; height: 3; content-align: left middle; }
    ActionBar #terminate { width: 30; height: 3; text-style: bold; }
    ActionBar #terminate.-progress { background: $warning-darken-2; }
    ActionBar #terminate.-gone { background: $success-darken-2; }
    """

    _status_shown: Text | None = None

    def compose(self) -> ComposeResult:
        # kept: the redraw timer reaches them even while the app is closing (no query)
        self.start_button = Button("Start", id="start", variant="success")
        self.status_line = Static(id="lab-status")
        self.terminate_button = Button(LABELS["idle"], id="terminate", variant="error")
        yield self.start_button
        yield self.status_line
        yield self.terminate_button

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "terminate":
            self.post_message(TerminatePressed())
        elif event.button.id == "start":
            self.post_message(StartPressed())

    def show(self, state: LabState, *, lab_active: bool, sweep: str | None = None,
             sweeping: bool = False, sweep_done: bool = False, mode: str = "live",
             start_label: str = "Start") -> None:
        status = state.terminate_status
        label = LABELS[status]
        if mode != "live":
            label, status = "NO POD (recording)", "idle"
        elif sweeping:
            label, status = "CHECKING FOR PODS…", "terminating"
        elif sweep_done and not lab_active:
            label, status = "NO POD ALIVE ✓", "gone"
        btn = self.terminate_button
        if str(btn.label) != label:
            btn.label = label
        btn.set_class(status in ("requested", "terminating", "verifying"), "-progress")
        btn.set_class(status in ("gone", "no-pod"), "-gone")
        start = self.start_button
        if start.disabled != lab_active:
            start.disabled = lab_active
        if str(start.label) != start_label:
            start.label = start_label
        # fixed size (CSS): no relayout of the screen for a new status line
        text = status_text(state, sweep, mode)
        if text != self._status_shown:
            self._status_shown = text
            self.status_line.update(text, layout=False)
