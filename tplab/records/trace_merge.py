"""One Chrome trace for a lab: each rank's profiler trace cut to what matters, the ranks' clocks
aligned, merged into ``trace.json`` (one process per rank), bounded in size.

Why here: every rank of the profiled pass exports torch.profiler's own Chrome trace; the ranks'
traces are separate files with separate clocks, and the lesson (who waited for whom inside an
all-reduce) needs them on one time axis. Each rank turns its export into a **capture**
(``capture_from_chrome``: its complete events in the categories that say where a token's time
went, each stamped on the host's real-time clock), rank 0 gathers the captures and ``merge``
puts them on one clock and writes the trace Perfetto (``ui.perfetto.dev``) and
``chrome://tracing`` open as they are: a ``traceEvents`` list of complete ("X") events plus
the process and thread names ("M"), one pid per rank, and ``otherData`` saying how the clocks
were aligned and what, if anything, the size bound left out.

The clocks (what ``merge`` records under ``otherData.clock``):

* torch.profiler (2.4 and 2.13 alike) stamps its events in microseconds of the host's real-time
  clock (``baseTimeNanoseconds`` + ``ts``); each rank checks that against ``time.time_ns()``
  read inside a few "clock anchor" spans of its own and keeps the median difference
  (``profiler_offset_ns``), so every event is on the rank's real-time clock whatever the
  profiler's base;
* ranks on one host share that clock: no offset is applied, and the offsets measured at a
  barrier are recorded beside it as a check (a barrier's release reaches the ranks a few
  microseconds apart);
* ranks on different hosts have clocks of their own: the offset each rank measured at the
  barrier (its clock minus rank 0's, median over rounds) is subtracted.

Standard library only: the pod merges, the client reads and checks.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tplab.records.trace_names import parse_collective, parse_token

#: the trace's complete events kept, by category: the CPU's ops and our spans, and on a GPU the
#: kernels, copies, their launches and the GPU projection of our spans
KEEP_CATS = ("cpu_op", "user_annotation", "kernel", "gpu_user_annotation", "cuda_runtime",
             "cuda_driver", "gpu_memcpy", "gpu_memset")
#: categories that run on a GPU stream (their ``tid`` is the stream)
GPU_CATS = frozenset({"kernel", "gpu_user_annotation", "gpu_memcpy", "gpu_memset"})
#: the span each rank wraps around a read of its real-time clock
ANCHOR = "clock anchor"
#: the most bytes trace.json may take (the client fetches it within its own limit above this)
MAX_TRACE_BYTES = 8 << 20
#: the most events one rank sends to rank 0 (its later ones are counted as dropped)
MAX_RANK_EVENTS = 200_000


@dataclass(frozen=True, slots=True)
class Ev:
    """One complete event on the merged clock: µs since the trace's time zero."""

    cat: str
    name: str
    ts: float
    dur: float
    tid: int
    corr: int | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def profiler_offset_ns(chrome: dict[str, Any], anchors: Sequence[int]) -> int:
    """The profiler's clock minus the real-time clock, in ns: the median over the anchor spans
    (in order) of the span's midpoint minus the ``time.time_ns()`` read inside it. 0 without
    anchors (the profiler's stamps are taken as real time)."""
    base = int(chrome.get("baseTimeNanoseconds") or 0)
    spans = sorted((e for e in chrome.get("traceEvents") or []
                    if isinstance(e, dict) and e.get("name") == ANCHOR and e.get("ph") == "X"
                    and _num(e.get("ts")) is not None),
                   key=lambda e: float(e["ts"]))
    diffs = [base + round((float(e["ts"]) + float(e.get("dur") or 0) / 2) * 1000) - read
             for e, read in zip(spans, anchors)]
    return round(_median(diffs)) if diffs else 0


