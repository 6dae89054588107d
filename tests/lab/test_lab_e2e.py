"""End to end on the real mock cloud: real RunPod provider, real SSH/SFTP, the real job under
torchrun on this CPU, the real watchdog, the real ledger. Tiny job settings keep each test short.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.records.events import read_events
from tplab.lab.lab_config import COMPLETE, FAILED, STOPPED, STUB
from tplab.lab.orchestrator import Lab
from tplab.lab.providers import provider_for as _provider
from tests.e2e_fixtures import tiny_lab_config

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


_cfg = tiny_lab_config


def _ledger_lines() -> list[dict]:
    path = default_ledger_path(mock=True)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _assert_settled(label: str) -> None:
    guard = BudgetGuard(default_ledger_path(mock=True), 100.0)
    assert guard.held == 0.0, "an authorization was left open"
    kinds = [e["kind"] for e in _ledger_lines() if e["label"] == label]
    assert kinds and kinds[0] == "authorize" and kinds[-1] in ("actual", "release")


def _cli(args: list[str], env_extra: dict[str, str]) -> subprocess.Popen:
    env = {**os.environ, **env_extra, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "tplab", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _json_events_until(proc: subprocess.Popen, pred, timeout_s: float) -> list[dict]:
    """Read the --json stream until pred(event) holds; returns what was read."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        ev = json.loads(line)
        seen.append(ev)
        if pred(ev):
            return seen
    raise AssertionError(f"never saw the awaited event; last: {seen[-3:]}")


# ----------------------------------------------------------------------------------------------


