"""Where a token's time goes, rank by rank: results.json's ``timeline`` section, from the trace.

Why this module exists: "AR 78%" hides the lesson. Of the time a rank spends inside an
all-reduce, part is bytes on the wire and part is waiting for the other rank to arrive; between
the collectives the rank computes, and what is neither is launch, Python and host gaps. This
module takes the ranks' events on one clock (``trace_merge.align``) and splits each profiled
token step, per rank, into four parts that cover it:

* **compute**: the rank's ops (CPU ops; on a GPU its kernels) outside the collectives;
* **on the wire**: for each collective, from the moment the *last* rank arrived to this rank's
  end of it — the part no rank could have saved by arriving earlier;
* **waiting**: for each collective, from this rank's own arrival to the last rank's arrival —
  the skew between the ranks (zero on the rank that arrived last);
* **rest**: the step's time covered by none of these (Python, launches, host gaps).

A collective instance is one (mode, token position, index within the step) and is matched across
ranks by that index and its name (``trace_names``). A rank's arrival and end are its span's
start and end: on the CPU the labelled span around the collective, on a GPU the kernels launched
inside it (the NCCL kernel spins on the GPU until its peer arrives, so the wait is in there). The
step's own clock (``perf_counter`` around the step, on every rank) is recorded beside the parts:
each rank's median over its steps must add up to it within ``SUM_LIMIT`` (``sum_check``; one
step alone can be off by a deschedule outside the clock, which the span counts as rest).

Standard library only: the pod computes it, the client reads it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tplab.records.trace_merge import GPU_CATS, Ev, Merged
from tplab.records.trace_names import parse_collective, parse_token

#: compute + wire + wait + rest must be within this share of the step's own time
SUM_LIMIT = 0.10
#: the most compute intervals kept per rank and token for drawing its lane (a token is ~80 ops
#: on one device, ~110 on a TP rank: each kept apart, so its gaps are drawn as the rest they are)
MAX_BUSY = 160
PARTS = ("compute_us", "wire_us", "wait_us", "rest_us")


def _merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _clip(intervals: Iterable[tuple[float, float]], lo: float, hi: float
          ) -> list[tuple[float, float]]:
    return _merge((max(s, lo), min(e, hi)) for s, e in intervals)


def _length(intervals: Iterable[tuple[float, float]]) -> float:
    return sum(e - s for s, e in intervals)


def _minus(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``a`` without ``b`` (both merged)."""
    out = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


@dataclass
class RankStep:
    """One rank's view of one profiled step: its window, its collectives in order (name, arrival,
    end), and its compute intervals."""

    start: float
    end: float
    collectives: list[tuple[str, float, float]] = field(default_factory=list)
    compute: list[tuple[float, float]] = field(default_factory=list)


def _within(e: Ev, s: float, t: float) -> bool:
    return e.ts >= s - 1e-3 and e.end <= t + 1e-3


