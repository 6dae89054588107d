"""The action bar: Start, the lab's status line, and the big red TERMINATE button.

TERMINATE sits at the bottom of the main screen, above the key bar, in every layout, and bound to a
key at app level with priority, so it works whatever has focus. It never asks for confirmation
(the pod costs money while a dialog waits) and pressing it again does nothing extra: the app
records the first request and ignores the rest. Its label follows the lab's own events:
terminating… → verifying… → gone ✓, so "gone" means the provider said so.

The status line has the three rows between Start and TERMINATE: how a live lab ended first, then
its folder on a line of its own (home as ``~``, broken after a ``/`` when it is wider than the
line) when both fit whole; a path is never cut inside a name and never runs into a button.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, Static

from tplab.viewmodel.fold import LabState
from tui.format import short_path

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


def fold_path(path: str, width: int) -> str:
    """``path`` in lines of at most ``width`` cells, broken after a ``/`` where it can be."""
    if width <= 0 or len(path) <= width:
        return path
    parts = path.split("/")
    lines: list[str] = []
    line = ""
    for piece in [p + "/" for p in parts[:-1]] + [parts[-1]]:
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        while len(piece) > width:  # one name wider than the line
            lines.append(piece[:width])
            piece = piece[width:]
        line += piece
    return "\n".join(lines + ([line] if line else []))


def status_text(state: LabState, sweep: str | None = None, mode: str = "live") -> Text:
    """Where the lab is, or how it ended."""
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
        return t
    t.append("stage ", style="dim")
    t.append(state.stage or "…", style="bold")
    if state.job_stage:
        t.append(" · job ", style="dim")
        t.append(state.job_stage, style="bold")
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
        if mode == "live" and state.done and state.out_dir and not sweep:
            self._add_folder(text, state.out_dir)
        if text != self._status_shown:
            self._status_shown = text
            self.status_line.update(text, layout=False)

    def _add_folder(self, text: Text, out_dir: str) -> None:
        """The lab's folder under how it ended, when both fit the line's rows whole (how it
        ended comes first; the folder is also in the log and on the Labs screen)."""
        width, rows = self.status_line.size.width, self.status_line.size.height or 3
        folder = fold_path(short_path(out_dir), width)
        used = len(text.wrap(self.app.console, width)) if width else 1
        if used + folder.count("\n") + 1 <= rows:
            text.append("\n")
            text.append(folder, style="dim")
