"""Megatron-style tensor-parallel layers: column- and row-parallel linears and a sharded embedding.

Why this module exists: it is the lab sheet's ``tensor_parallel.py`` — the three layers the lab's TP model
is built from. Each rank holds only its shard as Parameters:

    ColumnParallelLinear  weight [out/ws, in], bias [out/ws]   output sharded on the last dim
    RowParallelLinear     weight [out, in/ws], bias [out]      one all-reduce, then the bias (once)
    ShardedEmbedding      weight [vocab/ws, dim]               foreign ids masked to zero, one all-reduce

Column → activation → Row is the MLP pattern with a single all-reduce in the forward pass.

Every layer has ``from_full(module, group=None, **kw)`` which slices a full ``nn.Linear`` /
``nn.Embedding`` by rank, so TP and single-device runs start from identical weights. Without an
initialised process group a layer has world size 1 and behaves exactly like the full module.

This module travels to the pod: it imports only torch and the standard library.
"""

from __future__ import annotations

import math
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from .collectives import (
    ProcessGroup,
    copy_to_region,
    gather_from_region,
    get_rank,
    get_world_size,
    reduce_from_region,
    scatter_to_region,
)

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "ShardedEmbedding", "shard_size"]


def shard_size(layer: str, dimension: str, size: int, world_size: int) -> int:
    """``size // world_size``, or a ValueError naming the layer, dimension, size and world size."""
    if size <= 0 or size % world_size != 0:
        raise ValueError(
            f"{layer}: {dimension}={size} is not divisible by world_size={world_size}; "
            f"choose a world size that divides {dimension}."
        )
    return size // world_size


def _linear_params(
    weight_shape: tuple[int, int],
    bias_size: int | None,
    fan_in: int,
    device: torch.device | str | None,
    dtype: torch.dtype | None,
) -> tuple[nn.Parameter, nn.Parameter | None]:
    """A shard's weight and bias (None when ``bias_size`` is None) with nn.Linear's default init
    (uniform in ±1/sqrt(fan_in)), using the *full* layer's fan-in."""
    weight = nn.Parameter(torch.empty(*weight_shape, device=device, dtype=dtype))
    bias = (nn.Parameter(torch.empty(bias_size, device=device, dtype=dtype))
            if bias_size is not None else None)
    bound = 1.0 / math.sqrt(fan_in)
    with torch.no_grad():
        weight.uniform_(-bound, bound)
        if bias is not None:
            bias.uniform_(-bound, bound)
    return weight, bias


#: the two sharded linears, which ``from_full`` builds and loads the same way
_Sharded = TypeVar("_Sharded", "ColumnParallelLinear", "RowParallelLinear")


def _layer_for_full(cls: type[_Sharded], full: nn.Module, group: ProcessGroup,
                    kw: dict[str, bool]) -> _Sharded:
    """``cls`` (a parallel linear) built with the full nn.Linear's shape, bias, device and dtype."""
    if not isinstance(full, nn.Linear):
        raise TypeError(f"{cls.__name__}.from_full expects an nn.Linear, got {type(full).__name__}.")
    return cls(
        full.in_features,
        full.out_features,
        bias=full.bias is not None,
        group=group,
        device=full.weight.device,
        dtype=full.weight.dtype,
        **kw,
    )


def _load_shard_(layer: _Sharded, weight: torch.Tensor, bias: torch.Tensor | None) -> _Sharded:
    """Copy this rank's slices of the full weight and bias into ``layer``; returns ``layer``."""
    with torch.no_grad():
        layer.weight.copy_(weight)
        if layer.bias is not None and bias is not None:
            layer.bias.copy_(bias)
    return layer


class ColumnParallelLinear(nn.Module):
    """Y = X Aᵀ + b with A split along its output rows: each rank computes out_features/ws columns.

    The input is replicated (identity forward, all-reduce of its gradient backward). The output
    stays sharded on the last dimension unless ``gather_output=True``.
    """

    weight: nn.Parameter
    bias: nn.Parameter | None
    #: the name of its all-gather in a profiler trace (set by the model that places it)
    label: str | None = None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        gather_output: bool = False,
        group: ProcessGroup = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.group = group
        self.world_size = get_world_size(group)
        self.rank = get_rank(group)
        self.in_features = in_features
        self.out_features = out_features
        self.gather_output = gather_output
        self.out_per_rank = shard_size(
            "ColumnParallelLinear", "out_features", out_features, self.world_size
        )
        self.weight, self.bias = _linear_params(
            (self.out_per_rank, in_features), self.out_per_rank if bias else None, in_features,
            device, dtype,
        )

    @property
    def out_start(self) -> int:
        return self.rank * self.out_per_rank

    @classmethod
    def from_full(
        cls, full: nn.Linear, group: ProcessGroup = None, **kw: bool
    ) -> ColumnParallelLinear:
        """Build this rank's shard from a full ``nn.Linear`` (rows of its weight, slice of its bias)."""
        layer = _layer_for_full(cls, full, group, kw)
        rows = slice(layer.out_start, layer.out_start + layer.out_per_rank)
        bias = None if full.bias is None else full.bias[rows]
        return _load_shard_(layer, full.weight[rows], bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = copy_to_region(x, self.group)
        y = F.linear(x, self.weight, self.bias)
        if self.gather_output:
            y = gather_from_region(y, self.group, self.label)
        return y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features} "
            f"(shard {self.out_per_rank}), bias={self.bias is not None}, "
            f"gather_output={self.gather_output}, rank={self.rank}/{self.world_size}"
        )


