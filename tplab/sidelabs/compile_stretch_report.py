"""REPORT.md's stretch sections (lab 03's Stretch) and where the lab's time went, from the numbers
``compile_stretch`` measured. No torch: plain data in, markdown lines out.
"""

from __future__ import annotations

from typing import Any

from tplab.sidelabs.inductor_probes import describe
from tplab.sidelabs.pair_timing import Ratio


def _us(x: float) -> str:
    return f"{x / 1000:.3f} ms" if x >= 1000 else f"{x:.1f} µs"


def _spread(timing: dict[str, Any], side: str) -> str:
    """'12.3 µs ±4% (n 9)', flagged when its rounds spread past the limit."""
    f = timing["figures"][side]
    return (f"{_us(f['median'])} ±{f['spread']:.0%} (n {f['n']})"
            + (" **unstable**" if f["unstable"] else ""))


def autotune_lines(a: dict[str, Any] | None, ratios: dict[str, Ratio]) -> list[str]:
    lines = ["", "## Stretch 1. `mode=\"max-autotune\"` vs `mode=\"default\"`", ""]
    if a is None:
        return lines + ["Not run: pass `--mode max-autotune` to compile the MiniGPT forward in both "
                        "modes, side by side."]
    d, m, t = a["default"], a["max-autotune"], a["timing"]
    sp = ratios["MiniGPT forward, default / max-autotune"]
    lines += [f"MiniGPT forward on {a['shape']}, each mode compiled from a reset Dynamo (so each pays "
              "its whole compile), then both timed in rotating rounds until stable (median ± "
              f"spread of the rounds; {t['stopped']}):", "",
              "| mode | compile | run per call | max abs diff vs eager | argmax equal |",
              "|---|---:|---:|---:|---|"]
    for name, r in (("default", d), ("max-autotune", m)):
        lines.append(f"| {name} | {r['compile_s']:.1f} s | {_spread(t, name)} | "
                     f"{r['max_abs_diff']:.2e} | {r['argmax_equal']} |")
    verdict = (("worth it for a long run of this shape." if sp.ci95[0] >= 1.1 else
                "on matrices this small there is little for autotuning to win, so the extra "
                "compile time does not pay back.") if sp.quoted else
               "the run cannot say which runs faster.")
    lines += ["", f"max-autotune cost {m['compile_s'] / max(d['compile_s'], 1e-9):.1f}× the default "
              f"mode's compile time; default / max-autotune per call: {sp.text()}: " + verdict]
    return lines


def export_lines(e: dict[str, Any] | None) -> list[str]:
    lines = ["", "## Stretch 2. `torch.export` of the decode step", ""]
    if e is None:
        return lines + ["Not run (no model)."]
    top = ", ".join(f"`{op}` ×{n}" for op, n in e["top_ops"])
    return lines + [
        f"The static-cache decode step (`tplab/model/compiled.py`, one token at a tensor position) "
        f"exported with `torch.export.export` in {e['export_s']:.1f} s (`torch._dynamo.export`, the "
        f"lab sheet's name, is its deprecated predecessor). Saved as `{e['file']}` ({e['bytes']:,} bytes), "
        f"readable graph in `{e['graph_file']}`.", "",
        f"- **{e['op_count']} ops** (call_function nodes), {e['distinct_ops']} distinct; most used: "
        f"{top}.",
        f"- {e['placeholders']} inputs (parameters, buffers, token, position). The KV cache is "
        + (f"returned as mutated buffers ({', '.join(f'`{b}`' for b in e['mutated_buffers'])})"
           if e["mutated_buffers"] else "written in place inside the graph ("
           + (", ".join(f"`{op}` ×{n}" for op, n in e.get("in_place_ops", {}).items()) or "no in-place op")
           + ")") + ".",
        f"- Loaded back with `torch.export.load`, it gives the eager step's logits: "
        f"{'yes' if e['reloaded_logits_equal'] else 'NO'}."]


