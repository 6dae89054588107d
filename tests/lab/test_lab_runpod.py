"""The lab on RunPod as it is today, end to end on the mock cloud: spot removed (a STUB that names
--on-demand, then --on-demand completes on REST v2 alone), the ambiguous create, a pod that ends
in ERROR, a rate limit that does not pass."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.lab.lab_config import COMPLETE, FAILED, STUB
from tplab.lab.orchestrator import Lab
from tplab.lab.providers import provider_for
from tests.e2e_fixtures import (FullDisk, assert_key_unwritten, assert_ledgers_settled,
                                tiny_lab_config)

pytestmark = pytest.mark.slow

GRAPHQL_POD_CALLS = ("graphql pod", "graphql podFindAndDeployOnDemand", "graphql podTerminate",
                     "graphql podStop", "graphql podRentInterruptable")


def _ledger_kinds() -> list[str]:
    path = default_ledger_path(mock=True)
    if not path.exists():
        return []
    return [json.loads(line)["kind"] for line in path.read_text().splitlines() if line.strip()]


def _diff(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def _no_live_pod(cloud) -> None:
    for view in cloud.pods():
        assert view["status"] == "TERMINATED" and view["alivePids"] == [], view


async def test_spot_gone_with_graphql_is_a_stub_naming_on_demand_which_then_completes(
        lab_assets, tmp_path, mock_cloud, monkeypatch):
    """RunPod's GraphQL retired (an HTML 404 at /graphql, as planned for early 2027): spot is
    not offered (its only way went with it), the balance is unknown, and the on-demand lab
    completes through REST v2 alone."""
    from tplab.commands.run import run_lab
    monkeypatch.setenv("RUNPOD_API_KEY", mock_cloud.api_key)
    mock_cloud.set_faults(graphql_retired="404")
    cfg = tiny_lab_config(lab_assets, tmp_path / "spot", api_url=mock_cloud.api_url)
    code = await run_lab(cfg, out=io.StringIO())
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert code == 3 and manifest["status"] == STUB
    reason = manifest["reason"]
    assert "RunPod no longer offers spot pods: its GraphQL API, the only way to rent them, is " \
        "gone (HTTP 404, text/html)" in reason and "never switches" in reason
    assert "On-demand is $1.380/h (stock HIGH), worst case $2.76 for the 2.00 h wall cap" in reason
    command = reason.split("to use it, run `")[1].split("`")[0]  # this same lab, on-demand
    assert command.startswith(f"tplab run --on-demand --mock --api-url {mock_cloud.api_url} ")
    assert "--prompts 2 --new-tokens 8 --warmup 1" in command and "--no-sweep" in command
    assert f"--out {cfg.out_dir}" in command
    assert "nothing was created" in reason
    assert mock_cloud.pods() == [] and _ledger_kinds() == []  # refused before authorize
    before = mock_cloud.calls()
    cfg = tiny_lab_config(lab_assets, tmp_path / "ondemand", api_url=mock_cloud.api_url,
                          spot=False)
    # -- fault suite: "disk full under stream.jsonl": every write of it fails (ENOSPC); the lab
    # says so and goes on to COMPLETE, its pod verified gone (below). (The suite makes the file
    # /dev/full; read back, that never ends, so here the disk is full under the open file.)
    from tplab.lab.stream import LabStream
    real_open = LabStream.open_record

    def open_on_a_full_disk(self, path):
        real_open(self, path)
        self._fh.close()
        self._fh = FullDisk()
    monkeypatch.setattr(LabStream, "open_record", open_on_a_full_disk)
    out = io.StringIO()
    code = await run_lab(cfg, out=out)
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert code == 0 and manifest["status"] == COMPLETE, manifest["reason"]
    assert "WARNING: stream.jsonl could not be written" in out.getvalue()
    assert manifest["verified_gone"] is True
    calls = _diff(before, mock_cloud.calls())
    # every pod call on REST v2: no /v1, no GraphQL pod create/get/list/terminate
    assert not [k for k in calls if "/v1" in k or k in GRAPHQL_POD_CALLS], calls
    assert calls["POST /v2/pods"] == 1 and calls["DELETE /v2/pods/{id}"] == 1
    assert calls["GET /v2/pods/{id}"] >= 2 and calls["GET /v2/pods"] >= 2
    # the catalog twice: the quote, then the create's hosts' CUDA versions (allowedCudaVersions)
    assert calls["GET /v2/catalog/gpus"] == 2 and calls["GET /v2/billing/pods"] == 1
    assert manifest["price_kind"] == "on-demand" and manifest["usd_per_hr"] == 1.38
    assert manifest["actual_cost_source"] == "billing"
    assert manifest["actual_cost_usd"] >= manifest["usd_per_hr"] * 1 / 3600
    assert manifest["worst_case_usd"] == pytest.approx(2.76)
    assert manifest["estimated_cost_usd"] == pytest.approx(1.38 * (300 + 2 * 8 * 3 * 0.02) / 3600,
                                                           abs=1e-6)
    assert manifest["authorized_usd"] == 3.0
    assert not [k for k in calls if k.startswith("graphql ") and k != "graphql (retired)"]
    _no_live_pod(mock_cloud)
    # -- fault suite: the ledger and canary rows
    assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))
    assert_key_unwritten(mock_cloud.api_key, tmp_path, [out.getvalue()])


async def test_ambiguous_create_finds_the_pod_by_name_and_terminates_it(lab_assets, tmp_path,
                                                                       mock_cloud):
    mock_cloud.set_faults(create_500_after_create=1)
    cfg = tiny_lab_config(lab_assets, tmp_path)
    outcome = await Lab(cfg, provider=provider_for(mock_cloud.api_key, mock_cloud.api_url)).run()
    assert outcome.status == FAILED and outcome.exit_code != 0
    (view,) = mock_cloud.pods()
    assert outcome.pod_id == view["id"] and outcome.verified_gone
    assert (f"RunPod answered the create with an error (an error page, not GraphQL), yet it "
            f"made pod {view['id']} named tplab-") in outcome.reason
    assert "found by its name, the lab stops and terminates it" in outcome.reason
    _no_live_pod(mock_cloud)
    assert _ledger_kinds() == ["authorize", "actual"]
    inst = json.loads((cfg.out_dir / "instance.json").read_text())
    assert inst["state"] == "gone" and inst["pod_id"] == view["id"]


async def test_ambiguous_create_with_an_unreadable_list_is_unknown_not_not_created(
        lab_assets, tmp_path, mock_cloud):
    cfg = tiny_lab_config(lab_assets, tmp_path, spot=False, create_lookup_s=1.0)
    prov = provider_for(mock_cloud.api_key, mock_cloud.api_url)
    prov._rest.retry_delays = (0.01,)
    real_create = prov.create

    def create(spec):  # past preflight (which lists pods too): the create fails, then the list
        mock_cloud.set_faults(http_500={"POST /v2/pods": 1, "GET /v2/pods": 1000})
        return real_create(spec)

    prov.create = create
    outcome = await Lab(cfg, provider=prov).run()
    assert outcome.status == FAILED and outcome.pod_id is None
    assert "whether a pod named tplab-" in outcome.reason and "UNKNOWN" in outcome.reason
    inst = json.loads((cfg.out_dir / "instance.json").read_text())
    assert inst["state"] == "intent" and "creation unknown" in inst["note"]
    assert _ledger_kinds() == ["authorize"]  # the hold stays until someone knows
    assert BudgetGuard(default_ledger_path(mock=True), 100.0).held == 3.0


async def test_a_pod_that_ends_in_error_while_booting_is_a_clear_failure(lab_assets, tmp_path,
                                                                        mock_cloud):
    mock_cloud.set_faults(boot_error=True)
    cfg = tiny_lab_config(lab_assets, tmp_path, spot=False)
    outcome = await Lab(cfg, provider=provider_for(mock_cloud.api_key, mock_cloud.api_url)).run()
    assert outcome.status == FAILED and outcome.exit_code != 0 and outcome.verified_gone
    assert outcome.reason == (f"the pod {outcome.pod_id} went ERROR while booting (RunPod could "
                              "not start its container); the lab terminates it")
    _no_live_pod(mock_cloud)


async def test_a_rate_limit_that_does_not_pass_ends_the_lab_with_nothing_created(
        lab_assets, tmp_path, mock_cloud):
    mock_cloud.set_faults(http_429={"POST /v2/pods": 100}, retry_after_s=0)
    cfg = tiny_lab_config(lab_assets, tmp_path, spot=False)
    outcome = await Lab(cfg, provider=provider_for(mock_cloud.api_key, mock_cloud.api_url)).run()
    assert outcome.status == FAILED and outcome.exit_code != 0 and outcome.pod_id is None
    assert outcome.reason.startswith("RunPod kept rate-limiting tplab (HTTP 429) while creating "
                                     "the pod tplab-")
    assert outcome.reason.endswith("try again in a few minutes; nothing was created")
    assert mock_cloud.pods() == [] and _ledger_kinds() == ["authorize", "release"]
