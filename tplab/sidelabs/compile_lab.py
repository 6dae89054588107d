"""Lab 03 (torch.compile on MiniGPT-grammar), run for real: torch.compile the lab sheet's ``TinyHead`` and MiniGPT-grammar, dump and read
Inductor's kernels, and time eager against compiled on the hot path.

Run it through ``tplab compile --out DIR`` (which starts ``python -m tplab.sidelabs.compile_lab`` with
the Inductor variables of ``inductor_env`` already set; set after ``import torch`` they are ignored).
Writes ``DIR/compile-results.json``; ``compile_report`` turns it into ``REPORT.md``,
``KERNEL_ANNOTATION.md``, ``DISTRIBUTED.md`` (Part F's survey, from ``distributed_survey``) and
``manifest.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from tplab.sidelabs import (compile_report, compile_stretch, distributed_survey, inductor_dump,
                            inductor_probes)
from tplab.sidelabs.inductor_env import DEBUG_SUBDIR, missing_env
from tplab.sidelabs.pair_timing import Budget
from tplab.model.gpt import MiniGPT

SEED = 42


class TinyHead(nn.Module):
    """The lab sheet's minimal substitute: ``Linear(64, 600) -> softmax``."""

    def __init__(self, d: int = 64, vocab: int = 600) -> None:
        super().__init__()
        self.fc = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(x), dim=-1)


class GraphWatch:
    """Attributes the graph directories Inductor writes to whichever compile produced them."""

    def __init__(self, debug_root: Path) -> None:
        self.root = debug_root
        self.seen: set[Path] = inductor_dump.graph_dirs(debug_root)

    def new(self) -> list[Path]:
        now = inductor_dump.graph_dirs(self.root)
        fresh, self.seen = sorted(now - self.seen), now
        return fresh


def save_kernels(out: Path, part: str, graphs: list[Path]) -> list[dict[str, Any]]:
    """Copy each graph's output_code.py (and its fx graph) to DIR/kernels/<part>/ and cut out every kernel."""
    saved: list[dict[str, Any]] = []
    for g in graphs:
        dest = out / "kernels" / part / g.name
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("output_code.py", "fx_graph_readable.py"):
            if (g / name).exists():
                shutil.copy2(g / name, dest / name)
        for k in inductor_dump.load_kernels(g):
            ext = ".cpp" if k.language == "cpp" else ".py"
            (dest / f"{k.name}{ext}").write_text(k.source)
            saved.append({"part": part, "graph": g.name, "kernel": k.name, "language": k.language,
                          "file": str((dest / f"{k.name}{ext}").relative_to(out)),
                          "aten_ops": inductor_dump.graph_aten_ops(g)})
    return saved


def softmax_analysis(out: Path, graphs: list[Path]) -> dict[str, Any] | None:
    """Find the fused softmax among ``graphs``, save it as DIR/kernels/fused_softmax.<ext>, annotate it."""
    for g in graphs:
        k = inductor_dump.find_fused_softmax(inductor_dump.load_kernels(g))
        if k is None:
            continue
        ext = ".cpp" if k.language == "cpp" else ".py"
        path = out / "kernels" / f"fused_softmax{ext}"
        path.write_text(k.source)
        findings = inductor_dump.anatomy(k)
        return {"kernel": k.name, "language": k.language, "graph": g.name,
                "file": str(path.relative_to(out)), "call_args": k.call_args,
                "buffer_shapes": k.buffer_shapes, "pointers": inductor_dump.pointer_params(k),
                "graph_aten_ops": inductor_dump.graph_aten_ops(g),
                "steps": inductor_dump.softmax_steps_present(findings),
                "findings": [asdict(f) for f in findings]}
    return None


def _sync(device: str) -> Callable[[], None]:
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def _synced(fn: Callable[[], object], sync: Callable[[], None]) -> Callable[[], None]:
    """``fn`` then ``sync``, without autograd: timed later, with every other timing of the lab
    (``Budget.run_pending``), it must run as it was warmed up and compiled."""
    def call() -> None:
        with torch.no_grad():
            fn()
        sync()
    return call


