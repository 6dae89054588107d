"""Vast.ai's own rules beside its document: every endpoint's input limits and minimum interval.

Why a data file: Vast's combined OpenAPI document (``openapi.json``) drops the ``x-`` extensions
of its per-endpoint files, where the input limits (``x-input-validation``) and the rate limits
(``x-rate-limit``) live. ``vast_endpoint_limits.json`` beside this file is those extensions for
every endpoint, as data (a copy of the project's reference file, held equal to it by
tests/mock/test_vast_limits.py); the mock reads its rules from it and from nowhere else.

- ``RateLimiter``: Vast limits "a minimum interval between requests for a given endpoint and
  identity" (docs ``api-reference/rate-limits-and-errors.mdx``): per route and per key, a call
  less than ``threshold`` seconds after that key's last call of that route that was let through
  is answered 429 ``{"detail": "API requests too frequent endpoint threshold=<t>"}``, with no
  Retry-After header; where the file gives a ``penalty`` (create: 12 s), a violation also shuts
  the route to that key for that long. The offer search is "10 per minute": at most 10 calls let
  through in any 60 s. ``scale`` multiplies every interval (1.0: the service's; 0: off; 2.0:
  the limits doubled), the mock's ``rate_scale`` switch.
- ``create_problem``: the create's inputs against ``create_instance``'s limits (``env``: 256
  characters per variable's value, 32,768 for every ``NAME=value`` together; ``args`` +
  ``args_str`` + ``onstart``: 4,096 together; ``label`` 256; ``image`` 1,024; ``disk`` at
  least 8; ``price`` 0.001-128), answered as Vast answers a rule it breaks: 400 ``invalid_args``
  with "error 400/<n>: Invalid args: ..." in ``msg``.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

LIMITS_PATH = Path(__file__).with_name("vast_endpoint_limits.json")
TOO_FREQUENT = "API requests too frequent"


@lru_cache(maxsize=1)
def endpoints() -> dict[str, dict[str, Any]]:
    """The file's endpoints: name -> {"endpoint": "METHOD /path/", "x-rate-limit", ...}."""
    return dict(json.loads(LIMITS_PATH.read_text())["endpoints"])


def call_name(endpoint: str) -> str:
    """``"GET /api/v0/instances/{id}/"`` -> ``"GET /api/v0/instances/{id}"`` (the mock's call
    names: the document's route template, no trailing slash)."""
    method, _, path = endpoint.partition(" ")
    return f"{method.upper()} {path.rstrip('/')}"


@dataclass(frozen=True)
class RateRule:
    """One endpoint's limit: a minimum ``interval_s`` between calls let through (``penalty_s``
    after a violation), or at most ``per_window`` calls in ``window_s``."""
    interval_s: float = 0.0
    penalty_s: float = 0.0
    per_window: int = 0
    window_s: float = 0.0


@lru_cache(maxsize=1)
def rate_rules() -> dict[str, RateRule]:
    """Call name -> its rule, for every endpoint whose file gives a numeric limit."""
    out: dict[str, RateRule] = {}
    for spec in endpoints().values():
        limit = spec.get("x-rate-limit") or {}
        name = call_name(spec["endpoint"])
        if isinstance(limit.get("threshold"), (int, float)):
            out.setdefault(name, RateRule(float(limit["threshold"]),
                                          float(limit.get("penalty") or 0.0)))
        elif isinstance(limit.get("requests"), int) and limit.get("per") == "minute":
            out.setdefault(name, RateRule(per_window=int(limit["requests"]), window_s=60.0))
    return out


