"""Turn the compile lab's results into REPORT.md, KERNEL_ANNOTATION.md, DISTRIBUTED.md and manifest.json.

Kept apart from the lab so the words are built from the measured numbers and the kernel's own lines
(every sentence that states a finding is chosen by a test on the data), and so it needs no torch.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from tplab.sidelabs import compile_stretch_report as stretch
from tplab.sidelabs import distributed_survey
from tplab.sidelabs.distributed_costs import choose
from tplab.sidelabs.model_shapes import ModelShapes
from tplab.sidelabs.pair_timing import Ratio, SideBySide, agreement, machine_moved

MATCH_BAR = 1e-6
DECODE_GOAL = 2.0
ROLE_NOTES = {
    "max reduction": "running maximum of the row (softmax step 1, a reduction)",
    "subtract max": "x - max, for numerical stability (step 2)",
    "exp": "exp(x - max) (step 3)",
    "sum reduction": "running sum of the exponentials (step 4, a reduction)",
    "divide": "exp / sum (step 5)",
    "load": "read",
    "store": "write",
    "per-thread scratch": "a small per-thread buffer (one row), not a tensor between kernels",
    "parallel loop": "rows are split across threads / program instances",
}


def _fmt_us(us: float) -> str:
    return f"{us / 1000:.3f} ms" if us >= 1000 else f"{us:.1f} µs"


#: every ratio the lab reports: (name, where its timing is, side a, side b); a / b
RATIOS = (
    ("TinyHead forward, eager / compiled", ("substitute", "timing"), "eager", "compiled"),
    ("MiniGPT forward, eager / compiled", ("model", "forward_timing"), "eager", "compiled"),
    ("decode, eager KV-cache loop / compiled static step", ("model", "decode_timing"), "eager",
     "compiled"),
    ("decode, eager static step / compiled static step", ("model", "decode_timing"),
     "eager_static", "compiled"),
    ("attention, manual eager / SDPA eager", ("model", "stretch", "attention", "timing"),
     "manual eager", "sdpa eager"),
    ("attention, manual eager / manual compiled", ("model", "stretch", "attention", "timing"),
     "manual eager", "manual compiled"),
    ("attention, SDPA eager / SDPA compiled", ("model", "stretch", "attention", "timing"),
     "sdpa eager", "sdpa compiled"),
    ("MiniGPT forward, default / max-autotune", ("model", "stretch", "autotune", "timing"),
     "default", "max-autotune"),
)


def timing_at(r: dict[str, Any], where: tuple[str, ...]) -> SideBySide | None:
    """The side-by-side timing stored at ``where`` in compile-results.json, or None."""
    node: Any = r
    for k in where:
        node = node.get(k) if isinstance(node, dict) else None
    return SideBySide.from_dict(node) if isinstance(node, dict) and "samples" in node else None


def ratios(r: dict[str, Any]) -> dict[str, Ratio]:
    """Every ratio the run measured (``RATIOS``), each from its rounds (``SideBySide.ratio``)."""
    out = {}
    for name, where, a, b in RATIOS:
        t = timing_at(r, where)
        if t is not None and a in t.samples and b in t.samples:
            out[name] = t.ratio(a, b)
    return out


def against(path: Path) -> dict[str, Any]:
    """An earlier run's ratios (its DIR or its compile-results.json), to set beside this run's."""
    f = path / "compile-results.json" if path.is_dir() else path
    other = json.loads(f.read_text(encoding="utf-8"))
    return {"path": str(path), "ratios": {k: v.to_dict() for k, v in ratios(other).items()},
            "machine_us": machine_us(other)}


def machine_us(r: dict[str, Any]) -> float | None:
    """The run's reference loop, median µs per call (``compile_lab``'s ``machine``), or None."""
    t = timing_at(r, ("machine",))
    return t.median("reference") if t is not None and "reference" in t.samples else None


def agreement_lines(r: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Each ratio beside the same ratio of another run (``against``): agree (their 95 %
    intervals overlap), flagged (either was unstable, so not quoted) or DISAGREE."""
    mine = ratios(r)
    theirs = {k: Ratio.from_dict(v) for k, v in other["ratios"].items()}
    other_path = other["path"]
    here, there = machine_us(r), other.get("machine_us")
    moved = machine_moved(here, there)
    lines = ["", "## Against an earlier run", "",
             f"Each ratio beside the same ratio of `{other_path}`: *agree* when their 95 % "
             "intervals overlap, *flagged* when either was unstable (and so not quoted) or when "
             "they differ while the machine's own reference loop moved more than 15 % between "
             "the runs, *DISAGREE* otherwise. The reference loop: "
             + (f"{here:.1f} µs per call here, {there:.1f} µs there" if here and there
                else "not in both runs") + ".", "",
             "| ratio | this run | that run | |", "|---|---|---|---|"]
    for name, ratio in mine.items():
        if name in theirs:
            lines.append(f"| {name} | {ratio.text()} | {theirs[name].text()} | "
                         f"{agreement(ratio, theirs[name], moved)} |")
    return lines


