"""The linter and the type checker, as configured in pyproject.toml, pass on the code.

Why a test: the test command is what CI runs, so a finding or a type error fails the suite like
any broken behaviour, with the tools' own output in the failure. Both run from the venv the
suite runs in (installed with the ``test`` extra) and each takes well under a minute here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
#: each tool must finish within this on the 2-core machine
TOOL_TIMEOUT_S = 120


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(f"{tool} is not installed in {BIN}: run ./scripts/setup (the test extra)")
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT_S)


def test_ruff_finds_nothing():
    out = _run("ruff", "check", "--no-cache", "tplab", "tui", "tests", "benchmarks")
    assert out.returncode == 0, f"ruff check found problems:\n{out.stdout}{out.stderr}"


@pytest.mark.slow  # ~25 s of CPU on a fresh clone (no .mypy_cache): it reads torch's 1,400 modules
def test_mypy_finds_no_error():
    out = _run("mypy")  # files and flags from [tool.mypy] in pyproject.toml
    errors = [line for line in out.stdout.splitlines() if re.search(r":\d+: error:", line)]
    assert out.returncode == 0 and not errors, f"mypy found errors:\n{out.stdout}{out.stderr}"