def substitute_part(out: Path, watch: GraphWatch, budget: Budget, device: str) -> dict[str, Any]:
    """Part A-E on the lab sheet's TinyHead: match, kernels, fused softmax, hot-path timing."""
    torch.manual_seed(SEED)
    model = TinyHead().eval()
    x = torch.randn(2, 64)  # drawn on the CPU so the input is the lab sheet's on every device
    model, x = model.to(device), x.to(device)
    compiled = torch.compile(model, mode="default")
    sync = _sync(device)
    with torch.no_grad():
        t0 = time.perf_counter()
        y_c = compiled(x)
        compile_s = time.perf_counter() - t0
        y_e = model(x)
        timing = budget.forwards("TinyHead forward [2,64]",
                                 {"eager": _synced(lambda: model(x), sync),
                                  "compiled": _synced(lambda: compiled(x), sync)})
    graphs = watch.new()
    return {"max_abs_diff": float((y_e - y_c).abs().max()), "compile_s": compile_s,
            "timing": timing,
            "kernels": save_kernels(out, "substitute", graphs),
            "fused_softmax": softmax_analysis(out, graphs)}


def _reference() -> Callable[[], None]:
    """A fixed workload that does not change with tplab: 20 small eager matmul + relu steps on
    [2, 64] x [64, 64], without autograd; its time per call is the machine's speed."""
    g = torch.Generator().manual_seed(SEED)
    x, w = torch.randn(2, 64, generator=g), torch.randn(64, 64, generator=g)

    def call() -> None:
        with torch.no_grad():
            y = x
            for _ in range(20):
                y = torch.relu(y @ w) * 0.1
    return call


def _prompts(ckpt: Any, prompts_path: Path | None, n: int) -> list[list[int]]:
    lines: list[str] = []
    if prompts_path is not None and prompts_path.exists():
        lines = [ln.strip() for ln in prompts_path.read_text().splitlines() if ln.strip()]
    if lines:
        return [ckpt.tokenizer.prompt_ids(ln) for ln in lines[:n]]
    # no prompt file: a fixed, deterministic prompt of in-vocabulary ids
    tok = ckpt.tokenizer
    return [[tok.bos_id] + [(7 * i + 11) % ckpt.config.vocab_size for i in range(8)] + [tok.sep_id]]


def _decode_ms_per_token(decode: Callable[..., list[int]], prompt: list[int], tokens: int) -> float:
    """Median ms between consecutive tokens of one decode (the prefill before the first token excluded)."""
    stamps: list[float] = []
    decode(prompt, tokens, on_token=lambda _t: stamps.append(time.perf_counter()))
    gaps = [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]
    return statistics.median(gaps) if gaps else float("nan")


