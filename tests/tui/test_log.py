"""The log: whole lines (wrapped, never cut), bounded scrollback, a filter by source, warnings and
errors marked so they read without colour, and the pod's job.log as the stderr source."""

from __future__ import annotations

from tplab.records.events import EventWriter
from tplab.viewmodel.past_labs import remote_stderr
from tplab.viewmodel.fold import LabState
from tui.app import TplabApp

from .helpers import wait_for

LONG = ("Budget pre-flight passed: remaining $5.00 covers the lab cap $3.00 + buffer $0.50; "
        "the job reported `finished` (results written, outputs matched) and this sentence goes "
        "on well past any panel's width so that it must wrap: END-OF-LINE")


def _rows(app: TplabApp) -> list[str]:
    return [strip.text for _, strip in app.log_panel.view._rows]


async def test_long_lines_wrap_whole_and_the_filter_picks_a_source():
    app = TplabApp(None)
    lab, job = EventWriter(src="lab"), EventWriter(src="job")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        app.runner.feed([lab.make("log", level="info", msg=LONG),
                  job.make("log", level="warning", msg="gloo on the CPU"),
                  job.make("error", msg="CUDA error: an illegal memory access", fatal=True)])
        app.state.add_remote_lines(["Traceback (most recent call last):",
                                    '  File "run.py", line 3, in <module>',
                                    "RuntimeError: boom", "an ordinary line"])
        app.redraw(force=True)
        await pilot.pause()
        rows = _rows(app)
        width = app.log_panel.view.scrollable_content_region.width
        assert all(len(r.rstrip()) <= width for r in rows)
        joined = " ".join(r[16:].strip() for r in rows)
        assert LONG.split()[-1] in joined and "covers the lab cap" in joined  # nothing cut
        assert sum("lab" in r[:16] for r in rows) == 1  # one line, wrapped under its prefix
        marks = {r[16:].strip(): r[15] for r in rows if r[:2].strip()}
        assert marks["gloo on the CPU"] == "!" and marks[
            "fatal: CUDA error: an illegal memory access"] == "✗"
        assert marks["RuntimeError: boom"] == "✗" and marks["an ordinary line"] == " "
        for group, expect in (("job", {"gloo on the CPU"}), ("stderr", {"an ordinary line"}),
                              ("problems", {"gloo on the CPU", "RuntimeError: boom"})):
            app.action_log_filter(group)
            await pilot.pause()
            texts = {r[16:].strip() for r in _rows(app) if r[:2].strip()}
            assert expect <= texts, group
            if group == "job":
                assert not any("covers" in t for t in texts)
            if group == "stderr":
                assert texts <= {"Traceback (most recent call last):",
                                 'File "run.py", line 3, in <module>', "RuntimeError: boom",
                                 "an ordinary line"}
        assert app.log_panel.group == "problems"
        await pilot.press("f")  # steps on, back to everything
        assert app.log_panel.group == "all"


async def test_scrollback_is_bounded_and_follows_the_tail_until_scrolled_up():
    app = TplabApp(None)
    w = EventWriter(src="lab")
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.log_panel.view
        app.runner.feed([w.make("log", level="info", msg=f"line {i}") for i in range(2500)])
        app.redraw(force=True)
        await pilot.pause()
        assert len(app.state.log) == 2000 and len(view._rows) == 2000
        assert view.following and _rows(app)[-1].rstrip().endswith("line 2499")
        view.scroll_to(y=0, animate=False, immediate=True)
        app.runner.feed([w.make("log", level="info", msg="newer")])
        app.redraw(force=True)
        await pilot.pause()
        assert view.scroll_offset.y == 0  # reading back: not pulled down
        assert _rows(app)[0].rstrip().endswith("line 501")  # the oldest kept


def test_job_log_lines_without_the_event_lines(tmp_path):
    (tmp_path / "job.log").write_text(
        "*****\n" '{"v":1,"seq":0,"ts":1.0,"src":"job","type":"phase","name":"setup"}\n'
        "\x1b[31mTraceback (most recent call last):\x1b[0m\nValueError: bad\n")
    assert remote_stderr(tmp_path) == ["Traceback (most recent call last):", "ValueError: bad"]
    assert remote_stderr(tmp_path / "nowhere") == []
    s = LabState()
    assert s.add_remote_lines(remote_stderr(tmp_path)) == 2
    assert [(ln.src, ln.level) for ln in s.log] == [("stderr", "error"), ("stderr", "error")]


async def test_the_pod_stderr_joins_the_log_when_a_lab_ends(tmp_path):
    from tests.synthetic_lab import ScriptOptions, SyntheticLab
    (tmp_path / "job.log").write_text("RuntimeError: the job's own words\n")
    lab = SyntheticLab(ScriptOptions(num_prompts=1, new_tokens=4), out_dir=str(tmp_path))
    app = TplabApp(lambda: lab, save_proof=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, lambda: app.runner.outcome is not None, what="the lab's end")
        assert [ln.text for ln in app.state.log if ln.src == "stderr"] == [
            "RuntimeError: the job's own words"]
