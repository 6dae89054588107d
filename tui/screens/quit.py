"""Quit protection: quitting while a pod is alive must be a decision, not an accident.

``QuitScreen`` offers three ways out: terminate the pod and then quit, leave it running, or
cancel. Leaving a paid pod running is the one choice that can cost money after the dashboard is
gone, so ``ConfirmLeaveScreen`` asks for it a second time, explicitly, and says what still guards
the pod (its watchdog) and how to stop it later.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

TERMINATE_AND_QUIT = "terminate"
LEAVE_RUNNING = "leave"
CANCEL = "cancel"


class QuitScreen(ModalScreen[str]):
    DEFAULT_CSS = """
    QuitScreen { align: center middle; }
    QuitScreen > Vertical { width: 86; max-width: 100%; height: auto; border: thick $error;
                            padding: 1 2; background: $surface; }
    QuitScreen Label { width: 1fr; margin-bottom: 1; }
    QuitScreen Horizontal { height: auto; align: center middle; }
    QuitScreen Button { margin: 0 1; }
    """
    BINDINGS = [Binding("escape", "choose('cancel')", "Cancel"),
                Binding("t", "choose('terminate')", "Terminate and quit"),
                Binding("l", "choose('leave')", "Leave running")]

    def __init__(self, pod: str | None, note: str = "") -> None:
        super().__init__()
        self.pod = pod
        self.mock_note = note

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"[b]A pod is alive[/b] ({self.pod or 'being created'}). "
                        "It costs money until it is terminated.")
            if self.mock_note:
                yield Label(f"[b]{self.mock_note}[/b]")
            with Horizontal():
                yield Button("Terminate and quit (t)", id=TERMINATE_AND_QUIT, variant="error")
                yield Button("Leave it running… (l)", id=LEAVE_RUNNING, variant="warning")
                yield Button("Cancel (esc)", id=CANCEL, variant="primary")

    def on_mount(self) -> None:
        self.query_one(f"#{CANCEL}", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id)

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)


class ConfirmLeaveScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmLeaveScreen { align: center middle; }
    ConfirmLeaveScreen > Vertical { width: 72; max-width: 100%; height: auto;
                                    border: thick $warning; padding: 1 2; background: $surface; }
    ConfirmLeaveScreen Label { width: 1fr; margin-bottom: 1; }
    ConfirmLeaveScreen Horizontal { height: auto; align: center middle; }
    ConfirmLeaveScreen Button { margin: 0 1; }
    """
    BINDINGS = [Binding("escape", "answer(False)", "No"),
                Binding("y", "answer(True)", "Yes, leave it running")]

    def __init__(self, pod: str | None, cloud_flags: str = "", note: str = "") -> None:
        super().__init__()
        self.pod = pod
        self.cloud_flags = cloud_flags
        self.mock_note = note

    def compose(self) -> ComposeResult:
        pod = self.pod or "?"
        with Vertical():
            yield Label(f"[b]Really leave pod {pod} running?[/b]\n"
                        "It keeps costing money. Its watchdog still guards it: the pod "
                        "terminates itself when the client heartbeat goes stale or the "
                        "wall-clock cap passes.\n"
                        f"See it with [b]tplab status{self.cloud_flags}[/b]; stop it with "
                        f"[b]tplab terminate {pod}{self.cloud_flags}[/b].")
            if self.mock_note:
                yield Label(f"[b]{self.mock_note}[/b]")
            with Horizontal():
                yield Button("Yes, leave it running (y)", id="yes", variant="warning")
                yield Button("No, go back (esc)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
