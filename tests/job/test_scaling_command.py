"""`tplab scaling` tells the truth: the profile of the run's device and transport (another one is
refused in one sentence), --out optional, the run's sweep drawn and labelled measured, the
prediction labelled predicted, and the two curves told apart without colour."""

from __future__ import annotations

import json

from tests.job.test_scaling_fit import _results
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
    assert "crossover, measured:  d_model ≈" in out and "crossover, predicted: d_model ≈" in out
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
    assert "Predicted crossover d_model" in out or "The model predicts TP never wins" in out
    assert "wrote" not in out
