"""What the Labs screen says about one past lab: its row cells and its manifest, as text.

Pure functions of a ``PastLab`` (``tplab.viewmodel.past_labs``), so the table, the detail pane
and the tests read the same figures the same way.
"""

from __future__ import annotations

import re
import time

from rich.text import Text

from tplab.figures.lab_figures import LabFigures, from_manifest
from tplab.money.worst_case import worst_case_text
from tplab.records.untrusted import finite
from tplab.viewmodel.past_labs import PastLab
from tui.format import DASH, short_path, usd

_STATUS_STYLE = {"COMPLETE": "bold green", "STOPPED": "bold yellow", "INTERRUPTED": "bold yellow",
                 "EDUCATIONAL_STUB": "bold yellow", "FAILED": "bold red"}
COLUMNS = ("when (UTC)", "", "status", "speedup", "crossover", "cost", "pod gone", "GPU", "lab")
#: the columns a narrow table keeps first (indices into COLUMNS): a lab's time, kind, outcome,
#: whether its pod is gone and what it cost; the rest is in the detail pane
PRIORITY = (0, 1, 2, 6, 5, 3, 8, 4, 7)
#: a DataTable cell's padding (one column each side) and room for its vertical scrollbar
CELL_PAD, SCROLLBAR = 2, 2


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts)) if ts else DASH


def short_gpu(instance_type: str) -> str:
    """'2x NVIDIA GeForce RTX 4090 spot' -> '2× RTX 4090 spot'."""
    text = re.sub(r"\b(NVIDIA|GeForce)\s+", "", instance_type).replace("x ", "× ", 1)
    return text or DASH


def gone_text(lab: PastLab) -> Text:
    if lab.pod_id is None:
        return Text("no pod", style="dim")
    if lab.verified_gone:
        return Text("✓ verified", style="green")
    return Text("✗ NOT verified", style="bold red")


def figures_of(lab: PastLab) -> LabFigures:
    """The lab's figures as its manifest holds them (its record, ``lab_figures``)."""
    return from_manifest(lab.manifest) or LabFigures.from_results({})


def row_cells(lab: PastLab) -> tuple[Text | str, ...]:
    f = figures_of(lab)
    return (when(lab.started),
            Text("MOCK", style="bold black on yellow") if lab.mock else Text("real"),
            Text(lab.status, style=_STATUS_STYLE.get(lab.status, "")),
            f.speedup.text() if f.speedup.value is not None else DASH,
            lab.crossover_text,
            usd(f.cost.usd if f.cost is not None else None),
            gone_text(lab),
            short_gpu(lab.gpu),
            lab.lab_id)


def columns_that_fit(rows: list[tuple[Text | str, ...]], width: int) -> tuple[int, ...]:
    """The columns (indices into COLUMNS, in table order) that fit ``width`` cells whole: taken
    in PRIORITY order, each only if it still fits, so a narrow screen drops whole columns
    instead of cutting the last one."""
    need = [max([Text(COLUMNS[i]).cell_len] + [_cell_len(r[i]) for r in rows]) + CELL_PAD
            for i in range(len(COLUMNS))]
    room, keep = width - SCROLLBAR, []
    for i in PRIORITY:
        if need[i] <= room:
            keep.append(i)
            room -= need[i]
    return tuple(sorted(keep))


def _cell_len(cell: Text | str) -> int:
    return cell.cell_len if isinstance(cell, Text) else Text(cell).cell_len


def _worst(m: dict) -> str:
    """The manifest's worst case as the pre-flight showed it (rounded up), or a dash."""
    v = finite(m.get("worst_case_usd"))
    return DASH if v is None else worst_case_text(v)


def _figure(m: dict, key: str, fmt: str) -> str:
    """A number of the manifest in ``fmt``, or a dash where it is none."""
    v = finite(m.get(key))
    return DASH if v is None else fmt.format(v)


def detail(lab: PastLab) -> Text:
    """The selected lab's manifest, the figures first and the lesson notes last."""
    m = lab.manifest
    f = figures_of(lab)
    t = Text()
    t.append(lab.lab_id, style="bold")
    if lab.mock:
        t.append("  ")
        t.append(" MOCK ", style="bold black on yellow")
    t.append("  ")
    t.append(lab.status, style=_STATUS_STYLE.get(lab.status, "bold"))
    if lab.reason:
        t.append(f" — {lab.reason}")
    lines = [
        ("folder", short_path(str(lab.path))),
        ("GPU", f"{lab.gpu or DASH}  {_figure(m, 'usd_per_hr', '${:.3f}/h')}"),
        ("started", f"{m.get('start_ts') or DASH}"),
        ("ended", f"{m.get('end_ts') or DASH}"),
        ("cost", f"{f.cost.text() if f.cost is not None else DASH} · "
                 f"{usd(finite(m.get('estimated_cost_usd')))} estimated before the run"),
        ("authorized", f"{_figure(m, 'authorized_usd', '${:.2f}')} held by the ledger · "
                       f"worst case {_worst(m)}"),
        ("per token", f"single {f.single_ms.text()} · TP {f.tp_ms.text()} · speedup "
                      f"{f.speedup.text()} ({f.tp_ms.taken})"),
        ("all-reduce", f"{f.allreduce_text()} · comm/compute {f.comm_compute.text()} "
                       f"({f.allreduce_ms.taken})"),
        ("outputs", "TP == single ✓" if m.get("outputs_match") is True
         else "TP ≠ single ✗" if m.get("outputs_match") is False else DASH),
        ("crossover", _crossover(lab)),
        ("pod", f"{lab.pod_id or 'none created'}" + (
            "" if lab.pod_id is None else " · verified gone ✓" if lab.verified_gone
            else " · NOT verified gone ✗: check `tplab status`")),
        ("replay", "stream.jsonl ✓ (r: replay ×10, enter: open)" if lab.has_stream
         else "no stream.jsonl: nothing to replay"),
    ]
    for label, value in lines:
        t.append(f"\n{label:<11}", style="bold")
        t.append(value)
    if lab.problem:
        t.append(f"\n⚠ {lab.problem}", style="bold yellow")
    notes = m.get("lesson_notes")
    if isinstance(notes, str) and notes:
        t.append("\n\nlesson notes\n", style="bold")
        t.append(notes)
    return t


def _crossover(lab: PastLab) -> str:
    parts = []
    if lab.speedup is not None and lab.d_model:
        side = "slower" if lab.speedup < 1 else "faster"
        parts.append(f"measured: TP {side} at d_model {lab.d_model}")
    band = (lab.manifest.get("crossover") or {}).get("text") if isinstance(
        lab.manifest.get("crossover"), dict) else None
    if isinstance(band, str) and band:
        parts.append(f"predicted {band}")
    elif lab.crossover:
        parts.append(f"predicted ≈{lab.crossover:,.0f}"
                     + (" (calibrated on this run)" if lab.speedup is not None else
                        " (model only)"))
    return "; ".join(parts) or DASH
