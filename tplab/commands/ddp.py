"""`tplab ddp --nproc 2`: the phase overview's DDP-on-CPU lab (gloo ranks, all-reduce timed through a comm hook).

The model trained has the shape of ``--checkpoint`` (default: the shipped one; its weights are not
used, training starts from a fresh init), so the all-reduce measured is this model's gradient, and
``tplab compile --ddp-run DIR`` can quote the run in DISTRIBUTED.md.

Stdlib only at import time; torch is imported inside ``main``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "Train MiniGPT-grammar with DDP over gloo on the CPU and time the gradient all-reduce per step."
DESCRIPTION = HELP + " Writes DIR/ddp-results.json and DIR/DDP_REPORT.md."


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tplab.home.paths import DEFAULT_CHECKPOINT
    p.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT,
                   help="train a model of this checkpoint's shape, from a fresh init (default: the shipped one)")
    p.add_argument("--out", type=Path, default=Path("ddp-lab"), metavar="DIR", help="output directory (default ./ddp-lab)")
    p.add_argument("--nproc", type=int, default=2, help="number of gloo ranks (default 2)")
    p.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per rank per step (default 16)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed for the data and the initial weights (default 0)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP gradient bucket size (default 25)")
    p.add_argument("--threads-per-rank", type=int, default=1, help="torch threads per rank (default 1)")
    from tplab.commands.json_out import add_flag
    add_flag(p)


def main(args: argparse.Namespace) -> int:
    checks = [(args.nproc >= 2, "--nproc must be at least 2 (DDP needs two ranks to all-reduce)."),
              (args.steps >= 2, "--steps must be at least 2."),
              (args.batch_size >= 1, "--batch-size must be at least 1."),
              (args.lr > 0, "--lr must be positive."),
              (args.bucket_cap_mb > 0, "--bucket-cap-mb must be positive."),
              (args.threads_per_rank >= 1, "--threads-per-rank must be at least 1.")]
    for ok, msg in checks:
        if not ok:
            print(f"tplab ddp: {msg}", file=sys.stderr)
            return 2
    from tplab.sidelabs.ddp_lab import DDPLabError, DDPSettings, run
    from tplab.sidelabs.model_shapes import read_config
    from tplab.model.checkpoint import CheckpointError

    try:
        model = read_config(args.checkpoint)
    except CheckpointError as exc:
        print(f"tplab ddp: {exc}", file=sys.stderr)
        return 2
    s = DDPSettings(nproc=args.nproc, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                    seed=args.seed, bucket_cap_mb=args.bucket_cap_mb, threads_per_rank=args.threads_per_rank,
                    model=model, shape_from=str(args.checkpoint))
    from tplab.commands.json_out import emit, say
    say(args.json)(f"tplab ddp: {s.nproc} gloo ranks, {s.steps} steps ...")
    try:
        r = run(args.out, s)
    except DDPLabError as exc:
        print(f"tplab ddp: {exc}", file=sys.stderr)
        return 1
    if r["teardown"] != "clean":
        print(f"tplab ddp: the results are kept, but {r['teardown']}.", file=sys.stderr)
    if args.json:
        emit({**r, "report": args.out / "DDP_REPORT.md"})
        return 0 if r["loss_fell"] and r["params_in_sync"] else 1
    print(f"loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}; step {r['step_ms_median']:.1f} ms, "
          f"all-reduce {r['allreduce_ms_median']:.2f} ms ({r['allreduce_share']:.1%} of the step); "
          f"report: {args.out / 'DDP_REPORT.md'}")
    return 0 if r["loss_fell"] and r["params_in_sync"] else 1
