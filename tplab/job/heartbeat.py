"""The job's heartbeat: an event every few seconds naming the job's stage, so the client can tell a
live job that is busy (a long sweep, a slow compile) from a dead one.

Pod-side: the standard library and the records' event writer only.
"""

from __future__ import annotations

import threading

from tplab.records.events import EventWriter, HeartbeatEvent


class Heartbeat:
    """Emits a heartbeat event every ``period_s`` from a daemon thread until stopped."""

    def __init__(self, writer: EventWriter, period_s: float) -> None:
        self._writer = writer
        self._period = period_s
        self._stop = threading.Event()
        self.stage = "setup"
        self._thread = threading.Thread(target=self._loop, name="tplab-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            self._writer.emit(HeartbeatEvent(phase=self.stage))

    def start(self) -> None:
        if self._period > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2 * self._period)
