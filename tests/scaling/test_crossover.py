"""The crossover with its uncertainty (tplab/scaling/crossover.py): a range where the run's own
spread pins it, "no crossover below d_model N" where the data cannot tell TP's gain from zero,
and one answer, with its source, on every face that shows it."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from tplab.scaling import crossover, latency
from tplab.scaling.crossover import CrossoverBand
from tplab.scaling.latency import Number

MODEL = {"n_layer": 6, "vocab_size": 640, "d_model": 64, "n_head": 4, "d_ff": 256}
GRID = (64, 256, 512, 1024, 2048)
SINGLE_BW = 9.0


def _profile(tp_bw: float) -> latency.HardwareProfile:
    base = latency.load_profile("cpu-shm")
    true = {"alpha_us": 50.0, "beta_gbps": 1.5, "launch_us": 20.0, "tp_launch_us": 30.0,
            "mem_bw_gbps": SINGLE_BW, "tp_mem_bw_gbps": tp_bw, "peak_tflops": 1.0,
            "tp_peak_tflops": 1.0}
    return dataclasses.replace(base, replicates=(), replicate_terms=(),
                               **{k: Number(v, "measured") for k, v in true.items()})


def _sweep_run(tp_bw: float, noise: float, seed: int = 3, rounds: int = 4) -> dict:
    """A results.json whose d_model sweep was made by a known profile, each round's figure
    jittered by ±noise."""
    rng = random.Random(seed)
    shape = latency.shape_from_results({"model": MODEL})
    true = _profile(tp_bw)
    pts = []
    for d in GRID:
        pr = latency.predict(true, d, 2, shape)

        def rounds_of(v: float) -> list[float]:
            return [v * (1 + rng.uniform(-noise, noise)) for _ in range(rounds)]
        sr, tr, ar = rounds_of(pr.single_ms), rounds_of(pr.tp_ms), rounds_of(pr.comm_ms)
        pts.append({"d_model": d, "single_ms": sorted(sr)[rounds // 2],
                    "tp_ms": sorted(tr)[rounds // 2], "allreduce_ms": sorted(ar)[rounds // 2],
                    "single_rounds_ms": sr, "tp_rounds_ms": tr, "allreduce_rounds_ms": ar,
                    "outputs_match": True, "tokens": 16, "params": 0})
    return {"schema": 1, "world_size": 2, "backend": "gloo", "comm": "shm", "device_type": "cpu",
            "model": MODEL, "env": {"device_names": ["cpu: test"]}, "d_model_sweep": pts}


def test_a_clear_gain_gives_a_range_around_the_true_crossover():
    # 8 rounds: in simulation (±10 % noise, 30 seeds) 95 % bands from 8 rounds covered the true
    # crossover every time, from 4 rounds 83 % of the time (docs/measurement.md)
    true_cross = latency.crossover_d_model(_profile(6.0), 2, latency.shape_from_results(
        {"model": MODEL}))
    band = crossover.for_run(_profile(20.0), _sweep_run(6.0, 0.05, rounds=8), resamples=200)
    assert band.kind == crossover.RANGE and band.source == crossover.CALIBRATED
    assert band.lo < true_cross < band.hi and band.lo <= band.estimate <= band.hi
    assert band.text().startswith(f"d_model {band.lo:,.0f}–{band.hi:,.0f}")
    assert "[cpu-shm calibrated from this run; 95% bootstrap, 200 resamples]" in band.text()
    assert "the d_model sweep's rounds" in band.method


def test_a_gain_within_the_noise_says_no_crossover_below_n_never_a_number():
    # one TP rank reads 1 % faster than half a device: the fit's crossover is an artifact of
    # that 1 %, and 5 % noise on the rounds cannot tell it from zero
    band = crossover.for_run(_profile(20.0), _sweep_run(SINGLE_BW / 2 * 1.01, 0.05),
                             resamples=200)
    assert band.kind in (crossover.NONE_BELOW, crossover.NONE)
    assert band.hi is None and band.no_crossover_share > 0.025
    assert band.text().startswith(f"no crossover below d_model {band.below:,.0f}")
    assert band.short() == f"none < {band.below / 1000:.1f}k"


def test_a_profile_carries_its_replicates_into_every_crossover_made_from_it():
    shape = latency.shape_from_results({"model": MODEL})
    certain = _profile(6.0)
    # the replicates straddle "no gain": half of them no faster per rank than half a device
    rows = tuple((6.0 if i % 2 else SINGLE_BW / 2 * 0.97,) for i in range(100))
    unsure = dataclasses.replace(certain, replicate_terms=("tp_mem_bw_gbps",), replicates=rows,
                                 replicates_note="a test")
    assert crossover.for_profile(certain, 2, shape).kind == crossover.POINT
    band = crossover.for_profile(unsure, 2, shape)
    assert band.kind == crossover.NONE_BELOW and band.source == crossover.PROFILE
    assert "cpu-shm profile as stored" in band.text()
    # a run without a d_model sweep cannot fit how weight reads grow: the profile's doubt stays
    one_point = {**_sweep_run(6.0, 0.0), "d_model_sweep": None, "single_per_token_ms": 1.6,
                 "tp_per_token_ms": 3.0, "allreduce_ms_per_token": 1.2,
                 "allreduce_calls_per_token": 14.0,
                 "sweep": {"points": [{"bytes": b, "ms": 0.1 + b / 1e6,
                                       "repeat_ms": [0.1 + b / 1e6] * 3}
                                      for b in (256, 4096, 65536)]}}
    run_band = crossover.for_run(unsure, one_point, resamples=100)
    assert run_band.kind == crossover.NONE_BELOW
    assert "the cpu-shm profile's replicates" in run_band.method


def test_the_band_is_deterministic_and_survives_its_own_json():
    run = _sweep_run(6.0, 0.05)
    a = crossover.for_run(_profile(20.0), run, resamples=100)
    b = crossover.for_run(_profile(20.0), json.loads(json.dumps(run)), resamples=100)
    assert a == b
    back = CrossoverBand.from_dict(json.loads(json.dumps(a.to_dict())))
    assert back == a and back.text() == a.to_dict()["text"]
    assert CrossoverBand.from_dict({"profile": "x"}) is None and CrossoverBand.from_dict(3) is None


def test_a_spec_sheet_profile_is_a_point_that_says_it_has_no_interval():
    band = crossover.for_profile(latency.load_profile("rtx4090x2-pcie"))
    assert band.kind == crossover.POINT and band.resamples == 0
    assert "assumed figures without an interval" in band.text()
    assert band.estimate == latency.crossover_d_model(latency.load_profile("rtx4090x2-pcie"))


def test_the_shipped_cpu_profiles_carry_replicates():
    for name in ("cpu-gloo", "cpu-shm"):
        p = latency.load_profile(name)
        assert len(p.replicates) >= 100, name
        assert set(p.replicate_terms) >= {"mem_bw_gbps", "tp_mem_bw_gbps"}
        assert crossover.for_profile(p).kind != crossover.POINT


@pytest.mark.parametrize("bad", [{"terms": ["nope"], "values": [[1.0]]},
                                 {"terms": ["alpha_us"], "values": [[-1.0]]},
                                 {"terms": ["alpha_us"], "values": [[1.0, 2.0]]}])
def test_a_damaged_replicates_block_is_refused_in_one_sentence(bad):
    obj = latency.load_profile("rtx4090x2-pcie").to_json()
    obj["replicates"] = bad
    with pytest.raises(latency.ScalingError, match="replicates"):
        latency.profile_from_json("x", obj)
