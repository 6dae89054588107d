"""What a stop signal (or the terminal going away) does in each state of the dashboard: the
runner's side, under the pilot (the signal handlers themselves are test_exit_guard.py's, the
real process on a real pseudo-terminal test_terminal_gone.py's).

A live pod is terminated and verified gone first and the dashboard then exits with the lab's
code, without asking and from any screen; with no pod (idle, a replay, the Labs screen) it
exits at once."""

from __future__ import annotations

import asyncio

import pytest

from tests.synthetic_lab import ScriptOptions, SyntheticLab
from tui.app import TplabApp
from tui.screens.help import HelpScreen
from tui.screens.past_labs_screen import LabsScreen
from tui.screens.quit import QuitScreen

from .helpers import svg_text, wait_for
from .test_labs_replay import write_lab

SIZE = (100, 30)


async def test_idle_and_on_the_labs_screen_a_stop_signal_exits_at_once():
    app = TplabApp(None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LabsScreen), what="Labs screen")
        app.runner.quitting.on_stop_signal("SIGTERM")
        await wait_for(pilot, lambda: not app.is_running, what="the exit")
    assert app.return_value == 0


@pytest.mark.parametrize(("key", "screen"), [("q", QuitScreen), ("question_mark", HelpScreen),
                                             ("l", LabsScreen)], ids=["quit", "help", "labs"])
async def test_over_any_screen_the_pod_is_terminated_then_the_dashboard_exits(tmp_path, key,
                                                                             screen):
    lab = SyntheticLab(ScriptOptions(num_prompts=3, new_tokens=4000), speed=4.0,
                       boot_speed=40.0, out_dir=str(tmp_path))
    app = TplabApp(lambda: lab, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.state.pod_alive, timeout=60, what="a pod")
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(app.screen, screen), what=screen.__name__)
        app.terminal_lost("the terminal went away (EIO)")
        app.runner.quitting.on_stop_signal("SIGTERM")  # a second word changes nothing
        await pilot.pause(0.05)
        assert len(app.screen_stack) == 1  # closed (a quit dialog: answered, terminate and quit)
        assert lab.terminate_calls == ["the terminal went away (EIO)"]
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the exit")
    assert app.state.done_status == "STOPPED" and app.state.terminate_status == "gone"
    proof = svg_text(tmp_path / "proof-terminated.svg")  # saved before the exit: the dashboard
    assert "POD GONE ✓" in proof and "STOPPED" in proof
    assert app.return_value == 4  # the lab's own code: stopped, the pod verified gone


async def test_a_lab_still_being_built_is_stopped_as_soon_as_it_exists(tmp_path):
    lab = SyntheticLab(ScriptOptions(num_prompts=3, new_tokens=4000), speed=4.0,
                       teardown_speed=0, out_dir=str(tmp_path))
    release = asyncio.Event()

    class SlowFactory:
        def preload(self) -> None:  # the orchestrator's imports, in a thread
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)

        def __call__(self) -> SyntheticLab:
            return lab

    loop = asyncio.get_running_loop()
    app = TplabApp(SlowFactory(), start=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.runner.lab_active, what="Start")
        app.runner.quitting.on_stop_signal("SIGTERM")
        await pilot.pause(0.1)
        assert app.is_running  # the lab is on its way: it is stopped, not abandoned
        release.set()
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the exit")
    assert lab.terminate_calls == ["user"]  # taken from the state when the lab was built
    assert app.state.done_status == "STOPPED"


async def test_a_replay_exits_at_once_and_has_no_pod_to_end(tmp_path):
    folder = write_lab(tmp_path / "lab", mock=True)
    app = TplabApp(None, start=True, replay_dir=folder, replay_speed=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: getattr(app.runner.lab, "played", 0) > 3, what="replay")
        assert app.runner.lab_active  # mid-replay (its pod boots for a while at this speed)
        app.runner.quitting.on_stop_signal("SIGHUP (the terminal went away)")
        await wait_for(pilot, lambda: not app.is_running, what="the exit")
    assert app.return_value == 0 and app.runner.lab.terminate_calls == []
