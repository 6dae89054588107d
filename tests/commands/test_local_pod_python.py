"""`tplab local --pod-python`: the job runs under the interpreter named, and one without a torch
the job supports is refused before torchrun starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tplab.records.torch_support import SUPPORTED_TORCH

REPO = Path(__file__).resolve().parents[2]


def _local(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tplab", "local", "--out", str(out), *args],
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_a_pod_python_without_torch_is_refused_before_torchrun(tmp_path):
    bare = tmp_path / "bare-python"
    bare.write_text("#!/bin/sh\nexec python3 -I -S \"$@\"\n")
    bare.chmod(0o755)
    done = _local("--pod-python", str(bare), out=tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"tplab local: --pod-python {bare} has no torch installed; "
                                   f"install a torch {SUPPORTED_TORCH} into it, e.g. "
                                   f"`{bare} -m pip install torch==2.4.0`.")
    assert not (tmp_path / "out" / "torchrun.log").exists()


def test_a_pod_python_that_is_not_a_program_is_refused(tmp_path):
    done = _local("--pod-python", str(tmp_path / "nowhere"), out=tmp_path / "out")
    assert done.returncode == 2
    assert "is not an executable file; name a Python interpreter." in done.stderr
