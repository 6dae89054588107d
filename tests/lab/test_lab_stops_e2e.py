"""Every way a user ends a lab, on the real mock cloud: refused before anything is spent when the
inputs are wrong; stopped mid-run with what was measured kept, or just after the job finished
with its results fetched first; the terminal closed (SIGHUP);
the lab's task cancelled again and again during its teardown. Each ends with no live pod.

The RunPod rows of benchmarks/fault_suite.py's quick table (once tests/lab/test_fault_suite.py's
own labs) are asserted here, each in the lab that already ran its scenario, marked
"-- fault suite": SIGHUP in run (bound 15 s), SIGKILL in boot (boot + guard + 7 s), SIGKILL in
run (heartbeat + 8 s), and after each lab the ledger row (nothing over the cap, nothing
damaged, no hold without a pod) and the canary row (the API key in no file and no client
output). SIGHUP in boot: tests/lab/test_lab_e2e.py::test_ctrl_c_while_booting_*[sighup]; a full
disk: tests/lab/test_lab_runpod.py::test_spot_removed_is_a_stub_naming_on_demand_*.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time

import pytest
from pathlib import Path

from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.lab.lab_config import STOPPED
from tplab.lab.orchestrator import Lab
from tplab.lab.providers import provider_for
from tests.e2e_fixtures import (assert_key_unwritten, assert_ledgers_settled, terminate_all,
                                tiny_lab_config)
from tests.lab.test_lab_e2e import _cli, _json_events_until

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("bad", ["gpus", "checkpoint"])
def test_wrong_inputs_are_refused_before_the_create_stage(lab_assets, tmp_path, mock_cloud,
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


def test_ctrl_c_just_after_the_job_finished_keeps_its_results_and_events(lab_assets, tmp_path,
                                                                         mock_cloud):
    """Ctrl-C the moment `job: finished` shows (before the lab fetched on its own): what the
    pod finished comes back before the teardown, so the lab is whole (COMPLETE, exit 0), its
    figures measured, not partial. What it pays for: `tplab run` as a process (the signal is
    the user's), through a whole lab."""
    ckpt, prompts = lab_assets
    out = tmp_path / "out"
    proc = _cli(["run", "--mock", "--api-url", mock_cloud.api_url, "--json", "--prompts", "2",
                 "--new-tokens", "8", "--no-sweep", "--profile-tokens", "0", "--checkpoint",
                 str(ckpt), "--prompts-file", str(prompts), "--out", str(out)],
                {"RUNPOD_API_KEY": mock_cloud.api_key})
    try:
        seen = _json_events_until(proc, lambda e: e["src"] == "job" and e["type"] == "phase"
                                  and e["name"] == "finished", 120)
        os.kill(proc.pid, signal.SIGINT)
        seen += _json_events_until(proc, lambda e: e["type"] == "phase" and e["name"] == "done",
                                   60)
        proc.wait(30)
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    assert "terminate requested: Ctrl-C" in json.dumps(seen)
    assert proc.returncode == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "COMPLETE" and m["verified_gone"] is True, m["reason"]
    assert "Ctrl-C" in m["reason"] and "after the job had finished" in m["reason"]
    assert m["figures"] == "complete" and "partial" not in m
    results = json.loads((out / "results.json").read_text())
    assert results["outputs_match"] is True
    job_events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert job_events[-1]["type"] == "phase" and job_events[-1]["name"] == "finished"
    assert sum(e["type"] == "token" for e in job_events) >= 2 * 2 * 8  # single and TP
    assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))


