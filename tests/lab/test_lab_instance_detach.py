"""The lab's instance events for the dashboard (ssh endpoint, live uptime), detach ("leave it
running") and add_artifact (the dashboard's proof-terminated.svg listed in the manifest), on the
real mock cloud with tiny job settings."""

from __future__ import annotations

import asyncio
import json

import pytest

from tplab.lab import instances as instance_store
from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.lab.lab_config import COMPLETE, FAILED
from tplab.lab.orchestrator import Lab
from tplab.lab.providers import provider_for as _provider
from tests.e2e_fixtures import tiny_lab_config

pytestmark = pytest.mark.slow


_cfg = tiny_lab_config


async def _collect(lab: Lab, seen: list) -> None:
    async for ev in lab.subscribe():
        seen.append(ev)


async def test_full_lab_instance_events_carry_ssh_and_live_uptime_and_list_the_svg(
        lab_assets, tmp_path):
    cfg = _cfg(lab_assets, tmp_path, status_poll_s=0.5, num_prompts=4, new_tokens=40)
    lab = Lab(cfg)
    seen: list = []
    task = asyncio.create_task(_collect(lab, seen))
    outcome = await lab.run()
    await task
    assert outcome.status == COMPLETE and outcome.exit_code == 0, outcome.reason
    running = [e for e in seen if e.type == "instance" and e["state"] == "RUNNING"]
    ready = [e for e in running if e.get("ssh_host") and isinstance(e.get("ssh_port"), int)]
    assert ready, [e.to_json() for e in running]
    first = ready[0]
    assert first["pod_id"] == outcome.pod_id and first["uptime_s"] is not None
    for key in ("provider", "gpu_type", "gpu_count", "spot", "usd_per_hr"):
        assert first.get(key) is not None, key
    # it came once the pod was ready, before the SSH connect
    phases = [(i, e["name"]) for i, e in enumerate(seen) if e.type == "phase"]
    connect_at = next(i for i, name in phases if name == "connect")
    assert seen.index(first) < connect_at
    # the status the lab polls while the job runs keeps uptime (and the endpoint) live
    run_at = next(i for i, name in phases if name == "run")
    fetch_at = next(i for i, name in phases if name == "fetch")
    live = [e for e in seen[run_at:fetch_at] if e.type == "instance"]
    assert live and all(e["ssh_host"] == first["ssh_host"] for e in live)
    assert live[-1]["uptime_s"] >= first["uptime_s"]
    assert seen[-1].type == "phase" and seen[-1]["name"] == "done"
    inst_gone = [e for e in seen if e.type == "instance" and e["state"] == "GONE"]
    assert inst_gone
    # add_artifact: the dashboard's svg, listed and named the terminated screenshot
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert manifest["terminated_screenshot"] == "proof-terminated.json"
    assert lab.add_artifact("proof-terminated.svg") is None  # not saved: nothing listed
    (cfg.out_dir / "proof-terminated.svg").write_text("<svg/>")
    assert lab.add_artifact("../manifest.json") is None
    assert lab.add_artifact("proof-terminated.svg") == cfg.out_dir / "manifest.json"
    again = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert again["terminated_screenshot"] == "proof-terminated.svg"
    assert "proof-terminated.svg" in again["artifacts"]
    assert "proof-terminated.json" in again["artifacts"]
    assert again["status"] == COMPLETE and again["verified_gone"] is True


async def test_detach_leaves_the_pod_running_with_its_record_and_hold_open(
        lab_assets, tmp_path, mock_cloud, monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", mock_cloud.api_key)
    cfg = _cfg(lab_assets, tmp_path, num_prompts=4, new_tokens=140,
               api_url=mock_cloud.api_url)
    lab = Lab(cfg)
    seen: list = []

    async def detach_when_running() -> None:
        async for ev in lab.subscribe():
            seen.append(ev)
            if ev.type == "phase" and ev["name"] == "run":
                lab.detach()
                lab.detach()  # idempotent

    task = asyncio.create_task(detach_when_running())
    outcome = await lab.run()
    await task
    pod_id = outcome.pod_id
    assert pod_id and lab.detached
    assert outcome.status == FAILED and outcome.exit_code == 1 and not outcome.verified_gone
    assert outcome.reason.startswith(f"detached: pod {pod_id} left running")
    cmd = f"tplab terminate {pod_id} --mock --api-url {mock_cloud.api_url}"
    assert cmd in outcome.reason
    phases = [e["name"] for e in seen if e.type == "phase"]
    assert "terminate" not in phases and "verify" not in phases and phases[-1] == "done"
    warn = [e for e in seen if e.type == "warning" and e.get("kind") == "detached"]
    assert len(warn) == 1 and cmd in warn[0]["msg"] and "left running" in warn[0]["msg"]
    # the pod is still running in the mock cloud; the record stays open (a leftover next time)
    assert [p["desiredStatus"] for p in mock_cloud.pods() if p["id"] == pod_id] == ["RUNNING"]
    inst = json.loads((cfg.out_dir / "instance.json").read_text())
    assert inst["state"] == instance_store.CREATED and inst["pod_id"] == pod_id
    assert pod_id in [r.pod_id for r in instance_store.open_records(mock=True)]
    assert not (cfg.out_dir / "proof-terminated.json").exists()
    # no actual spend recorded: the authorization stays held
    guard = BudgetGuard(default_ledger_path(mock=True), 100.0)
    assert guard.held > 0
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert manifest["status"] == FAILED and manifest["verified_gone"] is False
    assert manifest["actual_cost_usd"] is None and manifest["terminated_screenshot"] is None
    # the next lab finds it as a leftover
    nxt = Lab(_cfg(lab_assets, tmp_path, out_dir=tmp_path / "next", api_url=mock_cloud.api_url),
              provider=_provider(mock_cloud.api_key, mock_cloud.api_url))
    assert pod_id in [p.id for p in await asyncio.to_thread(nxt.find_leftover_pods)]
    proof = await nxt.terminate_pod(pod_id)
    assert proof.gone