def attention_lines(att: dict[str, Any] | None, model: dict[str, Any] | None,
                    ratios: dict[str, Ratio]) -> list[str]:
    lines = ["", "## Stretch 3. Attention kernels vs `scaled_dot_product_attention`", ""]
    if att is None:
        return lines + ["Not run (no model)."]
    fwd = (model or {}).get("forward_attention") or {}
    dec = (model or {}).get("decode_attention") or {}

    def said(g: dict[str, list[str]]) -> str:
        parts = []
        if g.get("extern_attention"):
            parts.append("an extern call to ATen's fused attention "
                         + ", ".join(f"`{x}`" for x in g["extern_attention"]))
        if g.get("softmax_kernels"):
            parts.append("generated softmax kernel(s) " + ", ".join(f"`{x}`" for x in g["softmax_kernels"]))
        return " and ".join(parts) or "no attention-specific kernel (it is split into GEMMs and pointwise kernels)"

    lines += [f"In the full model's Inductor output, attention is: forward: {said(fwd)}; decode "
              f"step: {said(dec)}. MiniGPT calls `F.scaled_dot_product_attention`, so Inductor keeps "
              "ATen's fused kernel where it has one for the device.", "",
              f"The same causal attention on {att['shape']} (the model's heads × the prompt's tokens × "
              "head_dim), written out (matmul, mask, softmax, matmul) and as SDPA, eager and compiled, "
              "timed in rotating rounds until stable (median ± spread of the rounds; "
              f"{att['timing']['stopped']}):", "",
              "| attention | per call | max abs diff vs manual eager | compile | what Inductor made |",
              "|---|---:|---:|---:|---|"]
    t = att["timing"]
    for name in t["figures"]:
        gen = att["generated"].get(name)
        made = said(gen) if gen is not None else "-"
        comp = f"{att['compile_s'][name]:.1f} s" if name in att["compile_s"] else "-"
        lines.append(f"| {name} | {_spread(t, name)} | {att['max_abs_diff'][name]:.1e} | {comp} | "
                     f"{made} |")
    sdpa = ratios["attention, manual eager / SDPA eager"]
    compiled = ratios["attention, manual eager / manual compiled"]
    stable = [k for k, f in t["figures"].items() if not f["unstable"]]
    best = (min(stable, key=lambda k: t["figures"][k]["median"]) if len(stable) == len(t["figures"])
            else None)
    lines += ["", (f"Fastest here: **{best}**" if best else
                   "No fastest is named: some sides were unstable")
              + f"; manual eager / SDPA eager: {sdpa.text()}; manual eager / manual compiled: "
              f"{compiled.text()}. At a few dozen tokens the scores matrix is tiny, so call overhead "
              "decides, not the memory a fused (flash) kernel saves by never writing the scores "
              "out."]
    return lines


def time_lines(r: dict[str, Any]) -> list[str]:
    """Where the lab's wall time went, part by part."""
    sec = dict(r.get("seconds") or {})
    m = r.get("model") or {}
    probes = r.get("inductor_probes") or {}
    how = ("found in the shared cache" if probes.get("reused") else
           "built now" if probes.get("built") else "not run apart")
    parts = [(f"Inductor's CPU feature probes ({how})", sec.get("inductor_probes")),
             ("substitute (TinyHead compile + timing)", sec.get("substitute"))]
    if m:
        st = (m.get("stretch") or {}).get("seconds") or {}
        parts += [("MiniGPT forward compile", m.get("forward_compile_s")),
                  ("MiniGPT decode-step compile", m.get("decode_compile_s")),
                  ("export", st.get("export")), ("attention comparison", st.get("attention")),
                  ("max-autotune side by side", st.get("max-autotune")),
                  ("the side-by-side timings, every side of every part together",
                   sec.get("timing")),
                  ("MiniGPT part in all (compiles, checks, timing rounds)", sec.get("model"))]
    total = r["finished_at"] - r["started_at"]
    lines = ["", "## Where the time goes", "", "| part | seconds |", "|---|---:|"]
    lines += [f"| {name} | {s:.1f} |" for name, s in parts if s is not None]
    lines += [f"| the whole lab in the child interpreter | {total:.1f} |", "",
              "Compiles dominate: each `torch.compile` traces, lowers and builds C++ with the system "
              "compiler. `--rounds` and `--calls` set the timing part; `--substitute-only` skips the "
              "model.", "", describe(r.get("inductor_probes"))]
    return lines


def stretch_manifest(m: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stretch goals' headline figures for manifest.json."""
    st = (m or {}).get("stretch")
    if not st:
        return None
    a, e, att = st.get("autotune"), st["export"], st["attention"]
    return {
        "export_op_count": e["op_count"], "export_file": e["file"],
        "export_reloaded_equal": e["reloaded_logits_equal"],
        "attention_us": {k: v["median"] for k, v in att["timing"]["figures"].items()},
        "autotune": None if a is None else {
            mode: {"compile_s": a[mode]["compile_s"],
                   "run_us": a["timing"]["figures"][mode]["median"]}
            for mode in ("default", "max-autotune")},
    }
