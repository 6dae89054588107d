"""Pilot tests of the dashboard against the synthetic lab (fast, deterministic event script).

The same flows against the real orchestrator and the mock cloud are in test_app_mock.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import Button

from tui.app import TplabApp
from tests.synthetic_lab import ScriptOptions, SyntheticLab
from tui.screens.help import HelpScreen
from tui.screens.quit import ConfirmLeaveScreen, QuitScreen
from tui.widgets.token_plot import TokenPlot

from .helpers import svg_text, wait_for

SIZE = (160, 48)


def _label(app: TplabApp) -> str:
    return str(app.query_one("#terminate", Button).label)


async def test_start_runs_to_done_and_saves_the_proof_screen(tmp_path):
    lab = SyntheticLab(ScriptOptions(num_prompts=2, new_tokens=8), out_dir=str(tmp_path))
    app = TplabApp(lambda: lab)
    async with app.run_test(size=SIZE) as pilot:
        assert app.state.idle and "idle" in str(app.sub_title)
        await pilot.press("s")
        await wait_for(pilot, lambda: app.runner.outcome is not None, what="the lab's end")
        await wait_for(pilot, lambda: app.runner.proof_path is not None, what="the proof screenshot")
        s = app.state
        assert s.timings["single"].count == 16 and s.timings["tp"].count == 16
        assert s.done_status == "COMPLETE" and s.outputs_match() is True
        assert _label(app) == "POD GONE ✓"
        plot = app.query_one(TokenPlot)
        await wait_for(pilot, lambda: not plot.busy, what="the plot build")
        assert plot.drawn_counts == (16, 16) and plot.builds >= 1
        proof = tmp_path / "proof-terminated.svg"
        assert app.runner.proof_path == proof and proof.read_text().startswith("<svg")
        assert "POD GONE ✓" in svg_text(proof)
        assert app.runner.quitting.exit_code() == 0
        assert not app.query_one("#start", Button).disabled  # a new lab may start


async def test_terminate_mid_run_asks_the_lab_once_and_shows_progress(tmp_path):
    lab = SyntheticLab(ScriptOptions(num_prompts=3, new_tokens=4000), speed=4.0, boot_speed=40.0,
                       out_dir=str(tmp_path))
    app = TplabApp(lambda: lab, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.timings["single"].count > 0, timeout=60,
                       what="first tokens")
        assert app.state.pod_alive
        await pilot.press("ctrl+t")
        await pilot.press("t")
        await pilot.click("#terminate")
        await pilot.pause(0.2)
        assert lab.terminate_calls == ["user"]
        assert _label(app) in ("TERMINATING…", "VERIFYING GONE…", "POD GONE ✓")
        labels = set()
        while app.runner.outcome is None:
            labels.add(_label(app))
            await pilot.pause(0.02)
        await pilot.pause()
        assert _label(app) == "POD GONE ✓"
        assert app.state.terminate_status == "gone" and not app.state.pod_alive
        assert lab.terminate_calls == ["user"]
        assert app.state.done_status == "STOPPED"
        assert (tmp_path / "proof-terminated.svg").exists()


async def test_quit_with_a_pod_alive_offers_choices_then_terminates_and_quits(tmp_path):
    lab = SyntheticLab(ScriptOptions(num_prompts=3, new_tokens=4000), speed=4.0,
                       teardown_speed=0, out_dir=str(tmp_path))
    app = TplabApp(lambda: lab, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.pod_alive, timeout=60, what="a pod")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="quit dialog")
        await pilot.press("escape")  # cancel
        await wait_for(pilot, lambda: not isinstance(app.screen, QuitScreen), what="dialog gone")
        assert app.is_running and lab.terminate_calls == []
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="quit dialog")
        await pilot.press("l")  # leave running … needs a second, explicit yes
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmLeaveScreen),
                       what="confirmation")
        await pilot.press("escape")  # no
        await pilot.pause(0.1)
        assert app.is_running and not app.runner.quitting.left_running and lab.terminate_calls == []
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="quit dialog")
        await pilot.press("t")  # terminate and quit
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to exit")
    assert lab.terminate_calls == ["user"]
    assert app.state.terminate_status == "gone"
    assert (tmp_path / "proof-terminated.svg").exists()  # saved before quitting
    assert app.return_code == 0


async def test_leave_running_needs_an_explicit_yes_and_does_not_terminate():
    lab = SyntheticLab(ScriptOptions(num_prompts=3, new_tokens=4000), speed=4.0)
    app = TplabApp(lambda: lab, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.pod_alive, timeout=60, what="a pod")
        await pilot.press("q", "l")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmLeaveScreen),
                       what="confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, what="the app to exit")
    assert app.runner.quitting.left_running and lab.terminate_calls == []


async def test_in_its_own_mock_cloud_leaving_the_pod_running_terminates_it_and_says_so(
        tmp_path):
    """`tplab-tui --mock` started the mock cloud its pod lives in, which stops with the dashboard:
    "leave it running" cannot be had, so it terminates (verified gone, hold settled) and says
    why; a second SIGTERM names no `tplab terminate ID --mock` that could not reach the pod."""
    lab = SyntheticLab(ScriptOptions(num_prompts=3, new_tokens=4000), speed=4.0,
                       teardown_speed=0, out_dir=str(tmp_path))
    app = TplabApp(lambda: lab, start=True, mock=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.pod_alive, timeout=60, what="a pod")
        note = app.runner.quitting.forced_exit_note("SIGTERM")
        assert "ends with the mock cloud this dashboard started" in note
        assert "tplab terminate --all --mock` then settles its hold" in note
        assert f"tplab terminate {app.state.instance.pod_id}" not in note
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="quit dialog")
        await pilot.press("l")
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to exit")
    assert lab.terminate_calls == ["user"] and not app.runner.quitting.left_running
    assert app.state.terminate_status == "gone"
    assert any("cannot outlive this dashboard's mock cloud" in line.text
               for line in app.state.log)


async def test_quit_when_idle_exits_at_once():
    app = TplabApp(None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, what="exit")
    assert app.return_code == 0


async def test_help_screen_and_palette_entries():
    lab = SyntheticLab(ScriptOptions(num_prompts=1, new_tokens=4))
    app = TplabApp(lambda: lab)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), what="help closed")
        # the palette runs the same actions: "Start lab"
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
        await pilot.press(*"start lab")
        assert app.state.idle  # typing went to the palette, not to the "s" binding
        listed = app.screen.query_one(CommandList)
        await wait_for(pilot, lambda: listed.option_count > 0, what="the palette's match")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.runner.outcome is not None, what="the palette-started lab")
        assert app.state.done_status == "COMPLETE"


async def test_footer_lists_the_key_bindings():
    app = TplabApp(None)
    async with app.run_test(size=SIZE):
        keys = {k: ab.binding.action for k, ab in app.active_bindings.items()}
        assert keys["ctrl+t"] == "terminate" and keys["q"] == "quit" and keys["s"] == "start"


@dataclass
class _Pod:
    id: str


@dataclass
class _Proof:
    gone: bool


class FakeSweepLab:
    """Stands in for the orchestrator's leftover API (find_leftover_pods / terminate_pod)."""

    def __init__(self, pods):
        self.pods = pods
        self.terminated: list[str] = []

    def find_leftover_pods(self):
        return [_Pod(p) for p in self.pods if p not in self.terminated]

    async def terminate_pod(self, pod_id):
        self.terminated.append(pod_id)
        return _Proof(gone=True)


