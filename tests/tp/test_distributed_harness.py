"""tests/distributed.py turns rank failures and hangs into prompt, readable test failures."""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from tests.distributed import DistributedTestError, run_distributed


def _ranks_report(rank: int, world_size: int, base: int) -> dict[str, int]:
    return {
        "rank": dist.get_rank(),
        "world": dist.get_world_size(),
        "backend_is_gloo": int(dist.get_backend() == "gloo"),
        "threads": torch.get_num_threads(),
        "value": base + rank,
    }


def _rank1_raises(rank: int, world_size: int) -> None:
    if rank == 1:
        raise ValueError("boom from the second rank")


def _rank0_waits_for_missing_peer(rank: int, world_size: int) -> None:
    if rank == 0:
        dist.all_reduce(torch.ones(1))  # rank 1 never joins: only the PG timeout ends this
    else:
        time.sleep(60)


def _sleeps(rank: int, world_size: int) -> None:
    time.sleep(60)


def test_results_come_back_in_rank_order() -> None:
    results = run_distributed(_ranks_report, 2, 100)
    assert results == [
        {"rank": k, "world": 2, "backend_is_gloo": 1, "threads": 1, "value": 100 + k} for k in range(2)
    ]


def test_a_failing_rank_fails_the_test_with_its_traceback() -> None:
    with pytest.raises(DistributedTestError, match=r"(?s)rank 1 of 2.*boom from the second rank"):
        run_distributed(_rank1_raises, 2)


def test_a_hung_collective_fails_within_the_process_group_timeout() -> None:
    with pytest.raises(DistributedTestError, match="rank 0 of 2"):
        run_distributed(_rank0_waits_for_missing_peer, 2, timeout_s=50, pg_timeout_s=2)


def test_the_whole_run_is_killed_at_its_wall_clock_limit() -> None:
    start = time.monotonic()
    with pytest.raises(DistributedTestError, match="did not finish within 3 s"):
        run_distributed(_sleeps, 1, timeout_s=3)
    assert time.monotonic() - start < 30  # the 60 s sleep was cut short
