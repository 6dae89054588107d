"""The headless view of a lab: stage lines, a progress bar over tokens, a final table.

Why separate from the Lab: the orchestrator holds all lab logic and emits events; this module is
one consumer of that stream (the dashboard is the other). Every figure it prints, the token
counts and last per-token times of the progress line included, comes from the one fold
(``tplab.viewmodel.fold.LabState``), so both views agree. ``--json`` mode prints the
stream itself, one event per line, for scripts.

`tplab run` shows a lab; `tplab local` shows the job alone, through the same view with
``job_detail`` (each prompt, each d_model sweep point, the job's own log lines), and prints the
job's figures with ``results_rows``, the table of a results.json (per transport, with the
intervals and the α-β fit), in the same layout as the lab's table.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from tplab.records.events import (
    ErrorEvent, Event, InstanceEvent, LogEvent, StageEvent, PromptDoneEvent, SshEvent,
    SweepPointEvent, TokenEvent, WarningEvent)
from tplab.viewmodel.fold import LabState
from tplab.viewmodel.timeline_view import Timeline, allreduce_text, split_text, timeline_from
from tplab.viewmodel.tokens import share_text

def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f} ms"


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

    def _last(self, mode: str) -> str:
        t = self.state.timings[mode]
        share = share_text(t.last_ar_share) if mode == "tp" else ""
        return _ms(t.last_ms) + (f" ({share})" if share else "")

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
            cost = self.state.cost.accrued_usd
            text = (f"[{bar}] {self.tokens}/{total or '?'} tokens  "
                    f"single {self._last('single')}  tp {self._last('tp')}"
                    + (f"  ${cost:.4f}" if cost is not None else ""))
            self.out.write("\r\x1b[2K" + text)
            self.out.flush()
            self._bar_shown = True
        elif total and self.tokens:
            pct = int(100 * self.tokens / total) // 10 * 10
            if pct > self._last_pct_line:
                self._last_pct_line = pct
                self._line(f"tokens {self.tokens}/{total} ({pct}%)  single "
                           f"{self._last('single')}  tp {self._last('tp')}")

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
        res = summary.get("results") or {}
        s = self.state
        single = res.get("single_per_token_ms", s.timings["single"].mean_ms)
        tp = res.get("tp_per_token_ms", s.timings["tp"].mean_ms)
        speedup = res.get("speedup") or ((single / tp) if single and tp else None)
        rows = [
            ("status", f"{summary.get('status')}" + ("" if self._done_said
                                                      else f" — {summary.get('reason')}")),
            ("single per-token", _ms(single)),
            ("TP per-token", _ms(tp)),
            ("speedup (single/TP)", f"{speedup:.3f}x" if speedup else "-"),
            ("all-reduce per token", _ms(res.get("allreduce_ms_per_token"))),
            ("comm/compute", f"{res['comm_compute_ratio']:.3f}"
             if isinstance(res.get("comm_compute_ratio"), (int, float)) else "-"),
            ("outputs_match", str(res.get("outputs_match", "-"))),
            ("pod", f"{summary.get('pod_id') or 'none created'}"
             + (" (verified gone)" if summary.get("verified_gone") else "")),
            ("actual $", f"${summary['actual_cost_usd']:.4f}" if summary.get("actual_cost_usd")
             is not None else "-"),
            ("job events", f"{summary.get('job_events')} (ssh drops {summary.get('ssh_drops')}, "
                           f"duplicates dropped {summary.get('duplicates')}, gaps "
                           f"{summary.get('gaps')})"),
        ]
        rows[6:6] = timeline_rows(s.timeline)
        if not res and not self.tokens:
            rows = [r for r in rows if r[0] in ("status", "pod", "actual $")]
        for name, path in sorted((summary.get("artifacts") or {}).items()):
            rows.append((f"artifact {name}", path))
        return format_rows(rows)


def timeline_rows(t: Timeline | None) -> list[tuple[str, str]]:
    """The profiled pass's split as table rows: a TP token's median split, an all-reduce's wait
    and wire, a single token's, and where the trace is."""
    if t is None:
        return []
    rows = []
    tp, single = t.splits.get("tp"), t.splits.get("single")
    if tp is not None:
        rows.append(("profiled TP token", f"{split_text(tp)} (median of {tp.tokens}, over "
                                          f"{t.comm}, mean of {tp.ranks} ranks)"))
        ar = allreduce_text(tp)
        if ar:
            rows.append(("per all-reduce", ar))
    if single is not None:
        rows.append(("profiled single token", f"{split_text(single)} (median of "
                                              f"{single.tokens})"))
    rows.append(("trace", f"{t.trace_file} (Perfetto: ui.perfetto.dev; as text: tplab "
                          "timeline DIR)"))
    return rows


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
    return (f"; per prompt p50 {fig['median']:.3f} [{lo:.3f}..{hi:.3f}], spread "
            f"{fig['spread']:.0%}, n={fig['n']}" + (f"  {fig['note']}" if fig.get("unstable")
                                                    else ""))


def results_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """A results.json's figures as table rows: single, then TP per transport (the one carrying
    the figures first), the speedups, the collectives, the instrumentation's cost, the fits."""
    world, primary = r["world_size"], r.get("comm", r.get("backend", "?"))
    others = {k: v for k, v in (r.get("transports") or {}).items() if k != primary}
    single = r["single"]["per_token_ms"]
    rows = [("outputs match", str(r["outputs_match"])
             + (f" (over {', '.join([primary, *others])})" if others else "")),
            ("single per token", f"{r['single_per_token_ms']:.3f} ms (p50 {single['p50']:.3f}, "
             f"p99 {single['p99']:.3f})" + _passes_text(r["single"]))]
    for name, t in [(primary, r), *others.items()]:
        tp = t["tp"]["per_token_ms"]
        same_run = " (same run)" if name != primary else ""
        rows.append((f"TP={world} per token, {name}", f"{t['tp_per_token_ms']:.3f} ms (p50 "
                     f"{tp['p50']:.3f}, p99 {tp['p99']:.3f}) = {t['tp_over_single']:.2f}x "
                     f"single{same_run}" + _passes_text(t["tp"])))
    rows.append(("speedup (single/TP)", ", ".join(
        f"{t['speedup']:.3f} {name}" for name, t in [(primary, r), *others.items()])))
    for name, t in [(primary, r), *others.items()]:
        ratio = t.get("comm_compute_ratio")
        rows.append((f"all-reduce per token, {name}", f"{t['allreduce_ms_per_token']:.3f} ms "
                     f"over {t['allreduce_calls_per_token']:.0f} collectives; comm/compute "
                     + (f"{ratio:.2f}" if ratio is not None else "n/a")))
    rows.append(("instrumentation overhead", f"{r['instrumentation_overhead_ms_per_token']:+.3f} "
                 "ms/token"))
    rows += timeline_rows(timeline_from(r.get("timeline")))
    for name, t in [(primary, r), *others.items()]:
        rows.append((f"alpha, beta (sweep fit), {name}", _fit_text(t.get("sweep"))))
    return rows