def capture_from_chrome(chrome: dict[str, Any], *, rank: int, anchors: Sequence[int],
                        host: str, steps: dict[str, dict[int, float]],
                        device: str = "cpu", max_events: int = MAX_RANK_EVENTS) -> dict[str, Any]:
    """A rank's share of the trace, as it travels to rank 0: its kept complete events on its
    real-time clock (µs after ``ref_ns``), its thread names, and the step times its own clock
    measured (``steps[mode][pos]``, µs)."""
    base = int(chrome.get("baseTimeNanoseconds") or 0)
    offset = profiler_offset_ns(chrome, anchors)
    kept: list[tuple[int, dict[str, Any]]] = []
    threads: dict[tuple[str, str], str] = {}
    for e in chrome.get("traceEvents") or []:
        if not isinstance(e, dict):
            continue
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            name = (e.get("args") or {}).get("name")
            if isinstance(name, str):
                threads[(str(e.get("pid")), str(e.get("tid")))] = name
            continue
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if e.get("ph") != "X" or e.get("cat") not in KEEP_CATS or ts is None or dur is None:
            continue
        kept.append((base + round(ts * 1000) - offset, e))
    kept.sort(key=lambda p: p[0])
    dropped = max(0, len(kept) - max_events)
    kept = kept[:max_events]
    ref = kept[0][0] if kept else 0
    events = []
    tids: dict[tuple[str, str], int] = {}
    names: dict[str, str] = {}
    for t_ns, e in kept:
        key = (str(e.get("pid")), str(e.get("tid")))
        tid = tids.get(key)
        if tid is None:
            tid = tids[key] = len(tids)
            names[str(tid)] = threads.get(key) or (
                f"GPU {key[0]} stream {key[1]}" if e["cat"] in GPU_CATS else f"thread {key[1]}")
        args = e.get("args") or {}
        corr = args.get("correlation") if isinstance(args, dict) else None
        events.append([e["cat"], str(e.get("name", "")), (t_ns - ref) / 1000,
                       max(0.0, float(e["dur"])), tid,
                       corr if isinstance(corr, int) and not isinstance(corr, bool) else None])
    keys = {str(t): f"{k[0]}/{k[1]}" for k, t in tids.items()}
    return {"rank": rank, "host": host, "device": device, "ref_ns": ref,
            "profiler_offset_ns": offset, "anchors": len(anchors), "threads": names,
            "thread_keys": keys,
            "steps": {m: {str(k): v for k, v in s.items()} for m, s in steps.items()},
            "events": events, "dropped": dropped}


@dataclass
class Merged:
    """The ranks' events on one clock (``events[rank]``), the steps each rank timed, and what the
    alignment was."""

    events: dict[int, list[Ev]]
    steps: dict[int, dict[str, dict[int, float]]]
    threads: dict[int, dict[int, str]]
    clock: dict[str, Any]
    t0_ns: int
    dropped: int


