"""Calibrating the scaling model from a d_model sweep (tplab/scaling/calibration.py): synthetic points made
from known alpha, beta, launch overheads and bandwidths are recovered, the crossover is found within
one grid step, and a point the model cannot explain is reported with the term that is off."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from tplab.scaling import calibration, fit_points, latency
from tplab.records.dmodel import measured_crossover
from tplab.scaling.latency import Number

GRID = [64 * 2 ** i for i in range(8)]  # 64 .. 8192
MODEL = {"n_layer": 6, "vocab_size": 640, "d_model": 64, "n_head": 4, "d_ff": 256}
TRUE = {"alpha_us": 50.0, "beta_gbps": 1.5, "launch_us": 20.0, "tp_launch_us": 30.0,
        "mem_bw_gbps": 9.0, "tp_mem_bw_gbps": 6.0}


def _true_profile() -> latency.HardwareProfile:
    base = latency.load_profile("cpu-shm")
    return dataclasses.replace(base, **{k: Number(v, "measured") for k, v in TRUE.items()},
                               peak_tflops=Number(1.0, "measured"),
                               tp_peak_tflops=Number(1.0, "measured"))


def _results(noise: float = 0.0, grid=GRID) -> dict:
    rng = random.Random(3)
    shape = latency.shape_from_results({"model": MODEL})
    true = _true_profile()
    pts = []
    for d in grid:
        pr = latency.predict(true, d, 2, shape)
        jitter = lambda: 1 + rng.uniform(-noise, noise)  # noqa: E731
        pts.append({"d_model": d, "single_ms": pr.single_ms * jitter(),
                    "tp_ms": pr.tp_ms * jitter(), "allreduce_ms": pr.comm_ms * jitter(),
                    "outputs_match": True, "tokens": 16, "params": 0})
    return {"schema": 1, "world_size": 2, "backend": "gloo", "comm": "shm", "device_type": "cpu",
            "model": MODEL, "env": {"device_names": ["cpu: test"]}, "d_model_sweep": pts}


@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_sweep_calibration_recovers_the_terms_that_made_the_points(noise):
    results = _results(noise)
    # start from a profile whose every term is wrong by a lot
    start = dataclasses.replace(
        latency.load_profile("cpu-shm"), alpha_us=Number(500.0, "assumed"),
        beta_gbps=Number(0.1, "assumed"), launch_us=Number(1.0, "assumed"),
        mem_bw_gbps=Number(100.0, "assumed"), peak_tflops=Number(1.0, "assumed"))
    cal = calibration.calibrate(start, results)
    got = {k: n.value for k, n in cal.numbers().items()}
    for key, want in TRUE.items():
        assert got[key] == pytest.approx(want, rel=0.05), key
        assert cal.numbers()[key].source == "measured"
    assert "d_model sweep" in cal.calibrated_from
    # the crossover within one grid step (a factor 2) of the true one, predicted and measured
    true_cross = latency.crossover_d_model(_true_profile(), 2, latency.shape_from_results(results))
    assert true_cross is not None and GRID[0] < true_cross < GRID[-1]
    cross = calibration.crossovers(cal, results, 2, latency.shape_from_results(results))
    predicted = latency.crossover_d_model(cal, 2, latency.shape_from_results(results))
    assert abs(math.log2(predicted / true_cross)) <= 1
    assert abs(math.log2(cross["measured"] / true_cross)) <= 1
    assert cross["measured"] == measured_crossover(results["d_model_sweep"])[0]
    block = calibration.annotate_results(results, cal)
    assert block["within_tolerance"] is True and block["max_abs_error"] < 0.05 + 2 * noise
    assert block["points_from"] == "d_model_sweep" and block["off"] == []
    for p in results["d_model_sweep"]:
        assert p["predicted_tp_ms"] == pytest.approx(p["tp_ms"], rel=0.05)
        assert p["predicted_single_ms"] == pytest.approx(p["single_ms"], rel=0.05)


def test_a_point_the_model_cannot_explain_is_reported_with_the_term_that_is_off():
    results = _results(grid=[64, 128, 256])
    results["d_model_sweep"][1]["tp_ms"] *= 3  # TP at 128 three times slower than any model says
    cal = calibration.calibrate(latency.load_profile("cpu-shm"), results)
    block = calibration.check(cal, results)
    assert block["within_tolerance"] is False
    tp_off = [s for s in block["off"] if s.startswith("TP at d_model 128")]
    assert tp_off and "the comm term predicts" in tp_off[0] and "compute + launch" in tp_off[0]


def test_one_point_keeps_the_slopes_at_their_priors_and_says_so():
    results = _results(grid=[256])
    cal = calibration.calibrate(latency.load_profile("cpu-shm"), results)
    assert "kept at its prior (one point)" in cal.launch_us.note
    block = calibration.check(cal, results)
    # one point, two terms each: the fit passes through it
    assert block["points"][0]["single_error"] == pytest.approx(0.0, abs=1e-6)
    assert block["points"][0]["tp_error"] == pytest.approx(0.0, abs=0.05)


def test_without_a_sweep_the_single_point_calibration_is_used_and_checked():
    results = _results(grid=[64])
    p = results.pop("d_model_sweep")[0]
    results.update(single_per_token_ms=p["single_ms"], tp_per_token_ms=p["tp_ms"],
                   allreduce_ms_per_token=p["allreduce_ms"],
                   sweep={"points": [{"bytes": 256, "ms": 0.02}, {"bytes": 1 << 20, "ms": 0.6}]})
    cal = calibration.calibrate(latency.load_profile("cpu-shm"), results)
    assert "d_model sweep" not in cal.calibrated_from
    block = calibration.check(cal, results)
    assert block["points_from"].startswith("the run's one measured point")
    assert calibration.crossovers(cal, results, 2)["measured"] is None


def test_a_point_flagged_unstable_is_left_out_of_the_fit_and_the_calibration_says_so():
    results = _results()
    busy = results["d_model_sweep"][0]
    busy["tp_ms"] *= 1.6  # the first size measured while the machine was busy
    busy["unstable"], busy["unstable_note"] = True, "tp unstable: spread 37%; machine busy?"
    cal = calibration.calibrate(latency.load_profile("cpu-shm"), results)
    assert "left out as unstable: d_model 64 (tp unstable: spread 37%" in cal.calibrated_from
    got = {k: n.value for k, n in cal.numbers().items()}
    for key, want in TRUE.items():  # the steady points still give the true terms
        assert got[key] == pytest.approx(want, rel=0.05), key
    block = calibration.check(cal, results)
    assert block["points"][0]["unstable"] is True
    assert any(s.startswith("TP at d_model 64") and "machine busy?" in s for s in block["off"])


def test_a_fit_through_unstable_points_says_it_does():
    results = _results(grid=[64, 128])
    for p in results["d_model_sweep"]:
        p["unstable"], p["unstable_note"] = True, "single unstable: spread 40%; machine busy?"
    cal = calibration.calibrate(latency.load_profile("cpu-shm"), results)
    assert "fitted through unstable points" in cal.calibrated_from


def _profiled(results: dict, instrumented_off: float = 1.0) -> dict:
    """Each point with its profiled split (the true comm share of its TP time, split into wire
    and wait; compute and rest the remainder), and its instrumented collective time, taken in
    another pass, ``instrumented_off`` times the truth at the smallest size (a transient)."""
    true, shape = _true_profile(), latency.shape_from_results({"model": MODEL})
    for i, p in enumerate(results["d_model_sweep"]):
        comm = latency.predict(true, p["d_model"], 2, shape).comm_ms * 1e3
        rest = p["tp_ms"] * 1e3 - comm
        p["profiled"] = {"tokens": 4, "token_us": p["tp_ms"] * 1e3, "compute_us": 0.8 * rest,
                         "wire_us": 0.7 * comm, "wait_us": 0.3 * comm, "rest_us": 0.2 * rest}
        if i == 0:
            p["allreduce_ms"] *= instrumented_off
    return results


def test_tp_terms_fitted_to_the_profiled_split_are_not_thrown_by_a_second_passes_transient():
    """The instrumented pass caught a slow moment at d_model 64 (its collectives 60% slow); the
    profiled pass splits each token from one pass. Fitted to the split, TP is recovered; fitted
    to the two passes' difference it is not — and both worst errors are reported side by side."""
    from tplab.scaling import split_compare
    results = _profiled(_results(grid=[64, 256, 1024, 4096]), instrumented_off=1.6)
    assert fit_points.split_source(results) == fit_points.PROFILED
    start = latency.load_profile("cpu-shm")
    cal = calibration.calibrate(start, results)
    assert fit_points.TP_TERMS_MARK in cal.calibrated_from
    for key in ("alpha_us", "tp_launch_us"):
        assert cal.numbers()[key].value == pytest.approx(TRUE[key], rel=0.05), key
    block = split_compare.annotate_both_ways(results, cal, start)
    assert block["tp_split_from"] == "profiled"
    ways = block["both_ways"]
    assert ways["profiled"]["max_abs_error"] < 0.05 < ways["two passes"]["max_abs_error"]
    assert ways["profiled"]["tp_max_abs_error"] < 0.05 < ways["two passes"]["tp_max_abs_error"]
    assert ways["profiled"]["max_abs_error"] == pytest.approx(block["max_abs_error"])
    text = split_compare.both_ways_text(ways)
    assert text.startswith("calibrated model's worst error, TP terms from the profiled split ")
    # a point without its profiled pass: the two passes it is, and asking for the split is refused
    del results["d_model_sweep"][2]["profiled"]
    assert fit_points.split_source(results) == fit_points.TWO_PASSES
    with pytest.raises(latency.ScalingError, match="--profile-tokens"):
        calibration.calibrate(start, results, split=fit_points.PROFILED)


