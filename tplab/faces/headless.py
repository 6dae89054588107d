"""The headless view of a lab: stage lines, a progress bar over tokens, a final table.

Why separate from the Lab: the orchestrator holds all lab logic and emits events; this module is
one consumer of that stream (the dashboard is the other). Every figure it prints, the token
counts and latest per-token times of the progress line included, comes from the one fold
(``tplab.viewmodel.fold.LabState``) and its record of the figures, so both views agree. ``--json`` mode prints the
stream itself, one event per line, for scripts.

`tplab run` shows a lab; `tplab local` shows the job alone, through the same view with
``job_detail`` (each prompt, each d_model sweep point, the job's own log lines), and prints the
job's figures with ``results_rows``, the table of a results.json (per transport, with the
intervals and the α-β fit), in the same layout as the lab's table.

Both tables render the lab's one record of its figures (``tplab.figures.lab_figures``): each
figure printed as ``figure.text()``, named with the pass that took it (the timed pass's
latencies, the instrumented pass's all-reduce, the profiled pass's split), so the table, the
dashboard, the manifest and the proof picture print the same characters for the same figure.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from tplab.records.events import (
    ErrorEvent, Event, InstanceEvent, LogEvent, StageEvent, PromptDoneEvent, SshEvent,
    SweepPointEvent, TokenEvent, WarningEvent)
from tplab.money.lab_money import BILLED, ESTIMATE, CostFigure
from tplab.viewmodel.fold import LabState
from tplab.figures.figure import INSTRUMENTED, MS, NONE, TIMED, TIMES, Figure, shown
from tplab.figures.lab_figures import LabFigures
from tplab.viewmodel.timeline_view import Timeline, timeline_from

def stamp(seconds: float) -> str:
    """A line's time, seconds since the lab's first event: "[  12.3s]" (the terminal's and
    the proof picture's, ``tplab.lab.proof_png``, alike)."""
    return f"[{seconds:6.1f}s]"


class TextOut(Protocol):
    """Where the view writes: a text stream (``sys.stdout``, or ``tplab run``'s guarded one)."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


class HeadlessView:
    """Prints a lab's events for a human (TTY: one redrawn progress line; else plain lines)."""

    def __init__(self, out: TextOut = sys.stdout, tty: bool | None = None,
                 total_tokens: int | None = None, start: float | None = None,
                 job_detail: bool = False) -> None:
        self.out = out
        self.job_detail = job_detail  # each prompt, sweep point and job log line (tplab local)
        self.tty = out.isatty() if tty is None else tty
        self.state = LabState()
        self.total_tokens = total_tokens
        #: what the line times count from: the first event's time unless given (the proof
        #: picture counts from the same event, so its times are the terminal's)
        self.start = start
        self._now: float | None = None   # the time of the event being shown
        self._bar_shown = False
        self._last_draw = 0.0
        self._last_pct_line = -1
        self._last_instance: tuple[Any, Any] | None = None
        self._done_said = False    # the ``done`` line (status and reason) was printed

    def set_plan(self, num_prompts: int, new_tokens: int, world_size: int) -> None:
        self.state.set_plan(num_prompts=num_prompts, new_tokens=new_tokens, world_size=world_size)
        self.total_tokens = 2 * num_prompts * new_tokens

    @property
    def tokens(self) -> int:
        """Token events seen so far, both modes (the progress bar's count)."""
        return self.state.tokens.tokens

    def _latest(self) -> str:
        """'latest single 0.80 ms tp 19.9 ms · AR 83% so far (instrumented pass)': each mode's
        latest token, and the all-reduce share as the record has it (never one token's)."""
        text = "latest " + " ".join(
            f"{mode} {Figure(self.state.timings[mode].last_ms, MS, TIMED).text()}"
            for mode in ("single", "tp"))
        share = self.state.figures.allreduce_share
        if share.value is not None:
            text += f" · AR {share.text()} so far ({share.taken})"
        return text

    # ------------------------------------------------------------------ output
    def _line(self, text: str) -> None:
        if self._bar_shown:
            self.out.write("\r\x1b[2K")
            self._bar_shown = False
        now = self._now if self._now is not None else time.time()
        self.out.write(f"{stamp(now - (self.start if self.start is not None else now))} {text}\n")
        self.out.flush()

    def _bar(self, force: bool = False) -> None:
        now = time.monotonic()
        total = self.total_tokens or 0
        if self.tty:
            if not force and now - self._last_draw < 0.1:
                return
            self._last_draw = now
            width = 30
            frac = min(1.0, self.tokens / total) if total else 0.0
            bar = "#" * int(frac * width) + "." * (width - int(frac * width))
            cost = self.state.cost.figure()
            text = (f"[{bar}] {self.tokens}/{total or '?'} tokens  {self._latest()}"
                    + (f"  {cost.text()}" if cost is not None else ""))
            self.out.write("\r\x1b[2K" + text)
            self.out.flush()
            self._bar_shown = True
        elif total and self.tokens:
            pct = int(100 * self.tokens / total) // 10 * 10
            if pct > self._last_pct_line:
                self._last_pct_line = pct
                self._line(f"tokens {self.tokens}/{total} ({pct}%)  {self._latest()}")

    # ------------------------------------------------------------------ events
    def handle(self, ev: Event) -> None:
        if self.start is None:
            self.start = ev.ts
        # the lab's own events at their own time (the orchestrator's clock, which the stream
        # records); the job's when they arrive here (a pod's clock is not this machine's)
        self._now = ev.ts if ev.src == "lab" else time.time()
        self.state.apply(ev)
        if isinstance(ev, TokenEvent):
            self._bar()
        elif isinstance(ev, StageEvent):
            if ev.src == "job":
                self._line(f"job: {ev.name}")
            elif ev.name == "done":
                self._bar(force=True)
                self._line(f"done: {ev.status} — {ev.reason}")
                self._done_said = True
            else:
                self._line(ev.name + (f" (pod {ev.pod_id})" if ev.pod_id else ""))
        elif isinstance(ev, InstanceEvent):
            key = (ev.pod_id, ev.state)
            if key == self._last_instance:
                return
            self._last_instance = key
            price = ev.usd_per_hr
            ssh = f" ssh {ev.ssh_host}:{ev.ssh_port}" if ev.ssh_host else ""
            self._line(f"pod {ev.pod_id} {ev.state}" + (f" ${price:.3f}/h" if price else "") + ssh)
        elif isinstance(ev, SshEvent):
            if ev.state == "dropped":
                self._line(f"ssh dropped ({ev.reason}); reconnecting, resuming at byte "
                           f"{ev.resume_offset}")
            elif ev.state in ("connected", "closed"):
                self._line(f"ssh {ev.state}")
        elif isinstance(ev, WarningEvent):
            self._line(f"WARNING: {ev.msg}")
        elif isinstance(ev, ErrorEvent):
            self._line(("FATAL: " if ev.fatal else "error: ") + ev.msg)
        elif isinstance(ev, LogEvent):
            if ev.headline:
                self._line(ev.msg)  # a choice made for the user: which cloud, say
            elif ev.level in ("warning", "error") or self.job_detail:
                self._line(f"{ev.level}: {ev.msg}")
        elif isinstance(ev, PromptDoneEvent) and self.job_detail:
            mark = "" if ev.mode == "single" else ("  match" if ev.match else "  MISMATCH")
            self._line(f"  {ev.mode:<6} prompt {ev.prompt}: {ev.text[:60]!r}{mark}")
        elif isinstance(ev, SweepPointEvent) and self.job_detail:
            self._line(_sweep_point_text(ev))

    async def consume(self, events: AsyncIterator[Event]) -> None:
        async for ev in events:
            self.handle(ev)

    # ------------------------------------------------------------------ final table
    def table(self, summary: dict[str, Any]) -> str:
        """The final table: the lab's figures as its record holds them (``LabFigures``: the
        lab's own once it wrote them, else made from the results or the stream so far), each
        named with the pass that took it, then the pod, its cost and the transport."""
        fig = self.state.figures
        res = summary.get("results")
        if self.state.lab_figures is None and not self.state.results and isinstance(res, dict) \
                and res:  # the job's results reached the lab but not this view's stream
            fig = LabFigures.from_results(res, cost=fig.cost)
        cost = fig.cost
        if cost is None and summary.get("actual_cost_usd") is not None:
            cost = _billed(summary)
        rows = [("status", f"{summary.get('status')}" + ("" if self._done_said
                                                         else f" — {summary.get('reason')}"))]
        if fig.measured:
            rows += [r for r in fig.rows() if r[0] != "cost"]
            if fig.outputs_match is not None:
                rows.append(("outputs_match", str(fig.outputs_match)))
            if self.state.timeline is not None:
                rows.append(("trace", trace_text(self.state.timeline)))
        rows += [
            ("pod", f"{summary.get('pod_id') or 'none created'}"
             + (" (verified gone)" if summary.get("verified_gone") else "")),
            ("cost", cost.text() if cost is not None else NONE),
        ]
        if fig.measured:
            rows.append(("job events", f"{summary.get('job_events')} (ssh drops "
                                       f"{summary.get('ssh_drops')}, duplicates dropped "
                                       f"{summary.get('duplicates')}, gaps {summary.get('gaps')})"))
        for name, path in sorted((summary.get("artifacts") or {}).items()):
            rows.append((f"artifact {name}", path))
        return format_rows(rows)


def _billed(summary: dict[str, Any]) -> CostFigure:
    """A summary's recorded cost as the lab's cost figure (a lab that ended before its record)."""
    return CostFigure(summary["actual_cost_usd"],
                      BILLED if summary.get("cost_is") == BILLED else ESTIMATE,
                      summary.get("usd_per_hr"))


def trace_text(t: Timeline) -> str:
    """Where the profiled pass's whole trace is, and how to read it."""
    return f"{t.trace_file} (Perfetto: ui.perfetto.dev; as text: tplab timeline DIR)"


def format_rows(rows: list[tuple[str, str]]) -> str:
    """The final table's layout: names in a column, values after them."""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def _sweep_point_text(ev: SweepPointEvent) -> str:
    p = ev.point
    if p is None:
        return f"  d_model {ev.d_model}: skipped ({ev.reason})"
    note = p.instability(p.figures())
    return (f"  d_model {p.d_model}: single {p.single_ms:.3f} ms, TP {p.tp_ms:.3f} "
            f"ms, collectives {p.allreduce_ms:.3f} ms/token"
            f"{'  match' if p.outputs_match else '  MISMATCH'}"
            f"{'  ' + note if note else ''}")


def _fit_text(sweep: dict[str, Any] | None) -> str:
    fit = (sweep or {}).get("fit")
    if fit:
        ci_a, ci_b = fit.get("alpha_ci95_us"), fit.get("beta_ci95_gbps")
        return (f"{fit['alpha_us']:.1f} us" + (f" [{ci_a[0]:.1f}..{ci_a[1]:.1f}]" if ci_a else "")
                + f", {fit['beta_gbps']:.3f} GB/s"
                + (f" [{ci_b[0]:.3f}..{ci_b[1]:.3f}] (95%, {fit.get('method')})" if ci_b else ""))
    return (sweep or {}).get("fit_error") or "n/a"


def _passes_text(mode: dict[str, Any]) -> str:
    """'; per prompt p50 1.02 [1.00..1.05], spread 3%, n=10' and the flag when unstable."""
    fig = (mode.get("passes") or {}).get("p50")
    if not fig:
        return ""
    lo, hi = fig["ci95"]
    return (f"; per prompt p50 {shown(fig['median'], MS)} [{shown(lo, MS)}..{shown(hi, MS)}], "
            f"spread {fig['spread']:.0%}, n={fig['n']}" + (f"  {fig['note']}"
                                                           if fig.get("unstable") else ""))


def results_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """A results.json's figures as table rows (`tplab local`): the record's (``LabFigures``,
    each named with its pass), TP per transport (the one carrying the figures first, the
    others measured in the same run), the instrumentation's cost, the fits."""
    world, primary = r["world_size"], r.get("comm", r.get("backend", "?"))
    others = {k: v for k, v in (r.get("transports") or {}).items() if k != primary}
    f = LabFigures.from_results(r)
    rows = [("outputs match", str(r["outputs_match"])
             + (f" (over {', '.join([primary, *others])})" if others else "")),
            (f.label("single_ms"), f"{f.single_ms.text()} (p50 {f.single_p50_ms.number()}, "
             f"p99 {f.single_p99_ms.number()})" + _passes_text(r["single"]))]
    for name, t in [(primary, r), *others.items()]:
        tf = f if name == primary else LabFigures.from_results({**t, "single": r["single"]})
        same_run = " (same run)" if name != primary else ""
        rows.append((f"TP={world} per token, {name} ({TIMED})",
                     f"{tf.tp_ms.text()} (p50 {tf.tp_p50_ms.number()}, p99 "
                     f"{tf.tp_p99_ms.number()}) = {Figure(t['tp_over_single'], TIMES, TIMED).text()} "
                     f"single{same_run}" + _passes_text(t["tp"])))
    rows.append((f.label("speedup"), ", ".join(
        f"{Figure(t['speedup'], TIMES, TIMED).text()} {name}"
        for name, t in [(primary, r), *others.items()])))
    for name, t in [(primary, r), *others.items()]:
        tf = f if name == primary else LabFigures.from_results(t)
        rows.append((f"all-reduce per token, {name} ({INSTRUMENTED})",
                     f"{tf.allreduce_text()} over {t['allreduce_calls_per_token']:.0f} "
                     f"collectives; comm/compute {tf.comm_compute.text()}"))
    rows.append(("instrumentation overhead", f"{r['instrumentation_overhead_ms_per_token']:+.3f} "
                 "ms/token"))
    rows += f.profiled_rows()
    timeline = timeline_from(r.get("timeline"))
    if timeline is not None:
        rows.append(("trace", trace_text(timeline)))
    for name, t in [(primary, r), *others.items()]:
        rows.append((f"alpha, beta (sweep fit), {name}", _fit_text(t.get("sweep"))))
    return rows
