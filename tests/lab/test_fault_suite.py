"""The fault suite's quick Vast rows run in the test suite: SIGKILL and SIGHUP while the instance
boots and while the job runs (each instance gone within its bound), every ledger settled, no
canary key in any file or output. The full table: benchmarks/fault_suite.py.

Where the other quick rows went (each into the scenario lab that already ran it, marked there
"-- fault suite"; the table of labs is tests/lab/test_lab_e2e.py's docstring):

  client SIGHUP in run       test_lab_stops_e2e.py::test_sighup_while_the_job_runs_tears_down_at_once
  client SIGKILL in boot     test_lab_stops_e2e.py::test_client_killed_while_the_pod_boots_the_guard_ends_it
  client SIGKILL in run      test_lab_stops_e2e.py::test_a_killed_watchdog_is_restarted_and_still_ends_the_pod
  client SIGHUP in boot      test_lab_e2e.py::test_ctrl_c_while_booting_terminates_and_settles[sighup]
  disk full (stream.jsonl)   test_lab_runpod.py::test_spot_gone_with_graphql_is_a_stub_naming_on_demand_which_then_completes
  GraphQL retired            the same lab (a spot stub, then on-demand through REST v2)
  vast outbid mid-run        test_lab_vast.py::test_outbid_mid_run_is_a_spot_interruption_with_the_tokens_kept
  vast failed bid            test_lab_vast.py::test_a_failed_bid_leaves_nothing_and_says_so
  vast bid rented on demand  test_lab_vast.py::test_a_bid_rented_on_demand_is_destroyed_at_once_and_said_in_one_sentence
  vast list (v0 deprecated,  test_lab_vast.py::test_a_lab_on_vast_as_it_answers_in_production_completes
   2 pages), vast 429 (the
   limits doubled), vast ssh
   (direct port blocked),
   vast state (destroyed)
  vast 429 (Vast's own       test_lab_vast.py::test_a_vast_lab_completes_and_names_vast (0 answers
   limits), vast market,       of 429, the guard started with the instance)
   vast offer (taken, stale)
  vast state (stopped intent test_lab_vast.py::test_a_stopped_intent_while_the_instance_comes_up_fails_the_lab_at_once
   while it comes up)
  vast state (stopped intent test_lab_vast.py::test_outbid_mid_run_is_a_spot_interruption_with_the_tokens_kept
   mid-run)
  vast key (refused)         tests/commands/test_wrong_vast_key.py (check, status, terminate, run)
  vast state (OCI, restart-  tests/cloud/test_vast_as_it_answers.py (provider against the mock)
   ing), vast money (credit)
  vast key absent from SSH   every Vast row (the mock's SSH sessions have no CONTAINER_*), and
                             tests/cloud/test_vast_self_end.py (from SSH and from onstart)
  ledgers, canary            each of the labs above (tests/e2e_fixtures.py: assert_ledgers_settled,
                             assert_key_unwritten)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.timeout(900)
def test_the_quick_vast_rows_pass(tmp_path):
    """On the mock Vast cloud: SIGKILL and SIGHUP in boot and run, the four trials at once;
    then the ledgers and the canary. What it pays for: a SIGKILLed client's pod is ended only by
    the pod itself, so the longest trial waits out the boot guard's bound (12 s after the
    container started)."""
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fault_suite.py"), "--quick",
                          "--provider", "vast", "--keep", str(tmp_path / "faults")], cwd=REPO,
                         capture_output=True, text=True, timeout=880)
    table = out.stdout
    rows = [ln for ln in table.splitlines() if ln.rstrip().endswith(("pass", "FAIL"))
            or "  FAIL" in ln or "  pass" in ln]
    assert out.returncode == 0, table + out.stderr[-3000:]
    assert len(rows) == 6 and not any("FAIL" in r for r in rows), table
    assert sum("[vast]" in r for r in rows) == 4
    assert "Task exception was never retrieved" not in out.stderr
