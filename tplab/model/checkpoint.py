"""The MiniGPT-grammar checkpoint file: one full (single-device) state dict, loaded strictly.

A checkpoint is ``torch.save`` of a plain dict (so ``torch.load(weights_only=True)`` can read it)::

    {"format": "tplab-minigpt-grammar", "version": 1, "config": {...}, "tokenizer": {...},
     "state_dict": {...}, "meta": {training info, held-out accuracy, seed, ...}}

Both builds load the same file: ``build_single`` loads it as is; ``build_tp`` slices each rank's
shard out of it (``gpt.shard_state_dict``). Loading never falls back to random weights: a missing,
extra or mis-shaped key, a file that is not a tplab checkpoint, or a world size that does not divide
the model raises ``CheckpointError`` with one sentence saying what is wrong and what to do.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tplab.model.checkpoint_file import (FORMAT, VERSION, CheckpointError, check_divisible,
                                        check_payload, check_weights, missing_file_error,
                                        param_shapes)
from tplab.model.config import GPTConfig
from tplab.model.gpt import MiniGPT, MiniGPTTP, shard_state_dict
from tplab.model.tokenizer import Tokenizer
from tplab.tp import get_rank, get_world_size
from tplab.tp.collectives import ProcessGroup

__all__ = ["FORMAT", "VERSION", "Checkpoint", "CheckpointError", "build_single", "build_tp",
           "check_divisible", "check_state_dict", "expected_shapes", "load_checkpoint",
           "save_checkpoint"]


@dataclass
class Checkpoint:
    config: GPTConfig
    state_dict: dict[str, torch.Tensor]
    tokenizer: Tokenizer
    meta: dict[str, Any] = field(default_factory=dict)
    path: str = ""


def save_checkpoint(path: str | os.PathLike, model: MiniGPT, tokenizer: Tokenizer,
                    meta: dict[str, Any] | None = None) -> Path:
    """Write ``model`` (a single-device MiniGPT) atomically to ``path``."""
    if isinstance(model, MiniGPTTP):
        raise ValueError("save_checkpoint takes the full single-device MiniGPT, not a TP shard.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "config": model.config.to_dict(),
        "tokenizer": tokenizer.to_dict(),
        "state_dict": {k: v.detach().to("cpu").clone().contiguous() for k, v in model.state_dict().items()},
        "meta": dict(meta or {}),
    }
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def expected_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Parameter name → shape of the full model for ``config``: ``checkpoint_file.param_shapes``,
    written out (a test holds it equal to the model's own ``state_dict``). Building the model on
    the meta device instead would import ``torch._dynamo`` (its ``normal_`` goes through torch's
    refs): ~1.6 s of CPU in every process that loads a checkpoint, every rank included."""
    return param_shapes(config)


def check_state_dict(state_dict: dict[str, Any], config: GPTConfig, where: str) -> None:
    """Raise CheckpointError unless ``state_dict`` has exactly the keys and shapes of ``config``'s model."""
    found = {k: (tuple(v.shape), v.is_floating_point()) if isinstance(v, torch.Tensor) else None
             for k, v in state_dict.items()}
    check_weights(found, expected_shapes(config), where)


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read and validate a checkpoint file (CPU tensors). Raises CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise missing_file_error(path)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for non-torch / truncated files
        raise CheckpointError(f"{path} is not a readable torch checkpoint (not a file "
                              "torch.save wrote, or damaged); pass a file written by "
                              "`tplab train`.") from exc
    config, tokenizer, state_dict, meta = check_payload(data, str(path))
    check_state_dict(state_dict, config, str(path))
    return Checkpoint(config=config, state_dict=state_dict, tokenizer=tokenizer, meta=meta, path=str(path))


def build_single(ckpt: Checkpoint, device: torch.device | str = "cpu") -> MiniGPT:
    """The single-device model with the checkpoint's weights, in eval mode."""
    check_state_dict(ckpt.state_dict, ckpt.config, ckpt.path or "checkpoint")
    model = MiniGPT(ckpt.config)
    model.load_state_dict(ckpt.state_dict, strict=True)
    return model.to(device).eval()


def build_tp(ckpt: Checkpoint, device: torch.device | str = "cpu",
             group: ProcessGroup | None = None) -> MiniGPTTP:
    """This rank's shard of the model: the full checkpoint sliced the Megatron way, loaded strictly."""
    check_state_dict(ckpt.state_dict, ckpt.config, ckpt.path or "checkpoint")
    world_size, rank = get_world_size(group), get_rank(group)
    check_divisible(ckpt.config, world_size)
    model = MiniGPTTP(ckpt.config, group=group)
    model.load_state_dict(shard_state_dict(ckpt.state_dict, rank, world_size), strict=True)
    return model.to(device).eval()
