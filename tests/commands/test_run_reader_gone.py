"""`tplab run` whose reader goes away mid-lab: its stdout piped to a reader that closes the pipe
once the pod boots (`tplab run --mock --json | head`), or the terminal it runs in closed
while the pod boots (a pseudo-terminal this test owns, its master closed: SIGHUP, then EIO on
every write; a mock cloud whose pods boot for a minute, so no job runs). Either way the lab is
stopped through terminate + verify gone, the process ends within its bound, quietly (the piped
one says nothing and exits 141, as a program its reader left), and nothing is left that makes
the next lab refuse or warn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.e2e_fixtures import lab_assets_for
from tests.pty_run import REPO, PtyProcess, assert_nothing_left

pytestmark = pytest.mark.slow

PROMPTS = ["he goed to school", "i has eat"]
#: a mock lab's teardown (terminate, verify gone, settle) with room for a loaded machine
TEARDOWN_S = 25.0


@pytest.fixture(scope="module")
def lab_assets(tmp_path_factory) -> tuple[Path, Path]:
    return lab_assets_for(tmp_path_factory, PROMPTS, "run-reader-assets")


def _argv(lab_assets, out: Path, *extra: str) -> list[str]:
    ckpt, prompts = lab_assets
    return [sys.executable, "-m", "tplab", "run", "--mock", "--prompts", "2", "--new-tokens",
            "60", "--no-sweep", "--checkpoint", str(ckpt), "--prompts-file", str(prompts),
            "--out", str(out), *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_a_json_reader_that_goes_away_while_the_pod_boots_stops_the_lab_quietly(lab_assets,
                                                                              tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(_argv(lab_assets, out, "--json"), cwd=REPO, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    seen: list[dict] = []
    went_away = threading.Event()

    def reader() -> None:  # `| head`: read until the pod boots, then go
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(json.loads(line))
            if seen[-1]["type"] == "phase" and seen[-1]["name"] == "boot":
                break
        proc.stdout.close()
        went_away.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        assert went_away.wait(120), f"the pod never booted; last events: {seen[-3:]}"
        t = time.monotonic()
        err = proc.communicate(timeout=TEARDOWN_S)[1].decode()
        took = time.monotonic() - t
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # quietly: nothing said, the status of a program its reader left (the pod verified gone)
    assert proc.returncode == 141 and err == "", err
    assert took <= TEARDOWN_S
    m = _manifest(out)
    assert m["status"] == "STOPPED" and "the output pipe was closed" in m["reason"]
    assert m["verified_gone"] is True and m["instance_id"]  # a pod was created, and is gone
    assert_nothing_left()  # the lab's own mock cloud and its pod too


def test_the_terminal_closed_while_the_pod_boots_stops_the_lab_and_the_process_ends(
        lab_assets, tmp_path):
    from tplab.mock.handle import start_mock_cloud

    out = tmp_path / "out"
    cloud = start_mock_cloud(boot_delay_s=60.0, state_dir=tmp_path / "boot-cloud")
    try:
        run = PtyProcess(_argv(lab_assets, out, "--api-url", cloud.api_url),
                         {**_env(), "RUNPOD_API_KEY": cloud.api_key})
        try:
            run.wait_for_text("s] boot", 120)
            run.close_terminal()
            took = run.wait(TEARDOWN_S)
        finally:
            run.close()
        assert run.returncode == 4, took
        m = _manifest(out)
        assert m["status"] == "STOPPED" and m["verified_gone"] is True
        assert "SIGHUP" in m["reason"] or "the output pipe was closed" in m["reason"]
        assert {p["id"]: p["desiredStatus"] for p in cloud.pods()} == {
            m["instance_id"]: "TERMINATED"}
        assert_nothing_left(but=(cloud.process.pid,))
    finally:
        cloud.stop()
