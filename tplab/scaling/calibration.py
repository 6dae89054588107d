"""Calibrating the scaling model from a run, and checking the calibrated model against the run.

Why: a curve that does not pass through its own measurements teaches the wrong crossover. A run
with a d_model sweep (``results["d_model_sweep"]``) calibrates every term of ``tplab.scaling.latency``'s
model from the measured points, each in a least-squares fit with relative residuals (weights
1/t², the points span orders of magnitude):

    single(d)   = s1 · roof1(d) + K1 · launch            -> s1 (mem_bw, peak / s1), launch
    comm(d)     = (2L+1)·allreduce(4d) + allgather(4V)   -> α, β from the collective ms per token
                                                            the decode loop paid (instrumented
                                                            pass), not the back-to-back sweep
    tp(d)-comm  = sp · roofp(d) + Kp · launch'           -> sp (a TP rank's mem_bw, peak / sp),
                                                            launch' (a TP rank's per-op cost)

where roof is the roofline term at the profile's own bandwidth and peak, K the kernels per token.

TP's two terms, comm and compute + launch, are fitted to one of two splits of the measured TP
per-token time (``split_source`` says which; the calibration block's ``tp_split_from``):

* ``profiled``: where every fitted point has its profiled pass (``results["timeline"]`` at the
  lab's d_model, each sweep point's ``profiled``), the collectives' share of a token from that
  one pass, (wire + wait) / (compute + wire + wait + rest), applied to the uninstrumented TP
  per-token time: comm = share · tp, compute + launch = (1 - share) · tp;
* ``two passes``: the instrumented pass's collective ms per token for comm, and the plain pass's
  TP ms minus the fitted comm for the rest — two passes, taken at different moments, whose
  difference carries both passes' noise.

``tplab.scaling.split_compare`` calibrates with each split the run allows and reports each one's
worst error.
With fewer points than terms, or a term that would come out negative, the fit keeps that term at
its prior (the profile's value, the back-to-back sweep's β) and says so in the term's note.
A run without a sweep has one point (``tplab.scaling.one_point``): β from the all-reduce
sweep, the launch overhead from the single-device time; with the profiled split, α (β kept)
and a TP rank's launch overhead from its comm and its rest; without it, α from the collective
time the decode loop paid at that point and a TP rank's launch overhead from what is left of
the TP time. Either way the curve passes through the run's own point.

``check`` then predicts every measured point with the calibrated profile and reports the error of
each (single, TP, and the comm term alone); ``annotate_results`` stores that in results.json as
``calibration`` and as ``predicted_single_ms`` / ``predicted_tp_ms`` / ``predicted_comm_ms`` on
each ``d_model_sweep`` point. A point more than ``TOLERANCE`` off is listed in ``off`` with which
term is off and by how much, instead of a confident line.

Client side: no torch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from tplab.scaling import latency
from tplab.records.dmodel import measured_crossover
from tplab.scaling.fit_points import (
    PROFILED,
    SPLIT_NOTES,
    TP_TERMS_MARK,
    TWO_PASSES,
    comm_share,
    lab_split,
    split_source,
    steady_points,
    sweep_points,
)
from tplab.scaling.latency import HardwareProfile, ModelShape, Number, ScalingError
from tplab.scaling.one_point import calibrate_from_single_point

#: the calibrated prediction must be within this relative error of every measured point
TOLERANCE = 0.25


def run_label(results: dict[str, Any]) -> str:
    """e.g. "results.json (shm, world size 2, cpu)"."""
    names = (results.get("env") or {}).get("device_names") or [results.get("device_type", "?")]
    return (f"results.json ({results.get('comm') or results.get('backend', '?')}, world size "
            f"{results.get('world_size', '?')}, {names[0]})")


#: GPU name fragments -> the profile of that device (checked in order, lower case)
GPU_PROFILES = (("a100", "a100x2-nvlink"), ("h100", "h100x2-nvlink"), ("h200", "h100x2-nvlink"),
                ("4090", "rtx4090x2-pcie"))


def profile_for_run(results: dict[str, Any]) -> tuple[str | None, str]:
    """(the profile that matches the run's device and transport, or None; what the run was).

    A CPU run is ``cpu-gloo`` or ``cpu-shm`` by the transport that carried its collectives; a GPU
    run is picked by its device name (an H200 starts from the H100 profile, both NVLink HBM parts).
    """
    device = results.get("device_type")
    comm = results.get("comm") or results.get("backend")
    names = (results.get("env") or {}).get("device_names") or []
    what = f"a {device or 'unknown-device'} run over {comm or '?'}" + (
        f" on {names[0]}" if names else "")
    if device == "cpu":
        return latency.cpu_profile_name(comm), what
    low = " ".join(str(n) for n in names).lower()
    for frag, name in GPU_PROFILES:
        if frag in low:
            return name, what
    return None, what


def check_profile_matches(asked: str, results: dict[str, Any]) -> None:
    """ScalingError (one sentence) when ``asked`` is not the profile of the run's device and
    transport: calibrating an RTX 4090 profile with CPU figures teaches a wrong crossover."""
    want, what = profile_for_run(results)
    if want is not None and asked != want:
        raise ScalingError(f"results.json is {what}, which calibrates the {want} profile, not "
                           f"{asked}; drop --profile or pass --profile {want}.")


def calibrate(profile: HardwareProfile, results: dict[str, Any],
              shape: ModelShape | None = None, split: str = "auto") -> HardwareProfile:
    """The profile calibrated from ``results``: from its d_model sweep when it has one, else
    from its all-reduce sweep and its one measured point; TP's terms from ``split_source(results,
    split)``. ScalingError when nothing can be."""
    if sweep_points(results):
        cal = calibrate_from_sweep(profile, results, shape, split)
    else:
        cal = calibrate_from_single_point(profile, results, shape, split)
    # the prior's bootstrap replicates describe the prior, not this calibration
    return dataclasses.replace(cal, replicate_terms=(), replicates=(), replicates_note="")


def _fit_pair(x1: Sequence[float], x2: Sequence[float], y: Sequence[float],
              prior_a: float) -> tuple[float, float, str]:
    """(a, b, note) for y ≈ a·x1 + b·x2, least squares in relative residuals, a > 0, b >= 0.

    With one point, a singular system or a negative a, ``a`` stays at ``prior_a`` and only ``b``
    is fitted (note says so); a negative b is clamped to 0 and ``a`` refitted alone.
    """
    w = [1.0 / (v * v) for v in y]
    s11 = sum(wi * u * u for wi, u in zip(w, x1))
    s22 = sum(wi * v * v for wi, v in zip(w, x2))
    s12 = sum(wi * u * v for wi, u, v in zip(w, x1, x2))
    s1y = sum(wi * u * t for wi, u, t in zip(w, x1, y))
    s2y = sum(wi * v * t for wi, v, t in zip(w, x2, y))
    det = s11 * s22 - s12 * s12
    if len(y) >= 2 and det > 1e-12 * s11 * s22:
        a = (s1y * s22 - s2y * s12) / det
        b = (s2y * s11 - s1y * s12) / det
        if a > 0 and b >= 0:
            return a, b, ""
        if a > 0:  # b < 0: the data need no constant term
            return s1y / s11, 0.0, "constant term clamped to 0"
    a = prior_a
    b = (s2y - a * s12) / s22 if s22 > 0 else 0.0
    note = ("slope kept at its prior (one point)" if len(y) < 2
            else "slope kept at its prior (the fit gave a non-positive one)")
    if b < 0:
        b = 0.0
    return a, b, note


def _prior_beta_bps(profile: HardwareProfile, results: dict[str, Any]) -> tuple[float, str]:
    """β to fall back on: the run's back-to-back sweep fit, else the profile's."""
    fit = (results.get("sweep") or {}).get("fit") or {}
    if isinstance(fit.get("beta_gbps"), (int, float)) and fit["beta_gbps"] > 0:
        return fit["beta_gbps"] * 1e9, "the back-to-back all-reduce sweep's fit"
    return profile.beta_gbps.value * 1e9, f"{profile.name}'s value"


def calibrate_from_sweep(profile: HardwareProfile, results: dict[str, Any],
                         shape: ModelShape | None = None, split: str = "auto") -> HardwareProfile:
    """Every term of the model fitted to the run's d_model sweep (see the module docstring)."""
    source = split_source(results, split)
    shape = latency.shape_from_results(results, shape)
    pts, left_out = steady_points(results)
    if not pts:
        raise ScalingError("results.json has no usable d_model sweep point to calibrate from.")
    p = int(results.get("world_size") or 0)
    if p < 2:
        raise ScalingError("results.json has no TP world size of at least 2.")
    label = run_label(results)
    ds = [float(q["d_model"]) for q in pts]
    bw, peak = profile.mem_bw_gbps.value * 1e9, profile.peak_tflops.value * 1e12
    k1, kp = shape.kernels(1), shape.kernels(p)
    where = f"{len(pts)} d_model sweep point(s) {[int(d) for d in ds]} of {label}"

    single = [q["single_ms"] / 1e3 for q in pts]
    s1, l1, n1 = _fit_pair([shape.roofline_s(d, 1, bw, peak) for d in ds], [k1] * len(ds), single,
                           prior_a=1.0)
    if source == PROFILED:
        comm = [max((comm_share(q["profiled"]) or 0.0) * q["tp_ms"], 1e-9) / 1e3 for q in pts]
    else:
        comm = [max(q["allreduce_ms"], 1e-9) / 1e3 for q in pts]
    ab = [shape.comm_coefficients(d, p) for d in ds]
    beta0, beta_from = _prior_beta_bps(profile, results)
    inv_beta, alpha, nc = _fit_pair([b for _, b in ab], [a for a, _ in ab], comm,
                                    prior_a=1.0 / beta0)
    if nc:
        nc = f"beta from {beta_from} ({nc})"
    comm_fit = [a * alpha + b * inv_beta for a, b in ab]
    # the profiled split gives the rest from the same pass; two passes leave what the fitted comm
    # does not explain of the plain pass
    rest = [max(q["tp_ms"] / 1e3 - c, 1e-9)
            for q, c in zip(pts, comm if source == PROFILED else comm_fit)]
    sp, lp, npp = _fit_pair([shape.roofline_s(d, p, bw, peak) for d in ds], [kp] * len(ds), rest,
                            prior_a=s1)

    def num(value: float, what: str, note: str = "") -> Number:
        return Number(value, "measured", f"{what}, fitted to {where}" + (f"; {note}" if note else ""))

    roof_note = "memory and compute roofline of one device scaled by 1/{:.3g} from {}"
    return dataclasses.replace(
        profile,
        mem_bw_gbps=num(bw / s1 / 1e9, roof_note.format(s1, profile.name), n1),
        peak_tflops=num(peak / s1 / 1e12, roof_note.format(s1, profile.name), n1),
        launch_us=num(l1 * 1e6, f"single-device per-op overhead x {k1} ops per token", n1),
        alpha_us=num(alpha * 1e6, ("in-loop collective time per token, the profiled pass's "
                     "collective share of the TP per-token time" if source == PROFILED else
                     "in-loop collective ms per token (instrumented pass)") + ", ring model over "
                     "the all-reduces and the logits all-gather", nc),
        beta_gbps=num(1e-9 / inv_beta, "same in-loop fit", nc),
        tp_mem_bw_gbps=num(bw / sp / 1e9, f"a TP rank's roofline scaled by 1/{sp:.3g}", npp),
        tp_peak_tflops=num(peak / sp / 1e12, f"a TP rank's roofline scaled by 1/{sp:.3g}", npp),
        tp_launch_us=num(lp * 1e6, f"a TP rank's per-op overhead x {kp} ops per token (" + (
            "the profiled pass's non-collective share of the TP ms" if source == PROFILED
            else "TP ms minus the fitted comm term") + ")", npp),
        calibrated_from=f"{label}, d_model sweep" + (f"; {left_out}" if left_out else "")
        + f"; TP terms from {SPLIT_NOTES[source]}")


