"""The scaling model (tplab/scaling/latency.py): crossover against a hand-computed case, profiles, plots."""

from __future__ import annotations

import json
import dataclasses
import math

import pytest

from tests.fresh_imports import packages_loaded_by
from tplab.scaling import calibration, chart, latency
from tplab.scaling.latency import HardwareProfile, ModelShape, Number


def _profile(**kw: float) -> HardwareProfile:
    vals = {"mem_bw_gbps": 1000.0, "peak_tflops": 1e6, "launch_us": 0.0, "alpha_us": 10.0,
            "beta_gbps": 12.0}
    vals.update(kw)
    return HardwareProfile(name="test", description="", devices="", interconnect="", nvlink=False,
                           **{k: Number(v, "assumed") for k, v in vals.items()})


# memory-bound, no launches, no vocabulary, no KV cache: the crossover is a quadratic's root
SHAPE = ModelShape(n_layer=4, vocab_size=0, head_dim=16, context=0, bytes_per_elem=4, batch=1)


def test_crossover_matches_the_hand_computed_root():
    L, p, B = 4, 2, 4
    bw, alpha, beta = 1000e9, 10e-6, 12e9
    # single - TP weight bytes / bw, per token: the sharded matrices (12 d^2 per layer) and the
    # column-split biases (7 d per layer) shrink by (1 - 1/p); LayerNorms and the other biases do not
    a = L * 12 * (1 - 1 / p) * B / bw
    b = L * 7 * (1 - 1 / p) * B / bw - (2 * L + 1) * 2 * (p - 1) / p * B / beta
    # (2L+1) all-reduces of d*4 bytes, each 2(p-1)alpha + 2(p-1)/p n/beta, plus the logits
    # all-gather of 0 bytes: (p-1) alpha
    c = (2 * L + 1) * 2 * (p - 1) * alpha + (p - 1) * alpha
    root = (-b + math.sqrt(b * b + 4 * a * c)) / (2 * a)
    assert root == pytest.approx(1422.3, abs=0.1)  # worked by hand: a=9.6e-11, b=-2.944e-9, c=1.9e-4
    got = latency.crossover_d_model(_profile(), 2, SHAPE)
    assert got == pytest.approx(root, rel=1e-6)
    below = latency.predict(_profile(), root * 0.9, 2, SHAPE)
    above = latency.predict(_profile(), root * 1.1, 2, SHAPE)
    assert below.tp_ms > below.single_ms and above.tp_ms < above.single_ms


def test_prediction_parts_at_a_hand_computed_point():
    d = 1024
    pr = latency.predict(_profile(launch_us=5.0), d, 2, SHAPE)
    single_bytes = (4 * (12 * d * d + 13 * d) + 4 * d) * 4
    assert pr.single_memory_ms == pytest.approx(single_bytes / 1000e9 * 1e3)
    assert pr.single_launch_ms == pytest.approx((4 * 12 + 7) * 5e-3)
    assert pr.tp_launch_ms == pytest.approx((4 * 16 + 17) * 5e-3)  # TP does not divide launches
    assert pr.allreduces_per_token == 9 and pr.message_bytes == d * 4
    comm = 9 * (2 * 10e-6 + d * 4 / 12e9) + 10e-6
    assert pr.comm_ms == pytest.approx(comm * 1e3)
    assert pr.single_ms == pytest.approx(pr.single_memory_ms + pr.single_launch_ms)


def test_crossover_edges():
    assert latency.crossover_d_model(_profile(alpha_us=1e6), 2, SHAPE) is None  # never pays
    free = _profile(alpha_us=0.0, beta_gbps=1e12)
    assert latency.crossover_d_model(free, 2, SHAPE) == latency.D_MIN  # always pays


def test_shipped_profiles_mark_every_number_and_4090_meets_the_sheet():
    names = latency.list_profiles()
    assert {"rtx4090x2-pcie", "a100x2-nvlink", "h100x2-nvlink", "cpu-gloo"} <= set(names)
    for name in names:
        prof = latency.load_profile(name)
        for key, num in prof.numbers().items():
            assert num.source in ("assumed", "measured"), (name, key)
            assert num.note, (name, key)
    assert not latency.load_profile("rtx4090x2-pcie").nvlink
    assert latency.load_profile("h100x2-nvlink").nvlink
    cross = latency.crossover_d_model(latency.load_profile("rtx4090x2-pcie"), 2)
    assert 1024 <= cross <= 2048  # the lab sheet's expectation on 2x RTX 4090
    # the lab's own model is launch-bound: TP is slower at d_model 64 on every profile
    for name in names:
        pr = latency.predict(latency.load_profile(name), 64, 2)
        assert pr.speedup < 1, name


