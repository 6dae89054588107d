"""The harness statistics (tplab/stats/harness.py, robust_fit.py, stability.py and the sweep records):
pure arithmetic on given samples, no clocks, so every assertion is exact or seeded."""

from __future__ import annotations

import random

import pytest

from tplab.records.dmodel import DModelPoint, crossover_interval, sweep_section
from tplab.stats.fit import ring_allreduce_s
from tplab.stats.robust_fit import robust_alpha_beta
from tplab.stats.stability import per_pass_figures, stability_section
from tplab.stats.harness import (
    SPREAD_LIMIT,
    bootstrap_ci,
    figure,
    mean_ci95,
    mode_order,
    relative_iqr,
    round_order,
    theil_sen,
    unstable_text,
    weighted_median,
)


def test_a_figure_is_median_quartiles_spread_interval_and_count():
    f = figure([10.0, 11.0, 12.0, 13.0, 14.0])
    assert (f.median, f.q1, f.q3, f.n) == (12.0, 11.0, 13.0, 5)
    assert f.spread == pytest.approx(2.0 / 12.0)
    assert f.unstable is (SPREAD_LIMIT < 2.0 / 12.0)
    assert f.ci95[0] <= f.median <= f.ci95[1]
    assert f.ci95[0] >= 10.0 and f.ci95[1] <= 14.0
    assert f.mean == 12.0 and f.mean_ci95[0] < 12.0 < f.mean_ci95[1]
    d = f.to_dict()
    assert d["n"] == 5 and d["ci95"] == list(f.ci95) and d["spread_limit"] == SPREAD_LIMIT
    # the same samples give the same interval (seeded bootstrap), whatever their order
    assert figure([14.0, 10.0, 13.0, 11.0, 12.0]).ci95 == f.ci95


def test_a_wide_spread_is_flagged_with_the_sentence_every_view_shows():
    steady = figure([20.0, 20.2, 19.9, 20.1, 20.0])
    busy = figure([16.0, 19.0, 30.0, 17.0, 25.0])
    assert not steady.unstable and steady.note == ""
    assert busy.unstable and busy.spread > SPREAD_LIMIT
    assert busy.note == unstable_text(busy.spread)
    assert unstable_text(0.37) == "unstable: spread 37%; machine busy?"
    # the limit is the caller's to state
    assert figure([16.0, 19.0, 30.0, 17.0, 25.0], limit=10.0).unstable is False


def test_spread_and_intervals_of_degenerate_samples():
    assert relative_iqr([5.0]) == 0.0 and relative_iqr([0.0, 0.0]) == 0.0
    assert mean_ci95([3.0]) == (3.0, 3.0)
    assert bootstrap_ci([4.0]) == (4.0, 4.0)
    lo, hi = mean_ci95([1.0, 2.0, 3.0])  # mean 2, sd 1, t(2) = 4.303
    assert (lo, hi) == pytest.approx((2 - 4.303 / 3 ** 0.5, 2 + 4.303 / 3 ** 0.5), abs=1e-3)
    with pytest.raises(ValueError):
        figure([])


def test_round_order_is_a_permutation_that_puts_every_size_in_every_place():
    sizes = [64, 128, 256, 512]
    orders = [round_order(sizes, r) for r in range(len(sizes))]
    assert all(sorted(o) == sizes for o in orders)
    for place in range(len(sizes)):
        assert sorted(o[place] for o in orders) == sizes
    # the same on every rank (seeded), and no round repeats the one before
    assert [round_order(sizes, r) for r in range(4)] == orders
    assert all(a != b for a, b in zip(orders, orders[1:]))
    assert round_order([], 3) == [] and round_order([7], 5) == [7]
    three = [round_order([64, 256, 512], r) for r in range(3)]
    assert sorted(o[0] for o in three) == [64, 256, 512]


def test_single_and_tp_take_turns_going_first():
    assert [mode_order(r) for r in range(4)] == [("single", "tp"), ("tp", "single")] * 2


def test_theil_sen_ignores_a_wild_point_that_pulls_least_squares_away():
    x = [float(v) for v in range(1, 11)]
    y = [2.0 + 0.5 * v for v in x]
    y[3] = 40.0  # one descheduled measurement
    a, b = theil_sen(x, y)
    assert a == pytest.approx(2.0) and b == pytest.approx(0.5)
    assert weighted_median([1.0, 2.0, 3.0], [1.0, 1.0, 5.0]) == 3.0
    with pytest.raises(ValueError):
        theil_sen([1.0, 1.0], [2.0, 3.0])


