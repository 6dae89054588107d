"""Student's t from its own distribution (tplab/stats/student_t.py): the 95 % interval of a mean
over 32 samples uses t(31) = 2.040, not the normal 1.96."""

from __future__ import annotations

import math
import statistics

import pytest

from tplab.stats.harness import mean_ci95
from tplab.stats.student_t import betainc, t95, t_cdf, t_quantile

# published two-sided 95 % quantiles (any statistics table)
TABLE = {1: 12.706, 2: 4.303, 5: 2.571, 10: 2.228, 30: 2.042, 31: 2.040, 40: 2.021, 60: 2.000,
         100: 1.984, 120: 1.980, 1000: 1.962}


@pytest.mark.parametrize("df, want", sorted(TABLE.items()))
def test_t95_matches_the_table_at_every_df(df, want):
    assert t95(df) == pytest.approx(want, abs=6e-4)


def test_a_mean_of_32_samples_gets_t_at_31_degrees_of_freedom():
    xs = [float(i % 7) for i in range(32)]
    lo, hi = mean_ci95(xs)
    half = statistics.stdev(xs) / math.sqrt(32)
    assert (hi - lo) / 2 == pytest.approx(2.0395 * half, rel=1e-4)
    assert (hi - lo) / 2 > 1.96 * half * 1.03  # the normal's interval is 4 % too narrow here


def test_cdf_and_quantile_invert_each_other_and_are_symmetric():
    for df in (1, 3, 7.5, 31, 250):
        for p in (0.6, 0.9, 0.975, 0.999):
            t = t_quantile(p, df)
            assert t_cdf(t, df) == pytest.approx(p, abs=1e-10)
            assert t_quantile(1 - p, df) == pytest.approx(-t)
    assert t_cdf(0.0, 4) == pytest.approx(0.5)
    assert t95(10 ** 7) == pytest.approx(1.95996, abs=1e-4)  # toward the normal


def test_betainc_edges_and_known_values():
    assert betainc(2, 3, 0.0) == 0.0 and betainc(2, 3, 1.0) == 1.0
    assert betainc(1, 1, 0.3) == pytest.approx(0.3)           # uniform
    assert betainc(2, 2, 0.5) == pytest.approx(0.5)           # symmetric
    assert betainc(2, 1, 0.4) == pytest.approx(0.4 ** 2)      # I_x(a, 1) = x^a
    with pytest.raises(ValueError):
        betainc(0, 1, 0.5)
    with pytest.raises(ValueError):
        t95(0)
