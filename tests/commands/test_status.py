"""`tplab status --mock` (and `tplab terminate --mock`) find the mock clouds running on this
machine through their discovery records, and never print a mock's key."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from tplab.home import mock_clouds
from tplab.commands.main import main


def test_records_are_private_and_stale_ones_are_dropped(tmp_path):
    path = mock_clouds.register("http://127.0.0.1:1", "k-secret",
                                os.getpid())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stale = mock_clouds.register("http://127.0.0.1:2", "k2", 2 ** 22 + 7)
    # this test process is not a mock cloud (its command line has no tplab.mock): not listed
    assert mock_clouds.running() == []
    assert not stale.exists() and not path.exists()
    assert "k-secret" not in repr(mock_clouds.MockCloudRecord("u", 1, 0.0, path, "k-secret"))


@pytest.mark.slow
def test_status_and_terminate_reach_a_running_mock_cloud(mock_cloud, capsys):
    from tplab.wire import remote
    from tplab.cloud.base import PodSpec
    from tplab.lab.providers import provider_for
    record = mock_clouds.clouds_dir() / f"{mock_cloud.process.pid}.json"
    assert record.is_file() and stat.S_IMODE(record.stat().st_mode) == 0o600
    prov = provider_for(mock_cloud.api_key, mock_cloud.api_url)
    key = remote.generate_client_key()
    pod = prov.create(PodSpec(name="tplab-elsewhere", gpu_type="NVIDIA GeForce RTX 4090",
                              gpu_count=2, public_key=remote.public_key_line(key)))
    deadline = time.monotonic() + 30
    while prov.status(pod.id).state != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert main(["status", "--mock"]) == 0
    out = capsys.readouterr().out
    assert pod.id in out and "RUNNING" in out and mock_cloud.api_url in out
    assert f"tplab terminate {pod.id} --mock" in out and mock_cloud.api_key not in out
    header, row = out.splitlines()[:2]
    assert header.index("STATE") == row.index("RUNNING")  # aligned columns
    assert main(["status", "--mock", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["pod_id"] for r in rows] == [pod.id] and mock_cloud.api_key not in json.dumps(rows)
    assert main(["terminate", pod.id, "--mock"]) == 0  # what the hint says works
    assert f"{pod.id}: gone" in capsys.readouterr().out
    assert [p["desiredStatus"] for p in mock_cloud.pods()] == ["TERMINATED"]
    mock_cloud.stop()
    assert not record.exists()


def test_a_mock_labs_curve_and_proof_say_mock(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from tplab.lab import artifacts
    from tplab.lab.lab_config import LabConfig
    from tplab.lab.orchestrator import Lab
    from tplab.lab.pod import PROOF
    from tplab.scaling import chart
    seen = {}
    monkeypatch.setattr(chart, "save_png", lambda path, *a, **kw: seen.update(kw) or path)
    pred = SimpleNamespace(profile=None, world_size=2, shape=None, measured=None, sweep=[],
                           measured_crossover=None, measured_reason="", calibration=None,
                           band=None)
    artifacts.write_curve(pred, tmp_path, mock=True)
    assert "MOCK" in seen["banner"]
    artifacts.write_curve(pred, tmp_path, mock=False)
    assert seen["banner"] is None
    lab = Lab(LabConfig(mock=True, out_dir=tmp_path), SimpleNamespace(name="runpod"))
    lab.pod.id, lab.pod.verified_gone = "p1", True
    lab.pod.write_proof()
    assert json.loads((tmp_path / PROOF).read_text())["mock"] is True
