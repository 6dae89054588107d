"""The phase overview's DDP-on-CPU lab: train MiniGPT-grammar with DistributedDataParallel over gloo and time
every gradient all-reduce through a communication hook.

DDP all-reduces gradients in buckets while backward runs. A comm hook replaces that all-reduce, so it
is the one place that sees each bucket leave and come back: ``timed_allreduce_hook`` launches the
same averaging all-reduce DDP would (divide by world size, then sum) and records the interval from
launch to the completion of its future (on gloo, the moment the collective has finished, including
any wait for the slower rank). Per step the union of those intervals is the all-reduce time, and its
share of the step (forward + backward + optimizer) is the figure the lab sheet asks for.

Each rank draws its own examples (``corpus.train_stream(seed + rank)``): that is data parallelism.
Rank 0 gathers every rank's records and writes them; ``ddp_report`` renders the report.

Teardown is ordered so that it cannot deadlock. ``ProcessGroupGloo``'s destructor runs with the GIL
held and joins gloo's worker threads; a worker that still holds a finished collective's tensor needs
the GIL to free it, so freeing the last reference there hangs both forever. So every collective is
synchronous (DDP waits on its comm-hook futures inside ``backward``), the tensors each collective
used are kept alive by the rank until the group is gone, a barrier makes sure no peer is still in a
collective, the DDP wrapper (whose reducer holds the group) is dropped, and only then is the group
destroyed. The parent bounds its ranks too (``run``): a rank that makes no progress, fails, or
lingers after the results are written is killed, so no rank outlives the lab.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import random
import signal
import statistics
import sys
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
from tplab.util.jsonfile import write_json


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
    timeout_s: float = 120.0  # a collective waits this long for its peers; a rank silent longer is killed
    teardown_s: float = 30.0  # how long ranks may take to exit once the results are written


class DDPLabError(RuntimeError):
    """The DDP lab ended without results (a rank failed or stopped making progress); its ranks are gone."""


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


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this rank if the process that spawned it dies (Linux), so a rank never outlives the lab.

    torch's spawn wrapper asks for SIGINT, which a rank stuck in C++ while holding the GIL never
    handles; SIGKILL needs no handler."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def _gather(obj: Any, world_size: int, held: list[torch.Tensor]) -> list[Any]:
    """Every rank's JSON-able ``obj``, on every rank, over two synchronous gloo all-gathers.

    Unlike ``all_gather_object`` (whose tensors die inside it), every tensor given to gloo is
    appended to ``held``, so the rank keeps it alive until the process group is destroyed: a gloo
    worker never frees the last reference to a tensor (see the module docstring)."""
    payload = torch.frombuffer(bytearray(json.dumps(obj).encode()), dtype=torch.uint8)
    size = torch.tensor([payload.numel()], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world_size)]
    held += [payload, size, *sizes]
    dist.all_gather(sizes, size)
    longest = int(max(int(x) for x in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[: payload.numel()] = payload
    outs = [torch.empty(longest, dtype=torch.uint8) for _ in range(world_size)]
    held += [padded, *outs]
    dist.all_gather(outs, padded)
    return [json.loads(bytes(o[: int(n)].tolist())) for o, n in zip(outs, sizes)]


def _rank_main(rank: int, s: DDPSettings, rdzv: str, out_file: str, parent_pid: int,
               progress: Any) -> None:
    _die_with_parent(parent_pid)
    torch.set_num_threads(s.threads_per_rank)
    dist.init_process_group("gloo", init_method=rdzv, rank=rank, world_size=s.nproc,
                            timeout=__import__("datetime").timedelta(seconds=s.timeout_s))
    held: list[Any] = []  # what gloo has touched: released only after the group is destroyed
    ddp: DDP | None = None
    finished = False
    try:
        torch.manual_seed(s.seed)  # same initial weights on every rank (DDP also broadcasts rank 0's)
        config = GPTConfig.from_dict(s.model)
        tok = corpus.build_tokenizer()
        if len(tok) > config.vocab_size:
            raise ValueError(f"the corpus has {len(tok)} words but vocab_size is {config.vocab_size}.")
        net = MiniGPT(config)
        held.append(net)  # DDP broadcasts its parameters at construction
        ddp = DDP(net, bucket_cap_mb=s.bucket_cap_mb)
        timer = AllReduceTimer(world_size=s.nproc)
        ddp.register_comm_hook(timer, timed_allreduce_hook)
        opt = torch.optim.AdamW(ddp.parameters(), lr=s.lr, betas=(0.9, 0.98), weight_decay=0.01)
        stream = corpus.train_stream(s.seed + 1000 * rank)  # each rank its own data
        rng = random.Random(s.seed + rank)
        records: list[StepRecord] = []
        ddp.train()
        for step in range(s.steps):
            for g in opt.param_groups:
                g["lr"] = lr_at(step / s.steps, s.lr)
            x, y = _batch(tok, stream, s.batch_size, config.block_size, rng)
            t0 = time.perf_counter()
            logits = ddp(x)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE)
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP's all-reduces run (through the hook) inside this call, and are waited on
            opt.step()
            step_ms = (time.perf_counter() - t0) * 1e3
            ar_ms, buckets, nbytes = timer.take()
            records.append(StepRecord(step, float(loss.item()), step_ms, ar_ms, buckets, nbytes))
            progress[rank] = time.time()
        checksum = float(sum(p.detach().double().sum() for p in net.parameters()))
        gathered = _gather({"rank": rank, "records": [asdict(r) for r in records],
                            "param_checksum": checksum, "params": sum(p.numel() for p in net.parameters())},
                           s.nproc, held)
        if rank == 0:
            write_json(out_file, gathered, indent=None)  # the parent sees the whole file or none
        finished = True
    finally:
        if finished:
            dist.barrier()  # no peer is still inside a collective with this rank
        ddp = None  # its reducer holds the group and its buckets: gone before the group
        gc.collect()
        dist.destroy_process_group()
        held.clear()
    # the results are written and the group is gone: end without the interpreter's teardown with
    # torch loaded (0.3-0.9 s a rank here), which the lab's parent would wait for
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


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
        "lab": "ddp", "lab_sheet": "002", "backend": "gloo", "device": "cpu", "torch": torch.__version__,
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


def _first_line_of_failure(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _supervise(ctx: Any, s: DDPSettings, raw: Path, progress: Any) -> str:
    """Wait for the ranks, within bounds; return how they ended ("clean" or what was killed).

    Raises DDPLabError (ranks killed) when a rank fails or stops making progress for longer than
    its collective timeout plus a margin; a rank that lingers ``s.teardown_s`` after the results
    are written is killed and the run kept."""
    from torch.multiprocessing.spawn import ProcessException

    silent_s = s.timeout_s + 30.0
    written_at: float | None = None
    while True:
        try:
            if ctx.join(timeout=0.5, grace_period=2.0):
                return "clean"
        except ProcessException as exc:
            if raw.exists():  # the results are whole: a rank that fails on its way out loses nothing
                return f"rank {exc.error_index} failed after the results were written ({_first_line_of_failure(exc)})"
            raise DDPLabError(f"rank {exc.error_index} of the DDP lab failed ({_first_line_of_failure(exc)}); "
                              "every rank was stopped.") from None
        now = time.time()
        if written_at is None and raw.exists():
            written_at = now
        alive = [p.pid for p in ctx.processes if p.is_alive()]
        if written_at is not None and now - written_at > s.teardown_s:
            return (f"ranks {alive} were killed {s.teardown_s:g} s after the results were written "
                    "(stuck tearing down the process group)")
        if written_at is None and now - min(progress) > silent_s:
            raise DDPLabError(f"the DDP lab's ranks made no progress for {silent_s:g} s (a collective hung); "
                              "every rank was killed.")


def run(out: Path, s: DDPSettings) -> dict[str, Any]:
    """Spawn ``s.nproc`` gloo ranks, train, and write DIR/ddp-results.json and DIR/DDP_REPORT.md.

    Raises DDPLabError (one sentence, every rank already gone) when the ranks fail or hang."""
    from tplab.sidelabs import ddp_report

    out.mkdir(parents=True, exist_ok=True)
    rdzv_file = out / f".rendezvous-{os.getpid()}-{time.time_ns()}"
    raw = out / ".ddp-ranks.json"
    started_at, t0 = time.time(), time.perf_counter()
    progress = mp.get_context("spawn").Array("d", [started_at] * s.nproc, lock=False)
    ctx = None
    try:
        ctx = mp.start_processes(_rank_main, args=(s, f"file://{rdzv_file}", str(raw), os.getpid(), progress),
                                 nprocs=s.nproc, join=False, start_method="spawn")
        teardown = _supervise(ctx, s, raw, progress)
        ranks = json.loads(raw.read_text())
    finally:
        for p in ctx.processes if ctx is not None else []:
            if p.is_alive():
                p.kill()
            p.join(10)
        for p in (rdzv_file, raw, raw.with_name(raw.name + ".tmp")):
            p.unlink(missing_ok=True)
    summary = _summary(s, ranks, time.perf_counter() - t0, started_at)
    summary["teardown"] = teardown
    (out / "ddp-results.json").write_text(json.dumps(summary, indent=1))
    (out / "DDP_REPORT.md").write_text(ddp_report.render(summary))
    return summary
