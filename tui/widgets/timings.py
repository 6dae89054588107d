"""Timing figures beside the plot: progress, running p50 / p99, all-reduce cost, and whether
TP decoded the same tokens as the single device.

Live figures come from LabState's bounded histograms; once the job's ``result`` arrives its own
figures (computed on the pod from every sample) replace them and are marked "job".

The job times TP twice: an uninstrumented pass (the tp column: the latency) and an instrumented
one, whose timers around each collective give the all-reduce ms and comm/compute. Those two
rows say so (``*``) and show the all-reduce inside the instrumented pass's own token time, so an
all-reduce above the tp mean reads as what it is, not as a contradiction.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tplab.viewmodel.fold import LabState
from tplab.records.untrusted import finite
from tui.format import DASH, ms, ratio
from tui.widgets.panel import StatePanel, rows


def _res(results: dict[str, Any] | None, mode: str, key: str) -> float | None:
    """``results[mode]["per_token_ms"][key]`` of the job's results.json, if it is a number."""
    try:
        v = (results or {})[mode]["per_token_ms"][key]
    except (KeyError, TypeError):
        return None
    return finite(v)


def _top(results: dict[str, Any] | None, *keys: str) -> Any:
    for k in keys:
        if results and results.get(k) is not None:
            return results[k]
    return None


def match_text(state: LabState) -> Text:
    verdict = state.outputs_match()
    same, compared = state.prompts_matching()
    if verdict is True:
        return Text("✓ identical (job verdict)", style="bold green")
    if verdict is False:
        return Text("✗ DIFFERENT (job verdict)", style="bold red")
    if compared == 0:
        return Text(DASH)
    style = "green" if same == compared else "bold red"
    return Text(f"{same}/{compared} prompts identical so far", style=style)


#: the rows timed in the instrumented TP pass carry this mark, explained by PASS_NOTE
PASS_MARK = "*"
PASS_NOTE = "* instrumented pass; tp column: uninstrumented"


def allreduce_text(ar_ms: float | None, token_ms: float | None) -> str:
    """'8.44 ms of a 10.69 ms token*': the all-reduce inside the instrumented pass's token."""
    if ar_ms is None:
        return f"{DASH}{PASS_MARK}"
    if token_ms is None:
        return f"{ms(ar_ms)} ms/token{PASS_MARK}"
    return f"{ms(ar_ms)} ms of a {ms(token_ms)} ms token{PASS_MARK}"


def _instrumented_ms(state: LabState) -> float | None:
    """The instrumented TP pass's mean ms per decode step: the job's, else the live one."""
    try:
        v = (state.results or {})["tp"]["instrumented_per_token_ms"]["mean"]
    except (KeyError, TypeError):
        v = None
    if finite(v) is not None or state.results:
        return finite(v)
        return None
    t = state.timings["tp"]
    return t.ar_measured_token_ms / t.ar_measured_count if t.ar_measured_count else None


def _cols(label: str, a: str, b: str) -> Text:
    t = Text(f"{label:<15}", style="bold")
    t.append(f"{a:>9}", style="cyan")
    t.append(f"{b:>9}", style="magenta")
    return t


class TimingsStats(StatePanel):
    TITLE = "Timings"
    MAX_HZ = 4.0

    def render_state(self, state: LabState) -> Text:
        p = state.progress()
        out = Text()
        if p["mode"]:
            out.append("decoded" if state.done else f"decoding {p['mode']}", style="bold")
            out.append(f" · prompt {p['prompt'] or DASH}/{p['num_prompts'] or '?'}"
                       f" · token {p['token'] or DASH}/{p['new_tokens'] or '?'}")
        else:
            out.append("no tokens yet", style="dim")
        r = state.results
        s, tp = state.timings["single"], state.timings["tp"]
        src = " (job)" if r else ""
        lines = [Text(f"{'':<15}{'single':>9}{'tp':>9}", style="bold")]
        for label, q, key in (("p50 ms", 0.5, "p50"), ("p99 ms", 0.99, "p99")):
            a = _res(r, "single", key) if r else s.p(q)
            b = _res(r, "tp", key) if r else tp.p(q)
            lines.append(_cols(label + src, ms(a), ms(b)))
        lines.append(_cols("mean ms" + src, ms(_res(r, "single", "mean") if r else s.mean_ms),
                           ms(_res(r, "tp", "mean") if r else tp.mean_ms)))
        lines.append(_cols("tokens", str(s.count), str(tp.count)))
        for line in lines:
            out.append("\n")
            out.append_text(line)
        ar = _top(r, "allreduce_ms_per_token") if r else tp.ar_ms_per_token
        cc = _top(r, "comm_compute_ratio") if r else tp.comm_compute_ratio
        sp = _top(r, "speedup")
        if sp is None and s.mean_ms and tp.mean_ms:
            sp = s.mean_ms / tp.mean_ms
        out.append("\n")
        out.append_text(rows([
            ("all-reduce", allreduce_text(ar, _instrumented_ms(state))),
            ("comm/compute", f"{ratio(cc)}{PASS_MARK}"),
        ], label_width=12))
        out.append(f"\n{PASS_NOTE}", style="dim")
        out.append("\n")
        out.append_text(rows([
            ("speedup", DASH if sp is None else f"{sp:.2f}× (single/tp)"),
            ("TP == single", match_text(state)),
        ], label_width=12))
        if state.timeline is not None:  # the profiled pass arrived: where to see it
            out.append("\nprofiled pass: key 5 draws each token per rank", style="dim")
        flagged = ((r or {}).get("stability") or {}).get("unstable") or []
        if flagged:  # the job's figures whose samples spread past the limit (stability block)
            out.append(f"\n{len(flagged)} figure(s) {flagged[0]['note']} "
                       f"({flagged[0]['figure']}{', …' if len(flagged) > 1 else ''})",
                       style="bold yellow")
        return out
