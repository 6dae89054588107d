"""The shared-memory segment behind the ``shm`` transport: its name, its layout, its lifetime.

Why apart from ``shm.py``: this module owns the bytes (create, attach, unlink, remove a crashed
run's leftover) and nothing about the protocol, so the cleanup rules can be read and tested on
their own. Standard library only.

Layout (``Layout``), one segment per communicator, shared by its ``world_size`` ranks::

    [0, 4096)    header: magic, version, world_size, slot_bytes, nonce (int64 words), then one
                 64-byte line per rank (its own cache line, no false sharing): seq, pid, state,
                 sleeping, publish time
    [4096, ...)  data: 2 parities x world_size slots of slot_bytes each (64-byte aligned)

Lifetime, so that a crash leaves nothing behind: rank 0 creates the segment under a name that
says what it is and who made it (``tplab-tp-<creator pid>-<unix time>-<random>``) in
``/dev/shm`` (the system temp dir where there is none), the other ranks attach by that name, and
as soon as every rank has attached rank 0 unlinks the name. From then on the memory lives exactly
as long as some rank maps it: the kernel frees it when the last rank exits, however it exits
(SIGKILL included). The only window for a leftover is a creator killed between create and the
unlink; ``remove_stale`` (called by every create) deletes segments of that name pattern (and
their doorbells, ``<name>.r<rank>``) whose creator process is gone.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tplab.util.pids import pid_alive

PREFIX = "tplab-tp-"
MAGIC = 0x7470_6C61_6273_686D  # "tplabshm"
VERSION = 1
HEADER_BYTES = 4096
LINE_BYTES = 64
WORDS_PER_LINE = LINE_BYTES // 8
MAX_WORLD = HEADER_BYTES // LINE_BYTES - 1

# rank states (word 2 of a rank's line)
STATE_EMPTY, STATE_ALIVE, STATE_CLOSED, STATE_FAILED = 0, 1, 2, 3

_NAME = re.compile(rf"^{re.escape(PREFIX)}(\d+)-(\d+)-[0-9a-f]+(\.r\d+)?$")  # .rN: a doorbell


class SegmentError(RuntimeError):
    """The segment cannot be created or attached (one clear sentence saying what to do)."""


def segment_dir() -> Path:
    """Where segments live: ``/dev/shm`` (tmpfs) on Linux, else the system temp directory."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


@dataclass(frozen=True, slots=True)
class Layout:
    """Byte and word offsets inside one segment."""

    world_size: int
    slot_bytes: int

    def __post_init__(self) -> None:
        if not 1 <= self.world_size <= MAX_WORLD:
            raise SegmentError(f"the shm transport supports 1..{MAX_WORLD} ranks, "
                               f"not {self.world_size}.")
        if self.slot_bytes < LINE_BYTES or self.slot_bytes % LINE_BYTES:
            raise SegmentError(f"slot_bytes must be a positive multiple of {LINE_BYTES}, "
                               f"not {self.slot_bytes}.")

    @property
    def total_bytes(self) -> int:
        return HEADER_BYTES + 2 * self.world_size * self.slot_bytes

    @staticmethod
    def seq_word(rank: int) -> int:
        """Index (in int64 words) of ``rank``'s round counter."""
        return WORDS_PER_LINE * (1 + rank)

    @staticmethod
    def pid_word(rank: int) -> int:
        return WORDS_PER_LINE * (1 + rank) + 1

    @staticmethod
    def state_word(rank: int) -> int:
        return WORDS_PER_LINE * (1 + rank) + 2

    @staticmethod
    def sleep_word(rank: int) -> int:
        """Non-zero while ``rank`` sleeps on its doorbell (``shm_doorbell``)."""
        return WORDS_PER_LINE * (1 + rank) + 3

    @staticmethod
    def stamp_word(rank: int) -> int:
        """``perf_counter_ns`` (CLOCK_MONOTONIC, one clock for all processes) of ``rank``'s last
        publish."""
        return WORDS_PER_LINE * (1 + rank) + 4

    def slot_offset(self, parity: int, rank: int) -> int:
        """Byte offset of ``rank``'s data slot for rounds of the given parity (0 or 1)."""
        return HEADER_BYTES + (parity * self.world_size + rank) * self.slot_bytes


