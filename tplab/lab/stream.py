"""The lab's one merged event stream: its own events and the job's, to every subscriber and to disk.

Why one stream: the dashboard and the headless runner are two faces of the same lab and must
see the same events in the same order; neither may slow the lab down. So each subscriber gets a
bounded queue of *batches* (one per read from the pod, one per lab event); a subscriber more
than ``maxsize`` batches behind loses its oldest batch (counted in ``dropped_events``) and the
lab never waits. Everything published is also appended to ``stream.jsonl`` (the job's lines as
the job wrote them, byte for byte). A failed write (a full disk) never stops the lab: the
record stops, and one warning says so, because the teardown that follows must still run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import IO, Any, AsyncIterator, Sequence

from tplab.records.events import Event, EventWriter, LogEvent, WarningEvent
from tplab.keys.redact import one_line


class LabStream:
    """Publish lab events (``emit``, ``stage``, ``log``, ``warn``) and job batches to subscribers."""

    def __init__(self) -> None:
        self._writer = EventWriter(src="lab")
        self._subs: list[asyncio.Queue] = []
        self._fh: IO[str] | None = None
        self.dropped_events = 0
        #: why stream.jsonl stopped being written (a full disk), or None
        self.record_error: str | None = None
        #: when each of the lab's stages began (epoch s), and the current one
        self.stage_times: dict[str, float] = {}
        self.stage_name: str | None = None

    # ---- the record on disk ------------------------------------------------------------
    def open_record(self, path: Path) -> None:
        """Start appending everything published to ``path`` (stream.jsonl)."""
        self._fh = open(path, "w", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115 - closed by close_record

    def _write(self, text: str) -> None:
        if self._fh is None:
            return
        try:
            self._fh.write(text)
        except (OSError, ValueError) as exc:
            self._record_failed(exc)

    def _record_failed(self, exc: BaseException) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError, ValueError):
                fh.close()
        if self.record_error is None:
            self.record_error = one_line(exc) or type(exc).__name__
            # to the subscribers only: the record is what failed
            self.publish_batch((self._writer.make(WarningEvent(
                msg=f"stream.jsonl could not be written ({self.record_error}); the lab goes on, "
                "and the rest of the stream is not recorded")),))

    def flush(self) -> None:
        if self._fh is not None:
            try:
                self._fh.flush()
            except (OSError, ValueError) as exc:
                self._record_failed(exc)

    def close_record(self) -> None:
        if self._fh is not None:
            self.flush()
            fh, self._fh = self._fh, None
            if fh is not None:
                with contextlib.suppress(OSError, ValueError):
                    fh.close()

    # ---- subscribers -------------------------------------------------------------------
    def subscribe(self, maxsize: int = 10_000) -> AsyncIterator[Event]:
        """Every event from now on, until ``close_subs``; see the module docstring."""
        q: asyncio.Queue = asyncio.Queue(maxsize=maxsize)
        self._subs.append(q)

        async def gen() -> AsyncIterator[Event]:
            try:
                while True:
                    batch = await q.get()
                    if batch is None:
                        return
                    for ev in batch:
                        yield ev
            finally:
                with contextlib.suppress(ValueError):
                    self._subs.remove(q)
        return gen()

    def publish_batch(self, batch: Sequence[Event]) -> None:
        """Hand a batch to every subscriber (not to disk: see ``publish`` and ``publish_job``)."""
        if not batch:
            return
        for q in self._subs:
            try:
                q.put_nowait(batch)
            except asyncio.QueueFull:
                with contextlib.suppress(asyncio.QueueEmpty):
                    self.dropped_events += len(q.get_nowait() or ())
                q.put_nowait(batch)

    def publish(self, ev: Event) -> None:
        """One lab event: to disk and to every subscriber."""
        self._write(ev.to_json() + "\n")
        self.publish_batch((ev,))

    def publish_job(self, batch: Sequence[Event], raw: bytes = b"") -> None:
        """A batch of job events: to disk as the job wrote them (``raw``, when it is exactly these
        events' lines) or re-encoded, then to every subscriber."""
        if self._fh is not None:
            self._write(raw.decode("utf-8") if raw
                        else "".join(ev.to_json() + "\n" for ev in batch))
        self.publish_batch(batch)

    def close_subs(self) -> None:
        """End every subscription (a full queue loses its oldest batch to make room)."""
        for q in list(self._subs):
            if q.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    self.dropped_events += len(q.get_nowait() or ())
            q.put_nowait(None)

    # ---- lab events --------------------------------------------------------------------
    def emit(self, ev: Event | str, /, **fields: Any) -> Event:
        """One lab event, checked, stamped and published: typed (``emit(BudgetEvent(...))``)
        or by its type's name (``emit("budget", cap_usd=...)``, the same event); a field its
        type does not declare, or one not of its kind, is an ``EventError``."""
        ev = self._writer.make(ev, **fields)
        self.publish(ev)
        return ev

    def stage(self, name: str, **extra: Any) -> None:
        """The lab's next stage begins (a ``phase`` event on the wire, ``src`` lab)."""
        self.stage_name = name
        self.stage_times.setdefault(name, time.time())
        self.emit("phase", name=name, **extra)  # by name: an undeclared field names its type

    def began(self, name: str) -> float | None:
        """When the lab's stage ``name`` began (epoch s), None when it has not."""
        return self.stage_times.get(name)

    def log(self, msg: str, level: str = "info", headline: bool = False) -> None:
        """A log line; ``headline``: one every face shows, also the terse headless one (a
        choice the lab made for the user, e.g. which cloud ``--provider auto`` picked)."""
        self.emit(LogEvent(level=level, msg=one_line(msg), headline=headline))

    def warn(self, msg: str, **extra: Any) -> None:
        self.emit("warning", msg=one_line(msg, 2000), **extra)
