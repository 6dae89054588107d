"""One Chrome trace for a lab: each rank's profiler trace cut to what matters, the ranks' clocks
aligned, merged into ``trace.json`` (one process per rank), bounded in size.

Why here: every rank of the profiled pass exports torch.profiler's own Chrome trace; the ranks'
traces are separate files with separate clocks, and the lesson (who waited for whom inside an
all-reduce) needs them on one time axis. Each rank turns its export into a **capture**
(``capture_from_chrome``: its complete events in the categories that say where a token's time
went, each stamped on the host's real-time clock), rank 0 gathers the captures and ``merge``
puts them on one clock and writes the trace Perfetto (``ui.perfetto.dev``) and
``chrome://tracing`` open as they are: a ``traceEvents`` list of complete ("X") events with
every arg the profiler wrote, the flow events ("s"/"f": a launch's arrow to its kernel), the
process and thread names ("M"), one process per rank (rank r is pid r + 1: viewers treat pid 0 as
none), and ``otherData`` saying how the clocks were aligned and what, if anything, the size bound
left out. Times are integer ns from the profiler's text to the file (``load_chrome`` reads its
µs as decimals, ``ns_to_us`` writes them back exact): a float holds no ns at epoch scale.

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
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from tplab.records.trace_names import parse_collective, parse_token

#: the trace's complete events kept, by category: the CPU's ops and our spans, and on a GPU the
#: kernels, copies, their launches and the GPU projection of our spans
KEEP_CATS = ("cpu_op", "user_annotation", "kernel", "gpu_user_annotation", "cuda_runtime",
             "cuda_driver", "gpu_memcpy", "gpu_memset")
#: categories that run on a GPU stream (their ``tid`` is the stream)
GPU_CATS = frozenset({"kernel", "gpu_user_annotation", "gpu_memcpy", "gpu_memset"})
#: the flow events kept (Perfetto's arrows: a launch to its kernel, a forward op to its backward)
FLOW_KINDS = ("s", "t", "f")
#: the span each rank wraps around a read of its real-time clock
ANCHOR = "clock anchor"
#: the most bytes trace.json may take (the client fetches it within its own limit above this)
MAX_TRACE_BYTES = 8 << 20
#: the most events one rank sends to rank 0 (its later ones are counted as dropped)
MAX_RANK_EVENTS = 200_000
#: rank r is process ``r + PID_BASE`` in trace.json (Perfetto's importers treat pid 0 as none)
PID_BASE = 1
#: a rank's threads are ``TID_BASE``, ``TID_BASE + 1``, ... in trace.json
TID_BASE = 1


@dataclass(frozen=True, slots=True)
class Ev:
    """One complete event on the merged clock, in integer ns since the trace's time zero (``ts``,
    ``dur``, ``end``: the same in µs, for the split), with the args the profiler wrote."""

    cat: str
    name: str
    ts_ns: int
    dur_ns: int
    tid: int
    corr: int | None = None
    args: dict[str, Any] | None = field(default=None, compare=False)
    ts: float = field(init=False, repr=False, compare=False)
    dur: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ts", self.ts_ns / 1000)
        object.__setattr__(self, "dur", self.dur_ns / 1000)

    @classmethod
    def at_us(cls, cat: str, name: str, ts_us: float, dur_us: float, tid: int,
              corr: int | None = None) -> Ev:
        """An event given in µs (to the ns)."""
        return cls(cat, name, round(ts_us * 1000), round(dur_us * 1000), tid, corr)

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True, slots=True)
class Flow:
    """One flow event (``ph`` s, t or f) on the merged clock: its ends are matched by ``cat`` and
    ``id`` (made unique per rank in trace.json)."""

    ph: str
    cat: str
    name: str
    id: int | str
    ts_ns: int
    tid: int
    bp: str | None = None


def _num(v: Any) -> float | None:
    if isinstance(v, Decimal):
        return float(v)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def load_chrome(text: str | bytes) -> dict[str, Any]:
    """torch's Chrome export, parsed with its fractional numbers as ``Decimal``: the profiler
    writes µs to the ns (``ts``: 1733456789012345.678), more digits than a float holds."""
    doc = json.loads(text, parse_float=Decimal)
    if not isinstance(doc, dict):
        raise ValueError("the profiler's trace is not a JSON object")
    return doc


def us_to_ns(v: Any) -> int | None:
    """A time in µs as the trace writes it (int, Decimal, or float) in whole ns, exactly for the
    first two; None when it is not a number."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v * 1000
    try:
        if isinstance(v, float):
            v = Decimal(repr(v))
        if isinstance(v, Decimal) and v.is_finite():
            return int((v * 1000).to_integral_value())
    except InvalidOperation:
        return None
    return None


