"""The dashboard as a person runs it, on a pseudo-terminal this test owns (tests/pty_run.py):
the terminal closed (its pty master closed: the kernel hangs the tty up and sends SIGHUP), or
SIGTERM from another shell, in each state of a lab. Every run asserts the exit within its bound,
the lab's record (manifest STOPPED or COMPLETE, the pod verified gone, the provider showing it
terminated) and that nothing it started is left running. The bound after a teardown is the
dashboard's promise: out within 5 s of the lab's end (``done``), whatever the terminal does.

Labs that only boot share one mock cloud whose pods boot for a minute (no job, no torch; every
pod ended after each test); the decode and COMPLETE states run whole small `--mock` labs, as a
person would.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tui.exit_guard import EXIT_GRACE_S

from tests.pty_run import REPO, PtyProcess, assert_nothing_left
from .test_labs_replay import write_lab

pytestmark = pytest.mark.slow

#: the dashboard's promise once the lab is over and recorded
AFTER_LAB_S = 5.0
#: a lab's teardown on the mock cloud (terminate, verify gone, settle), with room for a loaded
#: machine, plus AFTER_LAB_S
TEARDOWN_S = 25.0
CLOSE, TERM = "terminal closed", "SIGTERM"
HOW = [CLOSE, TERM]
#: the reason the manifest records: a closed terminal is seen by its SIGHUP ("SIGHUP (the
#: terminal went away)") or, when a write reaches the dead tty first, by the write ("the terminal
#: went away (EIO)"); either way it says the terminal went away
SAID = {CLOSE: "the terminal went away", TERM: "SIGTERM"}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONPATH=str(REPO), TERM="xterm-256color",
               COLORTERM="truecolor", **extra)
    env.pop("TEXTUAL_ALLOW_SIGNALS", None)
    return env


def _dashboard(args: list[str], **env: str) -> PtyProcess:
    return PtyProcess([sys.executable, "-m", "tui.app", *args], _env(**env))


def _stop(dash: PtyProcess, how: str) -> float:
    """The stimulus; returns its wall time."""
    t = time.time()
    if how == CLOSE:
        dash.close_terminal()
    else:
        dash.send(signal.SIGTERM)
    return t


def _events(out: Path) -> list[dict]:
    try:
        lines = (out / "stream.jsonl").read_text().splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            break  # the line being written
    return events


def _done(out: Path) -> dict:
    """The lab's ``done`` event (stream.jsonl is complete once the lab has ended; while it runs
    the file is written in 64 KiB blocks, so the tests follow a lab on its screen)."""
    done = [ev for ev in _events(out) if ev["type"] == "phase" and ev.get("name") == "done"
            and ev["src"] == "lab"]
    assert done, f"no done event in {out}/stream.jsonl"
    return done[-1]


def _assert_record(out: Path, status: str, reason_has: str | None = None) -> dict:
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == status, m["reason"]
    if reason_has:
        assert reason_has in m["reason"]
    assert m["verified_gone"] is True
    return m


def _start_booting_cloud(state_dir: Path):
    """A mock cloud whose pods stay booting for a minute: a lab that reaches it has a pod to
    end, and no job to run."""
    from tplab.mock.handle import start_mock_cloud

    return start_mock_cloud(boot_delay_s=60.0, state_dir=state_dir)


@pytest.fixture(scope="module")
def _shared_booting_cloud(tmp_path_factory):
    """One booting cloud for the module's tests (starting one costs half a second, a second
    under load), its record in a home of its own (each test has its own TPLAB_HOME)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TPLAB_HOME", str(tmp_path_factory.mktemp("boot-cloud-home")))
        cloud = _start_booting_cloud(tmp_path_factory.mktemp("boot-cloud"))
    yield cloud
    cloud.stop()


@pytest.fixture
def booting_cloud(_shared_booting_cloud):
    """The shared booting cloud, left as the test found it: a pod a test left alive (one that
    failed before its teardown) would refuse the next test's lab, so every pod still alive is
    terminated."""
    cloud = _shared_booting_cloud
    yield cloud
    from tplab.lab.providers import provider_for

    alive = [p["id"] for p in cloud.pods() if p["desiredStatus"] != "TERMINATED"]
    if alive:
        provider = provider_for(cloud.api_key, cloud.api_url)
        for pod_id in alive:
            provider.terminate(pod_id)
    assert [p["id"] for p in cloud.pods() if p["desiredStatus"] != "TERMINATED"] == []


@pytest.fixture
def own_booting_cloud(tmp_path):
    """A booting cloud for one test whose pod lingers after it (the shared one stays clean)."""
    cloud = _start_booting_cloud(tmp_path / "boot-cloud")
    yield cloud
    cloud.stop()


