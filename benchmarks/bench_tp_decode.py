"""Decode latency on this CPU: single process vs our TP vs DTensor TP, and the KV cache's step cost.

Why this exists: issue 2 asks for three numbers measured side by side in one run, so that they are
comparable even on a noisy shared machine — ratios, never absolute timings, and nothing asserted:

  1. per-token greedy-decode latency, single process vs tplab's TP (``MiniGPTTP``) over gloo;
  2. the KV cache: one decode step at position 100 vs position 10 (goal: at most 1.2x);
  3. tplab's TP vs the same model parallelised with ``torch.distributed.tensor.parallel``
     (``ColwiseParallel``/``RowwiseParallel`` on a gloo CPU ``DeviceMesh``; goal: at most 0.7x).

How timings are taken: every rank runs with ``torch.set_num_threads(1)``; the single-process model
runs in rank 0 while the other ranks wait in a barrier, so all three variants share the same
processes and conditions. The variants alternate prompt by prompt (the order rotates each round),
so drift in machine load hits all of them alike. A per-token time is the interval between two
consecutive tokens of ``greedy_decode`` (the prefill step is excluded); we report the median.
A KV-cache step is one ``forward`` of one token with the cache rewound to the same position, timed
``--reps`` times per position, positions 10 and 100 alternating (median). Both parallel variants issue the same collectives per token:
1 all-reduce for the embedding, 2 per block, 1 all-gather of the logits.

The model is the trained checkpoint (``tplab/assets/minigpt-grammar.pt``) when it exists, otherwise a
randomly initialised MiniGPT of the default shape (timing does not depend on the weights).

    python benchmarks/bench_tp_decode.py [--world-size 2] [--prompts 3] [--new-tokens 100]
"""

from __future__ import annotations

import argparse
import copy
import os
import pickle
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from tplab.model.checkpoint import CheckpointError, load_checkpoint
from tplab.model.config import GPTConfig
from tplab.model.decode import greedy_decode
from tplab.model.gpt import MiniGPT, MiniGPTTP, shard_state_dict, shard_tensor
from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
from tplab.tp import comm_timing

VARIANTS = ("single", "tp", "dtensor")
KV_POSITIONS = (10, 100)


@dataclass
class Workload:
    """What every rank needs: the full weights, the prompts, and how much to measure."""

    config: dict[str, int]
    state_dict: dict[str, torch.Tensor]
    prompts: list[list[int]]
    new_tokens: int
    reps: int
    source: str


@dataclass
class RankReport:
    """Rank 0's measurements (milliseconds) and the decoded tokens of each variant."""

    per_token_ms: dict[str, list[float]] = field(default_factory=dict)
    kv_step_ms: dict[str, dict[int, float]] = field(default_factory=dict)
    no_cache_ms: dict[int, float] = field(default_factory=dict)
    tokens: dict[str, list[list[int]]] = field(default_factory=dict)
    comm_ms_per_token: float = 0.0
    instrumented_ms_per_token: float = 0.0
    comm_calls_per_token: float = 0.0
    comm_bytes_per_token: float = 0.0


# ----------------------------------------------------------------------------- building the variants