def _fig(t: SideBySide, side: str) -> str:
    """'1.234 ms ±4% (n 12)' with the flag when unstable."""
    f = t.figures[side]
    v = f["median"]
    val = _fmt_us(v) if t.unit == "µs" else f"{v:.3f} {t.unit.split('/')[0]}"
    return (f"{val} ±{f['spread']:.0%} (n {f['n']})" + (" **unstable**" if f["unstable"] else ""))


def _reading(speedup: float) -> str:
    if speedup >= 1.5:
        return "compiled is clearly faster"
    if speedup >= 1.05:
        return "compiled is somewhat faster"
    if speedup > 0.95:
        return "no measurable difference"
    return "compiled is slower (its per-call overhead outweighs what fusion saves at this size)"


def annotation(fs: dict[str, Any]) -> str:
    """KERNEL_ANNOTATION.md: a walk through the fused softmax kernel, from its own lines."""
    lines = [f"# Fused softmax kernel: `{fs['kernel']}`", "",
             f"File: `{fs['file']}` ({fs['language']}, from graph `{fs['graph']}`). Line numbers below "
             "are lines of that file. This walk-through was derived from the kernel text by "
             "`tplab.sidelabs.inductor_dump`, so it describes the kernel generated on this machine.", ""]
    ops = fs.get("graph_aten_ops") or []
    if ops:
        lines += ["## Which aten ops were fused", "",
                  f"The compiled graph's aten ops, in order: `{', '.join(ops)}`. "
                  "The matrix multiply (`addmm`) stays an external GEMM call; the softmax decomposes into "
                  "`amax, sub, exp, sum, div`, and this one kernel performs all five:", ""]
    for step, ok in fs["steps"].items():
        lines.append(f"- {step}: {'yes' if ok else 'NOT FOUND'}")
    lines += ["", "## Where it reads and writes", ""]
    ptrs = fs.get("pointers", {"in": [], "out": [], "in_out": []})
    lines.append(f"Pointer parameters: read {ptrs['in'] or 'none'}, written {ptrs['out'] or 'none'}, "
                 f"read and overwritten in place {ptrs['in_out'] or 'none'}. The index expressions in the "
                 "loads and stores below (row index times the row length, plus the column) say where.")
    shapes = fs.get("buffer_shapes", {})
    for i, arg in enumerate(fs.get("call_args", [])):
        lines.append(f"- call argument {i}: `{arg}`, allocated with shape {shapes.get(arg, '(not found in the wrapper)')}")
    lines += ["", "## Line by line", "", "| line | role | code |", "|---|---|---|"]
    for f in fs["findings"]:
        code = f["code"].replace("|", "\\|")
        if len(code) > 110:
            code = code[:107] + "..."
        lines.append(f"| {f['line']} | {ROLE_NOTES.get(f['role'], f['role'])} | `{code}` |")
    lines += ["", "## Reductions", ""]
    if fs["language"] == "cpp":
        lines.append("Both reductions are loops over the row that carry an accumulator (`tmp_acc*`): a "
                     "vectorised one (`Vectorized<float>`, several lanes at a time) folded into a scalar "
                     "at the end with `vec_reduce_all`. The max starts from -inf, the sum from 0.")
    else:
        lines.append("Each row is loaded into a block and reduced with `tl.max` / `tl.sum` inside one "
                     "program instance (a persistent reduction when the row fits in one block).")
    lines += ["", "## What is not there", ""]
    args = fs.get("call_args", [])
    full = [a for a in args if a in shapes and not shapes[a].rstrip(")").endswith(", 1")]
    stats = [a for a in args if a in shapes and shapes[a].rstrip(")").endswith(", 1")]
    known = bool(args) and all(a in shapes for a in args)
    n_full = len(full) if known else len(ptrs["in"]) + len(ptrs["out"]) + len(ptrs["in_out"])
    needed = 1 if ptrs["in_out"] else 2  # the logits it reads and the probabilities it writes
    if known:
        lines.append(f"The wrapper passes {len(full)} full-size buffer(s) ({', '.join(full) or 'none'}) and "
                     f"{len(stats)} per-row statistic(s) ({', '.join(stats) or 'none'}).")
    if n_full <= needed:
        lines.append("There is no full-size buffer for `exp(x - max)`: the exponentials never leave the kernel"
                     + (" (they sit in a one-row per-thread scratch buffer)" if any(
                         f["role"] == "per-thread scratch" for f in fs["findings"]) else
                        " (they are recomputed or kept in registers between the reductions)")
                     + ". That is the fusion's win: eager PyTorch's softmax is one kernel too, but around "
                     "it Inductor folds neighbouring elementwise work into the same pass instead of "
                     "writing and re-reading a tensor between kernels.")
    else:
        lines.append(f"The kernel has {n_full} possibly full-size tensor arguments, more than the {needed} "
                     "its input and output need, so an intermediate may be written to memory; check the "
                     "stores above.")
    return "\n".join(lines) + "\n"