def test_tplab_terminate_from_another_shell_is_the_users_stop(lab_assets, tmp_path, capsys):
    """`tplab terminate --all --mock` while a `tplab run --mock` decodes: the lab ends STOPPED
    (exit 4) naming who ended its pod, not FAILED as a spot interruption; the running lab
    settles its own hold, once. What it pays for: `tplab run` as a process, with the mock cloud
    it starts itself, to the job's first token."""
    from tplab.commands.main import main
    ckpt, prompts = lab_assets
    out = tmp_path / "out"
    proc = _cli(["run", "--mock", "--json", "--prompts", "4", "--new-tokens", "100",
                 "--no-sweep", "--checkpoint", str(ckpt), "--prompts-file", str(prompts),
                 "--out", str(out)], {})
    try:
        _json_events_until(proc, lambda e: e["src"] == "job" and e["type"] == "token", 120)
        assert main(["terminate", "--all", "--mock"]) == 0
        said = capsys.readouterr().out
        _json_events_until(proc, lambda e: e["type"] == "phase" and e["name"] == "done", 60)
        proc.wait(30)
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    m = json.loads((out / "manifest.json").read_text())
    # the lab may settle its own hold before the pod is verified gone here: told so either way
    assert ": gone (checked" in said
    assert ("is still running: it ends as stopped by you" in said
            or "was running: it ended as stopped by you and settled its own hold" in said), said
    assert proc.returncode == 4, m["reason"]
    assert m["status"] == STOPPED and m["verified_gone"] is True
    assert "terminated by `tplab terminate` (pid" in m["reason"], m["reason"]
    assert "spot interruption" not in m["reason"]
    assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))


def test_sighup_while_the_job_runs_tears_down_at_once(lab_assets, tmp_path, mock_cloud):
    """The terminal closes (SIGHUP) with a 60 s heartbeat timeout: the client's own teardown
    ends the pod within 15 s, long before the pod's watchdog would. What it pays for: `tplab
    run` as a process (the signal is the terminal's), to the job's first token."""
    ckpt, prompts = lab_assets
    proc = _cli(["run", "--mock", "--api-url", mock_cloud.api_url, "--json", "--prompts", "4",
                 "--new-tokens", "100", "--no-sweep", "--checkpoint", str(ckpt),
                 "--prompts-file", str(prompts), "--heartbeat-timeout", "60",
                 "--out", str(tmp_path / "out")], {"RUNPOD_API_KEY": mock_cloud.api_key})
    try:
        seen = _json_events_until(proc, lambda e: e["src"] == "job" and e["type"] == "token", 120)
        os.kill(proc.pid, signal.SIGHUP)
        hup = time.monotonic()
        while time.monotonic() - hup < 15:
            if all(p["desiredStatus"] == "TERMINATED" for p in mock_cloud.pods()):
                break
            time.sleep(0.2)
        took = time.monotonic() - hup
        assert all(p["desiredStatus"] == "TERMINATED" for p in mock_cloud.pods()), took
        proc.wait(60)
        seen += _json_events_until(proc, lambda e: e["type"] == "phase" and e["name"] == "done",
                                   30)
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 4  # STOPPED, pod verified gone
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["status"] == STOPPED and "SIGHUP" in m["reason"] and m["verified_gone"] is True
    # -- fault suite: "client SIGHUP in run" (the lab reached run; pod gone <= 15 s, above),
    # then its ledger and canary rows
    assert any(e["type"] == "phase" and e["src"] == "lab" and e["name"] == "run" for e in seen)
    assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))
    assert_key_unwritten(mock_cloud.api_key, tmp_path, [json.dumps(seen), err])


async def test_cancelling_the_lab_again_and_again_never_cuts_the_teardown(lab_assets, tmp_path,
                                                                          mock_cloud):
    """The lab's task cancelled six times from the job's first token on: the pod still ends,
    verified gone, the manifest written, nothing held. What it pays for: a lab to its first
    token, then its teardown."""
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


