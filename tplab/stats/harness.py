"""Harness statistics: a figure is a median with its spread, an interval and its sample count.

Why: one pass of a timing on a shared machine is one draw from a noisy distribution; a student who
runs the lab twice must not get two different lessons. Benchmark harnesses (pyperf, nccl-tests,
MLPerf) report a figure as a centre with its spread over several independent samples, warn when
the spread is too large, and vary the order of what they measure so that drift hits every case
alike. This module is that arithmetic, shared by the job (pod) and the client, with no torch:

* ``Figure`` / ``figure(samples)``: median, quartiles, relative spread = IQR / median, a 95 %
  interval of the median (seeded bootstrap: deterministic), mean with its 95 % t-interval (t
  from ``student_t`` at the samples' own degrees of freedom), ``n``,
  and ``unstable`` when the spread exceeds ``SPREAD_LIMIT``;
* ``unstable_text(spread)``: the one sentence every view shows for a flagged figure;
* ``round_order(items, r, seed)`` and ``mode_order(r)``: the order of sizes and of single/TP in
  round ``r`` (a Williams Latin square over a seeded permutation: over ``len(items)`` rounds
  every item takes every position, so a cold first slot falls on each);
* ``theil_sen(x, y)``: the robust line (median of pairwise slopes), used for the α-β fit.

Standard library only.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from tplab.stats.fit import percentile
from tplab.stats.student_t import t95

T = TypeVar("T")

#: a figure whose relative spread (IQR / median over its samples) exceeds this is flagged unstable
SPREAD_LIMIT = 0.15
#: bootstrap resamples for the interval of a median (seeded: the same samples give the same CI)
BOOTSTRAP = 400
SEED = 2024

SPREAD_DEFINITION = ("spread = (q3 - q1) / median of the samples (interquartile range relative "
                     f"to the median); a figure whose spread exceeds {SPREAD_LIMIT:.0%} is "
                     "flagged unstable")

def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of no samples")
    return float(statistics.median(xs))


def relative_iqr(xs: Sequence[float]) -> float:
    """(q3 - q1) / median; 0 for fewer than two samples or a zero median."""
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    return (percentile(xs, 75) - percentile(xs, 25)) / m if m > 0 else 0.0


def mean_ci95(xs: Sequence[float]) -> tuple[float, float]:
    """The 95 % t-interval of the mean (the mean twice for one sample)."""
    m = math.fsum(xs) / len(xs)
    if len(xs) < 2:
        return m, m
    half = t95(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return m - half, m + half


def bootstrap_ci(xs: Sequence[float], stat: Callable[[Sequence[float]], float] = median,
                 level: float = 0.95, resamples: int = BOOTSTRAP,
                 seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` (seeded, so it is reproducible)."""
    if len(xs) < 2:
        v = stat(xs)
        return v, v
    rng = random.Random(seed)
    n = len(xs)
    boots = [stat([xs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    tail = (1.0 - level) / 2 * 100
    return percentile(boots, tail), percentile(boots, 100 - tail)


def unstable_text(spread: float) -> str:
    """What a view says beside a flagged figure."""
    return f"unstable: spread {spread:.0%}; machine busy?"


@dataclass(frozen=True, slots=True)
class Figure:
    """A measured figure: the median of ``n`` samples, their quartiles and relative spread, a 95 %
    interval of the median (bootstrap), the mean with its 95 % t-interval, and the flag."""

    median: float
    q1: float
    q3: float
    spread: float
    ci95: tuple[float, float]
    mean: float
    mean_ci95: tuple[float, float]
    n: int
    unstable: bool
    limit: float = SPREAD_LIMIT

    @property
    def note(self) -> str:
        return unstable_text(self.spread) if self.unstable else ""

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "q1": self.q1, "q3": self.q3, "spread": self.spread,
                "ci95": list(self.ci95), "mean": self.mean, "mean_ci95": list(self.mean_ci95),
                "n": self.n, "unstable": self.unstable, "spread_limit": self.limit,
                "note": self.note}


def figure(samples: Sequence[float], limit: float = SPREAD_LIMIT) -> Figure:
    """The ``Figure`` of ``samples`` (ValueError when there are none)."""
    xs = [float(x) for x in samples]
    if not xs:
        raise ValueError("a figure needs at least one sample")
    spread = relative_iqr(xs)
    return Figure(median=median(xs), q1=percentile(xs, 25), q3=percentile(xs, 75),
                  spread=spread, ci95=bootstrap_ci(xs), mean=math.fsum(xs) / len(xs),
                  mean_ci95=mean_ci95(xs), n=len(xs), unstable=spread > limit, limit=limit)


def figure_or_none(samples: Sequence[float]) -> dict[str, Any] | None:
    return figure(samples).to_dict() if samples else None


def round_order(items: Sequence[T], round_index: int, seed: int = SEED) -> list[T]:
    """The order of ``items`` in round ``round_index``: a Williams design (a balanced Latin
    square) over one seeded permutation. Over ``len(items)`` rounds each item is in every
    position once, so no size is always measured first (cold); and the item before each one
    changes from round to round (each pair adjacent once over ``len(items)`` rounds, twice that
    for an odd count, whose second half of rounds reverses the first)."""
    base = list(items)
    random.Random(seed).shuffle(base)
    n = len(base)
    if n < 2:
        return base
    seq = [0]
    lo, hi = 1, n - 1
    while len(seq) < n:  # 0, 1, n-1, 2, n-2, ...
        seq.append(lo)
        lo += 1
        if len(seq) < n:
            seq.append(hi)
            hi -= 1
    r = round_index % (n if n % 2 == 0 else 2 * n)
    row = [base[(j + r) % n] for j in seq]
    return row[::-1] if r >= n else row


def mode_order(round_index: int) -> tuple[str, str]:
    """Single first on even rounds, TP first on odd ones."""
    return ("single", "tp") if round_index % 2 == 0 else ("tp", "single")


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value where the cumulative weight (values sorted) first reaches half the total."""
    pairs = sorted(zip(values, weights))
    total = math.fsum(w for _, w in pairs)
    if not pairs or total <= 0:
        raise ValueError("a weighted median needs a positive total weight")
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= total / 2:
            return v
    return pairs[-1][0]


def theil_sen(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(intercept, slope) of a Theil–Sen line, robust to a few wild points.

    The slope is the median of the pairwise slopes weighted by their x distance (Sievers' weights:
    a pair of close sizes says little about the slope); the intercept is the median of y - slope·x
    weighted by 1/y (relative: the small points, where the intercept is visible, decide it).
    ValueError with fewer than two distinct x."""
    slopes, weights = [], []
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            if x[j] != x[i]:
                slopes.append((y[j] - y[i]) / (x[j] - x[i]))
                weights.append(abs(x[j] - x[i]))
    if not slopes:
        raise ValueError("a line needs at least two distinct x")
    b = weighted_median(slopes, weights)
    resid = [yi - b * xi for xi, yi in zip(x, y)]
    rel = [1.0 / abs(yi) if yi else 1.0 for yi in y]
    return weighted_median(resid, rel), b
