"""The lab job's single-GPU path on a real GPU: ms/token eager vs CUDA graphs, side by side.

Why: the lab's rented GPUs can't be reached from tests, and a lent GPU machine has one GPU (so no
NCCL TP there). This runs what the job's rank-0 baseline runs — the shipped checkpoint, the job's
prompts, ``tplab.job.decode_timing`` with CUDA-event clocks, warm-up excluded — in three ways in one
process: the eager KV-cache loop (the job's default), the static-cache step uneager (same math,
no compile), and that step under ``torch.compile(mode="reduce-overhead")`` (CUDA graphs; the job's
``--compile``). It prints per-token mean/p50/p99 and the ratios, and checks that all three decode
the same tokens. It asserts nothing about speed.

    python benchmarks/gpu_single.py [--device cuda] [--prompts 10] [--tokens 100] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _stats(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    pick = lambda q: s[min(len(s) - 1, int(round(q * (len(s) - 1))))]  # noqa: E731
    return {"mean": statistics.fmean(s), "p50": pick(0.5), "p99": pick(0.99), "n": len(s)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import torch

    from tplab.model.compiled import build_decoder, warm_up
    from tplab.job.decode_timing import decode_timed, decode_timed_static
    from tplab.model.checkpoint import build_single, load_checkpoint
    from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS

    device = torch.device(args.device)
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    lines = [ln.strip() for ln in DEFAULT_PROMPTS.read_text().splitlines() if ln.strip()]
    prompts = [ckpt.tokenizer.prompt_ids(p) for p in lines[: args.prompts]]
    model = build_single(ckpt, device).eval()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device {name}, torch {torch.__version__}, {len(prompts)} prompts x {args.tokens} tokens")

    runs: dict[str, list] = {}

    def measure(label: str, fn) -> None:
        for i in range(args.warmup):
            fn(prompts[i % len(prompts)])
        runs[label] = [fn(ids) for ids in prompts]

    measure("eager", lambda ids: decode_timed(model, ids, args.tokens, device))
    static = build_decoder(model, compile=False)
    measure("static-eager", lambda ids: decode_timed_static(static, ids, args.tokens, device))
    t0 = time.perf_counter()
    graphs = build_decoder(model, compile=True)
    compile_s = warm_up(graphs, prompts[0])
    measure(graphs.mode, lambda ids: decode_timed_static(graphs, ids, args.tokens, device))
    print(f"compile + capture {compile_s:.1f} s (mode {graphs.mode}); total {time.perf_counter() - t0:.1f} s")

    ref = [r.tokens for r in runs["eager"]]
    report: dict[str, dict] = {}
    for label, rs in runs.items():
        st = _stats([ms for r in rs for ms in r.decode_ms])
        st["tokens_equal_eager"] = [r.tokens for r in rs] == ref
        report[label] = st
        print(f"{label:16s} ms/token mean {st['mean']:.4f} p50 {st['p50']:.4f} p99 {st['p99']:.4f}"
              f"  same tokens as eager: {st['tokens_equal_eager']}")
    base = report["eager"]["mean"]
    for label, st in report.items():
        if label != "eager":
            print(f"eager / {label}: {base / st['mean']:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"device": name, "torch": torch.__version__,
                                         "compile_s": compile_s, "modes": report}, indent=2))
    return 0 if all(st["tokens_equal_eager"] for st in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
