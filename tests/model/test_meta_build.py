"""A model built with ``on_meta()`` has the plain build's parameters, on the meta device, and
the mode leaves every draw into a real tensor alone (that no rank of the d_model sweep imports
``torch._dynamo`` for it is checked in tests/job/test_dmodel_sweep.py, in fresh ranks)."""

from __future__ import annotations

import torch

from tplab.model.config import GPTConfig
from tplab.model.gpt import MiniGPT
from tplab.model.meta_build import on_meta

CFG = GPTConfig(vocab_size=32, block_size=16, n_layer=2, n_head=2, d_model=16, d_ff=32)


def test_a_meta_build_has_the_plain_builds_parameters_and_real_draws_still_happen() -> None:
    plain = {n: p.shape for n, p in MiniGPT(CFG).named_parameters()}
    with on_meta():
        model = MiniGPT(CFG)
        real = torch.zeros(64, device="cpu")
        real.normal_()  # not a meta tensor: drawn as always
        torch.nn.init.uniform_(kept := torch.zeros(8, device="cpu"), 1.0, 2.0)
    assert {n: p.shape for n, p in model.named_parameters()} == plain
    assert all(p.is_meta for p in model.parameters())
    assert real.std() > 0.5 and bool(((kept >= 1.0) & (kept <= 2.0)).all())
    assert torch.empty(1).device.type == "cpu"  # the meta device ends with the block
