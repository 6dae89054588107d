"""The in-pod watchdog against an API stand-in on loopback, with a fake clock; and on a mock pod."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.job.fakeapi import DELETED, FakeClock, FakeGraphQL, touch
from tests.fresh_imports import packages_loaded_by
from tplab.cloud.runpod.self_end import self_end as runpod_self_end
from tplab.cloud.vast.self_end import self_end as vast_self_end
from tplab.job.self_terminate import PodCredentials, SelfEnd, SelfTerminator, load_credentials
from tplab.records.self_end_word import encode
from tplab.job.watchdog import Watchdog, WatchdogConfig, WatchdogConfigError

KEY = "rpa_SECRET_pod_scoped_key_0123456789"
POD = "abc123xyz"
REPO = Path(__file__).resolve().parents[2]
MUTATION = f'mutation {{ podTerminate(input: {{podId: "{POD}"}}) }}'


RUNPOD = SelfEnd.from_dict(runpod_self_end())


def make(tmp_path, api, clock, runpodctl=None, run=None, spec=RUNPOD, **kw) -> Watchdog:
    """A watchdog following the RunPod description (the data the client hands the pod)."""
    cfg = WatchdogConfig(heartbeat=tmp_path / "heartbeat", log=tmp_path / "watchdog.log",
                         pod_id=POD, api_key=KEY, api_base=api.url, self_end=spec, **kw)
    extra = {"run": run} if run else {}
    return Watchdog(cfg, now=clock.now, sleep=clock.sleep,
                    which=lambda name: runpodctl if name == "runpodctl" else None, **extra)


def assert_v2_then_graphql(api: FakeGraphQL) -> None:
    """v2 DELETE (refused by the stand-in) first, then one GraphQL podTerminate."""
    assert [c.path for c in api.calls] == [f"/v2/pods/{POD}", "/graphql"]
    assert all(c.headers["Authorization"] == f"Bearer {KEY}" for c in api.calls)
    assert api.calls[1].body == {"query": MUTATION}


def test_stale_heartbeat_terminates_its_pod_once(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 700)
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, stale_after_s=600)
        assert dog.run() == 0
    assert_v2_then_graphql(api)
    assert clock.sleeps == []        # tripped on the first look
    log = (tmp_path / "watchdog.log").read_text()
    assert "client heartbeat stale: age 700s >= 600s" in log
    assert f"terminate round 1: v2 DELETE /v2/pods/{POD}: failed (HTTP 403:" in log
    assert "terminate round 1: trying GraphQL podTerminate" in log
    assert "terminate round 1: GraphQL podTerminate: accepted (HTTP 200" in log


def test_v2_delete_accepted_needs_no_fallback(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 700)
    with FakeGraphQL(deletes=[DELETED]) as api:
        assert make(tmp_path, api, clock).run() == 0
    assert [c.path for c in api.calls] == [f"/v2/pods/{POD}"]
    assert "v2 DELETE /v2/pods/abc123xyz: accepted (HTTP 204)" in \
        (tmp_path / "watchdog.log").read_text()


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
    assert_v2_then_graphql(api)
    assert sum(clock.sleeps) == 300
    assert "wall-clock cap reached: running 300s >= cap 300s" in (tmp_path / "watchdog.log").read_text()


def test_wall_cap_counts_from_started_at(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t)
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, wall_cap_s=7200, started_at=clock.t - 7300)
        assert dog.run() == 0
    assert_v2_then_graphql(api)


def test_missing_heartbeat_counts_from_the_watchdog_start(tmp_path):
    clock = FakeClock()
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, stale_after_s=60, poll_s=5)
        assert dog.run() == 0
    assert_v2_then_graphql(api)
    assert sum(clock.sleeps) == 60    # not at once: it waited the full stale period
    assert "is missing" in (tmp_path / "watchdog.log").read_text()


def test_rounds_that_fail_every_way_are_retried_with_backoff(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    script = [(500, "Internal Server Error"),
              (200, '{"errors": [{"message": "Something went wrong. Please try again later"}]}'),
              (500, "oops")]
    with FakeGraphQL(script) as api:
        dog = make(tmp_path, api, clock, backoff_s=2)
        assert dog.run() == 0
    assert len(api.posts) == 4 and len(api.v2_deletes) == 4
    assert all(c.body == {"query": MUTATION} for c in api.posts)
    assert clock.sleeps == [2, 4, 8]
    log = (tmp_path / "watchdog.log").read_text()
    assert "round 1: GraphQL podTerminate: failed (HTTP 500: Internal Server Error)" in log
    assert "round 2: GraphQL podTerminate: failed (HTTP 200 with GraphQL error: Something" in log
    assert "round 1: every way failed; retrying in 2s" in log
    assert "round 4: GraphQL podTerminate: accepted" in log


def test_runpodctl_is_the_last_way_and_gets_the_key_in_its_environment(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    ran = []

    def run(argv, env, timeout_s):
        ran.append((list(argv), env.get("RUNPOD_API_KEY")))
        return 0, f"pod {POD} removed"

    with FakeGraphQL([(500, "GraphQL gone")]) as api:
        dog = make(tmp_path, api, clock, runpodctl="/usr/local/bin/runpodctl", run=run)
        assert dog.run() == 0
    assert ran == [(["/usr/local/bin/runpodctl", "remove", "pod", POD], KEY)]
    log = (tmp_path / "watchdog.log").read_text()
    assert "trying runpodctl remove pod" in log and "runpodctl remove pod: accepted (exit 0" in log


def test_a_command_way_with_ok_output_is_judged_by_what_it_printed():
    """Vast's CLI exits 0 after an HTTP error: its way says what success prints."""
    spec = SelfEnd.from_dict({**vast_self_end("http://127.0.0.1:9"),
                              "ways": vast_self_end()["ways"][1:]})
    creds = PodCredentials("4242", KEY, "http://127.0.0.1:9")
    answers = {"ok": (0, "destroying instance 4242.\n"),
               # from inside, a 404 is a key that cannot see the instance: not a success
               "not seen": (0, "Failed with error 404: auth_error"),
               "refused": (0, "Failed with error 401: Invalid user key")}
    seen = []
    for name, answer in answers.items():
        def run(argv, env, timeout_s, answer=answer):
            seen.append((list(argv), env.get("VAST_API_KEY")))
            return answer
        term = SelfTerminator(creds, spec, run=run, which=lambda n: f"/usr/bin/{n}")
        assert [a.ok for a in term.terminate()] == [name == "ok"], name
    assert seen[0] == (["/usr/bin/vastai", "--url", "http://127.0.0.1:9", "destroy",
                        "instance", "4242", "-y"], KEY)


