"""A synthetic lab: a deterministic, realistic event script and a fake Lab that plays it.

Why it exists: the dashboard's speed bars (5,000 token events per second, 1M events) and its
snapshot tests of fixed states (idle, running, terminated, error) need an event stream that is
reproducible to the byte and fast to produce, which a real lab on the mock cloud is not. The
events are built with the real ``EventWriter`` so they satisfy the wire contract; the figures
(prices, timings) are invented and the log says so ("synthetic").

A test and benchmark helper (the tests of the dashboard and ``benchmarks/bench_tui.py``): not part
of the product, which never plays invented figures.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, replace
from typing import Any, AsyncIterator, Iterator

from tplab.records.dmodel import DModelPoint
from tplab.records.events import Event, EventWriter, StageEvent, TokenEvent

T0 = 1_764_450_000.0  # a fixed epoch for deterministic timestamps
#: what timing the collectives adds to a TP step (the instrumented pass is this much slower)
INSTRUMENT_MS = 0.12

OUTPUTS = ("he went to school", "the cats are happy", "she has two apples")


class _Clock:
    """A settable clock for the EventWriter so timestamps are part of the script."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass
class ScriptOptions:
    num_prompts: int = 3
    new_tokens: int = 24
    seed: int = 0
    #: where the script ends: "done" (complete lab), "running" (mid TP decode),
    #: "terminated" (user TERMINATE mid-run), "error" (fatal job error), "profiled" (right after
    #: the profiled pass's timeline event; with ``profiled``)
    until: str = "done"
    #: the job runs the profiled pass after the decode: a ``timeline`` event (and results.json's
    #: section) from ``synthetic_timeline``
    profiled: bool = False


def _synthetic_rank_events(rng: random.Random, n_layer: int = 6, tokens: int = 4
                           ) -> tuple[dict[int, list[Any]], dict[int, dict[str, dict[int, float]]]]:
    """Two ranks' profiled steps as the profiler would record them (µs on one clock): per TP
    step the token span, the ops between the collectives, each collective's span from the rank's
    arrival to a common end after the last arrival; then single steps on rank 0."""
    from tplab.records.trace_merge import Ev
    from tplab.records.trace_names import collective_name, token_name
    names = ([collective_name("embedding", "all-reduce")]
             + [collective_name(p, "all-reduce", i) for i in range(n_layer)
                for p in ("attn-out", "mlp-down")] + [collective_name("logits", "all-gather")])
    events: dict[int, list[Any]] = {0: [], 1: []}
    steps: dict[int, dict[str, dict[int, float]]] = {0: {"tp": {}, "single": {}}, 1: {"tp": {}}}
    t = 1000.0
    for k in range(tokens):
        pos = 3 + k
        cur = {r: t + r * rng.uniform(0, 30) for r in (0, 1)}
        start = dict(cur)
        for name in names:
            arrive = {}
            for r in (0, 1):
                op = rng.uniform(40, 90) * (1.4 if r == 1 and rng.random() < 0.3 else 1.0)
                events[r].append(Ev.at_us("cpu_op", "aten::linear", cur[r] + 3, op, 0))
                arrive[r] = cur[r] + 3 + op + rng.uniform(2, 6)
            end = max(arrive.values()) + rng.uniform(25, 60)
            for r in (0, 1):
                finish = end + rng.uniform(0, 4)
                events[r].append(Ev.at_us("user_annotation", name, arrive[r], finish - arrive[r], 0))
                cur[r] = finish
        for r in (0, 1):
            end_r = cur[r] + rng.uniform(20, 40)
            events[r].append(Ev.at_us("user_annotation", token_name("tp", pos), start[r], end_r - start[r], 0))
            steps[r]["tp"][pos] = round((end_r - start[r]) * rng.uniform(0.97, 0.995), 3)
        t = max(cur.values()) + 200
    for k in range(tokens):
        pos, s0, cur0 = 3 + k, t, t
        for _ in range(2 * n_layer + 2):
            op = rng.uniform(30, 60)
            events[0].append(Ev.at_us("cpu_op", "aten::linear", cur0 + 2, op, 0))
            cur0 += op + rng.uniform(3, 12)
        events[0].append(Ev.at_us("user_annotation", token_name("single", pos), s0, cur0 - s0, 0))
        steps[0]["single"][pos] = round((cur0 - s0) * 0.99, 3)
        t = cur0 + 150
    return events, steps


