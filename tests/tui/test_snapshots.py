"""Snapshot tests of the dashboard's fixed states at the three sizes that matter: 80×24 (the
size many terminals open at: narrow layout), 120×40 (medium) and 200×60 (wide).

Each state is the synthetic lab's deterministic event script folded into the app's state with a
fixed clock, so the SVG is byte-stable. Update after a deliberate visual change with
``pytest tests/tui/test_snapshots.py --snapshot-update`` and look at the report.
"""

from __future__ import annotations

import pytest

from tplab.records.events import Event, ResultEvent
from tplab.viewmodel.parts import Budget
from tui.app import TplabApp
from tests.synthetic_lab import ScriptOptions, lab_script
from tui.widgets.plot import ThreadedPlot
from tui.widgets.scaling_panel import ScalingSource

NARROW, MEDIUM, WIDE = (80, 24), (120, 40), (200, 60)
PLAN = {"num_prompts": 3, "new_tokens": 24, "world_size": 2,
        "gpu_type": "NVIDIA GeForce RTX 4090", "spot": True}
#: what the ledger says before a lab (the dashboard reads it before its first frame)
LEDGER = Budget(cap_usd=5.0, spent_usd=0.42, held_usd=0.0, remaining_usd=4.58, lab_cap_usd=3.0,
                needed_usd=3.5, source="ledger")


def _app(events: list[Event], *, requested: bool = False, keys: tuple[str, ...] = (),
         mock: bool = False) -> tuple[TplabApp, object]:
    clock_t = (events[-1].ts + 3.0) if events else 1_764_450_000.0
    app = TplabApp(None, clock=lambda: clock_t, plan=dict(PLAN), mock=mock,
                   scaling=ScalingSource("NVIDIA GeForce RTX 4090", 2), ledger=lambda: LEDGER)

    async def run_before(pilot) -> None:
        if requested:
            app.state.note_terminate_requested()
        app.runner.feed(events)
        app.redraw(force=True)  # may start the scaling recalibration (a thread worker)
        if keys:
            await pilot.press(*keys)
        await settle(pilot, app)

    return app, run_before


async def settle(pilot, app: TplabApp) -> None:
    """Until the scaling model answered and every plot's threaded build is done."""
    plots = list(app.query(ThreadedPlot))
    for _ in range(2):
        for _ in range(400):
            if not any(p.busy for p in plots):
                break
            await pilot.pause(0.05)
        app.redraw(force=True)
    await pilot.pause()


def _script(until: str) -> list[Event]:
    return lab_script(ScriptOptions(num_prompts=3, new_tokens=24, until=until))


@pytest.mark.parametrize("size", [NARROW, MEDIUM, WIDE], ids=["80x24", "120x40", "200x60"])
def test_idle(snap_compare, size):
    app, run_before = _app([], mock=True)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [NARROW, MEDIUM, WIDE], ids=["80x24", "120x40", "200x60"])
def test_running(snap_compare, size):
    app, run_before = _app(_script("running"))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("view", ["2", "3", "4"], ids=["scaling", "log", "figures"])
def test_running_narrow_views(snap_compare, view):
    app, run_before = _app(_script("running"), keys=(view,))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before)


def test_running_medium_log(snap_compare):
    app, run_before = _app(_script("running"), keys=("3",))
    assert snap_compare(app, terminal_size=MEDIUM, run_before=run_before)


def test_terminated_by_the_user(snap_compare):
    app, run_before = _app(_script("terminated"), requested=True)
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_error(snap_compare):
    app, run_before = _app(_script("error"))
    assert snap_compare(app, terminal_size=MEDIUM, run_before=run_before)


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "200x60"])
def test_complete(snap_compare, size):
    app, run_before = _app(_script("done"))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


# ---------------------------------------------------------------- every screen fits 80×24
def test_help(snap_compare):
    app, run_before = _app([], mock=True, keys=("question_mark",))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before)


