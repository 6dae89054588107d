"""Pod-side entry point for ``tplab generate --tp N``: greedy correction with the TP build.

Run under torchrun (``python -m torch.distributed.run --nproc-per-node=N -m tplab.model.generate_tp``):
every rank loads the same full checkpoint, keeps its shard, and decodes; rank 0 prints the text. Uses
NCCL when CUDA is available, gloo on the CPU otherwise. Imports only torch and the standard library.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

from tplab.model.checkpoint import CheckpointError, build_tp, load_checkpoint
from tplab.model.decode import greedy_decode
from tplab.util.process_end import end_now


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tplab.model.generate_tp", description=__doc__)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--max-new-tokens", type=int, default=40)
    p.add_argument("text", nargs="+")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ:
        print("generate_tp must run under torchrun (it reads RANK/WORLD_SIZE); use `tplab generate --tp N`.",
              file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    use_cuda = torch.cuda.is_available()
    device = "cpu"
    if use_cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    dist.init_process_group("nccl" if use_cuda else "gloo")
    try:
        rank = dist.get_rank()
        try:
            ckpt = load_checkpoint(args.checkpoint)
            model = build_tp(ckpt, device=device)
        except CheckpointError as exc:
            if rank == 0:
                print(f"tplab generate: {exc}", file=sys.stderr)
            return 1
        tok = ckpt.tokenizer
        text = " ".join(args.text)
        prompt = tok.prompt_ids(text)
        limit = min(args.max_new_tokens, ckpt.config.block_size - len(prompt))
        ids = greedy_decode(model, prompt, limit, eos_id=tok.eos_id)
        if rank == 0:
            print(tok.decode(ids, tok.slots(text)), flush=True)
        return 0
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    # the answer is printed and the process group left: end without unloading torch, which
    # torchrun and the user would wait for
    end_now(main())