class Segment:
    """One mapped segment; ``words`` is the header as int64 words, ``buffer`` the whole mapping."""

    def __init__(self, path: Path, layout: Layout, mm: mmap.mmap, owner: bool) -> None:
        self.path = path
        self.layout = layout
        self.buffer = mm
        self.words = memoryview(mm)[:HEADER_BYTES].cast("q")
        self.owner = owner
        self._unlinked = False

    @property
    def name(self) -> str:
        return self.path.name

    # ----------------------------------------------------------------- create / attach
    @classmethod
    def create(cls, layout: Layout, directory: Path | None = None) -> Segment:
        """A fresh, zeroed segment (the caller then shares ``name`` and ``nonce`` with its peers)."""
        directory = directory or segment_dir()
        remove_stale(directory)
        name = f"{PREFIX}{os.getpid()}-{int(time.time())}-{secrets.token_hex(4)}"
        path = directory / name
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except OSError as exc:
            raise SegmentError(f"cannot create the shared-memory segment {path} "
                               f"({exc.strerror}); use --comm gloo.") from None
        try:
            _reserve(fd, layout.total_bytes, path)
            mm = mmap.mmap(fd, layout.total_bytes)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        os.close(fd)
        seg = cls(path, layout, mm, owner=True)
        w = seg.words
        w[1], w[2], w[3], w[4] = VERSION, layout.world_size, layout.slot_bytes, _nonce()
        w[0] = MAGIC  # last: a peer that sees the magic sees the rest
        return seg

    @classmethod
    def attach(cls, path: str | Path, layout: Layout, nonce: int) -> Segment:
        """Map a segment another rank created; checks it is the one that rank meant."""
        path = Path(path)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as exc:
            raise SegmentError(f"cannot open the shared-memory segment {path} ({exc.strerror}): "
                               "--comm shm needs every rank on one host; use --comm gloo.") from None
        try:
            size = os.fstat(fd).st_size
            if size != layout.total_bytes:
                raise SegmentError(f"the shared-memory segment {path} has {size} bytes, not the "
                                   f"{layout.total_bytes} expected; use --comm gloo.")
            mm = mmap.mmap(fd, layout.total_bytes)
        finally:
            os.close(fd)
        seg = cls(path, layout, mm, owner=False)
        w = seg.words
        if (w[0], w[1], w[2], w[3], w[4]) != (MAGIC, VERSION, layout.world_size,
                                             layout.slot_bytes, nonce):
            seg.close()
            raise SegmentError(f"{path} is not the shared-memory segment rank 0 created "
                               "(header mismatch); use --comm gloo.")
        return seg

    @property
    def nonce(self) -> int:
        return self.words[4]

    # ----------------------------------------------------------------- end of life
    def unlink(self) -> None:
        """Remove the name (the memory stays mapped for the ranks that have it). Idempotent."""
        if self._unlinked:
            return
        self._unlinked = True
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def close(self) -> None:
        """Unmap (the owner also unlinks, in case it never got to). Safe to call twice.

        Tensors made over ``buffer`` must be dropped first; if some still exist the mapping is
        left to the garbage collector (the kernel frees it at exit in any case).
        """
        if self.owner:
            self.unlink()
        with contextlib.suppress(ValueError):
            self.words.release()
        with contextlib.suppress(BufferError, ValueError):
            self.buffer.close()


def _nonce() -> int:
    return secrets.randbits(62) + 1


def _reserve(fd: int, size: int, path: Path) -> None:
    """Allocate the segment's pages now, so a full /dev/shm is an error here, not a SIGBUS later."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except AttributeError:  # not on this platform (macOS)
        pass
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):  # the file system cannot
            raise SegmentError(f"{path.parent} has no room for a {size / 2**20:.1f} MiB "
                               f"shared-memory segment ({exc.strerror}); free space there or "
                               "use --comm gloo.") from None
    os.ftruncate(fd, size)  # cannot preallocate here: size it, pages come on first touch


def remove_stale(directory: Path | None = None) -> list[str]:
    """Delete this user's leftover segments whose creator process is gone; returns their names."""
    directory = directory or segment_dir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        m = _NAME.match(entry.name)
        if m is None:
            continue
        try:
            if uid is not None and entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        if pid_alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(entry.name)
    return removed