def report(out: Path, r: dict[str, Any]) -> str:
    """REPORT.md: match, kernel pointer, timings with a reading."""
    s = r["substitute"]
    ok = s["max_abs_diff"] < MATCH_BAR
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(r["started_at"]))
    lines = ["# torch.compile lab (lab 03)", "",
             f"{when}; torch {r['torch']}, Python {r['python']}, {r['device']} ({r['processor']}), "
             f"{r['threads']} thread(s). Inductor's output is under `kernels/`; its full debug tree under "
             "`inductor-debug/`; the compile log (`TORCH_LOGS=output_code`) in `inductor.log`.", "",
             "## A. Compile match", "",
             f"- TinyHead (`Linear(64, 600) -> softmax`, input [2, 64], seed {42}): "
             f"max |eager - compiled| = {s['max_abs_diff']:.3e} — "
             f"{'within' if ok else 'OUTSIDE'} the lab sheet's bar of 1e-6."]
    m = r.get("model")
    if m:
        lines.append(f"- MiniGPT-grammar forward ({m['params']:,} parameters, logits of one prompt): "
                     f"max |eager - compiled| = {m['forward_max_abs_diff']:.3e}; argmax at every position "
                     f"{'equal' if m['forward_argmax_equal'] else 'DIFFERENT'}. Not held to 1e-6: Inductor "
                     "fuses LayerNorm/GELU and may sum in a different order, so logits can differ in the "
                     "last float bits.")
        lines.append(f"- Greedy decode, compiled static-cache step vs the model's eager loop: tokens "
                     f"{'identical' if m['decode_tokens_equal'] else 'DIFFERENT'} on "
                     f"{m['decode_prompts_checked']} prompt(s) × {m['new_tokens']} tokens.")
    else:
        lines.append("- MiniGPT-grammar: not run (no checkpoint given).")
    fs = s.get("fused_softmax")
    lines += ["", "## B–D. Kernel dump", ""]
    if fs:
        lines.append(f"Fused softmax kernel: `{fs['kernel']}` saved as `{fs['file']}`; walk-through in "
                     "`KERNEL_ANNOTATION.md`. Steps found in it: "
                     + ", ".join(k for k, v in fs["steps"].items() if v) + ".")
    else:
        lines.append("No fused softmax kernel was found in the substitute's generated code.")
    n_k: dict[str, int] = {}
    for part_kernels in [s["kernels"]] + ([m["forward_kernels"], m["decode_kernels"]] if m else []):
        for k in part_kernels:
            n_k[k["part"]] = n_k.get(k["part"], 0) + 1
    lines.append("Kernels generated: " + ", ".join(f"{p}: {n}" for p, n in n_k.items()) + ".")
    lines += ["", "## E. Timings (hot path only)", "",
              "Each side was warmed up (the first call compiles), then timed with fixed shapes in "
              "rounds that visit every side of every timing of this report in a rotating order "
              "(so each ratio's rounds span the whole timing, with the machine's slower "
              "moves in them), until every side's spread (IQR / "
              "median of its rounds) is within 15 % or the rounds run out; each figure is the "
              "median of its rounds ± that spread, with n rounds. A ratio is the median of the "
              "per-round ratios with its 95 % interval, quoted only when both sides are stable: "
              "absolute times move with machine load, the ratio of moments apart does not.", "",
              "| what | eager | compiled | eager / compiled [95 %] | rounds | reading |",
              "|---|---|---|---|---|---|"]
    rows = [(("substitute", "timing"), "eager", "compiled")]
    if m:
        rows += [(("model", "forward_timing"), "eager", "compiled"),
                 (("model", "decode_timing"), "eager", "compiled"),
                 (("model", "decode_timing"), "eager_static", "compiled")]
    for where, a, b in rows:
        t = timing_at(r, where)
        if t is None:
            continue
        ratio = t.ratio(a, b)
        what = t.name + (" (the model's eager KV-cache loop)" if a == "eager" and "decode" in t.name
                         else " (the same static step, eager)" if a == "eager_static" else "")
        lines.append(f"| {what} | {_fig(t, a)} | {_fig(t, b)} | {ratio.text()} | {t.rounds}: "
                     f"{t.stopped} | {_reading(ratio.value) if ratio.quoted else '-'} |")
    machine = timing_at(r, ("machine",))
    if machine is not None:
        lines += ["", f"The machine's own speed, timed in the same rounds (a fixed loop of 20 small "
                  f"eager matmul + relu steps): {_fig(machine, 'reference')} per call; "
                  + ("steady." if machine.stable else "it moved during the timing, so the "
                     "figures above could not be steadier.")]
    if m:
        sp = ratios(r).get("decode, eager KV-cache loop / compiled static step")
        met = ("met" if sp.quoted and sp.ci95[0] >= DECODE_GOAL else
               "NOT met" if sp.quoted else "not judged (unstable)") if sp else "not measured"
        lines += ["", f"Decode goal (≥ {DECODE_GOAL:.0f}× faster compiled than the eager loop, "
                  f"the whole interval above it): {met}"
                  + (f" ({sp.text()})" if sp else "") + f". Compile of the decode step took "
                  f"{m['decode_compile_s']:.1f} s; it compiled {m['decode_graphs_compiled']} "
                  "graph(s) for all positions (the position is a tensor, so moving it does not "
                  "recompile).", "",
                  "Reading: a decode step of this model is ~100 tiny ops on [1, 1, 64] tensors, so eager "
                  "time is Python and dispatcher overhead, not arithmetic; the compiled step runs one "
                  "generated wrapper with fused elementwise kernels and direct GEMM calls. The TinyHead "
                  "forward is a single GEMM plus a softmax, so there is little overhead for compile to "
                  "remove and the compiled call's own guards and wrapper can cost as much as they save."]
    st = (m or {}).get("stretch") or {}
    lines += stretch.autotune_lines(st.get("autotune"), ratios(r))
    lines += stretch.export_lines(st.get("export"))
    lines += stretch.attention_lines(st.get("attention"), m, ratios(r)) + stretch.time_lines(r)
    if r.get("against"):
        lines += agreement_lines(r, r["against"])
    lines += ["", "## F. Distributed survey", ""]
    d = r.get("distributed")
    if d:
        measured = _measured(d)
        lines.append(f"[`{distributed_survey.FILE}`]({distributed_survey.FILE}): DDP, FSDP, tensor parallel and "
                     "pipeline parallel, each with what it would communicate for this checkpoint "
                     f"({d['model']['checkpoint']}), and the pick for MiniGPT-grammar: "
                     f"**{_pick(d)}**. Measured runs quoted: {', '.join(measured) or 'none'}.")
    else:
        lines.append(f"`{distributed_survey.FILE}` was not written: it needs the model's checkpoint, and none "
                     "was found (pass --checkpoint PATH).")
    lines += ["", "## Files", "", "- `compile-results.json` — every number above, unrounded",
              "- `kernels/` — each graph's `output_code.py`, `fx_graph_readable.py` and its kernels cut out",
              "- `KERNEL_ANNOTATION.md`, " + (f"`{distributed_survey.FILE}` (about a page) and "
                                              f"`{distributed_survey.DETAIL_FILE}` (its figures "
                                              "worked out), " if d else "") + "`manifest.json`"]
    return "\n".join(lines) + "\n"