def align(captures: Iterable[dict[str, Any]], barrier_offsets_ns: dict[int, int],
          same_host: bool) -> Merged:
    """Put every capture on rank 0's clock (see the module docstring) with time zero at the
    earliest event. A rank may send several captures (rank 0: the single-device pass and the TP
    pass); their threads are matched by the profiler's own thread ids."""
    caps = sorted(captures, key=lambda c: c["rank"])
    ranks = sorted({c["rank"] for c in caps})
    applied = {r: (0 if same_host else int(barrier_offsets_ns.get(r, 0))) for r in ranks}
    starts = [c["ref_ns"] - applied[c["rank"]] for c in caps if c["events"]]
    t0 = min(starts) if starts else 0
    events: dict[int, list[Ev]] = {r: [] for r in ranks}
    steps: dict[int, dict[str, dict[int, float]]] = {r: {} for r in ranks}
    threads: dict[int, dict[int, str]] = {r: {} for r in ranks}
    tid_of: dict[int, dict[str, int]] = {r: {} for r in ranks}
    for c in caps:
        r = c["rank"]
        shift = (c["ref_ns"] - applied[r] - t0) / 1000
        local: dict[int, int] = {}
        for t, name in c["threads"].items():
            key = (c.get("thread_keys") or {}).get(t, f"{id(c)}/{t}")
            if key not in tid_of[r]:
                tid_of[r][key] = len(tid_of[r])
                threads[r][tid_of[r][key]] = name
            local[int(t)] = tid_of[r][key]
        events[r].extend(Ev(e[0], e[1], e[2] + shift, e[3], local.get(int(e[4]), int(e[4])), e[5])
                         for e in c["events"])
        for m, s in c["steps"].items():
            steps[r].setdefault(m, {}).update({int(k): float(v) for k, v in s.items()})
    for evs in events.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
    if same_host:
        how = ("same host: every rank's profiler stamps the host's real-time clock, so no offset "
               "is applied; the offsets measured at a barrier are recorded as a check")
    else:
        how = ("ranks on different hosts: each rank's offset to rank 0, measured at a barrier "
               "(median of rounds), is subtracted from its stamps")
    first = {c["rank"]: c for c in reversed(caps)}
    clock = {"alignment": how, "same_host": same_host,
             "hosts": {str(r): first[r]["host"] for r in ranks},
             "barrier_offsets_us": {str(r): barrier_offsets_ns.get(r, 0) / 1000 for r in ranks},
             "applied_offsets_us": {str(r): v / 1000 for r, v in applied.items()},
             "profiler_offsets_us": {str(r): first[r]["profiler_offset_ns"] / 1000
                                     for r in ranks},
             "anchors": {str(r): first[r]["anchors"] for r in ranks},
             "time_zero_unix_ns": t0}
    return Merged(events=events, steps=steps, threads=threads, clock=clock, t0_ns=t0,
                  dropped=sum(int(c.get("dropped") or 0) for c in caps))


def _token_keys(evs: list[Ev]) -> list[tuple[float, float, tuple[str, int]]]:
    out = []
    for e in evs:
        if e.cat == "user_annotation":
            tok = parse_token(e.name)
            if tok is not None:
                out.append((e.ts, e.end, tok))
    return out


def trace_document(merged: Merged, *, max_bytes: int = MAX_TRACE_BYTES,
                   other: dict[str, Any] | None = None) -> dict[str, Any]:
    """The merged Chrome trace (JSON object form), at most ``max_bytes`` when written compactly.

    Over the bound, whole token steps are left out from the end of the order TP steps (by
    position), single-device steps, events outside any step: the events outside first, then the
    single-device steps, then the last TP ones; ``otherData.bound`` says what was left out."""
    meta: list[dict[str, Any]] = []
    for rank in sorted(merged.events):
        meta.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                     "args": {"name": f"rank {rank}"}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0,
                     "args": {"sort_index": rank}})
        for tid, name in sorted(merged.threads.get(rank, {}).items()):
            meta.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid,
                         "args": {"name": name}})
    # each event joins the token step it falls in (or none); tokens are kept in priority order
    groups: dict[tuple[str, int] | None, list[dict[str, Any]]] = {}
    sizes: dict[tuple[str, int] | None, int] = {}
    for rank, evs in merged.events.items():
        spans = sorted(_token_keys(evs))
        span_starts = [s for s, _, _ in spans]
        for e in evs:
            i = bisect_right(span_starts, e.ts) - 1  # the last step that started by then
            key = spans[i][2] if i >= 0 and e.ts <= spans[i][1] else None
            d = {"ph": "X", "cat": e.cat, "name": e.name, "pid": rank, "tid": e.tid,
                 "ts": round(e.ts, 3), "dur": round(e.dur, 3)}
            if e.corr is not None:
                d["args"] = {"correlation": e.corr}
            groups.setdefault(key, []).append(d)
            sizes[key] = sizes.get(key, 0) + len(json.dumps(d)) + 2
    tokens = sorted((k for k in groups if k is not None), key=lambda k: (k[0] != "tp", k[1]))
    order: list[tuple[str, int] | None] = [*tokens, None]
    doc: dict[str, Any] = {"traceEvents": [], "displayTimeUnit": "ms",
                           "otherData": dict(other or {})}
    budget = max_bytes - len(json.dumps(meta)) - 4096 - len(json.dumps(doc["otherData"]))
    events, left_out, dropped_events = list(meta), [], 0
    full = False  # what is kept is a prefix of ``order``: TP steps first, in order
    for key in order:
        group = groups.get(key, [])
        if not group:
            continue
        if not full and sizes.get(key, 0) <= budget:
            budget -= sizes.get(key, 0)
            events.extend(group)
            continue
        full = True
        dropped_events += len(group)
        left_out.append("outside the token steps" if key is None else f"{key[0]} token {key[1]}")
    doc["traceEvents"] = events
    doc["otherData"]["bound"] = {
        "max_bytes": max_bytes, "left_out": left_out, "events_left_out": dropped_events,
        "events_dropped_on_the_ranks": merged.dropped,
        "note": ("complete" if not left_out and not merged.dropped else
                 f"over {max_bytes} bytes: left out {', '.join(left_out) or 'nothing'}"
                 + (f"; {merged.dropped} events past {MAX_RANK_EVENTS} a rank" if merged.dropped
                    else ""))}
    return doc


