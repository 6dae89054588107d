"""Quitting without leaving a paid pod behind by accident, and the signals that mean "stop".

A mixin of ``TplabApp``. Quit with no pod alive (or in a replay: a recording has none) exits at
once; with a pod alive it asks: terminate and quit, leave it running (confirmed twice), or
cancel. SIGTERM, SIGHUP (the terminal went away) and SIGQUIT end the dashboard the way
"terminate and quit" does. The dialogs name the right commands for the lab's cloud (``--mock``
included) and say when a mock pod cannot outlive the dashboard anyway.
"""

from __future__ import annotations

import asyncio

from tui.screens.quit import (CANCEL, LEAVE_RUNNING, TERMINATE_AND_QUIT, ConfirmLeaveScreen,
                              QuitScreen)


class QuitFlow:
    def _install_stop_signals(self) -> None:
        """SIGTERM, SIGHUP and SIGQUIT: terminate the pod, verify it gone, then exit. (Ctrl-C
        is a key here, not a signal: it opens the quit dialog.)"""
        import signal

        from tplab.view.signals import STOP_SIGNALS
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            try:
                loop.add_signal_handler(sig, self._on_stop_signal, STOP_SIGNALS[sig])
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread (tests' pilot), or no such signal here

    def _on_stop_signal(self, name: str) -> None:
        if self.mode != "live":
            self._exit_now()
            return
        self.state.note(f"{name}: terminating the pod, then closing", "warning")
        self._quit_after_lab = True
        if self.lab_active:
            if self.state.note_terminate_requested() and self.lab is not None:
                self.lab.request_terminate(name)
        elif not self.state.pod_alive:
            self._exit_now()

    def _exit_now(self) -> None:
        self.exit(self.exit_code())

    def exit_code(self) -> int:
        if self.lab_error:
            return 1
        code = getattr(self.outcome, "exit_code", None)
        return int(code) if code is not None else 0

    def _cloud_flags(self) -> str:
        """The flags `tplab status` / `tplab terminate` need to reach this lab's cloud."""
        if not self.mock:
            return ""
        return " --mock" + (f" --api-url {self.api_url}" if self.api_url else "")

    async def action_quit(self) -> None:
        if self._quit_after_lab:
            self.notify("Terminating; the dashboard closes once the pod is verified gone.")
            return
        if self.mode != "live" or (not self.lab_active and not self.state.pod_alive):
            self.exit(self.exit_code())
            return
        if isinstance(self.screen, (QuitScreen, ConfirmLeaveScreen)):
            return
        self.push_screen(QuitScreen(self.state.instance.pod_id, self._mock_note()),
                         self._on_quit_choice)

    def _mock_note(self) -> str:
        if self.mock and not self.api_url:
            return ("MOCK: this pod runs in the mock cloud this dashboard started; it stops "
                    "with the dashboard whatever you choose.")
        return ""

    def _on_quit_choice(self, choice: str | None) -> None:
        if choice == TERMINATE_AND_QUIT:
            self._quit_after_lab = True
            self.action_terminate()
            if not self.lab_active:
                self._exit_now()
        elif choice == LEAVE_RUNNING:
            self.push_screen(ConfirmLeaveScreen(self.state.instance.pod_id, self._cloud_flags(),
                                                self._mock_note()),
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
        detach = getattr(self.lab, "detach", None)
        if callable(detach):
            detach()
        self._left_running = True
        self.state.note("left the pod running (its watchdog still guards it)", "warning")
        self.exit(0)
