"""The self-termination word: how a provider's description of "end this pod" travels to the pod.

Why here: the client encodes it (``tplab.lab.provision``, from the cloud's ``self_end()``) and the
pod's boot guard and watchdog decode it (``tplab.job.self_terminate``): one format, written once,
on the seam both sides import. Standard library only; it travels in the guard's zip too.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any


def encode(data: Mapping[str, Any]) -> str:
    """A provider's self-termination data (a dict) as one shell-safe word (base64 of the JSON)."""
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()


def decode(word: str) -> Any:
    """``encode``'s word back to its JSON value; ValueError when it is not base64 JSON."""
    try:
        return json.loads(base64.urlsafe_b64decode(word.encode()).decode())
    except UnicodeDecodeError as exc:
        raise ValueError(str(exc)) from None
