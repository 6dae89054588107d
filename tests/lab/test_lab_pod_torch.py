"""A whole mock lab with its pod on the oldest torch the pod side supports (``--pod-python``),
the client on its own: upload, torchrun, streaming, the boot guard and watchdog, teardown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e_fixtures import assert_ledgers_settled, assert_profiled_pass
from tests.pod_torch import pod_python
from tplab.records.torch_support import OLDEST_TORCH_PIN

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "tplab", "run", "--mock", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


def test_a_mock_lab_with_its_pod_on_the_oldest_torch_completes(tmp_path):
    """The README's command: ``--pod-python .venv-pod/bin/python``, relative to where tplab
    runs (a mock pod runs in a sandbox folder of its own, where that path means nothing). What
    it pays for: a whole profiled lab whose pod processes run the second interpreter, torch
    2.4."""
    out = tmp_path / "lab"
    relative = os.path.relpath(pod_python(), REPO)
    done = _run("--pod-python", relative, "--prompts", "2", "--new-tokens", "8",
                "--warmup", "1", "--no-sweep", "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "COMPLETE" and m["verified_gone"] is True and m["outputs_match"] is True
    assert m["pod_torch_version"].startswith(OLDEST_TORCH_PIN)
    # the profiled pass over gloo on the oldest torch's profiler, fetched into the lab folder
    tl = assert_profiled_pass(out)
    assert tl["comm"] == "gloo" and OLDEST_TORCH_PIN in tl["taken"]["profiler"]
    guard = (out / "guard.log").read_text()
    assert "boot-guard" in guard and "started" in guard
    assert "started:" in (out / "watchdog.log").read_text()
    assert_ledgers_settled(Path(os.environ["TPLAB_HOME"]))


def test_pod_python_is_refused_for_a_real_pod_and_checked_on_the_mock(tmp_path):
    """Before anything is created: a real lab runs its image's python3, and a --pod-python
    without a torch the job supports would fail on the pod."""
    real = subprocess.run([sys.executable, "-m", "tplab", "run", "--pod-python", pod_python(),
                           "--yes", "--out", str(tmp_path / "real")], cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO), RUNPOD_API_KEY="rpa_test"),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert real.returncode != 0
    assert "--pod-python is for the mock lab" in real.stdout + real.stderr
    bare = tmp_path / "bare-python"
    bare.write_text("#!/bin/sh\nexec python3 -I -S \"$@\"\n")
    bare.chmod(0o755)
    no_torch = _run("--pod-python", str(bare), "--out", str(tmp_path / "no-torch"), timeout_s=120)
    assert no_torch.returncode != 0
    assert f"--pod-python {bare} has no torch installed" in no_torch.stdout + no_torch.stderr