def check_trace(doc: Any) -> list[str]:
    """What keeps ``doc`` from being a Chrome trace Perfetto opens as it is (empty: nothing):
    the JSON object form with a ``traceEvents`` list of complete events with numeric,
    non-negative times, integer pids and tids, a name for every process, and spans on one thread
    that nest (a span that half-overlaps another is refused by the viewers' importers)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents list"]
    problems: list[str] = []
    named: set[Any] = set()
    pids: set[Any] = set()
    by_thread: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict) or e.get("ph") not in ("X", "M"):
            problems.append(f"event {i} is not a complete (X) or metadata (M) event")
            continue
        if not isinstance(e.get("pid"), int) or not isinstance(e.get("tid"), int):
            problems.append(f"event {i} has no integer pid and tid")
            continue
        if e["ph"] == "M":
            if e.get("name") == "process_name":
                named.add(e["pid"])
            continue
        ts, dur = _num(e.get("ts")), _num(e.get("dur"))
        if ts is None or dur is None or dur < 0 or not isinstance(e.get("name"), str):
            problems.append(f"event {i} ({e.get('name')!r}) has no name, ts or non-negative dur")
            continue
        pids.add(e["pid"])
        by_thread.setdefault((e["pid"], e["tid"]), []).append((ts, ts + dur, e["name"]))
    for pid in sorted(pids - named):
        problems.append(f"process {pid} has no process_name")
    for (pid, tid), spans in by_thread.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[tuple[float, float, str]] = []
        for s in spans:
            while stack and stack[-1][1] <= s[0] + 1e-3:
                stack.pop()
            if stack and s[1] > stack[-1][1] + 1e-3:
                problems.append(f"pid {pid} tid {tid}: {s[2]!r} at {s[0]:.3f} half-overlaps "
                                f"{stack[-1][2]!r}")
                break
            stack.append(s)
    return problems


def collective_counts(doc: dict[str, Any]) -> dict[tuple[int, str, int], list[str]]:
    """(pid, mode, token position) -> the collective spans' names inside that token step, in
    order (what the bars count: the 2L+1 all-reduces and the gather, on every rank)."""
    out: dict[tuple[int, str, int], list[str]] = {}
    per_pid: dict[int, list[dict[str, Any]]] = {}
    for e in doc.get("traceEvents") or []:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation":
            per_pid.setdefault(e["pid"], []).append(e)
    for pid, evs in per_pid.items():
        evs.sort(key=lambda e: e["ts"])
        toks = [(e["ts"], e["ts"] + e["dur"], parse_token(e["name"])) for e in evs]
        for s, t, tok in toks:
            if tok is None:
                continue
            out[(pid, tok[0], tok[1])] = [e["name"] for e in evs if s <= e["ts"] <= t
                                          and parse_collective(e["name"]) is not None]
    return out
