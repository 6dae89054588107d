"""The boot guard: the pod ends itself when its client never shows up, at the wall cap from its
first second, and behind a watchdog that cannot end it; and it travels whole in the create."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import zipfile
import io
from pathlib import Path

from tplab.job.boot_guard import BACKUP_MARGIN_S, BootGuard, GuardConfig
from tplab.lab.guard_payload import boot_step, pack


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _guard(tmp_path: Path, clock: Clock, terminate, **kw) -> BootGuard:
    cfg = GuardConfig(heartbeat=tmp_path / "tplab-run" / "heartbeat", log=tmp_path / "guard.log",
                      started_file=tmp_path / "tplab-guard.json",
                      first_heartbeat_s=kw.get("first", 60.0), wall_cap_s=kw.get("cap", 7200.0),
                      stale_after_s=kw.get("stale", 30.0), poll_s=1.0)
    return BootGuard(cfg, now=clock.now, mono=clock.now, sleep=clock.sleep, terminate=terminate)


def test_no_client_within_the_bound_terminates_the_pod(tmp_path):
    clock, calls = Clock(), []
    guard = _guard(tmp_path, clock, lambda log: calls.append(clock.t) or True, first=60.0)
    assert guard.run() == 0
    assert len(calls) == 1 and 60.0 <= calls[0] - 1_000_000.0 <= 61.0
    log = (tmp_path / "guard.log").read_text()
    assert "the client never showed up" in log and "termination accepted" in log
    assert '"started_at": 1000000.0' in (tmp_path / "tplab-guard.json").read_text()


def test_a_client_that_shows_up_hands_over_and_the_cap_still_holds(tmp_path):
    clock, calls = Clock(), []
    beat = tmp_path / "tplab-run" / "heartbeat"

    def terminate(log):
        calls.append(clock.t)
        return True

    guard = _guard(tmp_path, clock, terminate, first=60.0, cap=600.0, stale=30.0)

    def sleep(s):  # the client writes its heartbeat from second 20 on, every second
        clock.t += s
        if clock.t - 1_000_000.0 >= 20:
            beat.parent.mkdir(exist_ok=True)
            beat.write_text("x")
            import os
            os.utime(beat, (clock.t, clock.t))

    guard._sleep = sleep
    assert guard.run() == 0
    assert guard.client_seen and 600.0 <= calls[0] - 1_000_000.0 <= 601.0  # the wall cap
    assert "wall-clock cap reached" in (tmp_path / "guard.log").read_text()


def test_behind_the_watchdog_a_stale_heartbeat_still_ends_the_pod(tmp_path):
    clock, calls = Clock(), []
    beat = tmp_path / "tplab-run" / "heartbeat"
    beat.parent.mkdir()
    beat.write_text("x")
    import os
    os.utime(beat, (clock.t, clock.t))  # one heartbeat at the start, then silence
    guard = _guard(tmp_path, clock, lambda log: calls.append(clock.t) or True, stale=30.0)
    assert guard.run() == 0
    assert 30.0 + BACKUP_MARGIN_S <= calls[0] - 1_000_000.0 <= 32.0 + BACKUP_MARGIN_S


def test_a_failing_terminate_is_retried_and_never_kills_the_guard(tmp_path):
    clock, tries = Clock(), []

    def terminate(log):
        tries.append(clock.t)
        if len(tries) == 1:
            raise OSError("network unreachable")
        return len(tries) >= 3

    guard = _guard(tmp_path, clock, terminate, first=5.0)
    assert guard.run() == 0 and len(tries) == 3
    assert "network unreachable" in (tmp_path / "guard.log").read_text()


def test_the_guard_travels_whole_in_the_create_args(tmp_path):
    from tplab.cloud.base import BootStep, PodSpec
    from tplab.cloud.runpod.self_end import self_end
    from tplab.cloud.runpod.shapes import container_args
    from tplab.records.self_end_word import encode
    path, payload, command = boot_step(900, 7200, 600, encode(self_end()))
    args = container_args(PodSpec(name="tplab-x", gpu_type="g", gpu_count=1, public_key="k",
                                  boot=BootStep(path, payload, command)))
    assert args.startswith("bash -c '") and args.endswith("'")
    assert 'exec "${TPLAB_MOCK_START_SH:-/start.sh}"' in args  # hands over: sshd comes up
    b64 = re.search(r"echo ([A-Za-z0-9+/=]+) \| base64 -d", args).group(1)
    assert base64.b64decode(b64) == pack() and len(args) < 16_000
    names = zipfile.ZipFile(io.BytesIO(pack())).namelist()
    assert {"__main__.py", "tplab/job/boot_guard.py", "tplab/job/self_terminate.py",
            "tplab/records/self_end_word.py"} <= set(names)
    # the zip runs on its own, with nothing of tplab installed
    z = tmp_path / "guard.zip"
    z.write_bytes(pack())
    out = subprocess.run([sys.executable, "-I", str(z), "--help"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0 and "--first-heartbeat" in out.stdout


def test_a_404_to_its_own_destroy_is_not_gone_the_guard_says_why_and_tries_the_next_way(
        tmp_path, monkeypatch):
    """The guard follows the cloud's description with the pod's own key: a 404 to its own
    end (a key that cannot see the pod, never "already gone") is logged and the next way
    tried in the same round."""
    from tests.job.fakeapi import FakeGraphQL
    from tplab.cloud.runpod.self_end import self_end
    from tplab.job.self_terminate import SelfEnd
    clock = Clock()
    with FakeGraphQL(deletes=[(404, '{"title": "Not Found", "status": 404}')]) as api:
        monkeypatch.setenv("RUNPOD_POD_ID", "pod404")
        monkeypatch.setenv("RUNPOD_API_KEY", "rpa_pod_scoped_key_0123456789")
        monkeypatch.setenv("RUNPOD_API_BASE_URL", api.url)
        monkeypatch.setenv("TPLAB_RP_ENV_FILE", str(tmp_path / "absent"))
        cfg = GuardConfig(heartbeat=tmp_path / "hb", log=tmp_path / "guard.log",
                          started_file=tmp_path / "g.json", first_heartbeat_s=5.0,
                          wall_cap_s=600.0, stale_after_s=30.0, poll_s=1.0)
        guard = BootGuard(cfg, now=clock.now, mono=clock.now, sleep=clock.sleep,
                          self_end=SelfEnd.from_dict(self_end(api.url)))
        assert guard.run() == 0
    assert [c.path for c in api.calls] == ["/v2/pods/pod404", "/graphql"]
    log = (tmp_path / "guard.log").read_text()
    assert "v2 DELETE /v2/pods/pod404: failed (HTTP 404: this pod's key cannot see it" in log
    assert "GraphQL podTerminate: accepted" in log and "termination accepted" in log
    assert "rpa_pod_scoped_key" not in log