def measured_points(results: dict[str, Any]) -> dict[str, float] | None:
    """(d_model, single ms, TP ms) of a run, for overlaying on the curve."""
    try:
        return {"d_model": float(results["model"]["d_model"]),
                "single_ms": float(results["single_per_token_ms"]),
                "tp_ms": float(results["tp_per_token_ms"]),
                "world_size": int(results["world_size"])}
    except (KeyError, TypeError, ValueError):
        return None


def _err(pred: float, meas: float) -> float:
    return (pred - meas) / meas if meas > 0 else 0.0


def check(profile: HardwareProfile, results: dict[str, Any], shape: ModelShape | None = None,
          tolerance: float = TOLERANCE) -> dict[str, Any]:
    """The calibrated profile's prediction at each measured point of the run, with the errors.

    The points are the d_model sweep's, or the run's one measured point without a sweep. ``off``
    lists, for each point beyond ``tolerance``, which term is off and by how much.
    """
    shape = latency.shape_from_results(results, shape)
    world = int(results.get("world_size") or 2)
    pts = sweep_points(results)
    source = "d_model_sweep"
    if not pts:
        m = measured_points(results)
        pts = [] if m is None else [{
            "d_model": m["d_model"], "single_ms": m["single_ms"], "tp_ms": m["tp_ms"],
            "allreduce_ms": float(results.get("allreduce_ms_per_token") or 0.0),
            "profiled": lab_split(results)}]
        source = "the run's one measured point (no d_model sweep)"
    split = PROFILED if TP_TERMS_MARK in (profile.calibrated_from or "") else TWO_PASSES
    if split == PROFILED:  # comm as it was fitted: the profiled share of the TP time
        pts = [{**q, "allreduce_ms": (comm_share(q.get("profiled")) or 0.0) * q["tp_ms"]}
               if comm_share(q.get("profiled")) is not None else q for q in pts]
    rows, off = [], []
    for q in pts:
        pr = latency.predict(profile, float(q["d_model"]), world, shape)
        row = {"d_model": q["d_model"],
               "measured_single_ms": q["single_ms"], "predicted_single_ms": pr.single_ms,
               "single_error": _err(pr.single_ms, q["single_ms"]),
               "measured_tp_ms": q["tp_ms"], "predicted_tp_ms": pr.tp_ms,
               "tp_error": _err(pr.tp_ms, q["tp_ms"]),
               "measured_comm_ms": q["allreduce_ms"], "predicted_comm_ms": pr.comm_ms,
               "comm_error": _err(pr.comm_ms, q["allreduce_ms"]),
               "unstable": bool(q.get("unstable"))}
        rows.append(row)
        d = int(q["d_model"])
        flag = f" [{q.get('unstable_note')}]" if q.get("unstable") else ""
        if abs(row["single_error"]) > tolerance:
            off.append(f"single at d_model {d} is {row['single_error']:+.0%} off (predicted "
                       f"{pr.single_ms:.3g} ms, measured {q['single_ms']:.3g}): the memory/compute "
                       f"term gives {max(pr.single_memory_ms, pr.single_compute_ms):.3g} ms of "
                       f"it, the launch term {pr.single_launch_ms:.3g} ms{flag}")
        if abs(row["tp_error"]) > tolerance:
            rest_meas = q["tp_ms"] - q["allreduce_ms"]
            rest_pred = pr.tp_ms - pr.comm_ms
            off.append(f"TP at d_model {d} is {row['tp_error']:+.0%} off (predicted "
                       f"{pr.tp_ms:.3g} ms, measured {q['tp_ms']:.3g}): the comm term predicts "
                       f"{pr.comm_ms:.3g} ms where the decode loop paid {q['allreduce_ms']:.3g} "
                       f"({row['comm_error']:+.0%}); compute + launch predict {rest_pred:.3g} ms "
                       f"where {rest_meas:.3g} remain ({_err(rest_pred, rest_meas):+.0%}){flag}")
    errs = [abs(r[k]) for r in rows for k in ("single_error", "tp_error")]
    worst = max(errs) if errs else None
    return {"profile": profile.name, "calibrated_from": profile.calibrated_from,
            "points_from": source, "tp_split_from": split, "tp_split_note": SPLIT_NOTES[split],
            "tolerance": tolerance,
            "terms": {k: n.to_json() for k, n in profile.numbers().items()},
            "points": rows, "max_abs_error": worst,
            "within_tolerance": worst is not None and worst <= tolerance, "off": off}


