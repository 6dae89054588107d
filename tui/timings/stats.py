"""Timing figures beside the plot: progress, running p50 / p99, all-reduce cost, and whether
TP decoded the same tokens as the single device.

Live figures come from LabState's bounded histograms; once the job's ``result`` arrives its own
figures (computed on the pod from every sample) replace them and are marked "job".
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from tplab.labstate import LabState
from tui.format import DASH, ms, ratio
from tui.panel import StatePanel


def _res(results: dict[str, Any] | None, mode: str, key: str) -> float | None:
    """``results[mode]["per_token_ms"][key]`` of the job's results.json, if it is a number."""
    try:
        v = results[mode]["per_token_ms"][key]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


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


class TimingsStats(StatePanel):
    TITLE = "Timings"

    def render_state(self, state: LabState):
        p = state.progress()
        head = Text()
        if p["mode"]:
            head.append(f"decoding {p['mode']}", style="bold")
            head.append(f" · prompt {p['prompt'] or DASH} of {p['num_prompts'] or '?'}"
                        f" · token {p['token'] or DASH} of {p['new_tokens'] or '?'}")
        else:
            head.append("no tokens yet", style="dim")
        r = state.results
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold")
        t.add_column(justify="right", style="cyan")
        t.add_column(justify="right", style="magenta")
        t.add_row("", "single", "tp")
        src = " (job)" if r else ""
        s, tp = state.timings["single"], state.timings["tp"]
        for label, q, key in (("p50 ms", 0.5, "p50"), ("p99 ms", 0.99, "p99")):
            a = _res(r, "single", key) if r else s.p(q)
            b = _res(r, "tp", key) if r else tp.p(q)
            t.add_row(label + src, ms(a), ms(b))
        t.add_row("mean ms" + src, ms(_res(r, "single", "mean") if r else s.mean_ms),
                  ms(_res(r, "tp", "mean") if r else tp.mean_ms))
        t.add_row("tokens", str(s.count), str(tp.count))
        ar = _top(r, "allreduce_ms_per_token") if r else tp.ar_ms_per_token
        cc = _top(r, "comm_compute_ratio") if r else tp.comm_compute_ratio
        sp = _top(r, "speedup")
        if sp is None and s.mean_ms and tp.mean_ms:
            sp = s.mean_ms / tp.mean_ms
        extra = Table.grid(padding=(0, 1))
        extra.add_column(style="bold")
        extra.add_column()
        extra.add_row("all-reduce", f"{ms(ar)} ms/token")
        extra.add_row("comm/compute", ratio(cc))
        extra.add_row("speedup", DASH if sp is None else f"{sp:.2f}× (single/tp)")
        extra.add_row("TP == single", match_text(state))
        return Group(head, t, extra)
