"""What the profiler labels cost when no profiler runs: TP per-token latency with the labels
compiled in (as shipped) against the collectives without any label code, side by side.

Why this exists: every collective of ``tplab.tp.collectives`` can open a profiler span named by
its layer ("L3 attn-out all-reduce", ``tplab.tp.labels``) for the lab's profiled pass. Outside a
``labels.labelled()`` block the wrappers pay one check of a module-level list per collective, 14
a token; this measures whether that is visible in a decode. Three variants of the same TP model
on the same ranks, interleaved round by round (the order alternating), each round one prompt
decoded per variant:

  off      the layers call label-free wrappers (the collectives as they were before the labels)
  in       the wrappers as shipped: labels compiled in, no labelled() block, no profiler
  on       inside labels.labelled() with no profiler: every collective opens a record_function
           (what the gating saves; the profiled pass itself runs this way under the profiler)

A round's sample per variant is the median per-token ms of its one-token steps; the ratios in/off
and on/off are taken per round and reported as their median with the spread (q3 - q1) / median
and a 95 % bootstrap interval over the rounds (``tplab.stats.harness.figure``). Nothing is
asserted; the load average is printed.

    python benchmarks/bench_labels.py [--comm shm|gloo] [--rounds 40] [--tokens 48]

(it starts itself under ``torch.distributed.run`` on 2 CPU ranks, one thread each).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

VARIANTS = ("off", "in", "on")


def _plain_wrappers() -> tuple[Any, Any]:
    """``reduce_from_region`` and ``gather_from_region`` without the label code."""
    from tplab.tp import collectives as c

    def reduce_plain(x: Any, group: Any = None, label: str | None = None) -> Any:
        if c.get_world_size(group) == 1:
            return x
        if not c._recording(x):
            return c._all_reduce_n(x, group)
        return c._ReduceFromRegion.apply(x, group)

    def gather_plain(x: Any, group: Any = None, label: str | None = None) -> Any:
        if c.get_world_size(group) == 1:
            return x
        if not c._recording(x):
            return c._gather_last(x, group)
        return c._GatherFromRegion.apply(x, group)

    return reduce_plain, gather_plain


def rank_main(a: argparse.Namespace) -> None:
    import contextlib
    import statistics

    import torch
    import torch.distributed as dist

    from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    from tplab.job.decode_timing import decode_timed
    from tplab.model.checkpoint import build_tp, load_checkpoint
    from tplab.stats.harness import figure
    from tplab.tp import ShmComm, labels, layers, use_transport

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cpu = torch.device("cpu")
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    prompts = [p for p in DEFAULT_PROMPTS.read_text(encoding="utf-8").splitlines()
               if p.strip() and not p.startswith("#")]
    ids = ckpt.tokenizer.prompt_ids(prompts[0])
    tp = build_tp(ckpt, cpu).eval()
    shm = ShmComm.create() if a.comm == "shm" else None
    shipped = (layers.reduce_from_region, layers.gather_from_region)
    plain = _plain_wrappers()

    @contextlib.contextmanager
    def variant(name: str) -> Any:
        if name == "off":
            layers.reduce_from_region, layers.gather_from_region = plain
        try:
            with labels.labelled() if name == "on" else contextlib.nullcontext():
                yield
        finally:
            layers.reduce_from_region, layers.gather_from_region = shipped

    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with use_transport(shm):
        for v in VARIANTS:  # warm-up
            with variant(v):
                decode_timed(tp, ids, 8, cpu)
        for r in range(a.rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for v in order:
                dist.barrier()
                with variant(v):
                    run = decode_timed(tp, ids, a.tokens, cpu)
                samples[v].append(statistics.median(run.decode_ms))
    if shm is not None:
        shm.close()
    if rank == 0:
        load = os.getloadavg()
        print(f"TP over {a.comm} on 2 CPU ranks, {a.rounds} rounds x {a.tokens} tokens per "
              f"variant; load average {load[0]:.1f} {load[1]:.1f}")
        for v in VARIANTS:
            f = figure(samples[v])
            print(f"  {v:<4} per-token median {f.median:.4f} ms (spread {f.spread:.1%}, "
                  f"n={f.n})")
        for v in ("in", "on"):
            ratios = [x / y for x, y in zip(samples[v], samples["off"])]
            f = figure(ratios)
            lo, hi = f.ci95
            print(f"  ratio {v}/off: {f.median:.4f} (spread {f.spread:.1%}, 95% interval "
                  f"{lo:.4f}..{hi:.4f}, n={f.n})")
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--comm", choices=("shm", "gloo"), default="shm")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--tokens", type=int, default=48)
    a = p.parse_args()
    if "RANK" in os.environ:
        rank_main(a)
        return
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           os.path.abspath(__file__), "--comm", a.comm, "--rounds", str(a.rounds),
           "--tokens", str(a.tokens)]
    sys.exit(subprocess.run(cmd, env=env, timeout=1800).returncode)


if __name__ == "__main__":
    main()
