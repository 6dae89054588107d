"""Are TP decode steps right after a single-device stretch slower than TP steps right after TP steps?

Why this exists (issue 24, docs/measurement.md): the old d_model sweep measured TP at its first
size right after rank 0 had decoded alone while the other ranks slept in a barrier, and that size
came out slower than a size four times wider. This isolates that moment on the shipped
checkpoint: in interleaved cycles, a "cold" TP decode follows ~0.6 s of single-device decoding on
rank 0 (the others parked at a barrier) and a "warm" one follows a short TP decode; it prints the
per-step medians over the cycles of the first steps of each, and the cold/warm ratio. With
``PIN=1`` every rank is pinned to its own CPU (``os.sched_setaffinity``): if the ratio is well
above 1 without pinning and about 1 with it, the ranks' placement by the scheduler is the cause.
It asserts nothing; run it on a quiet machine (the load average is printed).

    OMP_NUM_THREADS=1 [PIN=1] .venv/bin/python -m torch.distributed.run --standalone \\
        --nproc-per-node=2 benchmarks/cold_tp_steps.py [--cycles 20] [--steps 24]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
from tplab.job.decode_timing import decode_timed
from tplab.model.checkpoint import build_single, build_tp, load_checkpoint


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--single-s", type=float, default=0.6)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if os.environ.get("PIN"):
        os.sched_setaffinity(0, {rank % (os.cpu_count() or 1)})
    cpu = torch.device("cpu")
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    prompt = DEFAULT_PROMPTS.read_text(encoding="utf-8").splitlines()[0]
    ids = ckpt.tokenizer.prompt_ids(prompt)
    tp = build_tp(ckpt, cpu).eval()
    single = build_single(ckpt, cpu).eval() if rank == 0 else None
    for _ in range(2):
        decode_timed(tp, ids, a.steps, cpu)
    steps: dict[str, list[list[float]]] = {c: [[] for _ in range(a.steps - 1)]
                                           for c in ("cold", "warm")}
    for c in range(a.cycles):
        for cond in (("cold", "warm") if c % 2 == 0 else ("warm", "cold")):
            if cond == "cold":
                if single is not None:
                    end = time.perf_counter() + a.single_s
                    while time.perf_counter() < end:
                        decode_timed(single, ids, 8, cpu)
                dist.barrier()
            else:
                decode_timed(tp, ids, 8, cpu)
            for i, ms in enumerate(decode_timed(tp, ids, a.steps, cpu).decode_ms):
                steps[cond][i].append(ms)
    if rank == 0:
        med = {c: [statistics.median(x) for x in v] for c, v in steps.items()}
        print(f"PIN={os.environ.get('PIN', '')} cycles={a.cycles} load average "
              f"{os.getloadavg()[0]:.2f}")
        for c in ("cold", "warm"):
            print(f"  {c} steps 1-8 ms: {[round(v, 2) for v in med[c][:8]]}, steps 16+ median "
                  f"{statistics.median(med[c][15:]):.2f}")
        first = statistics.median(med["cold"][:8]) / statistics.median(med["warm"][:8])
        late = statistics.median(med["cold"][15:]) / statistics.median(med["warm"][15:])
        print(f"  cold/warm: first 8 steps {first:.2f}x, steps 16+ {late:.2f}x")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