def test_unknown_profile_is_one_clear_error():
    with pytest.raises(latency.ScalingError, match="unknown hardware profile 'nope'; choose one of"):
        latency.load_profile("nope")


def test_calibrate_needs_something_to_fit():
    with pytest.raises(latency.ScalingError, match="model section"):
        calibration.calibrate(_profile(), {"world_size": 2})


def test_plots(tmp_path):
    prof = latency.load_profile("rtx4090x2-pcie")
    measured = {"d_model": 64.0, "single_ms": 0.5, "tp_ms": 1.2, "world_size": 2}
    png = chart.save_png(tmp_path / "c.png", prof, 2, measured=measured)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = chart.render_plotext(prof, 2, measured=measured, width=80, height=20, color=False)
    assert "predicted crossover" in text and "\x1b[" not in text


def test_client_modules_do_not_import_torch_or_plot_libraries():
    assert packages_loaded_by(["tplab.scaling.latency", "tplab.scaling.calibration",
                               "tplab.scaling.chart", "tplab.lab.manifest",
                               "tplab.commands.local", "tplab.commands.scaling"],
                              ["torch", "matplotlib", "plotext"], timeout_s=60) == []


def test_shape_from_results_takes_the_runs_model():
    shape = latency.shape_from_results({"model": {"n_layer": 2, "vocab_size": 32, "d_model": 32,
                                                  "n_head": 4}})
    assert (shape.n_layer, shape.vocab_size, shape.head_dim) == (2, 32, 8)
    assert dataclasses.replace(shape, n_layer=6).allreduces_per_token() == 13


def test_cpu_shm_profile_is_calibrated_like_cpu_gloo_and_moves_the_crossover():
    assert latency.cpu_profile_name("shm") == latency.cpu_profile_name("both") == "cpu-shm"
    assert latency.cpu_profile_name("gloo") == latency.cpu_profile_name(None) == "cpu-gloo"
    gloo, shm = latency.load_profile("cpu-gloo"), latency.load_profile("cpu-shm")
    for key, num in shm.numbers().items():
        assert num.source == "measured", key  # every number from a run, as for cpu-gloo
    # the same machine, each measured over its own transport: bandwidths of one order
    assert 0.5 < shm.mem_bw_gbps.value / gloo.mem_bw_gbps.value < 2
    assert len(shm.replicates) == len(gloo.replicates) >= 100
    # in-loop alphas (the decode loop waits for the slower rank over either transport): still
    # several times lower over shared memory
    assert shm.alpha_us.value * 3 <= gloo.alpha_us.value
    assert "shm" in shm.alpha_us.note and "gloo" in gloo.alpha_us.note
    # a lower alpha moves the point where TP starts to pay down to smaller models
    assert latency.crossover_d_model(shm, 2) < latency.crossover_d_model(gloo, 2)


def test_calibration_says_which_transport_it_came_from():
    results = {"world_size": 2, "backend": "gloo", "comm": "shm",
               "env": {"device_names": ["cpu: X"]},
               "model": {"n_layer": 6, "vocab_size": 640, "d_model": 64, "n_head": 4},
               "single_per_token_ms": 1.0,
               "sweep": {"points": [{"bytes": 256, "ms": 0.012}, {"bytes": 1 << 20, "ms": 0.5}]}}
    cal = calibration.calibrate(latency.load_profile("cpu-shm"), results)
    assert cal.calibrated_from.startswith("results.json (shm, world size 2")
    assert cal.alpha_us.source == "measured" and cal.alpha_us.value < 10


def test_the_scaling_models_shape_is_the_shipped_checkpoints():
    """One truth about the model: the scaling model reads the shipped checkpoint's shape."""
    from tplab.home.paths import DEFAULT_CHECKPOINT
    from tplab.model.checkpoint_file import read_header
    from tplab.scaling import latency

    cfg = read_header(DEFAULT_CHECKPOINT).config
    shape = latency.load_shape()
    assert (shape.n_layer, shape.vocab_size, shape.head_dim) == (cfg.n_layer, cfg.vocab_size,
                                                                 cfg.head_dim)
    assert shape.vocab_size == 640
    model = json.loads((latency.ASSETS / "hardware_profiles.json").read_text())["model"]
    assert not set(latency.SHAPE_FIELDS) & set(model), "the assets file restates the model's shape"
