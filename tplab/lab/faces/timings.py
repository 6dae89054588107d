"""Per-token timings of one decode mode, in fixed memory: recent samples and streaming quantiles.

Why apart from the state fold: a lab emits a token event per decoded token per mode (thousands a
second on a GPU), and the p50 / p99 the faces show must cover the whole run without keeping the
samples. ``LogHistogram`` keeps counts in log-spaced bins (~1 % relative error); ``ModeTimings``
adds a bounded deque of recent values for the live plot. Standard library only.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field


class LogHistogram:
    """Streaming quantiles in fixed memory: counts in log-spaced bins.

    Bin edges grow by ``ratio`` from ``lo``; a quantile is reported as the geometric centre of
    its bin, so its relative error is below ``(ratio - 1) / 2``. Values at or below ``lo`` fall
    in the first bin, values above the last edge in the last one.
    """

    __slots__ = ("lo", "ratio", "_log_lo", "_log_ratio", "counts", "n", "min", "max")

    def __init__(self, lo: float = 1e-3, hi: float = 1e6, ratio: float = 1.02) -> None:
        self.lo = lo
        self.ratio = ratio
        self._log_lo = math.log(lo)
        self._log_ratio = math.log(ratio)
        nbins = int(math.ceil((math.log(hi) - self._log_lo) / self._log_ratio)) + 1
        self.counts = [0] * nbins
        self.n = 0
        self.min = math.inf
        self.max = -math.inf

    def add(self, x: float) -> None:
        if x <= self.lo:
            i = 0
        else:
            i = int((math.log(x) - self._log_lo) / self._log_ratio)
            if i >= len(self.counts):
                i = len(self.counts) - 1
        self.counts[i] += 1
        self.n += 1
        if x < self.min:
            self.min = x
        if x > self.max:
            self.max = x

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0 <= q <= 1), or None before the first sample."""
        if self.n == 0:
            return None
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                centre = math.exp(self._log_lo + (i + 0.5) * self._log_ratio)
                return min(max(centre, self.min), self.max)
        return self.max  # pragma: no cover - counts always sum to n


@dataclass
class ModeTimings:
    """Per-token timings of one decode mode (``single`` or ``tp``)."""

    recent_len: int = 600
    recent: deque[float] = field(init=False)
    hist: LogHistogram = field(default_factory=LogHistogram)
    count: int = 0
    sum_ms: float = 0.0
    ar_sum_ms: float = 0.0
    prompt: int | None = None
    pos: int | None = None
    prompts_done: int = 0

    def __post_init__(self) -> None:
        self.recent = deque(maxlen=self.recent_len)

    def add(self, ms: float, ar_ms: float) -> None:
        self.recent.append(ms)
        self.hist.add(ms)
        self.count += 1
        self.sum_ms += ms
        self.ar_sum_ms += ar_ms

    @property
    def first_recent_index(self) -> int:
        """The run-wide index of ``recent[0]`` (x axis of a live plot)."""
        return self.count - len(self.recent)

    @property
    def mean_ms(self) -> float | None:
        return self.sum_ms / self.count if self.count else None

    @property
    def ar_ms_per_token(self) -> float | None:
        return self.ar_sum_ms / self.count if self.count else None

    @property
    def comm_compute_ratio(self) -> float | None:
        compute = self.sum_ms - self.ar_sum_ms
        return self.ar_sum_ms / compute if self.count and compute > 0 else None

    def p(self, q: float) -> float | None:
        return self.hist.quantile(q)