def synthetic_timeline(seed: int = 0, comm: str = "nccl") -> dict[str, Any]:
    """results.json's ``timeline`` section of a synthetic profiled pass (invented figures, the
    job's own split: ``tplab.records.timeline.timeline_section``)."""
    from tplab.records.timeline import timeline_section
    from tplab.records.trace_merge import Merged
    events, steps = _synthetic_rank_events(random.Random(seed))
    for evs in events.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
    merged = Merged(events=events, steps=steps, threads={0: {0: "main"}, 1: {0: "main"}},
                    clock={"alignment": "same host: synthetic (invented figures)"}, t0_ns=0,
                    dropped=0)
    return timeline_section(merged, {0: "cpu", 1: "cpu"}, comm=comm,
                            taken={"tokens_per_mode": 4, "synthetic": True},
                            trace={"file": "trace.json", "note": "complete"})


def measured_point(d_model: int, single_ms: float, tp_ms: float, *, allreduce_ms: float = 1.0,
                   outputs_match: bool = True, params: int = 1, tokens: int = 8) -> DModelPoint:
    """A d_model sweep point as the job measures one (invented figures; the rest derived)."""
    return DModelPoint(d_model=d_model, n_head=max(1, d_model // 32), params=params,
                       tokens=tokens, single_ms=single_ms, tp_ms=tp_ms,
                       allreduce_ms=allreduce_ms, allreduce_calls=14.0,
                       tp_instrumented_ms=tp_ms + INSTRUMENT_MS, single_p50_ms=single_ms,
                       tp_p50_ms=tp_ms, outputs_match=outputs_match, seconds=0.5)


def lab_script(opts: ScriptOptions | None = None, t0: float = T0) -> list[Event]:
    """Every event of one synthetic lab, lab and job sources interleaved as the orchestrator
    merges them."""
    o = opts or ScriptOptions()
    rng = random.Random(o.seed)
    clock = _Clock(t0)
    lab = EventWriter(src="lab", clock=clock)
    job = EventWriter(src="job", clock=clock)
    out: list[Event] = []
    pod = "synth7x2k9q"
    rate = 0.69
    cap, spent = 3.00, 0.42
    started = [0.0]

    def at(dt: float) -> None:
        clock.t += dt

    def L(type_: str, **f: Any) -> None:
        out.append(lab.make(type_, **f))

    def J(type_: str, **f: Any) -> None:
        out.append(job.make(type_, **f))

    def instance(state: str) -> None:
        L("instance", state=state, pod_id=pod, provider="runpod", gpu_type="NVIDIA GeForce RTX 4090",
          gpu_count=2, spot=True, usd_per_hr=rate, ssh_host="203.0.113.7", ssh_port=22017,
          uptime_s=round(max(0.0, clock.t - started[0]), 1) if started[0] else 0.0)

    def cost() -> None:
        accrued = rate * (clock.t - started[0]) / 3600 if started[0] else 0.0
        L("cost", accrued_usd=round(accrued, 4), usd_per_hr=rate,
          seconds_left=round((cap - spent - accrued) / rate * 3600, 1))

    def figures(billed: float, billed_s: float, gone_at: float) -> None:
        """The lab's figures, as the lab says them before done (one record every face renders)."""
        from tplab.figures.lab_figures import LabFigures
        from tplab.money.lab_money import BILLED, CostFigure
        from tplab.records.events import ResultEvent
        from tplab.viewmodel.tokens import TokenFold
        bill = CostFigure(round(billed, 6), BILLED, rate, round(billed_s, 1), gone_at) \
            if started[0] else None
        result = next((e.results for e in out if isinstance(e, ResultEvent)), None)
        if result is not None:
            made = LabFigures.from_results(result, cost=bill)
        else:
            fold = TokenFold()
            fold.add(out)
            made = LabFigures.from_fold(fold, cost=bill)
        L("figures", figures=made.to_dict())

    def finish(status: str, reason: str) -> list[Event]:
        at(0.4)
        L("phase", name="terminate")
        at(1.8)
        L("phase", name="verify")
        billed_s = clock.t - started[0] if started[0] else 0.0  # to the accepted terminate
        if started[0]:
            at(1.1)
            instance("GONE")
        gone_at = clock.t
        at(0.2)
        L("phase", name="record")
        billed = rate * billed_s / 3600
        L("budget", cap_usd=cap, spent_usd=round(spent + billed, 4), held_usd=0.0,
          remaining_usd=round(cap - spent - billed, 4))
        if started[0]:  # the lab's cost, billed: what every face shows from now on
            L("cost", accrued_usd=round(billed, 6), usd_per_hr=rate, seconds_left=0.0,
              cost_is="billed", ran_s=round(billed_s, 1), ended_at=gone_at)
        at(0.1)
        L("phase", name="manifest")
        figures(billed, billed_s, gone_at)
        at(0.1)
        L("phase", name="done", status=status, reason=reason,
          out_dir="/tmp/tplab-synthetic/run-0001")
        return out

    L("log", level="info", msg="synthetic lab (invented figures, for tests and benchmarks)")
    L("phase", name="preflight")
    L("budget", cap_usd=cap, spent_usd=spent, held_usd=0.0, remaining_usd=cap - spent)
    at(0.6)
    L("phase", name="authorize")
    L("budget", cap_usd=cap, spent_usd=spent, held_usd=0.75, remaining_usd=cap - spent - 0.75,
      authorized_usd=0.75)
    at(0.3)
    L("phase", name="create")
    instance("CREATED")
    at(2.5)
    L("phase", name="boot")
    started[0] = clock.t
    instance("RUNNING")
    at(9.0)
    L("phase", name="connect")
    L("ssh", state="connecting")
    at(1.2)
    L("ssh", state="connected")
    L("heartbeat", age_s=0.4)
    at(0.5)
    L("phase", name="upload")
    at(2.0)
    L("phase", name="run")
    cost()
    J("phase", name="load", num_prompts=o.num_prompts, new_tokens=o.new_tokens, world_size=2)
    J("log", level="info", msg="rank 0: nccl backend, world_size=2")
    for mode, base, ar in (("single", 0.92, 0.0), ("tp", 1.55, 0.62)):
        at(0.3)
        J("phase", name="baseline" if mode == "single" else "tp")
        for p in range(o.num_prompts):
            for pos in range(o.new_tokens):
                ms = base * (1 + 0.08 * rng.random()) + (0.9 if rng.random() < 0.02 else 0.0)
                a = ar * (1 + 0.1 * rng.random()) if ar else 0.0
                at(ms / 1000)
                if ar:  # as the job: the all-reduce from the instrumented pass, its own ms
                    J("token", mode=mode, prompt=p, pos=pos, ms=round(ms, 4),
                      ar_ms=round(a, 4), ms_instrumented=round(ms + INSTRUMENT_MS, 4),
                      ar_measured=True, token=rng.randrange(64))
                else:
                    J("token", mode=mode, prompt=p, pos=pos, ms=round(ms, 4), ar_ms=0.0,
                      ar_measured=False, token=rng.randrange(64))
                if (mode == "tp" and o.until in ("running", "terminated", "error")
                        and p == o.num_prompts - 1 and pos == o.new_tokens // 2):
                    at(0.7)
                    L("heartbeat", age_s=0.7)
                    cost()
                    if o.until == "running":
                        return out
                    if o.until == "terminated":
                        L("log", level="warning", msg="terminate requested: user")
                        return finish("STOPPED", "stopped by the user (user)")
                    J("log", level="error", msg="Traceback (most recent call last): ...")
                    J("error", msg="CUDA error: an illegal memory access was encountered",
                      fatal=True)
                    return finish("FAILED", "job failed: CUDA error: an illegal memory access")
            text = OUTPUTS[p % len(OUTPUTS)]
            J("prompt_done", mode=mode, prompt=p, text=text, n_tokens=o.new_tokens)
        at(0.5)
        L("heartbeat", age_s=0.5)
        cost()
    timeline = synthetic_timeline(o.seed) if o.profiled else None
    if timeline is not None:
        at(0.3)
        J("phase", name="profile", tokens=4, modes=["single", "tp"], comm="nccl")
        at(0.8)
        J("timeline", section=timeline)
        if o.until == "profiled":
            return out
    tokens = [e for e in out if isinstance(e, TokenEvent)]
    singles = [e.ms for e in tokens if e.mode == "single"]
    tps = [e.ms for e in tokens if e.mode == "tp"]
    ars = [e.ar_ms for e in tokens if e.mode == "tp"]

    def summary(xs: list[float]) -> dict[str, float]:
        s = sorted(xs)
        return {"n": len(s), "mean": round(sum(s) / len(s), 4), "p50": s[len(s) // 2],
                "p99": s[min(len(s) - 1, int(0.99 * len(s)))]}

    single, tp = summary(singles), summary(tps)
    ar_mean = sum(ars) / len(ars)
    # shaped like the job's results.json (tplab/records/results.py), the fields the views read
    J("result", results={
        "outputs_match": True, "world_size": 2, "device_type": "cuda", "backend": "nccl",
        "single_per_token_ms": single["mean"], "tp_per_token_ms": tp["mean"],
        "speedup": round(single["mean"] / tp["mean"], 3),
        "allreduce_ms_per_token": round(ar_mean, 4),
        "comm_compute_ratio": round(ar_mean / (tp["mean"] + INSTRUMENT_MS - ar_mean), 3),
        "single": {"per_token_ms": single},
        "tp": {"per_token_ms": tp, "instrumented_per_token_ms": {
            **tp, "mean": round(tp["mean"] + INSTRUMENT_MS, 4)}},
        "model": {"d_model": 128, "n_layer": 6, "n_head": 8, "vocab_size": 600},
        **({"timeline": timeline} if timeline is not None else {})})
    at(0.4)
    L("phase", name="fetch")
    return finish("COMPLETE", "")


def token_flood(n: int | None = None, t0: float = T0, rate: float = 5000.0) -> Iterator[Event]:
    """Token events without end (or n of them), alternating modes, timestamps at ``rate``/s."""
    clock = _Clock(t0)
    w = EventWriter(src="job", clock=clock)
    i = 0
    per_prompt = 100
    while n is None or i < n:
        clock.t = t0 + i / rate
        mode = "single" if (i // per_prompt) % 2 == 0 else "tp"
        yield w.make("token", mode=mode, prompt=(i // (2 * per_prompt)) % 10,
                     pos=i % per_prompt, ms=0.9 + (i % 17) * 0.01,
                     ar_ms=0.3 if mode == "tp" else 0.0, token=i % 64)
        i += 1


@dataclass
class SyntheticOutcome:
    """Shaped like the orchestrator's LabOutcome, so the app treats both alike."""

    status: str
    reason: str
    out_dir: str | None
    pod_id: str | None
    verified_gone: bool
    exit_code: int


class SyntheticLab:
    """Plays ``lab_script`` (or a token flood) through the Lab API the dashboard uses:
    ``subscribe()``, ``await run()``, ``request_terminate()``.

    ``speed`` scales the script's time (0 = as fast as possible); ``boot_speed``, when given,
    scales it until the first token instead (the script boots for 16 s), and ``teardown_speed``
    the terminate path when given (the script's 3.7 s from terminate to done; 0: at once). With
    ``flood_rate`` set, the lab emits that many token events per second, in 10 ms batches, until
    terminated: the benchmark's load. A terminate request switches the script to its terminate
    path at once, as a lab acts on it, also in the middle of a long wait (the boot's).
    ``restamp`` moves the script's timestamps to wall time (for a person watching it).
    """

    def __init__(self, opts: ScriptOptions | None = None, *, speed: float = 0.0,
                 flood_rate: float | None = None, out_dir: str | None = None,
                 restamp: bool = False, boot_speed: float | None = None,
                 teardown_speed: float | None = None) -> None:
        self.opts = opts or ScriptOptions()
        self.speed = speed
        self.boot_speed = boot_speed or speed  # until the first token (a 16 s boot in the script)
        self.teardown_speed = teardown_speed  # None: the pace of where it was cut
        self.flood_rate = flood_rate
        self.out_dir = out_dir
        self.terminate_calls: list[str] = []
        self._queues: list[asyncio.Queue[Event | None]] = []
        self._terminate = asyncio.Event()
        self.emitted = 0
        self.dropped = 0
        self.restamp = restamp
        self._t_base: tuple[float, float] | None = None

    def subscribe(self, maxsize: int = 100_000) -> AsyncIterator[Event]:
        """Like the orchestrator's: a bounded queue that drops its oldest event when full."""
        q: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=maxsize)
        self._queues.append(q)
        return self._drain(q)

    @staticmethod
    async def _drain(q: asyncio.Queue[Event | None]) -> AsyncIterator[Event]:
        while True:
            ev = await q.get()
            if ev is None:
                return
            yield ev

    def request_terminate(self, reason: str = "user") -> None:
        self.terminate_calls.append(reason)
        self._terminate.set()

    def _emit(self, ev: Event) -> None:
        self.emitted += 1
        if self.restamp:  # script time -> wall time, so "time in state" etc. read true
            if self._t_base is None:
                self._t_base = (time.time(), ev.ts)
            wall, t0 = self._t_base
            ev = replace(ev, ts=wall + (ev.ts - t0) / (self.speed or 1.0))
        for q in self._queues:
            if q.full():
                q.get_nowait()
                self.dropped += 1
            q.put_nowait(ev)

    async def run(self) -> SyntheticOutcome:
        try:
            if self.flood_rate:
                return await self._run_flood()
            return await self._run_script()
        finally:
            for q in self._queues:
                if q.full():
                    q.get_nowait()
                q.put_nowait(None)

    async def _run_script(self) -> SyntheticOutcome:
        full = lab_script(self.opts)
        events, prev_ts = full, None
        i, booting = 0, True
        while i < len(events):
            ev = events[i]
            if self._terminate.is_set() and events is full:
                # switch to the terminate path at the same point of the script (built only now:
                # a long script costs a fifth of a second to build)
                cut = lab_script(ScriptOptions(**{**self.opts.__dict__, "until": "terminated"}))
                j = next((k for k, e in enumerate(cut) if isinstance(e, StageEvent)
                          and e.name == "terminate"), len(cut))
                shift = (prev_ts or cut[j].ts) - cut[j].ts
                events = [replace(e, ts=e.ts + shift) for e in cut[j:]]
                i = 0
                continue
            if ev.type == "token":
                booting = False
            pace = (self.teardown_speed if events is not full and self.teardown_speed is not None
                    else self.boot_speed if booting else self.speed)
            if pace and prev_ts is not None and ev.ts > prev_ts:
                wait = (ev.ts - prev_ts) / pace
                if events is full and wait > 0.05:  # a long wait: a terminate ends it
                    if await self._terminated_within(wait):
                        continue
                else:
                    await asyncio.sleep(wait)
            elif i % 64 == 0:
                await asyncio.sleep(0)
            prev_ts = ev.ts
            self._emit(ev)
            i += 1
        done = events[-1]
        assert isinstance(done, StageEvent)  # the script ends with the lab's `done`
        status = done.status or "FAILED"
        return SyntheticOutcome(status=status, reason=done.reason or "",
                                out_dir=self.out_dir or done.out_dir, pod_id="synth7x2k9q",
                                verified_gone=True,
                                exit_code={"COMPLETE": 0, "STOPPED": 4}.get(status, 1))

    async def _terminated_within(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if a terminate is requested meanwhile (then True)."""
        try:
            await asyncio.wait_for(self._terminate.wait(), timeout=seconds)
        except TimeoutError:
            return False
        return True

    async def _run_flood(self) -> SyntheticOutcome:
        loop = asyncio.get_running_loop()
        # the load generator should cost little next to the app it loads: build a pool of
        # events once and cycle it (LabState does not look at seq)
        pool = await asyncio.to_thread(list, token_flood(n=4000, rate=self.flood_rate))
        start = loop.time()
        sent = 0
        while not self._terminate.is_set():
            due = int((loop.time() - start) * self.flood_rate)
            while sent < due:
                self._emit(pool[sent % len(pool)])
                sent += 1
            await asyncio.sleep(0.01)
        return SyntheticOutcome(status="STOPPED", reason="stopped by the user (user)",
                                out_dir=self.out_dir, pod_id=None, verified_gone=True, exit_code=4)
