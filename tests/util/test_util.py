"""The two helpers both sides share: the pid-alive check and the atomic JSON writer."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from tplab.util.jsonfile import write_json
from tplab.util.pids import pid_alive


def test_a_killed_unreaped_process_counts_as_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert pid_alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # a zombie until reaped: it must already count as dead
        assert not pid_alive(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not pid_alive(0) and not pid_alive(-1)


def test_write_json_replaces_whole_files_and_leaves_nothing_behind(tmp_path):
    path = tmp_path / "sub" / "results.json"
    write_json(path, {"a": 1})
    write_json(path, {"a": 2, "b": [1.5]})
    assert json.loads(path.read_text()) == {"a": 2, "b": [1.5]}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # records may carry keys
    with pytest.raises(ValueError):
        write_json(path, {"a": float("nan")})  # not JSON: refused, the old file kept
    assert json.loads(path.read_text()) == {"a": 2, "b": [1.5]}
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]
