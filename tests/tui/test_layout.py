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
        await pilot.pause()
        assert app.layout_name == NARROW
        for key in ("1", "2", "3", "4", "5"):  # in every view
            await pilot.press(key)
            await pilot.pause()
            bar = app.action_bar
            assert visible(app, bar.terminate_button) and visible(app, app.summary)
            summary = app.summary._shown.plain
            assert "RUNNING" in summary and "$1.83 left" in summary  # the pod, the budget
            assert "single 1.0" in summary or "single 0.9" in summary  # ms/token, both modes
            assert "tp 1." in summary and "speedup 0." in summary and "timed so far" in summary
            # the stage: in the strip as far as it fits, in full in the action bar
            assert summary.endswith(" · run") and "stage run" in bar._status_shown.plain
        assert "MOCK" in app.title


async def test_keys_switch_the_views_in_the_narrow_and_medium_layouts():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        shown = {}
        for key, widget in (("1", app.token_plot), ("2", app.scaling_panel),
                            ("3", app.log_panel), ("4", app.budget_panel)):
            await pilot.press(key)
            await pilot.pause()
            shown[key] = [w for w in (app.token_plot, app.scaling_panel, app.log_panel,
                                      app.budget_panel) if visible(app, w)]
            assert shown[key] == [widget], key
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert app.layout_name == MEDIUM
        # medium: figures and the live plot always; the lower right is the log (chosen last: 4
        # falls back to the scaling curve) or the curve
        assert visible(app, app.budget_panel) and visible(app, app.token_plot)
        await pilot.press("3")
        await pilot.pause()
        assert visible(app, app.log_panel) and not visible(app, app.scaling_panel)
        await pilot.press("2")
        await pilot.pause()
        assert visible(app, app.scaling_panel) and not visible(app, app.log_panel)
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
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
            await pilot.pause()
            assert app.layout_name == layout
            assert visible(app, app.timeline_panel) and not any(visible(app, w) for w in right)
            assert visible(app, app.budget_panel) == figures, size
            assert visible(app, app.action_bar.terminate_button)
            if layout != WIDE:
                assert "5 Timeline" in app.view_bar._shown
            await pilot.press("1")
            await pilot.pause()
            assert visible(app, app.token_plot) and not visible(app, app.timeline_panel)


async def test_the_timeline_says_its_token_is_the_profiled_passs_and_the_strips_the_timed():
    """At 80×24 the timeline's profiled token (the profiler on: far slower) sits under the
    strip's TP figure (the timed pass): its title names the profiled pass, and its first lines
    put the two side by side with why they differ, the timed one as the strip shows it (it
    once said "median of 4: 50.8 ms a token" under "tp 30.79" without a word)."""
    app = _app()
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=6, profiled=True))
    async with app.run_test(size=(80, 24)) as pilot:
        app.runner.feed(events)
        await pilot.press("5")
        app.redraw(force=True)
        await pilot.pause()
        f = app.state.figures
        strip = app.summary._shown.plain
        panel = app.timeline_panel._shown.plain.splitlines()
        assert str(app.timeline_panel.border_title).startswith("Timeline · profiled TP token")
        timing = strip.splitlines()[2]
        assert timing.startswith("timed single") and f"tp {f.tp_ms.number()} ms" in timing
        assert panel[1] == f.profiled_against_timed("tp")
        assert panel[1].startswith("profiled TP ") and "profiler on" in panel[1]
        assert panel[1].endswith(f"vs timed {f.tp_ms.text()} (mean)") and len(panel[1]) <= 78
        assert visible(app, app.timeline_panel)


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
            await pilot.pause()
            for plot in app.query(ThreadedPlot):
                if visible(app, plot):
                    w, h = plot.content_size
                    assert w >= plot.MIN_PLOT[0] and h >= plot.MIN_PLOT[1], (size, plot.id, w, h)


async def test_the_budget_is_on_the_first_frame_and_reads_without_colour():
    app = _app()
    async with app.run_test(size=(120, 40)):
        text = app.budget_panel._shown.plain  # drawn on mount, before any lab
        assert "$5.00" in text and "$0.42" in text and "$4.58" in text
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
        await pilot.press("ctrl+s")  # saved by the key's own handler
        await pilot.pause()
    import os
    assert list(tmp_path.glob("*.svg")) == []
    shots = list((tmp_path / "tplab-home" / "screenshots").glob("*.svg"))
    assert len(shots) == 1 and os.environ["TPLAB_HOME"] == str(tmp_path / "tplab-home")


LONG_OUT = "/home/student/.local/share/tplab/mock/labs/20261203-132533-b8ff0c"


def _done_at(out_dir: str) -> list:
    """A complete lab's events whose folder is ``out_dir``."""
    from dataclasses import replace
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=8))
    return events[:-1] + [replace(events[-1], out_dir=out_dir)]


def _fits(app: TplabApp, widget) -> bool:
    return app.screen.region.contains_region(widget.region)


