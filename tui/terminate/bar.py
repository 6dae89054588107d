"""The action bar: Start, the lab's status line, and the big red TERMINATE button.

TERMINATE is docked at the bottom of the main screen so it is always visible, and bound to a
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

from tplab.lab.faces.state import LabState

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


def status_text(state: LabState, sweep: str | None = None) -> Text:
    """One line: where the lab is, or how it ended."""
    t = Text()
    if sweep:
        t.append(sweep, style="bold yellow")
        return t
    if state.idle:
        t.append("idle · press ", style="dim")
        t.append("s", style="bold")
        t.append(" to start a lab", style="dim")
        return t
    if state.done:
        ok = state.done_status == "COMPLETE"
        t.append(state.done_status or "ENDED", style="bold green" if ok else "bold red")
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
    ActionBar { dock: bottom; height: 5; padding: 0 1; background: $panel; }
    ActionBar #start { width: 14; height: 5; margin-right: 1; }
    ActionBar #lab-status { width: 1fr; height: 5; content-align: left middle; }
    ActionBar #terminate { width: 36; height: 5; text-style: bold; }
    ActionBar #terminate.-progress { background: $warning-darken-2; }
    ActionBar #terminate.-gone { background: $success-darken-2; }
    """

    def compose(self) -> ComposeResult:
        yield Button("Start", id="start", variant="success")
        yield Static(id="lab-status")
        yield Button(LABELS["idle"], id="terminate", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "terminate":
            self.post_message(TerminatePressed())
        elif event.button.id == "start":
            self.post_message(StartPressed())

    def show(self, state: LabState, *, lab_active: bool, sweep: str | None = None,
             sweeping: bool = False, sweep_done: bool = False) -> None:
        status = state.terminate_status
        label = LABELS[status]
        if sweeping:
            label, status = "CHECKING FOR PODS…", "terminating"
        elif sweep_done and not lab_active:
            label, status = "NO POD ALIVE ✓", "gone"
        btn = self.query_one("#terminate", Button)
        if str(btn.label) != label:
            btn.label = label
        btn.set_class(status in ("requested", "terminating", "verifying"), "-progress")
        btn.set_class(status in ("gone", "no-pod"), "-gone")
        start = self.query_one("#start", Button)
        if start.disabled != lab_active:
            start.disabled = lab_active
        # fixed size (CSS): no relayout of the screen for a new status line
        self.query_one("#lab-status", Static).update(status_text(state, sweep), layout=False)