def model_part(out: Path, watch: GraphWatch, checkpoint: Path, prompts_path: Path | None,
               new_tokens: int, budget: Budget, device: str,
               modes: tuple[str, ...] = ("default",)) -> dict[str, Any]:
    """The stretch goal: the full MiniGPT-grammar forward, and its decode step with a static KV cache."""
    from tplab.model.compiled import build_decoder, warm_up
    from tplab.model.checkpoint import build_single, load_checkpoint
    from tplab.model.decode import greedy_decode

    ckpt = load_checkpoint(checkpoint)
    model = build_single(ckpt, device).eval()
    sync = _sync(device)
    prompts = _prompts(ckpt, prompts_path, 3)
    room = ckpt.config.block_size - max(len(p) for p in prompts) + 1
    new_tokens = max(2, min(new_tokens, room))
    result: dict[str, Any] = {"checkpoint": str(checkpoint), "config": ckpt.config.to_dict(),
                              "params": model.num_params(), "new_tokens": new_tokens}

    # (1) the full forward on one fixed-shape prompt
    idx = torch.tensor([prompts[0]], device=device)
    fwd = torch.compile(model, mode="default")
    with torch.no_grad():
        t0 = time.perf_counter()
        logits_c = fwd(idx)
        result["forward_compile_s"] = time.perf_counter() - t0
        logits_e = model(idx)
        timing = budget.forwards(f"MiniGPT forward [1,{idx.shape[1]}]",
                                 {"eager": _synced(lambda: model(idx), sync),
                                  "compiled": _synced(lambda: fwd(idx), sync)})
    result["forward_max_abs_diff"] = float((logits_e - logits_c).abs().max())
    result["forward_argmax_equal"] = bool(torch.equal(logits_e.argmax(-1), logits_c.argmax(-1)))
    result["forward_timing"] = timing
    graphs = watch.new()
    result["forward_kernels"] = save_kernels(out, "model-forward", graphs)
    result["forward_attention"] = compile_stretch.graphs_attention(graphs)

    # (2) greedy decode: the model's eager KV-cache loop vs the compiled static-cache step
    graphs_before = int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    dec_c = build_decoder(model, compile=True)
    dec_s = build_decoder(model, compile=False)
    result["decode_mode"] = dec_c.mode
    result["decode_compile_s"] = warm_up(dec_c, prompts[0])
    matches = []
    for p in prompts:
        ref = greedy_decode(model, p, new_tokens)
        matches.append(dec_c.decode(p, new_tokens) == ref and dec_s.decode(p, new_tokens) == ref)
    result["decode_tokens_equal"] = all(matches)
    result["decode_prompts_checked"] = len(prompts)
    sides: dict[str, Callable[..., list[int]]] = {
        "eager": lambda p, n, on_token: greedy_decode(model, p, n, on_token=on_token),
        "eager_static": lambda p, n, on_token: dec_s.decode(p, n, on_token=on_token),
        "compiled": lambda p, n, on_token: dec_c.decode(p, n, on_token=on_token),
    }
    def per_token(fn: Callable[..., list[int]]) -> Callable[[], float]:
        return lambda: _decode_ms_per_token(fn, prompts[0], new_tokens)
    # the sides in rotating order each round, so machine load hits all of them alike
    timing = budget.timed(f"MiniGPT greedy decode, {new_tokens} tokens",
                          {k: per_token(fn) for k, fn in sides.items()}, unit="ms/token", calls=1)
    result["decode_timing"] = timing  # filled when the lab's timings run (Budget.run_pending)
    graphs = watch.new()
    result["decode_kernels"] = save_kernels(out, "model-decode-step", graphs)
    result["decode_attention"] = compile_stretch.graphs_attention(graphs)
    # one graph serves every position; more would mean the step recompiled as the position moved
    result["decode_graphs_compiled"] = int(torch._dynamo.utils.counters["stats"]["unique_graphs"]) - graphs_before
    result["stretch"] = stretch_part(out, watch, model, ckpt, idx, prompts[0], budget, device, modes)
    return result