def test_quit_dialog(snap_compare):
    """A pod alive in this dashboard's own mock lab: the dialog, its note and its three
    buttons inside 80 columns."""
    app, before = _app(_script("running"), mock=True)

    async def run_before(pilot) -> None:
        await before(pilot)
        app.runner.lab_active = True  # as if this dashboard's own lab were running it
        await pilot.press("q")
        await settle(pilot, app)  # the dashboard behind it drawn, its plots built

    assert snap_compare(app, terminal_size=NARROW, run_before=run_before)


def test_complete_long_folder(snap_compare, monkeypatch):
    """The folder of a finished lab under its own line(s), broken after a /, never into the
    buttons."""
    from tests.tui.test_layout import LONG_OUT, _done_at

    monkeypatch.setenv("HOME", "/home/student")
    app, run_before = _app(_done_at(LONG_OUT))
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before)


def test_labs_screen(snap_compare, tmp_path, monkeypatch):
    """Whole columns only (the rest in the detail), each money figure under its own name."""
    import json

    from tests.tui.helpers import wait_for
    from tests.tui.test_labs_replay import write_lab
    from tui.screens.past_labs_screen import LabsScreen

    monkeypatch.setenv("HOME", str(tmp_path))  # the folder reads ~/tplab-home/…
    home = tmp_path / "tplab-home"
    folder = write_lab(home / "mock" / "labs" / "20261203-132533-b8ff0c", mock=True,
                       start="2026-12-03T13:25:33+00:00")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.update(authorized_usd=3.0, estimated_cost_usd=0.037, worst_case_usd=1.4,
                    end_ts="2026-12-03T13:26:21+00:00", usd_per_hr=0.7,
                    allreduce_ms_per_token=0.651, comm_compute_ratio=0.702,
                    single_gpu_per_token_ms=0.95, tp_per_token_ms=1.58, outputs_match=True)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    write_lab(home / "labs" / "20261202-101500-a1b2c3", mock=False, status="STOPPED",
              until="terminated", start="2026-12-02T10:15:00+00:00")
    app, before = _app([])

    async def run_before(pilot) -> None:
        await before(pilot)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LabsScreen) and app.screen.labs,
                       what="the lab list")
        await settle(pilot, app)

    assert snap_compare(app, terminal_size=NARROW, run_before=run_before)


#: the wide layout's smallest common size (the timeline's bar asks for it beside 80×24)
TALL = (160, 48)


@pytest.mark.parametrize("size", [NARROW, TALL], ids=["80x24", "160x48"])
def test_timeline_during_a_lab(snap_compare, size):
    """The profiled pass has just arrived mid-lab: key 5 shows its first TP token as lanes."""
    events = lab_script(ScriptOptions(num_prompts=3, new_tokens=24, until="profiled",
                                      profiled=True))
    app, run_before = _app(events, keys=("5",), mock=True)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [NARROW, TALL], ids=["80x24", "160x48"])
def test_timeline_in_a_replay(snap_compare, size, tmp_path, monkeypatch):
    """A finished lab replayed: its timeline, the second TP token (keys 5, then ])."""
    import json
    from pathlib import Path

    folder = tmp_path / "lab-0042"
    folder.mkdir()
    events = lab_script(ScriptOptions(num_prompts=3, new_tokens=24, profiled=True))
    (folder / "stream.jsonl").write_text("".join(e.to_json() + "\n" for e in events))
    (folder / "results.json").write_text(json.dumps(
        next(e.results for e in events if isinstance(e, ResultEvent))))
    monkeypatch.chdir(tmp_path)  # the replay's folder is shown by the name it was given
    app = TplabApp(None, start=True, plan=dict(PLAN), replay_dir=Path("lab-0042"), replay_speed=0.0,
                   scaling=ScalingSource("NVIDIA GeForce RTX 4090", 2), ledger=lambda: LEDGER)

    async def run_before(pilot) -> None:
        from .helpers import wait_for
        await wait_for(pilot, lambda: app.state.done and not app.runner.lab_active,
                       what="the replay's end")
        await pilot.press("5", "right_square_bracket")
        await settle(pilot, app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