def dtensor_model(full: MiniGPT, world_size: int) -> nn.Module:
    """A copy of ``full`` parallelised with torch.distributed.tensor.parallel over a CPU mesh.

    The plan mirrors MiniGPTTP: qkv and mlp.up column-wise, attn.proj and mlp.down row-wise, the
    token embedding row-wise (vocab split, one all-reduce), lm_head column-wise with replicated
    (all-gathered) logits. ColwiseParallel shards qkv's rows contiguously, so the rows are first
    reordered to [q_0; k_0; v_0; q_1; ...] and each rank's chunk holds whole heads of q, k and v;
    each attention module then works on its local heads.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    model = copy.deepcopy(full)
    plan: dict[str, Any] = {
        "tok_emb": RowwiseParallel(input_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
    }
    for i, block in enumerate(model.blocks):
        with torch.no_grad():
            for p in (block.attn.qkv.weight, block.attn.qkv.bias):
                p.copy_(torch.cat([shard_tensor(p, "qkv", r, world_size) for r in range(world_size)]))
        block.attn.n_head //= world_size
        plan[f"blocks.{i}.attn.qkv"] = ColwiseParallel()
        plan[f"blocks.{i}.attn.proj"] = RowwiseParallel()
        plan[f"blocks.{i}.mlp.up"] = ColwiseParallel()
        plan[f"blocks.{i}.mlp.down"] = RowwiseParallel()
    model.world_size = world_size  # new_cache() allocates local heads only
    mesh = init_device_mesh("cpu", (world_size,))
    return parallelize_module(model, mesh, plan).eval()


# ----------------------------------------------------------------------------- measurements


def decode_intervals(model: nn.Module, prompt: list[int], new_tokens: int) -> tuple[list[int], list[float]]:
    """Greedy-decode ``new_tokens``; return the tokens and the ms between consecutive tokens."""
    stamps: list[float] = []
    tokens = greedy_decode(model, prompt, new_tokens, on_token=lambda _t: stamps.append(time.perf_counter()))
    return tokens, [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]


@torch.no_grad()
def kv_step_ms(model: nn.Module, positions: tuple[int, ...], reps: int, vocab: int) -> dict[int, float]:
    """Median ms of one cached decode step at each position, the positions timed alternately.

    One cache per position is filled once; before each timed step it is rewound to the position.
    """
    gen = torch.Generator().manual_seed(0)
    caches = {}
    for p in positions:
        caches[p] = model.new_cache(batch_size=1)
        model(torch.randint(0, vocab, (1, p), generator=gen), caches[p])
    token = torch.tensor([[1]])
    times: dict[int, list[float]] = {p: [] for p in positions}
    for _ in range(reps):
        for p in positions:
            caches[p].length = p
            start = time.perf_counter()
            int(model(token, caches[p])[0, -1].argmax().item())
            times[p].append((time.perf_counter() - start) * 1e3)
    return {p: statistics.median(t) for p, t in times.items()}


@torch.no_grad()
def no_cache_ms(model: nn.Module, position: int, reps: int, vocab: int) -> float:
    """Median ms of producing the token after ``position`` tokens *without* a cache (full recompute)."""
    gen = torch.Generator().manual_seed(position)
    seq = torch.randint(0, vocab, (1, position + 1), generator=gen)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        int(model(seq)[0, -1].argmax().item())
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def rank_main(rank: int, world_size: int, workload_path: str, init_file: str, out_path: str) -> None:
    torch.set_num_threads(1)
    if sys.platform.startswith("linux") and os.path.exists("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=120))
    try:
        with open(workload_path, "rb") as fh:
            work: Workload = pickle.load(fh)
        config = GPTConfig.from_dict(work.config)
        full = MiniGPT(config)
        full.load_state_dict(work.state_dict)
        full.eval()
        tp = MiniGPTTP(config)
        tp.load_state_dict(shard_state_dict(work.state_dict, rank, world_size))
        tp.eval()
        models = {"single": full, "tp": tp, "dtensor": dtensor_model(full, world_size)}
        report = RankReport(per_token_ms={v: [] for v in VARIANTS}, tokens={v: [] for v in VARIANTS})

        def run(variant: str, fn: Any) -> Any:
            """Run ``fn(model)`` for ``variant``: the single model on rank 0 only, others everywhere."""
            result = None
            if variant != "single" or rank == 0:
                result = fn(models[variant])
            dist.barrier()
            return result

        warm = work.prompts[0]
        for v in VARIANTS:
            run(v, lambda m: decode_intervals(m, warm, 8))

        for i, prompt in enumerate(work.prompts):
            order = VARIANTS[i % 3:] + VARIANTS[: i % 3]
            for v in order:
                res = run(v, lambda m, prompt=prompt: decode_intervals(m, prompt, work.new_tokens))
                if res is not None:
                    report.tokens[v].append(res[0])
                    report.per_token_ms[v].extend(res[1])

        for v in VARIANTS:
            report.kv_step_ms[v] = run(v, lambda m: kv_step_ms(m, KV_POSITIONS, work.reps, config.vocab_size))
        report.no_cache_ms = {
            p: run("single", lambda m, p=p: no_cache_ms(m, p, max(5, work.reps // 4), config.vocab_size))
            for p in KV_POSITIONS
        }

        with comm_timing() as timer:  # the instrumented pass: all-reduce time inside each token
            begin = time.perf_counter()
            tokens = greedy_decode(tp, work.prompts[0], work.new_tokens)
            report.instrumented_ms_per_token = (time.perf_counter() - begin) * 1e3 / max(1, len(tokens))
        n = max(1, len(tokens))
        report.comm_ms_per_token = timer.ms / n
        report.comm_calls_per_token = timer.calls / n
        report.comm_bytes_per_token = timer.bytes / n

        if rank == 0:
            with open(out_path, "wb") as fh:
                pickle.dump(asdict(report), fh)
    finally:
        dist.destroy_process_group()


# ----------------------------------------------------------------------------- driver


def load_workload(checkpoint: Path, prompts_path: Path, n_prompts: int, new_tokens: int, reps: int) -> Workload:
    ckpt, why = None, f"no checkpoint at {checkpoint}"
    if checkpoint.exists():
        try:
            ckpt = load_checkpoint(checkpoint)
        except CheckpointError as exc:
            why = f"checkpoint unusable: {exc}"
    if ckpt is not None:
        config, state_dict, source = ckpt.config, ckpt.state_dict, f"trained checkpoint {checkpoint}"
        lines = prompts_path.read_text().splitlines() if prompts_path.exists() else []
        prompts = [ckpt.tokenizer.prompt_ids(t) for t in lines if t.strip()][:n_prompts]
    else:
        torch.manual_seed(0)
        config = GPTConfig()
        state_dict = MiniGPT(config).state_dict()
        source = f"randomly initialised MiniGPT ({why})"
        prompts = []
    gen = torch.Generator().manual_seed(1)
    while len(prompts) < n_prompts:
        prompts.append(torch.randint(4, config.vocab_size, (8,), generator=gen).tolist())
    longest = max(len(p) for p in prompts)
    if longest + new_tokens > config.block_size or max(KV_POSITIONS) + 1 > config.block_size:
        raise SystemExit(f"prompts of {longest} tokens + {new_tokens} new tokens exceed block_size "
                         f"{config.block_size}; pass a smaller --new-tokens.")
    return Workload(config.to_dict(), state_dict, prompts, new_tokens, reps, source)


def report_text(work: Workload, world_size: int, r: dict[str, Any], wall_s: float) -> str:
    cfg = work.config
    med = {v: statistics.median(r["per_token_ms"][v]) for v in VARIANTS}
    same = {v: r["tokens"][v] == r["tokens"]["single"] for v in ("tp", "dtensor")}
    kv = r["kv_step_ms"]
    kv_ratio = {v: kv[v][100] / kv[v][10] for v in VARIANTS}
    tp_vs_dt = med["tp"] / med["dtensor"]
    lines = [
        f"model: {work.source}",
        f"       {cfg['n_layer']} layers, d_model {cfg['d_model']}, {cfg['n_head']} heads, "
        f"vocab {cfg['vocab_size']}; {len(work.prompts)} prompts x {work.new_tokens} new tokens, "
        f"TP world size {world_size} over gloo, 1 thread per rank",
        "",
        "per-token greedy decode (median ms, prefill excluded)",
        f"  single process          {med['single']:8.3f}",
        f"  tplab TP={world_size}                {med['tp']:8.3f}   {med['tp'] / med['single']:6.2f}x single",
        f"  DTensor TP={world_size}              {med['dtensor']:8.3f}   {med['dtensor'] / med['single']:6.2f}x single",
        f"  tplab TP / DTensor TP   {tp_vs_dt:8.2f}x   goal <= 0.70x: {'met' if tp_vs_dt <= 0.7 else 'NOT met'}",
        f"  tokens identical to single: tplab TP {'yes' if same['tp'] else 'NO'}, "
        f"DTensor {'yes' if same['dtensor'] else 'NO'}",
        "",
        f"tplab TP comm per token (instrumented pass, prefill included): "
        f"{r['comm_calls_per_token']:.1f} collectives, {r['comm_bytes_per_token'] / 1024:.1f} KiB, "
        f"{r['comm_ms_per_token']:.3f} of {r['instrumented_ms_per_token']:.3f} ms "
        f"({r['comm_ms_per_token'] / r['instrumented_ms_per_token']:.0%} in collectives)",
        "",
        "KV-cache decode step (median ms)      pos 10    pos 100   100/10",
    ]
    for v in VARIANTS:
        lines.append(f"  {v:<34} {kv[v][10]:8.3f}  {kv[v][100]:8.3f}  {kv_ratio[v]:6.2f}x")
    nc = r["no_cache_ms"]
    lines += [
        f"  {'single, no cache (recompute all)':<34} {nc[10]:8.3f}  {nc[100]:8.3f}  {nc[100] / nc[10]:6.2f}x",
        f"  goal: position 100 costs <= 1.2x position 10 (tplab TP): "
        f"{'met' if kv_ratio['tp'] <= 1.2 else 'NOT met'}; single: "
        f"{'met' if kv_ratio['single'] <= 1.2 else 'NOT met'}",
        "",
        f"wall time {wall_s:.1f} s; timings are noisy on a shared machine, compare the ratios.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--prompts-file", type=Path, default=DEFAULT_PROMPTS)
    parser.add_argument("--prompts", type=int, default=3, help="prompts decoded per variant")
    parser.add_argument("--new-tokens", type=int, default=100)
    parser.add_argument("--reps", type=int, default=30, help="timed steps per KV-cache position")
    parser.add_argument("--world-size", type=int, default=2)
    args = parser.parse_args(argv)

    start = time.perf_counter()
    work = load_workload(args.checkpoint, args.prompts_file, args.prompts, args.new_tokens, args.reps)
    with tempfile.TemporaryDirectory(prefix="tplab-bench-") as tmp:
        workload_path, out_path = os.path.join(tmp, "work.pkl"), os.path.join(tmp, "report.pkl")
        with open(workload_path, "wb") as fh:
            pickle.dump(work, fh)
        mp.spawn(rank_main, args=(args.world_size, workload_path, os.path.join(tmp, "rdzv"), out_path),
                 nprocs=args.world_size)
        with open(out_path, "rb") as fh:
            report = pickle.load(fh)
    print(report_text(work, args.world_size, report, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
