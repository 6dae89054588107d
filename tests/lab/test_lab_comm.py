"""`tplab run --mock --comm shm`: the mock lab's pods are this CPU, so the lab can carry its TP
collectives over the shared-memory transport; a GPU pod cannot, and is refused before spending."""

from __future__ import annotations

import io
import json

import pytest

from tplab.lab.lab_config import COMPLETE, FAILED
from tplab.lab.options import add_lab_arguments, config_from_args
from tests.e2e_fixtures import tiny_lab_config

pytestmark = pytest.mark.slow


async def test_a_mock_lab_over_shm_completes_and_calibrates_the_shm_profile(lab_assets, tmp_path):
    """What it pays for: a whole lab over shm with the d_model sweep it shows, two sizes decoded
    on the pod."""
    from tplab.commands.run import run_lab
    cfg = tiny_lab_config(lab_assets, tmp_path, comm="shm", sweep_d_model="32,64")
    out = io.StringIO()
    assert await run_lab(cfg, out=out) == 0, out.getvalue()
    results = json.loads((cfg.out_dir / "results.json").read_text())
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert manifest["status"] == COMPLETE
    assert results["comm"] == "shm" and results["outputs_match"] is True
    assert "cpu-shm" in json.dumps(manifest)  # the curve starts from the shm profile
    # the d_model sweep ran on the pod, streamed its points, and the model was fitted to them
    assert [p["d_model"] for p in results["d_model_sweep"]] == [32, 64]
    assert all(p["outputs_match"] and "predicted_tp_ms" in p for p in results["d_model_sweep"])
    assert results["calibration"]["points_from"] == "d_model_sweep"
    # the seed's number: the sweep's when it measured one, else the model's central fit when
    # its band says where (a range or a point), else none: "no crossover below d_model N" is
    # no number (its text says it), whatever the central fit
    source, band = manifest["crossover_source"], manifest["crossover"]
    says = band["kind"] in ("range", "point")
    assert source == ("measured" if results["measured_crossover_d_model"] else
                      "predicted" if says and manifest["predicted_crossover_d_model"] else None)
    assert (manifest["crossover_d_model"] is None) is (source is None)
    assert manifest["measured_crossover_reason"] == results["measured_crossover_reason"]
    stream = (cfg.out_dir / "stream.jsonl").read_text()
    assert stream.count('"type": "sweep_point"') + stream.count('"type":"sweep_point"') == 2


async def test_shm_on_a_real_gpu_pod_is_refused_before_anything(lab_assets, tmp_path, monkeypatch):
    from tplab.commands.run import run_lab
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_not_used")
    cfg = tiny_lab_config(lab_assets, tmp_path, mock=False, comm="shm")
    out = io.StringIO()
    assert await run_lab(cfg, out=out) != 0
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text()) \
        if (cfg.out_dir / "manifest.json").exists() else None
    text = out.getvalue()
    assert "NCCL" in text and "drop --comm" in text
    assert manifest is None or (manifest["status"] == FAILED and manifest["instance_id"] is None)


def test_the_flag_reaches_the_lab_config():
    import argparse
    p = argparse.ArgumentParser()
    add_lab_arguments(p)
    assert config_from_args(p.parse_args(["--mock", "--comm", "both"])).comm == "both"
    assert config_from_args(p.parse_args(["--mock"])).comm == "gloo"
