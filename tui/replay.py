"""Replay: a finished lab's ``stream.jsonl`` played through the dashboard, at a chosen speed.

Why: the stream on disk is every event the lab showed live (lab and job merged, in order), so
playing it back through the same Lab API the dashboard uses (``subscribe``, ``run``,
``request_terminate``) shows that lab again in the same panels — for teaching (×1, ×10) and for
post-mortems (as fast as it draws: ``speed`` 0). It never talks to a cloud and never creates a
pod; the dashboard says REPLAY and its TERMINATE has no pod to end.

The events keep their own timestamps; ``now()`` is the replay's clock (the last event's time
plus the wall time since, times the speed), so "time in state" and the like read as they did.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Iterator

from tplab.records.events import Event, StageEvent
from tplab.viewmodel.past_labs import read_stream

#: speeds offered by the keys (+ / -): ×1, ×10, ×100 and as fast as it draws (0)
SPEEDS: tuple[float, ...] = (1.0, 10.0, 100.0, 0.0)
BATCH = 500


def speed_name(speed: float) -> str:
    """×1, ×10, … and max (as fast as it draws), as ``--speed`` takes them."""
    return "max" if speed == 0 else f"×{speed:g}"


def parse_speed(text: str) -> float:
    """``1``, ``10``, ``x10``, ``max`` (as fast as it draws) -> the speed (0 for max)."""
    t = text.strip().lower().lstrip("x×")
    if t in ("max", "fast", "0"):
        return 0.0
    value = float(t)
    if not value > 0:
        raise ValueError(f"{text!r}: a speed is a positive number or max")
    return value


@dataclass(frozen=True)
class ReplayOutcome:
    """Shaped like the orchestrator's LabOutcome, so the app treats both alike."""

    status: str
    reason: str
    out_dir: str
    pod_id: str | None
    verified_gone: bool
    exit_code: int = 0     # a replay that played is a success, whatever the lab's status was


class ReplayLab:
    def __init__(self, lab_dir: str | Path, speed: float = 10.0) -> None:
        self.lab_dir = Path(lab_dir)
        self._speed = speed
        self._anchor: tuple[float, float] | None = None  # (event time, wall time) at that speed
        self.played = 0
        self.stopped = False
        self.terminate_calls: list[str] = []
        self._queues: list[asyncio.Queue[Event | None]] = []
        self._stop = asyncio.Event()
        self._last_ts: float | None = None
        self._last_wall = time.monotonic()
        self._finished = False
        self._done: StageEvent | None = None  # the lab's `done` stage, once played

    # -- the Lab API the dashboard uses
    def subscribe(self, maxsize: int = 10_000) -> AsyncIterator[Event]:
        q: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=maxsize)
        self._queues.append(q)
        return self._drain(q)

    @staticmethod
    async def _drain(q: asyncio.Queue[Event | None]) -> AsyncIterator[Event]:
        while (ev := await q.get()) is not None:
            yield ev

    def request_terminate(self, reason: str = "user") -> None:
        """Stops the playback (there is no pod: this is a recording)."""
        self.terminate_calls.append(reason)
        self._stop.set()

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        """A new speed takes effect at once, from where the replay is now."""
        if self._last_ts is not None:
            self._anchor = (self.now(), time.monotonic())
        self._speed = value

    def now(self) -> float:
        """The replay's clock, for the dashboard's time-derived figures."""
        if self._last_ts is None:
            return time.time()
        if self._speed == 0 or self._finished or self.stopped or self._anchor is None:
            return self._last_ts
        v0, w0 = self._anchor
        return max(self._last_ts, v0 + (time.monotonic() - w0) * self._speed)

    async def run(self) -> ReplayOutcome:
        events = read_stream(self.lab_dir)
        try:
            await self._play(events)
        finally:
            self._finished = True
            for q in self._queues:
                await q.put(None)
        done = self._done
        status = (done.status or "?") if done else "INCOMPLETE"
        reason = (done.reason or "") if done else "the stream ends before the lab's `done`"
        if self.stopped:
            reason = f"replay stopped after {self.played} events ({reason})"
        return ReplayOutcome(status=status, reason=reason, out_dir=str(self.lab_dir),
                             pod_id=done.pod_id if done else None,
                             verified_gone=done.verified_gone is True if done else False)

    async def _play(self, events: Iterator[Event]) -> None:
        while True:
            batch = await asyncio.to_thread(_take, events, BATCH)
            if not batch:
                return
            for ev in batch:
                if self._anchor is None:
                    self._anchor = (ev.ts, time.monotonic())
                await self._until(ev.ts)
                if self._stop.is_set():
                    self.stopped = True
                    return
                self._last_ts, self._last_wall = ev.ts, time.monotonic()
                if isinstance(ev, StageEvent) and ev.src == "lab" and ev.name == "done":
                    self._done = ev
                for q in self._queues:
                    await q.put(ev)
                self.played += 1
            await asyncio.sleep(0)

    async def _until(self, ts: float) -> None:
        """Wait until the replay's clock reaches ``ts`` (at once at speed 0), waking for a stop
        or a change of speed; waits under 2 ms are not slept (they add up, not drift)."""
        while not self._stop.is_set() and self._speed and self._anchor is not None:
            v0, w0 = self._anchor
            wait = w0 + (ts - v0) / self._speed - time.monotonic()
            if wait < 0.002:
                return
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=min(wait, 0.1))
            except TimeoutError:
                pass


def _take(it: Iterator[Event], n: int) -> list[Event]:
    out = []
    for ev in it:
        out.append(ev)
        if len(out) >= n:
            break
    return out
