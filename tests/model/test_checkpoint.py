"""Strict checkpoint loading: every way a file can be wrong is one clear CheckpointError."""

from __future__ import annotations

import pytest
import torch

from tplab.model.checkpoint import (CheckpointError, build_single, check_divisible, load_checkpoint,
                                    save_checkpoint)
from tplab.model.config import GPTConfig
from tplab.model.corpus import build_tokenizer
from tplab.model.gpt import MiniGPT

SMALL = GPTConfig(vocab_size=640, block_size=32, n_layer=1, n_head=4, d_model=16, d_ff=32)


@pytest.fixture()
def saved(tmp_path):
    torch.manual_seed(0)
    model = MiniGPT(SMALL)
    path = save_checkpoint(tmp_path / "m.pt", model, build_tokenizer(), {"seed": 0})
    return path, model


def _rewrite(path, change):
    data = torch.load(path, weights_only=True)
    change(data)
    torch.save(data, path)


def test_round_trip(saved):
    path, model = saved
    ckpt = load_checkpoint(path)
    assert ckpt.config == SMALL and ckpt.meta == {"seed": 0}
    loaded = build_single(ckpt)
    idx = torch.randint(0, 640, (1, 5))
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx), model(idx))


def test_missing_key(saved):
    path, _ = saved
    _rewrite(path, lambda d: d["state_dict"].pop("ln_f.weight"))
    with pytest.raises(CheckpointError, match="missing 1 weight.*ln_f.weight"):
        load_checkpoint(path)


def test_extra_key(saved):
    path, _ = saved
    _rewrite(path, lambda d: d["state_dict"].__setitem__("blocks.9.mlp.up.weight", torch.zeros(2)))
    with pytest.raises(CheckpointError, match="unexpected weight.*blocks.9.mlp.up.weight"):
        load_checkpoint(path)


def test_wrong_shape(saved):
    path, _ = saved
    _rewrite(path, lambda d: d["state_dict"].__setitem__("lm_head.weight", torch.zeros(600, 8)))
    with pytest.raises(CheckpointError, match=r"lm_head.weight has shape \(600, 8\)"):
        load_checkpoint(path)


def test_not_a_torch_file(tmp_path):
    bad = tmp_path / "notes.pt"
    bad.write_text("this is not a checkpoint\n")
    with pytest.raises(CheckpointError, match="not a readable torch checkpoint"):
        load_checkpoint(bad)


def test_torch_file_that_is_not_a_tplab_checkpoint(tmp_path):
    other = tmp_path / "other.pt"
    torch.save(MiniGPT(SMALL).state_dict(), other)
    with pytest.raises(CheckpointError, match="not a tplab MiniGPT-grammar checkpoint"):
        load_checkpoint(other)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")


def test_world_size_that_does_not_divide_names_the_dimension():
    with pytest.raises(CheckpointError, match="n_head=4 is not divisible by 3"):
        check_divisible(SMALL, 3)
    check_divisible(SMALL, 4)
