"""The dashboard driving the real orchestrator on the mock cloud (real provider, SSH, job on
this CPU, ledger, manifest). Tiny labs: 2 prompts × 8 tokens, no sweep."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Button

from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.lab.lab_config import STOPPED
from tplab.lab.orchestrator import Lab
from tplab.lab.providers import provider_for as _provider
from tests.e2e_fixtures import PROFILED, tiny_lab_config
from tui.app import TplabApp
from tui.screens.quit import ConfirmLeaveScreen, QuitScreen
from tui.widgets.scaling_panel import ScalingSource

from .helpers import svg_text, wait_for

pytestmark = pytest.mark.slow
SIZE = (160, 48)
#: a lab long enough to be interrupted (prompt + new tokens stay under block_size 160)
LONG = {"num_prompts": 4, "new_tokens": 140}
#: the lab TERMINATE interrupts once 30 TP tokens are in (all 10 prompts done on one device)
MID = {"num_prompts": 10, "new_tokens": 60}
#: ... without the untimed warm-up decodes (20 tokens per mode): no figure it shows needs them
NO_WARMUP = {"warmup": 0}


_cfg = tiny_lab_config


def _mock_app(cfg, mock_cloud) -> tuple[TplabApp, list[Lab]]:
    """The dashboard, started, on labs against the test's mock cloud; the list holds each Lab made."""
    prov = _provider(mock_cloud.api_key, mock_cloud.api_url)
    labs: list[Lab] = []

    def factory() -> Lab:
        labs.append(Lab(cfg, provider=prov))
        return labs[-1]

    return TplabApp(factory, start=True), labs


async def test_start_shows_timings_then_results_and_manifest(lab_assets, tmp_path, mock_cloud):
    """Scenario "the dashboard, complete". Its lab is also the one
    test_replaying_a_finished_mock_lab_reaches_its_end_and_creates_no_pod replayed (it ran a
    lab of its own): the replay's assertions close this test. It pays for one whole mock lab
    (torchrun on this CPU), with the profiled pass that key 5 shows."""
    cfg = _cfg(lab_assets, tmp_path, **PROFILED)
    prov = _provider(mock_cloud.api_key, mock_cloud.api_url)
    app = TplabApp(lambda: Lab(cfg, provider=prov), plan={"num_prompts": 2, "new_tokens": 8},
                   scaling=ScalingSource.for_config(cfg))
    token_seen_while_running = False
    timeline_while_running = ""
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        while app.runner.outcome is None and app.runner.lab_error is None:
            await pilot.pause(0.05)
            if app.runner.lab_active and app.state.timings["tp"].count + \
                    app.state.timings["single"].count > 0:
                token_seen_while_running = True
            if (app.runner.lab_active and app.state.timeline is not None
                    and not timeline_while_running):  # the profiled pass, live: key 5 shows it
                await pilot.press("5")
                await pilot.pause(0.2)
                app.redraw(force=True)
                timeline_while_running = str(app.timeline_panel.border_title)
            assert pilot.app.is_running
        await wait_for(pilot, lambda: app.runner.proof_path is not None, what="proof screenshot")
    assert app.runner.lab_error is None, app.runner.lab_error
    assert token_seen_while_running, "timings never appeared while the lab ran"
    assert timeline_while_running.startswith("Timeline · profiled TP token 1/4"), timeline_while_running
    out = app.runner.outcome
    assert out.status == "COMPLETE", out.reason
    assert out.verified_gone and out.exit_code == 0 and app.runner.quitting.exit_code() == 0
    s = app.state
    assert s.timings["single"].count == 2 * 8 and s.timings["tp"].count == 2 * 8
    assert s.outputs_match() is True and s.terminate_status == "gone"
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert manifest["status"] == "COMPLETE" and manifest["verified_gone"] is True
    assert manifest["instance_id"] == s.instance.pod_id
    proof = cfg.out_dir / "proof-terminated.svg"
    assert app.runner.proof_path == proof
    text = svg_text(proof)
    assert "POD GONE ✓" in text and "COMPLETE" in text and s.instance.pod_id in text
    assert "MOCK" in text and "MOCK" in app.title and s.mock  # unmistakable, in the proof too
    # the lab listed the saved screen in the manifest (add_artifact)
    manifest = json.loads((cfg.out_dir / "manifest.json").read_text())
    assert manifest["terminated_screenshot"] == "proof-terminated.svg"
    assert "proof-terminated.svg" in manifest["artifacts"]
    assert manifest["status"] == "COMPLETE" and manifest["verified_gone"] is True
    # the instance panel had the pod's SSH endpoint and uptime from the lab's events
    assert s.instance.ssh_host and s.instance.ssh_port and s.instance.uptime_s is not None
    # after GONE the strip, the Instance panel and the saved screen show the billed cost, the
    # manifest's (the PNG's and the SVG's the same figure), not the running estimate
    billed = f"${manifest['actual_cost_usd']:.4f} billed"
    assert manifest["cost_is"] == "billed" and s.cost.billed
    assert billed in app.summary._shown.plain and billed in app.instance_panel._shown.plain
    assert billed in text
    # the proof SVG (the dashboard's screen) and the proof PNG (the final frame it draws) of
    # this lab show each figure in the same characters: both render the lab's one record
    from tplab.figures.lab_figures import from_manifest
    from tplab.lab.proof_png import final_frame, fit_lines, read_events as read_stream
    f = from_manifest(manifest)
    drawn = "\n".join(fit_lines(final_frame(read_stream(cfg.out_dir / "stream.jsonl"),
                                             manifest)))
    for shown in (f.single_ms.number(), f.tp_ms.number(), f.speedup.text(),
                  f.allreduce_text(), f.comm_compute.text(), f.cost.text()):
        assert shown in text and shown in drawn, shown
    assert f.cost.usd == manifest["actual_cost_usd"] and s.figures == f

    # -- from test_replaying_a_finished_mock_lab_reaches_its_end_and_creates_no_pod
    from tui.app import app_from_args
    lived = app.state
    pods_before = mock_cloud.pods()
    assert len(pods_before) == 1
    replay = app_from_args(["--replay", str(cfg.out_dir), "--speed", "max"])
    async with replay.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: replay.runner.outcome is not None, what="the replay")
        s = replay.state
        assert "REPLAY" in replay.title and "no pod" in replay.title
        assert s.done_status == "COMPLETE" and s.instance.gone
        assert s.timings["tp"].count == lived.timings["tp"].count == 2 * 8
        assert s.results["speedup"] == lived.results["speedup"]
        # the replay's timeline is the live one: key 5, then the next token
        assert s.timeline is not None and s.timeline.splits == lived.timeline.splits
        await pilot.press("5", "right_square_bracket")
        replay.redraw(force=True)
        assert str(replay.timeline_panel.border_title).startswith("Timeline · profiled TP token 2/4")
    assert [(p["id"], p["desiredStatus"]) for p in mock_cloud.pods()] == [
        (p["id"], p["desiredStatus"]) for p in pods_before]  # the replay created nothing