def test_at_the_labs_one_point_the_profiled_split_fits_alpha_and_a_tp_ranks_launches():
    """Without a d_model sweep: α (β kept) and a TP rank's per-op overhead from the profiled
    share of the measured TP time, so the model meets the run's TP point."""
    true, shape = _true_profile(), latency.shape_from_results({"model": MODEL})
    pr = latency.predict(true, 64, 2, shape)
    comm, rest = pr.comm_ms * 1e3, (pr.tp_ms - pr.comm_ms) * 1e3
    results = {"schema": 1, "world_size": 2, "backend": "gloo", "comm": "shm",
               "device_type": "cpu", "model": MODEL, "env": {"device_names": ["cpu: test"]},
               "single_per_token_ms": pr.single_ms, "tp_per_token_ms": pr.tp_ms,
               "allreduce_ms_per_token": pr.comm_ms * 2,
               "timeline": {"modes": {"tp": {"median": {
                   "compute_us": rest, "wire_us": comm * 0.6, "wait_us": comm * 0.4,
                   "rest_us": 0.0}}}}}
    start = dataclasses.replace(latency.load_profile("cpu-shm"),
                                beta_gbps=true.beta_gbps, mem_bw_gbps=true.mem_bw_gbps,
                                peak_tflops=true.peak_tflops, tp_mem_bw_gbps=true.tp_mem_bw_gbps,
                                tp_peak_tflops=true.tp_peak_tflops)
    cal = calibration.calibrate(start, results)
    assert cal.alpha_us.value == pytest.approx(TRUE["alpha_us"], rel=1e-6)
    assert cal.tp_launch_us.value == pytest.approx(TRUE["tp_launch_us"], rel=1e-6)
    block = calibration.check(cal, results)
    assert block["tp_split_from"] == "profiled" and abs(block["points"][0]["tp_error"]) < 1e-6
    without = calibration.calibrate(start, results, split=fit_points.TWO_PASSES)
    assert without.tp_launch_us.value != pytest.approx(TRUE["tp_launch_us"], rel=0.05)
