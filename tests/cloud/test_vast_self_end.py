"""A Vast instance ends itself with its own key, CONTAINER_API_KEY, whichever way its watchdog
started: from an SSH session (which, as on Vast, has none of the container's variables: the key
comes from the file the instance's onstart wrote) or from the container's start (onstart, whose
environment has it). On the mock Vast cloud, through tplab's real create (shapes.onstart) and
the real watchdog; the account key is never used to destroy it."""

from __future__ import annotations

import base64
import shlex
import sys
import time
from pathlib import Path

import pytest

from tests.mock.helpers import new_key, spec, ssh_run
from tplab.cloud.base import GONE_STATES, BootStep
from tplab.cloud.vast.self_end import ENV_FILE
from tplab.cloud.vast.provider import VastProvider
from tplab.records.self_end_word import encode

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def watchdog_line(self_end: str) -> str:
    """The watchdog, and a stand-in for the client's heartbeat that stops when the file
    ``client-gone`` appears (the client went away)."""
    beat = "while [ ! -e client-gone ]; do date > hb; sleep 0.2; done"
    return (f"date > hb; setsid nohup sh -c {shlex.quote(beat)} > /dev/null 2>&1 < /dev/null & "
            f"setsid nohup env PYTHONPATH={shlex.quote(str(REPO))} "
            f"{shlex.quote(sys.executable)} -m tplab.job.watchdog --heartbeat hb "
            f"--stale-after 1 --wall-cap 600 --poll 0.2 --log wd.log --self-end {self_end} "
            "> /dev/null 2>&1 < /dev/null &")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@pytest.mark.parametrize("started_from", ["ssh", "onstart"])
def test_the_instance_ends_itself_with_its_own_key(vast, started_from):
    """What it pays for: the real watchdog as a process on the instance, and its heartbeat
    going stale (1 s) once the client is gone."""
    key = new_key()
    provider = VastProvider(vast.api_key, vast.api_url, poll_interval_s=0.2, client_key=key,
                            retry_delays=(0.2,), terminate_delays=(0.2,))
    word = encode(provider.self_end())
    boot, gone_by_itself = None, False
    if started_from == "onstart":   # the container's start runs it (as the boot guard is run)
        boot = BootStep(path="unused.bin", payload_b64=base64.b64encode(b"-").decode(),
                        command=watchdog_line(word))
    made = provider.create(spec(key, f"tplab-selfend-{started_from}", boot=boot))
    try:
        ready = provider.wait_ready(made.id, timeout_s=30, client_key=key)
        record = next(p for p in vast.pods() if p["id"] == int(made.id))
        assert ready.ssh is not None
        seen = ssh_run(ready.ssh.host, ready.ssh.port, key,
                       'echo "[${CONTAINER_ID:-}][${CONTAINER_API_KEY:-}]"', record["hostKey"])
        assert seen.stdout.strip() == "[][]"   # an SSH session has none of the container's
        if started_from == "ssh":
            ssh_run(ready.ssh.host, ready.ssh.port, key, watchdog_line(word), record["hostKey"])
        deadline = time.monotonic() + 30
        while "started:" not in _read(Path(record["sandbox"]) / "wd.log"):
            assert time.monotonic() < deadline, "the watchdog never started"
            time.sleep(0.1)
        ssh_run(ready.ssh.host, ready.ssh.port, key, ": > client-gone", record["hostKey"])
        deadline = time.monotonic() + 30
        while provider.status(made.id).state not in GONE_STATES:
            assert time.monotonic() < deadline, "the instance did not end itself"
            time.sleep(0.2)
        gone_by_itself = True
    finally:
        provider.terminate(made.id)
    log = (Path(record["sandbox"]) / "wd.log").read_text()
    # the destroy it asked for ended it (and its own process with it, before it could log more)
    assert f"trying DELETE /api/v0/instances/{made.id}" in log, log
    env_file = ENV_FILE.replace("$HOME", record["sandbox"])
    assert f"pod key from {env_file}" in log
    assert vast.api_key not in log
    assert gone_by_itself and provider.verify_gone(made.id).gone


def test_vasts_cli_is_a_way_that_says_what_happened(vast):
    """The fallback way, Vast's own CLI with the instance's key in VAST_API_KEY: it must destroy
    without asking (-y), and be judged by what it prints, as it exits 0 even after an error.
    It pays for two starts of the installed ``vastai`` (~0.6 s each): the way runs it as a
    process, so the test does too."""
    from tests.mock.vast_helpers import VASTAI
    from tplab.job.self_terminate import PodCredentials, SelfEnd, SelfTerminator
    if not VASTAI.is_file():
        pytest.fail(f"Vast's CLI is not installed at {VASTAI}: run ./scripts/setup --tests")
    key = new_key()
    provider = VastProvider(vast.api_key, vast.api_url, poll_interval_s=0.2, client_key=key)
    description = provider.self_end()
    cli_only = SelfEnd.from_dict({**description, "ways": description["ways"][1:]})
    which = {"vastai": str(VASTAI)}.get
    made = provider.create(spec(key, "tplab-selfend-cli"))
    sandbox = next(p for p in vast.pods() if p["id"] == int(made.id))["sandbox"]
    env_file = Path(sandbox) / ".tplab-guard" / "instance.env"
    deadline = time.monotonic() + 30
    while not env_file.is_file():
        assert time.monotonic() < deadline, "onstart never wrote the instance's key"
        time.sleep(0.1)
    from tplab.job.self_terminate import read_env_file
    saved = read_env_file(env_file)
    try:
        wrong = SelfTerminator(PodCredentials(made.id, "not-this-instances-key", vast.api_url),
                               cli_only, which=which).terminate()
        # Vast answers a key it does not know 404 auth_error; its CLI prints "Failed with
        # error 404" and exits 0: from inside, the key cannot see the instance, never "gone"
        assert [a.ok for a in wrong] == [False] and "Failed with error 404" in wrong[0].detail
        assert provider.status(made.id).state not in GONE_STATES
        done = SelfTerminator(PodCredentials(made.id, saved["CONTAINER_API_KEY"], vast.api_url),
                              cli_only, which=which).terminate()
        assert [a.ok for a in done] == [True], done
        assert saved["CONTAINER_API_KEY"] not in done[0].detail
        assert provider.status(made.id).state in GONE_STATES
    finally:
        provider.terminate(made.id)
