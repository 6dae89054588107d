"""Fixtures for the lab's end-to-end tests: a checkpoint + prompts, and the real mock cloud.

The shipped checkpoint is used when it exists; otherwise a randomly initialised MiniGPT with the
shipped shape is saved once per session (TP must still match single token for token, which is
what the job checks, so the transport and orchestrator are exercised the same way).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tplab.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS

PROMPTS = ["he goed to school", "i has eat", "she dont like apples", "they was happy",
           "we is going home", "he have a cat", "she runned fast", "i seen it",
           "you was late", "it dont work"]


@pytest.fixture(scope="session")
def lab_assets(tmp_path_factory) -> tuple[Path, Path]:
    if DEFAULT_CHECKPOINT.is_file() and DEFAULT_PROMPTS.is_file():
        return DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    import torch
    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.config import GPTConfig
    from tplab.model.gpt import MiniGPT
    from tplab.model.tokenizer import Tokenizer
    d = tmp_path_factory.mktemp("lab-assets")
    torch.manual_seed(0)
    tok = Tokenizer.build(w for p in PROMPTS for w in p.split())
    ckpt = save_checkpoint(d / "ckpt.pt", MiniGPT(GPTConfig()), tok, {"note": "test, random init"})
    prompts = d / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    return ckpt, prompts


@pytest.fixture
def mock_cloud(tmp_path):
    """A running mock cloud (subprocess), stopped after the test."""
    from tplab.mock.handle import start_mock_cloud
    cloud = start_mock_cloud(boot_delay_s=0.3, state_dir=tmp_path / "mock-state")
    yield cloud
    cloud.stop()
