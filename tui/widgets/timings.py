"""Timing figures beside the plot: progress, running p50 / p99, all-reduce cost, and whether
TP decoded the same tokens as the single device.

Every figure is the lab's record's (``state.figures``, ``tplab.figures.lab_figures``): while the
lab runs, the live stream's figures so far (from LabState's bounded histograms); once the job's
``result`` arrives, its own (computed on the pod from every sample), marked "job".

The job times TP twice: the timed pass (the columns: the latency, and the speedup) and an
instrumented one, whose timers around each collective give the all-reduce ms and comm/compute.
Those two rows say so (``*``) and show the all-reduce inside the instrumented pass's own token
time, so an all-reduce above the tp mean reads as what it is, not as a contradiction.
"""

from __future__ import annotations

from rich.text import Text

from tplab.viewmodel.fold import LabState
from tui.format import DASH
from tui.widgets.panel import StatePanel, rows


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
PASS_NOTE = "* instrumented pass; the rest: timed pass"


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
        f = state.figures  # the lab's record: the job's figures once it has them, else so far
        s, tp = state.timings["single"], state.timings["tp"]
        head = "timed (job)" if not f.so_far else "timed, so far" if f.measured else "timed"
        lines = [Text(f"{head:<15}{'single':>9}{'tp':>9}", style="bold")]
        for label, a, b in (("p50 ms", f.single_p50_ms, f.tp_p50_ms),
                            ("p99 ms", f.single_p99_ms, f.tp_p99_ms),
                            ("mean ms", f.single_ms, f.tp_ms)):
            lines.append(_cols(label, a.number(), b.number()))
        lines.append(_cols("tokens", str(s.count), str(tp.count)))
        for line in lines:
            out.append("\n")
            out.append_text(line)
        out.append("\n")
        out.append_text(rows([
            ("all-reduce", f"{f.allreduce_text()}{PASS_MARK}"),
            ("comm/compute", f"{f.comm_compute.text()}{PASS_MARK}"),
        ], label_width=12))
        out.append(f"\n{PASS_NOTE}", style="dim")
        out.append("\n")
        out.append_text(rows([
            ("speedup", f.speedup.text() + (" (single/tp)" if f.speedup.value is not None
                                             else "")),
            ("TP == single", match_text(state)),
        ], label_width=12))
        if state.timeline is not None:  # the profiled pass arrived: where to see it
            out.append("\nprofiled pass (key 5): each token per rank, with the profiler "
                       "on", style="dim")
        flagged = ((state.results or {}).get("stability") or {}).get("unstable") or []
        if flagged:  # the job's figures whose samples spread past the limit (stability block)
            out.append(f"\n{len(flagged)} figure(s) {flagged[0]['note']} "
                       f"({flagged[0]['figure']}{', …' if len(flagged) > 1 else ''})",
                       style="bold yellow")
        return out
