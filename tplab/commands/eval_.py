"""`tplab eval`: how well a MiniGPT-grammar checkpoint corrects, on two sets, per error class.

- the corpus's held-out split (``tplab.model.corpus.held_out``), disjoint from training by
  construction: the templates' own sentences (bar: at least 95% exact);
- the outside-corpus set (``tplab.model.outside_set``): sentences written by hand to differ from the
  generator (unseen names, places, nouns, plural subjects, shapes the templates do not produce).

For both it reports exact match, the rate of outputs that change a content word of the input (drop
a noun, name or adjective the correct sentence keeps, or bring in one nobody wrote) and the rate of
outputs that repeat a bigram the input does not repeat.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported when the command runs, not at `tplab --help`
    from tplab.model.evaluate import EvalReport

HELP = "exact-match accuracy of the MiniGPT-grammar checkpoint (held-out split and outside-corpus set)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", default=None, help="checkpoint file (default: the shipped one, tplab/assets/minigpt-grammar.pt)")
    parser.add_argument("--examples", type=int, default=600, help="held-out examples to score (default 600)")
    parser.add_argument("--show-failures", type=int, default=5,
                        help="print up to N wrong corrections per set (default 5)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    from tplab.commands.json_out import add_flag
    add_flag(parser)


def _print_report(title: str, report: EvalReport) -> None:
    print(f"{title} exact match: {report.accuracy:.1%} ({report.correct}/{report.total})   "
          f"content words changed: {report.content_change_rate:.1%} ({report.content_changed}/{report.total})   "
          f"repeated n-grams: {report.repeat_rate:.1%} ({report.repeated}/{report.total})")
    for kind, (c, t) in report.per_kind.items():
        print(f"  {kind:16s} {c:4d}/{t:<4d} {c / t:6.1%}")
    for ex, got in report.failures:
        print(f"  wrong [{ex.kind}]: {ex.bad!r} -> {got!r} (expected {ex.good!r})")


def main(args: argparse.Namespace) -> int:
    if args.examples < 1:
        print("tplab eval: --examples must be at least 1.", file=sys.stderr)
        return 2
    import torch

    from tplab.model.checkpoint import CheckpointError, build_single, load_checkpoint
    from tplab.model.corpus import held_out
    from tplab.model.evaluate import evaluate
    from tplab.model.outside_set import OUTSIDE_SET
    from tplab.home.paths import DEFAULT_CHECKPOINT

    torch.set_num_threads(max(1, args.threads))
    path = args.checkpoint or DEFAULT_CHECKPOINT
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as exc:
        print(f"tplab eval: {exc}", file=sys.stderr)
        return 1
    model = build_single(ckpt)
    keep = max(0, args.show_failures)
    reports = {"held-out": evaluate(model, ckpt.tokenizer, held_out(args.examples), keep_failures=keep),
               "outside-corpus set": evaluate(model, ckpt.tokenizer, OUTSIDE_SET, keep_failures=keep)}
    if args.json:
        from tplab.commands.json_out import emit
        emit({"checkpoint": str(path), **{
            title: {**r.as_dict(), "failures": [{"kind": ex.kind, "input": ex.bad, "output": got,
                                                 "expected": ex.good} for ex, got in r.failures]}
            for title, r in reports.items()}})
        return 0
    print(f"checkpoint: {path}")
    for title, report in reports.items():
        _print_report(title, report)
    return 0
