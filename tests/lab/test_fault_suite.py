"""The fault suite's quick subset runs in the test suite: SIGKILL and SIGHUP while the pod boots
and while the job runs (each pod gone within its bound), a full disk under stream.jsonl, every
ledger settled, no canary key in any file or output. The full table: benchmarks/fault_suite.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.timeout(900)
def test_the_quick_fault_suite_passes_every_row(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fault_suite.py"), "--quick",
                          "--provider", "runpod", "--keep", str(tmp_path / "faults")], cwd=REPO,
                         capture_output=True, text=True, timeout=880)
    table = out.stdout
    rows = [ln for ln in table.splitlines() if ln.rstrip().endswith(("pass", "FAIL"))
            or "  FAIL" in ln or "  pass" in ln]
    assert out.returncode == 0, table + out.stderr[-3000:]
    assert len(rows) == 7 and not any("FAIL" in r for r in rows), table
    assert "Task exception was never retrieved" not in out.stderr


@pytest.mark.timeout(900)
def test_the_quick_vast_rows_pass(tmp_path):
    """On the mock Vast cloud: SIGKILL and SIGHUP in boot and run, outbid mid-run, a failed
    bid's leftover; then the ledgers and the canary."""
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fault_suite.py"), "--quick",
                          "--provider", "vast", "--keep", str(tmp_path / "faults")], cwd=REPO,
                         capture_output=True, text=True, timeout=880)
    table = out.stdout
    rows = [ln for ln in table.splitlines() if ln.rstrip().endswith(("pass", "FAIL"))
            or "  FAIL" in ln or "  pass" in ln]
    assert out.returncode == 0, table + out.stderr[-3000:]
    assert len(rows) == 8 and not any("FAIL" in r for r in rows), table
    assert sum("[vast]" in r for r in rows) == 4 and "vast outbid" in table
