"""The append-only JSON-lines file under BudgetGuard: locking, durable appends, damage-tolerant reads.

Why a module of its own: the budget's correctness rests on three file-level properties that are
easy to get subtly wrong and worth testing apart from the money logic:

* **Atomic check-and-append across processes.** Every writer holds an exclusive ``fcntl.flock`` on
  a sidecar lock file (``<ledger>.lock``) while it re-reads the ledger, decides and appends, so two
  tplab processes can never both see the same "remaining" and both spend it. Readers take a shared
  lock so they never see half a line that is being written.
* **Durability.** Each append is one ``write`` on an ``O_APPEND`` descriptor followed by ``fsync``
  (and an ``fsync`` of the directory when the file is created), so an entry that ``append``
  returned for survives a crash or power loss.
* **Damage is reported, never fatal.** A line that is not a JSON object (a torn write, a hand edit)
  is returned as a :class:`DamagedLine` with its 1-based line number and what is wrong, and every
  other line is still returned. If a crash left the last line without its newline, the next append
  starts a new line first, so the damage never spreads to the entry after it.

Numbers are parsed as :class:`decimal.Decimal` (money must not drift) and written back as plain
JSON numbers. Standard library only.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

#: how much of a damaged line's text is kept for the report
_SNIPPET = 80


@dataclass(frozen=True, slots=True)
class LedgerLine:
    """One well-formed line: a JSON object, with its 1-based line number in the file."""

    line_no: int
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class DamagedLine:
    """A line that could not be used: where it is, what is wrong and the start of its text."""

    line_no: int
    reason: str
    text: str = ""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid number here")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Decimal):
        return float(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def encode_line(obj: dict[str, Any]) -> bytes:
    """One ledger line: compact JSON, Decimals as numbers, newline-terminated."""
    return (json.dumps(obj, default=_json_default, separators=(", ", ": "), allow_nan=False)
            + "\n").encode("utf-8")


def parse_lines(raw: bytes) -> tuple[list[LedgerLine], list[DamagedLine]]:
    """Split a ledger's bytes into good lines and damaged ones; blank lines are skipped."""
    good: list[LedgerLine] = []
    damaged: list[DamagedLine] = []
    for index, chunk in enumerate(raw.split(b"\n"), start=1):
        if not chunk.strip():
            continue
        snippet = chunk[:_SNIPPET].decode("utf-8", errors="replace")
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            damaged.append(DamagedLine(index, f"not UTF-8 text (byte {exc.start})", snippet))
            continue
        try:
            data = json.loads(text, parse_float=Decimal, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            damaged.append(DamagedLine(index, f"not valid JSON: {exc.msg} (column {exc.colno})",
                                       snippet))
            continue
        except ValueError as exc:
            damaged.append(DamagedLine(index, f"not valid JSON: {exc}", snippet))
            continue
        if not isinstance(data, dict):
            damaged.append(DamagedLine(index, f"not a JSON object (a {type(data).__name__})",
                                       snippet))
            continue
        good.append(LedgerLine(index, data))
    return good, damaged


class Ledger:
    """An append-only JSON-lines file guarded by a sidecar lock file.

    Use :meth:`locked` around a read-decide-append sequence::

        with ledger.locked() as held:
            lines, damaged = held.read()
            ...
            held.append({...})
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    @contextmanager
    def locked(self, exclusive: bool = True) -> Iterator[LockedLedger]:
        """Hold the ledger's lock (exclusive for writers, shared for readers) for the block."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield LockedLedger(self, exclusive)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def read(self) -> tuple[list[LedgerLine], list[DamagedLine]]:
        """Read the whole ledger under a shared lock."""
        with self.locked(exclusive=False) as held:
            return held.read()


class LockedLedger:
    """The ledger while its lock is held; only obtainable from :meth:`Ledger.locked`."""

    def __init__(self, ledger: Ledger, exclusive: bool) -> None:
        self._ledger = ledger
        self._exclusive = exclusive

    def read(self) -> tuple[list[LedgerLine], list[DamagedLine]]:
        try:
            raw = self._ledger.path.read_bytes()
        except FileNotFoundError:
            return [], []
        return parse_lines(raw)

    def append(self, obj: dict[str, Any]) -> int:
        """Append one entry durably (write + fsync); returns its 1-based line number.

        Needs the exclusive lock.
        """
        if not self._exclusive:
            raise RuntimeError("appending to the ledger needs the exclusive lock")
        path = self._ledger.path
        data = encode_line(obj)
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            existing = os.pread(fd, size, 0) if size else b""
            line_no = existing.count(b"\n") + 1
            if existing and not existing.endswith(b"\n"):
                data = b"\n" + data  # a torn last line stays its own (damaged) line
                line_no += 1
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(path.parent)
        return line_no


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
