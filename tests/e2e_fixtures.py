"""What the lab's and the dashboard's end-to-end tests (tests/lab, tests/tui) share.

``lab_assets_for``: the shipped checkpoint + prompts when they exist; otherwise a randomly
initialised MiniGPT of the shipped shape, with a tokenizer built from the caller's prompts, is
saved once (TP must still match single token for token, which is what the job checks, so the
transport and orchestrator are exercised the same way). Each conftest wraps it in its own
session-scoped ``lab_assets`` fixture with its own prompts.

``mock_cloud``: a running mock cloud (subprocess), stopped after the test; a conftest imports it.

``tiny_lab_config``: the small mock lab (2 prompts x 8 tokens, no sweep) the e2e tests start from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS


def lab_assets_for(tmp_path_factory, prompts: list[str], dirname: str) -> tuple[Path, Path]:
    """(checkpoint, prompts file): the shipped pair, or a random-init pair saved under ``dirname``."""
    if DEFAULT_CHECKPOINT.is_file() and DEFAULT_PROMPTS.is_file():
        return DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    import torch  # test side only: the dashboard itself never imports torch

    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.config import GPTConfig
    from tplab.model.gpt import MiniGPT
    from tplab.model.tokenizer import Tokenizer

    d = tmp_path_factory.mktemp(dirname)
    torch.manual_seed(0)
    tok = Tokenizer.build(w for p in prompts for w in p.split())
    ckpt = save_checkpoint(d / "ckpt.pt", MiniGPT(GPTConfig()), tok, {"note": "test, random init"})
    prompts_file = d / "prompts.txt"
    prompts_file.write_text("\n".join(prompts) + "\n")
    return ckpt, prompts_file


@pytest.fixture
def mock_cloud(tmp_path):
    """A running mock cloud (subprocess), so a test can look at its pods; stopped after the test."""
    from tplab.mock.handle import start_mock_cloud

    cloud = start_mock_cloud(boot_delay_s=0.3, state_dir=tmp_path / "mock-state")
    yield cloud
    cloud.stop()


def tiny_lab_config(lab_assets: tuple[Path, Path], tmp_path: Path, **kw):
    """A LabConfig for a small, fast mock lab; keyword arguments override its fields."""
    from tplab.lab.lab_config import LabConfig
    ckpt, prompts = lab_assets
    base = dict(mock=True, num_prompts=2, new_tokens=8, warmup=1, sweep=False,
                checkpoint=ckpt, prompts=prompts, out_dir=tmp_path / "out",
                heartbeat_interval_s=1.0, mock_options={"boot_delay_s": 0.3})
    base.update(kw)
    return LabConfig(**base)
