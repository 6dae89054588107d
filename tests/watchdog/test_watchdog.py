"""The in-pod watchdog against a GraphQL stand-in on loopback, with a fake clock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.watchdog.fakeapi import FakeClock, FakeGraphQL, touch
from tplab.job.watchdog import Watchdog, WatchdogConfig, WatchdogConfigError, terminate_mutation

KEY = "rpa_SECRET_pod_scoped_key_0123456789"
POD = "abc123xyz"
REPO = Path(__file__).resolve().parents[2]


def make(tmp_path, api, clock, **kw) -> Watchdog:
    cfg = WatchdogConfig(heartbeat=tmp_path / "heartbeat", log=tmp_path / "watchdog.log",
                         pod_id=POD, api_key=KEY, api_base=api.url, **kw)
    return Watchdog(cfg, now=clock.now, sleep=clock.sleep)


def assert_one_terminate(api: FakeGraphQL) -> None:
    assert len(api.calls) == 1
    (call,) = api.calls
    assert call.path == "/graphql"
    assert call.headers["Authorization"] == f"Bearer {KEY}"
    assert call.body == {"query": terminate_mutation(POD)}
    assert f'podTerminate(input: {{podId: "{POD}"}})' in call.body["query"]


def test_stale_heartbeat_terminates_its_pod_once(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 700)
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, stale_after_s=600)
        assert dog.run() == 0
    assert_one_terminate(api)
    assert clock.sleeps == []        # tripped on the first look
    log = (tmp_path / "watchdog.log").read_text()
    assert "client heartbeat stale: age 700s >= 600s" in log
    assert "podTerminate attempt 1: accepted" in log


def test_fresh_heartbeat_never_terminates(tmp_path):
    clock = FakeClock()
    beat, stop = tmp_path / "heartbeat", tmp_path / "stop"

    def client(c: FakeClock) -> None:   # the client touches every 30 s; stops after 2000 s
        if int(c.t) % 30 == 0:
            touch(beat, c.t)
        if len(c.sleeps) == 400:
            stop.touch()

    touch(beat, clock.t)
    clock.on_sleep = client
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, stale_after_s=600, stop_file=stop, poll_s=5)
        assert dog.run() == 0
    assert api.calls == []
    assert len(clock.sleeps) == 400
    log = (tmp_path / "watchdog.log").read_text()
    assert "exiting without terminating" in log and "heartbeat age" in log


def test_wall_cap_terminates_even_with_a_fresh_heartbeat(tmp_path):
    clock = FakeClock()
    beat = tmp_path / "heartbeat"
    clock.on_sleep = lambda c: touch(beat, c.t)
    touch(beat, clock.t)
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, wall_cap_s=300, poll_s=5)
        assert dog.run() == 0
    assert_one_terminate(api)
    assert sum(clock.sleeps) == 300
    assert "wall-clock cap reached: running 300s >= cap 300s" in (tmp_path / "watchdog.log").read_text()


def test_wall_cap_counts_from_started_at(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t)
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, wall_cap_s=7200, started_at=clock.t - 7300)
        assert dog.run() == 0
    assert_one_terminate(api)


def test_missing_heartbeat_counts_from_the_watchdog_start(tmp_path):
    clock = FakeClock()
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, stale_after_s=60, poll_s=5)
        assert dog.run() == 0
    assert_one_terminate(api)
    assert sum(clock.sleeps) == 60    # not at once: it waited the full stale period
    assert "is missing" in (tmp_path / "watchdog.log").read_text()


def test_api_errors_are_retried_with_backoff_until_terminated(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    script = [(500, "Internal Server Error"),
              (200, '{"errors": [{"message": "Something went wrong. Please try again later"}]}'),
              (500, "oops")]
    with FakeGraphQL(script) as api:
        dog = make(tmp_path, api, clock, backoff_s=2)
        assert dog.run() == 0
    assert len(api.calls) == 4
    assert all(c.body == {"query": terminate_mutation(POD)} for c in api.calls)
    assert clock.sleeps == [2, 4, 8]
    log = (tmp_path / "watchdog.log").read_text()
    assert "attempt 1: failed (HTTP 500: Internal Server Error)" in log
    assert "attempt 2: failed (HTTP 200 with GraphQL error: Something went wrong" in log
    assert "attempt 4: accepted" in log


def test_gives_up_after_max_attempts_and_says_so(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    with FakeGraphQL([(500, "x")] * 3) as api:
        dog = make(tmp_path, api, clock, max_attempts=3)
        assert dog.run() == 1
    assert len(api.calls) == 3
    assert "giving up after 3 attempts" in (tmp_path / "watchdog.log").read_text()


def test_unreachable_api_is_retried(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    with FakeGraphQL() as api:
        url = api.url
    cfg = WatchdogConfig(heartbeat=tmp_path / "heartbeat", log=tmp_path / "watchdog.log",
                         pod_id=POD, api_key=KEY, api_base=url, max_attempts=2, http_timeout_s=2)
    assert Watchdog(cfg, now=clock.now, sleep=clock.sleep).run() == 1
    assert "failed (no answer" in (tmp_path / "watchdog.log").read_text()


def test_the_key_never_reaches_the_log(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    script = [(401, f"Unauthorized: key {KEY} is not valid"),
              (200, '{"errors": [{"message": "bad token ' + KEY + '"}]}')]
    with FakeGraphQL(script) as api:
        dog = make(tmp_path, api, clock)
        assert dog.run() == 0
    log = (tmp_path / "watchdog.log").read_text()
    assert len(api.calls) == 3 and "HTTP 401" in log
    assert KEY not in log and KEY[4:20] not in log
    assert "[redacted]" in log
    assert KEY not in repr(dog.config)


def test_stop_file_exits_without_terminating(tmp_path):
    clock = FakeClock()
    (tmp_path / "stop").touch()
    touch(tmp_path / "heartbeat", clock.t - 10_000)    # stale, but the client ended in order
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, stop_file=tmp_path / "stop")
        assert dog.run() == 0
    assert api.calls == []


@pytest.mark.parametrize("pod_id, key, base", [
    ('x"}) { evil', KEY, "http://127.0.0.1:1"),
    ("", KEY, "http://127.0.0.1:1"),
    (POD, "", "http://127.0.0.1:1"),
    (POD, KEY, "ftp://example"),
])
def test_bad_settings_are_refused(tmp_path, pod_id, key, base):
    with pytest.raises(WatchdogConfigError):
        WatchdogConfig(heartbeat=tmp_path / "h", log=tmp_path / "l", pod_id=pod_id,
                       api_key=key, api_base=base)


def _cli(tmp_path, env_extra, *args, timeout=30):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOD_")}
    env.update(env_extra, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "tplab.job.watchdog", "--heartbeat", str(tmp_path / "heartbeat"),
         "--log", str(tmp_path / "watchdog.log"), *args],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def test_cli_terminates_for_real_time_with_env_settings(tmp_path):
    touch(tmp_path / "heartbeat", 0)     # ancient
    with FakeGraphQL([(500, "once")]) as api:
        proc = _cli(tmp_path, {"RUNPOD_POD_ID": POD, "RUNPOD_API_KEY": KEY,
                               "RUNPOD_API_BASE_URL": api.url},
                    "--stale-after", "0.5", "--wall-cap", "60", "--poll", "0.05",
                    "--backoff", "0.05", "--pid-file", str(tmp_path / "pid"))
    assert proc.returncode == 0, proc.stderr
    assert len(api.calls) == 2 and api.calls[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert (tmp_path / "pid").read_text().strip().isdigit()
    assert KEY not in (tmp_path / "watchdog.log").read_text() + proc.stdout + proc.stderr


def test_cli_without_pod_environment_is_one_clear_error(tmp_path):
    proc = _cli(tmp_path, {"RUNPOD_API_KEY": KEY})
    assert proc.returncode == 2
    assert "RUNPOD_POD_ID is not set" in proc.stderr and proc.stderr.count("\n") == 1
    proc = _cli(tmp_path, {"RUNPOD_POD_ID": POD})
    assert proc.returncode == 2 and "RUNPOD_API_KEY is not set" in proc.stderr
    assert "not started" in (tmp_path / "watchdog.log").read_text()


def test_watchdog_imports_only_the_standard_library():
    code = ("import sys; import tplab.job.watchdog; "
            "bad = [m for m in ('torch', 'runpod', 'asyncssh', 'platformdirs') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