def test_gives_up_after_max_attempts_and_says_so(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    with FakeGraphQL([(500, "x")] * 3) as api:
        dog = make(tmp_path, api, clock, max_attempts=3)
        assert dog.run() == 1
    assert len(api.posts) == 3
    assert "giving up after 3 rounds" in (tmp_path / "watchdog.log").read_text()


def test_unreachable_api_is_retried(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    with FakeGraphQL() as api:
        url = api.url
    cfg = WatchdogConfig(heartbeat=tmp_path / "heartbeat", log=tmp_path / "watchdog.log",
                         pod_id=POD, api_key=KEY, api_base=url, self_end=RUNPOD, max_attempts=2,
                         http_timeout_s=2)
    assert Watchdog(cfg, now=clock.now, sleep=clock.sleep, which=lambda n: None).run() == 1
    assert "failed (no answer" in (tmp_path / "watchdog.log").read_text()


def test_the_key_never_reaches_the_log(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    script = [(401, f"Unauthorized: key {KEY} is not valid"),
              (200, '{"errors": [{"message": "bad token ' + KEY + '"}]}')]
    with FakeGraphQL(script, deletes=[(403, f'{{"detail": "no: {KEY}"}}')] * 3) as api:
        dog = make(tmp_path, api, clock)
        assert dog.run() == 0
    log = (tmp_path / "watchdog.log").read_text()
    assert len(api.posts) == 3 and "HTTP 401" in log
    assert KEY not in log and KEY[4:20] not in log
    assert "[redacted]" in log
    assert KEY not in repr(dog.config) and KEY not in repr(dog.terminator.creds)


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
                       api_key=key, api_base=base, self_end=RUNPOD)


def test_credentials_come_from_the_env_file_first(tmp_path):
    env_file = tmp_path / "rp_environment"
    env_file.write_text(f"export RUNPOD_POD_ID='{POD}'\nexport RUNPOD_API_KEY='{KEY}'\n"
                        "export RUNPOD_API_BASE_URL='http://127.0.0.1:9'\nexport X='it'\\''s'\n")
    creds = load_credentials(RUNPOD, {"TPLAB_RP_ENV_FILE": str(env_file),
                                      "RUNPOD_POD_ID": "other",
                                      "RUNPOD_API_KEY": "rpa_other_key_123456"})
    assert (creds.pod_id, creds.api_key, creds.api_base) == (POD, KEY, "http://127.0.0.1:9")
    assert creds.source == str(env_file)
    creds = load_credentials(RUNPOD, {"TPLAB_RP_ENV_FILE": str(tmp_path / "none"),
                                      "RUNPOD_POD_ID": POD, "RUNPOD_API_KEY": KEY})
    assert creds.source == "environment" and creds.api_base == "https://api.runpod.io"
    assert load_credentials(RUNPOD, {"TPLAB_RP_ENV_FILE": str(tmp_path / "none")}) is None
    with pytest.raises(ValueError):
        SelfTerminator(PodCredentials('x"y', KEY, "http://127.0.0.1:9"), RUNPOD)


def _cli(tmp_path, env_extra, *args, timeout=30, spec=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOD_")}
    env.update(env_extra, PYTHONPATH=str(REPO), TPLAB_RP_ENV_FILE=str(tmp_path / "no-such-file"))
    env.update({k: v for k, v in env_extra.items() if k == "TPLAB_RP_ENV_FILE"})
    return subprocess.run(
        [sys.executable, "-m", "tplab.job.watchdog", "--heartbeat", str(tmp_path / "heartbeat"),
         "--log", str(tmp_path / "watchdog.log"),
         "--self-end", encode(spec or runpod_self_end()), *args],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def test_cli_terminates_for_real_time_with_env_file_settings(tmp_path):
    touch(tmp_path / "heartbeat", 0)     # ancient
    with FakeGraphQL([(500, "once")]) as api:
        env_file = tmp_path / "rp_environment"
        env_file.write_text(f"export RUNPOD_POD_ID={POD}\nexport RUNPOD_API_KEY={KEY}\n"
                            f"export RUNPOD_API_BASE_URL={api.url}\n")
        proc = _cli(tmp_path, {"TPLAB_RP_ENV_FILE": str(env_file), "PATH": "/usr/bin:/bin"},
                    "--stale-after", "0.5", "--wall-cap", "60", "--poll", "0.05",
                    "--backoff", "0.05", "--pid-file", str(tmp_path / "pid"))
    assert proc.returncode == 0, proc.stderr
    assert len(api.posts) == 2 and api.posts[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert (tmp_path / "pid").read_text().strip().isdigit()
    assert KEY not in (tmp_path / "watchdog.log").read_text() + proc.stdout + proc.stderr


def test_cli_without_pod_environment_is_one_clear_error(tmp_path):
    proc = _cli(tmp_path, {"RUNPOD_API_KEY": KEY}, "--credentials-wait", "0")
    assert proc.returncode == 2
    assert "RUNPOD_POD_ID is not set" in proc.stderr and proc.stderr.count("\n") == 1
    started = time.monotonic()
    proc = _cli(tmp_path, {"RUNPOD_POD_ID": POD}, "--credentials-wait", "0.6")
    assert proc.returncode == 2 and "RUNPOD_API_KEY is not set" in proc.stderr
    assert time.monotonic() - started >= 0.6          # it waited for the key, then gave up
    assert "not started" in (tmp_path / "watchdog.log").read_text()


def test_a_watchdog_started_before_the_env_file_is_written_waits_for_it(tmp_path):
    """Started over SSH, the watchdog may come before the instance's start script has written
    the id and key to the env file (an SSH session has none of the container's variables)."""
    env_file = tmp_path / "instance.env"
    touch(tmp_path / "heartbeat", 0)
    with FakeGraphQL(deletes=[(200, '{"success": true}')]) as api:
        spec = {**vast_self_end(api.url), "env_file": str(env_file)}
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTAINER_")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tplab.job.watchdog", "--heartbeat",
             str(tmp_path / "heartbeat"), "--log", str(tmp_path / "watchdog.log"),
             "--self-end", encode(spec), "--stale-after", "0.5", "--poll", "0.05"],
            env={**env, "PYTHONPATH": str(REPO)}, cwd=tmp_path, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0)
            assert proc.poll() is None, proc.communicate()
            env_file.write_text(f"export CONTAINER_ID=4242\nexport CONTAINER_API_KEY={KEY}\n")
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err
    assert [c.path for c in api.calls] == ["/api/v0/instances/4242/"]
    assert KEY not in (tmp_path / "watchdog.log").read_text() + out + err


def test_watchdog_on_a_mock_pod_falls_back_when_v2_delete_is_refused(tmp_path):
    """The bar: v2 DELETE refused (403) for the pod-scoped key; the watchdog terminates its pod
    through GraphQL podTerminate, and watchdog.log shows both attempts."""
    from tplab.cloud.runpod.provider import RunPodProvider
    from tplab.mock.handle import start_mock_cloud
    from tests.mock.helpers import new_key, spec, ssh_run

    with start_mock_cloud({"pod_key_delete_refused": True}, boot_delay_s=0.1,
                          state_dir=tmp_path / "mock", keep_sandboxes=True) as cloud:
        p = RunPodProvider(**cloud.provider_kwargs(), poll_interval_s=0.05)
        key = new_key()
        ready = p.wait_ready(p.create(spec(key, name="tplab-dog", spot=False)).id, 15)
        ssh_run(ready.ssh.host, ready.ssh.port, key,
                f"PYTHONPATH={REPO} setsid nohup "
                f"{sys.executable} -m tplab.job.watchdog --heartbeat heartbeat --stale-after 0.3 "
                f"--poll 0.1 --log watchdog.log --self-end {encode(p.self_end())} "
                "> /dev/null 2>&1 < /dev/null &")
        deadline = time.monotonic() + 20
        while p.status(ready.id).state != "GONE" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert p.status(ready.id).state == "GONE"
        deadline = time.monotonic() + 5  # a SIGKILLed process may take a moment to go
        while True:
            view = next(v for v in cloud.pods() if v["id"] == ready.id)
            if view["alivePids"] == [] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert view["alivePids"] == []
        calls = cloud.calls()
    log = (Path(view["sandbox"]) / "watchdog.log").read_text()
    assert f"v2 DELETE /v2/pods/{ready.id}: failed (HTTP 403:" in log
    assert "trying GraphQL podTerminate" in log
    assert calls["DELETE /v2/pods/{id}"] == 1 and calls["graphql podTerminate"] == 1


def test_watchdog_imports_only_the_standard_library():
    assert packages_loaded_by(["tplab.job.watchdog"],
                              ["torch", "runpod", "asyncssh", "platformdirs", "requests"],
                              timeout_s=30) == []


def test_the_wall_cap_counts_on_the_pods_clock_never_the_laptops(tmp_path):
    """The guard's record (the container's start, pod clock) and the client's count of what is
    left (an elapsed time) decide; a laptop clock hours off changes nothing."""
    import json
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t)
    guard = tmp_path / "tplab-guard.json"
    guard.write_text(json.dumps({"started_at": clock.t - 7190}))  # the container, 7190 s ago
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock, wall_cap_s=7200, guard_file=guard,
                   wall_cap_left_s=7000)   # the client thinks 7000 s are left: the guard wins
        assert dog.decide().action == "watch"
        clock.t += 11
        assert dog.decide().action == "terminate"
    guard.unlink()
    clock2 = FakeClock()
    touch(tmp_path / "heartbeat", clock2.t)
    with FakeGraphQL() as api:
        dog = make(tmp_path, api, clock2, wall_cap_s=7200, wall_cap_left_s=30)
        assert dog.decide().action == "watch"
        clock2.t += 31
        assert "wall-clock cap reached" in dog.decide().reason


def test_a_look_that_fails_is_logged_and_the_watchdog_goes_on(tmp_path):
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 700)
    with FakeGraphQL(deletes=[DELETED]) as api:
        dog = make(tmp_path, api, clock, stale_after_s=600)
        real, calls = dog.decide, []

        def flaky():
            calls.append(1)
            if len(calls) == 1:
                raise OSError("the disk went away for a moment")
            return real()

        dog.decide = flaky
        assert dog.run() == 0
    log = (tmp_path / "watchdog.log").read_text()
    assert "a look failed (OSError: the disk went away" in log and "accepted" in log
    assert (tmp_path / "watchdog.log.done").is_file()  # an orderly end: no restart


