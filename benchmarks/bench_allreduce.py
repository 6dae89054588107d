"""gloo vs the shared-memory transport on this CPU: all-reduce latency per size, their alpha-beta
fits, and TP decode per token over each against single-device decode — side by side, one run.

Why this exists: issue 16 asks whether a shared-memory all-reduce (``tplab.tp.shm``) brings local
TP's communication cost down to an interconnect's shape. The figures only mean something as
ratios measured in the same run on the same (possibly shared) machine, so this prints the load
average beside them and asserts nothing:

  1. per message size (256 B .. 4 MiB by default), the fp32 all-reduce's p50 and p99 in µs over
     gloo and over shm, and gloo/shm at p50; the two transports alternate in blocks of calls, so
     drift in the machine's load hits both alike; a rank's percentile is over its per-call
     ``perf_counter`` times, and the figure is the slowest rank's;
  2. the alpha-beta ring fit of each transport's p50s (``tplab.stats.fit``: t = 2(p-1)α + 2(p-1)/p·n/β);
  3. greedy decode per token (prefill excluded) of the shipped checkpoint: single device (rank 0
     alone, the others at a barrier), TP over gloo and TP over shm, the three alternating prompt
     by prompt; p50 and mean, TP/single ratios, and whether TP's tokens equal single's.

The goals of the issue are printed with "met" / "NOT met": 256 B shm p50 <= 20 µs and >= 10x
faster than gloo; TP=2 over shm <= 3x single per token.

    .venv/bin/python benchmarks/bench_allreduce.py [--world-size 2] [--max-bytes 4194304]
        [--prompts 3] [--new-tokens 100] [--small-iters 400]
"""

from __future__ import annotations

import argparse
import os
import pickle
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tplab.stats.fit import fit_alpha_beta, percentile
from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS

TRANSPORTS = ("gloo", "shm")
MODES = ("single", "gloo", "shm")


@dataclass
class Report:
    """Rank 0's figures: per size and transport (p50 µs, p99 µs), decode per-token ms per mode."""

    sizes: list[int] = field(default_factory=list)
    allreduce_us: dict[str, dict[int, tuple[float, float]]] = field(default_factory=dict)
    iters: dict[int, int] = field(default_factory=dict)
    decode_ms: dict[str, list[float]] = field(default_factory=dict)
    tokens: dict[str, list[list[int]]] = field(default_factory=dict)
    segment: str = ""


