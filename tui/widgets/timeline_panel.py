"""The timeline view: one profiled token as lanes, one per rank — compute, on the wire, waiting.

Why: the lab's lesson is *why* TP is slower here, and a share ("AR 78%") hides it. This view
draws one token step of the profiled pass (``tplab.viewmodel.timeline_view``: the job's
``timeline`` event, or results.json's section in a replay or a past lab) as a lane per rank,
time running left to right, each collective's waiting (for the last rank to arrive) and its
time on the wire drawn apart from the rank's compute, and its layer written above it ("E" the
embedding, "3a" layer 3's attention output, "3m" its MLP down projection, "G" the logits
gather). ``[`` and ``]`` step through the profiled tokens, ``m`` switches single / TP. Above the
step, each mode's median token on one shared scale, so TP's slowdown is seen as length (and the
ratio said); the step itself takes the full width at its own scale, printed beside it. Lanes are
drawn to the split (``timeline_view.lane_cells``: a token that is 30 % rest shows 30 % blank),
and a label left out for want of room is named. Below the lanes: the step's figures per rank,
the medians over the profiled tokens, and where the whole trace is (``trace.json``, for
Perfetto). Cells differ by shape as well as colour.
"""

from __future__ import annotations

from rich.text import Text

from tplab.viewmodel.fold import LabState
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
from tui.widgets.panel import StatePanel

STYLE = {"compute": "green", "wire": "bold blue", "wait": "bold red", "rest": "dim"}
_PREFIX = "r0 "


class TimelinePanel(StatePanel):
    """The profiled pass's lanes; ``move`` steps the token or switches the mode."""

    TITLE = "Timeline"
    mode = "tp"
    index = 0

    def move(self, how: str) -> None:
        """``next`` / ``prev``: another profiled token of the mode shown; ``mode``: single or TP."""
        t = self._state.timeline if self._state is not None else None
        if how == "mode":
            modes = t.modes if t is not None else ("tp", "single")
            self.mode = modes[(modes.index(self.mode) + 1) % len(modes)] if self.mode in modes \
                else modes[0]
            self.index = 0
        elif t is not None and t.steps.get(self.mode):
            n = len(t.steps[self.mode])
            self.index = (self.index + (1 if how == "next" else -1)) % n
        self.redo()

    def _step(self, t: Timeline) -> Step | None:
        if self.mode not in t.steps:
            self.mode = t.modes[0]
        steps = t.steps[self.mode]
        self.index = min(self.index, len(steps) - 1)
        return steps[self.index] if steps else None

    def title_for(self, state: LabState) -> str:
        t = state.timeline
        if t is None:
            return "Timeline"
        step = self._step(t)
        n = len(t.steps.get(self.mode, ()))
        where = f" over {t.comm}" if self.mode == "tp" else " on one device"
        return (f"Timeline · profiled {self.mode.upper() if self.mode == 'tp' else 'single'} token "
                f"{self.index + 1}/{n} (step {step.pos if step else '?'}){where}")

    def render_state(self, state: LabState) -> Text:
        t = state.timeline
        if t is None:
            return Text("No profiled pass yet. After the timed passes the job decodes a few "
                        "tokens per mode under torch's profiler (--profile-tokens) and this view "
                        "draws each one as lanes, one per rank.", style="dim")
        step = self._step(t)
        out = Text()
        out.append("[ ] token, m single/TP  ", style="dim")
        out.append(LEGEND, style="dim")
        why = state.figures.profiled_against_timed(self.mode)
        if why:  # the record's two figures of a token, and why they differ
            out.append(f"\n{why}", style="dim")
        if step is None:
            return out
        width = max(10, self.size.width - len(_PREFIX))  # the content's width
        self._scaled(out, t)
        span = step.span_us or 1.0
        out.append(f"\nthis token at its own scale, 1 cell = {us(span / width)}:", style="dim")
        for k, lane in enumerate(step.lanes):
            out.append("\n" + " " * len(_PREFIX) + label_row(step, k, span, width))
            gone = dropped_labels(step, k, span, width)
            if gone:
                out.append(f"\n{' ' * len(_PREFIX)}({dropped_text(gone)})", style="dim")
            out.append(f"\nr{lane.rank:<{len(_PREFIX) - 1}}", style="bold")
            for kind in lane_cells(lane, span, width):
                out.append(CELL.get(kind, " "), style=STYLE.get(kind, ""))
            out.append(f"\n{' ' * len(_PREFIX)}{us(lane.token_us)} = ", style="bold")
            out.append(f"compute {lane.compute_us:.0f}", style=STYLE["compute"])
            out.append(f" + wire {lane.wire_us:.0f}", style=STYLE["wire"])
            out.append(f" + wait {lane.wait_us:.0f}", style=STYLE["wait"])
            out.append(f" + rest {lane.rest_us:.0f} µs")
        out.append(f"\n0{' ' * max(0, width + len(_PREFIX) - 1 - len(us(span)))}{us(span)}",
                   style="dim")
        split = t.splits.get(self.mode)
        if split is not None:
            out.append(f"\nprofiled pass, median of {split.tokens}: ", style="bold")
            out.append(split_text(split))
            ar = allreduce_text(split)
            if ar:
                out.append(f"\n{ar}")

        out.append(f"\nthe whole pass: {t.trace_file} in the lab folder (ui.perfetto.dev)",
                   style="dim")
        self._detail(out, step)
        return out

    def _scaled(self, out: Text, t: Timeline) -> None:
        """Each mode's median token on one shared scale, with the ratio said."""
        width = max(10, self.size.width - 7 - 10)
        lanes, per_cell = to_scale(t, width)
        if len(lanes) < 2:
            return
        out.append(f"\n{scale_text(lanes, per_cell)}", style="bold")
        for lane in lanes:
            out.append(f"\n{'TP' if lane.mode == 'tp' else 'single':<7}", style="bold")
            for kind in lane.cells:
                out.append(CELL.get(kind, " "), style=STYLE.get(kind, ""))
            out.append(f"| {us(lane.span_us)}", style="dim")

    def _detail(self, out: Text, step: Step) -> None:
        """Each collective's wait and wire per rank, where the panel has the rows for them."""
        rows = self.size.height - (out.plain.count("\n") + 1)
        if rows < len(step.collectives) + 1 or not step.collectives:
            return
        out.append(f"\n{'collective':<25}" + "".join(
            f"  {f'r{lane.rank} wait':>8} / {'wire µs':<7}" for lane in step.lanes),
            style="bold")
        for c in step.collectives:
            out.append(f"\n{c.short:<3} {c.name:<21}")
            for k in range(len(step.lanes)):
                a, b = c.starts[k], c.ends[k]
                wait, wire = max(0.0, min(c.arrive, b) - a), max(0.0, b - max(a, c.arrive))
                out.append(f"  {wait:>8.0f}", style=STYLE["wait"])
                out.append(f" / {wire:<7.0f}", style=STYLE["wire"])

    def reset(self) -> None:
        """A new lab is shown: its first TP token."""
        self.mode, self.index = "tp", 0
        self.redo()


class TimelineKeys:
    """The app's keys for the timeline view: ``[`` / ``]`` step through the profiled tokens and
    ``m`` switches single / TP, showing the view if another one is on screen."""

    timeline_panel: TimelinePanel

    def action_timeline(self, how: str) -> None:
        self.timeline_panel.move(how)
        if getattr(self, "view", None) != "timeline":
            self.action_view("timeline")  # type: ignore[attr-defined]
