"""The oldest torch the pod side supports, as a second interpreter the tests run the pod side on.

Why: a mock pod runs this process's torch (the newest the client pins), while a real pod runs its
image's, the oldest release the job supports. ``scripts/setup --tests`` (the README's test
command) installs that release into ``.venv-pod``; these helpers find it, say how to make it when
it is missing (a failure, not a skip: a suite that silently skipped them would prove nothing
about real pods), and run commands under it with a bound.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tplab.records.torch_support import OLDEST_TORCH_PIN

REPO = Path(__file__).resolve().parents[1]
POD_VENV = REPO / ".venv-pod"


def pod_python() -> str:
    """The interpreter with the oldest supported torch (``$TPLAB_TEST_POD_PYTHON`` or
    ``.venv-pod/bin/python``)."""
    python = os.environ.get("TPLAB_TEST_POD_PYTHON") or str(POD_VENV / "bin" / "python")
    if not os.access(python, os.X_OK):
        pytest.fail(f"no interpreter with torch {OLDEST_TORCH_PIN} at {python}: run "
                    "`./scripts/setup --tests` (the README's test command does)",
                    pytrace=False)
    return python


def pod_env() -> dict[str, str]:
    """This environment, with the repository on the path (the pod's interpreter has no tplab
    installed: it finds the job's packages by path, as on a pod) and no warning about NumPy,
    which torch looks for and the job does not need."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONWARNINGS"] = "ignore::UserWarning:torch._subclasses.functional_tensor"
    return env


def run_pod(args: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``pod_python() args...`` in ``cwd``, bounded; in its own session, so a timeout kills
    torchrun and every rank it started."""
    proc = subprocess.Popen([pod_python(), *args], cwd=cwd, env=pod_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(args[:4])}... under torch {OLDEST_TORCH_PIN} did not finish "
                    f"within {timeout_s:.0f} s:\n{out[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")
