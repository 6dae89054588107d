"""`tplab generate`: correct one sentence with the shipped MiniGPT-grammar checkpoint.

``--tp N`` runs the same greedy decoding with the model sharded over N ranks: it launches
``python -m torch.distributed.run --nproc-per-node=N -m tplab.model.generate_tp`` (gloo on the CPU)
and prints what rank 0 printed, which must be the same text as without ``--tp``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported when the command runs, not at `tplab --help`
    from tplab.model.tokenizer import Tokenizer

HELP = "correct a sentence with MiniGPT-grammar (add --tp 2 to run it tensor-parallel)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", default=None, help="checkpoint file (default: the shipped one, tplab/assets/minigpt-grammar.pt)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (torchrun, gloo on the CPU)")
    parser.add_argument("--max-new-tokens", type=int, default=40, help="decode at most this many tokens (default 40)")
    parser.add_argument("text", nargs="+", help="the sentence to correct")


def _fail(message: str) -> int:
    print(f"tplab generate: {message}", file=sys.stderr)
    return 1


def main(args: argparse.Namespace) -> int:
    from tplab.home.paths import DEFAULT_CHECKPOINT

    if args.tp < 1:
        return _fail("--tp must be at least 1.")
    if args.max_new_tokens < 1:
        return _fail("--max-new-tokens must be at least 1.")
    checkpoint = str(args.checkpoint or DEFAULT_CHECKPOINT)
    text = " ".join(args.text)

    from tplab.model.checkpoint import CheckpointError, build_single, check_divisible, load_checkpoint
    from tplab.model.decode import greedy_decode

    try:
        ckpt = load_checkpoint(checkpoint)
        if args.tp > 1:
            check_divisible(ckpt.config, args.tp)
    except CheckpointError as exc:
        return _fail(str(exc))
    tok = ckpt.tokenizer
    if not tok.encode(text):
        return _fail("the text has no words; pass a sentence such as \"he goed to school\".")
    prompt = tok.prompt_ids(text)
    if len(prompt) >= ckpt.config.block_size:
        return _fail(f"the sentence is too long ({len(prompt)} tokens, the model reads "
                     f"{ckpt.config.block_size - 1} at most); shorten it.")
    _note_unknown_words(tok, text)
    if args.tp == 1:
        model = build_single(ckpt)
        limit = min(args.max_new_tokens, ckpt.config.block_size - len(prompt))
        print(tok.decode(greedy_decode(model, prompt, limit, eos_id=tok.eos_id), tok.slots(text)))
        return 0
    return _run_tp(checkpoint, args.tp, args.max_new_tokens, text)


def _note_unknown_words(tok: Tokenizer, text: str) -> None:
    """Tell the user which words the model does not know: they are carried through as placeholders
    (copied, never corrected); words past the checkpoint's placeholder slots are read as <unk>."""
    unknown = tok.unknown_words(text)
    if not unknown:
        return
    carried = [w for w in unknown if tok.unk_id not in tok.encode(w, tok.slots(text))]
    lost = [w for w in unknown if w not in carried]
    if carried:
        print(f"note: not in the model's vocabulary, carried through as placeholders: {', '.join(carried)}", file=sys.stderr)
    if lost:
        why = (f"more than {tok.n_slots} unknown words" if tok.n_slots else "this checkpoint has no placeholders")
        print(f"note: read as <unk> ({why}): {', '.join(lost)}", file=sys.stderr)


def _run_tp(checkpoint: str, world_size: int, max_new_tokens: int, text: str) -> int:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world_size}",
           "-m", "tplab.model.generate_tp", "--checkpoint", checkpoint,
           "--max-new-tokens", str(max_new_tokens), "--", text]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return _fail(f"the {world_size}-rank run did not finish within 300 s; check that the machine is not overloaded.")
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        return _fail(f"the {world_size}-rank torchrun run failed (exit {proc.returncode}); see its output above.")
    return 0
