"""The lab's instance events for the dashboard (ssh endpoint, live uptime), detach ("leave it
running") and add_artifact (the dashboard's proof-terminated.svg listed in the manifest), on the
real mock cloud with tiny job settings.

The instance events and add_artifact are asserted on the lab of
tests/lab/test_lab_e2e.py::test_full_lab_completes_with_every_artifact (they had a lab of their
own here: test_full_lab_instance_events_carry_ssh_and_live_uptime_and_list_the_svg)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tplab.lab import instances as instance_store
from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.lab.lab_config import FAILED
from tplab.lab.orchestrator import Lab
from tplab.records.events import StageEvent, WarningEvent
from tplab.lab.providers import provider_for as _provider
from tests.e2e_fixtures import tiny_lab_config

pytestmark = pytest.mark.slow


_cfg = tiny_lab_config


async def _collect(lab: Lab, seen: list) -> None:
    async for ev in lab.subscribe():
        seen.append(ev)


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
            if isinstance(ev, StageEvent) and ev.name == "run":
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
    phases = [e.name for e in seen if isinstance(e, StageEvent)]
    assert "terminate" not in phases and "verify" not in phases and phases[-1] == "done"
    warn = [e for e in seen if isinstance(e, WarningEvent) and e.kind == "detached"]
    assert len(warn) == 1 and cmd in warn[0].msg and "left running" in warn[0].msg
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
