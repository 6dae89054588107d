"""The lab folders written outside ``TPLAB_HOME/labs`` (``--out DIR``), remembered by this machine.

Why: a lab run with ``--out runs/lab02`` keeps everything in that folder, and the commands that
look for past labs (`tplab handin`, `tplab handin --list`, the dashboard's Labs screen) looked
only under ``TPLAB_HOME``: the lab a user had just finished was "no finished lab yet". Each lab
with an ``--out`` folder adds its absolute path here (one line, once) when it starts; a folder
deleted since is skipped when read. Real and mock labs keep separate lists, as their ledgers.
``out_dir_problem`` is the rule for such a folder: one run a folder (new, or empty), so a
finished lab is never overwritten and two runs' files never mix. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FILE = "lab-folders.txt"
MAX_REMEMBERED = 500  # the newest are kept


def _list_file(mock: bool) -> Path:
    from tplab.home.paths import tplab_home
    return tplab_home(mock) / FILE


def _read(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    return [line for line in text.splitlines() if line.strip()]


def remember(folder: Path, mock: bool) -> None:
    """Add ``folder`` (made absolute) to this machine's list; already there: nothing changes.
    A list that cannot be written is not a reason to stop a lab."""
    path = _list_file(mock)
    entry = str(Path(folder).expanduser().resolve())
    lines = _read(path)
    if entry in lines:
        return
    lines = [*lines, entry][-MAX_REMEMBERED:]
    with contextlib.suppress(OSError):
        tmp = path.with_name(f".{FILE}.{os.getpid()}")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def remembered(mock: bool) -> list[Path]:
    """The remembered folders that still exist, newest first."""
    return [Path(p) for p in reversed(_read(_list_file(mock))) if Path(p).is_dir()]


#: files that say a folder holds a lab's (or `tplab local`'s) output
_LAB_MARKERS = ("manifest.json", "stream.jsonl", "results.json", "events.jsonl")


def _free_sibling(folder: Path) -> Path:
    """``folder-2``, ``folder-3``, ...: the first that does not exist."""
    n = 2
    while (candidate := folder.with_name(f"{folder.name}-{n}")).exists():
        n += 1
    return candidate


def _lab_of(folder: Path) -> str:
    """'lab ID (STATUS)' from a folder's manifest and stream (the lab's first event names its
    id), or 'another lab's files'."""
    import json

    def read(name: str, first_line: bool = False) -> dict:
        try:
            with open(folder / name, encoding="utf-8") as fh:
                data = json.loads(fh.readline(1 << 16) if first_line else fh.read(4 << 20))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    manifest = read("manifest.json")
    lab_id = manifest.get("lab_id") or read("stream.jsonl", first_line=True).get("lab_id")
    status = manifest.get("status")
    if not isinstance(lab_id, str):
        return "another lab's files" + (f" ({status})" if isinstance(status, str) else "")
    return f"lab {lab_id}" + (f" ({status})" if isinstance(status, str) else "")


def out_dir_problem(folder: Path, flag: str = "--out") -> str | None:
    """Why ``folder`` cannot take a new lab's files, in one sentence (without "Nothing was
    created."), or None. A lab's folder holds one run: a folder that exists must be empty, so a
    finished lab is never overwritten and two runs' files never mix; a file, or a path that
    cannot be made, is said as such."""
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        return (f"{flag} {folder} is a file, not a folder; name a new folder for the lab's "
                "files.")
    if folder.is_dir():
        try:
            entries = sorted(p.name for p in folder.iterdir())
        except OSError as exc:
            return f"{flag} {folder} cannot be read ({exc.strerror}); name another folder."
        if not entries:
            return None if os.access(folder, os.W_OK) else \
                f"{flag} {folder} is not writable; name a folder you can write to."
        other = _free_sibling(folder)
        if any(name in entries for name in _LAB_MARKERS):
            return (f"{flag} {folder} already holds {_lab_of(folder)}, which a new lab never "
                    f"overwrites; name a new folder (e.g. {flag} {other}) or move that one "
                    "away.")
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        return (f"{flag} {folder} is not empty ({shown}); name a new or empty folder (e.g. "
                f"{flag} {other}), so the lab's files do not mix with others.")
    parent = folder.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{flag} {folder} cannot be made: {parent} is a file, not a folder."
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{flag} {folder} cannot be made: {parent} is not writable."
    return None
