"""The profiler's own log lines (kineto's, printed from C++ to file descriptor 2) stay out of the
job's log; every other line printed meanwhile still reaches it, in order."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tplab.job.profiler_chatter import chatter_kept_out, is_chatter, kept_lines

ROOT = Path(__file__).resolve().parents[2]
START = b"USDT:2026-12-05 23:49:18 7888:7888 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
STAGE = (b"STAGE:2026-12-05 23:49:55 8954:8954 SyncActivityProfilerHandler.cpp:60] Completed "
         b"Stage: Collection\n")
NO_GPU = (b"ERROR:2026-12-05 23:49:21 8068:8068 DeviceProperties.cpp:46] gpuGetDeviceCount "
          b"failed with code 35\n")
REAL = b"ERROR:2026-12-05 23:49:21 8068:8068 CuptiActivityApi.cpp:99] CUPTI buffer overflow\n"


def test_the_profilers_progress_is_chatter_and_its_errors_are_not():
    assert is_chatter(START, gpu=True) and is_chatter(STAGE, gpu=False)
    assert is_chatter(NO_GPU, gpu=False) and not is_chatter(NO_GPU, gpu=True)
    assert not is_chatter(REAL, gpu=False)
    assert not is_chatter(b"tplab.job rank 1: USDT:oops\n", gpu=False)
    assert kept_lines(START + b"a warning\n" + STAGE + REAL, gpu=False) == b"a warning\n" + REAL


def test_inside_the_block_only_chatter_is_dropped_from_file_descriptor_2():
    """A child process (its fd 2 a pipe, as a rank's is a log file) writes chatter and a real
    line from 'C++' (os.write on fd 2) inside the block: only the real line comes out."""
    code = textwrap.dedent(f"""
        import os, sys
        from tplab.job.profiler_chatter import chatter_kept_out
        sys.stderr.write("before\\n")
        with chatter_kept_out(gpu=False):
            os.write(2, {START!r} + {NO_GPU!r})
            sys.stderr.write("kept\\n")
            os.write(2, {STAGE!r})
        sys.stderr.write("after\\n")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"before\nkept\nafter\n"


def test_a_block_that_raises_still_gives_stderr_back(capfd):
    try:
        with chatter_kept_out(gpu=False):
            os.write(2, b"the error's story\n")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    os.write(2, b"later\n")
    assert capfd.readouterr().err == "the error's story\nlater\n"
