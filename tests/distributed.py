"""Run a function on N local gloo ranks for a test, and get each rank's return value back.

Why this module exists: every distributed test needs the same careful setup — a fresh rendezvous
per run (a ``file://`` store in a new temp dir, so parallel tests never collide on a port), one
thread per rank (the test machines have few cores), a short process-group timeout so a hang fails
in seconds instead of minutes, a hard wall-clock limit on the whole run, and a failure in any rank
turned into one readable error in the parent. Tests of the TP layers, the model and the job share it.

    def check(rank: int, world_size: int, scale: float) -> float:
        ...  # runs in each rank, with the default process group initialised (gloo)
        return value

    results = run_distributed(check, 2, 0.5)   # [value_rank0, value_rank1]
    results = run_distributed(check, 2, 0.5, comm="shm")   # TP collectives over shared memory

With ``comm="shm"`` each rank sets up the shared-memory transport (``tplab.tp.ShmComm``) after the
gloo group and routes the TP collectives through it (``tplab.tp.set_transport``) while ``fn`` runs.

``fn`` must be a module-level function (it is pickled by reference into spawned processes), and
its return value must be picklable (tensors are fine).
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

__all__ = ["DistributedTestError", "run_distributed"]

# How long one collective may wait for its peers before the rank fails. The ranks meet at a
# rendezvous before the process group exists, so slow process start-up does not count against it.
DEFAULT_PG_TIMEOUT_S = 15.0


#: what the fork server imports before it forks any rank
FORKSERVER_PRELOAD = ["torch", "torch.distributed"]


class DistributedTestError(AssertionError):
    """A rank raised, crashed, or the run passed its wall-clock limit."""


def _rank_main(
    rank: int,
    fn: Callable[..., Any],
    world_size: int,
    args: tuple[Any, ...],
    init_file: str,
    result_dir: str,
    pg_timeout_s: float,
    rendezvous_timeout_s: float,
    comm: str,
) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if sys.platform.startswith("linux") and os.path.exists("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # stay on loopback
    # Rendezvous first, patiently (spawned ranks start seconds apart on a busy machine), then
    # create the process group with a short timeout that only collectives have to meet.
    store = dist.FileStore(init_file, world_size)
    store.set_timeout(timedelta(seconds=rendezvous_timeout_s))
    store.add("arrived", 1)
    deadline = time.monotonic() + rendezvous_timeout_s
    while store.add("arrived", 0) < world_size:
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: the other ranks did not start within {rendezvous_timeout_s:.0f} s")
        time.sleep(0.02)
    dist.init_process_group(
        backend="gloo",
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=pg_timeout_s),
    )
    shm = None
    try:
        if comm == "shm":
            from tplab.tp import ShmComm, set_transport

            shm = ShmComm.create(timeout_s=pg_timeout_s)
            set_transport(shm)
        result = fn(rank, world_size, *args)
        path = Path(result_dir) / f"rank{rank}.pkl"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(result, fh)
        os.replace(tmp, path)
    finally:
        if shm is not None:
            from tplab.tp import set_transport

            set_transport(None)
        # every rank leaves together: no rank closes its transport while a peer may still be
        # using it
        dist.barrier()
        if shm is not None:
            shm.close()
        from tplab.job.runtime import shutdown

        if not shutdown():  # torch 2.4's gloo can wait forever here: the result is written
            os._exit(0)


def run_distributed(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout_s: float = 60.0,
    pg_timeout_s: float | None = None,
    comm: str = "gloo",
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` spawned gloo ranks; return their results.

    ``comm="shm"`` carries the TP collectives over the shared-memory transport instead of gloo
    (its waits bounded by the same ``pg_timeout_s``).

    ``timeout_s`` bounds the whole run; ``pg_timeout_s`` (default 15 s) bounds each collective,
    so a rank waiting for a peer that never comes fails in seconds. Raises DistributedTestError
    with the failing rank's traceback if any rank raises or dies, or if the whole run takes
    longer than ``timeout_s`` (then every rank is killed).
    """
    import inspect

    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessContext, ProcessException

    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}.")
    if comm not in ("gloo", "shm"):
        raise ValueError(f"comm must be 'gloo' or 'shm', not {comm!r}.")
    pg_timeout = pg_timeout_s if pg_timeout_s is not None else min(DEFAULT_PG_TIMEOUT_S, timeout_s)
    if pg_timeout <= 0 or timeout_s <= 0:
        raise ValueError("timeout_s and pg_timeout_s must be positive.")
    # A fork server that has imported torch (once per test worker) forks the ranks: each
    # spawned rank imported torch again, ~2 s of CPU. It imports torch and runs nothing, so no
    # thread exists to be lost in the fork; tests/conftest.py's reaper leaves it alone.
    mp.set_forkserver_preload(FORKSERVER_PRELOAD)
    with tempfile.TemporaryDirectory(prefix="tplab-dist-") as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        context = mp.start_processes(
            _rank_main,
            args=(fn, world_size, args, init_file, tmp, pg_timeout, timeout_s, comm),
            nprocs=world_size,
            join=False,
            start_method="forkserver",
        )
        deadline = time.monotonic() + timeout_s
        # the ranks a failed rank leaves get 2 s to end before they are killed (torch 2.4's
        # join has no grace period and kills them at once)
        grace = ({"grace_period": 2} if "grace_period" in inspect.signature(ProcessContext.join).parameters
                 else {})
        try:
            while not context.join(timeout=max(0.0, deadline - time.monotonic()), **grace):
                if time.monotonic() >= deadline:
                    raise DistributedTestError(
                        f"{getattr(fn, '__name__', fn)} on {world_size} ranks did not finish "
                        f"within {timeout_s:.0f} s; all ranks were killed."
                    )
        except ProcessException as exc:
            raise DistributedTestError(
                f"{getattr(fn, '__name__', fn)} failed on rank {exc.error_index} "
                f"of {world_size}:{exc}"
            ) from None
        finally:
            for proc in context.processes:
                if proc.is_alive():
                    proc.kill()
                    proc.join(5)
        results = []
        for rank in range(world_size):
            with open(os.path.join(tmp, f"rank{rank}.pkl"), "rb") as fh:
                results.append(pickle.load(fh))
        return results
