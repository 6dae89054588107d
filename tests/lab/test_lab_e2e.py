"""End to end on the real mock cloud: real RunPod provider, real SSH/SFTP, the real job under
torchrun on this CPU, the real watchdog, the real ledger. Tiny job settings keep each test short.

THE SCENARIO TABLE: every whole mock lab the suite runs, one lab per scenario, each test
asserting everything its lab shows. A "+" line names a test whose own lab was dropped because it
repeated the lab above it; its assertions moved, unchanged, into that test (marked there with a
"-- from <test>" comment). e2e = tests/lab/test_lab_e2e.py, stops = test_lab_stops_e2e.py,
runpod = test_lab_runpod.py, comm = test_lab_comm.py, detach = test_lab_instance_detach.py,
vast = test_lab_vast.py, images = test_lab_images.py, torch24 = test_lab_pod_torch.py, handin =
tests/handin/test_handin.py, app = tests/tui/test_app_mock.py, gone =
tests/tui/test_terminal_gone.py (the dashboard on a pseudo-terminal), reader =
tests/commands/test_run_reader_gone.py. A "+ fault
suite" line names a row of benchmarks/fault_suite.py's quick table whose lab (once in
test_fault_suite.py) was dropped for the same reason (marked "-- fault suite"; each such lab also
asserts the ledger and canary rows).

  spot lab, complete (headless run),  e2e::test_full_lab_completes_with_every_artifact
  its image named with --image
    + detach::test_full_lab_instance_events_carry_ssh_and_live_uptime_and_list_the_svg
    + images::test_image_flag_is_accepted_and_recorded_and_the_pod_lands_on_a_host_that_runs_it
    + handin::test_handin_after_a_mock_lab
  every transient fault, complete     e2e::test_ssh_dropped_twice_every_event_exactly_once
    + e2e::test_slow_runtime_and_refused_ssh_are_waited_out
    + fault suite: API 5xx as a proxy's HTML page (said as its words)
    + e2e::test_api_errors_and_failing_terminates_still_end_verified_gone
    + stops::test_a_terminate_that_lingers_is_waited_for_and_one_never_gone_..._gone[4]
  Ctrl-C while booting                e2e::test_ctrl_c_while_booting_terminates_and_settles[ctrl-c]
  SIGHUP while booting                e2e::test_ctrl_c_while_booting_terminates_and_settles[sighup]
    + fault suite: client SIGHUP in boot
  no spot capacity (no pod)           e2e::test_no_spot_capacity_is_an_educational_stub
  price over the cap (no pod)         e2e::test_price_over_cap_refused_before_create
  the end under faults (no lab)       tests/lab/test_ending.py (8 x 429 on destroy, a hung API,
                                        success: false, destroyed-but-running, 500 pages)
  a leftover pod refuses the lab      e2e::test_leftover_pod_refuses_new_lab_until_terminated
  wall cap / lab cap                  e2e::test_wall_cap_and_budget_alert_terminate_the_pod
  spot interruption                   e2e::test_spot_interruption_ends_the_lab_through_terminate
  create fails (no pod)               e2e::test_failed_create_keeps_the_intent_and_releases_the_hold
  wrong inputs (no pod), two          stops::test_wrong_inputs_are_refused_before_the_create_stage
  Ctrl-C just after the job finished  stops::test_ctrl_c_just_after_the_job_finished_keeps_its_...
  tplab terminate from another shell  stops::test_tplab_terminate_from_another_shell_is_the_...
  SIGHUP mid-run                      stops::test_sighup_while_the_job_runs_tears_down_at_once
    + fault suite: client SIGHUP in run
  task cancelled again and again      stops::test_cancelling_the_lab_again_and_again_never_cuts_...
  client SIGKILLed while booting      stops::test_client_killed_while_the_pod_boots_the_guard_ends_it
    + fault suite: client SIGKILL in boot
  watchdog killed, client SIGKILLed   stops::test_a_killed_watchdog_is_restarted_and_still_ends_the_pod
    + e2e::test_client_sigkill_watchdog_terminates_pod
    + fault suite: client SIGKILL in run
  terminate never takes effect        stops::test_a_terminate_that_lingers_..._gone[-1]
    + fault suite: terminate accepted, never done (the hold stays until a retry proves it gone)
  GraphQL gone (no spot), on-demand   runpod::test_spot_gone_with_graphql_is_a_stub_naming_on_...
    + fault suite: disk full under stream.jsonl (the on-demand lab)
    + fault suite: runpod graphql retired
  ambiguous create, unreadable list,  runpod::test_ambiguous_create_*, test_a_pod_that_ends_in_error_*,
  boot ERROR, rate limit (4 labs)       test_a_rate_limit_that_does_not_pass_*
  Vast, its rules on (complete)       vast::test_a_vast_lab_completes_and_names_vast
    + fault suite: vast offer taken, then its quote stale (0 answers of 429)
  Vast as it answers in production,   vast::test_a_lab_on_vast_as_it_answers_in_production_...
  a Blackwell GPU (its default image)
    + images::test_a_blackwell_lab_gets_the_blackwell_image_by_default
    + fault suite: vast list, vast 429 (limits doubled), vast ssh (direct port blocked), vast
      state (a destroyed record)
  Vast bid rented on demand           vast::test_a_bid_rented_on_demand_is_destroyed_at_once_...
  Vast: no public SSH port            vast::test_an_instance_that_never_gets_a_public_ssh_port_...
  --provider auto picks Vast,         vast::test_auto_picks_vast_when_runpod_offers_no_spot
  --lab-cap 6 --phase-cap 10
    + fault suite: vast offers, the cheap hosts do not say their CUDA
  --provider auto, no spot (no pod)   vast::test_auto_with_no_spot_anywhere_is_a_stub_naming_both
  Vast offers too old (no pod), two   images::test_vast_offers_with_an_old_driver_are_refused_...,
                                        images::test_a_blackwell_gpu_with_the_24_image_is_refused_...
  the pod on the oldest torch         torch24::test_a_mock_lab_with_its_pod_on_the_oldest_torch_completes
  Vast stopped intent while booting   vast::test_a_stopped_intent_while_the_instance_comes_up_...
    + fault suite: vast state: stopped intent while it comes up
  Vast outbid mid-run                 vast::test_outbid_mid_run_is_a_spot_interruption_with_...
    + fault suite: vast outbid mid-run, vast state: stopped intent mid-run
  Vast failed bid                     vast::test_a_failed_bid_leaves_nothing_and_says_so
    + fault suite: vast bid fails and leaves a stopped instance
  Vast wrong key (no pod)             tests/commands/test_wrong_vast_key.py (check, status,
    + fault suite: vast key refused     terminate, run: one sentence each)
  Vast SIGKILL/SIGHUP in boot and run test_fault_suite.py::test_the_quick_vast_rows_pass (4 labs)
  over shm, d_model sweep, complete   comm::test_a_mock_lab_over_shm_completes_and_calibrates_...
  detached (pod left running)         detach::test_detach_leaves_the_pod_running_with_its_record_...
  the dashboard, complete             app::test_start_shows_timings_then_results_and_manifest
    + app::test_replaying_a_finished_mock_lab_reaches_its_end_and_creates_no_pod
  the dashboard's TERMINATE mid-run   app::test_terminate_mid_run_leaves_no_pod_in_the_mock_api
    + stops::test_terminate_mid_run_keeps_the_figures_measured_so_far
  quit, then terminate and quit       app::test_quit_while_running_protects_the_pod
  quit, then leave it running         app::test_leave_running_detaches_and_the_pod_stays_running
  dashboard: terminal closed, SIGTERM gone::test_mid_decode_then_a_new_lab_runs_to_complete_...[2]
    mid-decode; the next lab COMPLETE,  (two labs each: the stopped one, then the next one)
    then closed / SIGTERM after it
  dashboard: terminal closed, SIGTERM gone::test_while_the_pod_boots_it_is_terminated_...[2]
    while the pod boots
  dashboard: on the quit dialog       gone::test_on_the_quit_dialog_the_answer_is_terminate_and_quit[2]
  dashboard: SIGTERM twice            gone::test_a_second_sigterm_ends_it_at_once_and_says_what_...
  dashboard: a frozen terminal, TERM  gone::test_a_terminal_that_takes_nothing_does_not_hold_up_...
  tplab run --json, reader gone       reader::test_a_json_reader_that_goes_away_while_the_pod_...
  tplab run, terminal closed, boot    reader::test_the_terminal_closed_while_the_pod_boots_stops_...
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.records.events import (CostEvent, InstanceEvent, LogEvent, StageEvent, SshEvent,
                                  WarningEvent, read_events)
from tplab.lab.lab_config import COMPLETE, FAILED, STOPPED, STUB
from tplab.lab.orchestrator import Lab
from tplab.lab.providers import provider_for as _provider
from tests.e2e_fixtures import (
    PROFILED,
    assert_key_unwritten,
    assert_ledgers_settled,
    assert_profiled_pass,
    assert_rank_traces,
    tiny_lab_config,
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BLACKWELL_RUNPOD = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2204"


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


def _lines(proc: subprocess.Popen) -> queue.Queue:
    """proc's stdout lines, read by a thread (None at the end), so a wait for one has a bound."""
    if not hasattr(proc, "_test_lines"):
        q: queue.Queue = queue.Queue()

        def pump() -> None:
            try:
                for line in proc.stdout:
                    q.put(line)
            except (OSError, ValueError):  # closed under the reader by the test's clean-up
                pass
            q.put(None)
        threading.Thread(target=pump, daemon=True).start()
        proc._test_lines = q
    return proc._test_lines


