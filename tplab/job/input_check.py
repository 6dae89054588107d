"""Check the job's inputs before any pod exists: the same checks, the same sentences, as the job.

Why: a checkpoint that is not one, a prompts file with too few prompts, or a GPU count the model
cannot be split over (``n_head`` 4 over 3 ranks) would otherwise be found on the pod, after a
billed boot. The client runs this module in a subprocess (``python -m tplab.job.input_check``), so it
never imports torch itself (the dashboard's first paint stays torch-free) and the refusal is
the job's own sentence, word for word.

The checkpoint is read without torch (``tplab.model.checkpoint_file.read_header``: its header and
every weight's dtype and shape, the same checks and sentences as ``load_checkpoint``), so the
subprocess takes a tenth of a second instead of importing torch for seconds; only a file that
reader does not recognise as ``torch.save``'s zip goes to ``torch.load``, whose verdict it is.

Pod side: torch and the standard library only (torch only on that fallback). Prints one JSON
object ``{"ok": true}`` or ``{"ok": false, "error": "<sentence>"}``; exit 0 or 1 (2: bad
arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from tplab.job.job_error import JobError
from tplab.model.checkpoint_file import (CheckpointError, Unrecognised, check_divisible,
                                         read_header)
from tplab.model.config import GPTConfig
from tplab.model.tokenizer import Tokenizer
from tplab.records import prompts_file


def read_prompts(path: str, count: int) -> list[str]:
    """The first ``count`` prompts of a prompts file (blank lines and ``#`` comments skipped;
    the file's rules, and their sentences, are ``tplab.records.prompts_file``'s)."""
    try:
        return prompts_file.read_prompts(path, count)
    except prompts_file.PromptsFileError as exc:
        raise JobError(str(exc)) from None


def world_size_problem(world_size: int) -> str | None:
    """Why TP cannot run on ``world_size`` ranks at all, or None (the model's own divisibility is
    the checkpoint's check)."""
    if world_size < 2:
        return (f"tensor parallelism needs at least 2 ranks, got {world_size}; rent 2 or more "
                "GPUs (--gpus 2).")
    return None


def context_problem(longest: int, new_tokens: int, block_size: int) -> str | None:
    """Why the longest prompt (in tokens, BOS and SEP included) and ``new_tokens`` do not fit
    the model's context, with the advice that can help, or None."""
    if longest + new_tokens <= block_size:
        return None
    room = block_size - longest
    if room < 2:  # not even a prefill and one decode step: only a shorter prompt helps
        return (f"a prompt of {longest} tokens leaves no room in the model's {block_size}-token "
                "context for new tokens (at least 2); shorten that prompt.")
    return (f"a prompt of {longest} tokens plus {new_tokens} new tokens exceeds the model's "
            f"block_size {block_size}; lower --new-tokens to {room} or less, or shorten that "
            "prompt.")


def _config_and_tokenizer(checkpoint: str) -> tuple[GPTConfig, Tokenizer]:
    """The checkpoint checked without torch, or by ``torch.load`` when the reader does not
    recognise the file (``load_checkpoint``'s sentence is then the answer)."""
    try:
        header = read_header(checkpoint)
        return header.config, header.tokenizer
    except Unrecognised:
        from tplab.model.checkpoint import load_checkpoint
        ckpt = load_checkpoint(checkpoint)
        return ckpt.config, ckpt.tokenizer


def check(checkpoint: str, prompts: str, num_prompts: int, new_tokens: int,
          world_size: int) -> None:
    """Raise JobError / CheckpointError with the job's sentence for the first problem found."""
    bad_world = world_size_problem(world_size)
    if bad_world:
        raise JobError(bad_world)
    texts = read_prompts(prompts, num_prompts)
    if new_tokens < 2:
        raise JobError(f"--new-tokens must be at least 2 (a prefill and one decode step), got "
                       f"{new_tokens}.")
    config, tokenizer = _config_and_tokenizer(checkpoint)  # format, config, tokenizer, shapes
    check_divisible(config, world_size)
    longest = max(len(tokenizer.prompt_ids(p)) for p in texts)
    too_long = context_problem(longest, new_tokens, config.block_size)
    if too_long:
        raise JobError(too_long)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tplab.job.input_check",
                                description="Check a lab's job inputs without running it.")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--prompts", required=True)
    p.add_argument("--num-prompts", type=int, required=True)
    p.add_argument("--new-tokens", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    a = p.parse_args(argv)
    try:
        check(a.checkpoint, a.prompts, a.num_prompts, a.new_tokens, a.world_size)
    except (JobError, CheckpointError) as exc:
        print(json.dumps({"ok": False, "error": str(exc)}))
        return 1
    print(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
