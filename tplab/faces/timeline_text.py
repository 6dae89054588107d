"""A finished lab's timeline as text: each profiled token, rank by rank, for a terminal or a pipe.

Why: the dashboard draws the profiled pass as lanes (``tui/widgets/timeline_panel.py``); the
same lanes and figures as plain lines serve ``tplab timeline LAB_DIR``, a script, a pipe to a
file, or a terminal without the dashboard. Cells and labels come from the view-model
(``tplab.viewmodel.timeline_view``), so the two faces draw the same thing; each mode's median
is said beside the timed pass's figure from the lab's record (``tplab.figures.lab_figures``),
with how each was taken (a median of a few tokens under the profiler, the timed pass's mean).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterator

from tplab.figures.lab_figures import LabFigures
from tplab.viewmodel.timeline_view import (
    CELL,
    LEGEND,
    Step,
    Timeline,
    allreduce_text,
    dropped_labels,
    dropped_text,
    label_row,
    lane_cells,
    scale_text,
    split_text,
    to_scale,
    us,
)

PREFIX = 4


def step_lines(step: Step, index: int, count: int, width: int, comm: str) -> Iterator[str]:
    """One step: a heading, then per rank its collectives' labels, its lane and its parts."""
    where = f"over {comm}" if step.mode == "tp" else "on one device"
    name = "TP" if step.mode == "tp" else "single"
    lane_width = max(10, width - PREFIX)
    span = step.span_us or 1.0
    yield (f"{name} token {index + 1}/{count} (step {step.pos}) {where}, {us(step.span_us)} "
           f"(its own scale: 1 cell = {us(span / lane_width)})")
    for k, lane in enumerate(step.lanes):
        labels = label_row(step, k, span, lane_width)
        if labels:
            yield " " * PREFIX + labels
        gone = dropped_labels(step, k, span, lane_width)
        if gone:
            yield " " * PREFIX + f"({dropped_text(gone)})"
        yield f"r{lane.rank:<{PREFIX - 1}}" + "".join(
            CELL.get(c, " ") for c in lane_cells(lane, span, lane_width)).rstrip()
        yield (" " * PREFIX + f"{us(lane.token_us)} = compute {lane.compute_us:.0f} + wire "
               f"{lane.wire_us:.0f} + wait {lane.wait_us:.0f} + rest {lane.rest_us:.0f} µs")


def scale_lines(t: Timeline, width: int) -> Iterator[str]:
    """Each mode's median token on one shared scale (rank 0), so TP's slowdown is seen as
    length; then the steps below each take the full width at their own scale."""
    lanes, per_cell = to_scale(t, max(10, width - 8 - 10))
    if len(lanes) < 2:
        return
    yield ""
    yield f"rank 0, {scale_text(lanes, per_cell)}:"
    for lane in lanes:
        name = "TP" if lane.mode == "tp" else "single"
        yield (f"{name:<7} " + "".join(CELL.get(c, " ") for c in lane.cells)
               + "|" + f" {us(lane.span_us)}")


def timeline_lines(t: Timeline, *, width: int = 100, modes: tuple[str, ...] = ("tp", "single"),
                   token: int | None = None, figures: LabFigures | None = None) -> Iterator[str]:
    """The whole profiled pass (or one ``token``, 1-based, of each mode) as lines; with the
    lab's ``figures`` (its record), each mode's median beside the timed pass's figure."""
    yield f"profiled pass: TP over {t.comm}; {t.alignment}"
    yield f"legend: {LEGEND}; labels: E embedding, 3a/3m layer 3's attn-out/mlp-down, G logits"
    yield from scale_lines(t, width)
    for mode in modes:
        steps = t.steps.get(mode, ())
        chosen = list(enumerate(steps))
        if token is not None:
            chosen = chosen[token - 1:token] if 0 < token <= len(steps) else []
        for i, step in chosen:
            yield ""
            yield from step_lines(step, i, len(steps), width, t.comm)
        split = t.splits.get(mode)
        if split is not None and steps:
            yield ""
            yield f"{'TP' if mode == 'tp' else 'single'}, median of {split.tokens} profiled " \
                  f"tokens: {split_text(split)}"
            ar = allreduce_text(split)
            if ar:
                yield ar
            why = figures.profiled_against_timed(mode) if figures is not None else ""
            if why:
                yield why
    if t.sum_worst is not None:
        yield ""
        yield (f"the parts add up to each step's own clock within {t.sum_worst:.1%} (worst rank "
               "and step)")
    yield f"trace: {t.trace_file} in the lab folder ({t.trace_note or 'complete'}); open it in " \
          "ui.perfetto.dev or chrome://tracing"