async def test_full_lab_completes_with_every_artifact(lab_assets, tmp_path, mock_cloud,
                                                     monkeypatch):
    from tplab.commands.run import run_lab
    import io
    monkeypatch.setenv("RUNPOD_API_KEY", mock_cloud.api_key)
    cfg = _cfg(lab_assets, tmp_path, api_url=mock_cloud.api_url)
    out = io.StringIO()
    code = await run_lab(cfg, out=out)
    text = out.getvalue()
    assert code == 0, text
    # pods on REST v2 only: the one GraphQL pod call is the spot rent (v2 has no spot)
    calls = mock_cloud.calls()
    assert not [k for k in calls if "/v1" in k], calls
    assert calls["graphql podRentInterruptable"] == 1 and "POST /v2/pods" not in calls
    assert not [k for k in calls if k in ("graphql pod", "graphql podTerminate",
                                          "graphql podFindAndDeployOnDemand")], calls
    assert calls["DELETE /v2/pods/{id}"] == 1 and calls["GET /v2/pods/{id}"] >= 2
    d = cfg.out_dir
    for name in ("manifest.json", "results.json", "events.jsonl", "instance.json",
                 "proof-terminated.json", "scaling-curve.png", "job.log", "stream.jsonl"):
        assert (d / name).is_file(), name
    assert (d / "scaling-curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = json.loads((d / "manifest.json").read_text())
    results = json.loads((d / "results.json").read_text())
    proof = json.loads((d / "proof-terminated.json").read_text())
    inst = json.loads((d / "instance.json").read_text())
    assert manifest["status"] == "COMPLETE" and manifest["verified_gone"] is True
    assert manifest["instance_id"] == inst["pod_id"] == proof["pod_id"]
    assert inst["state"] == "gone"
    assert proof["verified_gone"] and proof["listed"] is False and proof["answer"] == {"pod": None}
    assert results["outputs_match"] is True
    assert manifest["single_gpu_per_token_ms"] == results["single_per_token_ms"]
    assert manifest["speedup"] == pytest.approx(results["speedup"])
    assert manifest["actual_cost_usd"] is not None and 0 < manifest["actual_cost_usd"] < 0.1
    assert manifest["crossover_d_model"] is None or manifest["crossover_d_model"] > 64
    # the values, not only the keys
    assert manifest["instance_type"] == "2x NVIDIA GeForce RTX 4090 spot"
    assert manifest["vendor"] == "mock RunPod (local)" and manifest["mock"] is True
    gone_at = json.loads((d / "stream.jsonl").read_text().splitlines()[-1])
    assert manifest["end_ts"] is not None and manifest["start_ts"] < manifest["end_ts"]
    assert proof["checked_at"][:16] <= manifest["end_ts"][:16]
    assert gone_at["type"] == "phase" and gone_at["name"] == "done"
    # every job event the pod wrote reached the client exactly once
    pod_seqs = [e.seq for e in read_events(str(d / "events.jsonl"))]
    streamed = [json.loads(line) for line in (d / "stream.jsonl").read_text().splitlines()]
    job_seqs = [e["seq"] for e in streamed if e["src"] == "job"]
    assert job_seqs == pod_seqs == list(range(len(pod_seqs)))
    lab_types = {e["type"] for e in streamed if e["src"] == "lab"}
    assert {"phase", "instance", "ssh", "cost", "budget"} <= lab_types
    phases = [e["name"] for e in streamed if e["src"] == "lab" and e["type"] == "phase"]
    assert phases == ["preflight", "authorize", "create", "boot", "connect", "upload", "run",
                      "fetch", "terminate", "verify", "record", "manifest", "done"]
    _assert_settled(cfg.ledger_label())
    actual = [e for e in _ledger_lines() if e["kind"] == "actual"]
    assert float(actual[-1]["amount_usd"]) == pytest.approx(manifest["actual_cost_usd"], abs=1e-6)
    # the headless view: phases, final table
    assert "speedup (single/TP)" in text and "verified gone" in text
    # secrets: neither the mock's API key nor a private key in anything written
    for path in d.iterdir():
        blob = path.read_bytes()
        assert b"PRIVATE KEY" not in blob, path


async def test_ssh_dropped_twice_every_event_exactly_once(lab_assets, tmp_path, mock_cloud):
    prov = _provider(mock_cloud.api_key, mock_cloud.api_url)
    lab = Lab(_cfg(lab_assets, tmp_path, new_tokens=16), provider=prov)
    events = lab.subscribe()
    drops = 0
    waiting_reconnect = False
    job_seqs: list[int] = []

    async def saboteur():
        nonlocal drops, waiting_reconnect
        async for ev in events:
            if ev.src == "job":
                job_seqs.append(ev.seq)
                if (drops < 2 and not waiting_reconnect and lab.session is not None
                        and lab.session.conn is not None):
                    drops += 1
                    waiting_reconnect = True
                    lab.session.conn.abort()  # the TCP connection dies under the transport
            elif ev.type == "ssh" and ev["state"] == "connected":
                waiting_reconnect = False

    task = asyncio.create_task(saboteur())
    outcome = await lab.run()
    await task
    assert outcome.status == COMPLETE, outcome.reason
    assert outcome.verified_gone and outcome.exit_code == 0
    assert drops == 2 and lab.ssh_drops == 2
    pod_seqs = [e.seq for e in read_events(str(outcome.out_dir / "events.jsonl"))]
    assert job_seqs == pod_seqs == list(range(len(pod_seqs)))
    # resumed at the byte it had reached: nothing read twice (de-duplication would hide it)
    assert lab.session.tail.gaps == 0 and lab.summary()["gaps"] == 0
    assert lab.summary()["duplicates"] == 0
    drops_seen = [e for e in (outcome.out_dir / "stream.jsonl").read_text().splitlines()
                  if '"state":"dropped"' in e]
    assert len(drops_seen) == 2
    key = mock_cloud.api_key.encode()
    # the one place a running mock's own key is kept, by design: its discovery record (0600,
    # tplab.home.mock_clouds), removed when the mock stops; nowhere else
    clouds = Path(os.environ["TPLAB_HOME"]) / "mock" / "clouds"
    for path in list(outcome.out_dir.iterdir()) + list(
            (Path(os.environ["TPLAB_HOME"]) / "mock").rglob("*")):
        if path.is_file() and path.parent == clouds:
            assert path.stat().st_mode & 0o077 == 0, path
        elif path.is_file():
            assert key not in path.read_bytes(), path


def test_client_sigkill_watchdog_terminates_pod(lab_assets, tmp_path, mock_cloud):
    ckpt, prompts = lab_assets
    hb = 3.0
    proc = _cli(["run", "--mock", "--api-url", mock_cloud.api_url, "--json",
                 "--prompts", "2", "--new-tokens", "64", "--no-sweep", "--warmup", "1",
                 "--checkpoint", str(ckpt), "--prompts-file", str(prompts),
                 "--heartbeat-timeout", str(hb), "--out", str(tmp_path / "out")],
                {"RUNPOD_API_KEY": mock_cloud.api_key})
    try:
        _json_events_until(proc, lambda e: e["src"] == "job", 120)
        pods = [p for p in mock_cloud.pods() if p["desiredStatus"] == "RUNNING"]
        assert len(pods) == 1
        pod_id = pods[0]["id"]
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
    # bound: stale-after + one watchdog poll + the API call; generous for a loaded 2-core box
    bound = hb + 12.0
    while time.monotonic() - killed < bound:
        pod = next(p for p in mock_cloud.pods() if p["id"] == pod_id)
        if pod["desiredStatus"] != "RUNNING":
            break
        time.sleep(0.3)
    took = time.monotonic() - killed
    assert pod["desiredStatus"] == "TERMINATED", pod
    assert took < bound
    # and the next tplab finds no live pod left (status reads the provider and instance.json)
    from tplab.commands.status import gather
    os.environ["RUNPOD_API_KEY"] = mock_cloud.api_key
    try:
        assert gather(True, mock_cloud.api_url) == []
    finally:
        del os.environ["RUNPOD_API_KEY"]


def test_ctrl_c_while_booting_terminates_and_settles(lab_assets, tmp_path):
    from tplab.mock.handle import start_mock_cloud
    ckpt, prompts = lab_assets
    cloud = start_mock_cloud(boot_delay_s=60.0, state_dir=tmp_path / "mock-state")
    try:
        proc = _cli(["run", "--mock", "--api-url", cloud.api_url, "--json",
                     "--prompts", "2", "--new-tokens", "8", "--no-sweep",
                     "--checkpoint", str(ckpt), "--prompts-file", str(prompts),
                     "--out", str(tmp_path / "out")], {"RUNPOD_API_KEY": cloud.api_key})
        _json_events_until(proc, lambda e: e["type"] == "phase" and e["name"] == "boot", 60)
        os.killpg(proc.pid, signal.SIGINT)
        rest = _json_events_until(proc, lambda e: e["type"] == "phase" and e["name"] == "done",
                                  60)
        proc.wait(30)
        err = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        done = rest[-1]
        assert proc.returncode == 4  # stopped by the user, the pod verified gone
        assert done["status"] == STOPPED and "Ctrl-C" in done["reason"]
        assert done["verified_gone"] is True
        assert "Ctrl-C" in err
        pods = cloud.pods()
        assert len(pods) == 1 and pods[0]["desiredStatus"] == "TERMINATED"
        _assert_settled("lab02-tp-spinup-rtx4090x2")
        assert [e["kind"] for e in _ledger_lines()] == ["authorize", "actual"]
    finally:
        cloud.stop()


async def test_no_spot_capacity_is_an_educational_stub(lab_assets, tmp_path):
    from tplab.commands.run import run_lab
    import io
    cfg = _cfg(lab_assets, tmp_path,
               mock_options={"boot_delay_s": 0.3, "faults": {"no_spot_capacity": True}})
    out = io.StringIO()
    code = await run_lab(cfg, out=out)
    assert code != 0
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert manifest["status"] == STUB
    assert "no spot capacity" in manifest["reason"] and "nothing was created" in manifest["reason"]
    assert manifest["instance_id"] is None
    assert not (cfg.out_dir / "proof-terminated.json").exists()
    assert _ledger_lines() == []  # refused before authorize
    assert "EDUCATIONAL_STUB" in out.getvalue()


def test_price_over_cap_refused_before_create(lab_assets, tmp_path, mock_cloud):
    ckpt, prompts = lab_assets
    proc = _cli(["run", "--mock", "--api-url", mock_cloud.api_url, "--lab-cap", "0.5",
                 "--prompts", "2", "--new-tokens", "8", "--no-sweep",
                 "--checkpoint", str(ckpt), "--prompts-file", str(prompts),
                 "--out", str(tmp_path / "out")], {"RUNPOD_API_KEY": mock_cloud.api_key})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "above the lab cap $0.50" in err and "nothing was created" in err
    assert mock_cloud.pods() == []  # the mock saw no create
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["status"] == STUB
    assert _ledger_lines() == []


def test_leftover_pod_refuses_new_lab_until_terminated(lab_assets, tmp_path, mock_cloud):
    from tplab.wire import remote
    from tplab.cloud.base import PodSpec
    prov = _provider(mock_cloud.api_key, mock_cloud.api_url)
    key = remote.generate_client_key()
    old = prov.create(PodSpec(name="tplab-earlier-lab", gpu_type="NVIDIA GeForce RTX 4090",
                              gpu_count=2, public_key=remote.public_key_line(key)))
    ckpt, prompts = lab_assets
    env = {"RUNPOD_API_KEY": mock_cloud.api_key}
    base = ["--mock", "--api-url", mock_cloud.api_url]
    proc = _cli(["run", *base, "--prompts", "2", "--new-tokens", "8", "--no-sweep",
                 "--checkpoint", str(ckpt), "--prompts-file", str(prompts),
                 "--out", str(tmp_path / "out")], env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert old.id in err and f"tplab terminate {old.id}" in err
    assert [p["id"] for p in mock_cloud.pods()] == [old.id]  # nothing new was created
    proc = _cli(["status", *base], env)
    out, _ = proc.communicate(timeout=60)
    assert old.id in out
    proc = _cli(["terminate", "--all", *base], env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"{old.id}: gone" in out
    assert mock_cloud.pods()[0]["desiredStatus"] == "TERMINATED"


async def test_wall_cap_and_budget_alert_terminate_the_pod(lab_assets, tmp_path, mock_cloud):
    prov = _provider(mock_cloud.api_key, mock_cloud.api_url)
    # $0.70/h for at most 10 s costs at most $0.00194: within a $0.002 authorization, whose
    # 80% ($0.0016) is reached after about 8.2 s; the default job runs far longer than 10 s
    cfg = _cfg(lab_assets, tmp_path, lab_cap_usd=0.002, wall_cap_s=10.0, num_prompts=10,
               new_tokens=100)
    lab = Lab(cfg, provider=prov)
    events = lab.subscribe()
    seen = []

    async def collect():
        async for ev in events:
            seen.append(ev)

    task = asyncio.create_task(collect())
    outcome = await lab.run()
    await task
    assert outcome.status == FAILED and outcome.exit_code != 0
    # whichever comes first on a loaded machine: the wall cap, the lab cap, or the pod's own
    # watchdog (same wall cap) — each ends in terminate + verify
    assert ("wall-clock cap" in outcome.reason or "lab cap $0.002 was reached" in outcome.reason
            or "watchdog" in outcome.reason), outcome.reason
    assert outcome.verified_gone
    warnings = [e for e in seen if e.type == "warning" and e.get("kind") == "budget80"]
    assert len(warnings) == 1 and "80%" in warnings[0]["msg"]
    costs = [e for e in seen if e.type == "cost"]
    assert costs and costs[-1]["accrued_usd"] <= 0.0025
    assert all(c["seconds_left"] <= 10.5 for c in costs)
    pods = mock_cloud.pods()
    assert pods[0]["desiredStatus"] == "TERMINATED"
    _assert_settled(cfg.ledger_label())


async def test_spot_interruption_ends_the_lab_through_terminate(lab_assets, tmp_path):
    from tplab.mock.handle import start_mock_cloud
    cloud = start_mock_cloud({"spot_interrupt_after_s": 4.0}, boot_delay_s=0.3,
                             state_dir=tmp_path / "mock-state")
    try:
        prov = _provider(cloud.api_key, cloud.api_url)
        cfg = _cfg(lab_assets, tmp_path, num_prompts=10, new_tokens=100)
        outcome = await Lab(cfg, provider=prov).run()
        assert outcome.status == FAILED and outcome.exit_code != 0
        assert "EXITED" in outcome.reason, outcome.reason
        assert outcome.verified_gone
        assert cloud.pods()[0]["desiredStatus"] == "TERMINATED"
        manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
        assert manifest["status"] == FAILED and manifest["verified_gone"] is True
        _assert_settled(cfg.ledger_label())
    finally:
        cloud.stop()


async def test_failed_create_keeps_the_intent_and_releases_the_hold(lab_assets, tmp_path):
    from tplab.mock.handle import start_mock_cloud
    cloud = start_mock_cloud({"http_500": {"podRentInterruptable": 20}}, boot_delay_s=0.3,
                             state_dir=tmp_path / "mock-state")
    try:
        prov = _provider(cloud.api_key, cloud.api_url)
        # a 5xx create is ambiguous: the pod is looked for by name (here briefly) first
        cfg = _cfg(lab_assets, tmp_path, create_lookup_s=1.0)
        outcome = await Lab(cfg, provider=prov).run()
        assert outcome.status == FAILED and outcome.pod_id is None
        assert cloud.pods() == []
        inst = json.loads((cfg.out_dir / "instance.json").read_text())
        assert inst["state"] == "not-created" and inst["pod_id"] is None
        assert inst["intent_at"] <= inst["ended_at"]
        kinds = [e["kind"] for e in _ledger_lines()]
        assert kinds == ["authorize", "release"]
        assert cloud.api_key not in outcome.reason
        assert "no pod named tplab-" in outcome.reason and "none was created" in outcome.reason
    finally:
        cloud.stop()


async def test_slow_runtime_and_refused_ssh_are_waited_out(lab_assets, tmp_path):
    from tplab.mock.handle import start_mock_cloud
    cloud = start_mock_cloud({"runtime_null_s": 1.5, "ssh_refuse_s": 3.0}, boot_delay_s=0.3,
                             state_dir=tmp_path / "mock-state")
    try:
        prov = _provider(cloud.api_key, cloud.api_url)
        cfg = _cfg(lab_assets, tmp_path)
        lab = Lab(cfg, provider=prov)
        events = lab.subscribe()
        attempts = []

        async def collect():
            async for ev in events:
                if ev.type == "log" and ev["msg"].startswith("ssh attempt"):
                    attempts.append(ev["msg"])

        task = asyncio.create_task(collect())
        outcome = await lab.run()
        await task
        assert outcome.status == COMPLETE, outcome.reason
        assert outcome.verified_gone and outcome.exit_code == 0
        assert attempts, "sshd refused at first: the client should have retried"
    finally:
        cloud.stop()


async def test_api_errors_and_failing_terminates_still_end_verified_gone(lab_assets, tmp_path):
    from tplab.mock.handle import start_mock_cloud
    cloud = start_mock_cloud({"terminate_fail_n": 2, "http_500": {"GET /v2/pods/{id}": 2}},
                             boot_delay_s=0.3,
                             state_dir=tmp_path / "mock-state")
    try:
        prov = _provider(cloud.api_key, cloud.api_url)
        cfg = _cfg(lab_assets, tmp_path)
        outcome = await Lab(cfg, provider=prov).run()
        assert outcome.status == COMPLETE, outcome.reason
        assert outcome.verified_gone and outcome.exit_code == 0
        assert cloud.pods()[0]["desiredStatus"] == "TERMINATED"
        _assert_settled(cfg.ledger_label())
    finally:
        cloud.stop()
