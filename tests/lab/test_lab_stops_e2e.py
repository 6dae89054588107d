"""Every way a user ends a lab, on the real mock cloud: refused before anything is spent when the
inputs are wrong; stopped mid-run with what was measured kept; the terminal closed (SIGHUP);
the lab's task cancelled again and again during its teardown. Each ends with no live pod."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time

import pytest

from tplab.budget import BudgetGuard, default_ledger_path
from tplab.lab.config import STOPPED
from tplab.lab.orchestrator import Lab
from tplab.lab.providers import provider_for
from tests.e2e_fixtures import tiny_lab_config
from tests.lab.test_lab_e2e import _cli, _json_events_until

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("bad", ["gpus", "checkpoint"])
def test_wrong_inputs_are_refused_before_the_create_phase(lab_assets, tmp_path, mock_cloud,
                                                          bad):
    ckpt, prompts = lab_assets
    if bad == "checkpoint":
        garbage = tmp_path / "garbage.pt"
        garbage.write_bytes(b"not a checkpoint at all\n")
        args, expect = ["--checkpoint", str(garbage)], "is not a readable torch checkpoint"
    else:
        args, expect = ["--checkpoint", str(ckpt), "--gpus", "3"], \
            "n_head=4 is not divisible by 3"
    proc = _cli(["run", "--mock", "--api-url", mock_cloud.api_url, "--json", "--prompts", "2",
                 "--new-tokens", "8", "--no-sweep", "--prompts-file", str(prompts), *args,
                 "--out", str(tmp_path / "out")], {"RUNPOD_API_KEY": mock_cloud.api_key})
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    phases = [e["name"] for e in map(json.loads, out.splitlines()) if e["type"] == "phase"]
    assert "authorize" not in phases and "create" not in phases, phases
    assert expect in err and "Nothing was created" in err
    assert not re.search(r"[A-Z][a-z]+(Error|Exception)\b", err), err  # no Python class name
    assert mock_cloud.pods() == []
    assert not default_ledger_path(mock=True).exists() or \
        BudgetGuard(default_ledger_path(mock=True), 5.0).held == 0.0


async def test_terminate_mid_run_keeps_the_figures_measured_so_far(lab_assets, tmp_path,
                                                                   mock_cloud):
    prov = provider_for(mock_cloud.api_key, mock_cloud.api_url)
    cfg = tiny_lab_config(lab_assets, tmp_path, num_prompts=10, new_tokens=60)
    lab = Lab(cfg, provider=prov)
    events = lab.subscribe()
    tp_tokens = 0

    async def press_terminate_once_tp_runs():
        nonlocal tp_tokens
        async for ev in events:
            if ev.type == "token" and ev["mode"] == "tp":
                tp_tokens += 1
                if tp_tokens == 30:
                    lab.request_terminate("user")  # the TERMINATE button

    task = asyncio.create_task(press_terminate_once_tp_runs())
    outcome = await lab.run()
    await task
    assert outcome.status == STOPPED and outcome.exit_code == 4, outcome.reason
    assert "stopped by the user" in outcome.reason and outcome.verified_gone
    m = json.loads((outcome.out_dir / "manifest.json").read_text())
    assert m["status"] == STOPPED and m["figures"] == "partial"
    part = m["partial"]
    assert part["single_tokens"] >= 10 * 59 and part["tp_tokens"] >= 25
    assert m["single_gpu_per_token_ms"] == part["single_per_token_ms"] > 0
    assert m["tp_per_token_ms"] == part["tp_per_token_ms"] > 0
    assert "partial" in m["lesson_notes"] and "single-device" in m["lesson_notes"]
    # what the pod could tell came back before it went
    assert (outcome.out_dir / "job.log").is_file() and (outcome.out_dir / "watchdog.log").is_file()
    assert mock_cloud.pods()[0]["desiredStatus"] == "TERMINATED"
    assert BudgetGuard(default_ledger_path(mock=True), 5.0).held == 0.0


def test_sighup_while_the_job_runs_tears_down_at_once(lab_assets, tmp_path, mock_cloud):
    """The terminal closes (SIGHUP) with a 60 s heartbeat timeout: the client's own teardown
    ends the pod within 15 s, long before the pod's watchdog would."""
    ckpt, prompts = lab_assets
    proc = _cli(["run", "--mock", "--api-url", mock_cloud.api_url, "--json", "--prompts", "4",
                 "--new-tokens", "100", "--no-sweep", "--checkpoint", str(ckpt),
                 "--prompts-file", str(prompts), "--heartbeat-timeout", "60",
                 "--out", str(tmp_path / "out")], {"RUNPOD_API_KEY": mock_cloud.api_key})
    try:
        _json_events_until(proc, lambda e: e["src"] == "job" and e["type"] == "token", 120)
        os.kill(proc.pid, signal.SIGHUP)
        hup = time.monotonic()
        while time.monotonic() - hup < 15:
            if all(p["desiredStatus"] == "TERMINATED" for p in mock_cloud.pods()):
                break
            time.sleep(0.2)
        took = time.monotonic() - hup
        assert all(p["desiredStatus"] == "TERMINATED" for p in mock_cloud.pods()), took
        proc.wait(60)
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 4  # STOPPED, pod verified gone
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["status"] == STOPPED and "SIGHUP" in m["reason"] and m["verified_gone"] is True


async def test_cancelling_the_lab_again_and_again_never_cuts_the_teardown(lab_assets, tmp_path,
                                                                          mock_cloud):
    prov = provider_for(mock_cloud.api_key, mock_cloud.api_url)
    lab = Lab(tiny_lab_config(lab_assets, tmp_path, num_prompts=4, new_tokens=100), provider=prov)
    events = lab.subscribe()
    run = asyncio.create_task(lab.run())
    async for ev in events:
        if ev.src == "job" and ev.type == "token":
            break
    run.cancel()                       # the app is closing
    for _ in range(5):                 # ... and impatient
        await asyncio.sleep(0.2)
        run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert lab.verified_gone
    assert mock_cloud.pods()[0]["desiredStatus"] == "TERMINATED"
    assert (lab.out_dir / "manifest.json").is_file()
    assert BudgetGuard(default_ledger_path(mock=True), 5.0).held == 0.0