def stretch_part(out: Path, watch: GraphWatch, model: MiniGPT, ckpt: Any, idx: torch.Tensor,
                 prompt: list[int], budget: Budget, device: str,
                 modes: tuple[str, ...]) -> dict[str, Any]:
    """Lab 03's stretch goals (``compile_stretch``), each with the seconds it took."""
    sync, cfg, res = _sync(device), ckpt.config, {}
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    res["export"] = compile_stretch.export_part(model, out, prompt[0])
    seconds["export"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    res["attention"] = compile_stretch.attention_part(cfg.n_head, cfg.head_dim, idx.shape[1],
                                                      budget, device, sync, watch)
    seconds["attention"] = time.perf_counter() - t0
    if "max-autotune" in modes:
        budget.run_pending()  # its Dynamo reset must come after every other timing
        t0 = time.perf_counter()
        res["autotune"] = compile_stretch.autotune_part(model, idx, budget, sync, watch)
        seconds["max-autotune"] = time.perf_counter() - t0
    res["seconds"] = seconds
    return res


def run(out: Path, checkpoint: Path | None, prompts: Path | None, new_tokens: int,
        budget: Budget, threads: int | None, device: str = "cpu",
        survey_checkpoint: Path | None = None, ddp_run: Path | None = None,
        tp_run: Path | None = None, modes: tuple[str, ...] = ("default",),
        against: Path | None = None) -> dict[str, Any]:
    """Run the lab into ``out`` and return the results written to compile-results.json.

    With ``survey_checkpoint`` the results also hold the distributed survey's inputs (the model's
    shapes and the measured runs), from which ``compile_report`` writes DISTRIBUTED.md.
    """
    if threads:
        torch.set_num_threads(threads)
    distributed = (distributed_survey.collect(survey_checkpoint, ddp_run, tp_run)
                   if survey_checkpoint is not None else None)
    watch = GraphWatch(out / DEBUG_SUBDIR)
    results: dict[str, Any] = {
        "lab": "compile", "torch": torch.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "processor": platform.processor() or platform.machine(),
        "device": device if device == "cpu" else f"{device} ({torch.cuda.get_device_name(device)})",
        "threads": torch.get_num_threads(), "started_at": time.time(),
    }
    # before anything compiles: the probes stay in the shared cache, the lab's kernels go to its own
    probes = inductor_probes.run_probes()
    results["inductor_probes"] = probes.to_dict()
    t0 = time.perf_counter()
    sub = substitute_part(out, watch, budget, device)
    results["seconds"] = {"inductor_probes": probes.seconds, "substitute": time.perf_counter() - t0}
    results["substitute"] = sub
    t0 = time.perf_counter()
    results["model"] = (model_part(out, watch, checkpoint, prompts, new_tokens, budget, device,
                                   modes)
                        if checkpoint is not None else None)
    results["seconds"]["model"] = time.perf_counter() - t0
    # the machine's own speed, timed with every other side: a fixed loop of small eager ops
    results["machine"] = budget.forwards("machine reference loop", {"reference": _reference()})
    t0 = time.perf_counter()
    budget.run_pending()
    results["seconds"]["timing"] = time.perf_counter() - t0
    if results["model"]:
        results["model"]["decode_ms_per_token"] = {
            k: f["median"] for k, f in results["model"]["decode_timing"]["figures"].items()}
    results["modes"] = list(modes)
    results["timing_budget"] = asdict(budget)
    results["ratios"] = {k: r.to_dict() for k, r in compile_report.ratios(results).items()}
    if against is not None:
        results["against"] = compile_report.against(against)
    results["distributed"] = distributed
    results["finished_at"] = time.time()
    (out / "compile-results.json").write_text(json.dumps(results, indent=2))
    compile_report.write_all(out, results)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tplab.sidelabs.compile_lab")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--prompts", type=Path, default=None)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--max-rounds", type=int, default=40)
    ap.add_argument("--max-seconds", type=float, default=60.0)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--survey-checkpoint", type=Path, default=None)
    ap.add_argument("--ddp-run", type=Path, default=None)
    ap.add_argument("--tp-run", type=Path, default=None)
    ap.add_argument("--mode", choices=("default", "max-autotune"), default="default")
    ap.add_argument("--against", type=Path, default=None)
    args = ap.parse_args(argv)
    missing = missing_env()
    if missing:
        print(f"compile lab: set {', '.join(missing)} before torch is imported "
              "(run it through `tplab compile`).", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("compile lab: --device cuda was asked for but torch sees no GPU; use --device cpu.", file=sys.stderr)
        return 2
    budget = Budget(args.calls, args.rounds, args.max_rounds, args.max_seconds, deferred=True)
    run(args.out, args.checkpoint, args.prompts, args.new_tokens, budget, args.threads,
        args.device, args.survey_checkpoint, args.ddp_run, args.tp_run,
        ("default",) if args.mode == "default" else ("default", args.mode), args.against)
    return 0


if __name__ == "__main__":
    sys.exit(main())
