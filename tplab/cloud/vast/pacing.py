"""tplab paces its own calls to Vast.ai: each endpoint no more often than Vast lets one key call it.

Why the client paces instead of waiting for 429s: Vast answers a call that comes sooner than its
endpoint's minimum interval with 429 and no Retry-After (``service_rules``), and a lab's boot
polls faster than the 2 s Vast allows for showing an instance; every 429 is a round trip lost and,
on a create, a 12 s penalty. So before each call the pacer holds it until that endpoint's
interval has passed since the last call of it (the offer search: at most ``SEARCH_BURST`` in any
minute, half of Vast's 10, as one client was throttled after about 5), reserving the slot under
a lock so the worker threads of one lab share one schedule.

What it is told and what it measures: the intervals are ``service_rules.INTERVALS`` times
``scale`` (1.0, Vast's own; a mock whose limits are scaled tells the client so through
``SCALE_VAR``). A 429 met anyway (another client on the same key, a limit Vast tightened) is
learned from: Vast's detail names the endpoint's threshold ("... endpoint threshold=4.5"),
which becomes the interval (obeyed up to a minute); without one the interval grows by half, to
a ceiling of 12 s. After a 429 the next call of that endpoint waits the interval, or the
endpoint's penalty when Vast gives one.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import deque
from typing import Callable

from tplab.cloud.vast.service_rules import INTERVALS, PENALTIES, SEARCH_PER_MINUTE

#: the variable that tells the client its Vast's intervals are scaled (a mock's ``rate_scale``)
SCALE_VAR = "TPLAB_VAST_RATE_SCALE"
SEARCH = "POST /api/v0/bundles"
#: offer searches let through in any ``SEARCH_WINDOW_S`` (Vast: 10 a minute per IP)
SEARCH_BURST, SEARCH_WINDOW_S = SEARCH_PER_MINUTE, 60.0
#: an interval learned from a 429 that named none: the last one times this, at least MIN_LEARNED_S
#: and at most MAX_LEARNED_S (a burst of 429s must not stretch a destroy without bound: eight
#: in a row then cost about a minute and a half, not minutes); a threshold Vast names is
#: obeyed up to MAX_TOLD_S
GROWTH, MIN_LEARNED_S, MAX_LEARNED_S, MAX_TOLD_S = 1.5, 1.0, 12.0, 60.0
#: what each interval is held longer than the service's: Vast counts from when a call arrives,
#: the pacer from when it leaves, and two calls' trips differ (a few ms here, more on a real
#: network); a create that comes too soon costs a 12 s penalty
MARGIN, MARGIN_S = 0.05, 0.25
_NUMBER = re.compile(r"^\d+$")
_THRESHOLD = re.compile(r"threshold\s*=\s*([0-9]*\.?[0-9]+)")


def endpoint(method: str, path: str) -> str:
    """``"GET", "/api/v0/instances/123/"`` -> ``"GET /api/v0/instances/{id}"``."""
    parts = [("{id}" if _NUMBER.match(p) else p) for p in path.split("?")[0].strip("/").split("/")]
    return f"{method.upper()} /{'/'.join(parts)}"


def scale_from_env() -> float:
    """The scale the environment tells (``SCALE_VAR``), 1.0 when unset or not a number >= 0."""
    try:
        value = float(os.environ.get(SCALE_VAR, "") or 1.0)
    except ValueError:
        return 1.0
    return value if value >= 0 else 1.0


class Pacer:
    """See the module docstring. ``clock`` and ``sleep`` are injectable (tests)."""

    def __init__(self, scale: float = 1.0, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.scale = scale
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}          # endpoint -> earliest time of its next call
        self._learned: dict[str, float] = {}       # endpoint -> interval learned from a 429
        self._searches: deque[float] = deque()     # reserved times of the recent searches
        self.waited_s = 0.0                         # held back so far, in all

    def interval(self, name: str) -> float:
        """The endpoint's interval as told (``INTERVALS`` x ``scale``) or learned, whichever is
        longer, with the margin for the trips (none for an endpoint without an interval)."""
        base = max(INTERVALS.get(name, 0.0) * self.scale, self._learned.get(name, 0.0))
        return base * (1 + MARGIN) + MARGIN_S * min(1.0, self.scale) if base > 0 else 0.0

    def wait(self, name: str) -> float:
        """Hold the caller until ``name`` may be called, and reserve that moment; the wait."""
        with self._lock:
            now = self._clock()
            at = max(now, self._next.get(name, now))
            if name == SEARCH and self.scale > 0:
                window = SEARCH_WINDOW_S * self.scale
                while self._searches and self._searches[0] <= at - window:
                    self._searches.popleft()
                if len(self._searches) >= SEARCH_BURST:
                    at = max(at, self._searches[0] + window)
                    self._searches.popleft()
                self._searches.append(at)
            self._next[name] = at + self.interval(name)
            wait = at - now
            self.waited_s += wait
        if wait > 0:
            self._sleep(wait)
        return wait

    def limited(self, name: str, detail: str) -> None:
        """A 429 for ``name``: learn its interval (Vast's threshold, else a longer one) and
        hold its next call for that long, or its penalty."""
        match = _THRESHOLD.search(detail or "")
        with self._lock:
            old = self.interval(name)
            scale = self.scale or 1.0   # a scaled service's waits are all scaled (tests)
            learned = (min(float(match.group(1)), MAX_TOLD_S * scale) if match
                       else min(MAX_LEARNED_S * scale, max(MIN_LEARNED_S * scale, old * GROWTH)))
            self._learned[name] = max(self._learned.get(name, 0.0), learned)
            hold = max(self.interval(name), PENALTIES.get(name, 0.0) * (self.scale or 1.0))
            if name == SEARCH and not match:   # a window, not told: a window's share
                hold = max(hold, SEARCH_WINDOW_S * (self.scale or 1.0) / SEARCH_BURST)
            self._next[name] = max(self._next.get(name, 0.0), self._clock() + hold)

    def hold_left(self, name: str) -> float:
        """Seconds until ``name`` may be called again (0 when it may now)."""
        with self._lock:
            return max(0.0, self._next.get(name, 0.0) - self._clock())
