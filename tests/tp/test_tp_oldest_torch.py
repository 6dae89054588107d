"""The lab sheet's four TP tests (column, row, sharded embedding, the Column → GELU → Row MLP) and the
collectives' names in a profiler's trace, under the oldest torch the pod side supports, over gloo
and over the shared-memory transport: the layers a real pod runs, on the torch it runs them
with."""

from __future__ import annotations

import pytest

from tests.pod_torch import REPO, run_pod
from tplab.records.torch_support import OLDEST_TORCH_PIN

SHEET_TESTS = ("test_column_parallel_matches_single_gpu", "test_row_parallel_matches_single_gpu",
              "test_sharded_embedding_lookup", "test_mlp_pattern_minimal",
              # the profiler's names for the collectives, on the oldest torch's profiler
              "test_collectives_are_named_in_a_trace_only_when_labelled")


#: pytest under the oldest torch, then the torch that ran the tests, in the same interpreter
PYTEST_THEN_TORCH = ("import sys, pytest; rc = pytest.main(sys.argv[1:]); import torch; "
                     "print(torch.__version__); sys.exit(rc)")


@pytest.mark.slow  # a second interpreter imports its torch and spawns ranks twice
def test_the_sheet_tp_tests_pass_under_the_oldest_torch():
    """Irreducible: a second interpreter imports the oldest torch, and each world size spawns
    its ranks (gloo, then shm)."""
    select = f"({' or '.join(SHEET_TESTS)}) and ws2"  # world size 2: gloo and shm
    done = run_pod(["-c", PYTEST_THEN_TORCH, "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                    "tests/tp/test_tensor_parallel.py", "-k", select,
                    "-W", "ignore::pytest.PytestConfigWarning"], cwd=REPO, timeout_s=240)
    assert done.returncode == 0, done.stdout[-4000:]
    assert f"{2 * len(SHEET_TESTS)} passed" in done.stdout, done.stdout[-2000:]
    # the torch that ran them, printed last by the same interpreter
    assert done.stdout.strip().splitlines()[-1].startswith(OLDEST_TORCH_PIN)