async def test_at_80x24_help_and_the_quit_dialog_fit_and_read_whole():
    from textual.containers import Vertical, VerticalScroll
    from textual.widgets import Button, Label, Static
    from tui.screens.help import HelpScreen
    from tui.screens.quit import QuitScreen

    app = _app(mock=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        await pilot.pause()
        box, text = app.screen.query_one(VerticalScroll), app.screen.query_one("#help-text", Static)
        assert _fits(app, box)
        width = text.content_region.width
        assert all(line.cell_len <= width for line in text.content.split("\n"))
        assert "start the lab (Start button); in a replay: play the same lab" in text.content.plain
        await pilot.press("escape")
        app.runner.feed(lab_script(ScriptOptions(num_prompts=2, new_tokens=30, until="running")))
        app.runner.lab_active = True  # as if this dashboard's own lab were running it
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the quit dialog")
        await pilot.pause()
        dialog = app.screen.query_one(Vertical)
        assert _fits(app, dialog)
        for part in [*app.screen.query(Label), *app.screen.query(Button)]:
            assert dialog.region.contains_region(part.region), part
        note = app.screen.query(Label).last()
        assert "MOCK" in str(note.render()) and note.region.height >= 2  # wrapped, not cut
        app.runner.lab_active = False
        await pilot.press("escape")


async def test_at_80x24_the_action_bar_keeps_a_long_lab_folder_whole(monkeypatch):
    monkeypatch.setenv("HOME", "/home/student")
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.runner.feed(_done_at(LONG_OUT))
        app.redraw(force=True)
        await pilot.pause()
        app.redraw(force=True)
        status = app.action_bar.status_line
        lines = app.action_bar._status_shown.plain.split("\n")
        assert len(lines) <= status.size.height and _fits(app, status)
        assert all(len(line) <= status.size.width for line in lines)
        assert lines[0].startswith("COMPLETE")
        assert "".join(lines[1:]) == "~/.local/share/tplab/mock/labs/20261203-132533-b8ff0c"
        assert lines[-1] == "20261203-132533-b8ff0c"  # broken after a /, not inside a name


async def test_at_80x24_the_labs_table_shows_whole_columns_only(tmp_path, monkeypatch):
    from textual.widgets import DataTable
    from tui.screens.past_labs_screen import LabsScreen
    from .test_labs_replay import write_lab

    home = tmp_path / "tplab-home"
    write_lab(home / "mock" / "labs" / "20261203-132533-b8ff0c", mock=True)
    write_lab(home / "labs" / "20261202-101500-a1b2c3", mock=False, status="STOPPED",
              until="terminated", start="2026-12-02T10:15:00+00:00")
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LabsScreen) and app.screen.labs,
                       what="the lab list")
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        shown = [str(c.label) for c in table.columns.values()]
        assert {"when (UTC)", "status", "pod gone", "cost"} <= set(shown)
        assert table.virtual_size.width <= table.scrollable_content_region.width, shown
        cells = [str(c) for c in table.get_row_at(0)]
        assert "✓ verified" in cells
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        assert len(table.columns) > len(shown)  # a wider screen shows more, whole
        assert table.virtual_size.width <= table.scrollable_content_region.width


async def test_damaged_ledger_lines_are_one_line_beside_the_figures_before_during_and_after():
    from tplab.money.budget import BudgetGuard, default_ledger_path
    from tplab.viewmodel.ledger_view import read_ledger_budget

    BudgetGuard(default_ledger_path(True), cap_usd=5.0).record_actual("earlier", 0.42)
    with default_ledger_path(True).open("a") as f:
        f.write('{"v": 1, "kind": "actual", "amount_usd": "oops\n')
    app = TplabApp(None, mock=True, ledger=lambda: read_ledger_budget(True))
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=30))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")  # the figures view: the budget panel
        for stage, script in (("before", []), ("during", events[:40]), ("after", events[40:])):
            app.runner.feed(script)
            if stage == "after":
                app.runner.refresh_budget()  # as at a lab's end: the ledger read again
            app.redraw(force=True)
            await pilot.pause()
            strip = app.summary._shown.plain.split("\n")
            assert len(strip) == 3 and " left of $" in strip[1], stage
            assert "% left" in strip[1] and "⚠ 1 damaged ledger line" in strip[1], stage
            assert len(strip[1]) <= app.summary.content_size.width, stage
            panel = app.budget_panel._shown.plain.split("\n")
            assert "% left" in panel[-2] and panel[-1].startswith("⚠ 1 damaged ledger line")
            assert any(line.startswith("remaining") for line in panel), stage
            assert app.budget_panel.content_size.height >= len(panel), stage  # all on screen


async def test_the_all_reduce_says_it_comes_from_the_instrumented_pass():
    """The tp column is the uninstrumented pass; all-reduce and comm/compute are the other one
    (whose token time is shown with it), so an all-reduce above the tp mean is explained."""
    app = _app()
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=30))
    async with app.run_test(size=(120, 40)) as pilot:
        app.runner.feed(events[:-30])  # live figures
        app.redraw(force=True)
        await pilot.pause()
        live = app.timings_panel._shown.plain
        app.runner.feed(events[-30:])  # the job's figures
        app.redraw(force=True)
        await pilot.pause()
        final = app.timings_panel._shown.plain
        width = app.timings_panel.content_size.width
        for text in (live, final):
            assert "* instrumented pass; the rest: timed pass" in text
            assert text.split("\n")[1].startswith("timed")  # the columns' header names it
            ar = next(line for line in text.split("\n") if line.startswith("all-reduce"))
            assert ar.endswith(" ms token*") and " ms of a " in ar
            assert all(len(line) <= width for line in text.split("\n"))
        assert "timed, so far" in live and "timed (job)" in final


async def test_no_color_draws_every_view_in_monochrome(monkeypatch):
    """NO_COLOR=1: Textual draws the dashboard through its monochrome filter, which needs every
    cell styled; each plot's rows (also those not built yet) and each view must draw under it."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = _app()
    assert app.no_color
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=30, until="running",
                                      profiled=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.runner.feed(events)
        for key in ("1", "2", "5", "1"):
            await pilot.press(key)
            app.redraw(force=True)
            await pilot.pause()
        await wait_for(pilot, lambda: any(p.builds for p in app.query(ThreadedPlot)))
        assert any(type(f).__name__ == "Monochrome" for f in app._filters)
