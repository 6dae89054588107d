"""Statistics and the alpha-beta fit (tplab/stats/fit.py), and calibration that uses it."""

from __future__ import annotations

import random

import pytest

from tplab.scaling import calibration, latency
from tplab.stats.fit import fit_alpha_beta, percentile, ring_allreduce_s, summarize

SIZES = [256 * 2 ** i for i in range(15)]  # 256 B .. 4 MiB, as the job sweeps


def test_percentiles_interpolate_between_order_statistics():
    xs = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(xs, 50) == pytest.approx(50.5)
    assert percentile(xs, 99) == pytest.approx(99.01)
    assert percentile([3.0], 99) == 3.0
    s = summarize([4.0, 1.0, 3.0, 2.0])
    assert (s.n, s.mean, s.p50, s.min, s.max) == (4, 2.5, 2.5, 1.0, 4.0)
    with pytest.raises(ValueError):
        summarize([])


@pytest.mark.parametrize("world, alpha_us, beta_gbps", [(2, 450.0, 3.0), (2, 10.0, 12.0),
                                                         (4, 5.0, 200.0)])
def test_fit_recovers_alpha_beta_from_noisy_synthetic_timings(world, alpha_us, beta_gbps):
    rng = random.Random(1234)
    times = [ring_allreduce_s(n, world, alpha_us * 1e-6, beta_gbps * 1e9)
             * (1 + rng.uniform(-0.03, 0.03)) for n in SIZES]
    fit = fit_alpha_beta(SIZES, times, world)
    assert fit.alpha_s * 1e6 == pytest.approx(alpha_us, rel=0.05)
    assert fit.beta_bps / 1e9 == pytest.approx(beta_gbps, rel=0.05)
    assert fit.max_rel_residual < 0.1


def test_fit_refuses_data_that_cannot_determine_beta():
    with pytest.raises(ValueError, match="does not grow"):
        fit_alpha_beta([256, 512, 1024], [3e-3, 2e-3, 1e-3], 2)
    with pytest.raises(ValueError, match="two message sizes"):
        fit_alpha_beta([256, 256], [1e-3, 1e-3], 2)
    with pytest.raises(ValueError, match="2 ranks"):
        fit_alpha_beta(SIZES, [1e-3] * len(SIZES), 1)


def _synthetic_results(alpha_us: float, beta_gbps: float, single_ms: float) -> dict:
    rng = random.Random(7)
    points = [{"bytes": n, "ms": ring_allreduce_s(n, 2, alpha_us * 1e-6, beta_gbps * 1e9) * 1e3
               * (1 + rng.uniform(-0.02, 0.02))} for n in SIZES]
    return {"schema": 1, "world_size": 2, "backend": "gloo",
            "model": {"n_layer": 6, "vocab_size": 640, "d_model": 64, "n_head": 4, "d_ff": 256},
            "single_per_token_ms": single_ms, "tp_per_token_ms": 30.0,
            "sweep": {"points": points}, "env": {"device_names": ["cpu: test"]}}


def test_calibration_recovers_known_alpha_beta_and_launch_overhead():
    base = latency.load_profile("cpu-gloo")
    shape = latency.load_shape()
    true_launch_us = 30.0
    roof_ms = latency.predict(base, 64, 2, shape)
    roof = max(roof_ms.single_memory_ms, roof_ms.single_compute_ms)
    single_ms = roof + shape.kernels(1) * true_launch_us / 1e3
    cal = calibration.calibrate(base, _synthetic_results(320.0, 4.5, single_ms), shape)
    assert cal.alpha_us.value == pytest.approx(320.0, rel=0.05)
    assert cal.beta_gbps.value == pytest.approx(4.5, rel=0.05)
    assert cal.launch_us.value == pytest.approx(true_launch_us, rel=1e-6)
    assert {cal.alpha_us.source, cal.beta_gbps.source, cal.launch_us.source} == {"measured"}
    assert cal.mem_bw_gbps == base.mem_bw_gbps  # what the run cannot tell stays as it was
    assert cal.calibrated_from


def test_a_sweep_that_cannot_be_fitted_keeps_the_profiles_alpha_beta():
    base = latency.load_profile("cpu-gloo")
    res = _synthetic_results(320.0, 4.5, 3.0)
    res["sweep"]["points"] = [{"bytes": 256, "ms": 2.0}, {"bytes": 512, "ms": 1.0}]
    cal = calibration.calibrate(base, res)
    assert cal.alpha_us == base.alpha_us and cal.beta_gbps == base.beta_gbps
    assert cal.launch_us.source == "measured"
    assert "sweep not fitted" in cal.calibrated_from
    res["single_per_token_ms"] = None
    with pytest.raises(latency.ScalingError, match="nothing to calibrate from"):
        calibration.calibrate(base, res)
