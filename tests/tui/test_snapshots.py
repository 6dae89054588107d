"""Snapshot tests of the dashboard's fixed states: idle, running, terminated, error.

Each state is the synthetic lab's deterministic event script folded into the app's state with a
fixed clock, so the SVG is byte-stable. Update after a deliberate visual change with
``pytest tests/tui/test_snapshots.py --snapshot-update`` and look at the report.
"""

from __future__ import annotations

from tplab.events import Event
from tui.app import TplabApp
from tui.feed.synthetic import ScriptOptions, lab_script
from tui.plot import ThreadedPlot
from tui.scaling.panel import ScalingSource

SIZE = (160, 48)


def _app(events: list[Event], *, requested: bool = False) -> tuple[TplabApp, object]:
    clock_t = (events[-1].ts + 3.0) if events else 1_764_450_000.0
    app = TplabApp(None, clock=lambda: clock_t, plan={"num_prompts": 3, "new_tokens": 24},
                   scaling=ScalingSource("NVIDIA GeForce RTX 4090", 2))

    async def run_before(pilot) -> None:
        if requested:
            app.state.note_terminate_requested()
        app.feed(events)
        app.redraw(force=True)  # may start the scaling recalibration (a thread worker)
        await settle(pilot, app)

    return app, run_before


async def settle(pilot, app: TplabApp) -> None:
    """Until the scaling model answered and every plot's threaded build is done."""
    plots = list(app.query(ThreadedPlot))
    for _ in range(400):
        if not any(p.busy for p in plots):
            break
        await pilot.pause(0.05)
    app.redraw(force=True)
    for _ in range(400):
        if not any(p.busy for p in plots):
            break
        await pilot.pause(0.05)
    await pilot.pause()


def _script(until: str) -> list[Event]:
    return lab_script(ScriptOptions(num_prompts=3, new_tokens=24, until=until))


def test_idle(snap_compare):
    app, run_before = _app([])
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_running(snap_compare):
    app, run_before = _app(_script("running"))
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_terminated_by_the_user(snap_compare):
    app, run_before = _app(_script("terminated"), requested=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_error(snap_compare):
    app, run_before = _app(_script("error"))
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_complete(snap_compare):
    app, run_before = _app(_script("done"))
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
