"""`python -m tplab.job.torchrun` (the launch line's torchrun): the exit status, output and exit
handlers of `python -m torch.distributed.run` with the same arguments, only sooner. A stand-in
``torch.distributed.run`` (on PYTHONPATH ahead of the real one) plays each way torchrun ends."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

STAND_IN = textwrap.dedent("""
    import atexit, sys
    atexit.register(lambda: print("exit handler ran", flush=True))
    print("args", " ".join(sys.argv[1:]))          # buffered: flushed at the exit
    how = sys.argv[1]
    if how == "ok":
        pass
    elif how == "code":
        sys.exit(3)
    elif how == "message":
        sys.exit("torchrun: a message")
    elif how == "raise":
        raise RuntimeError("a worker failed")
""")


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stand-in")
    (root / "torch" / "distributed").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("")
    (root / "torch" / "distributed" / "__init__.py").write_text("")
    (root / "torch" / "distributed" / "run.py").write_text(STAND_IN)
    return root


@pytest.mark.parametrize("how, status", [("ok", 0), ("code", 3), ("message", 1), ("raise", 1)])
def test_the_launch_gives_torchruns_own_exit_status_output_and_handlers(stand_in, how, status):
    env = {**os.environ, "PYTHONPATH": f"{stand_in}{os.pathsep}{REPO}"}
    ran = {m: subprocess.run([sys.executable, "-m", m, how, "--nproc-per-node=2"], env=env,
                             capture_output=True, text=True, timeout=60)
           for m in ("tplab.job.torchrun", "torch.distributed.run")}
    fast, plain = ran["tplab.job.torchrun"], ran["torch.distributed.run"]
    assert fast.returncode == plain.returncode == status, (fast, plain)
    assert fast.stdout == plain.stdout == f"args {how} --nproc-per-node=2\nexit handler ran\n"
    if how == "message":
        assert fast.stderr == plain.stderr == "torchrun: a message\n"
    if how == "raise":
        assert "RuntimeError: a worker failed" in fast.stderr and "Traceback" in fast.stderr
