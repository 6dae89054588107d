"""The compile lab's stretch goals on tiny shapes: the attention reader tells a fused-attention
extern call from a generated softmax kernel, torch.export of the decode step saves a program that
gives the eager step's logits when loaded back, the side-by-side timer keeps every round, and the
report says what was measured (or how to run what was not)."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.sidelabs.test_compile_lab import TRITON_OUTPUT
from tplab.sidelabs import compile_stretch as cs
from tplab.sidelabs import compile_stretch_report as report
from tplab.sidelabs.pair_timing import SideBySide
from tplab.model.config import GPTConfig
from tplab.model.gpt import MiniGPT

SDPA_CALL = ("        buf5 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default("
             "buf2, buf3, buf4, causal=True)\n")


def test_the_reader_tells_extern_attention_from_a_generated_softmax() -> None:
    softmax = cs.attention_in_code(TRITON_OUTPUT)
    assert softmax["extern_attention"] == []
    assert softmax["softmax_kernels"] == ["triton_per_fused__softmax_exp_prepare_softmax_online_sub_0"]
    fused = cs.attention_in_code(SDPA_CALL)
    assert fused == {"extern_attention": ["_scaled_dot_product_flash_attention_for_cpu"],
                     "softmax_kernels": [], "kernels": []}


def test_export_of_a_tiny_decode_step_round_trips(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MiniGPT(GPTConfig(vocab_size=32, block_size=8, n_layer=1, n_head=2, d_model=8,
                              d_ff=16)).eval()
    e = cs.export_part(model, tmp_path, token_id=3)
    assert (tmp_path / e["file"]).stat().st_size == e["bytes"] > 0
    graph = (tmp_path / e["graph_file"]).read_text()
    assert e["op_count"] > 10 and e["op_count"] >= e["distinct_ops"] > 1
    assert sum(n for _op, n in e["top_ops"]) <= e["op_count"]
    assert "aten.linear" in graph and e["reloaded_logits_equal"] is True
    # the KV cache write is in the program: as a mutated buffer or an in-place op
    assert e["mutated_buffers"] or any("index_copy_" in op for op in e["in_place_ops"])


def test_the_report_sections_say_what_ran() -> None:
    assert "pass `--mode max-autotune`" in "\n".join(report.autotune_lines(None, {}))
    timing = SideBySide("MiniGPT forward", "µs", {"default": [200.0, 201.0, 199.0, 200.0, 202.0],
                                                  "max-autotune": [100.0, 100.5, 99.5, 100.0, 101.0]},
                        5, 1.0, "stable within 15% after 5 rounds", 50)
    a = {"shape": [1, 6], "timing": timing.to_dict(),
         "default": {"compile_s": 4.0, "max_abs_diff": 1e-6, "argmax_equal": True, "graphs": []},
         "max-autotune": {"compile_s": 30.0, "max_abs_diff": 1e-6, "argmax_equal": True,
                          "graphs": []}}
    ratios = {"MiniGPT forward, default / max-autotune": timing.ratio("default", "max-autotune")}
    text = "\n".join(report.autotune_lines(a, ratios))
    assert "| default | 4.0 s | 200.0 µs ±0% (n 5)" in text
    assert "| max-autotune | 30.0 s | 100.0 µs" in text and "7.5×" in text and "2.00× [" in text
    r = {"started_at": 0.0, "finished_at": 50.0, "seconds": {"substitute": 10.0, "model": 38.0},
         "model": {"forward_compile_s": 5.0, "decode_compile_s": 9.0,
                   "stretch": {"seconds": {"export": 2.0, "attention": 6.0}}}}
    times = "\n".join(report.time_lines(r))
    for row in ("| MiniGPT decode-step compile | 9.0 |", "| export | 2.0 |",
                "| the whole lab in the child interpreter | 50.0 |"):
        assert row in times
    assert "max-autotune side by side" not in times  # it did not run
