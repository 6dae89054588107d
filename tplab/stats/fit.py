"""Small numeric helpers shared by the job (pod) and the scaling model (client): summary
statistics and the alpha-beta fit of all-reduce timings.

Standard library only and no torch, so ``tplab.scaling.latency`` can import it without importing torch,
and it travels to the pod with the rest of ``tplab/job``.

The alpha-beta model of a ring all-reduce over ``p`` ranks of an ``n``-byte message is::

    t(n) = 2(p-1)·α + 2(p-1)/p · n/β

a straight line ``t = a + b·n`` in the message size, so ``α = a / (2(p-1))`` and
``β = 2(p-1) / (p·b)``. Sweep sizes span four orders of magnitude, so the fit minimises the
*relative* residuals (weights 1/t²): an ordinary least-squares line would be decided by the
megabyte points alone and leave α to their noise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of a list of per-token times in milliseconds."""

    n: int
    mean: float
    p50: float
    p99: float
    min: float
    max: float
    std: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between order statistics."""
    if not values:
        raise ValueError("percentile of an empty list")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(values: Iterable[float]) -> Stats:
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no timings to summarize")
    mean = math.fsum(xs) / len(xs)
    var = math.fsum((x - mean) ** 2 for x in xs) / len(xs)
    return Stats(n=len(xs), mean=mean, p50=percentile(xs, 50), p99=percentile(xs, 99),
                 min=min(xs), max=max(xs), std=math.sqrt(var))


@dataclass(frozen=True, slots=True)
class AlphaBeta:
    """Fitted ring all-reduce model: α in seconds per step, β in bytes per second."""

    alpha_s: float
    beta_bps: float
    world_size: int
    points: int
    max_rel_residual: float
    # robust fits (``robust_fit.robust_alpha_beta``): 95 % intervals, the method, sizes left out
    alpha_ci95_s: tuple[float, float] | None = None
    beta_ci95_bps: tuple[float, float] | None = None
    method: str = "weighted least squares"
    left_out_bytes: tuple[int, ...] = ()

    def predict_s(self, nbytes: float) -> float:
        """Predicted time in seconds of one all-reduce of ``nbytes`` bytes."""
        return ring_allreduce_s(nbytes, self.world_size, self.alpha_s, self.beta_bps)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "model": "t(n) = 2(p-1)*alpha + 2(p-1)/p * n/beta (ring all-reduce)",
            "alpha_us": self.alpha_s * 1e6,
            "beta_gbps": self.beta_bps / 1e9,
            "world_size": self.world_size,
            "points": self.points,
            "max_rel_residual": self.max_rel_residual,
            "method": self.method,
            "weighting": ("relative residuals (weights 1/t^2)" if self.method.startswith("weighted")
                          else "median of pairwise slopes weighted by their size gap; intercept "
                               "the median of the residuals weighted by 1/t"),
        }
        if self.alpha_ci95_s is not None and self.beta_ci95_bps is not None:
            out["alpha_ci95_us"] = [v * 1e6 for v in self.alpha_ci95_s]
            out["beta_ci95_gbps"] = [v / 1e9 for v in self.beta_ci95_bps]
            out["interval"] = "95% bootstrap over each size's rounds"
            out["left_out_bytes"] = list(self.left_out_bytes)
        return out


def ring_allreduce_s(nbytes: float, world_size: int, alpha_s: float, beta_bps: float) -> float:
    """Seconds for one ring all-reduce of ``nbytes`` over ``world_size`` ranks (0 for one rank)."""
    p = world_size
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * alpha_s + 2 * (p - 1) / p * nbytes / beta_bps


def bus_bandwidth(nbytes: float, seconds: float, world_size: int) -> tuple[float, float]:
    """(algorithm bandwidth, bus bandwidth) in bytes/s, as nccl-tests defines them for all-reduce."""
    algbw = nbytes / seconds
    p = world_size
    return algbw, algbw * (2 * (p - 1) / p if p > 1 else 1.0)


def fit_alpha_beta(sizes_bytes: Sequence[float], times_s: Sequence[float],
                   world_size: int) -> AlphaBeta:
    """Fit α and β to measured all-reduce times (seconds) by weighted least squares.

    Raises ValueError when the data cannot determine a positive α and β (fewer than two sizes,
    or times that do not grow with the message size).
    """
    if world_size < 2:
        raise ValueError("an all-reduce fit needs at least 2 ranks")
    if len(sizes_bytes) != len(times_s):
        raise ValueError("sizes and times differ in length")
    pts = [(float(n), float(t)) for n, t in zip(sizes_bytes, times_s) if t > 0]
    if len({n for n, _ in pts}) < 2:
        raise ValueError("an alpha-beta fit needs at least two message sizes with positive times")
    # weighted least squares for t = a + b*n with w = 1/t^2
    sw = swx = swy = swxx = swxy = 0.0
    for n, t in pts:
        w = 1.0 / (t * t)
        sw += w
        swx += w * n
        swy += w * t
        swxx += w * n * n
        swxy += w * n * t
    den = sw * swxx - swx * swx
    if den <= 0:
        raise ValueError("degenerate message sizes for an alpha-beta fit")
    b = (sw * swxy - swx * swy) / den
    a = (swy - b * swx) / sw
    if b <= 0:
        raise ValueError("all-reduce time does not grow with message size; cannot fit beta")
    # a negative intercept means the latency is below what the data resolves: call it zero
    a = max(a, 0.0)
    p = world_size
    alpha = a / (2 * (p - 1))
    beta = 2 * (p - 1) / (p * b)
    worst = max(abs((a + b * n) - t) / t for n, t in pts)
    return AlphaBeta(alpha_s=alpha, beta_bps=beta, world_size=p, points=len(pts),
                     max_rel_residual=worst)
