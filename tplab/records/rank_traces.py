"""Each rank's own profiler trace, kept as torch wrote it: where the files lie and what makes one
readable by the field's tools.

Why a record of its own: ``trace.json`` is tplab's merge (every rank on one clock, for the
lesson), but the field's tools read torch's per-rank exports: Holistic Trace Analysis (HTA) and
Perfetto load a folder with one trace per rank, each naming its rank in ``distributedInfo`` (as
``torch.profiler`` writes it: backend, rank, world size, the process groups). The job writes them
(``tplab.job.profiled_pass``), the client fetches them (``tplab.wire.remote``), the hand-in copies
them (``tplab.handin.gather``), and the tests and ``benchmarks/hta_check.py`` check them here.

The layout, in the lab folder::

    traces/rank0.pt.trace.json.gz    the TP pass, one file per rank: HTA's trace_dir as it is
    traces/rank1.pt.trace.json.gz
    traces/single/rank0.pt.trace.json.gz   the single-device pass (rank 0 alone), apart, so
                                           that HTA sees each rank once in ``traces/``

Each file is torch's Chrome export, gzip-compressed (HTA and Perfetto read ``.json.gz``), with
every event, arg and flow the profiler wrote. Standard library only: it travels to the pod.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Any

#: the folder of the TP pass's per-rank traces, in the lab folder and the hand-in
TRACES_DIR = "traces"
#: the single-device pass's trace (rank 0 alone), under ``TRACES_DIR``
SINGLE_DIR = "single"
#: the most bytes one rank's compressed trace may take (the job leaves a bigger one out and says
#: so in results.json's timeline; the client fetches each within ``FETCH_LIMIT``)
MAX_RANK_TRACE_BYTES = 16 << 20
#: what the client takes of one file from the (untrusted) pod
FETCH_LIMIT = MAX_RANK_TRACE_BYTES + (64 << 10)
#: the most bytes a reader here unpacks from one file (a gzip bomb stops there)
MAX_UNPACKED_BYTES = 512 << 20
#: the most ranks whose traces the client fetches
MAX_RANKS = 64

_NAME = re.compile(r"^rank(\d{1,3})\.pt\.trace\.json\.gz$")


def rank_trace_name(rank: int) -> str:
    """``rank3.pt.trace.json.gz``: torch's own suffix for a profiler export, by rank."""
    return f"rank{int(rank)}.pt.trace.json.gz"


def rank_trace_path(rank: int, mode: str = "tp") -> str:
    """The file's path in the lab folder (forward slashes): TP in ``traces/``, single apart."""
    folder = TRACES_DIR if mode == "tp" else f"{TRACES_DIR}/{SINGLE_DIR}"
    return f"{folder}/{rank_trace_name(rank)}"


def rank_of_name(name: str) -> int | None:
    """The rank a file name stands for, or None when the name is not one of ours."""
    m = _NAME.match(name)
    return int(m.group(1)) if m and int(m.group(1)) < MAX_RANKS else None


def present(lab_dir: Path) -> list[str]:
    """The rank traces a lab folder holds (paths relative to it, TP first, by rank): plain files
    named as ``rank_trace_path`` names them."""
    out = []
    for folder in (TRACES_DIR, f"{TRACES_DIR}/{SINGLE_DIR}"):
        d = Path(lab_dir) / folder
        try:
            found = [(r, p.name) for p in d.iterdir()
                     if (r := rank_of_name(p.name)) is not None and p.is_file()
                     and not p.is_symlink()]
        except OSError:
            continue
        out += [f"{folder}/{name}" for _, name in sorted(found)]
    return out


def distributed_info(backend: str, rank: int, world_size: int, pg_count: int = 1,
                     pg_config: list[Any] | None = None,
                     nccl_version: str | None = None) -> dict[str, Any]:
    """``distributedInfo`` as ``torch.profiler`` writes it into its trace (the same keys)."""
    info: dict[str, Any] = {"backend": backend, "rank": int(rank), "world_size": int(world_size),
                            "pg_count": int(pg_count), "pg_config": list(pg_config or [])}
    if nccl_version is not None:
        info["nccl_version"] = nccl_version
    return info


def compress(text: bytes) -> bytes:
    """torch's export as a ``.json.gz`` (no file name or time in the header: same input, same
    bytes)."""
    return gzip.compress(text, compresslevel=6, mtime=0)


def unpack(data: bytes, limit: int = MAX_UNPACKED_BYTES) -> bytes:
    """A ``.json.gz`` file's JSON text, at most ``limit`` bytes unpacked (``ValueError`` past it
    or when it is not gzip)."""
    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"not a gzip file ({exc})") from None
    if len(out) > limit or d.unconsumed_tail:
        raise ValueError(f"unpacks to more than {limit} bytes")
    return out


def check_rank_trace(doc: Any, rank: int, world_size: int) -> list[str]:
    """What keeps ``doc`` (one rank's trace, parsed) from being read by HTA as rank ``rank`` of
    ``world_size`` (empty: nothing): the ``distributedInfo`` torch.profiler writes (rank, world
    size, backend), complete events with their args as the profiler wrote them (HTA reads the
    ``External id``, and on a GPU each kernel's ``stream``, ``device`` and ``correlation``), and
    every flow event paired."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents list"]
    problems: list[str] = []
    info = doc.get("distributedInfo")
    if not isinstance(info, dict):
        return ["no distributedInfo (HTA reads each trace's rank there)"]
    if info.get("rank") != rank:
        problems.append(f"distributedInfo.rank is {info.get('rank')!r}, not {rank}")
    if info.get("world_size") != world_size:
        problems.append(f"distributedInfo.world_size is {info.get('world_size')!r}, "
                        f"not {world_size}")
    if not isinstance(info.get("backend"), str) or not info["backend"]:
        problems.append("distributedInfo has no backend")
    complete = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    if not complete:
        problems.append("no complete (X) events")
    ops = [e for e in complete if e.get("cat") in ("cpu_op", "user_annotation")]
    if ops and not all(isinstance(e.get("args"), dict) and "External id" in e["args"]
                       for e in ops):
        problems.append("ops without their args (External id)")
    kernels = [e for e in complete if e.get("cat") == "kernel"]
    need = ("stream", "device", "correlation")
    if not all(isinstance(e.get("args"), dict) and all(k in e["args"] for k in need)
               for e in kernels):
        problems.append("kernels without stream, device or correlation in their args")
    starts = {(e.get("cat"), e.get("id")) for e in doc["traceEvents"]
              if isinstance(e, dict) and e.get("ph") == "s"}
    ends = {(e.get("cat"), e.get("id")) for e in doc["traceEvents"]
            if isinstance(e, dict) and e.get("ph") == "f"}
    if starts != ends:
        problems.append(f"{len(starts ^ ends)} flow events without their other end")
    return problems


def read_rank_trace(data: bytes) -> dict[str, Any]:
    """One ``.json.gz`` file's trace (``ValueError`` when it is not one)."""
    doc = json.loads(unpack(data))
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc
