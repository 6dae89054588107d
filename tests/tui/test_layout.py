"""The dashboard at the sizes people use: what stays on screen at 80×24, what one key shows,
and that no plot is squeezed into a sliver (its numbers are shown instead)."""

from __future__ import annotations

import threading

from tplab.viewmodel.parts import Budget
from tui.app import TplabApp
from tui.widgets.budget_panel import budget_bar
from tests.synthetic_lab import ScriptOptions, lab_script
from tui.layout import MEDIUM, NARROW, WIDE, layout_for
from tui.widgets.plot import ThreadedPlot

from .helpers import wait_for

LEDGER = Budget(cap_usd=5.0, spent_usd=0.42, held_usd=0.0, remaining_usd=4.58, lab_cap_usd=3.0,
                needed_usd=3.5, source="ledger")


def _app(**kw) -> TplabApp:
    return TplabApp(None, plan={"gpu_type": "NVIDIA GeForce RTX 4090", "world_size": 2},
                    ledger=lambda: LEDGER, **kw)


def visible(app: TplabApp, widget) -> bool:
    region = widget.region
    return widget.display and region.area > 0 and app.screen.region.contains_region(region)


def test_layout_by_size():
    assert layout_for(80, 24) == NARROW
    assert layout_for(120, 40) == MEDIUM
    assert layout_for(200, 60) == WIDE
    assert layout_for(200, 24) == NARROW  # too few rows for the figures column
    assert layout_for(99, 60) == NARROW


async def test_at_80x24_terminate_state_budget_timings_and_phase_stay_on_screen():
    app = _app(mock=True)
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=30, until="running"))
    async with app.run_test(size=(80, 24)) as pilot:
        app.runner.feed(events)
        app.redraw(force=True)
        await pilot.pause(0.2)
        assert app.layout_name == NARROW
        for key in ("1", "2", "3", "4", "5"):  # in every view
            await pilot.press(key)
            await pilot.pause(0.1)
            bar = app.action_bar
            assert visible(app, bar.terminate_button) and visible(app, app.summary)
            summary = app.summary._shown.plain
            assert "RUNNING" in summary and "$1.83 left" in summary  # the pod, the budget
            assert "single 1.0" in summary or "single 0.9" in summary  # ms/token, both modes
            assert "tp 1." in summary and "phase run" in summary
        assert "MOCK" in app.title


async def test_keys_switch_the_views_in_the_narrow_and_medium_layouts():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        shown = {}
        for key, widget in (("1", app.token_plot), ("2", app.scaling_panel),
                            ("3", app.log_panel), ("4", app.budget_panel)):
            await pilot.press(key)
            await pilot.pause(0.1)
            shown[key] = [w for w in (app.token_plot, app.scaling_panel, app.log_panel,
                                      app.budget_panel) if visible(app, w)]
            assert shown[key] == [widget], key
        await pilot.resize_terminal(120, 40)
        await pilot.pause(0.2)
        assert app.layout_name == MEDIUM
        # medium: figures and the live plot always; the lower right is the log (chosen last: 4
        # falls back to the scaling curve) or the curve
        assert visible(app, app.budget_panel) and visible(app, app.token_plot)
        await pilot.press("3")
        await pilot.pause(0.1)
        assert visible(app, app.log_panel) and not visible(app, app.scaling_panel)
        await pilot.press("2")
        await pilot.pause(0.1)
        assert visible(app, app.scaling_panel) and not visible(app, app.log_panel)
        await pilot.resize_terminal(200, 60)
        await pilot.pause(0.2)
        assert app.layout_name == WIDE
        assert all(visible(app, w) for w in (app.budget_panel, app.instance_panel,
                                             app.timings_panel, app.token_plot,
                                             app.scaling_panel, app.log_panel))
        assert not visible(app, app.summary)