async def test_terminate_mid_run_leaves_no_pod_in_the_mock_api(lab_assets, tmp_path, mock_cloud):
    """Scenario "TERMINATE mid-run". Its lab is also the one
    tests/lab/test_lab_stops_e2e.py::test_terminate_mid_run_keeps_the_figures_measured_so_far
    ran (10 prompts x 60 tokens, TERMINATE once 30 TP tokens are in): the figures measured so
    far, kept in the manifest, close this test. It pays for one whole mock lab up to 30 TP
    tokens (the single pass of the first prompt, 60 tokens, comes before them)."""
    cfg = _cfg(lab_assets, tmp_path, **MID, **NO_WARMUP)
    app, labs = _mock_app(cfg, mock_cloud)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.timings["single"].count > 0, timeout=180,
                       what="first tokens")
        await wait_for(pilot, lambda: app.state.timings["tp"].count >= 30, timeout=180,
                       what="30 TP tokens")
        pod_id = app.state.instance.pod_id
        assert [p["desiredStatus"] for p in mock_cloud.pods() if p["id"] == pod_id] == ["RUNNING"]
        single_seen = app.state.timings["single"].count  # measured before TERMINATE
        button = app.query_one("#terminate", Button)
        labels: list[str] = []
        show = app.action_bar.show

        def recording_show(*a, **kw):  # every label the button showed, in order
            show(*a, **kw)
            if not labels or labels[-1] != str(button.label):
                labels.append(str(button.label))

        app.action_bar.show = recording_show
        await pilot.press("ctrl+t")
        await pilot.click("#terminate")  # a second press: nothing extra
        while app.runner.outcome is None and app.runner.lab_error is None:
            await pilot.pause(0.02)
        await pilot.pause(0.3)
        final = str(app.query_one("#terminate", Button).label)
    assert app.runner.lab_error is None, app.runner.lab_error
    progress = [label for label in labels if label != "TERMINATE"]
    assert progress[0] == "TERMINATING…" and progress[-1] == final == "POD GONE ✓", labels
    assert app.runner.outcome.verified_gone and app.runner.outcome.pod_id == pod_id
    assert app.state.timings["tp"].count < MID["num_prompts"] * MID["new_tokens"]  # mid-run
    pod = next(p for p in mock_cloud.pods() if p["id"] == pod_id)
    assert pod["desiredStatus"] == "TERMINATED"
    stops = [line for line in app.state.log if "terminate requested" in line.text]
    assert len(stops) == 1  # the lab was asked once
    # -- from tests/lab/test_lab_stops_e2e.py::test_terminate_mid_run_keeps_the_figures_measured_so_far
    outcome = app.runner.outcome
    assert outcome.status == STOPPED and outcome.exit_code == 4, outcome.reason
    assert "stopped by the user" in outcome.reason and outcome.verified_gone
    m = json.loads((outcome.out_dir / "manifest.json").read_text())
    assert m["status"] == STOPPED and m["figures"] == "partial"
    part = m["partial"]
    # the job now alternates a single and a TP pass prompt by prompt (main's job/run.py): once
    # 30 TP tokens are in, prompt 0's single pass is done (60 tokens on the dashboard, 59 timed
    # in the manifest), not all ten prompts' as when every single pass came first
    assert single_seen >= 60 and part["single_tokens"] >= 59 and part["tp_tokens"] >= 25
    assert m["single_gpu_per_token_ms"] == part["single_per_token_ms"] > 0
    assert m["tp_per_token_ms"] == part["tp_per_token_ms"] > 0
    assert "partial" in m["lesson_notes"] and "single-device" in m["lesson_notes"]
    # what the pod could tell came back before it went
    assert (outcome.out_dir / "job.log").is_file() and (outcome.out_dir / "watchdog.log").is_file()
    assert BudgetGuard(default_ledger_path(mock=True), 5.0).held == 0.0


