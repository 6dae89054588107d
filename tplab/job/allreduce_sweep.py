"""All-reduce sweep on the run's own process group (or its shm transport), nccl-tests style.

Measured as a harness does: every message size (powers of two from 256 B up to a few MB) gets
``warmup`` untimed all-reduces before it is first timed; then ``repeats`` rounds, each visiting
every size in its own order (``harness.round_order``: a seeded permutation rotated and reversed per
round, the same on every rank), each visit a few untimed calls and then ``iters`` timed ones, so
drift in the machine's load lands on every size alike instead of on whichever came first. On GPU
a visit's per-rank time is the mean over its loop (CUDA events around it, as nccl-tests does); on
the CPU each call is clocked with ``perf_counter`` and a visit's per-rank time is the median,
because on a shared CPU a few calls are hit by scheduler noise many times their own length; the
CPU point also keeps the 99th percentile of all its calls (``p99_ms``). Each round's time is the
slowest rank's (a MAX all-reduce of the per-rank times over the process group, after the timed
loops, outside them); the point's ``ms`` is the median of its rounds, ``figure`` their
``harness.Figure`` (quartiles, 95 % interval, n) and ``spread`` its relative IQR, with
``unstable`` set past ``harness.SPREAD_LIMIT``.
``all_reduce`` chooses the transport being measured (default: ``dist.all_reduce`` on ``group``;
the job passes the shm transport's in-place all-reduce for ``--comm shm``). The loop runs without
autograd (``tplab.tp.without_autograd``) for every transport alike.
Bandwidths follow nccl-tests: ``algbw = bytes / time`` and ``busbw = algbw · 2(p-1)/p``, which
is comparable across world sizes. The points are then fitted to the alpha-beta ring model with a
Theil–Sen line and bootstrap intervals over the rounds (``tplab.stats.robust_fit``).

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.distributed as dist

from tplab.stats.fit import AlphaBeta, bus_bandwidth, percentile
from tplab.stats.robust_fit import robust_alpha_beta
from tplab.stats.harness import figure, round_order
from tplab.tp import without_autograd

#: untimed calls before every timed visit of a size (the first visit also gets ``warmup``)
REVISIT_WARMUP = 2


@dataclass(frozen=True, slots=True)
class SweepPoint:
    bytes: int
    ms: float
    algbw_gbps: float
    busbw_gbps: float
    iters: int
    p99_ms: float | None = None  # CPU only: the 99th percentile of the per-call times
    repeats: int = 1             # rounds of ``iters`` timed calls
    spread: float = 0.0          # (q3 - q1) / median of the rounds' times
    repeat_ms: tuple[float, ...] = ()
    unstable: bool = False       # spread past harness.SPREAD_LIMIT

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["repeat_ms"] = list(self.repeat_ms)
        out["figure"] = figure(self.repeat_ms).to_dict() if self.repeat_ms else None
        return out


def sweep_sizes(min_bytes: int = 256, max_bytes: int = 4 << 20) -> list[int]:
    """Powers of two from ``min_bytes`` to ``max_bytes`` inclusive (fp32-aligned)."""
    if min_bytes < 4 or max_bytes < min_bytes:
        raise ValueError(f"bad sweep range {min_bytes}..{max_bytes} bytes")
    sizes = []
    n = min_bytes
    while n <= max_bytes:
        sizes.append(n)
        n *= 2
    return sizes


def iters_for(nbytes: int, base_iters: int) -> int:
    """Fewer iterations for the largest messages so the sweep's time stays bounded."""
    if nbytes >= 1 << 20:
        return max(2, base_iters // 2)
    return base_iters


def _visit(reduce: Callable[[torch.Tensor], object], buf: torch.Tensor, n_iter: int,
           is_cuda: bool, calls: list[float]) -> float:
    """One timed visit of a size: its per-rank time in ms (CUDA: loop mean; CPU: call median)."""
    if is_cuda:
        start_ev = torch.cuda.Event(enable_timing=True)
        end_ev = torch.cuda.Event(enable_timing=True)
        start_ev.record()
        for _ in range(n_iter):
            reduce(buf)
        end_ev.record()
        end_ev.synchronize()
        return start_ev.elapsed_time(end_ev) / n_iter
    # per-call clocks and the median: scheduler noise hits single calls
    times = []
    for _ in range(n_iter):
        t0 = time.perf_counter()
        reduce(buf)
        times.append((time.perf_counter() - t0) * 1e3)
    calls.extend(times)
    return statistics.median(times)


def run_sweep(device: torch.device, sizes: list[int], iters: int, warmup: int = 5,
              group: dist.ProcessGroup | None = None,
              on_point: Callable[[SweepPoint], None] | None = None,
              all_reduce: Callable[[torch.Tensor], object] | None = None,
              repeats: int = 5) -> list[SweepPoint]:
    """Time fp32 all-reduces of each size in ``repeats`` rounds; every rank of ``group`` must
    call this (the order of sizes in each round is the same on every rank).

    ``all_reduce(buf)`` sums ``buf`` in place over the ranks (default ``dist.all_reduce`` on
    ``group``). ``on_point`` gets each size's point, in ``sizes`` order, after the last round.
    """
    world = dist.get_world_size(group)
    is_cuda = device.type == "cuda"
    reduce = all_reduce or (lambda t: dist.all_reduce(t, group=group))
    repeats = max(1, repeats)
    rounds: dict[int, list[float]] = {n: [] for n in sizes}
    calls: dict[int, list[float]] = {n: [] for n in sizes}
    bufs: dict[int, torch.Tensor] = {}
    with without_autograd():
        for r in range(repeats):
            for nbytes in round_order(sizes, r):
                if nbytes not in bufs:
                    bufs[nbytes] = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
                    extra = warmup
                else:
                    extra = REVISIT_WARMUP
                buf = bufs[nbytes]
                for _ in range(extra):
                    reduce(buf)
                dist.barrier(group=group, device_ids=[device.index] if is_cuda else None)
                rounds[nbytes].append(_visit(reduce, buf, iters_for(nbytes, iters), is_cuda,
                                             calls[nbytes]))
    bufs.clear()
    points: list[SweepPoint] = []
    for nbytes in sizes:
        per_size = calls[nbytes]
        p99 = percentile(per_size, 99) if per_size else 0.0
        slowest = torch.tensor([*rounds[nbytes], p99], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
        per_round = [float(x) for x in slowest[:-1].tolist()]
        fig = figure(per_round)
        ms = fig.median
        algbw, busbw = bus_bandwidth(nbytes, ms / 1e3, world)
        point = SweepPoint(bytes=nbytes, ms=ms, algbw_gbps=algbw / 1e9, busbw_gbps=busbw / 1e9,
                           iters=iters_for(nbytes, iters),
                           p99_ms=float(slowest[-1].item()) if per_size else None,
                           repeats=repeats, spread=fig.spread, repeat_ms=tuple(per_round),
                           unstable=fig.unstable)
        points.append(point)
        if on_point is not None:
            on_point(point)
    return points


def fit_points(points: list[SweepPoint], world_size: int) -> AlphaBeta:
    """The robust α-β fit of the points (Theil–Sen, bootstrap intervals over their rounds)."""
    return robust_alpha_beta([p.bytes for p in points],
                             [[t / 1e3 for t in (p.repeat_ms or (p.ms,))] for p in points],
                             world_size)