class RateLimiter:
    """Vast's per-endpoint, per-key limit (see the module docstring). ``clock``: injectable."""

    def __init__(self, scale: Callable[[], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._scale = scale
        self._clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._shut_until: dict[tuple[str, str], float] = {}
        self._window: dict[tuple[str, str], deque[float]] = {}

    def refuse(self, call: str, key: str) -> str | None:
        """The 429's detail when ``key`` may not call ``call`` now (None: let through, and
        remembered)."""
        rule = rate_rules().get(call)
        scale = self._scale()
        if rule is None or scale <= 0:
            return None
        now, slot = self._clock(), (call, key)
        if rule.per_window:
            seen = self._window.setdefault(slot, deque())
            while seen and now - seen[0] >= rule.window_s * scale:
                seen.popleft()
            if len(seen) >= rule.per_window:
                return f"{TOO_FREQUENT} endpoint limit={rule.per_window}/minute"
            seen.append(now)
            return None
        threshold = f"{TOO_FREQUENT} endpoint threshold={rule.interval_s * scale:g}"
        if now < self._shut_until.get(slot, 0.0):
            return threshold
        last = self._last.get(slot)
        if last is not None and now - last < rule.interval_s * scale:
            if rule.penalty_s:
                self._shut_until[slot] = now + rule.penalty_s * scale
            return threshold
        self._last[slot] = now
        return None


# ---- input limits --------------------------------------------------------------------------
def _rules(name: str) -> dict[str, Any]:
    return dict(endpoints()[name].get("x-input-validation") or {})


def _invalid(code: int, text: str) -> str:
    return f"error 400/{code}: Invalid args: {text}"


def create_problem(body: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """What breaks ``create_instance``'s input limits in a create (its ``env`` already parsed
    into variables), as Vast's ``msg``; None when nothing does."""
    rules = _rules("create_instance")
    per_var = int(rules["env"]["max_length"])
    total = int(rules["env"]["max_total_length"])
    for name, value in env.items():
        if len(value) > per_var:
            return _invalid(3471, f"env variable {name} is {len(value)} characters; the limit "
                            f"is {per_var} per variable")
    used = sum(len(f"{k}={v}") for k, v in env.items())
    if used > total:
        return _invalid(3472, f"env is {used} characters in all; the limit is {total}")
    args = body.get("args")
    joined = (" ".join(str(a) for a in args) if isinstance(args, list) else str(args or "")) \
        + str(body.get("args_str") or "") + str(body.get("onstart") or "")
    limit = int(rules["args"]["max_length"])
    if len(joined) > limit:
        return _invalid(3473, f"args, args_str and onstart are {len(joined)} characters "
                        f"together; the limit is {limit}")
    for field in ("label", "image"):
        most = int(rules[field]["max_length"])
        if len(str(body.get(field) or "")) > most:
            return _invalid(3474, f"{field} is {len(str(body[field]))} characters; the limit "
                            f"is {most}")
    disk = body.get("disk")
    if isinstance(disk, (int, float)) and disk < float(rules["disk"]["min"]):
        return _invalid(3475, f"disk is {disk:g} GB; the minimum is {rules['disk']['min']:g}")
    price = body.get("price")
    low, high = float(rules["price"]["min"]), float(rules["price"]["max"])
    if isinstance(price, (int, float)) and not low <= price <= high:
        return _invalid(3476, f"price {price:g} is outside {low:g}-{high:g} $/h")
    return None


def label_problem(body: Mapping[str, Any]) -> str | None:
    """``label_instance``'s limit on ``PUT /api/v0/instances/{id}/``'s label."""
    most = int(_rules("label_instance")["label"]["max_length"])
    label = body.get("label")
    if isinstance(label, str) and len(label) > most:
        return _invalid(3477, f"label is {len(label)} characters; the limit is {most}")
    return None


def bid_problem(price: float, num_gpus: int) -> str | None:
    """``change_bid``'s range: 0.001 to 32.0 x the instance's GPUs."""
    rule = _rules("change_bid")["price"]
    low, high = float(rule["minimum"]), float(rule["maximum"]) * max(1, num_gpus)
    if not low <= price <= high:
        return _invalid(3478, f"price {price:g} is outside {low:g}-{high:g} $/h for "
                        f"{num_gpus} GPU(s)")
    return None