def test_the_watchdog_follows_vasts_description_with_the_instance_key(tmp_path):
    """The same watchdog, handed Vast's description: DELETE /api/v0/instances/<id> with the
    instance's own key, read from the file onstart wrote (the SSH session has no CONTAINER_*)."""
    env_file = tmp_path / "instance.env"
    env_file.write_text(f"export CONTAINER_ID=4242\nexport CONTAINER_API_KEY={KEY}\n")
    touch(tmp_path / "heartbeat", 0)
    with FakeGraphQL(deletes=[(200, '{"success": true}')]) as api:
        spec = {**vast_self_end(api.url), "env_file": str(env_file)}
        proc = _cli(tmp_path, {"PATH": "/usr/bin:/bin"}, "--stale-after", "0.5", "--poll",
                    "0.05", spec=spec)
    assert proc.returncode == 0, proc.stderr
    assert [c.path for c in api.calls] == ["/api/v0/instances/4242/"]
    assert api.calls[0].headers["Authorization"] == f"Bearer {KEY}"
    log = (tmp_path / "watchdog.log").read_text()
    assert "DELETE /api/v0/instances/4242: accepted (HTTP 200)" in log and KEY not in log


def test_the_watchdog_refuses_to_start_without_a_description(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tplab.job.watchdog", "--heartbeat", str(tmp_path / "h"),
         "--log", str(tmp_path / "l")], capture_output=True, text=True, timeout=30,
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    assert proc.returncode == 2 and "--self-end is missing" in proc.stderr


