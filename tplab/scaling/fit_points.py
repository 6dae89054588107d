"""What a calibration reads from results.json: the d_model sweep's points it fits, and which split
of a TP token (the profiled pass's, or the difference of two passes) TP's terms are fitted to.

Why apart from ``calibration``: the fit from a sweep and the fit at a run's one point
(``one_point``) both read these, and the comparison of the two splits (``split_compare``) names them.

Client side: no torch.
"""

from __future__ import annotations

from typing import Any

from tplab.scaling.latency import ScalingError

#: the two splits of a TP token TP's terms can be fitted to (see the module docstring)
PROFILED, TWO_PASSES = "profiled", "two passes"
#: what a calibrated profile's ``calibrated_from`` says when its TP terms came from the profile
TP_TERMS_MARK = "TP terms from the profiled pass"
SPLIT_NOTES = {
    PROFILED: "the profiled pass's split of a token: the collectives' share (wire + wait) times "
              "the uninstrumented TP per-token time for comm, the rest for compute + launch",
    TWO_PASSES: "the instrumented pass's collective ms per token for comm, the plain pass's TP "
                "ms minus the fitted comm for compute + launch (at one point, without a d_model "
                "sweep: alpha from the collective time the decode loop paid, a TP rank's per-op "
                "cost from what is left of its TP time)",
}


def comm_share(split: Any) -> float | None:
    """The collectives' share of a profiled TP token, from a split's medians (a timeline mode's
    ``median`` or a sweep point's ``profiled``): (wire + wait) / (compute + wire + wait + rest);
    None when it is not one."""
    if not isinstance(split, dict):
        return None
    parts = [split.get(k) for k in ("compute_us", "wire_us", "wait_us", "rest_us")]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in parts):
        return None
    total = sum(parts)  # type: ignore[arg-type]
    return (parts[1] + parts[2]) / total if total > 0 else None  # type: ignore[operator]


def lab_split(results: dict[str, Any]) -> Any:
    """The lab's own profiled TP split (results.json's timeline), or None."""
    return (((results.get("timeline") or {}).get("modes") or {}).get("tp") or {}).get("median")


def split_source(results: dict[str, Any], want: str = "auto") -> str:
    """Which split TP's terms are fitted to: ``PROFILED`` when asked for or (``auto``) when every
    point the fit uses has a profiled split, else ``TWO_PASSES``."""
    if want == TWO_PASSES:
        return TWO_PASSES
    if sweep_points(results):
        have = all(comm_share(p.get("profiled")) is not None for p in steady_points(results)[0])
    else:
        have = comm_share(lab_split(results)) is not None
    if want == PROFILED and not have:
        raise ScalingError("results.json has no profiled pass at every point the calibration "
                           "fits (run the job with --profile-tokens N > 0).")
    return PROFILED if have else TWO_PASSES


def sweep_points(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The d_model sweep's usable points (outputs matched, positive times), by d_model."""
    out = []
    for p in results.get("d_model_sweep") or []:
        try:
            ok = (p.get("outputs_match") is True and float(p["single_ms"]) > 0
                  and float(p["tp_ms"]) > 0 and float(p["allreduce_ms"]) >= 0)
        except (KeyError, TypeError, ValueError):
            ok = False
        if ok:
            out.append(p)
    return sorted(out, key=lambda p: p["d_model"])


def steady_points(results: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """(the sweep points the calibration fits, what was left out and why).

    Points flagged unstable (``unstable``: their rounds spread past ``harness.SPREAD_LIMIT``) are
    left out when at least two steady points remain; otherwise all are fitted and the note says
    the fit goes through unstable points, so it is never silent."""
    pts = sweep_points(results)
    bad = [p for p in pts if p.get("unstable")]
    if not bad:
        return pts, ""
    which = ", ".join(f"d_model {p['d_model']} ({p.get('unstable_note') or 'unstable'})"
                      for p in bad)
    steady = [p for p in pts if not p.get("unstable")]
    if len(steady) >= 2:
        return steady, f"left out as unstable: {which}"
    return pts, f"fitted through unstable points (fewer than two steady ones): {which}"
