"""Hyper-parameters of MiniGPT-grammar, stored as a plain dict inside every checkpoint."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class GPTConfig:
    """Shape of the model. The defaults are the shipped model (about 0.4M parameters).

    ``block_size`` bounds prompt + generated tokens (the lab decodes 100 new tokens after a prompt
    of at most ~20). ``n_head`` and ``d_ff`` are divisible by 1, 2 and 4 so the model shards over
    those world sizes; ``vocab_size`` (the lab sheet's ``Linear(64, 600)``, grown to 640 for the
    placeholder tokens of unknown words) divides by 2, 4 and 8.
    """

    vocab_size: int = 640
    block_size: int = 160
    n_layer: int = 6
    n_head: int = 4
    d_model: int = 64
    d_ff: int = 256

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"GPTConfig.{f.name} must be a positive integer, got {value!r}.")
        if self.d_model % self.n_head:
            raise ValueError(f"GPTConfig.d_model ({self.d_model}) must be divisible by n_head ({self.n_head}).")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GPTConfig:
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        missing = names - set(data)
        if unknown or missing:
            raise ValueError(f"model config has unknown keys {sorted(unknown)} / missing keys {sorted(missing)}.")
        return cls(**data)
