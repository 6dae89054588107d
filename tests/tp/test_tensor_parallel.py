"""Tensor-parallel layers match their single-device counterparts, forward and backward.

The lab sheet's four tests (column, row, sharded embedding, the Column → GELU → Row MLP) run on two gloo
ranks on the CPU within 1e-4, and again with the collectives over the shared-memory transport
(``tplab.tp.shm``); beyond the lab sheet: gradients of the input and of each shard's weight,
world size 4, embedding ids on shard boundaries, the collectives' conjugate pairs, comm timing, the
collectives' names in a profiler's trace (only inside ``labels.labelled()``), and the error for a
world size that does not divide a sharded dimension.

Spawning ranks costs seconds on the test machines, so all checks for one world size run in one
spawn (``_checks`` below, once per module via a fixture); the ranks compute errors against the
single-device layer and the tests assert on them in the parent. Each spawn has its own file://
rendezvous and a short process-group timeout (see tests/distributed.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.distributed import run_distributed
from tplab.tp import (
    ColumnParallelLinear,
    RowParallelLinear,
    ShardedEmbedding,
    comm_timing,
    copy_to_region,
    gather_from_region,
    reduce_from_region,
    scatter_to_region,
    transport_name,
)

TOL = 1e-4
IN, HIDDEN, OUT, VOCAB, DIM = 16, 32, 24, 48, 12


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, f"shape {tuple(a.shape)} != {tuple(b.shape)}"
    return (a - b).abs().max().item()


def _column(rank: int, ws: int) -> dict[str, Any]:
    torch.manual_seed(1)
    full = nn.Linear(IN, OUT)
    x = torch.randn(2, 5, IN)
    g = torch.randn(2, 5, OUT)  # upstream gradient
    xs = x.clone().requires_grad_()
    (full(xs) * g).sum().backward()

    tp = ColumnParallelLinear.from_full(full)
    rows = slice(tp.out_start, tp.out_start + tp.out_per_rank)
    xt = x.clone().requires_grad_()
    shard = tp(xt)
    with comm_timing() as t:
        (shard * g[..., rows]).sum().backward()
    gathering = ColumnParallelLinear.from_full(full, gather_output=True)
    xg = x.clone().requires_grad_()
    gathered = gathering(xg)
    (gathered * g).sum().backward()  # the all-gather's backward keeps this rank's slice of g
    return {
        "shard": shard.detach(),
        "full_out": full(x).detach(),
        "gathered_err": _err(gathered, full(x)),
        "gathered_grad_x_err": _err(xg.grad, xs.grad),
        "gathered_grad_w_err": _err(gathering.weight.grad, full.weight.grad[rows]),
        "grad_x_err": _err(xt.grad, xs.grad),
        "grad_w_err": _err(tp.weight.grad, full.weight.grad[rows]),
        "grad_b_err": _err(tp.bias.grad, full.bias.grad[rows]),
        "weight_shape": tuple(tp.weight.shape),
        "backward_calls": t.calls,
    }


def _row(rank: int, ws: int) -> dict[str, Any]:
    torch.manual_seed(2)
    full = nn.Linear(IN, OUT)
    x = torch.randn(3, IN)
    g = torch.randn(3, OUT)
    xs = x.clone().requires_grad_()
    ref = full(xs)
    (ref * g).sum().backward()

    tp = RowParallelLinear.from_full(full)
    cols = slice(tp.in_start, tp.in_start + tp.in_per_rank)
    xt = x[:, cols].clone().requires_grad_()
    with comm_timing() as fwd:
        y = tp(xt)
    (y * g).sum().backward()

    unsplit = RowParallelLinear.from_full(full, input_is_parallel=False)
    xu = x.clone().requires_grad_()
    yu = unsplit(xu)
    (yu * g).sum().backward()
    return {
        "out_err": _err(y, ref),
        "grad_x_err": _err(xt.grad, xs.grad[:, cols]),
        "grad_w_err": _err(tp.weight.grad, full.weight.grad[:, cols]),
        "grad_b_err": _err(tp.bias.grad, full.bias.grad),
        "unsplit_out_err": _err(yu, ref),
        "unsplit_grad_x_err": _err(xu.grad, xs.grad),
        "weight_shape": tuple(tp.weight.shape),
        "forward_calls": fwd.calls,
        "forward_bytes": fwd.bytes,
    }


def _embedding(rank: int, ws: int) -> dict[str, Any]:
    torch.manual_seed(3)
    full = nn.Embedding(VOCAB, DIM)
    per = VOCAB // ws
    edges = sorted({i for k in range(ws + 1) for i in (k * per - 1, k * per) if 0 <= i < VOCAB})
    ids = torch.tensor([edges, torch.randint(0, VOCAB, (len(edges),)).tolist()])
    g = torch.randn(*ids.shape, DIM)
    ref = full(ids)
    (ref * g).sum().backward()

    tp = ShardedEmbedding.from_full(full)
    with comm_timing() as t:
        out = tp(ids)
    (out * g).sum().backward()
    return {
        "edges": edges,
        "range": (tp.vocab_start, tp.vocab_end),
        "out_err": _err(out, ref),
        "grad_w_err": _err(tp.weight.grad, full.weight.grad[tp.vocab_start : tp.vocab_end]),
        "weight_shape": tuple(tp.weight.shape),
        "forward_calls": t.calls,
    }


def _mlp(rank: int, ws: int) -> dict[str, Any]:
    torch.manual_seed(4)
    up, down = nn.Linear(IN, HIDDEN), nn.Linear(HIDDEN, IN)
    x = torch.randn(4, IN)
    g = torch.randn(4, IN)
    xs = x.clone().requires_grad_()
    ref = down(F.gelu(up(xs)))
    (ref * g).sum().backward()

    c, r = ColumnParallelLinear.from_full(up), RowParallelLinear.from_full(down)
    xt = x.clone().requires_grad_()
    with comm_timing() as fwd:
        y = r(F.gelu(c(xt)))
    with comm_timing() as bwd:
        (y * g).sum().backward()
    hid = slice(c.out_start, c.out_start + c.out_per_rank)
    syncs: list[int] = []
    with torch.no_grad(), comm_timing(sync=lambda: syncs.append(1)) as inference:
        y_inference = r(F.gelu(c(x)))  # the decode path: no autograd Functions involved
    return {
        "out_err": _err(y, ref),
        "inference_err": _err(y_inference, ref),
        "inference": (inference.calls, inference.by_op, len(syncs), inference.ms > 0),
        "grad_x_err": _err(xt.grad, xs.grad),
        "grad_up_err": _err(c.weight.grad, up.weight.grad[hid]),
        "grad_down_err": _err(r.weight.grad, down.weight.grad[:, hid]),
        "forward": (fwd.calls, fwd.by_op, fwd.bytes),
        "backward": (bwd.calls, bwd.by_op),
    }


def _collectives(rank: int, ws: int) -> dict[str, Any]:
    scale = float(rank + 1)
    x = torch.full((2, 3), scale, requires_grad=True)
    (copy_to_region(x) * scale).sum().backward()
    copy_grad = x.grad.clone()

    y = torch.full((2, 3), scale, requires_grad=True)
    before = y.detach().clone()
    red = reduce_from_region(y)
    red.sum().backward()

    z = torch.arange(3.0).add(10 * rank).requires_grad_()
    gat = gather_from_region(z)
    (gat * torch.arange(gat.numel(), dtype=torch.float32)).sum().backward()

    w = torch.arange(4.0 * ws).requires_grad_()
    sc = scatter_to_region(w)
    (sc * scale).sum().backward()

    try:
        scatter_to_region(torch.zeros(4 * ws + 1))
        split_error = ""
    except ValueError as exc:
        split_error = str(exc)
    return {
        "copy_grad": copy_grad,
        "reduce_out": red.detach(),
        "reduce_left_input": bool(torch.equal(y.detach(), before)),
        "reduce_grad": y.grad,
        "gathered": gat.detach(),
        "gather_grad": z.grad,
        "scattered": sc.detach(),
        "scatter_grad": w.grad,
        "split_error": split_error,
    }


def _labels(rank: int, ws: int) -> dict[str, list[str]]:
    """The collective spans a profiler (the one the job's profiled pass runs) records for one
    forward of labelled layers and an unlabelled one, outside and inside ``labelled()``."""
    from tplab.records.trace_names import parse_collective
    from tplab.tp import labels

    torch.manual_seed(2)
    emb = ShardedEmbedding.from_full(nn.Embedding(VOCAB, DIM))
    emb.label = "embedding all-reduce"
    row = RowParallelLinear.from_full(nn.Linear(IN, DIM))
    row.label = "L0 attn-out all-reduce"
    head = ColumnParallelLinear.from_full(nn.Linear(DIM, OUT), gather_output=True)
    head.label = "logits all-gather"
    plain = RowParallelLinear.from_full(nn.Linear(IN, DIM))
    x = torch.randn(1, 2, IN)
    ids = torch.tensor([[1, VOCAB - 1]])

    def forward() -> None:
        h = emb(ids) + row(x[..., row.in_start:row.in_start + row.in_per_rank])
        h = h + plain(x[..., plain.in_start:plain.in_start + plain.in_per_rank])
        head(h)

    out: dict[str, list[str]] = {}
    for where in ("outside", "inside"):
        with torch.no_grad(), torch.autograd.profiler.profile(use_kineto=True) as prof:
            if where == "inside":
                with labels.labelled():
                    forward()
            else:
                forward()
        out[where] = [e.name for e in prof.function_events if parse_collective(e.name)]
    out["left_on"] = [str(bool(labels.ON))]
    return out


def _errors(rank: int, ws: int) -> dict[str, str]:
    odd = 4 * ws + 1  # never divisible by ws >= 2
    builders = {
        "column": lambda: ColumnParallelLinear(IN, odd),
        "row": lambda: RowParallelLinear(odd, IN),
        "embedding": lambda: ShardedEmbedding(odd, DIM),
    }
    messages = {}
    for name, build in builders.items():
        try:
            build()
            messages[name] = ""
        except ValueError as exc:
            messages[name] = str(exc)
    return messages


def _checks(rank: int, ws: int) -> dict[str, Any]:
    import torch.distributed as dist

    return {
        "env": (dist.get_rank(), dist.get_world_size(), dist.get_backend(), torch.get_num_threads()),
        "transport": transport_name(),
        "column": _column(rank, ws),
        "row": _row(rank, ws),
        "embedding": _embedding(rank, ws),
        "mlp": _mlp(rank, ws),
        "collectives": _collectives(rank, ws),
        "labels": _labels(rank, ws),
        "errors": _errors(rank, ws),
    }


# shm at world size 2 (the lab sheet's); tests/tp/test_shm.py runs the transport itself at 3 ranks
@pytest.fixture(scope="module", params=[(2, "gloo"), (4, "gloo"), (2, "shm")],
                ids=["ws2-gloo", "ws4-gloo", "ws2-shm"])
def ranks(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    world_size, comm = request.param
    results = run_distributed(_checks, world_size, timeout_s=120, comm=comm)
    assert all(r["transport"] == comm for r in results), "the collectives took another transport"
    return results


def _assert_close(results: list[dict[str, Any]], part: str, *keys: str) -> None:
    for rank, res in enumerate(results):
        for key in keys:
            assert res[part][key] < TOL, f"rank {rank}: {part}.{key} = {res[part][key]:.3g}"


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("tp-layer-ranks")  # one spawn of the module's ranks, on one worker
def test_each_rank_ran_on_gloo_with_one_thread(ranks: list[dict[str, Any]]) -> None:
    ws = len(ranks)
    assert [r["env"] for r in ranks] == [(k, ws, "gloo", 1) for k in range(ws)]


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("tp-layer-ranks")  # one spawn of the module's ranks, on one worker
def test_column_parallel_matches_single_gpu(ranks: list[dict[str, Any]]) -> None:
    ws = len(ranks)
    shards = [r["column"]["shard"] for r in ranks]
    assert all(s.shape == (2, 5, OUT // ws) for s in shards)
    assert _err(torch.cat(shards, dim=-1), ranks[0]["column"]["full_out"]) < TOL
    assert all(r["column"]["weight_shape"] == (OUT // ws, IN) for r in ranks)
    _assert_close(
        ranks, "column", "gathered_err", "gathered_grad_x_err", "gathered_grad_w_err",
        "grad_x_err", "grad_w_err", "grad_b_err",
    )
    # copy-to-region's backward is the only collective: one all-reduce of the input gradient
    assert all(r["column"]["backward_calls"] == 1 for r in ranks)


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("tp-layer-ranks")  # one spawn of the module's ranks, on one worker
def test_row_parallel_matches_single_gpu(ranks: list[dict[str, Any]]) -> None:
    ws = len(ranks)
    assert all(r["row"]["weight_shape"] == (OUT, IN // ws) for r in ranks)
    _assert_close(
        ranks, "row", "out_err", "grad_x_err", "grad_w_err", "grad_b_err",
        "unsplit_out_err", "unsplit_grad_x_err",
    )
    assert all(r["row"]["forward_calls"] == 1 for r in ranks)
    assert all(r["row"]["forward_bytes"] == 3 * OUT * 4 for r in ranks)


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("tp-layer-ranks")  # one spawn of the module's ranks, on one worker
def test_sharded_embedding_lookup(ranks: list[dict[str, Any]]) -> None:
    ws = len(ranks)
    per = VOCAB // ws
    assert [r["embedding"]["range"] for r in ranks] == [(k * per, (k + 1) * per) for k in range(ws)]
    # every shard boundary is looked up: the last id of one shard and the first of the next
    assert {per - 1, per}.issubset(ranks[0]["embedding"]["edges"])
    assert all(r["embedding"]["weight_shape"] == (per, DIM) for r in ranks)
    _assert_close(ranks, "embedding", "out_err", "grad_w_err")
    assert all(r["embedding"]["forward_calls"] == 1 for r in ranks)


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("tp-layer-ranks")  # one spawn of the module's ranks, on one worker
def test_mlp_pattern_minimal(ranks: list[dict[str, Any]]) -> None:
    _assert_close(ranks, "mlp", "out_err", "inference_err", "grad_x_err", "grad_up_err", "grad_down_err")
    for r in ranks:
        # under no_grad too, one all-reduce, bracketed by sync() before and after
        assert r["mlp"]["inference"] == (1, {"all_reduce": 1}, 2, True)
        calls, by_op, nbytes = r["mlp"]["forward"]
        assert (calls, by_op) == (1, {"all_reduce": 1}), "forward must use exactly one all-reduce"
        assert nbytes == 4 * IN * 4
        assert r["mlp"]["backward"] == (1, {"all_reduce": 1})


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("tp-layer-ranks")  # one spawn of the module's ranks, on one worker
def test_collectives_are_conjugate_pairs(ranks: list[dict[str, Any]]) -> None:
    ws = len(ranks)
    total = ws * (ws + 1) / 2  # sum over ranks of (rank + 1)
    for rank, r in enumerate(ranks):
        c = r["collectives"]
        assert torch.equal(c["copy_grad"], torch.full((2, 3), total))  # bwd all-reduce
        assert torch.equal(c["reduce_out"], torch.full((2, 3), total))  # fwd all-reduce
        assert c["reduce_left_input"], "reduce_from_region must not modify its input"
        assert torch.equal(c["reduce_grad"], torch.ones(2, 3))  # bwd identity
        expected = torch.cat([torch.arange(3.0) + 10 * k for k in range(ws)])
        assert torch.equal(c["gathered"], expected)  # fwd all-gather in rank order
        assert torch.equal(c["gather_grad"], torch.arange(3.0) + 3 * rank)  # bwd: own chunk
        assert torch.equal(c["scattered"], torch.arange(4.0) + 4 * rank)  # fwd: own chunk
        assert torch.equal(c["scatter_grad"], torch.arange(4 * ws).div(4, rounding_mode="floor") + 1)
        assert f"size {4 * ws + 1}" in c["split_error"] and f"world size {ws}" in c["split_error"]


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("tp-layer-ranks")  # one spawn of the module's ranks, on one worker
def test_non_dividing_world_size_is_a_clear_error(ranks: list[dict[str, Any]]) -> None:
    ws = len(ranks)
    odd = 4 * ws + 1
    expected = {
        "column": ("ColumnParallelLinear", "out_features"),
        "row": ("RowParallelLinear", "in_features"),
        "embedding": ("ShardedEmbedding", "vocab_size"),
    }
    for r in ranks:
        for name, (layer, dim) in expected.items():
            msg = r["errors"][name]
            for part in (layer, f"{dim}={odd}", f"world_size={ws}"):
                assert part in msg, f"{name}: {part!r} missing from {msg!r}"


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("tp-layer-ranks")  # one spawn of the module's ranks, on one worker
def test_collectives_are_named_in_a_trace_only_when_labelled(ranks: list[dict[str, Any]]) -> None:
    """Inside ``labels.labelled()`` each forward collective is a span named by its layer (an
    unnamed one says it is a collective); outside, with the profiler still running, none is: the
    labels cost no span when the job is not profiling."""
    for rank, res in enumerate(ranks):
        assert res["labels"]["inside"] == ["embedding all-reduce", "L0 attn-out all-reduce",
                                           "collective all-reduce", "logits all-gather"], rank
        assert res["labels"]["outside"] == [] and res["labels"]["left_on"] == ["False"], rank