async def test_key_5_shows_the_timeline_in_every_layout_and_key_1_brings_the_plot_back():
    """Narrow: the timeline is the whole view; medium and wide: it takes the right-hand side
    and the figures column stays. Offered on the narrow and medium switches."""
    app = _app()
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=6, profiled=True))
    async with app.run_test(size=(80, 24)) as pilot:
        app.runner.feed(events)
        app.redraw(force=True)
        right = (app.token_plot, app.scaling_panel, app.log_panel)
        for size, layout, figures in (((80, 24), NARROW, False), ((120, 40), MEDIUM, True),
                                      ((200, 60), WIDE, True)):
            await pilot.resize_terminal(*size)
            await pilot.press("5")
            await pilot.pause(0.2)
            assert app.layout_name == layout
            assert visible(app, app.timeline_panel) and not any(visible(app, w) for w in right)
            assert visible(app, app.budget_panel) == figures, size
            assert visible(app, app.action_bar.terminate_button)
            if layout != WIDE:
                assert "5 Timeline" in app.view_bar._shown
            await pilot.press("1")
            await pilot.pause(0.2)
            assert visible(app, app.token_plot) and not visible(app, app.timeline_panel)


async def test_a_plot_below_its_useful_size_shows_its_numbers():
    app = _app()
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=30, until="running"))
    async with app.run_test(size=(70, 15)) as pilot:  # the plot view gets 8 columns of braille
        app.runner.feed(events)
        app.redraw(force=True)
        plot = app.token_plot
        await wait_for(pilot, lambda: plot.builds > 0 and not plot.busy, what="a build")
        w, h = plot.content_size
        assert plot.too_small(w, h)
        text = "\n".join(s.text for s in plot._strips)
        assert "last" in text and "single" in text and "tp" in text and "⣿" not in text
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: not plot.busy and not plot.too_small(
            *plot.content_size), what="a bigger plot")
        app.redraw(force=True)
        await wait_for(pilot, lambda: not plot.busy, what="the plot")
        assert "token #" in "\n".join(s.text for s in plot._strips)  # drawn as a chart


async def test_every_visible_plot_is_readable_at_each_size():
    app = _app()
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=30, until="running"))
    async with app.run_test(size=(80, 24)) as pilot:
        app.runner.feed(events)
        for size in ((80, 24), (100, 35), (120, 40), (160, 36), (200, 60)):
            await pilot.resize_terminal(*size)
            app.redraw(force=True)
            await pilot.pause(0.2)
            for plot in app.query(ThreadedPlot):
                if visible(app, plot):
                    w, h = plot.content_size
                    assert w >= plot.MIN_PLOT[0] and h >= plot.MIN_PLOT[1], (size, plot.id, w, h)


async def test_the_budget_is_on_the_first_frame_and_reads_without_colour():
    app = _app()
    async with app.run_test(size=(120, 40)):
        text = app.budget_panel._shown.plain  # drawn on mount, before any lab
        assert "$5.00" in text and "$0.4200" in text and "$4.5800" in text
        assert "cap $3.00 · needs $3.50 left ✓" in text
    bar = budget_bar(5.0, 0.02, 0.0, 30).plain
    assert bar.endswith("99% left") and set(bar.split(" ")[0]) == {"░"}  # not a full bar
    bar = budget_bar(5.0, 1.0, 2.0, 30).plain
    assert "█" in bar and "▓" in bar and "░" in bar and bar.endswith("40% left")


async def test_start_answers_at_once_and_a_refused_start_creates_nothing(tmp_path):
    built = []

    def factory():
        built.append(1)
        raise AssertionError("a refused lab is never built")

    checked = threading.Event()  # the check answers once the test has seen the next frame

    def refusal():  # runs in a worker thread, as the real check (reads files, the ledger)
        checked.wait(10)  # (was a 0.5 s sleep: on a loaded machine it could end first)
        return "No RunPod API key found: set RUNPOD_API_KEY."

    factory.refusal = refusal
    app = TplabApp(factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s")
        try:
            # the very next frame, while the check still runs: Start disabled, status starting
            assert app.runner.lab_active and app.action_bar.start_button.disabled
            assert "starting" in app.action_bar._status_shown.plain
        finally:
            checked.set()
        await wait_for(pilot, lambda: not app.runner.lab_active, what="the refusal")
        assert built == [] and app.state.idle
        assert "not started: No RunPod API key" in app.action_bar._status_shown.plain
        assert not app.action_bar.start_button.disabled


async def test_ctrl_s_saves_next_to_the_lab_or_in_tplab_home_never_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+s")
        await pilot.pause(0.3)
    import os
    assert list(tmp_path.glob("*.svg")) == []
    shots = list((tmp_path / "tplab-home" / "screenshots").glob("*.svg"))
    assert len(shots) == 1 and os.environ["TPLAB_HOME"] == str(tmp_path / "tplab-home")
