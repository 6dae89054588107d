"""A tiny random MiniGPT checkpoint and prompts, so the job's end-to-end tests take seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

PROMPTS = ["he goed to school", "i has eat", "she dont like apples"]


def make_tiny_checkpoint(path: Path) -> Path:
    import torch

    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.config import GPTConfig
    from tplab.model.gpt import MiniGPT
    from tplab.model.tokenizer import Tokenizer

    torch.manual_seed(0)
    tok = Tokenizer.build(" ".join(PROMPTS).split() + ["the", "cat", "sat", "."])
    cfg = GPTConfig(vocab_size=32, block_size=48, n_layer=2, n_head=4, d_model=32, d_ff=64)
    return save_checkpoint(path, MiniGPT(cfg), tok)


@pytest.fixture(scope="session")
def tiny_assets(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tiny")
    ckpt = make_tiny_checkpoint(d / "tiny.pt")
    prompts = d / "prompts.txt"
    prompts.write_text("# test prompts\n" + "\n".join(PROMPTS) + "\n\n", encoding="utf-8")
    return ckpt, prompts
