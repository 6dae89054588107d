"""Reading a file that came from outside (a pod's output, a lab's stream, a log) with a bound.

Why: such a file can be anything its path leads to: a log that grew for hours, a results file
a broken pod wrote forever, a path that is a device (``/dev/full`` and ``/dev/zero`` read as
endless zeros). A reader that takes "the whole file" then takes the machine's memory. Here a
file is read only when it is a regular file, and never past the bound its caller gives.
Standard library only (the pod side reads its own inputs the same way).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 16


class TooLargeError(OSError):
    """The file is larger than its reader's bound (or not a regular file at all)."""


def _open_regular(path: str | os.PathLike[str]) -> int:
    """A descriptor on ``path`` when it is a regular file (symlinks followed); else an OSError
    that says what it is. Opened without blocking, so a FIFO cannot hang the reader."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a pipe"
                if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "not a file")
        raise TooLargeError(f"{Path(path)} is {kind}, not a regular file: not read")
    return fd


def iter_chunks(path: str | os.PathLike[str], limit: int) -> Iterator[bytes]:
    """``path``'s bytes in chunks, at most ``limit`` of them in all (the rest is not read)."""
    fd = _open_regular(path)
    try:
        left = limit
        while left > 0:
            chunk = os.read(fd, min(CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk
    finally:
        os.close(fd)


def _size(n: int) -> str:
    """A bound in words: "32 MiB", "1 KiB", "700 bytes"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def read_bounded(path: str | os.PathLike[str], limit: int, what: str = "file") -> bytes:
    """The whole of ``path`` when it is a regular file of at most ``limit`` bytes; else a
    ``TooLargeError`` naming ``what`` and the bound."""
    data = b"".join(iter_chunks(path, limit + 1))
    if len(data) > limit:
        raise TooLargeError(f"the {what} {Path(path)} is over {_size(limit)}: not read")
    return data
