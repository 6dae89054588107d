"""The lesson notes follow the figures (tplab/lab/lesson_notes.py): each claim is made from the
run's numbers and worded by them, held here over many generated results (a seeded generator:
the same 400 results every run) and on the case the lab got wrong."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tplab.figures.figure import MS, shown
from tplab.lab import lesson_notes as ln
from tplab.viewmodel.timeline_view import timeline_from


def _timeline(rng: random.Random, wait_share: float, calls: int, token_us: float,
              single_us: float) -> dict[str, Any]:
    """A profiled pass with one TP step (2 ranks, ``calls`` collectives of which ``wait_share``
    is waiting) and one single-device step, as results.json's ``timeline`` holds it."""
    comm_share = rng.uniform(0.2, 0.9)
    per_call = token_us * comm_share / calls
    wait = per_call * wait_share
    compute = token_us * (1 - comm_share) * rng.uniform(0.3, 0.7)
    rest = token_us * (1 - comm_share) - compute
    colls, t = [], 0.0
    for i in range(calls):
        t += (compute + rest) / calls
        colls.append({"name": f"L{i} all-reduce", "short": f"{i}a", "op": "all_reduce",
                      "start": [t, t + wait], "end": [t + per_call, t + per_call],
                      "arrive": t + wait})
        t += per_call
    ranks = [{"rank": r, "start": 0.0, "end": token_us, "token_us": token_us,
              "compute_us": compute, "wire_us": (per_call - wait) * calls,
              "wait_us": wait * calls if r == 0 else 0.0, "rest_us": rest, "busy": []}
             for r in (0, 1)]
    median = {"tokens": 1, "token_us": token_us, "compute_us": compute,
              "wire_us": (per_call - wait) * calls, "wait_us": wait * calls / 2,
              "rest_us": rest, "ranks": ranks,
              "allreduce": {"calls_per_token": calls, "us_per_call": per_call,
                            "wait_us_per_call": wait, "wire_us_per_call": per_call - wait,
                            "share_of_token": comm_share}}
    single = {"rank": 0, "start": 0.0, "end": single_us, "token_us": single_us,
              "compute_us": single_us * 0.6, "wire_us": 0.0, "wait_us": 0.0,
              "rest_us": single_us * 0.4, "busy": []}
    return {"comm": "gloo", "trace": {"file": "trace.json"},
            "modes": {"tp": {"tokens": [{"mode": "tp", "pos": 3, "ranks": ranks,
                                         "collectives": colls}], "median": median},
                      "single": {"tokens": [{"mode": "single", "pos": 3, "ranks": [single],
                                             "collectives": []}],
                                 "median": {"tokens": 1, "token_us": single_us,
                                            "compute_us": single_us * 0.6, "wire_us": 0.0,
                                            "wait_us": 0.0, "rest_us": single_us * 0.4}}}}


def _results(rng: random.Random) -> dict[str, Any]:
    single = rng.uniform(0.3, 30.0)
    tp = single * rng.choice([rng.uniform(0.3, 0.99), rng.uniform(1.01, 40.0)])
    calls = 14
    ar_ms = tp * rng.uniform(0.05, 0.95)
    alpha = rng.uniform(1.0, 1500.0)
    d = rng.choice([64, 256, 1024, 4096])
    r: dict[str, Any] = {
        "world_size": 2, "backend": "gloo", "device_type": rng.choice(["cpu", "cuda"]),
        "comm": "gloo", "single_per_token_ms": single, "tp_per_token_ms": tp,
        "speedup": single / tp, "allreduce_ms_per_token": ar_ms,
        "allreduce_calls_per_token": float(calls), "allreduce_bytes_per_call": d * 4.0,
        "comm_compute_ratio": rng.uniform(0.1, 10.0),
        "instrumentation_overhead_ms_per_token": rng.uniform(-1, 1),
        "model": {"n_layer": 6, "vocab_size": 640, "d_model": d, "n_head": 4,
                  "params": rng.choice([392_192, 20_000_000])},
        "sweep": {"points": [], "fit": {"alpha_us": alpha,
                                        "beta_gbps": rng.choice([0.01, 1.0, 50.0])}},
        "env": {"device_names": ["test device"], "device_type": "cpu"},
    }
    if rng.random() < 0.8:
        r["timeline"] = _timeline(rng, rng.choice([0.0, rng.uniform(0, 0.1), rng.uniform(0, 1)]),
                                  calls, tp * 1e3 * rng.uniform(0.8, 1.5), single * 1e3)
    return r