def _booting_lab(cloud, lab_assets, out: Path) -> PtyProcess:
    ckpt, prompts = lab_assets
    dash = _dashboard(["--mock", "--api-url", cloud.api_url, "--start", "--prompts", "1",
                       "--new-tokens", "4", "--no-sweep", "--checkpoint", str(ckpt),
                       "--prompts-file", str(prompts), "--out", str(out)],
                      RUNPOD_API_KEY=cloud.api_key)
    try:
        dash.wait_for_text("stage boot", 90)
    except BaseException:
        dash.close()
        raise
    return dash


def _pod_terminated(cloud, manifest: dict) -> None:
    pods = {p["id"]: p for p in cloud.pods()}
    assert pods[manifest["instance_id"]]["desiredStatus"] == "TERMINATED"


# ------------------------------------------------------------------------------ no pod
@pytest.mark.parametrize("how", HOW)
def test_before_start_the_dashboard_exits_at_once_and_creates_nothing(tmp_path, how):
    out = tmp_path / "out"
    dash = _dashboard(["--mock", "--out", str(out)])
    try:
        dash.wait_for_text("Start", 60)
        t = _stop(dash, how)
        took = dash.wait(AFTER_LAB_S)
    finally:
        dash.close()
    assert dash.returncode == 0 and time.time() - t <= AFTER_LAB_S + 0.5, took
    assert not out.exists()  # no lab, no folder
    assert_nothing_left()


@pytest.mark.parametrize("how", [CLOSE, "SIGINT"])
def test_on_the_labs_screen_the_dashboard_exits_at_once(tmp_path, how):
    write_lab(Path(os.environ["TPLAB_HOME"]) / "mock" / "labs" / "an-old-lab", mock=True)
    dash = _dashboard(["--mock"])
    try:
        dash.wait_for_text("Start", 60)
        dash.type("l")
        dash.wait_for_text("an-old-lab", 30)
        if how == CLOSE:
            _stop(dash, CLOSE)
        else:
            dash.send(signal.SIGINT)  # kill -INT from another shell (ctrl+c is a key here)
        took = dash.wait(AFTER_LAB_S)
    finally:
        dash.close()
    assert dash.returncode == 0, took
    assert_nothing_left()


@pytest.mark.parametrize("how", HOW)
def test_during_a_replay_the_dashboard_exits_at_once(tmp_path, how):
    folder = write_lab(tmp_path / "a-lab", mock=True)
    before = (folder / "manifest.json").read_bytes()
    dash = _dashboard(["--replay", str(folder), "--speed", "1"])
    try:
        dash.wait_for_text("REPLAY", 60)
        dash.wait_for_text("stage preflight", 30)  # its first events played: mid-replay
        _stop(dash, how)
        took = dash.wait(AFTER_LAB_S)
    finally:
        dash.close()
    assert dash.returncode == 0, took
    assert (folder / "manifest.json").read_bytes() == before  # a replay records nothing
    assert_nothing_left()


# ------------------------------------------------------------------------------ a pod booting
@pytest.mark.parametrize("how", HOW)
def test_while_the_pod_boots_it_is_terminated_then_the_dashboard_exits(
        lab_assets, booting_cloud, tmp_path, how):
    """It pays for the dashboard's process and a lab up to its pod (a few seconds, no job)."""
    out = tmp_path / "out"
    dash = _booting_lab(booting_cloud, lab_assets, out)
    try:
        t = _stop(dash, how)
        took = dash.wait(TEARDOWN_S)
    finally:
        dash.close()
    m = _assert_record(out, "STOPPED", SAID[how])
    _pod_terminated(booting_cloud, m)
    done = _done(out)
    assert time.time() - done["ts"] <= AFTER_LAB_S + 0.5 and took <= TEARDOWN_S
    assert dash.returncode == 4  # stopped by the user, the pod verified gone
    assert done["ts"] >= t
    assert_nothing_left(but=(booting_cloud.process.pid,))


@pytest.mark.parametrize("how", HOW)
def test_on_the_quit_dialog_the_answer_is_terminate_and_quit(
        lab_assets, booting_cloud, tmp_path, how):
    """It pays for the dashboard's process and a lab up to its pod (a few seconds, no job)."""
    out = tmp_path / "out"
    dash = _booting_lab(booting_cloud, lab_assets, out)
    try:
        dash.type("q")
        dash.wait_for_text("Terminate and quit", 30)
        _stop(dash, how)
        dash.wait(TEARDOWN_S)
    finally:
        dash.close()
    m = _assert_record(out, "STOPPED", SAID[how])
    _pod_terminated(booting_cloud, m)
    assert dash.returncode == 4
    # the proof shows the end, not the dialog
    assert "Terminate and quit" not in (out / "proof-terminated.svg").read_text()
    assert_nothing_left(but=(booting_cloud.process.pid,))


