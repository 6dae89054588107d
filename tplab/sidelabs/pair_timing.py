"""Side-by-side timing of two callables on the hot path.

Lab 03's pitfalls: the first call compiles, shapes that change recompile, and a busy machine makes
two separate measurements incomparable. So both callables are warmed up first, then timed in
alternating rounds (eager, compiled, eager, compiled, ...) and each side reports its median round.
The ratio of the two medians is the figure worth quoting; the absolute numbers depend on the load.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class PairTiming:
    """Median microseconds per call of two callables measured in alternating rounds."""

    name: str
    eager_us: float
    compiled_us: float
    calls_per_round: int
    rounds: int

    @property
    def speedup(self) -> float:
        """How many times faster the compiled side is (eager / compiled); < 1 means slower."""
        return self.eager_us / self.compiled_us if self.compiled_us > 0 else float("inf")


def time_pair(name: str, eager: Callable[[], object], compiled: Callable[[], object], *,
              calls: int = 200, rounds: int = 5, warmup: int = 10) -> PairTiming:
    """Warm both up, then time ``rounds`` alternating rounds of ``calls`` calls each."""
    for _ in range(warmup):
        eager()
        compiled()
    per_call: dict[str, list[float]] = {"eager": [], "compiled": []}
    for _ in range(rounds):
        for side, fn in (("eager", eager), ("compiled", compiled)):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            per_call[side].append((time.perf_counter() - t0) / calls * 1e6)
    return PairTiming(name, statistics.median(per_call["eager"]),
                      statistics.median(per_call["compiled"]), calls, rounds)
