"""tests/distributed.py turns rank failures and hangs into prompt, readable test failures.

(That results come back in rank order, over gloo, one thread per rank, is checked by every test in
test_tensor_parallel.py, which asserts on the ranks' returned values.)
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from tests.distributed import DistributedTestError, run_distributed


def _raises(rank: int, world_size: int) -> None:
    raise ValueError(f"boom from rank {rank}")


def _rank0_waits_for_missing_peer(rank: int, world_size: int) -> None:
    if rank == 0:
        dist.all_reduce(torch.ones(1))  # rank 1 never joins: only the PG timeout ends this
    else:
        time.sleep(60)


def _sleeps(rank: int, world_size: int) -> None:
    time.sleep(60)


@pytest.mark.slow  # spawns gloo ranks
def test_a_failing_rank_fails_the_test_with_its_traceback() -> None:
    with pytest.raises(DistributedTestError, match=r"(?s)rank 0 of 1:.*Traceback.*boom from rank 0"):
        run_distributed(_raises, 1)


@pytest.mark.slow  # spawns gloo ranks
def test_a_hung_collective_fails_within_the_process_group_timeout() -> None:
    with pytest.raises(DistributedTestError, match=r"(?s)rank 0 of 2.*[Tt]imed out"):
        run_distributed(_rank0_waits_for_missing_peer, 2, timeout_s=50, pg_timeout_s=2)


@pytest.mark.slow  # spawns gloo ranks
def test_the_whole_run_is_killed_at_its_wall_clock_limit() -> None:
    start = time.monotonic()
    with pytest.raises(DistributedTestError, match="did not finish within 1 s"):
        run_distributed(_sleeps, 1, timeout_s=1)
    assert time.monotonic() - start < 30  # the 60 s sleep was cut short
