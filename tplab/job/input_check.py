"""Check the job's inputs before any pod exists: the same checks, the same sentences, as the job.

Why: a checkpoint that is not one, a prompts file with too few prompts, or a GPU count the model
cannot be split over (``n_head`` 4 over 3 ranks) used to be found on the pod, after a billed
boot. The client runs this module in a subprocess (``python -m tplab.job.input_check``), so it
never imports torch itself (the dashboard's first paint stays torch-free) and the refusal is
the job's own sentence, word for word.

Pod side: torch and the standard library only. Prints one JSON object
``{"ok": true}`` or ``{"ok": false, "error": "<sentence>"}``; exit 0 or 1 (2: bad arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from tplab.job.run import read_prompts
from tplab.job.runtime import JobError


def check(checkpoint: str, prompts: str, num_prompts: int, new_tokens: int,
          world_size: int) -> None:
    """Raise JobError / CheckpointError with the job's sentence for the first problem found."""
    from tplab.model.checkpoint import check_divisible, load_checkpoint
    texts = read_prompts(prompts, num_prompts)
    if new_tokens < 2:
        raise JobError(f"--new-tokens must be at least 2 (a prefill and one decode step), got "
                       f"{new_tokens}.")
    ckpt = load_checkpoint(checkpoint)  # the format, config, tokenizer, keys and shapes
    check_divisible(ckpt.config, world_size)
    longest = max(len(ckpt.tokenizer.prompt_ids(p)) for p in texts)
    if longest + new_tokens > ckpt.config.block_size:
        raise JobError(f"a prompt of {longest} tokens plus {new_tokens} new tokens exceeds the "
                       f"model's block_size {ckpt.config.block_size}; lower --new-tokens.")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tplab.job.input_check",
                                description="Check a lab's job inputs without running it.")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--prompts", required=True)
    p.add_argument("--num-prompts", type=int, required=True)
    p.add_argument("--new-tokens", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    a = p.parse_args(argv)
    from tplab.model.checkpoint import CheckpointError
    try:
        check(a.checkpoint, a.prompts, a.num_prompts, a.new_tokens, a.world_size)
    except (JobError, CheckpointError) as exc:
        print(json.dumps({"ok": False, "error": str(exc)}))
        return 1
    print(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
