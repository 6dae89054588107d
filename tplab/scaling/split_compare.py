"""The calibrated model's worst error both ways: TP's terms fitted to the profiled pass's split
of a token, and to the difference of two passes, side by side in one run.

Why apart from ``calibration``: calibrating twice, once per split, and checking each is a
comparison over the calibration, not part of it; `tplab local`, the lab's prediction and
`tplab scaling --calibrate` store it beside the calibration block (``both_ways``) and print it.

Client side: no torch.
"""

from __future__ import annotations

from typing import Any

from tplab.scaling.calibration import annotate_results, calibrate, check
from tplab.scaling.fit_points import PROFILED, SPLIT_NOTES, TWO_PASSES
from tplab.scaling.latency import HardwareProfile, ModelShape, ScalingError


def both_ways(profile: HardwareProfile, results: dict[str, Any],
              shape: ModelShape | None = None) -> dict[str, Any]:
    """The calibrated model's worst error at the run's points with TP's terms fitted to each
    split the run allows (``profiled`` needs the profiled pass), side by side: {split: {"max_abs_
    error" (single and TP points), "tp_max_abs_error" (the TP points, what the split changes),
    "tp_errors" (per point), "note"}}; a split that cannot be fitted says why."""
    out: dict[str, Any] = {}
    for split in (PROFILED, TWO_PASSES):
        try:
            cal = calibrate(profile, results, shape, split)
        except ScalingError as exc:
            out[split] = {"max_abs_error": None, "note": str(exc)}
            continue
        block = check(cal, results, shape)
        tp = {str(r["d_model"]): r["tp_error"] for r in block["points"]}
        out[split] = {"max_abs_error": block["max_abs_error"],
                      "tp_max_abs_error": max((abs(e) for e in tp.values()), default=None),
                      "tp_errors": tp, "note": SPLIT_NOTES[split]}
    return out


def both_ways_text(ways: dict[str, Any]) -> str:
    """"calibrated model's worst error, TP terms from the profiled split 17% (TP points 17%),
    from two passes 31% (TP points 31%)"."""
    def pct(v: Any) -> str:
        return f"{v:.0%}" if isinstance(v, (int, float)) else "n/a"

    parts = []
    for split in (PROFILED, TWO_PASSES):
        way = ways.get(split) or {}
        parts.append(f"{'the profiled split' if split == PROFILED else 'two passes'} "
                     f"{pct(way.get('max_abs_error'))} (TP points {pct(way.get('tp_max_abs_error'))})")
    return "calibrated model's worst error, TP terms from " + ", from ".join(parts)


def annotate_both_ways(results: dict[str, Any], calibrated: HardwareProfile,
                       prior: HardwareProfile, shape: ModelShape | None = None) -> dict[str, Any]:
    """``calibration.annotate_results`` with ``both_ways`` added to the block (``prior``: the
    profile before calibration). Returns the block."""
    block = annotate_results(results, calibrated, shape)
    block["both_ways"] = both_ways(prior, results, shape)
    return block
