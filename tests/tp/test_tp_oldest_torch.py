"""The seed's four TP tests (column, row, sharded embedding, the Column → GELU → Row MLP) and the
collectives' names in a profiler's trace, under the oldest torch the pod side supports, over gloo
and over the shared-memory transport: the layers a real pod runs, on the torch it runs them
with."""

from __future__ import annotations

import pytest

from tests.pod_torch import REPO, run_pod
from tplab.records.torch_support import OLDEST_TORCH_PIN

SEED_TESTS = ("test_column_parallel_matches_single_gpu", "test_row_parallel_matches_single_gpu",
              "test_sharded_embedding_lookup", "test_mlp_pattern_minimal",
              # the profiler's names for the collectives, on the oldest torch's profiler
              "test_collectives_are_named_in_a_trace_only_when_labelled")


@pytest.mark.slow  # a second interpreter imports its torch and spawns ranks twice
def test_the_seed_tp_tests_pass_under_the_oldest_torch():
    select = f"({' or '.join(SEED_TESTS)}) and ws2"  # world size 2: gloo and shm
    done = run_pod(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                    "tests/tp/test_tensor_parallel.py", "-k", select,
                    "-W", "ignore::pytest.PytestConfigWarning"], cwd=REPO, timeout_s=240)
    assert done.returncode == 0, done.stdout[-4000:]
    assert f"{2 * len(SEED_TESTS)} passed" in done.stdout, done.stdout[-2000:]
    version = run_pod(["-c", "import torch; print(torch.__version__)"], cwd=REPO, timeout_s=120)
    assert version.stdout.strip().splitlines()[-1].startswith(OLDEST_TORCH_PIN)