class RowParallelLinear(nn.Module):
    """Y = X Aᵀ + b with A split along its input columns: each rank holds in_features/ws of them.

    The input is expected sharded on its last dimension (``input_is_parallel=True``, e.g. the
    output of a ColumnParallelLinear); otherwise it is split here. Partial products are summed
    with one all-reduce, and the full bias is added once, after it.
    """

    weight: nn.Parameter
    bias: nn.Parameter | None
    #: the name of its all-reduce in a profiler trace (set by the model that places it)
    label: str | None = None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        input_is_parallel: bool = True,
        group: ProcessGroup = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.group = group
        self.world_size = get_world_size(group)
        self.rank = get_rank(group)
        self.in_features = in_features
        self.out_features = out_features
        self.input_is_parallel = input_is_parallel
        self.in_per_rank = shard_size(
            "RowParallelLinear", "in_features", in_features, self.world_size
        )
        self.weight, self.bias = _linear_params(
            (out_features, self.in_per_rank), out_features if bias else None, in_features,
            device, dtype,
        )

    @property
    def in_start(self) -> int:
        return self.rank * self.in_per_rank

    @classmethod
    def from_full(
        cls, full: nn.Linear, group: ProcessGroup = None, **kw: bool
    ) -> RowParallelLinear:
        """Build this rank's shard from a full ``nn.Linear`` (columns of its weight, all its bias)."""
        layer = _layer_for_full(cls, full, group, kw)
        cols = slice(layer.in_start, layer.in_start + layer.in_per_rank)
        return _load_shard_(layer, full.weight[:, cols], full.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = scatter_to_region(x, self.group)
        y = reduce_from_region(F.linear(x, self.weight), self.group, self.label)
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features} (shard {self.in_per_rank}), "
            f"out_features={self.out_features}, bias={self.bias is not None}, "
            f"input_is_parallel={self.input_is_parallel}, rank={self.rank}/{self.world_size}"
        )


class ShardedEmbedding(nn.Module):
    """nn.Embedding with the vocabulary split across ranks: rank r holds ids [vocab_start, vocab_end).

    Each rank looks up the ids it owns, writes zeros for the others, and one all-reduce sums the
    partial results. Ids outside [0, vocab_size) are not checked when world_size > 1 (checking
    would force a device sync per lookup): they come back as zero vectors.
    """

    #: the name of its all-reduce in a profiler trace (set by the model that places it)
    label: str | None = None

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        group: ProcessGroup = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.group = group
        self.world_size = get_world_size(group)
        self.rank = get_rank(group)
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.vocab_per_rank = shard_size(
            "ShardedEmbedding", "vocab_size", vocab_size, self.world_size
        )
        self.vocab_start = self.rank * self.vocab_per_rank
        self.vocab_end = self.vocab_start + self.vocab_per_rank
        self.weight = nn.Parameter(
            torch.empty(self.vocab_per_rank, embedding_dim, device=device, dtype=dtype)
        )
        with torch.no_grad():
            self.weight.normal_()

    @classmethod
    def from_full(
        cls, full: nn.Embedding, group: ProcessGroup = None, **kw: object
    ) -> ShardedEmbedding:
        """Build this rank's shard from a full ``nn.Embedding`` (its rows for this rank's ids)."""
        if not isinstance(full, nn.Embedding):
            raise TypeError(
                f"{cls.__name__}.from_full expects an nn.Embedding, got {type(full).__name__}."
            )
        if full.padding_idx is not None or full.max_norm is not None:
            raise ValueError(
                f"{cls.__name__}.from_full supports plain embeddings only; "
                "build the nn.Embedding without padding_idx and max_norm."
            )
        layer = cls(
            full.num_embeddings,
            full.embedding_dim,
            group=group,
            device=full.weight.device,
            dtype=full.weight.dtype,
            **kw,
        )
        with torch.no_grad():
            layer.weight.copy_(full.weight[layer.vocab_start : layer.vocab_end])
        return layer

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return F.embedding(ids, self.weight)
        foreign = (ids < self.vocab_start) | (ids >= self.vocab_end)
        local = (ids - self.vocab_start).masked_fill(foreign, 0)
        out = F.embedding(local, self.weight).masked_fill(foreign.unsqueeze(-1), 0.0)
        return reduce_from_region(out, self.group, self.label)

    def extra_repr(self) -> str:
        return (
            f"vocab_size={self.vocab_size} (ids {self.vocab_start}..{self.vocab_end - 1}), "
            f"embedding_dim={self.embedding_dim}, rank={self.rank}/{self.world_size}"
        )
