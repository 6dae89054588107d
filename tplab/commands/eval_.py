"""`tplab eval`: held-out exact-match accuracy of a MiniGPT-grammar checkpoint, per error class.

The held-out split (``tplab.model.corpus.held_out``) is disjoint from training by construction, so
this is the number the shipped checkpoint is judged by (bar: at least 90%).
"""

from __future__ import annotations

import argparse
import sys

HELP = "held-out exact-match accuracy of the MiniGPT-grammar checkpoint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", default=None, help="checkpoint file (default: assets/minigpt-grammar.pt)")
    parser.add_argument("--examples", type=int, default=600, help="held-out examples to score (default 600)")
    parser.add_argument("--show-failures", type=int, default=5, help="print up to N wrong corrections (default 5)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")


def main(args: argparse.Namespace) -> int:
    if args.examples < 1:
        print("tplab eval: --examples must be at least 1.", file=sys.stderr)
        return 2
    import torch

    from tplab.model.checkpoint import CheckpointError, build_single, load_checkpoint
    from tplab.model.corpus import held_out
    from tplab.model.evaluate import evaluate
    from tplab.paths import DEFAULT_CHECKPOINT

    torch.set_num_threads(max(1, args.threads))
    path = args.checkpoint or DEFAULT_CHECKPOINT
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as exc:
        print(f"tplab eval: {exc}", file=sys.stderr)
        return 1
    report = evaluate(build_single(ckpt), ckpt.tokenizer, held_out(args.examples), keep_failures=args.show_failures)
    print(f"checkpoint: {path}")
    print(f"held-out exact match: {report.accuracy:.1%} ({report.correct}/{report.total})")
    for kind, (c, t) in report.per_kind.items():
        print(f"  {kind:16s} {c:4d}/{t:<4d} {c / t:6.1%}")
    for ex, got in report.failures:
        print(f"  wrong [{ex.kind}]: {ex.bad!r} -> {got!r} (expected {ex.good!r})")
    return 0
