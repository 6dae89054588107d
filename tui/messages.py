"""Messages the app's workers post back to the UI (dataclasses, as Textual allows)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class LabFinished(Message):
    """``lab.run()`` returned (``outcome``) or raised (``error``); the event stream is drained.
    ``refused``: the lab was never built (one sentence why: no key, a missing file, the budget);
    nothing was created, no folder made."""

    outcome: Any = None
    error: str | None = None
    refused: str | None = None


@dataclass
class SweepProgress(Message):
    """Progress of a TERMINATE pressed with no lab running: the leftover-pod sweep."""

    text: str
    finished: bool = False
    ok: bool = True  # finished and every pod found is verified gone


@dataclass
class PrecheckDone(Message):
    """The cloud check before Start answered (``report``) or failed (``error``)."""

    report: Any = None
    error: str | None = None
