"""The compile-friendly decode step gives the eager model's greedy tokens, with one graph for all positions."""

from __future__ import annotations

import pytest
import torch

from tplab.model.compiled import build_decoder, default_mode
from tplab.model.config import GPTConfig
from tplab.model.decode import greedy_decode
from tplab.model.gpt import MiniGPT

TINY = GPTConfig(vocab_size=48, block_size=24, n_layer=1, n_head=2, d_model=16, d_ff=32)


def _model() -> MiniGPT:
    torch.manual_seed(3)
    model = MiniGPT(TINY).eval()
    with torch.no_grad():  # larger weights than the init so greedy tokens vary along the sequence
        for p in model.parameters():
            p.mul_(8.0)
    return model


def test_eager_static_step_equals_model_decode() -> None:
    model = _model()
    dec = build_decoder(model, compile=False)
    for prompt in ([1, 5, 9, 2], [1, 30, 2], [7]):
        ref = greedy_decode(model, prompt, 12)
        assert len(set(ref)) > 1
        assert dec.decode(prompt, 12) == ref
    # the stop token ends the decode, as in greedy_decode
    ref = greedy_decode(model, [1, 5, 9, 2], 12)
    assert dec.decode([1, 5, 9, 2], 12, eos_id=ref[3]) == ref[: ref.index(ref[3]) + 1]
    with pytest.raises(ValueError, match="block_size"):
        dec.decode([1] * 20, 10)


@pytest.mark.slow  # torch.compile
def test_compiled_step_equals_eager_with_one_graph(monkeypatch) -> None:
    """Compiles through Inductor's shared cache, as any torch.compile does: Inductor checks a
    cached step against the graph, its config and the torch release, and the CPU probes
    (``scripts/setup --tests`` runs them) are built once per machine. Irreducible: Dynamo traces
    the step, and on a cold cache Inductor builds it with the C++ wrapper (~10 s)."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # Inductor's default folder
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a part of Inductor's cache key: one count, whatever ran before
    try:
        _compile_and_decode()
    finally:
        torch.set_num_threads(threads)


def _compile_and_decode() -> None:
    torch._dynamo.reset()
    model = _model()
    dec = build_decoder(model, compile=True)
    # Inductor's default mode on the CPU, with the C++ wrapper for a single-device model
    assert default_mode("cpu") == "default"
    assert dec.mode == "default+cpp_wrapper"
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for prompt in ([1, 5, 9, 2], [1, 30, 2]):
        assert dec.decode(prompt, 15) == greedy_decode(model, prompt, 15)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - before == 1
