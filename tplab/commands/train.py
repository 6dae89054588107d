"""`tplab train`: train MiniGPT-grammar on the CPU and write the checkpoint.

Runs the whole recipe (synthetic corpus with invented words, AdamW + cosine, EOS-padded targets)
within ``--minutes`` of CPU time per thread and evaluates exact match on the held-out split and on
the outside-corpus set, which go into the checkpoint's meta with how and where it was trained. Also
runnable as ``python -m tplab.commands.train`` (no other command modules are imported then).
"""

from __future__ import annotations

import argparse
import sys

HELP = "train MiniGPT-grammar on the CPU and write its checkpoint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--save", dest="out", default=None, metavar="PATH",
                        help="checkpoint path to write (default: TPLAB_HOME/minigpt-grammar.pt; "
                             "pass tplab/assets/minigpt-grammar.pt to refresh the shipped one)")
    parser.add_argument("--steps", type=int, default=20000,
                        help="optimizer steps at most (default 20000: the time budget usually ends the run)")
    parser.add_argument("--minutes", type=float, default=9.5,
                        help="budget of the training loop in CPU minutes per thread (default 9.5): the wall "
                             "time on an idle machine; on a busy one the run takes longer and trains the same "
                             "steps. The evaluation after it takes seconds. The shipped checkpoint's meta "
                             "says how it was trained")
    parser.add_argument("--batch-size", type=int, default=16,
                        help="sequences per step (default 16: on a CPU budget more, smaller steps learn more)")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed for the data and the initial weights (default 0)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: a model this small gains little from a second "
                             "thread, and on a machine shared with other work two threads contend badly)")
    parser.add_argument("--n-layer", type=int, default=None, help="override the default number of layers")
    parser.add_argument("--device", default="cpu", help="torch device to train on (default cpu)")


def main(args: argparse.Namespace) -> int:
    for name in ("steps", "batch_size", "threads"):
        if getattr(args, name) <= 0:
            print(f"tplab train: --{name.replace('_', '-')} must be positive.", file=sys.stderr)
            return 2
    if args.minutes <= 0:
        print("tplab train: --minutes must be positive.", file=sys.stderr)
        return 2

    from dataclasses import replace
    from pathlib import Path

    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.config import GPTConfig
    from tplab.model.train import train

    out = Path(args.out) if args.out else None
    if out is None:
        from tplab.home.paths import tplab_home
        out = tplab_home() / "minigpt-grammar.pt"
    try:
        config = GPTConfig() if args.n_layer is None else replace(GPTConfig(), n_layer=args.n_layer)
    except ValueError as exc:
        print(f"tplab train: {exc}", file=sys.stderr)
        return 2
    result = train(config, steps=args.steps, minutes=args.minutes, batch_size=args.batch_size, lr=args.lr,
                   seed=args.seed, threads=args.threads, device=args.device,
                   log=lambda line: print(line, flush=True))
    for kind, (c, t) in result.report.per_kind.items():
        print(f"  {kind:16s} {c:4d}/{t:<4d} {c / t:6.1%}")
    path = save_checkpoint(out, result.model, result.tokenizer, result.meta)
    print(f"wrote {path} ({result.model.num_params():,} parameters, held-out exact match "
          f"{result.report.accuracy:.1%}, outside-corpus set {result.meta['outside_set']['accuracy']:.1%})")
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="tplab train", description=HELP)
    add_arguments(_parser)
    sys.exit(main(_parser.parse_args()))