def miss_warning(block: dict[str, Any] | None) -> str | None:
    """One sentence when the calibrated model misses the points it was calibrated on by more
    than the tolerance (a curve then drawn or printed as "calibrated" needs this beside it),
    else None."""
    if not block or block.get("within_tolerance") is not False:
        return None
    worst = block.get("max_abs_error")
    off = block.get("off") or []
    return (f"not a fit: the calibrated model misses the run's measured points by up to "
            f"{worst:.0%} (tolerance ±{block.get('tolerance', TOLERANCE):.0%})"
            + (f"; {off[0]}" if off else "") + (f" (and {len(off) - 1} more)" if len(off) > 1
                                                 else ""))


def annotate_results(results: dict[str, Any], profile: HardwareProfile,
                     shape: ModelShape | None = None) -> dict[str, Any]:
    """Store ``check``'s answer in ``results`` (in place): ``calibration`` and, on each
    ``d_model_sweep`` point, ``predicted_single_ms`` / ``predicted_tp_ms`` / ``predicted_comm_ms``
    (points the fit could not use get none). Returns the calibration block."""
    block = check(profile, results, shape)
    by_d = {r["d_model"]: r for r in block["points"]}
    for q in results.get("d_model_sweep") or []:
        r = by_d.get(q.get("d_model"))
        if r is not None and block["points_from"] == "d_model_sweep":
            q.update(predicted_single_ms=r["predicted_single_ms"],
                     predicted_tp_ms=r["predicted_tp_ms"],
                     predicted_comm_ms=r["predicted_comm_ms"])
    results["calibration"] = block
    return block


def crossovers(profile: HardwareProfile, results: dict[str, Any] | None, world: int,
               shape: ModelShape | None = None) -> dict[str, Any]:
    """The run's measured crossover (``measured``, interpolated between its sweep points; None
    with ``measured_reason``). The model's is ``tplab.scaling.crossover``'s band, never here."""
    measured, why = (None, "no d_model sweep in this run")
    if results and results.get("d_model_sweep") is not None:
        measured, why = measured_crossover(results.get("d_model_sweep") or [])
    return {"measured": measured, "measured_reason": why}
