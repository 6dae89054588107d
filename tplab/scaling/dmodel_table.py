"""The d_model sweep as a table for the terminal: measured and calibrated-predicted ms per point.

Why apart from `tplab local`: the same report reads any results.json that holds a sweep and its
``calibration`` block (``tplab.scaling.calibration.annotate_results``), so `tplab local` and `tplab scaling
--calibrate` print the same thing. Every figure says whether it was measured or predicted.

Standard library only.
"""

from __future__ import annotations

from typing import Any


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.0%}"


STORED_IN_RESULTS = "results.json under calibration and d_model_sweep[i].predicted_*"


def dmodel_report(results: dict[str, Any], stored: str | None = STORED_IN_RESULTS) -> str:
    """Per point: measured single and TP ms, the calibrated prediction and its error, the
    collective ms per token, outputs_match; then both crossovers and what the fit could not
    explain."""
    pts = results.get("d_model_sweep") or []
    cal = results.get("calibration") or {}
    rows = [("d_model", "params", "single ms", "±", "predicted", "err", "TP ms", "±",
             "predicted", "err", "comm ms", "n", "match")]
    for p in pts:
        def err(pred: Any, meas: float) -> str:
            return _pct((pred - meas) / meas) if isinstance(pred, (int, float)) else "n/a"
        ps, pt = p.get("predicted_single_ms"), p.get("predicted_tp_ms")
        figs = p.get("figures") or {}
        rows.append((str(p["d_model"]), f"{p['params'] / 1e6:.2f}M", f"{p['single_ms']:.3f}",
                     _spread(figs.get("single_ms")),
                     f"{ps:.3f}" if ps is not None else "n/a", err(ps, p["single_ms"]),
                     f"{p['tp_ms']:.3f}", _spread(figs.get("tp_ms")),
                     f"{pt:.3f}" if pt is not None else "n/a",
                     err(pt, p["tp_ms"]), f"{p['allreduce_ms']:.3f}",
                     str(p.get("rounds", 1)), "yes" if p["outputs_match"] else "NO"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"\nd_model sweep (measured, {pts[0]['tokens'] if pts else '?'} tokens per mode; "
             "ms = median of n rounds, ± = their spread (q3 - q1) / median; "
             "predicted = the model calibrated to these points):"]
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    for p in pts:
        if p.get("unstable"):
            lines.append(f"  d_model {p['d_model']}: {p.get('unstable_note') or 'unstable'}")
    for s in results.get("d_model_sweep_skipped") or []:
        lines.append(f"  d_model {s['d_model']}: skipped, {s['reason']}")
    m, why = results.get("measured_crossover_d_model"), results.get("measured_crossover_reason")
    if "measured_crossover_d_model" not in results:  # a results.json from before the field
        from tplab.records.dmodel import measured_crossover
        m, why = measured_crossover(pts)
    ival = results.get("measured_crossover_interval") or {}
    lines.append("  crossover, measured:  " + (f"d_model ≈ {m:.0f} (interpolated between the "
                                                "sweep's points)" if m is not None
                                                else f"none ({why})")
                 + (f"; {ival['note']}" if ival.get("note") else ""))
    from tplab.scaling.crossover import CrossoverBand
    band = CrossoverBand.from_dict(cal.get("crossover"))
    pc = cal.get("predicted_crossover_d_model")
    lines.append("  crossover, predicted: " + (band.text() if band is not None else
                                                f"d_model ≈ {pc:.0f} ({cal.get('profile', '?')}, "
                                                "calibrated)" if pc else "none in d_model 16..65536"))
    if cal:
        worst = cal.get("max_abs_error")
        lines.append(f"  calibrated model vs measured points: worst error "
                     f"{_pct(worst)} (tolerance ±{cal.get('tolerance', 0.25):.0%}, "
                     f"{'within' if cal.get('within_tolerance') else 'NOT within'})"
                     + (f"; stored in {stored}" if stored else ""))
        for s in cal.get("off") or []:
            lines.append(f"    off: {s}")
    spread = (results.get("sweep") or {}).get("spread") or {}
    if spread:
        lines.append(f"  all-reduce sweep repeat-to-repeat spread: median {spread['median']:.0%}, "
                     f"worst {spread['max']:.0%} at {spread['max_at_bytes']} B "
                     f"({spread['repeats']} rounds per size"
                     + (f"; {spread['unstable']} size(s) flagged unstable"
                        if spread.get("unstable") else "") + ")")
    return "\n".join(lines)


def _spread(fig: dict[str, Any] | None) -> str:
    """A figure's spread for a table cell, marked with ! when it is flagged unstable."""
    if not fig:
        return "n/a"
    return f"{fig['spread']:.0%}" + ("!" if fig.get("unstable") else "")