def _wait_all_terminated(cloud, bound_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < bound_s:
        pods = cloud.pods()
        if pods and all(p["desiredStatus"] == "TERMINATED" for p in pods):
            return time.monotonic() - t0
        time.sleep(0.3)
    raise AssertionError(f"a pod is still alive {bound_s:.0f} s on: {cloud.pods()}")


def test_client_killed_while_the_pod_boots_the_guard_ends_it(lab_assets, tmp_path):
    """SIGKILL during boot (boot 2 s, the guard's bound 4 s): nothing on the client side can
    act, the watchdog never started; the guard the create call put in the container ends the
    pod within boot + its bound. What it pays for: the boot, then the guard's bound."""
    from tplab.mock.handle import start_mock_cloud
    ckpt, prompts = lab_assets
    boot_s, guard_s = 2.0, 4.0
    cloud = start_mock_cloud(boot_delay_s=boot_s, state_dir=tmp_path / "mock-state")
    try:
        proc = _cli(["run", "--mock", "--api-url", cloud.api_url, "--json", "--prompts", "2",
                     "--new-tokens", "8", "--no-sweep", "--checkpoint", str(ckpt),
                     "--prompts-file", str(prompts), "--heartbeat-timeout", "10",
                     "--boot-guard", str(guard_s), "--out", str(tmp_path / "out")],
                    {"RUNPOD_API_KEY": cloud.api_key})
        try:
            seen = _json_events_until(proc, lambda e: e["type"] == "phase" and e["name"] == "boot",
                                      120)
            created = time.monotonic()
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(10)
            err = proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
        pod = cloud.pods()[0]
        assert "tplab-guard" in pod["args"]  # the create call carried the guard
        took = _wait_all_terminated(cloud, boot_s + guard_s + 10.0)
        assert time.monotonic() - created <= boot_s + guard_s + 10.0, took
        # -- fault suite: "client SIGKILL in boot": gone within boot + the guard's bound + its
        # poll + the API call (7 s) of the kill
        assert time.monotonic() - created <= boot_s + guard_s + 7.0, took
        log = Path(pod["sandbox"], "tplab-run", "guard.log").read_text()
        assert "the client never showed up" in log
        # -- fault suite: the ledger row (after the `tplab terminate --all` a user runs) and
        # the canary row
        printed = terminate_all(cloud.api_url, cloud.api_key)
        assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))
        assert_key_unwritten(cloud.api_key, tmp_path, [json.dumps(seen), err, *printed])
    finally:
        cloud.stop()


def test_a_killed_watchdog_is_restarted_and_still_ends_the_pod(lab_assets, tmp_path,
                                                               mock_cloud):
    """Also test_lab_e2e.py::test_client_sigkill_watchdog_terminates_pod, whose lab this is now:
    one RUNNING pod once the job streams; the client SIGKILLed, the (restarted) watchdog ends the
    pod within stale-after + one poll + the API call (hb + 12 s), and the next tplab finds no
    live pod. What it pays for: `tplab run` as a process to the job's first token, the
    watchdog's restart, then the heartbeat timeout (6 s) that lets the watchdog act."""
    ckpt, prompts = lab_assets
    hb = 6.0
    proc = _cli(["run", "--mock", "--api-url", mock_cloud.api_url, "--json", "--prompts", "4",
                 "--new-tokens", "100", "--no-sweep", "--checkpoint", str(ckpt),
                 "--prompts-file", str(prompts), "--heartbeat-timeout", str(hb),
                 "--out", str(tmp_path / "out")], {"RUNPOD_API_KEY": mock_cloud.api_key})
    try:
        seen = _json_events_until(proc, lambda e: e["src"] == "job" and e["type"] == "token", 120)
        pods = [p for p in mock_cloud.pods() if p["desiredStatus"] == "RUNNING"]
        assert len(pods) == 1
        pod = mock_cloud.pods()[0]

        def watchdogs() -> list[int]:
            out = []
            for pid in pod_pids():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"tplab.job.watchdog" in cmd:  # python -m tplab.job.watchdog (not its sh)
                    out.append(pid)
            return out

        def pod_pids() -> list[int]:
            return next(p for p in mock_cloud.pods() if p["id"] == pod["id"])["alivePids"]

        first = watchdogs()
        assert len(first) == 1, first
        os.kill(first[0], signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not [p for p in watchdogs() if p not in first]:
            time.sleep(0.3)
        assert [p for p in watchdogs() if p not in first], "the watchdog was not restarted"
        os.kill(proc.pid, signal.SIGKILL)  # now the client goes too: the heartbeat goes stale
        killed = time.monotonic()
    finally:
        proc.kill()
        proc.wait(10)
        err = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    _wait_all_terminated(mock_cloud, hb + 15.0)
    took = time.monotonic() - killed
    assert took < hb + 15.0
    assert took < hb + 12.0  # test_client_sigkill_watchdog_terminates_pod's bound
    # -- fault suite: "client SIGKILL in run" (the lab reached run): gone within the stale
    # heartbeat + the watchdog's poll + the API call (8 s)
    assert any(e["type"] == "phase" and e["src"] == "lab" and e["name"] == "run" for e in seen)
    assert took <= hb + 8.0, took
    log = Path(pod["sandbox"], "tplab-run", "watchdog.log").read_text()
    assert "supervisor: the watchdog exited" in log and "client heartbeat stale" in log
    # and the next tplab finds no live pod left (status reads the provider and instance.json)
    from tplab.commands.status import gather
    os.environ["RUNPOD_API_KEY"] = mock_cloud.api_key
    try:
        assert gather(True, mock_cloud.api_url) == []
    finally:
        del os.environ["RUNPOD_API_KEY"]
    # -- fault suite: the ledger row (after `tplab terminate --all`) and the canary row
    printed = terminate_all(mock_cloud.api_url, mock_cloud.api_key)
    assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))
    assert_key_unwritten(mock_cloud.api_key, tmp_path, [json.dumps(seen), err, *printed])


