"""The α-β fit of the all-reduce sweep, robust and with its uncertainty.

Why: a weighted least-squares line goes wherever one descheduled round pulls it, and says nothing
about how sure it is. Here the line ``t(n) = a + b·n`` is a Theil–Sen line (``harness.theil_sen``)
through each size's median, and its 95 % intervals come from a seeded bootstrap over the rounds:
each resample takes, for every size, one of its measured rounds at random and refits. Sizes whose
rounds are flagged unstable (``harness.SPREAD_LIMIT``) are left out of the line when at least two
steady sizes remain, and the fit says which.

Standard library only (the job and the client both use it).
"""

from __future__ import annotations

import random
from typing import Sequence

from tplab.stats.fit import AlphaBeta, percentile
from tplab.stats.harness import SEED, median, relative_iqr, theil_sen, SPREAD_LIMIT

RESAMPLES = 200


def _alpha_beta(a: float, b: float, p: int) -> tuple[float, float]:
    if b <= 0:
        raise ValueError("all-reduce time does not grow with message size; cannot fit beta")
    return max(a, 0.0) / (2 * (p - 1)), 2 * (p - 1) / (p * b)


def robust_alpha_beta(sizes: Sequence[float], rounds: Sequence[Sequence[float]],
                      world_size: int, limit: float = SPREAD_LIMIT,
                      resamples: int = RESAMPLES) -> AlphaBeta:
    """Fit α and β (seconds per step, bytes/s) to ``rounds[i]``, the per-round times in seconds of
    ``sizes[i]``; ValueError when the data cannot determine a positive β. ``resamples`` 0: the
    line alone, its intervals collapsed to it (for a caller that reads only the line, such as a
    calibration redone for each resample of an outer bootstrap)."""
    if world_size < 2:
        raise ValueError("an all-reduce fit needs at least 2 ranks")
    if len(sizes) != len(rounds):
        raise ValueError("sizes and rounds differ in length")
    data = [(float(n), [float(t) for t in r if t > 0]) for n, r in zip(sizes, rounds)]
    data = [(n, r) for n, r in data if r]
    if len({n for n, _ in data}) < 2:
        raise ValueError("an alpha-beta fit needs at least two message sizes with positive times")
    steady = [(n, r) for n, r in data if relative_iqr(r) <= limit]
    left_out = [int(n) for n, r in data if relative_iqr(r) > limit]
    if len({n for n, _ in steady}) < 2:
        steady, left_out = data, []
    xs = [n for n, _ in steady]
    a, b = theil_sen(xs, [median(r) for _, r in steady])
    alpha, beta = _alpha_beta(a, b, world_size)
    rng = random.Random(SEED)
    alphas, betas = [], []
    for _ in range(resamples):
        ra, rb = theil_sen(xs, [r[rng.randrange(len(r))] for _, r in steady])
        if rb > 0:
            al, be = _alpha_beta(ra, rb, world_size)
            alphas.append(al)
            betas.append(be)
    worst = max(abs((a + b * n) - median(r)) / median(r) for n, r in data)
    ci_a = (percentile(alphas, 2.5), percentile(alphas, 97.5)) if alphas else (alpha, alpha)
    ci_b = (percentile(betas, 2.5), percentile(betas, 97.5)) if betas else (beta, beta)
    return AlphaBeta(alpha_s=alpha, beta_bps=beta, world_size=world_size, points=len(steady),
                     max_rel_residual=worst, alpha_ci95_s=ci_a, beta_ci95_bps=ci_b,
                     method="Theil-Sen", left_out_bytes=tuple(left_out))