async def test_quit_while_running_protects_the_pod(lab_assets, tmp_path, mock_cloud):
    """It pays for a mock cloud and a lab up to its pod (no job)."""
    cfg = _cfg(lab_assets, tmp_path, **LONG)
    app, _ = _mock_app(cfg, mock_cloud)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.instance.pod_id is not None, timeout=120,
                       what="a pod")
        pod_id = app.state.instance.pod_id
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="quit dialog")
        await pilot.press("escape")
        await pilot.pause(0.3)
        assert app.is_running and app.runner.lab_active
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="quit dialog")
        await pilot.press("t")  # terminate and quit: the app closes once the pod is gone
        await wait_for(pilot, lambda: not app.is_running, timeout=120, what="the app to exit")
    assert app.runner.outcome is not None and app.runner.outcome.verified_gone
    pod = next(p for p in mock_cloud.pods() if p["id"] == pod_id)
    assert pod["desiredStatus"] == "TERMINATED"
    assert (cfg.out_dir / "proof-terminated.svg").is_file()


async def test_leave_running_detaches_and_the_pod_stays_running(lab_assets, tmp_path, mock_cloud):
    """It pays for a mock cloud and a lab up to a ready pod."""
    from tplab.lab import instances as instance_store
    cfg = _cfg(lab_assets, tmp_path, **LONG)
    app, labs = _mock_app(cfg, mock_cloud)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.instance.ssh_port is not None, timeout=120,
                       what="a ready pod")
        pod_id = app.state.instance.pod_id
        await pilot.press("q", "l")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmLeaveScreen),
                       what="confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to exit")
        await wait_for(pilot, lambda: labs[0].detached, timeout=30, what="the lab to detach")
    lab = labs[0]
    assert app.runner.quitting.left_running and app.return_code == 0
    assert lab.detached and not lab.verified_gone and lab.pod_id == pod_id
    # the mock API (still up: the test's own mock cloud) shows the pod running
    assert [p["desiredStatus"] for p in mock_cloud.pods() if p["id"] == pod_id] == ["RUNNING"]
    assert pod_id in [r.pod_id for r in instance_store.open_records(mock=True)]
    assert f"tplab terminate {pod_id} --mock" in lab.summary()["reason"]
    proof = await lab.terminate_pod(pod_id)  # what the warning says to run, in-process
    assert proof.gone