def _cli_out(argv: list[str]) -> str:
    """``tplab ARGV`` in this process (its stdout), as a user would run it beside the lab."""
    import contextlib
    import io

    from tplab.commands.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(argv)
    return out.getvalue()


@pytest.mark.parametrize("lingers", [-1])
async def test_a_terminate_that_lingers_is_waited_for_and_one_never_gone_is_not_called_gone(
        lab_assets, tmp_path, lingers):
    """RunPod accepts the terminate but the pod stays listed: for a few polls (the lab waits
    and it ends COMPLETE), or for good (the lab waits its bound, re-sends terminate, and ends
    FAILED with exit 1 and the command to run: never "verified gone"). The few-polls case
    (lingers=4) is now one of the faults of tests/lab/test_lab_e2e.py::
    test_ssh_dropped_twice_every_event_exactly_once, with its assertions. What it pays for: a
    whole lab, then the verify bound (4 s) it shows being waited to."""
    import io
    from tplab.commands.run import run_lab
    from tplab.mock.handle import start_mock_cloud
    cloud = start_mock_cloud({"terminate_lingers": lingers}, boot_delay_s=0.3,
                             state_dir=tmp_path / "mock-state")
    try:
        os.environ["RUNPOD_API_KEY"] = cloud.api_key
        cfg = tiny_lab_config(lab_assets, tmp_path, api_url=cloud.api_url, end_bound_s=4.0)
        out = io.StringIO()
        t0 = time.monotonic()
        code = await run_lab(cfg, out=out)
        m = json.loads((cfg.out_dir / "manifest.json").read_text())
        deletes = cloud.state()["calls"].get("DELETE /v2/pods/{id}", 0)
        assert time.monotonic() - t0 >= 4.0  # it waited to its bound
        assert code == 1 and m["status"] == "FAILED" and m["verified_gone"] is False
        pod = m["instance_id"]
        assert f"pod {pod} is NOT proven gone after 4 s" in m["reason"]
        assert "NOT proven gone" in out.getvalue()
        assert f"tplab terminate {pod} --mock" in out.getvalue()
        assert deletes >= 2  # terminate was sent again while it stayed
        assert cloud.pods()[0]["desiredStatus"] == "RUNNING"
        # the hold follows the proof: the lab's whole authorization stays held for the pod,
        # nothing is recorded as spent, and `tplab budget` says so, naming it (the cap is
        # not free beside a pod that may still bill)
        guard = BudgetGuard.from_config(mock=True)
        assert guard.held == 3.0 and guard.total_spent == 0.0
        assert m["held_for_pod"] == pod and m["cost_is"] == "estimate"
        budget = _cli_out(["budget", "--mock"])
        assert "Held       $3.00" in budget and "Pre-flight NOT OK" in budget
        assert f"$3.00 for pod {pod}, not yet proven gone" in budget
        # a later `tplab terminate` that proves it gone settles it at what it billed
        cloud.set_faults(terminate_lingers=0)
        said = await asyncio.to_thread(_cli_out, ["terminate", pod, "--mock", "--api-url",
                                                  cloud.api_url])
        assert f"{pod}: gone" in said and f"spent by pod {pod}" in said, said
        guard = BudgetGuard.from_config(mock=True)
        assert guard.held == 0.0 and 0.0 < guard.total_spent < 3.0
        assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))
    finally:
        os.environ.pop("RUNPOD_API_KEY", None)
        cloud.stop()
