"""MiniGPT: KV-cache correctness, limits, and the TP slicing rules (no process group needed)."""

from __future__ import annotations

import pytest
import torch

from tplab.model.config import GPTConfig
from tplab.model.decode import greedy_decode, greedy_decode_batch
from tplab.model.gpt import MiniGPT, MiniGPTTP, shard_state_dict, shard_tensor

SMALL = GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=4, d_model=32, d_ff=64)


def _model(seed: int = 0) -> MiniGPT:
    torch.manual_seed(seed)
    return MiniGPT(SMALL).eval()


def test_forward_with_cache_matches_full_forward():
    model = _model()
    idx = torch.randint(0, SMALL.vocab_size, (2, 20))
    with torch.no_grad():
        full = model(idx)
        cache = model.new_cache(batch_size=2)
        parts = [model(idx[:, a:b], cache) for a, b in [(0, 7), (7, 12), (12, 13), (13, 20)]]
    assert cache.length == 20
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)


def test_cache_changes_the_result_so_it_is_really_used():
    model = _model()
    idx = torch.randint(0, SMALL.vocab_size, (1, 6))
    with torch.no_grad():
        cache = model.new_cache()
        model(idx[:, :5], cache)
        with_prefix = model(idx[:, 5:], cache)[0, -1]
        alone = model(idx[:, 5:])[0, -1]
    assert not torch.allclose(with_prefix, alone)


def test_block_size_overflow_is_a_clear_error():
    model = _model()
    cache = model.new_cache()
    model(torch.zeros(1, 30, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 3, dtype=torch.long), cache)


def test_greedy_decode_refuses_to_overrun_the_block():
    model = _model()
    assert len(greedy_decode(model, [1, 2], SMALL.block_size - 1)) == SMALL.block_size - 1  # fits exactly
    with pytest.raises(ValueError, match="does not fit"):
        greedy_decode(model, [1, 2], SMALL.block_size)


def test_greedy_decode_lengths_and_batch_agreement():
    model = _model()
    prompt = [1, 5, 9, 2]
    seen: list[int] = []
    out = greedy_decode(model, prompt, 10, on_token=seen.append)
    assert len(out) == 10 and seen == out
    stop = out[3]
    short = greedy_decode(model, prompt, 10, eos_id=stop)
    assert short[-1] == stop and len(short) == out.index(stop) + 1
    batch = greedy_decode_batch(model, torch.tensor([prompt, prompt]), 10)
    assert batch[0].tolist() == out and batch[1].tolist() == out


def test_qkv_rows_are_sliced_per_head_of_q_k_and_v():
    d = SMALL.d_model
    full = torch.arange(3 * d, dtype=torch.float32)[:, None].expand(3 * d, 4)
    r1 = shard_tensor(full, "qkv", rank=1, world_size=2)[:, 0].long().tolist()
    half = d // 2
    assert r1 == list(range(half, d)) + list(range(d + half, 2 * d)) + list(range(2 * d + half, 3 * d))


def test_shard_state_dict_shapes_fit_the_tp_model_and_world_size_one_is_identity():
    model = _model()
    sd = model.state_dict()
    shards = [shard_state_dict(sd, r, 2) for r in range(2)]
    assert shards[0]["blocks.0.attn.qkv.weight"].shape == (3 * SMALL.d_model // 2, SMALL.d_model)
    assert shards[1]["blocks.0.attn.proj.weight"].shape == (SMALL.d_model, SMALL.d_model // 2)
    assert shards[0]["tok_emb.weight"].shape == (SMALL.vocab_size // 2, SMALL.d_model)
    assert torch.equal(shards[1]["blocks.1.attn.proj.bias"], sd["blocks.1.attn.proj.bias"])  # replicated
    tp = MiniGPTTP(SMALL)  # no process group: world size 1
    tp.load_state_dict(shard_state_dict(sd, 0, 1), strict=True)
    idx = torch.randint(0, SMALL.vocab_size, (1, 9))
    with torch.no_grad():
        torch.testing.assert_close(tp(idx), model(idx))


def test_the_tp_build_names_each_collective_for_a_profilers_trace():
    """2L+1 all-reduces (the embedding, each layer's attention output and MLP down projection)
    and the logits gather, each named by its place: what the profiled pass's trace shows."""
    m = MiniGPTTP(GPTConfig(n_layer=2))
    names = [m.tok_emb.label] + [n for b in m.blocks for n in (b.attn.proj.label,
                                                               b.mlp.down.label)]
    assert names == ["embedding all-reduce", "L0 attn-out all-reduce", "L0 mlp-down all-reduce",
                     "L1 attn-out all-reduce", "L1 mlp-down all-reduce"]
    assert m.lm_head.label == "logits all-gather"
