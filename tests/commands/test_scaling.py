"""`tplab scaling` tells the truth: the profile of the run's device and transport (another one is
refused in one sentence), --out optional, the run's sweep drawn and labelled measured, the
prediction labelled predicted, and the two curves told apart without colour."""

from __future__ import annotations

import json

import pytest

from tests.scaling.test_scaling_fit import _results
from tplab.commands.main import main


def _write(tmp_path, results: dict) -> str:
    (tmp_path / "run").mkdir(exist_ok=True)
    path = tmp_path / "run" / "results.json"
    path.write_text(json.dumps(results))
    return str(path)


def test_a_cpu_run_calibrates_the_cpu_profile_and_refuses_a_gpu_one(tmp_path, capsys):
    path = _write(tmp_path, _results(grid=[64, 256, 512, 1024, 2048]))
    assert main(["scaling", "--calibrate", path, "--profile", "rtx4090x2-pcie"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("tplab scaling: results.json is a cpu run over shm on cpu: test, which "
                   "calibrates the cpu-shm profile, not rtx4090x2-pcie; drop --profile or pass "
                   "--profile cpu-shm.")
    # no --out: the terminal plot and the tables only, nothing written
    assert main(["scaling", "--calibrate", path]) == 0
    out = capsys.readouterr().out
    assert "profile cpu-shm" in out and "calibrated from results.json (shm" in out
    assert "crossover, measured:  d_model ≈" in out and "crossover, predicted: d_model " in out
    assert "(measured)" not in out.split("crossover")[0].split("predicted (TP=2)")[-1]
    # piped: no colour, and each series has its own marker, named in the legend
    assert "\x1b[" not in out
    for marker in ("predicted (.)", "predicted (+)", "measured (o)", "measured (x)",
                   "measured crossover (*)"):
        assert marker in out, marker
    assert list((tmp_path / "run").iterdir()) == [tmp_path / "run" / "results.json"]


def test_out_writes_the_png_and_the_numbers_with_both_crossovers(tmp_path, capsys):
    path = _write(tmp_path, _results(grid=[64, 256, 512, 1024, 2048]))
    assert main(["scaling", "--calibrate", path, "--out", str(tmp_path / "o"),
                 "--no-terminal"]) == 0
    s = json.loads((tmp_path / "o" / "scaling.json").read_text())
    assert s["measured_crossover_d_model"] and s["crossover_d_model"]
    assert len(s["d_model_sweep"]) == 5 and s["calibration"]["within_tolerance"] is True
    assert (tmp_path / "o" / "scaling-curve.png").read_bytes()[:4] == b"\x89PNG"


def test_a_gpu_without_a_profile_asks_for_one(tmp_path, capsys):
    r = _results(grid=[64])
    r.update(device_type="cuda", comm="nccl", env={"device_names": ["NVIDIA L4"]})
    assert main(["scaling", "--calibrate", _write(tmp_path, r)]) == 2
    assert "no hardware profile; pass --profile NAME" in capsys.readouterr().err
    r["env"] = {"device_names": ["NVIDIA H100 80GB HBM3"] * 2}
    assert main(["scaling", "--calibrate", _write(tmp_path, r), "--no-terminal"]) == 0
    assert "profile h100x2-nvlink" in capsys.readouterr().out


def test_the_plain_prediction_needs_no_out(capsys):
    assert main(["scaling", "--profile", "cpu-gloo", "--no-terminal"]) == 0
    out = capsys.readouterr().out
    assert "Crossover: " in out and "[cpu-gloo profile as stored" in out
    assert "wrote" not in out


def _one_point(**over) -> dict:
    """A mock lab's results without a d_model sweep: gloo on 2 CPU ranks, whose decode loop paid
    far more per collective (21.3 ms a token) than the back-to-back sweep's α (132 µs) says."""
    r = {"schema": 1, "world_size": 2, "backend": "gloo", "comm": "gloo", "device_type": "cpu",
         "model": {"n_layer": 6, "vocab_size": 640, "d_model": 64, "n_head": 4, "d_ff": 256},
         "env": {"device_names": ["cpu: test"]}, "single_per_token_ms": 0.81,
         "tp_per_token_ms": 23.13, "allreduce_ms_per_token": 21.32,
         "allreduce_calls_per_token": 14,
         "sweep": {"points": [{"bytes": b, "ms": 0.27 + b / 1.1e6, "repeat_ms": [0.27 + b / 1.1e6]}
                              for b in (256, 4096, 65536, 1048576)],
                   "fit": {"alpha_us": 132.2, "beta_gbps": 1.1}}}
    r.update(over)
    return r


@pytest.mark.parametrize("tp_ms", [23.13, 18.0])
def test_a_run_without_a_sweep_is_calibrated_through_its_own_point(tmp_path, capsys, tp_ms):
    """The curve called calibrated passes through the run's one point: α from what the decode
    loop paid, not the back-to-back sweep (which missed the TP point by 2-3×); when the
    instrumented pass paid more than the plain TP pass took (18 ms), from the plain pass."""
    path = _write(tmp_path, _one_point(tp_per_token_ms=tp_ms))
    assert main(["scaling", "--calibrate", path, "--out", str(tmp_path / "o"),
                 "--no-terminal"]) == 0
    out = capsys.readouterr().out
    cal = json.loads((tmp_path / "o" / "scaling.json").read_text())["calibration"]
    assert cal["points_from"] == "the run's one measured point (no d_model sweep)"
    assert cal["within_tolerance"] is True and cal["max_abs_error"] < 0.02, cal["off"]
    assert "beta kept at the back-to-back sweep's (which fitted alpha 135.0 us)" in out
    assert ("left beside a TP rank's compute and launches" in out) is (tp_ms == 18.0)
    assert "WARNING" not in out


def test_a_calibration_that_misses_its_own_point_says_so_in_the_terminal_and_the_png(
        tmp_path, capsys, monkeypatch):
    from tplab.scaling import chart
    drawn = {}
    real = chart.save_png

    def spy(*args, **kw):
        drawn.update(kw)
        return real(*args, **kw)
    monkeypatch.setattr(chart, "save_png", spy)
    # a single-device time below the roofline of its own weight reads (a profile whose memory
    # bandwidth is far off this machine's): no launch cost can be fitted, the point is missed
    path = _write(tmp_path, _one_point(single_per_token_ms=0.05))
    assert main(["scaling", "--calibrate", path, "--out", str(tmp_path / "o"),
                 "--no-terminal"]) == 0
    out = capsys.readouterr().out
    assert "WARNING, not a fit: the calibrated model misses the run's measured points by up " \
           "to " in out and "(tolerance ±25%); single at d_model 64 is +" in out
    assert drawn["warning"].startswith("not a fit: the calibrated model misses")