RUNS = [_results(random.Random(seed)) for seed in range(400)]


@pytest.mark.parametrize("chunk", range(4))
def test_every_claim_holds_to_its_numbers_over_generated_runs(chunk):
    for r in RUNS[chunk * 100:(chunk + 1) * 100]:
        found = {c.topic: c for c in ln.claims(r)}
        text = ln.lesson_notes(r)
        speed = found["speed"]
        slower = r["single_per_token_ms"] / r["tp_per_token_ms"] < 1
        assert speed.facts["slower"] is slower
        assert ("(TP is slower)" in speed.text) is slower
        assert f"one device {shown(r['single_per_token_ms'], MS)} ms/token" in speed.text
        assert "in the timed pass" in speed.text
        assert ("unphysical" in found) is (not slower and r["model"]["params"] < 5_000_000)
        t = timeline_from(r.get("timeline"))
        split = t.splits["tp"] if t is not None else None
        exc = found.get("excess")
        if exc is not None:
            assert exc.facts["loop_us"] > ln.EXCESS_FACTOR * (exc.facts["loop_us"]
                                                              - exc.facts["excess_us"])
            if split is None:
                assert exc.facts["cause"] is None and "cannot say" in exc.text
            else:
                share = split.wait_share
                assert exc.facts["wait_share"] == share and f"{share:.0%}" in exc.text
                if share <= ln.WAIT_NEGLIGIBLE:  # the bar: never waiting when waiting is small
                    assert exc.facts["cause"] == "wire"
                if exc.facts["cause"] == "waiting":
                    assert share > ln.WAIT_NEGLIGIBLE
                    assert exc.facts["waiting_us"] >= exc.facts["wire_us"]
                    assert "waits for the slower rank" in exc.text
                else:
                    assert "waits for the slower rank" not in exc.text
                    assert "is the collective itself" in exc.text
        if split is not None and split.wait_share is not None and \
                split.wait_share <= ln.WAIT_NEGLIGIBLE:
            assert "waits for the slower rank" not in text
        lat = found.get("latency")
        if lat is not None:
            assert ("is pure latency" in lat.text) is lat.facts["latency_bound"]
            assert f"α = {r['sweep']['fit']['alpha_us']:.1f} µs" in lat.text
        launches = found.get("launches")
        if launches is not None and launches.facts["shrank"] is not None:
            share = launches.facts["outside_us"] / launches.facts["single_us"]
            assert launches.facts["shrank"] is (share < ln.SHRINK_BAR)
            assert ("does not shrink" in launches.text) is (share >= ln.SHRINK_BAR)
        if "split" in found:
            assert f"splits a TP token of {split.token_us:.0f} µs" in found["split"].text


def test_the_excess_of_a_lab_that_barely_waits_is_called_wire_not_waiting():
    """The lab that said "there each all-reduce also waits for the slower rank" beside "of 1633
    µs per all-reduce, 68 µs (4%) is waiting for the other rank"."""
    rng = random.Random(1)
    r = _results(rng)
    r.update(allreduce_ms_per_token=1633 * 14 / 1e3, single_per_token_ms=1.17,
             tp_per_token_ms=29.1, sweep={"points": [], "fit": {"alpha_us": 229.0,
                                                                 "beta_gbps": 1.05}})
    r["timeline"] = _timeline(rng, 68 / 1633, 14, 29_700.0, 1_929.0)
    notes = ln.lesson_notes(r)
    assert "waits for the slower rank" not in notes
    assert "(4%) is waiting for the other rank" in notes
    excess = next(c for c in ln.claims(r) if c.topic == "excess")
    assert excess.facts["cause"] == "wire"
    assert "more than back to back" in excess.text and "is the collective itself" in excess.text


def test_an_excess_that_is_mostly_waiting_is_called_waiting():
    rng = random.Random(2)
    r = _results(rng)
    r.update(allreduce_ms_per_token=400 * 14 / 1e3,
             sweep={"points": [], "fit": {"alpha_us": 50.0, "beta_gbps": 2.0}})
    r["timeline"] = _timeline(rng, 0.7, 14, 20_000.0, 2_000.0)
    excess = next(c for c in ln.claims(r) if c.topic == "excess")
    assert excess.facts["cause"] == "waiting" and "waits for the slower rank" in excess.text
