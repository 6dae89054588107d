"""The lab folders written outside ``TPLAB_HOME/labs`` (``--out DIR``), remembered by this machine.

Why: a lab run with ``--out runs/lab02`` keeps everything in that folder, and the commands that
look for past labs (`tplab handin`, `tplab handin --list`, the dashboard's Labs screen) looked
only under ``TPLAB_HOME``: the lab a user had just finished was "no finished lab yet". Each lab
with an ``--out`` folder adds its absolute path here (one line, once) when it starts; a folder
deleted since is skipped when read. Real and mock labs keep separate lists, as their ledgers.
Standard library only.
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
