"""Fixtures for the dashboard's end-to-end tests against the real orchestrator and mock cloud.

Same as tests/lab's: the shipped checkpoint when it exists, else a randomly initialised MiniGPT
of the shipped shape (TP must still match single token for token).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tplab.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS

PROMPTS = ["he goed to school", "i has eat", "she dont like apples", "they was happy"]


@pytest.fixture(scope="session")
def lab_assets(tmp_path_factory) -> tuple[Path, Path]:
    if DEFAULT_CHECKPOINT.is_file() and DEFAULT_PROMPTS.is_file():
        return DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    import torch  # test side only: the dashboard itself never imports torch

    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.config import GPTConfig
    from tplab.model.gpt import MiniGPT
    from tplab.model.tokenizer import Tokenizer

    d = tmp_path_factory.mktemp("tui-lab-assets")
    torch.manual_seed(0)
    tok = Tokenizer.build(w for p in PROMPTS for w in p.split())
    ckpt = save_checkpoint(d / "ckpt.pt", MiniGPT(GPTConfig()), tok, {"note": "test, random init"})
    prompts = d / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    return ckpt, prompts


@pytest.fixture
def mock_cloud(tmp_path):
    """A running mock cloud (subprocess), so a test can look at its pods; stopped after."""
    from tplab.mock.handle import start_mock_cloud

    cloud = start_mock_cloud(boot_delay_s=0.3, state_dir=tmp_path / "mock-state")
    yield cloud
    cloud.stop()