def rank_steps(events: Sequence[Ev], device: str) -> dict[tuple[str, int], RankStep]:
    """Each profiled step of one rank, from its events (CPU spans and ops; on a GPU the kernels
    each span launched, matched by their correlation id)."""
    cpu = sorted((e for e in events if e.cat not in GPU_CATS), key=lambda e: e.ts)
    starts = [e.ts for e in cpu]

    def window_of(s: float, t: float) -> list[Ev]:  # the CPU events starting within [s, t]
        return cpu[bisect_left(starts, s - 1e-3):bisect_right(starts, t + 1e-3)]

    tokens = [(e, parse_token(e.name)) for e in cpu if e.cat == "user_annotation"]
    kernels: dict[int, list[Ev]] = {}
    if device == "cuda":
        for e in events:
            if e.cat in GPU_CATS and e.cat != "gpu_user_annotation" and e.corr is not None:
                kernels.setdefault(e.corr, []).append(e)
    launch_cats = ("cuda_runtime", "cuda_driver")
    out: dict[tuple[str, int], RankStep] = {}
    for tok_ev, key in tokens:
        if key is None:
            continue
        s, t = tok_ev.ts, tok_ev.end
        step = RankStep(s, t)
        window = window_of(s, t)
        mine = sorted((c for c in window if c.tid == tok_ev.tid and c.cat == "user_annotation"
                       and parse_collective(c.name) and _within(c, s, t)),
                      key=lambda c: c.ts)
        if device == "cuda":
            owned: dict[int, list[Ev]] = {}
            free: list[Ev] = []
            for la in window:
                if la.cat not in launch_cats or la.corr is None or not _within(la, s, t):
                    continue
                ks = kernels.get(la.corr or -1, [])
                idx = next((i for i, c in enumerate(mine) if c.ts <= la.ts <= c.end), None)
                if idx is None:
                    free.extend(ks)
                else:
                    owned.setdefault(idx, []).extend(ks)
            for i, c in enumerate(mine):
                got = owned.get(i) or []
                # the collective's own kernels (NCCL's) are its time on the GPU; what else it
                # launched (the output's copy) is compute
                comm = [k for k in got if "nccl" in k.name.lower()] or got
                free.extend(k for k in got if k not in comm)
                a, b = ((min(k.ts for k in comm), max(k.end for k in comm)) if comm
                        else (c.ts, c.end))
                step.collectives.append((c.name, a, b))
            step.compute = _merge((k.ts, k.end) for k in free)
        else:
            step.collectives = [(c.name, c.ts, c.end) for c in mine]
            inside = [(c.ts, c.end) for c in mine]
            ops = [e for e in window if e.cat == "cpu_op" and e.tid == tok_ev.tid and _within(e, s, t)
                   and not any(a - 1e-3 <= e.ts and e.end <= b + 1e-3 for a, b in inside)]
            step.compute = _merge((e.ts, e.end) for e in ops)
        out[key] = step
    return out


def _busy(intervals: list[tuple[float, float]], t0: float, span: float) -> list[list[float]]:
    """Compute intervals for a lane, relative to ``t0``: gaps under 0.5 µs (the trace's own
    rounding) closed, at most ``MAX_BUSY`` kept (the shortest gaps closed first; the view draws
    the lane's compute to its ``compute_us`` whatever those closed gaps add)."""
    merged = [list(i) for i in intervals]
    gap = 0.5
    joined: list[list[float]] = []
    for s, e in merged:
        if joined and s - joined[-1][1] < gap:
            joined[-1][1] = max(joined[-1][1], e)
        else:
            joined.append([s, e])
    while len(joined) > MAX_BUSY:
        i = min(range(len(joined) - 1), key=lambda k: joined[k + 1][0] - joined[k][1])
        joined[i:i + 2] = [[joined[i][0], joined[i + 1][1]]]
    return [[round(s - t0, 3), round(e - t0, 3)] for s, e in joined]