def _measured(d: dict[str, Any]) -> list[str]:
    return [f"{k.replace('_run', '')} ({d[k]['path']})" for k in ("ddp_run", "tp_run") if d.get(k)]


def _pick(d: dict[str, Any]) -> str:
    return choose(ModelShapes.from_json(d["model"]))


def _agreements(r: dict[str, Any]) -> dict[str, Any] | None:
    """Each ratio's agreement with the earlier run given (``--against``), or None."""
    if not r.get("against"):
        return None
    theirs = {k: Ratio.from_dict(v) for k, v in r["against"]["ratios"].items()}
    moved = machine_moved(machine_us(r), r["against"].get("machine_us"))
    return {"path": r["against"]["path"], "machine_moved": moved,
            "ratios": {k: agreement(v, theirs[k], moved) for k, v in ratios(r).items()
                       if k in theirs}}


def _quoted(r: dict[str, Any], name: str) -> float | None:
    """A ratio's value when it is quoted (its sides stable), else None."""
    ratio = ratios(r).get(name)
    return ratio.value if ratio is not None and ratio.quoted else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(out: Path, r: dict[str, Any]) -> dict[str, Any]:
    """manifest.json: what ran, the headline figures and a hash of every file the lab kept."""
    s, m = r["substitute"], r.get("model")
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name not in ("manifest.json", "inductor.log")
                   and not any(part in ("inductor-debug", "inductor-cache") for part in p.relative_to(out).parts))
    passed = s["max_abs_diff"] < MATCH_BAR and s.get("fused_softmax") is not None
    if m:
        passed = passed and m["decode_tokens_equal"]
    return {
        "lab": "compile", "lab_sheet": "003", "status": "COMPLETE" if passed else "FAILED",
        "started_at": r["started_at"], "finished_at": r["finished_at"],
        "torch": r["torch"], "python": r["python"], "device": r["device"], "threads": r["threads"],
        "inductor_env": ["TORCH_LOGS=output_code", "TORCH_COMPILE_DEBUG=1", "TORCH_COMPILE_DEBUG_DIR",
                         "TORCHINDUCTOR_CACHE_DIR"],
        "substitute_max_abs_diff": s["max_abs_diff"], "match_bar": MATCH_BAR,
        "fused_softmax_kernel": (s.get("fused_softmax") or {}).get("file"),
        "substitute_speedup": _quoted(r, "TinyHead forward, eager / compiled"),
        "model_forward_max_abs_diff": m["forward_max_abs_diff"] if m else None,
        "decode_tokens_equal": m["decode_tokens_equal"] if m else None,
        "decode_ms_per_token": m["decode_ms_per_token"] if m else None,
        "decode_speedup_vs_eager": _quoted(r, "decode, eager KV-cache loop / compiled static step"),
        # every ratio with its interval, or why it is not quoted
        "ratios": {k: {"value": v.value if v.quoted else None, "ci95": list(v.ci95) if v.quoted
                       else None, "quoted": v.quoted, "text": v.text()}
                   for k, v in ratios(r).items()},
        "against": _agreements(r),
        "machine_reference_us": machine_us(r),
        "timings_stable": all(t.stable for t in (timing_at(r, w) for _, w, _, _ in RATIOS)
                              if t is not None),
        "stretch": stretch.stretch_manifest(m),
        # the probes may come from Inductor's shared cache; the lab's kernels never do
        "inductor_probes": r.get("inductor_probes"),
        "distributed_survey": distributed_survey.FILE if r.get("distributed") else None,
        "distributed_pick": _pick(r["distributed"]) if r.get("distributed") else None,
        "distributed_measured": [k.replace("_run", "") for k in ("ddp_run", "tp_run")
                                 if (r.get("distributed") or {}).get(k)],
        "files": {str(p.relative_to(out)): _sha256(p) for p in files},
    }


def write_all(out: Path, r: dict[str, Any]) -> None:
    """Write KERNEL_ANNOTATION.md (if a softmax kernel was found), DISTRIBUTED.md (if the results
    hold the survey's inputs), REPORT.md and manifest.json (last, so it hashes the others)."""
    fs = r["substitute"].get("fused_softmax")
    if fs:
        (out / "KERNEL_ANNOTATION.md").write_text(annotation(fs))
    if r.get("distributed"):
        (out / distributed_survey.FILE).write_text(distributed_survey.render(r["distributed"]))
        (out / distributed_survey.DETAIL_FILE).write_text(
            distributed_survey.render_detail(r["distributed"]))
    (out / "REPORT.md").write_text(report(out, r))
    (out / "manifest.json").write_text(json.dumps(manifest(out, r), indent=2))