SIZES = [256 * 2 ** i for i in range(15)]


def test_robust_fit_recovers_alpha_beta_with_intervals_that_contain_them():
    rng = random.Random(5)
    alpha, beta = 300e-6, 1.5e9
    rounds = [[ring_allreduce_s(n, 2, alpha, beta) * (1 + rng.uniform(-0.03, 0.03))
               for _ in range(5)] for n in SIZES]
    rounds[2][0] *= 8  # one round hit by the scheduler
    fit = robust_alpha_beta(SIZES, rounds, 2)
    assert fit.alpha_s == pytest.approx(alpha, rel=0.08)
    assert fit.beta_bps == pytest.approx(beta, rel=0.08)
    assert fit.alpha_ci95_s[0] <= fit.alpha_s <= fit.alpha_ci95_s[1]
    assert fit.beta_ci95_bps[0] <= fit.beta_bps <= fit.beta_ci95_bps[1]
    d = fit.to_dict()
    assert d["method"] == "Theil-Sen" and len(d["alpha_ci95_us"]) == 2
    # a caller that reads only the line (a calibration redone per resample of the crossover's
    # bootstrap) gets the same line without the intervals' bootstrap
    line = robust_alpha_beta(SIZES, rounds, 2, resamples=0)
    assert (line.alpha_s, line.beta_bps) == (fit.alpha_s, fit.beta_bps)
    assert line.alpha_ci95_s == (fit.alpha_s, fit.alpha_s)


def test_robust_fit_leaves_out_unstable_sizes_and_says_which():
    rounds = [[ring_allreduce_s(n, 2, 300e-6, 1.5e9)] * 5 for n in SIZES]
    rounds[4] = [rounds[4][0] * k for k in (1.0, 3.0, 0.5, 2.0, 1.0)]
    fit = robust_alpha_beta(SIZES, rounds, 2)
    assert fit.left_out_bytes == (SIZES[4],) and fit.points == len(SIZES) - 1
    with pytest.raises(ValueError, match="does not grow"):
        robust_alpha_beta([256, 512, 1024], [[3e-3], [2e-3], [1e-3]], 2)