def split_step(mode: str, pos: int, steps: dict[int, RankStep], step_us: dict[int, float]
               ) -> dict[str, Any] | None:
    """One profiled step across the ranks: per rank the four parts (µs), its lane (relative to
    the earliest rank's start), and each collective's arrivals and ends. None when the ranks do
    not show the same collectives (a rank's trace was cut short)."""
    ranks = sorted(steps)
    names = [[c[0] for c in steps[r].collectives] for r in ranks]
    if any(n != names[0] for n in names):
        return None
    t0 = min(steps[r].start for r in ranks)
    arrive = [max(steps[r].collectives[i][1] for r in ranks) for i in range(len(names[0]))]
    inconsistent = 0
    rows = []
    for r in ranks:
        st = steps[r]
        wire = wait = 0.0
        for i, (_, a, b) in enumerate(st.collectives):
            if b < arrive[i]:  # ended before the last rank arrived: the clocks disagree
                inconsistent += 1
                wait += b - a
                continue
            wait += arrive[i] - a
            wire += b - arrive[i]
        coll = _clip(((a, b) for _, a, b in st.collectives), st.start, st.end)
        comp = _minus(_clip(st.compute, st.start, st.end), coll)
        token = st.end - st.start
        compute = _length(comp)
        rest = max(0.0, token - _length(_merge(coll + comp)))
        measured = step_us.get(r)
        total = compute + wire + wait + rest
        rows.append({"rank": r, "start": round(st.start - t0, 3), "end": round(st.end - t0, 3),
                     "token_us": round(token, 3), "step_us": measured,
                     "compute_us": round(compute, 3), "wire_us": round(wire, 3),
                     "wait_us": round(wait, 3), "rest_us": round(rest, 3),
                     "sum_ratio": (total / measured) if measured else None,
                     "busy": _busy(comp, t0, token)})
    colls = []
    for i, name in enumerate(names[0]):
        c = parse_collective(name)
        colls.append({"name": name, "short": c.short if c else "?", "op": c.op if c else "?",
                      "start": [round(steps[r].collectives[i][1] - t0, 3) for r in ranks],
                      "end": [round(steps[r].collectives[i][2] - t0, 3) for r in ranks],
                      "arrive": round(arrive[i] - t0, 3)})
    return {"mode": mode, "pos": pos, "t0": round(t0, 3), "ranks": rows, "collectives": colls,
            "clock_inconsistencies": inconsistent}


def _median(xs: Sequence[float]) -> float | None:
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _per_call(tok: dict[str, Any], op: str) -> tuple[int, float, float]:
    """(calls, mean wait µs per token, mean wire µs per token) of one op's instances in a step,
    averaged over the ranks."""
    ranks = tok["ranks"]
    calls = [c for c in tok["collectives"] if c["op"] == op]
    wait = wire = 0.0
    for c in calls:
        for k in range(len(ranks)):
            a, b = c["start"][k], c["end"][k]
            wait += max(0.0, min(c["arrive"], b) - a)
            wire += max(0.0, b - c["arrive"])
    n = max(1, len(ranks))
    return len(calls), wait / n, wire / n


