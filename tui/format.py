"""Small formatters shared by the panels, so every figure reads the same way everywhere."""

from __future__ import annotations

import time
from pathlib import Path

from tplab.money.budget_config import fmt_usd

DASH = "—"


def usd(x: float | None) -> str:
    """A dollar amount as every face shows one (``fmt_usd``: the budget, the hand-in, the CLI),
    a dash when there is none."""
    return DASH if x is None else fmt_usd(x)


def per_hour(x: float | None) -> str:
    """A price per hour, to a tenth of a cent: "$0.700/h"."""
    return DASH if x is None else f"${x:.3f}/h"


def duration(s: float | None) -> str:
    """H:MM:SS (or M:SS under an hour); a dash when unknown."""
    if s is None:
        return DASH
    s = int(max(0.0, s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def ms(x: float | None, digits: int = 2) -> str:
    return DASH if x is None else f"{x:.{digits}f}"


def ratio(x: float | None, digits: int = 2) -> str:
    return DASH if x is None else f"{x:.{digits}f}"


def short_path(path: str) -> str:
    """``path`` with the home folder written ``~`` (as a shell takes it back)."""
    try:
        home = str(Path.home())
    except RuntimeError:
        return path
    if home not in ("", "/") and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home):]
    return path


def ended_text(ts: float | None, word: str = "ended") -> str:
    """'ended 12:03:04 UTC': when the provider showed a pod gone (a time, not a clock)."""
    return DASH if ts is None else f"{word} {time.strftime('%H:%M:%S', time.gmtime(ts))} UTC"
