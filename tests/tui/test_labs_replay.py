"""Past labs: the Labs screen lists the lab folders and opens one in the same panels; a replay
plays a finished lab's stream at a chosen speed and never has a pod."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from tplab.records.events import ResultEvent
from tplab.viewmodel.past_labs import find_labs
from tui.app import TplabApp, app_from_args
from tests.synthetic_lab import ScriptOptions, lab_script
from tui.screens.past_labs_screen import LabsScreen
from tui.replay import ReplayLab, parse_speed

from .helpers import wait_for

N_PROMPTS, N_TOKENS = 2, 12


def write_lab(folder: Path, *, mock: bool, status: str = "COMPLETE", until: str = "done",
              start: str = "2026-11-30T10:00:00+00:00", profiled: bool = False,
              faster: float = 1.0) -> Path:
    """A lab folder as the orchestrator leaves it: the stream, the manifest, the results.
    ``faster``: the recording's clock runs that many times faster (the script's lab lasts 21 s:
    a replay at ×10 of it takes 2 s, at ``faster=10`` a fifth of a second)."""
    folder.mkdir(parents=True)
    events = lab_script(ScriptOptions(num_prompts=N_PROMPTS, new_tokens=N_TOKENS, until=until,
                                      profiled=profiled))
    if faster != 1.0:
        t0 = events[0].ts
        events = [replace(e, ts=t0 + (e.ts - t0) / faster) for e in events]
    (folder / "stream.jsonl").write_text("".join(e.to_json() + "\n" for e in events))
    result = next((e.results for e in events if isinstance(e, ResultEvent)), None)
    if result:
        (folder / "results.json").write_text(json.dumps(result))
    (folder / "manifest.json").write_text(json.dumps({
        "instance_type": "2x NVIDIA GeForce RTX 4090 spot", "instance_id": "synth7x2k9q",
        "start_ts": start, "status": status, "reason": "the lab completed", "mock": mock,
        "speedup": result["speedup"] if result else None, "crossover_d_model": 1950.0,
        "actual_cost_usd": 0.0123, "verified_gone": True, "world_size": 2,
        "num_prompts": N_PROMPTS, "new_tokens": N_TOKENS,
        "vendor": "mock RunPod (local)" if mock else "RunPod"}))
    return folder


def _home() -> Path:
    return Path(os.environ["TPLAB_HOME"])


def test_find_labs_reads_each_folder_and_says_what_is_wrong(tmp_path):
    write_lab(_home() / "labs" / "real-1", mock=False, start="2026-11-29T10:00:00+00:00")
    write_lab(_home() / "mock" / "labs" / "mock-1", mock=True)
    extra = write_lab(tmp_path / "runs" / "lab02", mock=False, status="STOPPED", until="terminated",
                      start="2026-11-28T10:00:00+00:00")
    broken = tmp_path / "runs" / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    (broken / "stream.jsonl").write_text("")
    from tplab.viewmodel.past_labs import default_roots
    labs = find_labs(default_roots(), [tmp_path / "runs"])
    by_id = {lab.lab_id: lab for lab in labs}
    # newest first (a folder without a readable manifest or stream: by its own time)
    assert [lab.lab_id for lab in labs if lab.lab_id != "broken"] == ["mock-1", "real-1", "lab02"]
    assert by_id["mock-1"].mock and not by_id["real-1"].mock
    assert by_id["lab02"].status == "STOPPED" and by_id["lab02"].path == extra.resolve()
    assert by_id["real-1"].crossover_text == ">128 meas · ≈1,950 pred"
    assert "manifest.json is unreadable" in by_id["broken"].problem


async def test_the_labs_screen_opens_a_lab_in_the_same_panels(tmp_path):
    folder = write_lab(_home() / "mock" / "labs" / "mock-1", mock=True, profiled=True)
    app = TplabApp(None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LabsScreen) and app.screen.labs,
                       what="the lab list")
        detail = str(app.screen.query_one("#labs-detail-text").render())
        assert "mock-1" in detail and "MOCK" in detail and "verified gone ✓" in detail
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.state.done and not app.runner.lab_active, what="the lab")
        s = app.state
        assert app.runner.mode == "past" and "PAST LAB" in app.title and "MOCK" in app.title
        assert s.done_status == "COMPLETE" and s.instance.gone
        assert s.timings["single"].count == N_PROMPTS * N_TOKENS
        assert s.timings["tp"].count == N_PROMPTS * N_TOKENS
        assert s.results and s.results["outputs_match"] is True
        # its profiled pass: key 5 draws it, m switches to the single device's tokens
        await pilot.press("5", "m")
        app.redraw(force=True)
        assert str(app.timeline_panel.border_title).startswith("Timeline · profiled single token 1/4")
        assert app.scaling_panel.source.mock  # the curve of that lab's hardware
        await wait_for(pilot, lambda: app.scaling_panel.curve is not None, what="the curve")
        assert app.action_bar.terminate_button.label.plain == "NO POD (recording)"
        assert app.runner.proof_path is None and not (folder / "proof-terminated.svg").exists()
        await pilot.press("q")  # a recording has no pod: quit at once
        await wait_for(pilot, lambda: not app.is_running, what="exit")


async def test_replay_plays_to_the_labs_end_at_the_chosen_speed_and_has_no_pod(tmp_path):
    folder = write_lab(tmp_path / "lab", mock=False, until="terminated", status="STOPPED")
    app = app_from_args(["--replay", str(folder), "--speed", "max"])
    assert app.runner.replay_speed == 0 and app.autostart and not app.runner.save_proof
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.runner.outcome is not None, what="the replay's end")
        assert "REPLAY" in app.title and "no pod" in app.title
        assert app.state.done_status == "STOPPED" and app.runner.quitting.exit_code() == 0
        await pilot.press("ctrl+t")  # nothing to terminate: it says so, nothing is swept
        assert app.runner.sweep_factory is None and not app.runner.sweeping
        await pilot.press("plus")  # the speed keys
        assert "×1" not in app.title
        await pilot.press("minus", "minus")
        assert "×10 " in app.title
        await pilot.press("s")  # again
        await wait_for(pilot, lambda: app.runner.lab_active, what="the second replay")
        assert app.runner.lab.speed == 10.0


async def test_replay_speed_and_clock():
    assert parse_speed("x10") == 10.0 and parse_speed("max") == 0 and parse_speed("1") == 1.0
    lab = ReplayLab(Path("/nonexistent"), speed=10)
    lab.speed = 0
    assert lab.speed == 0


def test_replay_refuses_a_folder_without_a_stream(tmp_path, capsys):
    import pytest
    with pytest.raises(SystemExit) as exc:
        app_from_args(["--replay", str(tmp_path)])
    assert exc.value.code == 2
    assert "has no stream.jsonl to replay" in capsys.readouterr().err


def test_the_labs_screen_names_each_money_figure_for_what_it_is(tmp_path):
    """The estimate is the estimate; the authorization is what the ledger held."""
    from tplab.viewmodel.past_labs import read_lab
    from tui.screens.past_lab_detail import detail

    folder = write_lab(tmp_path / "lab", mock=True)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.update(authorized_usd=3.0, estimated_cost_usd=0.037, worst_case_usd=1.4)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    text = detail(read_lab(folder)).plain
    assert "$0.0370 estimated" in text and "$3.00 held by the ledger" in text
    assert "worst case $1.40" in text and "$0.0123 billed" in text
    assert "$0.04 authorized" not in text


async def test_start_after_a_replay_from_the_labs_screen_plays_it_again(tmp_path):
    """As help says: in a replay, s plays the same lab again (never starts a lab of its own);
    n, offered only then, starts one."""
    folder = write_lab(_home() / "mock" / "labs" / "mock-1", mock=True, faster=10.0)
    started: list[int] = []

    class NewLab(ReplayLab):  # a lab of the dashboard's own, that never needs a cloud
        def __init__(self) -> None:
            started.append(1)
            super().__init__(folder, speed=0)

    app = TplabApp(NewLab, mock=True, save_proof=False)
    async with app.run_test(size=(120, 40)) as pilot:
        assert "new_lab" not in {b.binding.action for b in app.active_bindings.values()}
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LabsScreen) and app.screen.labs,
                       what="the lab list")
        await pilot.press("r")
        await wait_for(pilot, lambda: app.runner.outcome is not None, what="the replay's end")
        assert app.runner.mode == "replay" and app.action_bar.start_button.label.plain == "Replay"
        first = app.runner.lab
        await pilot.press("s")
        await wait_for(pilot, lambda: app.runner.lab is not first, what="the replay again")
        assert app.runner.mode == "replay" and started == []
        assert isinstance(app.runner.lab, ReplayLab) and app.runner.lab.lab_dir == folder.resolve()
        assert "REPLAY" in app.title and "mock-1" in app.title
        await wait_for(pilot, lambda: not app.runner.lab_active, what="the second replay's end")
        assert app.active_bindings["n"].binding.action == "new_lab"
        await pilot.press("n")
        await wait_for(pilot, lambda: started == [1] and app.runner.mode == "live",
                       what="a lab of its own")
        await wait_for(pilot, lambda: not app.runner.lab_active, what="its end")
        assert "n" not in app.active_bindings
