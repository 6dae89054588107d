"""Decode ms/token: the model's eager KV-cache loop vs the compiled static-cache step, side by side.

Why: issue 7's bar is "compiled decode ≥ 2× faster than eager on this CPU" (and, on a GPU, the same
with CUDA graphs, ``mode="reduce-overhead"``). Both decoders run the same prompt, in alternating
rounds, in one process; the ratio of their medians is what to quote (on a shared machine the
absolute numbers mostly measure the other tenants). Also checks that both emit the same tokens and
that the compiled step compiled one graph for all positions.

    python benchmarks/bench_compile.py [--device cpu|cuda] [--checkpoint PATH] [--tokens 100]
                                       [--rounds 7] [--threads 1] [--python-wrapper-only] [--json FILE]

Without the shipped checkpoint the default-shaped MiniGPT is built with random weights (ms/token
depends on the shapes, not on the values) and the output says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--mode", default=None, help="torch.compile mode (default: reduce-overhead on cuda, default on cpu)")
    ap.add_argument("--python-wrapper-only", action="store_true",
                    help="CPU: skip the decoder compiled with Inductor's C++ wrapper (the job's default "
                         "on the CPU); time only the Python-wrapper one")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import os
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench-compile-inductor-"))
    import torch

    from tplab.model.compiled import build_decoder, warm_up
    from tplab.model.config import GPTConfig
    from tplab.model.decode import greedy_decode
    from tplab.model.gpt import MiniGPT
    from tplab.home.paths import DEFAULT_CHECKPOINT

    if args.threads:
        torch.set_num_threads(args.threads)
    ckpt_path = args.checkpoint or DEFAULT_CHECKPOINT
    if ckpt_path.exists():
        from tplab.model.checkpoint import build_single, load_checkpoint
        ckpt = load_checkpoint(ckpt_path)
        model = build_single(ckpt, args.device)
        prompt = ckpt.tokenizer.prompt_ids("she go to school every day")
        weights = str(ckpt_path)
    else:
        torch.manual_seed(0)
        model = MiniGPT(GPTConfig()).to(args.device)
        prompt = [1, 17, 33, 45, 91, 120, 2]
        weights = "random (no checkpoint found)"
    model.eval()
    tokens = min(args.tokens, model.config.block_size - len(prompt) + 1)

    dec = build_decoder(model, compile=True, mode=args.mode, cpp_wrapper=False)
    compile_s = warm_up(dec, prompt)
    cpp = None
    if args.device == "cpu" and not args.python_wrapper_only:
        cpp = build_decoder(model, compile=True, cpp_wrapper=True)
        compile_s_cpp = warm_up(cpp, prompt)
    graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    ref = greedy_decode(model, prompt, tokens)
    same = dec.decode(prompt, tokens) == ref and (cpp is None or cpp.decode(prompt, tokens) == ref)

    def ms_per_token(decode) -> float:
        stamps: list[float] = []
        decode(lambda _t: stamps.append(time.perf_counter()))
        gaps = [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]
        return statistics.median(gaps)

    sides = {"eager": lambda cb: greedy_decode(model, prompt, tokens, on_token=cb),
             "compiled": lambda cb: dec.decode(prompt, tokens, on_token=cb)}
    if cpp is not None:
        sides["compiled_cpp_wrapper"] = lambda cb: cpp.decode(prompt, tokens, on_token=cb)
    for fn in sides.values():  # one untimed round each
        ms_per_token(fn)
    samples: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(args.rounds):
        for name, fn in sides.items():
            samples[name].append(ms_per_token(fn))
    ms = {k: statistics.median(v) for k, v in samples.items()}
    extra_graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs_before
    result = {
        "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(args.device),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "mode": dec.mode,
        "weights": weights, "tokens": tokens, "rounds": args.rounds, "compile_s": compile_s,
        "tokens_equal": same, "recompiles_after_warmup": extra_graphs,
        # > 0 means reduce-overhead fell back to running without CUDA graphs
        "cudagraph_skips": int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]),
        "eager_ms_per_token": ms["eager"], "compiled_ms_per_token": ms["compiled"],
        "speedup": ms["eager"] / ms["compiled"], "samples": samples,
    }
    if cpp is not None:
        result.update(compile_s_cpp_wrapper=compile_s_cpp, cpp_wrapper_ms_per_token=ms["compiled_cpp_wrapper"],
                      speedup_cpp_wrapper=ms["eager"] / ms["compiled_cpp_wrapper"])
    print(f"device {result['device']}, torch {result['torch']}, {result['threads']} thread(s), "
          f"mode {dec.mode}, weights: {weights}")
    print(f"compile + warm-up {compile_s:.1f} s; tokens equal to eager greedy: {same}; "
          f"graphs compiled after warm-up: {extra_graphs}"
          + (f"; CUDA graphs skipped: {result['cudagraph_skips']}" if dec.mode == "reduce-overhead" else ""))
    print(f"decode ms/token (median of {args.rounds} alternating rounds x {tokens} tokens): "
          f"eager {ms['eager']:.3f}, compiled (Python wrapper) {ms['compiled']:.3f} -> {result['speedup']:.2f}x faster compiled")
    if cpp is not None:
        print(f"  compiled with the C++ wrapper, the job's CPU default (compile {compile_s_cpp:.1f} s): {ms['compiled_cpp_wrapper']:.3f} ms/token "
              f"-> {result['speedup_cpp_wrapper']:.2f}x faster than eager")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
