"""Whether tplab's own output may be coloured: a terminal, and no ``NO_COLOR``.

Why one place: the convention (no-color.org) is that a ``NO_COLOR`` set to anything but the empty
string turns colour off in every program, and a pipe or a file never wants it; each command that
colours (the terminal plot of ``tplab scaling``) asks here. The dashboard needs no help: Textual
reads ``NO_COLOR`` itself and draws in monochrome. Standard library only.
"""

from __future__ import annotations

import os
from typing import Any


def colour_on(stream: Any) -> bool:
    """Colour for ``stream``: it is a terminal and ``NO_COLOR`` is unset or empty."""
    if os.environ.get("NO_COLOR", ""):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False
