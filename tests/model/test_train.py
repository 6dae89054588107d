"""Training data layout (loss only after <sep>, <eos> padding as targets) and a tiny training run."""

from __future__ import annotations

import torch

from tplab.model import corpus
from tplab.model.checkpoint import load_checkpoint, save_checkpoint
from tplab.model.config import GPTConfig
from tplab.model.train import IGNORE, lr_at, make_batch, train


def test_make_batch_masks_the_prompt_and_pads_with_eos_targets():
    tok = corpus.build_tokenizer()
    ex = corpus.Example(bad="i has eat", good="i have eaten", kind="perfect")
    x, y = make_batch(tok, [ex], length=12)
    prompt = tok.prompt_ids("i has eat")  # <bos> i has eat <sep>
    assert x[0, :5].tolist() == prompt
    assert y[0, :4].tolist() == [IGNORE] * 4  # nothing before <sep> is a target
    assert y[0, 4:8].tolist() == tok.encode("i have eaten") + [tok.eos_id]
    assert y[0, 8:].tolist() == [tok.eos_id] * 4  # after the sentence: keep predicting <eos>


def test_lr_schedule_warms_up_and_decays():
    assert lr_at(0.0, 1.0) == 0.0
    assert lr_at(0.03, 1.0) > 0.99
    assert lr_at(1.0, 1.0) < 0.06


def test_tiny_training_run_lowers_the_loss(tmp_path):
    config = GPTConfig(n_layer=1, block_size=48)
    lines: list[str] = []
    result = train(config, steps=40, minutes=2.0, batch_size=16, lr=5e-3, long_every=0, threads=1,
                   eval_examples=10, log=lines.append)
    assert result.meta["steps"] == 40 and result.report.total == 10
    assert result.meta["first_loss"] > 5.5  # about ln(600) ≈ 6.4 at the start
    assert result.meta["last_loss"] < result.meta["first_loss"] - 2.0
    assert isinstance(result.meta["torch"], str)  # weights_only loading rejects TorchVersion objects
    assert torch.isfinite(next(result.model.parameters())).all()
    path = save_checkpoint(tmp_path / "tiny.pt", result.model, result.tokenizer, result.meta)
    assert load_checkpoint(path).meta["steps"] == 40  # the whole meta loads with weights_only=True
