"""Tailing the job's event file on the pod: every event exactly once, across reconnects.

Why apart from the SSH transport (``tplab.wire.remote``): this is the client's hot path and its
correctness core. The job appends JSON lines to ``events.jsonl`` on the pod; the client reads
that file over SFTP from the byte offset it keeps in ``TailState`` (which survives a dropped
connection), decodes every complete line (``FastDecoder``: one ``json.loads`` per chunk, each
object through the one decoder, ``tplab.records.events.from_dict``), and drops any event at or
below the last ``seq`` already delivered. The tail ends when the job's exit code appears on the pod (or shortly after
its ``finished`` stage).

Client side only; no torch import.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, cast

import asyncssh

from tplab.records.events import (Event, EventDecoder, EventError, StageEvent, decode_line,
                                  from_dict, loads_strict)
from tplab.wire.remote import REMOTE_DIR


# --------------------------------------------------------------------------------------------
# decoding whole chunks (the client's hot path)

#: bytes asked for per SFTP read: 255 KiB, because OpenSSH's sftp-server answers at most 261,120
#: bytes a read (asking for 256 KiB gets a short read, which the tail takes for "caught up")
READ_CHUNK = 255 * 1024
#: the longest event line the client accepts; a longer one (no newline in sight) is skipped
MAX_LINE_BYTES = 1 << 20


class FastDecoder(EventDecoder):
    """An EventDecoder that parses all complete lines of a chunk with one ``json.loads`` and
    keeps the raw bytes of those lines (``last_raw``) so they can be stored without re-encoding.
    Same contract as EventDecoder (partial lines held, ``offset`` = bytes consumed); a chunk
    with anything odd in it (blank or bad line) falls back to the line-by-line decoder.

    The pod is untrusted: a line longer than ``MAX_LINE_BYTES`` is skipped without being held
    (up to its newline, however far), and lines that are not strict JSON (NaN, Infinity),
    nested too deeply, not UTF-8 or not events are counted in ``bad_lines`` and dropped; the
    stream goes on after each of them."""

    def __init__(self, offset: int = 0) -> None:
        super().__init__(offset)
        self.last_raw = b""
        self._skipping = False   # inside an oversized line: drop bytes up to its newline

    def feed(self, data: bytes) -> list[Event]:
        buf = self._buf
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self.offset += len(data)
                self.last_raw = b""
                return []
            self.offset += nl + 1
            data = data[nl + 1:]
            self._skipping = False
        buf.extend(data)
        last = buf.rfind(b"\n")
        if last < 0:
            if len(buf) > MAX_LINE_BYTES:
                self.offset += len(buf)
                del buf[:]
                self._skipping = True
                self.bad_lines += 1
            self.last_raw = b""
            return []
        raw = bytes(buf[:last + 1])
        self.last_raw = raw
        del buf[:last + 1]
        try:
            if len(raw) > MAX_LINE_BYTES:
                raise ValueError("check each line's length")
            objs = loads_strict(b"[" + raw[:-1].replace(b"\n", b",") + b"]")
            events = [from_dict(o, owned=True) for o in objs]
        except (ValueError, EventError, RecursionError):
            # a blank or bad line somewhere: line by line, keeping every good event
            events = []
            for line in raw.split(b"\n"):
                if not line.strip():
                    continue
                if len(line) > MAX_LINE_BYTES:
                    self.bad_lines += 1
                    continue
                try:
                    events.append(decode_line(line))
                except EventError:
                    self.bad_lines += 1
            self.last_raw = b""
        if len(buf) > MAX_LINE_BYTES:  # the partial line after the last newline is too long
            self.offset += len(buf)
            del buf[:]
            self._skipping = True
            self.bad_lines += 1
        self.offset += len(raw)
        return events


# --------------------------------------------------------------------------------------------
# tailing events with resume


@dataclass
class TailState:
    """Survives reconnects: the byte position read so far and the last job seq delivered."""
    decoder: FastDecoder = field(default_factory=FastDecoder)
    last_seq: int = -1
    duplicates: int = 0
    gaps: int = 0
    #: events from the pod claiming another source than the job (``src`` "lab"): dropped, since
    #: the pod must not be able to speak for the client ("verified gone", a stage, a cost)
    foreign: int = 0
    finished: bool = False
    exit_code: int | None = None
    #: raw bytes of the lines behind the last batch yielded ("" if some were dropped as duplicates)
    last_raw: bytes = b""
    #: when the job's own ``finished`` stage arrived (its last event: results written, outputs
    #: matched); after ``finish_grace_s`` without an exit code the tail ends without waiting for
    #: torchrun's teardown, and ``exit_code`` stays None
    finished_seen_at: float | None = None

    @property
    def read_pos(self) -> int:
        return self.decoder.offset + self.decoder.pending

    @property
    def bad_lines(self) -> int:
        return self.decoder.bad_lines


def _accept(state: TailState, events: list[Event]) -> list[Event]:
    out = []
    for ev in events:
        if ev.src != "job":
            state.foreign += 1
            continue
        if ev.seq <= state.last_seq:
            state.duplicates += 1
            continue
        if ev.seq != state.last_seq + 1:
            state.gaps += 1
        state.last_seq = ev.seq
        out.append(ev)
    if any(isinstance(ev, StageEvent) and ev.name == "finished" for ev in out):
        state.finished_seen_at = time.monotonic()
    return out


async def tail_events(sftp: asyncssh.SFTPClient, state: TailState, poll_s: float = 0.05,
                      chunk: int = READ_CHUNK, finish_grace_s: float | None = None,
                      max_poll_s: float = 0.4) -> AsyncIterator[list[Event]]:
    """Yield batches of new job events from ``events.jsonl`` until the job's exit code appears.

    Polls every ``poll_s`` while events flow, backing off to ``max_poll_s`` while the file is
    quiet: on the mock cloud the pod shares this machine's cores, and a busy poll would slow
    the very job it watches (gloo all-reduce latency suffers from every extra wake-up). Once
    the job's ``finished`` has come, the exit code is looked for every ``poll_s``: the job no
    longer runs, and the lab's next steps wait on it.

    Resumable: reads from ``state.read_pos``; every event is yielded exactly once across calls
    (events at or below ``state.last_seq`` are dropped and counted). Raises the transport's
    errors as they come (the caller reconnects and calls again with the same state).
    """
    path = f"{REMOTE_DIR}/events.jsonl"
    exit_path = f"{REMOTE_DIR}/exit_code"
    fh = None

    async def drain() -> AsyncIterator[list[Event]]:
        assert fh is not None  # opened before the first drain
        while True:
            data = await fh.read(chunk, state.read_pos)
            if not data:
                return
            batch = state.decoder.feed(data)
            accepted = _accept(state, batch)
            state.last_raw = state.decoder.last_raw if len(accepted) == len(batch) else b""
            if accepted:
                yield accepted
            if len(data) < chunk:
                return

    delay = poll_s
    try:
        while not state.finished:
            if fh is None:
                with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                    fh = await sftp.open(path, "rb")
            before = state.read_pos
            if fh is not None:
                async for batch in drain():
                    yield batch
            if state.read_pos != before:
                delay = poll_s
                await asyncio.sleep(poll_s)
                continue
            code = await _read_exit_code(sftp, exit_path)
            early = (code is None and finish_grace_s is not None
                     and state.finished_seen_at is not None
                     and time.monotonic() - state.finished_seen_at >= finish_grace_s)
            if code is not None or early:
                # the job has exited: one last read catches anything written just before
                if fh is None:
                    with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                        fh = await sftp.open(path, "rb")
                if fh is not None:
                    async for batch in drain():
                        yield batch
                state.exit_code = code
                state.finished = True
                break
            await asyncio.sleep(delay)
            # quiet: back off, except once the job said `finished`, when only its exit is
            # awaited (within the grace) and the lab's fetch and terminate wait on each look
            delay = poll_s if state.finished_seen_at is not None else min(max_poll_s, delay * 2)
    finally:
        if fh is not None:
            with contextlib.suppress(asyncssh.Error, OSError):
                await fh.close()


async def _read_exit_code(sftp: asyncssh.SFTPClient, path: str) -> int | None:
    try:
        async with sftp.open(path, "rb") as fh:
            text = cast(bytes, await fh.read()).decode(errors="replace").strip()  # "rb": bytes
    except asyncssh.SFTPNoSuchFile:
        return None
    try:
        return int(text)
    except ValueError:
        return -1