def iters_for(nbytes: int, small_iters: int) -> int:
    """Enough calls for a p99 at small sizes; fewer where one gloo call takes milliseconds."""
    if nbytes <= 64 << 10:
        return small_iters
    if nbytes <= 1 << 20:
        return max(20, small_iters // 4)
    return max(10, small_iters // 10)


def time_calls(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def sweep(comm: Any, sizes: list[int], small_iters: int, blocks: int = 4) -> Report:
    """Per size: ``blocks`` rounds of (gloo calls, shm calls), the order flipping every round."""
    rep = Report(sizes=sizes, allreduce_us={t: {} for t in TRANSPORTS})
    reduce = {"gloo": lambda t: dist.all_reduce(t), "shm": lambda t: comm.all_reduce(t, out=t)}
    for nbytes in sizes:
        n = iters_for(nbytes, small_iters)
        rep.iters[nbytes] = n
        per_block = max(1, n // blocks)
        times: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
        with torch.inference_mode():
            buf = torch.ones(nbytes // 4)
            for t in TRANSPORTS:
                for _ in range(3):
                    reduce[t](buf)
            for b in range(blocks):
                for t in (TRANSPORTS if b % 2 == 0 else TRANSPORTS[::-1]):
                    dist.barrier()
                    times[t] += time_calls(lambda t=t, buf=buf: reduce[t](buf), per_block)
        local = torch.tensor([v for t in TRANSPORTS
                              for v in (statistics.median(times[t]), percentile(times[t], 99))],
                             dtype=torch.float64)
        dist.all_reduce(local, op=dist.ReduceOp.MAX)  # the slowest rank's figures
        for i, t in enumerate(TRANSPORTS):
            rep.allreduce_us[t][nbytes] = (float(local[2 * i]), float(local[2 * i + 1]))
    return rep


def decode(comm: Any, rep: Report, rank: int, prompts: list[str], new_tokens: int) -> None:
    from tplab.job.decode_timing import decode_timed
    from tplab.model.checkpoint import build_single, build_tp, load_checkpoint
    from tplab.tp import use_transport

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    ids = [ckpt.tokenizer.prompt_ids(p) for p in prompts]
    single = build_single(ckpt) if rank == 0 else None
    tp = build_tp(ckpt)
    cpu = torch.device("cpu")
    rep.decode_ms = {m: [] for m in MODES}
    rep.tokens = {m: [] for m in MODES}

    def run(mode: str, prompt: list[int], n: int) -> Any:
        result = None
        if mode == "single":
            if rank == 0:
                result = decode_timed(single, prompt, n, cpu)
        else:
            with use_transport(comm if mode == "shm" else None):
                result = decode_timed(tp, prompt, n, cpu)
        dist.barrier()
        return result

    for m in MODES:  # warm-up
        run(m, ids[0], 10)
    for i, prompt in enumerate(ids):
        for m in MODES[i % 3:] + MODES[:i % 3]:
            r = run(m, prompt, new_tokens)
            if rank == 0:
                rep.decode_ms[m] += r.decode_ms
                rep.tokens[m].append(r.tokens)


def rank_main(rank: int, world: int, init_file: str, out_path: str, args: argparse.Namespace
              ) -> None:
    from tplab.job.allreduce_sweep import sweep_sizes
    from tplab.tp import ShmComm

    torch.set_num_threads(1)
    if sys.platform.startswith("linux") and os.path.exists("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=300))
    comm = ShmComm.create(timeout_s=300)
    try:
        rep = sweep(comm, sweep_sizes(256, args.max_bytes), args.small_iters)
        rep.segment = comm.name
        if args.prompts > 0:
            lines = [ln.strip() for ln in Path(DEFAULT_PROMPTS).read_text().splitlines()
                     if ln.strip() and not ln.startswith("#")]
            decode(comm, rep, rank, lines[:args.prompts], args.new_tokens)
        dist.barrier()
        if rank == 0:
            with open(out_path, "wb") as fh:
                pickle.dump(rep, fh)
    finally:
        comm.close()
        dist.destroy_process_group()


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else (f"{n >> 10} KiB" if n < 1 << 20 else f"{n >> 20} MiB")


def report_text(rep: Report, world: int, wall_s: float, load_before: str) -> str:
    lines = [f"tplab bench_allreduce: {world} ranks, 1 thread each; torch {torch.__version__}, "
             f"{platform.machine()}, {platform.processor() or platform.platform()}",
             f"before: {load_before}", "",
             "fp32 all-reduce, µs per call (slowest rank; transports alternate in blocks)",
             f"  {'size':>8} {'iters':>6} {'gloo p50':>10} {'gloo p99':>10} {'shm p50':>9} "
             f"{'shm p99':>9} {'gloo/shm p50':>13}"]
    for n in rep.sizes:
        g, s = rep.allreduce_us["gloo"][n], rep.allreduce_us["shm"][n]
        lines.append(f"  {_size(n):>8} {rep.iters[n]:>6} {g[0]:10.1f} {g[1]:10.1f} {s[0]:9.1f} "
                     f"{s[1]:9.1f} {g[0] / s[0]:12.1f}x")
    lines += ["", "alpha-beta ring fit of the p50s (t = 2(p-1)·α + 2(p-1)/p·n/β)"]
    fits = {}
    for t in TRANSPORTS:
        try:
            fit = fit_alpha_beta(rep.sizes, [rep.allreduce_us[t][n][0] / 1e6 for n in rep.sizes],
                                 world)
            fits[t] = fit
            lines.append(f"  {t:<5} α = {fit.alpha_s * 1e6:8.2f} µs   β = {fit.beta_bps / 1e9:7.3f} "
                         f"GB/s   (max relative residual {fit.max_rel_residual:.0%})")
        except ValueError as exc:
            lines.append(f"  {t:<5} no fit: {exc}")
    if len(fits) == 2:
        lines.append(f"  α gloo / α shm = {fits['gloo'].alpha_s / max(fits['shm'].alpha_s, 1e-12):.1f}x")
    small = rep.sizes[0]
    g50, s50 = rep.allreduce_us["gloo"][small][0], rep.allreduce_us["shm"][small][0]
    lines += ["", f"goal: {_size(small)} shm p50 <= 20 µs: {s50:.1f} µs "
              f"{'met' if s50 <= 20 else 'NOT met'}; >= 10x faster than gloo: {g50 / s50:.1f}x "
              f"{'met' if g50 / s50 >= 10 else 'NOT met'}"]
    if rep.decode_ms.get("single"):
        med = {m: statistics.median(rep.decode_ms[m]) for m in MODES}
        mean = {m: statistics.fmean(rep.decode_ms[m]) for m in MODES}
        n_tok = len(rep.decode_ms["single"])
        lines += ["", f"greedy decode, ms per token ({n_tok} tokens per mode, prefill excluded; "
                  "modes alternate prompt by prompt)",
                  f"  {'mode':<14} {'p50':>8} {'mean':>8} {'p50/single':>11} {'mean/single':>12}"
                  "  tokens == single"]
        for m in MODES:
            label = "single device" if m == "single" else f"TP={world} {m}"
            same = "" if m == "single" else ("yes" if rep.tokens[m] == rep.tokens["single"]
                                             else "NO")
            lines.append(f"  {label:<14} {med[m]:8.3f} {mean[m]:8.3f} "
                         f"{med[m] / med['single']:10.2f}x {mean[m] / mean['single']:11.2f}x  {same}")
        ratio = mean["shm"] / mean["single"]
        lines += [f"  TP gloo / TP shm per token (mean): {mean['gloo'] / mean['shm']:.1f}x",
                  f"goal: TP={world} over shm <= 3x single per token (mean): {ratio:.2f}x "
                  f"{'met' if ratio <= 3 else 'NOT met'}"]
    lines += ["", f"after: {_load()}",
              f"wall time {wall_s:.1f} s; the shm segment was {rep.segment} (unlinked after set-up)."
              " On a shared machine compare the ratios, not the absolute times."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--max-bytes", type=int, default=4 << 20)
    parser.add_argument("--small-iters", type=int, default=400,
                        help="timed calls per size up to 64 KiB (fewer above)")
    parser.add_argument("--prompts", type=int, default=3, help="prompts decoded per mode (0: none)")
    parser.add_argument("--new-tokens", type=int, default=100)
    args = parser.parse_args(argv)
    load_before = _load()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tplab-bench-") as tmp:
        out_path = os.path.join(tmp, "report.pkl")
        mp.spawn(rank_main, args=(args.world_size, os.path.join(tmp, "rdzv"), out_path, args),
                 nprocs=args.world_size)
        with open(out_path, "rb") as fh:
            rep = pickle.load(fh)
    print(report_text(rep, args.world_size, time.perf_counter() - start, load_before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
