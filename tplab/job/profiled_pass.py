"""The profiled pass: a few tokens per mode under torch's profiler on every rank, merged into one
trace (``trace.json``) and split into compute, on the wire, waiting and rest (``timeline``).

Why apart from the timed passes: a profiler records every op and so slows the step it watches;
the lab's latency figures stay those of the uninstrumented pass, and this pass runs after the
timed ones, over a handful of tokens (``--profile-tokens``), to show *where* a token's time goes,
rank by rank. On every rank:

    prefill + WARM_STEPS decode steps, unprofiled (the same positions the timed passes reach)
    profiler on (CPU activities; on a GPU also CUDA: kernels, NCCL's among them) ─► barrier
    ANCHORS "clock anchor" spans, each around a read of the real-time clock
    N steps, each a span "<mode> token <pos>" timed by perf_counter inside it, the collectives
    named by ``tplab.tp.labels`` ("L3 attn-out all-reduce"); on a GPU each step ends in a sync
    profiler off ─► export torch's Chrome trace ─► this rank's capture (``trace_merge``) and
    its export as torch wrote it, with ``distributedInfo`` (``rank_traces``), gzip-compressed

The single-device mode runs on rank 0 alone while the other ranks wait at a barrier (as in the
timed passes); TP runs on every rank over the transport that carries the run's figures. Rank 0
gathers the captures and the exports (as bytes over the process group), measures each rank's
clock offset at a barrier, merges, bounds and writes ``trace.json``, writes each rank's own
trace under ``traces/`` (what HTA and Perfetto read, one file per rank), and returns
results.json's ``timeline``. The profiler's own log lines are kept out of the job's log
(``profiler_chatter``).

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import socket
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist

from tplab.job.profiler_chatter import chatter_kept_out
from tplab.records import rank_traces
from tplab.records.timeline import timeline_section
from tplab.records.trace_merge import (
    ANCHOR,
    MAX_TRACE_BYTES,
    Merged,
    align,
    capture_from_chrome,
    load_chrome,
    trace_document,
)
from tplab.records.trace_names import step_name, token_name
from tplab.tp import labels, without_autograd
from tplab.util.jsonfile import write_json

#: decode steps before the profiled ones (the prefill is step 0)
WARM_STEPS = 2
#: clock anchors per profiled pass
ANCHORS = 5
#: barrier rounds measuring the ranks' clock offsets
OFFSET_ROUNDS = 7
TRACE_FILE = "trace.json"


@dataclass
class Profiled:
    """One rank's profiled decode: torch's exported trace (parsed with exact times, and as torch
    wrote it, gzip-compressed), the anchors' clock reads (ns), and each profiled step's own time
    (µs) by position."""

    chrome: dict[str, Any]
    anchors: list[int]
    steps: dict[int, float]
    export_gz: bytes = b""


def profiler(device: torch.device) -> Any:
    """torch's profiler (kineto) over the CPU and, on a GPU, CUDA activities; its Chrome trace
    export is the same on torch 2.4 and 2.13. This is ``torch.autograd.profiler.profile``, which
    ``torch.profiler.profile`` wraps: the wrapper's start looks up ``torch._inductor`` and so
    imports it on torch 2.13 (~1.2 s of CPU a rank), which an eager decode never needs."""
    return torch.autograd.profiler.profile(
        use_kineto=True, use_cpu=True, use_device="cuda" if device.type == "cuda" else None,
        record_shapes=False, profile_memory=False, with_stack=False)


def distributed_info() -> dict[str, Any] | None:
    """``distributedInfo`` as ``torch.profiler`` writes it into its trace (backend, rank, world
    size, the process groups; NCCL's version under nccl), or None without a process group.
    ``torch.autograd.profiler.profile`` writes none, so the pass adds it (HTA reads each trace's
    rank there)."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    backend = str(dist.get_backend())
    pg_config: list[Any] = []
    with contextlib.suppress(Exception):  # a private helper of torch's, as its profiler uses it
        pg_config = list(dist.distributed_c10d._get_all_pg_configs())
    nccl = None
    if backend == "nccl":
        with contextlib.suppress(Exception):
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    count = getattr(dist, "get_pg_count", None)
    return rank_traces.distributed_info(backend, dist.get_rank(), dist.get_world_size(),
                                        int(count()) if callable(count) else 1, pg_config, nccl)


@contextlib.contextmanager
def profiling(device: torch.device, metadata: dict[str, Any] | None = None) -> Iterator[Any]:
    """A profiler session (``profiler``) whose start and stop keep the profiler's own log lines
    out of the job's log; ``metadata`` (key -> JSON value) goes into its trace as torch's
    ``add_metadata_json`` puts it, ``distributedInfo`` first."""
    gpu = device.type == "cuda"
    prof = profiler(device)
    with chatter_kept_out(gpu):
        prof.__enter__()
    try:
        info = distributed_info()
        every = {**({"distributedInfo": info} if info else {}), **(metadata or {})}
        for key, value in every.items():
            torch.autograd._add_metadata_json(key, json.dumps(value, default=str))
        yield prof
    finally:
        with chatter_kept_out(gpu):
            prof.__exit__(None, None, None)


def exported(prof: Any, device: torch.device) -> bytes:
    """torch's Chrome export of a finished session, as torch wrote it."""
    fd, path = tempfile.mkstemp(prefix="tplab-trace-", suffix=".json")
    os.close(fd)
    try:
        with chatter_kept_out(device.type == "cuda"):
            prof.export_chrome_trace(path)
        with open(path, "rb") as fh:
            return fh.read()
    finally:
        os.unlink(path)


def profile_decode(model: Any, prompt_ids: list[int], mode: str, tokens: int,
                   device: torch.device, barrier: Callable[[], None] | None = None,
                   sync: Callable[[], None] | None = None, keep_export: bool = False,
                   comm: str = "") -> Profiled:
    """Decode ``prompt_ids`` greedily: the prefill and ``WARM_STEPS`` steps unprofiled, then
    ``tokens`` steps under torch's profiler, each a span named ``token_name(mode, pos)`` inside
    torch's own step span (``step_name(pos)``, what HTA reads as an iteration), the collectives
    labelled. ``barrier`` (TP: every rank) lines the ranks up once the profiler runs.
    ``keep_export``: torch's export is kept as it wrote it, gzip-compressed."""
    steps: dict[int, float] = {}
    anchors: list[int] = []
    with without_autograd(), labels.labelled():
        cache = model.new_cache(batch_size=1, device=device)
        idx = torch.tensor([prompt_ids], dtype=torch.long, device=device)

        def step() -> None:
            nonlocal idx
            logits = model(idx, cache)
            idx = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            if sync is not None:
                sync()

        for _ in range(1 + WARM_STEPS):
            step()
        # a collection of torch's and the profiler's objects inside a step's span (milliseconds
        # here) would be time neither the step's clock nor any op accounts for: collect now,
        # then none until the profiled steps are done
        gc.collect()
        gc.disable()
        try:
            with profiling(device, {"tplab": {"pass": mode, "comm": comm or "none"}}) as prof:
                if barrier is not None:
                    barrier()
                for _ in range(ANCHORS):
                    with labels.span(ANCHOR):
                        anchors.append(time.time_ns())
                for k in range(tokens):
                    pos = 1 + WARM_STEPS + k
                    with labels.span(step_name(pos)), labels.span(token_name(mode, pos)):
                        t = time.perf_counter()
                        step()
                        steps[pos] = (time.perf_counter() - t) * 1e6
        finally:
            gc.enable()
        raw = exported(prof, device)
    return Profiled(load_chrome(raw), anchors, steps,
                    rank_traces.compress(raw) if keep_export else b"")


def host_id() -> str:
    """This machine, as the ranks compare it: the host name and the kernel's boot id."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()[:8]
    except OSError:
        boot = "?"
    return f"{socket.gethostname()}/{boot}"


def _to_bytes(t: torch.Tensor, n: int) -> bytes:
    t = t.to("cpu").contiguous()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def gather_bytes(data: bytes, device: torch.device) -> list[bytes]:
    """Every rank's ``data``, on every rank, in rank order (all-gather of a length, then of the
    padded bytes; a CUDA device for nccl, the CPU for gloo). Byte tensors rather than torch's
    object collectives, which unpickle through NumPy on torch 2.4."""
    world = dist.get_world_size()
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    lengths = [int(s.item()) for s in sizes]
    buf = torch.zeros(max(max(lengths), 1), dtype=torch.uint8)
    if data:
        buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    buf = buf.to(device)
    parts = [torch.empty_like(buf) for _ in range(world)]
    dist.all_gather(parts, buf)
    return [_to_bytes(p, n) for p, n in zip(parts, lengths)]


def barrier_offsets_ns(barrier: Callable[[], None], device: torch.device,
                       rounds: int = OFFSET_ROUNDS) -> dict[int, int]:
    """Each rank's real-time clock minus rank 0's, read right after a barrier: the median over
    ``rounds`` (a barrier releases the ranks a few microseconds apart, in no fixed order)."""
    world = dist.get_world_size()
    samples: list[list[int]] = [[] for _ in range(world)]
    for _ in range(rounds):
        barrier()
        t = torch.tensor([time.time_ns()], dtype=torch.int64, device=device)
        got = [torch.zeros_like(t) for _ in range(world)]
        dist.all_gather(got, t)
        values = [int(g.item()) for g in got]
        for r, v in enumerate(values):
            samples[r].append(v - values[0])
    return {r: sorted(s)[len(s) // 2] for r, s in enumerate(samples)}


def _taken(tokens: int, device: torch.device, comm: str, compiled: bool) -> dict[str, Any]:
    return {
        "tokens_per_mode": tokens,
        "positions": [1 + WARM_STEPS + k for k in range(tokens)],
        "profiler": f"torch {torch.__version__}'s profiler (kineto), activities "
                    + ("CPU and CUDA (kernels on the GPU streams, NCCL's among them)"
                       if device.type == "cuda" else "CPU"),
        "when": "after the timed passes, apart from them: the latency figures stay those of the "
                "uninstrumented pass",
        "how": f"prompt 0 decoded greedily; the prefill and {WARM_STEPS} steps unprofiled, then "
               "the profiled steps, each a span '<mode> token <pos>' timed by perf_counter "
               "inside it" + ("; each step ends in a CUDA sync" if device.type == "cuda" else "")
               + "; every collective a span named by its layer and place (tplab.tp.labels); "
                 "single on rank 0 alone (the others at a barrier), TP on every rank over "
               + comm,
        "compiled": ("--compile: the eager model is profiled (the compiled decoder's graph has "
                     "no labels)" if compiled else "")}


class ProfiledPass:
    """The pass on one rank: ``run`` (the lab's model: trace.json and the timeline section) or
    ``split`` (a d_model sweep size: the TP split's medians); rank 0 gets the answer."""

    def __init__(self, *, tokens: int, rank: int, world_size: int, device: torch.device,
                 barrier: Callable[[], None], sync: Callable[[], None] | None,
                 out_dir: Path | None = None, comm: str = "", compiled: bool = False) -> None:
        self.tokens, self.rank, self.world = tokens, rank, world_size
        self.device, self.barrier, self.sync = device, barrier, sync
        self.out_dir, self.comm, self.compiled = out_dir, comm, compiled
        self.devices: dict[int, str] = {}
        self.exports: dict[tuple[str, int], bytes] = {}

    def _collect(self, single: Any, tp_model: Any, prompt_ids: list[int],
                 tokens: int, keep_exports: bool = False) -> Merged | None:
        """Profile the modes on every rank and gather the captures: rank 0 gets them merged on
        one clock (None elsewhere); with ``keep_exports`` rank 0 also gets each rank's own
        export (``self.exports``: (mode, rank) -> its ``.json.gz``, empty when over its bound)."""
        host = host_id()
        captures = []
        self.exports = {}
        if self.rank == 0 and single is not None:
            p = profile_decode(single, prompt_ids, "single", tokens, self.device, sync=self.sync,
                               keep_export=keep_exports, comm=self.comm)
            captures.append(capture_from_chrome(p.chrome, rank=0, anchors=p.anchors, host=host,
                                                steps={"single": p.steps},
                                                device=self.device.type))
            self.exports[("single", 0)] = p.export_gz
        self.barrier()
        p = profile_decode(tp_model, prompt_ids, "tp", tokens, self.device, self.barrier,
                           self.sync, keep_export=keep_exports, comm=self.comm)
        captures.append(capture_from_chrome(p.chrome, rank=self.rank, anchors=p.anchors,
                                            host=host, steps={"tp": p.steps},
                                            device=self.device.type))
        offsets = barrier_offsets_ns(self.barrier, self.device)
        payloads = gather_bytes(zlib.compress(json.dumps(captures).encode()), self.device)
        if keep_exports:
            own = p.export_gz if len(p.export_gz) <= rank_traces.MAX_RANK_TRACE_BYTES else b""
            for r, data in enumerate(gather_bytes(own, self.device)):
                self.exports[("tp", r)] = data
        if self.rank != 0:
            return None
        every = [c for data in payloads for c in json.loads(zlib.decompress(data))]
        self.devices = {c["rank"]: c["device"] for c in every}
        return align(every, offsets, len({c["host"] for c in every}) == 1)

    def _tokens(self, prompt_ids: list[int], block_size: int) -> int:
        return max(1, min(self.tokens, block_size - len(prompt_ids) - 1 - WARM_STEPS))

    def _warm(self) -> None:
        # a process's first profiler session starts the profiler's machinery: on every rank at
        # once, not rank 0's for the single pass and then the others' for TP
        with profiling(self.device):
            pass

    def _write_exports(self) -> dict[str, Any]:
        """Rank 0 writes each rank's own trace under ``traces/`` (``rank_traces``): what
        results.json's timeline says of them."""
        out = Path(self.out_dir or ".")
        files, left_out = [], []
        for (mode, rank), data in sorted(self.exports.items()):
            rel = rank_traces.rank_trace_path(rank, mode)
            if not data or len(data) > rank_traces.MAX_RANK_TRACE_BYTES:
                left_out.append(f"{rel}: over {rank_traces.MAX_RANK_TRACE_BYTES} bytes "
                                "compressed")
                continue
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
            files.append({"file": rel, "mode": mode, "rank": rank, "bytes": len(data)})
        return {"folder": rank_traces.TRACES_DIR, "files": files, "left_out": left_out,
                "what": "each rank's own trace as torch's profiler wrote it (gzip), with "
                        "distributedInfo: HTA (TraceAnalysis(trace_dir=...)) and Perfetto read "
                        f"{rank_traces.TRACES_DIR}/ as it is; the single-device pass in "
                        f"{rank_traces.TRACES_DIR}/{rank_traces.SINGLE_DIR}/"}

    def run(self, single: Any, tp_model: Any, prompt_ids: list[int],
            block_size: int) -> dict[str, Any] | None:
        """Profile both modes and, on rank 0, merge them: trace.json, each rank's own trace
        under ``traces/``, and the ``timeline`` section (None on the other ranks).
        ``block_size`` caps the steps a prompt has room for."""
        tokens = self._tokens(prompt_ids, block_size)
        self._warm()
        merged = self._collect(single, tp_model, prompt_ids, tokens, keep_exports=True)
        if merged is None:
            return None
        taken = _taken(tokens, self.device, self.comm, self.compiled)
        doc = trace_document(merged, max_bytes=MAX_TRACE_BYTES,
                             other={"tplab": "the lab's profiled pass, one process per rank",
                                    "taken": taken, "clock": merged.clock})
        path = write_json(Path(self.out_dir or ".") / TRACE_FILE, doc, indent=None)
        trace = {"file": TRACE_FILE, "bytes": path.stat().st_size,
                 "events": sum(1 for e in doc["traceEvents"] if e.get("ph") == "X"),
                 **doc["otherData"]["bound"], "rank_traces": self._write_exports()}
        return timeline_section(merged, self.devices, comm=self.comm, taken=taken, trace=trace)

    def split(self, tp_model: Any, prompt_ids: list[int], block_size: int) -> dict[str, Any] | None:
        """TP alone, no trace written: rank 0 gets the medians of the split (compute, wire,
        wait, rest, per token and per all-reduce; ``timeline.mode_summary``), None elsewhere."""
        tokens = self._tokens(prompt_ids, block_size)
        self._warm()
        merged = self._collect(None, tp_model, prompt_ids, tokens)
        if merged is None:
            return None
        section = timeline_section(merged, self.devices, comm=self.comm, taken={}, trace={})
        tp = section["modes"].get("tp")
        return {**tp["median"], "sum_worst": section["sum_check"]["worst"]} if tp else None