def ns_to_us(ns: int) -> int | float:
    """Integer ns as the trace's µs: an int when whole, else the exact decimal to the ns (a
    float whose shortest form is that decimal, for any time below 2**53 ns)."""
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


def _plain(v: Any) -> Any:
    """An arg as JSON: a ``Decimal`` becomes the number it is (int when whole)."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def profiler_offset_ns(chrome: dict[str, Any], anchors: Sequence[int]) -> int:
    """The profiler's clock minus the real-time clock, in ns: the median over the anchor spans
    (in order) of the span's midpoint minus the ``time.time_ns()`` read inside it. 0 without
    anchors (the profiler's stamps are taken as real time)."""
    base = int(chrome.get("baseTimeNanoseconds") or 0)
    spans = sorted((t, us_to_ns(e.get("dur")) or 0) for e in chrome.get("traceEvents") or []
                    if isinstance(e, dict) and e.get("name") == ANCHOR and e.get("ph") == "X"
                    and (t := us_to_ns(e.get("ts"))) is not None)
    diffs = [base + t + d // 2 - read for (t, d), read in zip(spans, anchors)]
    return round(_median(diffs)) if diffs else 0


def capture_from_chrome(chrome: dict[str, Any], *, rank: int, anchors: Sequence[int],
                        host: str, steps: dict[str, dict[int, float]],
                        device: str = "cpu", max_events: int = MAX_RANK_EVENTS) -> dict[str, Any]:
    """A rank's share of the trace, as it travels to rank 0: its kept complete events (with
    their args) and flow events on its real-time clock (integer ns after ``ref_ns``), its thread
    names, and the step times its own clock measured (``steps[mode][pos]``, µs). ``chrome`` is
    best read by ``load_chrome`` (exact times)."""
    base = int(chrome.get("baseTimeNanoseconds") or 0)
    offset = profiler_offset_ns(chrome, anchors)
    kept: list[tuple[int, dict[str, Any]]] = []
    flows: list[tuple[int, dict[str, Any]]] = []
    threads: dict[tuple[str, str], str] = {}
    for e in chrome.get("traceEvents") or []:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "thread_name":
            name = (e.get("args") or {}).get("name")
            if isinstance(name, str):
                threads[(str(e.get("pid")), str(e.get("tid")))] = name
            continue
        ts = us_to_ns(e.get("ts"))
        if ts is None:
            continue
        if ph in FLOW_KINDS and isinstance(e.get("id"), (int, str)) \
                and not isinstance(e.get("id"), bool):
            flows.append((base + ts - offset, e))
            continue
        dur = us_to_ns(e.get("dur"))
        if ph != "X" or e.get("cat") not in KEEP_CATS or dur is None:
            continue
        kept.append((base + ts - offset, e))
    kept.sort(key=lambda p: p[0])
    dropped = max(0, len(kept) - max_events)
    kept = kept[:max_events]
    flows = sorted(flows, key=lambda p: p[0])[:max_events]
    ref = min([t for t, _ in kept[:1]] + [t for t, _ in flows[:1]], default=0)
    tids: dict[tuple[str, str], int] = {}
    names: dict[str, str] = {}

    def tid_of(e: dict[str, Any], gpu: bool) -> int:
        key = (str(e.get("pid")), str(e.get("tid")))
        tid = tids.get(key)
        if tid is None:
            tid = tids[key] = len(tids)
            names[str(tid)] = threads.get(key) or (
                f"GPU {key[0]} stream {key[1]}" if gpu else f"thread {key[1]}")
        return tid

    events = []
    for t_ns, e in kept:
        args = e.get("args")
        events.append([e["cat"], str(e.get("name", "")), t_ns - ref,
                       max(0, us_to_ns(e["dur"]) or 0), tid_of(e, e["cat"] in GPU_CATS),
                       _plain(args) if isinstance(args, dict) else None])
    flow_rows = [[e["ph"], str(e.get("cat", "")), str(e.get("name", "")), _plain(e["id"]),
                  t_ns - ref, tid_of(e, str(e.get("cat", "")) in GPU_CATS),
                  e.get("bp") if isinstance(e.get("bp"), str) else None]
                 for t_ns, e in flows]
    keys = {str(t): f"{k[0]}/{k[1]}" for k, t in tids.items()}
    return {"rank": rank, "host": host, "device": device, "ref_ns": ref,
            "profiler_offset_ns": offset, "anchors": len(anchors), "threads": names,
            "thread_keys": keys,
            "steps": {m: {str(k): v for k, v in s.items()} for m, s in steps.items()},
            "events": events, "flows": flow_rows, "dropped": dropped}


@dataclass
class Merged:
    """The ranks' events on one clock (``events[rank]``, ``flows[rank]``), the steps each rank
    timed, and what the alignment was."""

    events: dict[int, list[Ev]]
    steps: dict[int, dict[str, dict[int, float]]]
    threads: dict[int, dict[int, str]]
    clock: dict[str, Any]
    t0_ns: int
    dropped: int
    flows: dict[int, list[Flow]] = field(default_factory=dict)


def _corr(args: Any) -> int | None:
    c = args.get("correlation") if isinstance(args, dict) else None
    return c if isinstance(c, int) and not isinstance(c, bool) else None


def align(captures: Iterable[dict[str, Any]], barrier_offsets_ns: dict[int, int],
          same_host: bool) -> Merged:
    """Put every capture on rank 0's clock (see the module docstring) with time zero at the
    earliest event, in integer ns. A rank may send several captures (rank 0: the single-device
    pass and the TP pass); their threads are matched by the profiler's own thread ids."""
    caps = sorted(captures, key=lambda c: c["rank"])
    ranks = sorted({c["rank"] for c in caps})
    applied = {r: (0 if same_host else int(barrier_offsets_ns.get(r, 0))) for r in ranks}
    starts = [int(c["ref_ns"]) - applied[c["rank"]] for c in caps
              if c["events"] or c.get("flows")]
    t0 = min(starts) if starts else 0
    events: dict[int, list[Ev]] = {r: [] for r in ranks}
    flows: dict[int, list[Flow]] = {r: [] for r in ranks}
    steps: dict[int, dict[str, dict[int, float]]] = {r: {} for r in ranks}
    threads: dict[int, dict[int, str]] = {r: {} for r in ranks}
    tid_of: dict[int, dict[str, int]] = {r: {} for r in ranks}
    for c in caps:
        r = c["rank"]
        shift = int(c["ref_ns"]) - applied[r] - t0
        local: dict[int, int] = {}
        for t, name in c["threads"].items():
            key = (c.get("thread_keys") or {}).get(t, f"{id(c)}/{t}")
            if key not in tid_of[r]:
                tid_of[r][key] = len(tid_of[r])
                threads[r][tid_of[r][key]] = name
            local[int(t)] = tid_of[r][key]
        events[r].extend(Ev(e[0], e[1], int(e[2]) + shift, int(e[3]),
                            local.get(int(e[4]), int(e[4])), _corr(e[5]), e[5])
                         for e in c["events"])
        flows[r].extend(Flow(f[0], f[1], f[2], f[3], int(f[4]) + shift,
                             local.get(int(f[5]), int(f[5])), f[6])
                        for f in c.get("flows") or [])
        for m, s in c["steps"].items():
            steps[r].setdefault(m, {}).update({int(k): float(v) for k, v in s.items()})
    for evs in events.values():
        evs.sort(key=lambda e: (e.ts_ns, -e.dur_ns))
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
                  dropped=sum(int(c.get("dropped") or 0) for c in caps), flows=flows)


def _token_keys(evs: list[Ev]) -> list[tuple[int, int, tuple[str, int]]]:
    out = []
    for e in evs:
        if e.cat == "user_annotation":
            tok = parse_token(e.name)
            if tok is not None:
                out.append((e.ts_ns, e.ts_ns + e.dur_ns, tok))
    return out


def _step_of(spans: list[tuple[int, int, tuple[str, int]]], ts_ns: int) -> tuple[str, int] | None:
    """The token step (of ``spans``, sorted) an event at ``ts_ns`` falls in, or None."""
    i = bisect_right(spans, (ts_ns, 1 << 62)) - 1  # the last step that started by then
    return spans[i][2] if i >= 0 and ts_ns <= spans[i][1] else None


def pid_of(rank: int) -> int:
    """The rank's process id in trace.json."""
    return rank + PID_BASE


def rank_of(pid: int) -> int:
    """The rank a trace.json process id stands for."""
    return pid - PID_BASE


def _flow_id(rank: int, fid: int | str) -> int | str:
    """A flow's id made unique across the ranks (each rank's profiler counts from its own 0)."""
    return (pid_of(rank) << 40) + fid if isinstance(fid, int) else f"rank{rank}:{fid}"


def trace_document(merged: Merged, *, max_bytes: int = MAX_TRACE_BYTES,
                   other: dict[str, Any] | None = None) -> dict[str, Any]:
    """The merged Chrome trace (JSON object form), at most ``max_bytes`` when written compactly:
    rank r is process ``pid_of(r)``, every event keeps the args its profiler wrote, flows keep
    their arrows, and times are µs exact to the ns (``ns_to_us``).

    Over the bound, whole token steps are left out from the end of the order TP steps (by
    position), single-device steps, events outside any step: the events outside first, then the
    single-device steps, then the last TP ones; ``otherData.bound`` says what was left out."""
    meta: list[dict[str, Any]] = []
    for rank in sorted(merged.events):
        pid = pid_of(rank)
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": TID_BASE,
                     "args": {"name": f"rank {rank}"}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": TID_BASE,
                     "args": {"sort_index": rank}})
        for tid, name in sorted(merged.threads.get(rank, {}).items()):
            meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid + TID_BASE,
                         "args": {"name": name}})
    # each event joins the token step it falls in (or none); tokens are kept in priority order
    groups: dict[tuple[str, int] | None, list[dict[str, Any]]] = {}
    sizes: dict[tuple[str, int] | None, int] = {}

    def put(key: tuple[str, int] | None, d: dict[str, Any]) -> None:
        groups.setdefault(key, []).append(d)
        sizes[key] = sizes.get(key, 0) + len(json.dumps(d)) + 2

    for rank, evs in merged.events.items():
        spans = sorted(_token_keys(evs))
        pid = pid_of(rank)
        for e in evs:
            d = {"ph": "X", "cat": e.cat, "name": e.name, "pid": pid, "tid": e.tid + TID_BASE,
                 "ts": ns_to_us(e.ts_ns), "dur": ns_to_us(e.dur_ns)}
            if e.args:
                d["args"] = e.args
            put(_step_of(spans, e.ts_ns), d)
        for f in merged.flows.get(rank, []):
            d = {"ph": f.ph, "cat": f.cat, "name": f.name, "id": _flow_id(rank, f.id),
                 "pid": pid, "tid": f.tid + TID_BASE, "ts": ns_to_us(f.ts_ns)}
            if f.bp:
                d["bp"] = f.bp
            put(_step_of(spans, f.ts_ns), d)
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
    doc["otherData"]["time"] = ("ts and dur in µs, exact to the ns (integer ns on the ranks' "
                                "clocks, no float arithmetic); time zero is "
                                "clock.time_zero_unix_ns when the clock is given")
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
    non-negative times, positive integer pids and integer tids, a name for every process, spans
    on one thread that nest (a span that half-overlaps another is refused by the viewers'
    importers), and each flow's ends both there."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents list"]
    problems: list[str] = []
    named: set[Any] = set()
    pids: set[Any] = set()
    by_thread: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    flow_ends: dict[str, set[tuple[Any, Any]]] = {"s": set(), "f": set()}
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict) or e.get("ph") not in ("X", "M", *FLOW_KINDS):
            problems.append(f"event {i} is not a complete (X), metadata (M) or flow event")
            continue
        if not isinstance(e.get("pid"), int) or not isinstance(e.get("tid"), int):
            problems.append(f"event {i} has no integer pid and tid")
            continue
        if e["pid"] <= 0:
            problems.append(f"event {i} has pid {e['pid']} (a process id is positive)")
            continue
        if e["ph"] == "M":
            if e.get("name") == "process_name":
                named.add(e["pid"])
            continue
        ts = _num(e.get("ts"))
        if e["ph"] in FLOW_KINDS:
            if ts is None or "id" not in e:
                problems.append(f"flow event {i} has no ts or id")
            elif e["ph"] in flow_ends:
                flow_ends[e["ph"]].add((e.get("cat"), e["id"]))
            continue
        dur = _num(e.get("dur"))
        if ts is None or dur is None or dur < 0 or not isinstance(e.get("name"), str):
            problems.append(f"event {i} ({e.get('name')!r}) has no name, ts or non-negative dur")
            continue
        pids.add(e["pid"])
        by_thread.setdefault((e["pid"], e["tid"]), []).append((ts, ts + dur, e["name"]))
    for pid in sorted(pids - named):
        problems.append(f"process {pid} has no process_name")
    unpaired = flow_ends["s"] ^ flow_ends["f"]
    if unpaired:
        problems.append(f"{len(unpaired)} flows with one end only")
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
    """(rank, mode, token position) -> the collective spans' names inside that token step, in
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
            out[(rank_of(pid), tok[0], tok[1])] = [
                e["name"] for e in evs
                if s <= e["ts"] <= t and parse_collective(e["name"]) is not None]
    return out
