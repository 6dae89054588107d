"""Every command ends quietly when the reader of its output is gone (`tplab scaling | head -1`):
no traceback, nothing on stderr, the exit status of a program ended by SIGPIPE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _with_reader_gone(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``tplab argv`` with stdout a pipe whose reading end is already closed: its first
    write fails as it does once `head -1` has its line."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "tplab", *argv], cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [["scaling"], ["scaling", "--list"], ["status", "--mock"],
                                  ["budget", "--mock"], ["handin", "--list"]])
def test_a_command_whose_reader_is_gone_ends_quietly(argv):
    done = _with_reader_gone(argv)
    assert done.stderr == "" and done.returncode == 141, done.stderr