async def test_terminate_with_no_lab_running_terminates_leftover_pods():
    fake = FakeSweepLab(["old1", "old2"])
    app = TplabApp(None, sweep_factory=lambda: fake)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+t")
        await pilot.press("ctrl+t")  # while the sweep runs: nothing extra
        await wait_for(pilot, lambda: app.runner.sweep_done, what="the sweep")
        await pilot.pause()
        assert fake.terminated == ["old1", "old2"]
        assert _label(app) == "NO POD ALIVE ✓"
        assert any("old2" in line.text and "verified gone" in line.text
                   for line in app.state.log)


async def test_panels_redraw_on_the_timer_not_per_event():
    """It pays for the second of redraws it counts."""
    lab = SyntheticLab(flood_rate=5000)
    app = TplabApp(lambda: lab, start=True, refresh_hz=10)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.events > 500, what="events")
        r0, e0, t0 = app.redraws, app.state.events, time.monotonic()
        await pilot.pause(1.0)
        dt = time.monotonic() - t0
        events, redraws = app.state.events - e0, app.redraws - r0
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: app.runner.outcome is not None, what="flood end")
    assert events > 1000           # thousands of events arrived …
    assert redraws <= 10 * dt + 2  # … and at most refresh_hz redraws a second


def test_refresh_rate_is_bounded(capsys):
    with pytest.raises(ValueError):
        TplabApp(None, refresh_hz=60)
    with pytest.raises(ValueError):
        TplabApp(None, refresh_hz=1)
    from tui.app import app_from_args
    for rate in ("100", "2", "nan", "fast"):  # the command line says so, no traceback
        with pytest.raises(SystemExit) as ended:
            app_from_args(["--mock", "--refresh-hz", rate])
        assert ended.value.code == 2
        err = capsys.readouterr().err
        assert f"argument --refresh-hz: '{rate}' is not a redraw rate from 4 to 30 Hz" in err
    assert app_from_args(["--mock", "--refresh-hz", "30"]).refresh_hz == 30.0


