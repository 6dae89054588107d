"""Seed 002's DDP-on-CPU lab: train MiniGPT-grammar with DistributedDataParallel over gloo and time
every gradient all-reduce through a communication hook.

DDP all-reduces gradients in buckets while backward runs. A comm hook replaces that all-reduce, so it
is the one place that sees each bucket leave and come back: ``timed_allreduce_hook`` launches the
same averaging all-reduce DDP would (divide by world size, then sum) and records the interval from
launch to the completion of its future (on gloo, the moment the collective has finished, including
any wait for the slower rank). Per step the union of those intervals is the all-reduce time, and its
share of the step (forward + backward + optimizer) is the figure the seed asks for.

Each rank draws its own examples (``corpus.train_stream(seed + rank)``): that is data parallelism.
Rank 0 gathers every rank's records and writes them; ``ddp_report`` renders the report.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from tplab.model import corpus
from tplab.model.config import GPTConfig
from tplab.model.gpt import MiniGPT
from tplab.model.train import IGNORE, encode_example, lr_at, make_batch


@dataclass
class DDPSettings:
    """What one DDP run does."""

    nproc: int = 2
    steps: int = 300
    batch_size: int = 16  # per rank
    lr: float = 3e-3
    seed: int = 0
    bucket_cap_mb: float = 25.0  # DDP's default
    threads_per_rank: int = 1
    model: dict[str, int] = field(default_factory=lambda: GPTConfig().to_dict())
    shape_from: str = ""  # the checkpoint whose config gave ``model`` (its weights are not used)
    timeout_s: float = 120.0


@dataclass
class StepRecord:
    """One rank's view of one training step."""

    step: int
    loss: float
    step_ms: float
    allreduce_ms: float  # union of launch->completion intervals of this step's buckets
    buckets: int
    bytes: int


@dataclass
class AllReduceTimer:
    """Comm-hook state: the buckets all-reduced since the last ``take()``."""

    world_size: int
    intervals: list[tuple[float, float]] = field(default_factory=list)
    buckets: int = 0
    bytes: int = 0

    def take(self) -> tuple[float, int, int]:
        """(ms covered by the recorded intervals, buckets, bytes) -- then start over."""
        ms, last_end = 0.0, float("-inf")
        for start, end in sorted(self.intervals):
            start = max(start, last_end)
            if end > start:
                ms += (end - start) * 1e3
            last_end = max(last_end, end)
        out = (ms, self.buckets, self.bytes)
        self.intervals, self.buckets, self.bytes = [], 0, 0
        return out


