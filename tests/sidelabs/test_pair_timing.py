"""Side-by-side timing that repeats until stable (tplab/sidelabs/pair_timing.py): every figure has
the TP lab's stability block, a noisy one is flagged instead of reported, a ratio is made from
paired rounds and quoted only from stable figures, and two runs agree within their intervals or
are flagged. The measures here are scripted, not timed: every assertion is exact."""

from __future__ import annotations

import itertools

import pytest

from tplab.sidelabs.pair_timing import (
    MIN_JUDGED,
    SideBySide,
    agreement,
    time_side_by_side,
)


def _scripted(values):
    it = itertools.cycle(values)
    return lambda: next(it)


def test_steady_sides_stop_at_the_minimum_and_their_ratio_is_quoted_with_an_interval():
    t = time_side_by_side("pair", {"eager": _scripted([10.0, 10.2, 9.9, 10.1]),
                                   "compiled": _scripted([5.0, 5.1, 4.9, 5.0])},
                          min_rounds=5, max_rounds=40, warmup=1)
    assert t.rounds == 5 and t.stable and t.stopped.startswith("stable within 15%")
    for side in ("eager", "compiled"):
        f = t.figures[side]
        assert {"median", "spread", "n", "unstable", "ci95"} <= set(f) and f["n"] == 5
    r = t.ratio("eager", "compiled")
    lo, hi = r.ci95
    assert r.quoted and lo <= r.value <= hi and 1.9 < r.value < 2.1
    assert r.text() == f"{r.value:.2f}× [{lo:.2f}–{hi:.2f}]"


def test_a_noisy_side_goes_on_to_the_bound_and_is_flagged_never_quoted():
    # rounds that swing 4x: the 787x of a noisy run must not be reported as a finding
    noisy = _scripted([1.0, 2.0, 4.0])
    t = time_side_by_side("pair", {"manual": noisy, "sdpa": _scripted([1.0])},
                          min_rounds=5, max_rounds=12, warmup=0)
    assert t.rounds == 12 and not t.stable and t.stopped.startswith("not stable within 15%")
    assert t.figures["manual"]["unstable"] and t.figures["manual"]["note"].startswith("unstable")
    r = t.ratio("manual", "sdpa")
    assert not r.quoted and r.text().startswith("not quoted: manual unstable")


def test_a_side_with_too_few_rounds_is_not_judged_stable():
    t = SideBySide("x", "µs", {"a": [1.0, 1.0], "b": [2.0, 2.0]}, 2, 0.1, "bound")
    assert MIN_JUDGED > 2 and not t.stable
    assert "too few rounds" in t.ratio("a", "b").why_not


def test_the_ratio_pairs_rounds_so_drift_that_hits_both_sides_cancels():
    # the machine slows down 3x over the run, both sides alike: each side's spread is wide,
    # every round's ratio is exactly 2
    slow = [1.0, 1.5, 2.0, 2.5, 3.0]
    t = SideBySide("drift", "µs", {"a": [2 * x for x in slow], "b": slow}, 5, 1.0, "bound")
    r = t.ratio("a", "b")
    assert r.figure["median"] == 2.0 and r.figure["spread"] == 0.0
    assert not r.quoted and "a unstable" in r.why_not  # the sides still are not stable


def test_two_runs_agree_within_their_intervals_or_are_flagged():
    def run(scale: float) -> SideBySide:
        jitter = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001]
        return SideBySide("r", "µs", {"a": [10.0 * scale * j for j in jitter],
                                      "b": [5.0 * j for j in reversed(jitter)]}, 8, 1.0, "stable")
    same, other = run(1.0).ratio("a", "b"), run(1.002).ratio("a", "b")
    near, far = run(1.07).ratio("a", "b"), run(3.0).ratio("a", "b")
    assert agreement(same, other) == "agree"
    assert agreement(same, near).startswith("flagged: 7% apart, within this machine's run-to-run")
    assert agreement(same, far) == "DISAGREE"
    noisy = SideBySide("n", "µs", {"a": [1.0, 9.0, 1.0, 9.0], "b": [1.0] * 4}, 4, 1.0, "bound")
    assert agreement(same, noisy.ratio("a", "b")) == "flagged: unstable"


def test_a_timing_survives_its_json():
    t = time_side_by_side("pair", {"a": _scripted([3.0, 3.1]), "b": _scripted([1.0])},
                          min_rounds=4, warmup=0, calls_per_round=7)
    back = SideBySide.from_dict(t.to_dict())
    assert back.samples == t.samples and back.figures == t.figures
    assert back.ratio("a", "b").to_dict() == t.ratio("a", "b").to_dict()
    assert back.calls_per_round == 7


def test_deferred_timings_run_together_so_every_ratio_spans_the_whole_timing():
    from tplab.sidelabs.pair_timing import Budget
    order: list[str] = []

    def side(name: str, value: float):
        def m() -> float:
            order.append(name)
            return value
        return m
    budget = Budget(calls=1, rounds=4, max_rounds=10, max_s=5.0, deferred=True)
    first = budget.timed("first", {"a": side("a", 2.0), "b": side("b", 1.0)}, calls=1)
    second = budget.timed("second", {"c": side("c", 3.0), "d": side("d", 1.5)}, calls=1)
    assert first == {} and second == {} and not order  # registered, nothing timed yet
    budget.run_pending()
    assert first["rounds"] == second["rounds"] == 4 and "2 timings together" in first["stopped"]
    timed = order[8:]  # after two warm-up measures of each side
    for r in range(4):  # every round visits every side of both timings
        assert sorted(timed[4 * r:4 * r + 4]) == ["a", "b", "c", "d"]
    assert SideBySide.from_dict(second).ratio("c", "d").value == 2.0
    assert budget.pending == []


def test_a_difference_while_the_machine_itself_moved_is_flagged_not_a_finding():
    from tplab.sidelabs.pair_timing import machine_moved
    a = SideBySide("r", "µs", {"x": [10.0, 10.2, 9.9, 10.1], "y": [5.0, 5.1, 4.9, 5.0]}, 4, 1,
                   "stable").ratio("x", "y")
    b = SideBySide("r", "µs", {"x": [15.0, 15.2, 14.9, 15.1], "y": [5.0, 5.1, 4.9, 5.0]}, 4, 1,
                   "stable").ratio("x", "y")
    assert machine_moved(30.0, 24.0) == pytest.approx(0.25)
    assert machine_moved(30.0, 29.0) is None and machine_moved(None, 29.0) is None
    assert agreement(a, b) == "DISAGREE"
    assert agreement(a, b, machine_moved(30.0, 24.0)) == "flagged: the machine moved 25% between the runs"
    assert agreement(a, a, 0.25) == "agree"
