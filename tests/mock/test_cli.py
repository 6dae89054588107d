"""`tplab mock-cloud` as a process: the ready line, and stopping it ends every pod's processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tplab.cloud.base import BalanceError
from tplab.cloud.runpod.provider import RunPodProvider
from tplab.mock.handle import start_mock_cloud
from tests.mock.helpers import http, new_key, spec, ssh_run


def test_cli_prints_ready_line_and_stops_on_sigterm(tmp_path):
    env = {**os.environ, "TPLAB_MOCK_API_KEY": "rpa_cli_test_key_0123456789"}
    proc = subprocess.Popen([sys.executable, "-m", "tplab", "mock-cloud", "--port", "0",
                             "--boot-delay", "0.1", "--balance", "0.001", "--no-spot-capacity",
                             "--state-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        info = json.loads(proc.stdout.readline())
        assert info["api_url"].startswith("http://127.0.0.1:")
        assert info["api_key"] == "rpa_cli_test_key_0123456789"
        status, state = http("GET", info["api_url"] + "/_mock/state", info["api_key"])
        assert status == 200 and state["balance"] == 0.001 and state["faults"]["no_spot_capacity"]
        p = RunPodProvider(api_key=info["api_key"], api_base_url=info["api_url"], retry_delays=())
        with pytest.raises(BalanceError, match=r"lack of funds \(HTTP 402: Your balance is too low"):
            p.create(spec(new_key(), name="tplab-poor", spot=False))
        assert http("GET", info["api_url"] + "/_mock/pods", info["api_key"])[1] == []
        # started by hand, it is found by `tplab status --mock` / `tplab terminate --mock` with
        # the same TPLAB_HOME, as a lab's own mock is
        from tplab.home import mock_clouds
        assert [(r.api_url, r.pid) for r in mock_clouds.running()] == [
            (info["api_url"], proc.pid)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert not Path(info["state_dir"]).exists()  # sandboxes removed without --keep-sandboxes
        assert mock_clouds.running() == [] and not list(mock_clouds.clouds_dir().iterdir())
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()


def test_bad_fault_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "f.json"
    bad.write_text('{"nope": 1}')
    r = subprocess.run([sys.executable, "-m", "tplab.mock", "--faults", str(bad)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown fault switch(es) nope" in r.stderr


def test_stop_sweeps_processes_of_a_mock_that_died_hard(tmp_path):
    key = new_key()
    cloud = start_mock_cloud(boot_delay_s=0.1, state_dir=tmp_path)
    try:
        p = RunPodProvider(**cloud.provider_kwargs(), poll_interval_s=0.05)
        ready = p.wait_ready(p.create(spec(key, name="tplab-hard")).id, 15)
        r = ssh_run(ready.ssh.host, ready.ssh.port, key,
                    "setsid nohup sleep 300 >/dev/null 2>&1 </dev/null & echo $!")
        pid = int(r.stdout.strip())
        cloud.process.kill()  # SIGKILL: the mock cannot clean up after itself
        cloud.process.wait(10)
        assert Path(f"/proc/{pid}").exists()
    finally:
        cloud.stop()
    assert not Path(f"/proc/{pid}").exists() or " Z " in Path(f"/proc/{pid}/stat").read_text()


CRASHING_PARENT = r"""
import os, sys
from tplab.cloud.runpod.provider import RunPodProvider
from tplab.mock.handle import start_mock_cloud
from tests.mock.helpers import new_key, spec, ssh_run
key = new_key()
cloud = start_mock_cloud(boot_delay_s=0.1, state_dir=sys.argv[1])
p = RunPodProvider(**cloud.provider_kwargs(), poll_interval_s=0.05)
ready = p.wait_ready(p.create(spec(key, name="tplab-crash")).id, 15)
r = ssh_run(ready.ssh.host, ready.ssh.port, key, "setsid nohup sleep 300 >/dev/null 2>&1 </dev/null & echo $!")
print(cloud.process.pid, r.stdout.strip(), flush=True)
os._exit(3)  # a crashed client: no stop(), no cleanup
"""


@pytest.mark.slow  # a mock cloud and its pods
def test_mock_exits_with_a_crashed_parent_and_ends_its_pods(tmp_path):
    """What it pays for: a client process of its own (Python, tplab's provider, its mock cloud
    and a pod) that crashes, and the mock's check of its parent (every 0.5 s)."""
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", CRASHING_PARENT, str(tmp_path)], cwd=root,
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 3, r.stderr
    mock_pid, sleep_pid = (int(x) for x in r.stdout.split())
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (Path(f"/proc/{mock_pid}").exists()
                                           or Path(f"/proc/{sleep_pid}").exists()):
        time.sleep(0.1)
    assert not Path(f"/proc/{mock_pid}").exists()
    assert not Path(f"/proc/{sleep_pid}").exists()