def _json_events_until(proc: subprocess.Popen, pred, timeout_s: float) -> list[dict]:
    """Read the --json stream until pred(event) holds; returns what was read. Fails the test
    (the process is killed by the caller's clean-up or the reaper) when it does not come
    within timeout_s, even if the process prints nothing at all."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    lines = _lines(proc)
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if not line:
            break
        ev = json.loads(line)
        seen.append(ev)
        if pred(ev):
            return seen
    raise AssertionError(f"never saw the awaited event within {timeout_s:.0f} s; last: {seen[-3:]}")


# ----------------------------------------------------------------------------------------------


async def test_full_lab_completes_with_every_artifact(lab_assets, tmp_path, mock_cloud,
                                                     monkeypatch, capsys):
    """Scenario "spot, complete" (headless `tplab run`), its image named with --image. Its lab
    also carries what
    tests/lab/test_lab_instance_detach.py::test_full_lab_instance_events_carry_ssh_and_live_uptime_and_list_the_svg
    asserted on a lab of its own (the instance events, live uptime, add_artifact): the second
    half of this test, on the lab `run_lab` made, with the status polled every 0.5 s as there
    (the lab's run stage, torchrun starting two ranks, lasts several polls); and what
    tests/lab/test_lab_images.py::test_image_flag_is_accepted_and_recorded_and_the_pod_lands_on_a_host_that_runs_it
    asserted on a lab of its own (the --image flag read, recorded in the manifest and instance
    record, the pod on a host whose CUDA runs it): the last part; and, before the second
    half, what tests/handin/test_handin.py::test_handin_after_a_mock_lab asserted on a lab of its
    own (`tplab handin` of this lab, written where the README's real run writes it: --out
    runs/lab02, outside TPLAB_HOME). What it pays for: one whole tiny lab with the profiled pass
    (torch's profiler on both ranks), the suite's lab that shows everything a complete lab
    writes."""
    from tplab.commands.run import run_lab
    from tplab.lab import orchestrator
    from tplab.lab.options import add_lab_arguments, config_from_args
    import argparse
    import io
    labs: list[Lab] = []
    seen: list = []

    class RecordingLab(Lab):  # the lab run_lab makes, with every event it emits from the start
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            labs.append(self)
            events = self.subscribe()

            async def collect() -> None:
                async for ev in events:
                    seen.append(ev)
            self.collected = asyncio.create_task(collect())

    monkeypatch.setattr(orchestrator, "Lab", RecordingLab)
    monkeypatch.setenv("RUNPOD_API_KEY", mock_cloud.api_key)
    # -- from test_lab_images.py::test_image_flag_is_accepted_and_recorded_...: the flag read
    parser = argparse.ArgumentParser()
    add_lab_arguments(parser)
    args = parser.parse_args(["--mock", "--api-url", mock_cloud.api_url, "--image",
                              BLACKWELL_RUNPOD, "--prompts", "2", "--new-tokens", "8",
                              "--out", str(tmp_path / "out")])
    assert config_from_args(args).image == BLACKWELL_RUNPOD
    cfg = _cfg(lab_assets, tmp_path, api_url=mock_cloud.api_url, status_poll_s=0.5,
               image=BLACKWELL_RUNPOD, out_dir=tmp_path / "runs" / "lab02", **PROFILED)
    out = io.StringIO()
    code = await run_lab(cfg, out=out)
    text = out.getvalue()
    (lab,) = labs
    await lab.collected
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
                 "proof-terminated.json", "scaling-curve.png", "job.log", "stream.jsonl",
                 "trace.json"):
        assert (d / name).is_file(), name
    assert (d / "scaling-curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the pod's stderr holds the job's words, not torchrun's paragraph about OpenMP threads
    assert "OMP_NUM_THREADS" not in (d / "job.log").read_text()
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
    # a mock lab names the machine it measured, and apart, labelled, the hardware it stands for
    assert manifest["instance_type"].startswith("mock: 2 CPU processes (gloo) on ")
    assert manifest["measured_on"] == manifest["instance_type"].removeprefix("mock: ")
    stands = manifest["stands_for"]
    assert stands["instance_type"] == "2x NVIDIA GeForce RTX 4090 spot"
    assert stands["profile"] == "rtx4090x2-pcie" and "nothing ran on it" in stands["what"]
    assert stands["crossover"]["kind"] == "point" and round(stands["crossover"]["estimate"]) == 1953
    # the lab's record of its figures names it apart too, as what its crossover stands for
    stand_in = manifest["lab_figures"]["crossover"].pop("stands_for")
    assert stand_in.startswith("2x NVIDIA GeForce RTX 4090 spot: crossover d_model ≈ 1,953")
    assert stand_in.endswith("a prediction, nothing ran on it")
    assert "NVIDIA" not in json.dumps({k: v for k, v in manifest.items()
                                       if k not in ("stands_for", "image", "lesson_notes")})
    # the crossover with its uncertainty, calibrated from this run, the one the notes quote
    assert manifest["crossover"]["source"] == "calibrated" and manifest["crossover"]["resamples"]
    assert manifest["crossover"]["text"] in manifest["lesson_notes"]
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
    # and the record reads back whole: every line the lab and the job wrote is a valid event
    assert len(list(read_events(str(d / "stream.jsonl")))) == len(streamed)
    lab_types = {e["type"] for e in streamed if e["src"] == "lab"}
    assert {"phase", "instance", "ssh", "cost", "budget"} <= lab_types
    phases = [e["name"] for e in streamed if e["src"] == "lab" and e["type"] == "phase"]
    assert phases == ["preflight", "authorize", "create", "boot", "connect", "upload", "run",
                      "fetch", "terminate", "verify", "record", "manifest", "done"]
    _assert_settled(cfg.ledger_label())
    actual = [e for e in _ledger_lines() if e["kind"] == "actual"]
    assert float(actual[-1]["amount_usd"]) == pytest.approx(manifest["actual_cost_usd"], abs=1e-6)
    # the lab's cost is one figure: after GONE, the one every face shows is the billed one,
    # equal to the manifest's, in the stream the dashboard folds (its strip and Instance
    # panel), the headless table, the log and the proof picture's table
    billed = manifest["actual_cost_usd"]
    assert manifest["cost_is"] == "billed" and manifest["held_for_pod"] is None
    last_cost = [e for e in streamed if e["type"] == "cost"][-1]
    assert last_cost["cost_is"] == "billed" and last_cost["accrued_usd"] == round(billed, 6)
    assert re.search(r"cost\s+" + re.escape(f"${billed:.4f} billed"), text), text[-600:]
    assert f"actual spend ${billed:.4f} recorded" in (d / "stream.jsonl").read_text()
    from tplab.lab.proof_png import final_frame, read_events as read_stream
    assert f"${billed:.4f}" in final_frame(read_stream(d / "stream.jsonl"), manifest)
    # the headless view: stages, final table (with the profiled pass's split)
    assert "speedup, single/TP (timed pass)" in text and "verified gone" in text
    assert "TP token (profiled pass)" in text and "is waiting for the other rank" in text
    # the profiled pass over gloo: fetched with the results, its bars, its event streamed, the
    # lesson notes quoting its split, listed among the artifacts
    tl = assert_profiled_pass(d)
    assert tl["comm"] == "gloo" and "trace.json" in manifest["artifacts"]
    assert [e["type"] for e in streamed].count("timeline") == 1
    assert "The profiled pass (torch's profiler on every rank" in manifest["lesson_notes"]
    assert results["calibration"]["tp_split_from"] == "profiled"
    # secrets: neither the mock's API key nor a private key in anything written (each rank's
    # own trace, fetched and listed among the artifacts, read unpacked)
    assert {"traces/rank0.pt.trace.json.gz", "traces/rank1.pt.trace.json.gz"} <= set(
        manifest["artifacts"])
    for path in (p for p in d.rglob("*") if p.is_file()):
        blob = path.read_bytes()
        blob = gzip.decompress(blob) if path.suffix == ".gz" else blob
        assert b"PRIVATE KEY" not in blob, path

    # -- from tests/handin/test_handin.py::test_handin_after_a_mock_lab (it ran run_lab(cfg)
    # on a tiny profiled lab with --out runs/lab02; exit 0: above)
    dest = _handin_after_a_mock_lab(d, tmp_path, capsys)

    # the bar "one truth per figure": this finished lab rendered by every face, each figure
    # the same at the same rounding, the cost after GONE the manifest's actual_cost_usd
    await _every_face_renders_the_labs_one_record(d, text, seen, dest, capsys)

    # -- from test_lab_instance_detach.py::test_full_lab_instance_events_carry_ssh_and_live_uptime_and_list_the_svg
    outcome_pod = manifest["instance_id"]
    assert code == 0 and manifest["status"] == COMPLETE
    running = [e for e in seen if isinstance(e, InstanceEvent) and e.state == "RUNNING"]
    ready = [e for e in running if e.ssh_host and e.ssh_port is not None]
    assert ready, [e.to_json() for e in running]
    first = ready[0]
    assert first.pod_id == outcome_pod and first.uptime_s is not None
    for key in ("provider", "gpu_type", "gpu_count", "spot", "usd_per_hr"):
        assert getattr(first, key) is not None, key
    # it came once the pod was ready, before the SSH connect
    stage_at = [(i, e.name) for i, e in enumerate(seen) if isinstance(e, StageEvent)]
    connect_at = next(i for i, name in stage_at if name == "connect")
    assert seen.index(first) < connect_at
    # the status the lab polls while the job runs keeps uptime (and the endpoint) live
    run_at = next(i for i, name in stage_at if name == "run")
    fetch_at = next(i for i, name in stage_at if name == "fetch")
    live = [e for e in seen[run_at:fetch_at] if isinstance(e, InstanceEvent)]
    assert live and all(e.ssh_host == first.ssh_host for e in live)
    assert (live[-1].uptime_s or 0.0) >= first.uptime_s
    last = seen[-1]
    assert isinstance(last, StageEvent) and last.name == "done"
    inst_gone = [e for e in seen if isinstance(e, InstanceEvent) and e.state == "GONE"]
    assert inst_gone
    # the proof picture is drawn with every lab; add_artifact: the dashboard's svg, listed and
    # named the terminated screenshot
    assert (d / "proof-terminated.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert manifest["terminated_screenshot"] == "proof-terminated.png"
    assert lab.add_artifact("proof-terminated.svg") is None  # not saved: nothing listed
    (d / "proof-terminated.svg").write_text("<svg/>")
    assert lab.add_artifact("../manifest.json") is None
    assert lab.add_artifact("proof-terminated.svg") == d / "manifest.json"
    again = json.loads((d / "manifest.json").read_text())
    assert again["terminated_screenshot"] == "proof-terminated.svg"
    assert "proof-terminated.svg" in again["artifacts"]
    assert "proof-terminated.json" in again["artifacts"]
    assert "proof-terminated.png" in again["artifacts"]
    assert again["status"] == COMPLETE and again["verified_gone"] is True

    # -- from test_lab_images.py::test_image_flag_is_accepted_and_recorded_and_the_pod_lands_on_a_host_that_runs_it
    # (it ran Lab(cfg).run() on the config the flags made; COMPLETE and verified gone: above)
    out = d
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["image"]["name"] == BLACKWELL_RUNPOD and manifest["image"]["named"]
    assert manifest["image"]["why"] == "named with --image"
    record = json.loads((out / "instance.json").read_text())
    assert record["image"] == BLACKWELL_RUNPOD
    pod = next(p for p in mock_cloud.pods() if p["id"] == outcome_pod)
    # the RTX 4090's hosts run CUDA 12.2, 12.4 and 12.8: only 12.8 runs this image
    assert pod["allowedCudaVersions"] == ["12.8"] and pod["hostCuda"] == "12.8"


def _handin_after_a_mock_lab(lab_dir: Path, tmp_path: Path, capsys) -> None:
    """tests/handin/test_handin.py::test_handin_after_a_mock_lab's assertions, unchanged, on the
    full lab's folder: the lab sheet's tree, every file non-empty, the spend lines equal to the
    ledger's for that lab, the budget table's totals equal to `tplab budget`'s, the proof
    picture written with the lab; a student's different file refused without --force;
    one-sentence errors."""
    from tests.handin.test_handin import PNG, SHEET_TREE, _budget_json, _totals, _tree
    from tplab.commands import main as cli
    from tplab.money.budget_config import fmt_usd
    capsys.readouterr()
    assert not (Path(default_ledger_path(True)).parent / "labs").exists()
    assert cli.main(["handin", "--list"]) == 0
    assert str(lab_dir) in capsys.readouterr().out
    # the lab itself wrote the proof picture and names it
    manifest = json.loads((lab_dir / "manifest.json").read_text())
    assert (lab_dir / "proof-terminated.png").read_bytes()[:8] == PNG
    assert manifest["terminated_screenshot"] == "proof-terminated.png"
    assert "proof-terminated.png" in manifest["artifacts"]
    proof = json.loads((lab_dir / "proof-terminated.json").read_text())
    assert proof["routes"] and proof["routes"][0].startswith("GET /v2/pods/")

    dest = tmp_path / "student"
    assert cli.main(["handin", str(dest)]) == 0
    said = capsys.readouterr().out
    assert _tree(dest) == SHEET_TREE
    assert all((dest / rel).stat().st_size > 0 for rel in SHEET_TREE)
    assert all(f"wrote      {rel}" in said for rel in SHEET_TREE) and "MOCK" in said
    tp = dest / "experiments/35-tp-inference"
    # the lab's manifest, its screenshot named by the lab sheet's path in this tree (lab 02's sheet)
    handed = json.loads((tp / "manifest.json").read_text())
    assert handed.pop("terminated_screenshot") == "experiments/35-tp-inference/proof-terminated.png"
    assert handed == {k: v for k, v in manifest.items() if k != "terminated_screenshot"}
    # blocks A and B where the lab sheet puts them, and the README says where each lives in tplab
    assert (dest / "experiments/35-tp-inference/run.py").read_text().count("tplab.job.run") == 1
    assert "class ColumnParallelLinear" in (dest / "src/minitrain/tensor_parallel.py").read_text()
    assert "| A | the TP primitives | `tplab/tp/layers.py`" in (tp / "README.md").read_text()
    assert "(equal to `tplab budget --mock`" in (dest / "experiments/35-cloud-budget.md").read_text()
    assert (tp / "proof-terminated.png").read_bytes()[:8] == PNG
    assert "MOCK" in (tp / "README.md").read_text()
    # the profiled pass's trace, for Perfetto, byte for byte, and the README says what it is
    assert (tp / "trace.json").read_bytes() == (lab_dir / "trace.json").read_bytes()
    assert "| `trace.json` | the profiled pass as one Chrome trace" in (tp / "README.md").read_text()
    # each rank's own trace, as fetched from the pod, where HTA reads the folder
    assert_rank_traces(tp, ranks=2)
    assert "| `traces/` | each rank's own profiler trace" in (tp / "README.md").read_text()
    # the lab's ledger lines, byte for byte
    auth = json.loads((lab_dir / "instance.json").read_text())["auth_id"]
    ledger = default_ledger_path(True).read_bytes().splitlines(keepends=True)
    mine = [ln for ln in ledger if json.loads(ln).get("auth_id") == auth]
    assert [json.loads(ln)["kind"] for ln in mine] == ["authorize", "actual"]
    assert (dest / "experiments/35-cloud-budget/spend.jsonl").read_bytes() == b"".join(mine)
    # the table's totals are tplab budget's
    b = _budget_json(capsys)
    md = (dest / "experiments/35-cloud-budget.md").read_text()
    assert _totals(md) == tuple(fmt_usd(b[k]) for k in ("cap_usd", "spent_usd", "held_usd",
                                                          "remaining_usd"))
    assert f"{lab_dir.name} (this hand-in)" in md and "MOCK" in md

    # again: nothing changes; a student's edit is refused and nothing is written
    assert cli.main(["handin", str(dest), "--lab", lab_dir.name]) == 0
    assert "wrote" not in capsys.readouterr().out
    notes = dest / "experiments/35-reading-notes/synthesis.md"
    notes.write_text("my own synthesis\n")
    (tp / "results.json").unlink()
    assert cli.main(["handin", str(dest)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "synthesis.md" in err and "--force" in err
    assert notes.read_text() == "my own synthesis\n" and not (tp / "results.json").exists()
    assert cli.main(["handin", str(dest), "--force"]) == 0
    assert notes.read_text() != "my own synthesis\n" and (tp / "results.json").is_file()

    assert cli.main(["handin", str(dest), "--lab", "20990101-000000-nope"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no finished lab with id '20990101-000000-nope'" in err
    return dest


async def _every_face_renders_the_labs_one_record(lab_dir: Path, table: str, seen: list,
                                                  dest: Path, capsys) -> None:
    """One finished mock lab rendered by every face: the headless table, `tplab run --json`'s
    figures line, manifest.json, results.json, the dashboard replaying the lab's stream after
    GONE at 80×24 and 200×60, `tplab timeline` (text and --json) and the hand-in; each figure
    the same characters at the same rounding (the lab's record, ``lab_figures``), and the cost
    after GONE the manifest's actual_cost_usd, billed. It pays for one replay of the stream in
    the Textual pilot, drawn at both sizes (no lab)."""
    import html

    from tplab.commands import main as cli
    from tplab.figures.lab_figures import LabFigures, from_manifest
    from tplab.records.events import FiguresEvent
    from tests.tui.helpers import wait_for
    from tests.tui.test_snapshots import settle
    from tui.app import app_from_args
    manifest = json.loads((lab_dir / "manifest.json").read_text())
    results = json.loads((lab_dir / "results.json").read_text())
    f = from_manifest(manifest)
    assert f is not None and f == LabFigures.from_dict(manifest["lab_figures"]) and not f.so_far
    # `tplab run --json`: the lab's figures line, the same record
    (said,) = [e for e in seen if isinstance(e, FiguresEvent)]
    line = json.loads(said.to_json())
    assert line["type"] == "figures" and LabFigures.from_dict(line["figures"]) == f
    # manifest.json and results.json, at each figure's rounding
    m, r = manifest, results
    for fig, value in ((f.single_ms, m["single_gpu_per_token_ms"]), (f.tp_ms, m["tp_per_token_ms"]),
                       (f.speedup, m["speedup"]), (f.allreduce_ms, m["allreduce_ms_per_token"]),
                       (f.allreduce_share, m["allreduce_share"]),
                       (f.comm_compute, m["comm_compute_ratio"]),
                       (f.single_ms, r["single_per_token_ms"]), (f.tp_ms, r["tp_per_token_ms"]),
                       (f.speedup, r["speedup"]), (f.allreduce_ms, r["allreduce_ms_per_token"]),
                       (f.comm_compute, r["comm_compute_ratio"]),
                       (f.instrumented_tp_ms, r["tp"]["instrumented_per_token_ms"]["mean"]),
                       (f.tp_p50_ms, r["tp"]["per_token_ms"]["p50"])):
        assert fig.at_rounding(value) == fig.text(), (fig, value)
    assert f.crossover.d_model == m["crossover_d_model"]
    assert f.crossover.band.text() == m["crossover"]["text"] and m["crossover"]["text"] in \
        m["lesson_notes"]
    assert f.crossover.measured_on == m["measured_on"]
    assert f.profiled_tp.token_us == r["timeline"]["modes"]["tp"]["median"]["token_us"]
    # the cost after GONE is the manifest's actual_cost_usd, billed
    assert f.cost.what == "billed" and f.cost.usd == m["actual_cost_usd"]
    cost = f"${m['actual_cost_usd']:.4f} billed"
    assert f.cost.text() == cost
    shown = [f.single_ms.text(), f.tp_ms.text(), f.speedup.text(), f.allreduce_text(),
             f.allreduce_share.text(), f.comm_compute.text(), f.profiled_text("tp"),
             f.crossover.text(), cost]
    # the headless table, and the lesson notes where they quote a figure
    for text in shown:
        assert text in table, text
    assert f"TP {f.tp_ms.text()}/token" in m["lesson_notes"]
    # `tplab timeline`: the profiled pass beside the timed figure, the record in --json
    capsys.readouterr()
    assert cli.main(["timeline", str(lab_dir)]) == 0
    timeline = capsys.readouterr().out
    assert f.profiled_against_timed("tp") in timeline and f.tp_ms.text() in timeline
    assert cli.main(["timeline", str(lab_dir), "--json"]) == 0
    assert LabFigures.from_dict(json.loads(capsys.readouterr().out)["figures"]) == f
    # the hand-in: its manifest (above, equal to the lab's) and its README's figures
    readme = (dest / "experiments/35-tp-inference/README.md").read_text()
    for label, text in f.rows():
        assert f"| {label} | {text} |" in readme, label
    spend = (dest / "experiments/35-cloud-budget.md").read_text()
    assert f"${m['actual_cost_usd']:.4f}".rstrip("0") in spend
    # the dashboard after GONE, replaying the lab's stream, at 80×24 and 200×60: each view's
    # screen as it is drawn (the strip, the panels, the plot's legend, the timeline's header)
    app = app_from_args(["--replay", str(lab_dir), "--speed", "max"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.runner.outcome is not None, what="the replay")
        assert app.state.instance.gone and app.state.figures == f
        for size, figures_key in (((80, 24), "4"), ((200, 60), "1")):
            await pilot.resize_terminal(*size)
            screens = []
            for key in ("1", figures_key, "2", "5"):
                await pilot.press(key)
                await settle(pilot, app)
                screens.append(html.unescape(app.export_screenshot()).replace("\xa0", " "))
            plot, figures, scaling, timeline = screens
            # each screen holds its figures: the plot's legend the strip's share, the
            # scaling panel's title the lab's crossover, the timeline the profiled median
            # beside the timed figure, and at 80×24 the strip on every screen
            assert f"tp (instr. AR {f.allreduce_share.text()})" in plot, size
            assert f"crossover {f.crossover.short()}" in scaling, size
            assert f.profiled_against_timed("tp") in timeline, size
            if size == (80, 24):  # the strip, as drawn (its styled runs joined)
                strip = (f"timed single {f.single_ms.number()} tp {f.tp_ms.number()} ms · "
                         f"speedup {f.speedup.text()} · instr. AR {f.allreduce_share.text()}")
                shown = app.summary._shown.plain
                assert strip in shown and f"· {cost}" in shown, shown
                assert all(f.single_ms.number() in screen for screen in screens)
            else:  # the Timings and Instance panels, beside the plot
                panels = app.timings_panel._shown.plain + app.instance_panel._shown.plain
                mean = f"mean ms{f.single_ms.number():>17}{f.tp_ms.number():>9}"
                for text in (mean, f"{f.allreduce_text()}*", f"{f.comm_compute.text()}*",
                             f"{f.speedup.text()} (single/tp)", f"{cost} at $"):
                    assert text in panels and text.split()[-1] in figures, text


async def test_ssh_dropped_twice_every_event_exactly_once(lab_assets, tmp_path):
    """Scenario "every transient fault, complete": one lab through a runtime that is null at
    first, an sshd that refuses at first, two SSH connections cut under the transport, two
    failing terminates, two 500s on the pod's status and five on its bill, each a proxy's HTML
    page (more than the client's retries on the bill: the settle says it could not read it, in
    the page's words) and a terminate that lingers for 4 reads;
    it completes, every event exactly once. The labs of four tests were this one:
    test_ssh_dropped_twice_every_event_exactly_once (the drops, every event once, no gap, no
    duplicate, the key nowhere), test_slow_runtime_and_refused_ssh_are_waited_out (COMPLETE, the
    ssh retries logged), test_api_errors_and_failing_terminates_still_end_verified_gone
    (COMPLETE, verified gone, TERMINATED, ledger settled) and, from test_lab_stops_e2e.py,
    test_a_terminate_that_lingers_is_waited_for_and_one_never_gone_is_not_called_gone[4]
    (exit 0, manifest COMPLETE and verified gone, TERMINATED). What it pays for: one whole lab
    with each fault waited out (the provider's backoff shortened: ``QUICK_RETRIES``)."""
    from tplab.mock.handle import start_mock_cloud
    cloud = start_mock_cloud({"runtime_null_s": 0.5, "ssh_refuse_s": 2.0, "terminate_fail_n": 2,
                              "http_500": {"GET /v2/pods/{id}": 2, "GET /v2/billing/pods": 5},
                              "error_page": True,
                              "terminate_lingers": 4},
                             boot_delay_s=0.3, state_dir=tmp_path / "mock-state")
    try:
        await _every_transient_fault(lab_assets, tmp_path, cloud)
    finally:
        cloud.stop()


#: the provider's backoff before it asks again after a 5xx or a failed terminate, shortened:
#: the faults come and are retried the same, without the seconds a real cloud is given
QUICK_RETRIES = {"retry_delays": (0.1, 0.2, 0.4), "terminate_delays": (0.1, 0.2, 0.4, 0.8)}


async def _every_transient_fault(lab_assets, tmp_path, mock_cloud) -> None:
    from tplab.cloud.registry import provider_for
    prov = provider_for("runpod", mock_cloud.api_key, mock_cloud.api_url, **QUICK_RETRIES)
    cfg = _cfg(lab_assets, tmp_path, new_tokens=16)
    lab = Lab(cfg, provider=prov)
    events = lab.subscribe()
    drops = 0
    waiting_reconnect = False
    job_seqs: list[int] = []
    attempts = []

    async def saboteur():
        nonlocal drops, waiting_reconnect
        async for ev in events:
            if isinstance(ev, LogEvent) and ev.msg.startswith("ssh attempt"):
                attempts.append(ev.msg)
            if ev.src == "job":
                job_seqs.append(ev.seq)
                if (drops < 2 and not waiting_reconnect and lab.session is not None
                        and lab.session.conn is not None):
                    drops += 1
                    waiting_reconnect = True
                    lab.session.conn.abort()  # the TCP connection dies under the transport
            elif isinstance(ev, SshEvent) and ev.state == "connected":
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
    # -- fault suite: "API 500 page": the proxy's page said as its words, never its HTML
    stream = (outcome.out_dir / "stream.jsonl").read_text()
    assert "500 Internal Server Error: cloudflare" in stream
    assert "<html" not in stream and "<script" not in stream and "window.__cf" not in stream
    # -- from test_slow_runtime_and_refused_ssh_are_waited_out
    assert attempts, "sshd refused at first: the client should have retried"
    # -- from test_api_errors_and_failing_terminates_still_end_verified_gone
    assert mock_cloud.pods()[0]["desiredStatus"] == "TERMINATED"
    _assert_settled(cfg.ledger_label())
    # -- from test_lab_stops_e2e.py::test_a_terminate_that_lingers_...[4] (it ran `run_lab`, whose
    # exit code is the outcome's)
    m = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert m["status"] == "COMPLETE" and m["verified_gone"] is True


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["ctrl-c", "sighup"])
def test_ctrl_c_while_booting_terminates_and_settles(lab_assets, tmp_path, sig):
    """Ctrl-C (SIGINT to the process group), or the terminal closed (SIGHUP: the fault suite's
    "client SIGHUP in boot" row, with its bound, ledger and canary rows), while the pod boots."""
    from tplab.mock.handle import start_mock_cloud
    ckpt, prompts = lab_assets
    cloud = start_mock_cloud(boot_delay_s=60.0, state_dir=tmp_path / "mock-state")
    try:
        proc = _cli(["run", "--mock", "--api-url", cloud.api_url, "--json",
                     "--prompts", "2", "--new-tokens", "8", "--no-sweep",
                     "--checkpoint", str(ckpt), "--prompts-file", str(prompts),
                     "--out", str(tmp_path / "out")], {"RUNPOD_API_KEY": cloud.api_key})
        seen = _json_events_until(proc, lambda e: e["type"] == "phase" and e["name"] == "boot",
                                  60)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)   # Ctrl-C reaches the process group
        else:
            os.kill(proc.pid, sig)
        t_sig = time.monotonic()
        rest = _json_events_until(proc, lambda e: e["type"] == "phase" and e["name"] == "done",
                                  60)
        proc.wait(30)
        err = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        done = rest[-1]
        said = "Ctrl-C" if sig == signal.SIGINT else "SIGHUP"
        assert proc.returncode == 4  # stopped by the user, the pod verified gone
        assert done["status"] == STOPPED and said in done["reason"]
        assert done["verified_gone"] is True
        assert said in err
        pods = cloud.pods()
        assert len(pods) == 1 and pods[0]["desiredStatus"] == "TERMINATED"
        _assert_settled("lab02-tp-spinup-rtx4090x2")
        assert [e["kind"] for e in _ledger_lines()] == ["authorize", "actual"]
        if sig == signal.SIGHUP:  # -- fault suite: "client SIGHUP in boot", pod gone <= 15 s
            assert time.monotonic() - t_sig <= 15.0
            assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))
            assert_key_unwritten(cloud.api_key, tmp_path, [json.dumps(seen + rest), err])
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
    # a lab that never rented says so, and has no proof of an end it never had
    assert manifest["pod_created"] is False and manifest["verified_gone"] is None
    assert manifest["instance_id"] is None and manifest["cost_is"] is None
    assert not any((tmp_path / "out" / f"proof-terminated.{x}").exists()
                   for x in ("json", "png", "svg"))


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
    """The lab ends at its wall cap (or its lab cap, reached first) through terminate and verify,
    with one 80 % warning on the way. What it pays for: a lab running to its 3 s wall cap."""
    prov = _provider(mock_cloud.api_key, mock_cloud.api_url)
    # $0.70/h for at most 3 s costs at most $0.00058: within a $0.0006 authorization, whose
    # 80% ($0.00048) is reached after about 2.5 s; the job (10 x 100 tokens) runs far longer
    cfg = _cfg(lab_assets, tmp_path, lab_cap_usd=0.0006, wall_cap_s=3.0, num_prompts=10,
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
    assert ("wall-clock cap" in outcome.reason or "lab cap $0.0006 was reached" in outcome.reason
            or "watchdog" in outcome.reason), outcome.reason
    assert outcome.verified_gone
    warnings = [e for e in seen if isinstance(e, WarningEvent) and e.kind == "budget80"]
    assert len(warnings) == 1 and "80%" in warnings[0].msg
    costs = [e for e in seen if isinstance(e, CostEvent)]
    assert costs and costs[-1].accrued_usd <= 0.0025
    assert all(c.seconds_left <= 3.5 for c in costs)
    pods = mock_cloud.pods()
    assert pods[0]["desiredStatus"] == "TERMINATED"
    _assert_settled(cfg.ledger_label())


async def test_spot_interruption_ends_the_lab_through_terminate(lab_assets, tmp_path):
    """What it pays for: a lab running until the mock takes its spot pod back (4 s after it ran)."""
    from tplab.mock.handle import start_mock_cloud
    cloud = start_mock_cloud({"spot_interrupt_after_s": 4.0}, boot_delay_s=0.3,
                             state_dir=tmp_path / "mock-state")
    try:
        prov = _provider(cloud.api_key, cloud.api_url)
        # the pod's state read every 0.5 s while the job runs (the default 3 s: a user's lab
        # notices it within that; here the check is that it ends through terminate)
        cfg = _cfg(lab_assets, tmp_path, num_prompts=10, new_tokens=100, status_poll_s=0.5)
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