def mode_summary(tokens: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over a mode's profiled steps: per rank and over the ranks (mean of the ranks per
    step, then the median over the steps); and each op's split per call and as a share of the
    step (the dashboard's "AR" share, split into wire and wait)."""
    if not tokens:
        return {}
    ranks = sorted({r["rank"] for t in tokens for r in t["ranks"]})
    per_rank = []
    for rk in ranks:
        rows = [r for t in tokens for r in t["ranks"] if r["rank"] == rk]
        per_rank.append({"rank": rk, "token_us": _median([r["token_us"] for r in rows]),
                         **{p: _median([r[p] for r in rows]) for p in PARTS}})
    out: dict[str, Any] = {
        "tokens": len(tokens), "ranks": per_rank,
        "token_us": _median([sum(r["token_us"] for r in t["ranks"]) / len(t["ranks"])
                             for t in tokens])}
    for p in PARTS:
        out[p] = _median([sum(r[p] for r in t["ranks"]) / len(t["ranks"]) for t in tokens])
    for op, key in (("all-reduce", "allreduce"), ("all-gather", "allgather")):
        rows3 = [(_per_call(t, op), sum(r["token_us"] for r in t["ranks"]) / len(t["ranks"]))
                 for t in tokens]
        calls = _median([c for (c, _, _), _ in rows3]) or 0
        if not calls:
            continue
        wait = _median([w for (_, w, _), _ in rows3]) or 0.0
        wire = _median([x for (_, _, x), _ in rows3]) or 0.0
        tok_us = out["token_us"] or 0.0
        out[key] = {"calls_per_token": calls, "us_per_token": wait + wire,
                    "wait_us_per_token": wait, "wire_us_per_token": wire,
                    "us_per_call": (wait + wire) / calls, "wait_us_per_call": wait / calls,
                    "wire_us_per_call": wire / calls,
                    "wait_share": wait / (wait + wire) if wait + wire > 0 else None,
                    "share_of_token": (wait + wire) / tok_us if tok_us else None,
                    "wire_share_of_token": wire / tok_us if tok_us else None,
                    "wait_share_of_token": wait / tok_us if tok_us else None}
    return out


def sum_check(modes: dict[str, list[dict[str, Any]]], limit: float = SUM_LIMIT) -> dict[str, Any]:
    """How far compute + wire + wait + rest lands from each step's own clock: per rank and mode
    the median over its steps (``ok`` when every one is within ``limit``), and the worst single
    step. One step can be off alone: a rank descheduled between its clock's read and its span's
    edge (a loaded host) puts that time in the span, as rest, and not on the clock; a profiler
    whose clock disagreed with the rank's would move every step."""
    ratios: dict[tuple[str, int], list[float]] = {}
    for mode, toks in modes.items():
        for t in toks:
            for r in t["ranks"]:
                if isinstance(r.get("sum_ratio"), (int, float)):
                    ratios.setdefault((mode, r["rank"]), []).append(r["sum_ratio"])
    flat = [x for xs in ratios.values() for x in xs]
    worst = max((abs(x - 1.0) for x in flat), default=None)
    medians = [abs(_median(xs) - 1.0) for xs in ratios.values()]  # type: ignore[operator]
    median_worst = max(medians, default=None)
    return {"worst": worst, "median_worst": median_worst, "limit": limit,
            "ok": median_worst is not None and median_worst <= limit, "checked": len(flat),
            "definition": "|compute + wire + wait + rest - step| / step per rank and step, the "
                          "step timed by perf_counter on the rank itself (outside the profiler); "
                          "ok: each rank's median over its steps, per mode, within the limit"}


def timeline_section(merged: Merged, devices: dict[int, str], *, comm: str,
                     taken: dict[str, Any], trace: dict[str, Any]) -> dict[str, Any]:
    """results.json's ``timeline``: every profiled step split per rank, the medians per mode, the
    sum check, how it was taken, the clocks' alignment and what trace.json holds."""
    per_rank = {r: rank_steps(evs, devices.get(r, "cpu")) for r, evs in merged.events.items()}
    keys = sorted({k for steps in per_rank.values() for k in steps},
                  key=lambda k: (k[0] != "tp", k[1]))
    modes: dict[str, list[dict[str, Any]]] = {}
    unmatched = []
    for mode, pos in keys:
        steps = {r: s[(mode, pos)] for r, s in per_rank.items() if (mode, pos) in s}
        times = {r: merged.steps.get(r, {}).get(mode, {}).get(pos) for r in steps}
        row = split_step(mode, pos, steps, {r: v for r, v in times.items() if v is not None})
        if row is None:
            unmatched.append(f"{mode} token {pos}")
            continue
        modes.setdefault(mode, []).append(row)
    waits = [r["wait_us"] for t in modes.get("tp", []) for r in t["ranks"]]
    return {
        "taken": taken, "comm": comm, "clock": merged.clock, "trace": trace,
        "modes": {m: {"tokens": toks, "median": mode_summary(toks)} for m, toks in modes.items()},
        "sum_check": sum_check(modes), "unmatched_steps": unmatched,
        "waiting_seen": any(w > 0 for w in waits),
        "clock_inconsistencies": sum(t["clock_inconsistencies"] for toks in modes.values()
                                     for t in toks),
        "definitions": {
            "compute_us": "the rank's ops outside the collectives (CPU ops; on a GPU its kernels)",
            "wire_us": "per collective, from the last rank's arrival to this rank's end of it",
            "wait_us": "per collective, from this rank's arrival to the last rank's arrival",
            "rest_us": "the step's time covered by neither (Python, launches, host gaps)",
            "median": "per step the mean over the ranks, then the median over the steps"}}
