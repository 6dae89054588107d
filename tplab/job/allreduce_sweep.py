"""All-reduce sweep on the run's own process group (or its shm transport), nccl-tests style.

For each message size (powers of two from 256 B up to a few MB) every rank runs a few untimed
warm-up all-reduces, then ``repeats`` rounds of ``iters`` timed ones back to back. On GPU a
round's per-rank time is the mean over its loop (CUDA events around it, as nccl-tests does); on
the CPU each call is clocked with ``perf_counter`` and a round's per-rank time is the median,
because on a shared CPU a few calls are hit by scheduler noise many times their own length; the
CPU point also keeps the 99th percentile of all its calls (``p99_ms``). Each round's time is the
slowest rank's (a MAX all-reduce of the per-rank times over the process group, after the timed
loops, outside them); the point's ``ms`` is the median of its rounds and ``spread`` their
repeat-to-repeat spread, (max - min) / median, so a noisy size says so.
``all_reduce`` chooses the transport being measured (default: ``dist.all_reduce`` on ``group``;
the job passes the shm transport's in-place all-reduce for ``--comm shm``). The loop runs under
``torch.inference_mode`` for every transport alike.
Bandwidths follow nccl-tests: ``algbw = bytes / time`` and ``busbw = algbw · 2(p-1)/p``, which
is comparable across world sizes. The points are then fitted to the alpha-beta ring model
(``tplab.records.fit``).

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.distributed as dist

from tplab.records.fit import AlphaBeta, bus_bandwidth, fit_alpha_beta, percentile


@dataclass(frozen=True, slots=True)
class SweepPoint:
    bytes: int
    ms: float
    algbw_gbps: float
    busbw_gbps: float
    iters: int
    p99_ms: float | None = None  # CPU only: the 99th percentile of the per-call times
    repeats: int = 1             # rounds of ``iters`` timed calls
    spread: float = 0.0          # (max - min) / median of the rounds' times
    repeat_ms: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["repeat_ms"] = list(self.repeat_ms)
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


def run_sweep(device: torch.device, sizes: list[int], iters: int, warmup: int = 5,
              group: dist.ProcessGroup | None = None,
              on_point: Callable[[SweepPoint], None] | None = None,
              all_reduce: Callable[[torch.Tensor], object] | None = None,
              repeats: int = 3) -> list[SweepPoint]:
    """Time fp32 all-reduces of each size; every rank of ``group`` must call this.

    ``all_reduce(buf)`` sums ``buf`` in place over the ranks (default ``dist.all_reduce`` on
    ``group``).
    """
    world = dist.get_world_size(group)
    is_cuda = device.type == "cuda"
    reduce = all_reduce or (lambda t: dist.all_reduce(t, group=group))
    repeats = max(1, repeats)
    points: list[SweepPoint] = []
    for nbytes in sizes:
        n_iter = iters_for(nbytes, iters)
        rounds: list[float] = []
        calls: list[float] = []
        with torch.inference_mode():
            buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
            for _ in range(warmup):
                reduce(buf)
            dist.barrier(group=group, device_ids=[device.index] if is_cuda else None)
            for _ in range(repeats):
                if is_cuda:
                    start_ev = torch.cuda.Event(enable_timing=True)
                    end_ev = torch.cuda.Event(enable_timing=True)
                    start_ev.record()
                    for _ in range(n_iter):
                        reduce(buf)
                    end_ev.record()
                    end_ev.synchronize()
                    rounds.append(start_ev.elapsed_time(end_ev) / n_iter)
                else:
                    # per-call clocks and the median: scheduler noise hits single calls
                    times = []
                    for _ in range(n_iter):
                        t0 = time.perf_counter()
                        reduce(buf)
                        times.append((time.perf_counter() - t0) * 1e3)
                    rounds.append(statistics.median(times))
                    calls.extend(times)
        p99 = percentile(calls, 99) if calls else 0.0
        slowest = torch.tensor([*rounds, p99], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
        per_round = [float(x) for x in slowest[:-1].tolist()]
        ms = statistics.median(per_round)
        spread = (max(per_round) - min(per_round)) / ms if ms > 0 else 0.0
        algbw, busbw = bus_bandwidth(nbytes, ms / 1e3, world)
        point = SweepPoint(bytes=nbytes, ms=ms, algbw_gbps=algbw / 1e9, busbw_gbps=busbw / 1e9,
                           iters=n_iter, p99_ms=float(slowest[-1].item()) if calls else None,
                           repeats=repeats, spread=spread, repeat_ms=tuple(per_round))
        points.append(point)
        if on_point is not None:
            on_point(point)
    return points


def fit_points(points: list[SweepPoint], world_size: int) -> AlphaBeta:
    return fit_alpha_beta([p.bytes for p in points], [p.ms / 1e3 for p in points], world_size)
