"""Student's t distribution: its CDF and quantiles at any degrees of freedom.

Why: the interval of a mean over a few samples (the passes of a lab, the rounds of a sweep) is
``mean ± t(0.975, n - 1) · s / √n``. A table that stops at 30 degrees of freedom and then uses the
normal 1.96 makes every interval from 32 to ~200 samples too narrow (t is 2.04 at 31 and still
1.97 at 200); here t comes from its own distribution at every ``df``.

The CDF is the regularized incomplete beta function, ``P(T <= t) = 1 - I_x(df/2, 1/2) / 2`` with
``x = df / (df + t²)`` for ``t >= 0`` (Abramowitz & Stegun 26.7.1 with 26.5.27), evaluated by its
continued fraction (A&S 26.5.8, the modified Lentz method); the quantile inverts it by bisection
to 1e-12. Standard library only: it travels to the pod with the rest of ``tplab.stats``.
"""

from __future__ import annotations

import functools
import math

_EPS = 1e-15
_TINY = 1e-300


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                    -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if a <= 0 or b <= 0:
        raise ValueError("betainc needs a > 0 and b > 0")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc needs 0 <= x <= 1, got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError("Student's t needs df > 0")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@functools.lru_cache(maxsize=512)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0 < p < 1)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def t95(df: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``df`` degrees of freedom (12.706 at 1,
    2.040 at 31, 1.984 at 100, toward 1.960)."""
    if df < 1:
        raise ValueError("a t interval needs at least two samples")
    return t_quantile(0.975, float(df))