def _point(d: int, single: list[float], tp: list[float]) -> DModelPoint:
    s = sorted(single)
    t = sorted(tp)
    return DModelPoint(d_model=d, n_head=d // 16, params=d * d, tokens=32, single_ms=s[len(s) // 2],
                       tp_ms=t[len(t) // 2], allreduce_ms=1.0, allreduce_calls=14.0,
                       tp_instrumented_ms=t[len(t) // 2], single_p50_ms=s[len(s) // 2],
                       tp_p50_ms=t[len(t) // 2], outputs_match=True, seconds=1.0,
                       rounds=len(single), tokens_per_round=8, single_rounds_ms=tuple(single),
                       tp_rounds_ms=tuple(tp), allreduce_rounds_ms=(1.0,) * len(single))


def test_sweep_points_carry_figures_and_flag_their_unstable_rounds():
    steady = _point(64, [1.0, 1.01, 0.99, 1.0, 1.0], [10.0, 10.1, 9.9, 10.0, 10.05]).to_dict()
    busy = _point(256, [4.0, 4.0, 4.0, 4.0, 4.0], [9.0, 16.0, 11.0, 20.0, 10.0]).to_dict()
    assert steady["figures"]["tp_ms"]["n"] == 5 and steady["unstable"] is False
    assert busy["unstable"] is True and busy["unstable_note"].startswith("tp unstable: spread")
    assert busy["tp_rounds_ms"] == [9.0, 16.0, 11.0, 20.0, 10.0]


def test_a_crossover_far_from_the_noise_has_an_interval_and_one_inside_it_is_not_resolved():
    clear = [_point(64, [1.0] * 4, [4.0, 4.1, 3.9, 4.0]).to_dict(),
             _point(256, [2.0] * 4, [4.0, 4.1, 3.9, 4.0]).to_dict(),
             _point(1024, [8.0] * 4, [4.0, 4.1, 3.9, 4.0]).to_dict()]
    ci = crossover_interval(clear)
    assert ci["resolved"] is True and ci["ci95"][0] <= 512 <= ci["ci95"][1]
    assert "95% interval" in ci["note"]
    # TP within the noise of single at both points: some resamples cross, some do not
    noisy = [_point(64, [1.0] * 4, [0.8, 1.3, 0.9, 1.2]).to_dict(),
             _point(128, [1.0] * 4, [0.8, 1.3, 0.9, 1.2]).to_dict()]
    ni = crossover_interval(noisy)
    assert ni["resolved"] is False and ni["note"].startswith("not resolved at this noise")
    one_round = [_point(64, [1.0], [2.0]).to_dict(), _point(128, [1.0], [0.5]).to_dict()]
    assert crossover_interval(one_round)["resolved"] is None
    sec = sweep_section([_point(64, [1.0] * 4, [4.0] * 4)], [], "how")
    assert "measured_crossover_interval" in sec


def test_per_pass_figures_and_the_stability_block():
    passes = [[1.0, 1.1, 0.9], [1.0, 1.0, 1.0], [1.05, 1.0, 0.95]]
    f = per_pass_figures(passes)
    assert f["n"] == 3 and f["p50"]["median"] == 1.0 and f["mean"]["n"] == 3
    assert per_pass_figures([]) == {"n": 0}
    busy_tp = per_pass_figures([[10.0] * 3, [20.0] * 3, [12.0] * 3, [30.0] * 3])
    results = {"comm": "gloo", "single": {"passes": f}, "tp": {"passes": busy_tp},
               "transports": {"gloo": {"tp": {"passes": busy_tp}, "sweep": {"points": [
                   {"bytes": 256, "figure": figure([1.0, 3.0, 1.0, 2.0]).to_dict()}]}}},
               "d_model_sweep": [_point(64, [1.0] * 4, [4.0, 9.0, 4.0, 7.0]).to_dict()]}
    st = stability_section(results)
    names = [e["figure"] for e in st["unstable"]]
    assert names == ["tp_per_token_ms (gloo)", "d_model_sweep[64].tp_ms", "sweep[gloo][256 B].ms"]
    assert st["clean"] is False and all("machine busy?" in e["note"] for e in st["unstable"])
    quiet = {"single": {"passes": f}, "tp": {"passes": f}}
    assert stability_section(quiet) == {**stability_section(quiet), "unstable": [],
                                        "clean": True}
    # the machine's own reference loop: a run whose machine slowed by half for a stretch says so
    # first-hand, beside the figures it made unstable; a steady machine adds no flag
    slow = figure([1.0, 1.0, 1.5, 1.5, 1.0, 1.5]).to_dict()  # IQR 0.5 over a median of 1.25
    st = stability_section({**quiet, "machine": {"ms": slow}})
    assert [e["figure"] for e in st["unstable"]] == ["machine speed (reference loop)"]
    assert "machine's own speed varied 40%" in st["unstable"][0]["note"]
    assert st["machine_spread"] == slow["spread"] and st["clean"] is False
    steady = {**quiet, "machine": {"ms": figure([1.0, 1.01, 0.99, 1.0]).to_dict()}}
    assert stability_section(steady)["clean"] is True


def test_the_sweep_table_shows_spread_rounds_flags_and_the_crossover_interval():
    from tplab.scaling.dmodel_table import dmodel_report

    rows = [_point(64, [1.0] * 4, [4.0, 9.0, 4.0, 7.0]).to_dict(),
            _point(256, [2.0] * 4, [4.0, 4.1, 3.9, 4.0]).to_dict(),
            _point(1024, [8.0] * 4, [4.0, 4.1, 3.9, 4.0]).to_dict()]
    sec = sweep_section([], [], "how")
    sec.update(d_model_sweep=rows, measured_crossover_interval=crossover_interval(rows))
    text = dmodel_report(sec, stored=None)
    assert "median of n rounds" in text
    assert "d_model 64: tp unstable: spread" in text and "machine busy?" in text
    line64 = next(ln for ln in text.splitlines() if ln.strip().startswith("64 "))
    assert "!" in line64 and line64.split()[-2] == "4"  # flagged spread; 4 rounds
    assert "crossover, measured:" in text and ("95% interval" in text or "not resolved" in text)

