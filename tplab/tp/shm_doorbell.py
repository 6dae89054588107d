"""Doorbells for the shm transport: a rank that has stopped spinning sleeps in the kernel until a
peer rings it.

Why: a waiter that polls with ``sleep`` or ``sched_yield`` wakes at the wrong times. On a busy
machine (two ranks, the client and other work on two cores) it gives its core away and gets it
back a timeslice later, well after the peer arrived: measured on the shared development machine,
TP decode over a polling shm transport was slower than over gloo, whose ranks block on a socket
and are woken by the kernel the moment data arrives. A doorbell gives shm the same wake-up: each
rank owns a FIFO (a named pipe, opened and then unlinked like the segment); a waiter blocks in
``select`` on its own FIFO, and a rank that publishes a round writes one byte into the FIFO of
each peer whose "sleeping" word is set. The kernel wakes the sleeper at once (and, being a sleeper,
it is scheduled promptly).

The announce-then-check handshake needs store->load ordering, the one reordering x86 allows:
waiter "store sleeping; load seq" against publisher "store seq; load sleeping" could each miss the
other's store and lose the wake-up. ``fence()`` prevents it: acquiring and releasing a
``threading.Lock`` executes a LOCK-prefixed read-modify-write (glibc's semaphore, CPython's mutex),
which x86 orders against every load and store. A wake-up lost anyway would cost one ``select``
timeout (the liveness period), not a hang. Stale bytes (a ring after the waiter already saw the
round) only cause one spurious wake, drained on the way.

Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from pathlib import Path

_FENCE = threading.Lock()


def fence() -> None:
    """A full memory barrier on x86 (a locked read-modify-write)."""
    _FENCE.acquire()
    _FENCE.release()


def fifo_path(segment_path: Path, rank: int) -> Path:
    """Where ``rank``'s doorbell is created, beside the segment (same identifiable name)."""
    return segment_path.with_name(f"{segment_path.name}.r{rank}")


class Doorbells:
    """This rank's own doorbell (to wait on) and write ends of its peers' (to ring)."""

    def __init__(self, own: Path) -> None:
        self.own_path = own
        os.mkfifo(own, 0o600)
        # read-write, so the FIFO always has a writer: select never reports a spurious EOF
        self._read = os.open(own, os.O_RDWR | os.O_NONBLOCK)
        self._peers: dict[int, int] = {}
        self._unlinked = False

    def connect(self, peers: dict[int, Path]) -> None:
        """Open every peer's doorbell for writing (each already exists and has its reader)."""
        for rank, path in peers.items():
            self._peers[rank] = os.open(path, os.O_WRONLY | os.O_NONBLOCK)

    def unlink(self) -> None:
        if not self._unlinked:
            self._unlinked = True
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.own_path)

    def ring(self, rank: int) -> None:
        """Wake ``rank`` if it sleeps; a full pipe already holds a wake-up, so EAGAIN is fine."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._peers[rank], b"\x01")

    def sleep(self, timeout_s: float) -> None:
        """Block until rung or ``timeout_s`` passes, then drain whatever rings are pending."""
        select.select([self._read], [], [], max(0.0, timeout_s))
        with contextlib.suppress(BlockingIOError):
            while len(os.read(self._read, 4096)) == 4096:
                pass

    def close(self) -> None:
        self.unlink()
        for fd in [self._read, *self._peers.values()]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._peers.clear()
        self._read = -1