def test_a_404_to_its_own_destroy_is_a_key_that_cannot_see_it_and_the_next_way_is_tried(
        tmp_path):
    """From inside, the pod exists: a 404 (Vast's answer to a key it does not know, RunPod's
    "not accessible to the caller") is never "already gone"; the watchdog says why and goes on
    to the next way, on each cloud's description."""
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    auth_404 = (404, '{"success": false, "error": "auth_error", "msg": "Invalid API key"}')
    with FakeGraphQL(deletes=[auth_404]) as api:            # RunPod: v2 404, then GraphQL
        assert make(tmp_path, api, clock).run() == 0
    assert_v2_then_graphql(api)
    log = (tmp_path / "watchdog.log").read_text()
    assert f"v2 DELETE /v2/pods/{POD}: failed (HTTP 404: this pod's key cannot see it" in log
    assert "GraphQL podTerminate: accepted" in log

    ran = []
    vast = tmp_path / "vast"
    vast.mkdir()
    touch(vast / "heartbeat", clock.t - 1000)
    with FakeGraphQL(deletes=[auth_404, (200, '{"success": false, "error": "x"}')]) as api:
        spec = SelfEnd.from_dict(vast_self_end(api.url))
        cfg = WatchdogConfig(heartbeat=vast / "heartbeat", log=vast / "watchdog.log",
                             pod_id="4242", api_key=KEY, api_base=api.url, self_end=spec)
        dog = Watchdog(cfg, now=clock.now, sleep=clock.sleep, which=lambda n: f"/usr/bin/{n}",
                       run=lambda argv, env, t: (ran.append(argv) or
                                                 (0, "Failed with error 404: auth_error")
                                                 if len(ran) < 2 else
                                                 (0, "destroying instance 4242.\n")))
        assert dog.run() == 0
    log = (vast / "watchdog.log").read_text()
    assert "DELETE /api/v0/instances/4242: failed (HTTP 404: this pod's key cannot see it" in log
    assert "vastai destroy instance 4242: failed (exit 0: Failed with error 404" in log
    assert "DELETE /api/v0/instances/4242: failed (HTTP 200 without success: true" in log
    assert "vastai destroy instance 4242: accepted" in log and len(ran) == 2


def test_with_runpods_graphql_retired_a_pod_key_that_gets_404_ends_its_pod_another_way(tmp_path):
    """A pod-scoped key that gets 404 on its own pod (v2), and GraphQL gone (an HTML 404):
    neither is a success, each says why, and runpodctl ends the pod."""
    clock = FakeClock()
    touch(tmp_path / "heartbeat", clock.t - 1000)
    ran = []
    page = (404, "<!DOCTYPE html><html><body>This API has been retired</body></html>")
    with FakeGraphQL([page], deletes=[(404, '{"title": "Not Found", "status": 404}')]) as api:
        dog = make(tmp_path, api, clock, runpodctl="/usr/local/bin/runpodctl",
                   run=lambda argv, env, t: (ran.append(argv) or (0, f"pod {POD} removed")))
        assert dog.run() == 0
    assert_v2_then_graphql(api)
    log = (tmp_path / "watchdog.log").read_text()
    assert f"v2 DELETE /v2/pods/{POD}: failed (HTTP 404: this pod's key cannot see it" in log
    assert "GraphQL podTerminate: failed (HTTP 404:" in log
    assert "runpodctl remove pod: accepted (exit 0" in log and len(ran) == 1
