"""Which layout a terminal size gets, and which views its switch offers.

Why: the dashboard must read at 80×24 (the size many terminals open at) as well as on a wide
screen, and no panel may shrink to an unreadable sliver. Three layouts, chosen from the size:

* **wide** (≥160 columns, ≥35 rows): every panel at once — figures on the left, the live plot,
  the scaling curve and the log on the right; key 5 puts the timeline of the profiled pass in
  place of the right-hand panels, key 1 brings them back;
* **medium** (≥100 columns, ≥35 rows): the figures column and the live plot stay; the lower
  right shows the scaling curve *or* the log (keys 2 and 3), or the timeline takes the whole
  right-hand side (key 5);
* **narrow** (anything smaller): a summary strip that always shows the pod's state, the budget
  left, the current ms/token single and TP and the stage; below it one view at a time — the
  plot, the scaling curve, the log, the figures or the timeline (keys 1–5). TERMINATE stays in
  the action bar.
"""

from __future__ import annotations

WIDE, MEDIUM, NARROW = "wide", "medium", "narrow"
#: the figures column needs this many rows: header, budget 8, instance 10, timings 12, actions, footer
MIN_COLUMN_ROWS = 35
MIN_WIDE_COLS = 160
MIN_MEDIUM_COLS = 100

#: the views of the switch, in key order (1–5), with their names on the switch
VIEWS: tuple[tuple[str, str], ...] = (("plot", "Plot"), ("scaling", "Scaling"), ("log", "Log"),
                                      ("figures", "Figures"), ("timeline", "Timeline"))


def layout_for(width: int, height: int) -> str:
    if height >= MIN_COLUMN_ROWS and width >= MIN_WIDE_COLS:
        return WIDE
    if height >= MIN_COLUMN_ROWS and width >= MIN_MEDIUM_COLS:
        return MEDIUM
    return NARROW


def switchable(layout: str) -> tuple[str, ...]:
    """The views the switch offers in ``layout`` (the others are always on screen)."""
    if layout == NARROW:
        return tuple(v for v, _ in VIEWS)
    if layout == MEDIUM:
        return ("scaling", "log", "timeline")
    return ()


def effective_view(layout: str, view: str) -> str:
    """The view shown in ``layout`` when ``view`` was chosen (medium: plot and figures are
    always on screen, so the lower right keeps showing the scaling curve for them)."""
    offered = switchable(layout)
    if not offered:
        return view
    return view if view in offered else offered[0]
