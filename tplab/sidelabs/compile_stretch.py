"""Lab 03's stretch goals, measured: max-autotune vs default, torch.export of the decode step, and
the attention kernels Inductor makes next to scaled_dot_product_attention.

Why a module apart from ``compile_lab``: these are optional parts (the report says so when they did
not run) with their own costs; the lab calls them on the model it has already loaded.

* ``autotune_part``: the MiniGPT forward compiled with ``mode="default"`` and with
  ``mode="max-autotune"`` from a reset Dynamo (so each pays its whole compile), the compile time of
  each, then both timed side by side on the hot path (``pair_timing``: until stable, or said not).
* ``export_part``: ``torch.export.export`` of the static-cache decode step (the successor of the
  lab sheet's ``torch._dynamo.export``): the program saved as ``export/decode_step.pt2`` with its
  readable graph, its op count, and a check that the saved program, loaded back, gives the eager
  step's logits.
* ``attention_part``: causal attention at the model's own shapes written out by hand (matmul, mask,
  softmax, matmul) and as ``F.scaled_dot_product_attention``, each eager and compiled, timed in
  rotating rounds until stable (``pair_timing``); what Inductor generated for each compiled side (fused kernels or an extern
  call to ATen's fused CPU/flash attention) is read from its output code.

Runs in the compile lab's child interpreter (torch imported there).
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

from tplab.sidelabs.inductor_dump import extract_kernels
from tplab.sidelabs.pair_timing import Budget
from tplab.model.gpt import MiniGPT

#: extern calls in Inductor's output code that are a fused attention (ATen's SDPA kernels)
_EXTERN_ATTENTION = re.compile(r"(?:aten|torch\.ops\.aten)\.(_?scaled_dot_product\w*|_flash_attention\w*|"
                               r"_efficient_attention\w*)")


def attention_in_code(code: str) -> dict[str, list[str]]:
    """What a graph's output code does for attention: extern fused-attention calls, and the
    generated kernels whose names show a softmax (amax, exp, sum fused into one pass)."""
    extern = sorted(set(_EXTERN_ATTENTION.findall(code)))
    kernels = [k.name for k in extract_kernels(code)]
    softmax = [k for k in kernels if re.search(r"softmax|amax|_exp", k)]
    return {"extern_attention": extern, "softmax_kernels": softmax, "kernels": kernels}


def graphs_attention(graphs: list[Path]) -> dict[str, list[str]]:
    """``attention_in_code`` over every graph directory's output_code.py, merged."""
    merged: dict[str, list[str]] = {"extern_attention": [], "softmax_kernels": [], "kernels": []}
    for g in graphs:
        path = g / "output_code.py"
        if path.exists():
            for k, v in attention_in_code(path.read_text(errors="replace")).items():
                merged[k] += [x for x in v if x not in merged[k]]
    return merged


# ------------------------------------------------------------------ max-autotune vs default
def autotune_part(model: torch.nn.Module, idx: torch.Tensor, budget: Budget,
                  sync: Callable[[], None], watch: Any) -> dict[str, Any]:
    """Compile the forward in each mode from a reset Dynamo; compile seconds, then both timed."""
    out: dict[str, Any] = {"shape": list(idx.shape)}
    compiled: dict[str, Callable[[], object]] = {}
    with torch.no_grad():
        ref = model(idx)
        for mode in ("default", "max-autotune"):
            torch._dynamo.reset()
            fn = torch.compile(model, mode=mode)
            t0 = time.perf_counter()
            y = fn(idx)
            sync()
            out[mode] = {"compile_s": time.perf_counter() - t0,
                         "max_abs_diff": float((y - ref).abs().max()),
                         "argmax_equal": bool(torch.equal(y.argmax(-1), ref.argmax(-1))),
                         "graphs": [g.name for g in watch.new()]}

            def call(fn: Callable[..., torch.Tensor] = fn) -> None:
                with torch.no_grad():
                    fn(idx)
                sync()
            compiled[mode] = call
        out["timing"] = budget.forwards(f"MiniGPT forward {list(idx.shape)}, by compile mode",
                                        compiled)
    return out


# ------------------------------------------------------------------ torch.export of the decode step
def export_part(model: MiniGPT, out_dir: Path, token_id: int) -> dict[str, Any]:
    """Export the static-cache decode step, save it, count its ops, load it back and check it."""
    from tplab.model.compiled import StaticDecodeStep

    dest = out_dir / "export"
    dest.mkdir(parents=True, exist_ok=True)
    device = next(model.parameters()).device
    token = torch.tensor([[token_id]], device=device)
    pos = torch.tensor(0, device=device)
    t0 = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(StaticDecodeStep(model), (token, pos))
    export_s = time.perf_counter() - t0
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    ops = Counter(str(n.target) for n in calls)
    in_place = {op: n for op, n in ops.items() if op.count(".") == 2 and op.split(".")[1].endswith("_")}
    torch.export.save(ep, dest / "decode_step.pt2")
    (dest / "decode_step_graph.txt").write_text(
        ep.graph_module.print_readable(print_output=False) + "\n")
    loaded = torch.export.load(dest / "decode_step.pt2").module()
    with torch.no_grad():
        want = StaticDecodeStep(model)(token, pos)
        got = loaded(token, pos)
    return {"export_s": export_s, "file": "export/decode_step.pt2",
            "graph_file": "export/decode_step_graph.txt", "op_count": len(calls),
            "distinct_ops": len(ops), "top_ops": ops.most_common(8),
            "placeholders": sum(1 for n in ep.graph.nodes if n.op == "placeholder"),
            "mutated_buffers": sorted(ep.graph_signature.buffers_to_mutate.values()),
            "in_place_ops": in_place,
            "reloaded_logits_equal": bool(torch.allclose(want, got, atol=1e-6, rtol=0)),
            "bytes": (dest / "decode_step.pt2").stat().st_size}


# ------------------------------------------------------------------ attention kernels
def manual_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention written out: scores, mask, softmax, weighted sum."""
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attention_part(n_head: int, head_dim: int, tokens: int, budget: Budget,
                   device: str, sync: Callable[[], None], watch: Any) -> dict[str, Any]:
    """The four attentions at [1, n_head, tokens, head_dim], checked equal, timed side by side,
    and what Inductor generated for each compiled one."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, n_head, tokens, head_dim, device=device) for _ in range(3))
    out: dict[str, Any] = {"shape": [1, n_head, tokens, head_dim]}
    fns: dict[str, Callable[..., torch.Tensor]] = {"manual eager": manual_attention,
                                                   "sdpa eager": sdpa_attention}
    compile_s: dict[str, float] = {}
    generated: dict[str, dict[str, list[str]]] = {}
    with torch.no_grad():
        ref = manual_attention(q, k, v)
        for name, base in (("manual compiled", manual_attention), ("sdpa compiled", sdpa_attention)):
            fn = torch.compile(base)
            t0 = time.perf_counter()
            fn(q, k, v)
            sync()
            compile_s[name] = time.perf_counter() - t0
            generated[name] = graphs_attention(watch.new())
            fns[name] = fn
        out["max_abs_diff"] = {n: float((f(q, k, v) - ref).abs().max()) for n, f in fns.items()}

        def timed(f: Callable[..., torch.Tensor]) -> Callable[[], None]:
            def call() -> None:
                with torch.no_grad():
                    f(q, k, v)
                sync()
            return call
        out["timing"] = budget.forwards(f"causal attention {out['shape']}",
                                        {n: timed(f) for n, f in fns.items()},
                                        calls=max(1, budget.calls // 4))
    out["compile_s"] = compile_s
    out["generated"] = generated
    return out