def timed_allreduce_hook(state: AllReduceTimer, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's averaging all-reduce, timed from launch until its future completes."""
    buf = bucket.buffer()
    buf.div_(state.world_size)
    t0 = time.perf_counter()
    fut = dist.all_reduce(buf, async_op=True).get_future()

    def done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        state.intervals.append((t0, time.perf_counter()))
        state.buckets += 1
        state.bytes += buf.numel() * buf.element_size()
        return f.value()[0]

    return fut.then(done)


# DDP checks the hook's annotations against the real classes; under ``from __future__ import
# annotations`` they would be strings, so give it the objects.
timed_allreduce_hook.__annotations__.update(bucket=dist.GradBucket, state=AllReduceTimer,
                                            **{"return": torch.futures.Future[torch.Tensor]})


def _batch(tok: Any, stream: Any, batch_size: int, block_size: int, rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    examples = [next(stream) for _ in range(batch_size)]
    length = max(len(encode_example(tok, ex)[0]) for ex in examples) - 1 + rng.randint(1, 4)
    return make_batch(tok, examples, min(length, block_size))


def _rank_main(rank: int, s: DDPSettings, rdzv: str, out_file: str) -> None:
    torch.set_num_threads(s.threads_per_rank)
    dist.init_process_group("gloo", init_method=rdzv, rank=rank, world_size=s.nproc,
                            timeout=__import__("datetime").timedelta(seconds=s.timeout_s))
    try:
        torch.manual_seed(s.seed)  # same initial weights on every rank (DDP also broadcasts rank 0's)
        config = GPTConfig.from_dict(s.model)
        tok = corpus.build_tokenizer()
        if len(tok) > config.vocab_size:
            raise ValueError(f"the corpus has {len(tok)} words but vocab_size is {config.vocab_size}.")
        model = DDP(MiniGPT(config), bucket_cap_mb=s.bucket_cap_mb)
        timer = AllReduceTimer(world_size=s.nproc)
        model.register_comm_hook(timer, timed_allreduce_hook)
        opt = torch.optim.AdamW(model.parameters(), lr=s.lr, betas=(0.9, 0.98), weight_decay=0.01)
        stream = corpus.train_stream(s.seed + 1000 * rank)  # each rank its own data
        rng = random.Random(s.seed + rank)
        records: list[StepRecord] = []
        model.train()
        for step in range(s.steps):
            for g in opt.param_groups:
                g["lr"] = lr_at(step / s.steps, s.lr)
            x, y = _batch(tok, stream, s.batch_size, config.block_size, rng)
            t0 = time.perf_counter()
            logits = model(x)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE)
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP's all-reduces run (through the hook) inside this call
            opt.step()
            step_ms = (time.perf_counter() - t0) * 1e3
            ar_ms, buckets, nbytes = timer.take()
            records.append(StepRecord(step, float(loss.item()), step_ms, ar_ms, buckets, nbytes))
        checksum = float(sum(p.detach().double().sum() for p in model.module.parameters()))
        gathered: list[Any] = [None] * s.nproc
        dist.all_gather_object(gathered, {"rank": rank, "records": [asdict(r) for r in records],
                                          "param_checksum": checksum,
                                          "params": sum(p.numel() for p in model.parameters())})
        if rank == 0:
            Path(out_file).write_text(json.dumps(gathered))
    finally:
        dist.destroy_process_group()


def _summary(s: DDPSettings, ranks: list[dict[str, Any]], wall_s: float, started_at: float) -> dict[str, Any]:
    steps = s.steps
    skip = min(5, max(0, steps - 1))  # the first steps include DDP's bucket set-up and allocator warm-up
    mean_loss = [statistics.fmean(r["records"][i]["loss"] for r in ranks) for i in range(steps)]
    k = max(1, steps // 10)
    per_rank = []
    for r in ranks:
        recs = r["records"][skip:]
        step_ms = [x["step_ms"] for x in recs]
        ar_ms = [x["allreduce_ms"] for x in recs]
        per_rank.append({
            "rank": r["rank"], "step_ms_median": statistics.median(step_ms),
            "allreduce_ms_median": statistics.median(ar_ms),
            "allreduce_share": sum(ar_ms) / sum(step_ms),
            "buckets_per_step": statistics.median(x["buckets"] for x in recs),
            "bytes_per_step": statistics.median(x["bytes"] for x in recs),
        })
    checksums = [r["param_checksum"] for r in ranks]
    return {
        "lab": "ddp", "seed_doc": "002", "backend": "gloo", "device": "cpu", "torch": torch.__version__,
        "settings": asdict(s), "params": ranks[0]["params"], "wall_s": wall_s,
        "started_at": started_at, "finished_at": started_at + wall_s,
        "steps_skipped_in_timing": skip,
        "loss_first": statistics.fmean(mean_loss[:k]), "loss_last": statistics.fmean(mean_loss[-k:]),
        "loss_fell": statistics.fmean(mean_loss[-k:]) < statistics.fmean(mean_loss[:k]),
        "params_in_sync": max(checksums) - min(checksums) <= 1e-6 * max(1.0, abs(checksums[0])),
        "step_ms_median": statistics.median(p["step_ms_median"] for p in per_rank),
        "allreduce_ms_median": statistics.median(p["allreduce_ms_median"] for p in per_rank),
        "allreduce_share": statistics.fmean(p["allreduce_share"] for p in per_rank),
        "per_rank": per_rank, "mean_loss_per_step": mean_loss,
        "ranks": [{"rank": r["rank"], "records": r["records"]} for r in ranks],
    }


def run(out: Path, s: DDPSettings) -> dict[str, Any]:
    """Spawn ``s.nproc`` gloo ranks, train, and write DIR/ddp-results.json and DIR/DDP_REPORT.md."""
    from tplab.labs import ddp_report

    out.mkdir(parents=True, exist_ok=True)
    rdzv_file = out / f".rendezvous-{os.getpid()}-{time.time_ns()}"
    raw = out / ".ddp-ranks.json"
    started_at, t0 = time.time(), time.perf_counter()
    try:
        mp.spawn(_rank_main, args=(s, f"file://{rdzv_file}", str(raw)), nprocs=s.nproc, join=True)
        ranks = json.loads(raw.read_text())
    finally:
        for p in (rdzv_file, raw):
            p.unlink(missing_ok=True)
    summary = _summary(s, ranks, time.perf_counter() - t0, started_at)
    (out / "ddp-results.json").write_text(json.dumps(summary, indent=1))
    (out / "DDP_REPORT.md").write_text(ddp_report.render(summary))
    return summary
