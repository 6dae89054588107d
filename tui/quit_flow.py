"""How the dashboard ends: quit, a stop signal, the terminal gone, or leaving the pod running.

Why apart from the runner: the runner decides what happens to a lab; this decides when the
dashboard may close around it, and it has one rule: never close while this dashboard's pod is
alive unless the user chose so. Quit with no pod alive (or in a replay) exits at once; with a
pod alive it asks: terminate and quit, leave it running (confirmed twice), or cancel. A stop
signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT, taken by ``tui/exit_guard.py``) or the terminal going
away (``tui/terminal_driver.py``) ends the dashboard the way "terminate and quit" does, without
asking, from any screen: the pod is terminated and verified gone, the lab recorded, then the
process exits. A second SIGTERM exits at once and says which pod may still run.
"""

from __future__ import annotations

from typing import Any, Protocol

from tplab.viewmodel.fold import LabState
from tui.screens.quit import (CANCEL, LEAVE_RUNNING, TERMINATE_AND_QUIT, ConfirmLeaveScreen,
                              QuitScreen)


class Runner(Protocol):
    """What the way out reads of the runner (``tui.runner.LabRunner`` is one)."""

    host: Any
    state: LabState
    lab: Any
    lab_active: bool
    saving_proof: bool
    sweeping: bool
    outcome: Any
    lab_error: str | None
    mock: bool
    api_url: str | None

    @property
    def is_live(self) -> bool: ...

    def terminate(self) -> None: ...


class QuitFlow:
    """The dashboard's way out, for one runner."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.asked = False          # a quit or a stop signal came: close once the lab is over
        self.left_running = False   # the user left the pod running (its watchdog guards it)

    def on_stop_signal(self, name: str) -> None:
        """A stop signal or the terminal gone (``name`` says which): a live pod is terminated
        and verified gone first, then the dashboard exits; with none (and in a replay, a past
        lab, on the Labs screen) it exits at once. Screens over the dashboard are closed (a
        quit dialog is answered: "terminate and quit")."""
        self.runner.host.show_dashboard()
        first = not self.asked
        self.asked = True
        if self.runner.is_live and self.runner.lab_active:
            if first:
                self.runner.state.note(f"{name}: terminating the pod, then closing", "warning")
            if self.runner.state.note_terminate_requested() and self.runner.lab is not None:
                self.runner.lab.request_terminate(name)
            # a lab still being built picks the request up from the state (see follow); the
            # exit follows its end (finished, then _save_proof)
            self.runner.host.redraw_controls()
        elif self.runner.saving_proof or (self.runner.sweeping and self.runner.is_live):
            pass  # the lab's proof screenshot or the leftover sweep exits when it is done
        else:
            self.exit_now()

    def forced_exit_note(self, name: str) -> str:
        """The line a second SIGTERM leaves on stderr: what may still be running."""
        pod = self.runner.state.instance.pod_id
        if self.runner.is_live and self.runner.lab_active and self.runner.state.pod_alive \
                and self._own_mock():  # its pod cannot outlive the mock cloud that goes now
            return (f"tplab-tui: {name} again: exiting before the teardown finished; mock pod "
                    f"{pod or '(being created)'} ends with the mock cloud this dashboard "
                    "started, which stops with it; `tplab terminate --all --mock` then settles "
                    "its hold in the mock ledger (or the next mock lab does).")
        if self.runner.is_live and self.runner.lab_active and self.runner.state.pod_alive:
            return (f"tplab-tui: {name} again: exiting before the teardown finished; pod "
                    f"{pod or '(being created)'} may still be running (its watchdog ends it "
                    "when the heartbeat stops). End it now with: tplab terminate "
                    f"{pod or '--all'}{self.cloud_flags()}")
        return f"tplab-tui: {name} again: exiting now."

    def exit_now(self) -> None:
        """Exit: called only once no lab is running (it ended and is recorded) or in a replay."""
        self.runner.host.finish(self.exit_code())

    def exit_code(self) -> int:
        if self.runner.lab_error:
            return 1
        code = getattr(self.runner.outcome, "exit_code", None)
        return int(code) if code is not None else 0

    def cloud_flags(self) -> str:
        """The flags `tplab status` / `tplab terminate` need to reach this lab's cloud."""
        if not self.runner.mock:
            return ""
        return " --mock" + (f" --api-url {self.runner.api_url}" if self.runner.api_url else "")

    def quit(self) -> None:
        host = self.runner.host
        if self.asked:
            host.notify("Terminating; the dashboard closes once the pod is verified gone.")
            return
        if not self.runner.is_live or (not self.runner.lab_active and not self.runner.state.pod_alive):
            self.exit_now()
            return
        if host.dialog_open():
            return
        host.push_dialog(QuitScreen(self.runner.state.instance.pod_id, self._mock_note()),
                         self._on_quit_choice)

    def _own_mock(self) -> bool:
        """The lab's pods live in the mock cloud this dashboard started (and stops)."""
        return bool(self.runner.mock and not self.runner.api_url)

    def _mock_note(self) -> str:
        if self._own_mock():
            return ("MOCK: this pod runs in the mock cloud this dashboard started and cannot "
                    "outlive it: either choice terminates it and settles its hold.")
        return ""

    def _on_quit_choice(self, choice: str | None) -> None:
        if choice == LEAVE_RUNNING and self._own_mock():
            self.runner.state.note("MOCK: the pod cannot outlive this dashboard's mock cloud: "
                                   "terminating it and settling its hold, then closing", "warning")
            choice = TERMINATE_AND_QUIT
        if choice == TERMINATE_AND_QUIT:
            self.asked = True
            self.runner.terminate()
            if not self.runner.lab_active:
                self.exit_now()
        elif choice == LEAVE_RUNNING:
            self.runner.host.push_dialog(ConfirmLeaveScreen(self.runner.state.instance.pod_id,
                                                     self.cloud_flags(), self._mock_note()),
                                  self._on_leave_confirmed)
        elif choice in (CANCEL, None):
            pass

    def _on_leave_confirmed(self, yes: bool | None) -> None:
        """Leave the pod running: quit without terminating. ``lab.detach()`` makes the lab stop
        its client side (SSH, heartbeat, cost ticks) without its teardown when the app's exit
        cancels it; the pod's watchdog then terminates it when the heartbeat goes stale or the
        wall-clock cap passes, and the lab's instance record stays open so the next start finds
        it."""
        if not yes:
            return
        detach = getattr(self.runner.lab, "detach", None)
        if callable(detach):
            detach()
        self.left_running = True
        self.runner.state.note("left the pod running (its watchdog still guards it)", "warning")
        self.runner.host.exit(0)