async def test_panels_keep_updating_under_a_modal_screen(tmp_path):
    """The redraw reaches the main screen's panels while help (or the quit dialog) is on top,
    and a lab that ends meanwhile still saves its proof."""
    lab = SyntheticLab(ScriptOptions(num_prompts=2, new_tokens=60), speed=8.0, boot_speed=40.0,
                       out_dir=str(tmp_path))
    app = TplabApp(lambda: lab)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        await pilot.press("escape")
        await pilot.press("s", "question_mark")
        await wait_for(pilot, lambda: app.runner.outcome is not None, timeout=60, what="the lab's end")
        await wait_for(pilot, lambda: app.runner.proof_path is not None, what="the proof")
        assert isinstance(app.screen, HelpScreen)
        assert app.timings_panel._shown is not None
        assert "120" in app.timings_panel._shown.plain  # 2 × 60 tokens per mode, drawn


def test_command_line_takes_the_lab_options():
    from tui.app import app_from_args, build_parser

    app = app_from_args(["--mock", "--prompts", "2", "--new-tokens", "8", "--no-sweep"])
    assert app.plan == {"num_prompts": 2, "new_tokens": 8, "world_size": 2,
                        "gpu_type": "NVIDIA GeForce RTX 4090", "spot": True}
    assert not app.autostart and app.runner.lab_factory is not None and app.runner.sweep_factory is not None
    assert app.scaling is not None and app.scaling.mock
    assert app_from_args(["--start"]).autostart
    help_text = build_parser().format_help()
    for flag in ("--start", "--mock", "--prompts", "--new-tokens", "--no-sweep", "--refresh-hz"):
        assert flag in help_text


async def test_after_the_lab_ends_no_line_speaks_of_its_pod_as_alive():
    """Pod verified gone: no cap counting down, no heartbeat age, no cost still accruing, no
    decoding going on; the same rows say how it ended."""
    from tests.synthetic_lab import lab_script

    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=8))
    now = [events[-1].ts + 7000.0]  # long after: a cap would tick
    app = TplabApp(None, clock=lambda: now[0])
    async with app.run_test(size=(120, 40)) as pilot:
        app.runner.feed(events)
        app.redraw(force=True)
        await pilot.pause()
        app.redraw(force=True)
        instance = app.instance_panel._shown.plain
        assert "GONE" in instance and "ran for" in instance
        for alive in ("cap in", "s ago", "accrued", "uptime", "root@"):
            assert alive not in instance, alive
        assert instance.count("ended with the pod") == 2 and "closed: the pod is gone" in instance
        assert "so far" not in app.summary._shown.plain and " billed" in app.summary._shown.plain
        # after GONE the strip says when the pod ended and what it cost (the billed figure,
        # the same the Instance panel shows), not a clock still counting in the uptime slot
        billed = [e for e in events if e.type == "cost" and e.cost_is == "billed"][-1]
        cost = f"${billed.accrued_usd:.4f} billed"
        ended = time.strftime("%H:%M:%S", time.gmtime(billed.ended_at))
        pod_line = app.summary._shown.plain.splitlines()[0]
        assert f"GONE at {ended} UTC · {cost}" in pod_line, pod_line
        assert f"{cost} at $0.690/h" in instance and f"ended {ended} UTC" in instance
        now[0] += 3600.0
        app.redraw(force=True)
        await pilot.pause()
        assert app.summary._shown.plain.splitlines()[0] == pod_line  # nothing counts on
        assert app.timings_panel._shown.plain.startswith("decoded")
        assert not app.token_plot.border_title.startswith("Live")


class _RefusedBeforeRenting:
    """A lab that ends FAILED in its pre-flight: nothing was rented, so nothing to prove."""

    def __init__(self, out_dir) -> None:
        self.out_dir = out_dir
        self._events: asyncio.Queue = asyncio.Queue()

    def subscribe(self):
        async def gen():
            while (ev := await self._events.get()) is not None:
                yield ev
        return gen()

    async def run(self):
        from tests.synthetic_lab import SyntheticOutcome
        from tplab.records.events import EventWriter
        w = EventWriter(src="lab")
        for ev in (w.make("phase", name="preflight"),
                   w.make("phase", name="done", status="FAILED", verified_gone=None,
                          reason="the price is over the lab cap; nothing was created")):
            await self._events.put(ev)
        await self._events.put(None)
        return SyntheticOutcome("FAILED", "the price is over the lab cap; nothing was created",
                                str(self.out_dir), None, False, 1)

    def request_terminate(self, reason: str = "user") -> None:
        pass


async def test_a_lab_that_never_rented_saves_no_proof_of_an_end(tmp_path):
    """A FAILED lab that never created a pod has no end to prove: no proof-terminated.svg, and
    the button says no pod was made."""
    app = TplabApp(lambda: _RefusedBeforeRenting(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await wait_for(pilot, lambda: app.runner.outcome is not None, what="the lab's end")
        await pilot.pause(0.2)
        assert app.state.done_status == "FAILED" and app.state.instance.pod_id is None
        assert app.runner.proof_path is None and not app.runner.saving_proof
    assert not (tmp_path / "proof-terminated.svg").exists()
