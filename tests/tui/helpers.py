"""Helpers for driving the dashboard with Pilot."""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Callable


async def wait_for(pilot, cond: Callable[[], bool], timeout: float = 30.0,
                   what: str = "condition") -> None:
    """Let the app run until ``cond()`` holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            state = getattr(pilot.app, "state", None)
            tail = [f"{ln.level} {ln.text}" for ln in list(getattr(state, "log", []))[-12:]]
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; log tail:\n"
                                 + "\n".join(tail))
        await pilot.pause(0.05)


def svg_text(path: Path) -> str:
    """The text of a Textual SVG screenshot, with its non-breaking spaces as spaces."""
    return html.unescape(path.read_text(encoding="utf-8")).replace("\xa0", " ")