def test_a_second_sigterm_ends_it_at_once_and_says_what_may_still_run(
        lab_assets, own_booting_cloud, tmp_path):
    """It pays for a booting cloud of its own (its pod lingers after the test), the dashboard's
    process and a lab up to its pod."""
    own_booting_cloud.set_faults(terminate_lingers=20)  # the teardown takes a while: cut short
    out = tmp_path / "out"
    dash = _booting_lab(own_booting_cloud, lab_assets, out)
    try:
        dash.send(signal.SIGTERM)
        dash.wait_for_text("VERIFYING GONE", 30)
        dash.send(signal.SIGTERM)
        took = dash.wait(2.0)
        time.sleep(0.2)  # the last words, read off the terminal
        said = " ".join(dash.text().split())
    finally:
        dash.close()
    assert dash.returncode == 128 + signal.SIGTERM, took
    assert "SIGTERM again: exiting before the teardown finished" in said
    assert "tplab terminate" in said
    # what is left is what SIGKILL leaves: the pod's own watchdog, and `tplab terminate`, end it


def test_a_terminal_that_takes_nothing_does_not_hold_up_the_teardown_or_the_exit(
        lab_assets, booting_cloud, tmp_path):
    """It pays for a lab up to its pod and for the wait it is about: the terminal takes nothing
    for longer than a write may wait (``STALL_S``), so that writes are being dropped."""
    from tui import terminal_driver

    out = tmp_path / "out"
    dash = _booting_lab(booting_cloud, lab_assets, out)
    try:
        dash.freeze()  # the terminal stops reading: its buffer fills, then the writes wait
        full_since, last, deadline = None, -1, time.monotonic() + 60
        while time.monotonic() < deadline:  # views switched: whole screens to draw
            dash.type("1234"[int(time.monotonic() * 4) % 4])
            time.sleep(0.1)
            now = dash.pending()
            if now != last:
                full_since, last = time.monotonic(), now
            elif time.monotonic() - full_since > terminal_driver.STALL_S + 0.5:
                break  # nothing taken for longer than a write may wait: writes are dropped now
        assert last > 0 and time.monotonic() < deadline, "the terminal's buffer never filled"
        t = _stop(dash, TERM)
        took = dash.wait(TEARDOWN_S)
    finally:
        dash.close()
    m = _assert_record(out, "STOPPED", "SIGTERM")
    _pod_terminated(booting_cloud, m)
    done = _done(out)
    assert done["ts"] >= t and time.time() - done["ts"] <= AFTER_LAB_S + EXIT_GRACE_S, took
    assert dash.returncode == 4
    assert_nothing_left(but=(booting_cloud.process.pid,))


# ------------------------------------------------------------------------------ whole labs
@pytest.mark.parametrize("how", HOW)
def test_mid_decode_then_a_new_lab_runs_to_complete_and_ends_the_same_way(
        lab_assets, tmp_path, how):
    """The bars checked by hand in tmux, as a test: the terminal closed (or SIGTERM) mid-decode
    ends the lab STOPPED with the pod verified gone and the process gone; the next `--mock
    --start` lab in the same TPLAB_HOME runs to COMPLETE with no word about the earlier one;
    and closing (or SIGTERM) after COMPLETE ends the dashboard at once with exit 0. It pays
    for two whole mock labs (torchrun on this CPU): a process ends once, so each of its two
    exits (mid-decode, after COMPLETE) needs a lab of its own; neither runs the warm-up or the
    profiled pass, which no check looks at."""
    ckpt, prompts = lab_assets
    # no warm-up and no profiled pass: neither is looked at, and they cost a lab seconds
    files = ["--checkpoint", str(ckpt), "--prompts-file", str(prompts), "--no-sweep",
             "--warmup", "0", "--profile-tokens", "0"]
    first, second = tmp_path / "first", tmp_path / "second"
    dash = _dashboard(["--mock", "--start", "--prompts", "2", "--new-tokens", "60", *files,
                       "--out", str(first)])
    try:
        dash.wait_for_text("› decode", 120)
        t = _stop(dash, how)
        took = dash.wait(TEARDOWN_S)
    finally:
        dash.close()
    _assert_record(first, "STOPPED", SAID[how])
    done = _done(first)
    assert done["ts"] >= t and time.time() - done["ts"] <= AFTER_LAB_S + 0.5, took
    assert dash.returncode == 4
    assert_nothing_left()  # its mock cloud and pod too

    dash = _dashboard(["--mock", "--start", "--prompts", "1", "--new-tokens", "4", *files,
                       "--out", str(second)])
    try:
        dash.wait_for_text("POD GONE", 120)
        deadline = time.monotonic() + 30
        while not (second / "proof-terminated.svg").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        t = _stop(dash, how)
        took = dash.wait(AFTER_LAB_S)
    finally:
        dash.close()
    m = _assert_record(second, "COMPLETE")
    assert m["terminated_screenshot"] == "proof-terminated.svg"
    warned = [ev for ev in _events(second) if ev["type"] in ("warning", "error")
              or (ev["type"] == "log" and ev.get("level") in ("warning", "error")
                  and ev["src"] == "lab")]
    assert warned == [], "the new lab warned"
    assert dash.returncode == 0 and took <= AFTER_LAB_S
    assert_nothing_left()
