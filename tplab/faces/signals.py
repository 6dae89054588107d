"""How ``tplab run`` ends a lab on a signal: every catchable way out tears the pod down, none
cuts it short.

Ctrl-C, SIGTERM, SIGHUP (the terminal closed, the SSH session to the laptop dropped) and SIGQUIT
are treated the same way: the first one asks the lab to terminate its pod (terminate, verify
gone, settle); the teardown runs shielded, so a second press does not cut it short, and a third
says what is still being done. SIGKILL cannot be caught: that is what the pod's own guard and
watchdog are for. ``STOP_SIGNALS`` names them for the dashboard too, whose handlers
(``tui/exit_guard.py``) must also run while its event loop is busy drawing, and where a second
SIGTERM is taken as "exit now".
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Callable

#: the signals that stop a lab, and how they are named to the user
STOP_SIGNALS: dict[int, str] = {
    signal.SIGINT: "Ctrl-C",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP (the terminal went away)",
    signal.SIGQUIT: "SIGQUIT",
}


class StopOnSignals:
    """Install on the lab's loop; ``say`` prints a line for the user (it must not raise)."""

    def __init__(self, lab: Any, say: Callable[[str], None]) -> None:
        self.lab = lab
        self.say = say
        self.count = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._installed: list[int] = []

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> StopOnSignals:
        self._loop = loop or asyncio.get_running_loop()
        for sig, name in STOP_SIGNALS.items():
            try:
                self._loop.add_signal_handler(sig, self.on_signal, name)
                self._installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread, or a platform without it
        return self

    def uninstall(self) -> None:
        loop = self._loop
        if loop is not None:
            for sig in self._installed:
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        self._installed.clear()

    def on_signal(self, name: str) -> None:
        self.count += 1
        if self.count == 1:
            self.lab.request_terminate(name)
            self.say(f"tplab: {name} — terminating the pod and verifying it is gone; wait for "
                     "`done`.")
        elif self.count == 2:
            self.say(f"tplab: {name} again — the teardown is not cut short: the pod is "
                     "terminated and verified gone first.")
        else:
            self.say(f"tplab: still tearing down: {self.doing()}.")

    def doing(self) -> str:
        """What the teardown is doing now, in words."""
        stream = getattr(self.lab, "stream", None)
        stage = getattr(stream, "stage_name", None) or "starting"
        pod = getattr(self.lab, "pod_id", None)
        what = {"terminate": "asking the provider to terminate",
                "verify": "waiting for the provider to show it gone",
                "record": "recording the spend in the ledger",
                "manifest": "writing the manifest"}.get(stage, f"stage {stage}")
        return what + (f" pod {pod}" if pod and stage in ("terminate", "verify") else "") + \
            (f" (pod {pod})" if pod and stage not in ("terminate", "verify") else "")
