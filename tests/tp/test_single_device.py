"""Without a process group the TP layers are the full layers and the collectives do nothing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tplab.tp import (
    ColumnParallelLinear,
    RowParallelLinear,
    ShardedEmbedding,
    comm_timing,
    copy_to_region,
    gather_from_region,
    reduce_from_region,
    scatter_to_region,
    shard_size,
)


def test_layers_equal_their_full_modules_at_world_size_one() -> None:
    torch.manual_seed(0)
    lin, emb = nn.Linear(6, 4), nn.Embedding(10, 3)
    x, ids = torch.randn(2, 6), torch.tensor([[0, 9, 4]])
    col = ColumnParallelLinear.from_full(lin, gather_output=True)
    row = RowParallelLinear.from_full(lin, input_is_parallel=False)
    shard = ShardedEmbedding.from_full(emb)
    assert (col.rank, col.world_size, row.world_size, shard.world_size) == (0, 1, 1, 1)
    with comm_timing() as t:
        assert torch.equal(col(x), lin(x))
        assert torch.allclose(row(x), lin(x), atol=1e-6)
        assert torch.equal(shard(ids), emb(ids))
    assert (t.calls, t.bytes, t.ms) == (0, 0, 0.0)


def test_from_full_copies_rather_than_shares_weights() -> None:
    lin = nn.Linear(4, 4)
    col = ColumnParallelLinear.from_full(lin)
    with torch.no_grad():
        lin.weight.zero_()
    assert col.weight.abs().sum() > 0


def test_fresh_layers_have_the_full_shapes_and_linear_init() -> None:
    col = ColumnParallelLinear(64, 32, bias=False)
    row = RowParallelLinear(64, 32)
    assert col.bias is None and col.weight.shape == (32, 64)
    assert row.weight.shape == (32, 64) and row.bias.shape == (32,)
    assert col.weight.abs().max() <= 64**-0.5 and row.weight.abs().max() <= 64**-0.5


def test_collectives_are_identities_without_a_process_group() -> None:
    x = torch.randn(3, 4, requires_grad=True)
    for fn in (copy_to_region, reduce_from_region, gather_from_region, scatter_to_region):
        assert fn(x) is x


def test_from_full_rejects_the_wrong_module_type() -> None:
    with pytest.raises(TypeError, match="expects an nn.Linear"):
        ColumnParallelLinear.from_full(nn.Embedding(4, 4))
    with pytest.raises(TypeError, match="expects an nn.Embedding"):
        ShardedEmbedding.from_full(nn.Linear(4, 4))


def test_shard_size_names_layer_dimension_size_and_world_size() -> None:
    assert shard_size("L", "dim", 12, 4) == 3
    with pytest.raises(ValueError, match=r"^L: dim=10 is not divisible by world_size=4; "):
        shard_size("L", "dim", 10, 4)


def test_nested_timers_both_count() -> None:
    with comm_timing() as outer, comm_timing() as inner:
        pass
    assert outer is not inner and outer.calls == inner.calls == 0
