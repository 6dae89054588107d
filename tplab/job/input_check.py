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
from pathlib import Path
from typing import Sequence

from tplab.job.job_error import JobError
from tplab.model.checkpoint_file import (CheckpointError, Unrecognised, check_divisible,
                                         read_header)
from tplab.model.config import GPTConfig
from tplab.model.tokenizer import Tokenizer


def read_prompts(path: str, count: int) -> list[str]:
    """The first ``count`` prompts of a prompts file (blank lines and ``#`` comments skipped)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise JobError(f"cannot read the prompts file {path}: {exc.strerror}.") from None
    prompts = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if count < 1:
        raise JobError(f"--num-prompts must be at least 1, got {count}.")
    if len(prompts) < count:
        raise JobError(f"{path} has {len(prompts)} prompts, fewer than --num-prompts {count}.")
    return prompts[:count]


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
    texts = read_prompts(prompts, num_prompts)
    if new_tokens < 2:
        raise JobError(f"--new-tokens must be at least 2 (a prefill and one decode step), got "
                       f"{new_tokens}.")
    config, tokenizer = _config_and_tokenizer(checkpoint)  # format, config, tokenizer, shapes
    check_divisible(config, world_size)
    longest = max(len(tokenizer.prompt_ids(p)) for p in texts)
    if longest + new_tokens > config.block_size:
        raise JobError(f"a prompt of {longest} tokens plus {new_tokens} new tokens exceeds the "
                       f"model's block_size {config.block_size}; lower --new-tokens.")


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
