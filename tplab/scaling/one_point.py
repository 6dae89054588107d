"""Calibrating the scaling model at a run's one point, for a run without a d_model sweep.

Why apart from ``calibration``: one point cannot fit the sweep's least squares; each term is
taken where the run measured it instead (α, β from the all-reduce sweep, the launch overhead from
the single-device time, TP's terms from the profiled split or from what the decode loop paid),
so the curve passes through the run's own point.

Client side: no torch.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tplab.scaling import latency
from tplab.scaling.fit_points import PROFILED, SPLIT_NOTES, comm_share, lab_split, split_source
from tplab.scaling.latency import HardwareProfile, ModelShape, Number, ScalingError
from tplab.stats.robust_fit import robust_alpha_beta


def calibrate_from_single_point(profile: HardwareProfile, results: dict[str, Any],
                                shape: ModelShape | None = None,
                                split: str = "auto") -> HardwareProfile:
    """The profile with α, β fitted to the run's all-reduce sweep and the launch overhead fitted
    to its single-device per-token time, each marked measured. What cannot be fitted (e.g. a
    noisy sweep whose times do not grow with size) stays as the profile has it, and
    ``calibrated_from`` says so; ScalingError only when nothing can be calibrated.

    The launch overhead is what is left of the measured single per-token time once the roofline
    term at the run's d_model is taken out, divided by the kernels per token (``ModelShape``).
    """
    shape = latency.shape_from_results(results, shape)
    world = int(results.get("world_size") or 0)
    sweep = (results.get("sweep") or {}).get("points") or []
    label = (f"results.json ({results.get('comm') or results.get('backend', '?')}, world size "
             f"{world}, {results.get('env', {}).get('device_names', ['?'])[0]})")
    changes: dict[str, Any] = {"calibrated_from": label}
    fit_error = ""
    if sweep:
        try:
            fit = robust_alpha_beta(
                [float(p["bytes"]) for p in sweep],
                [[float(t) / 1e3 for t in (p.get("repeat_ms") or [p["ms"]])] for p in sweep],
                world, resamples=0)  # the line only: a calibration reads no interval
        except (KeyError, TypeError, ValueError) as exc:
            fit_error = f"sweep not fitted ({exc}); alpha and beta stay as the profile has them"
        else:
            note = (f"Theil-Sen fit to {fit.points} sweep points of {label} "
                    f"(max relative residual {fit.max_rel_residual:.0%}"
                    + (f"; unstable sizes left out: {list(fit.left_out_bytes)} B"
                       if fit.left_out_bytes else "") + ")")
            changes["alpha_us"] = Number(fit.alpha_s * 1e6, "measured", note)
            changes["beta_gbps"] = Number(fit.beta_bps / 1e9, "measured", note)
    single_ms = results.get("single_per_token_ms")
    d0 = (results.get("model") or {}).get("d_model")
    if isinstance(single_ms, (int, float)) and isinstance(d0, (int, float)) and single_ms > 0:
        bw = profile.mem_bw_gbps.value * 1e9
        peak = profile.peak_tflops.value * 1e12
        roof_s = max(shape.weight_elems(d0, 1) * shape.bytes_per_elem / bw,
                     shape.flops(d0, 1) / peak)
        rest_s = single_ms / 1e3 - roof_s
        if rest_s > 0:
            changes["launch_us"] = Number(
                rest_s / shape.kernels(1) * 1e6, "measured",
                f"(single per-token {single_ms:.3f} ms - roofline {roof_s * 1e3:.3f} ms) / "
                f"{shape.kernels(1)} kernels, from {label}")
    tp_terms = (_tp_terms_from_split(profile, results, shape, changes, label)
                if split_source(results, split) == PROFILED else {})
    if tp_terms:
        changes.update(tp_terms)
        changes["calibrated_from"] += f"; TP terms from {SPLIT_NOTES[PROFILED]}"
    else:
        _fit_in_loop_point(profile, results, shape, world, label, changes)
    if len(changes) == 1:
        raise ScalingError("results.json has nothing to calibrate from: "
                           + (fit_error or "no sweep") + ", and no usable single-device "
                           "per-token time.")
    if fit_error:
        changes["calibrated_from"] += f"; {fit_error}"
    return dataclasses.replace(profile, **changes)


def _fit_in_loop_point(profile: HardwareProfile, results: dict[str, Any], shape: ModelShape,
                       world: int, label: str, changes: dict[str, Any]) -> None:
    """At the run's one point, what the decode loop really paid (``changes`` updated in place):
    α from the collective ms per token of the instrumented pass (β kept at the back-to-back
    sweep's, which a 256-byte message does not feel), then a TP rank's per-op overhead from
    what is left of the TP per-token time. Without them the curve would carry the back-to-back
    sweep's α, which misses the run's own TP point by the slower rank's waits (2-3x here).
    When the instrumented pass paid more for its collectives than the plain pass's TP time
    leaves room for (a busy machine, the timing's own syncs), α comes from that room, so the
    curve still passes through the measured TP point."""
    ar_ms, tp_ms = results.get("allreduce_ms_per_token"), results.get("tp_per_token_ms")
    d0 = (results.get("model") or {}).get("d_model")
    if not (isinstance(ar_ms, (int, float)) and ar_ms > 0 and isinstance(d0, (int, float))
            and world >= 2):
        return
    bw, peak = profile.tp_value("mem_bw_gbps") * 1e9, profile.tp_value("peak_tflops") * 1e12
    roof_s = shape.roofline_s(d0, world, bw, peak)
    comm_s, how = ar_ms / 1e3, f"the instrumented pass's {ar_ms:.3f} ms"
    if isinstance(tp_ms, (int, float)) and tp_ms > 0 and comm_s >= tp_ms / 1e3 - roof_s:
        # no room left for a TP rank's launches: keep its prior and take α from what remains
        room = tp_ms / 1e3 - roof_s - shape.kernels(world) * profile.tp_value("launch_us") * 1e-6
        if room > 0:
            comm_s = room
            how = (f"the {room * 1e3:.3f} ms the plain pass's TP {tp_ms:.3f} ms left beside a TP "
                   f"rank's compute and launches (the instrumented pass paid {ar_ms:.3f} ms)")
    beta = changes.get("beta_gbps", profile.beta_gbps).value * 1e9
    a, b = shape.comm_coefficients(d0, world)
    alpha_s = (comm_s - b / beta) / a
    if alpha_s <= 0:
        return
    b2b = changes.get("alpha_us")
    changes["alpha_us"] = Number(
        alpha_s * 1e6, "measured",
        f"in-loop collective time per token at the run's one point ({how}, waiting for the "
        "slower rank included), ring model, beta kept at "
        + (f"the back-to-back sweep's (which fitted alpha {b2b.value:.1f} us)" if b2b
           else f"{profile.name}'s value") + f"; from {label}")
    if not (isinstance(tp_ms, (int, float)) and tp_ms > 0):
        return
    rest_s = tp_ms / 1e3 - comm_s - roof_s
    if rest_s > 0:
        changes["tp_launch_us"] = Number(
            rest_s / shape.kernels(world) * 1e6, "measured",
            f"(TP per-token {tp_ms:.3f} ms - collectives {comm_s * 1e3:.3f} ms - a TP rank's "
            f"roofline) / {shape.kernels(world)} ops, from {label}")


def _tp_terms_from_split(profile: HardwareProfile, results: dict[str, Any], shape: ModelShape,
                         changes: dict[str, Any], label: str) -> dict[str, Number]:
    """At the lab's one point, from its profiled split: α from the collectives' share of the TP
    per-token time (β kept as fitted or as the profile has it) and a TP rank's launch overhead
    from the rest, past its roofline term. A term that would come out non-positive is left."""
    share, tp_ms = comm_share(lab_split(results)), results.get("tp_per_token_ms")
    d0, world = (results.get("model") or {}).get("d_model"), int(results.get("world_size") or 2)
    if share is None or not isinstance(tp_ms, (int, float)) or not isinstance(d0, (int, float)):
        return {}
    out: dict[str, Number] = {}
    comm_s, rest_s = share * tp_ms / 1e3, (1 - share) * tp_ms / 1e3
    beta = changes.get("beta_gbps", profile.beta_gbps).value * 1e9
    a, b = shape.comm_coefficients(d0, world)
    alpha = (comm_s - b / beta) / a
    note = (f"the profiled pass's split of a TP token of {label} ({share:.0%} in the collectives) "
            f"times its uninstrumented {tp_ms:.3f} ms per token")
    if alpha > 0:
        out["alpha_us"] = Number(alpha * 1e6, "measured", f"{note}; beta kept")
    roof = shape.roofline_s(d0, world, profile.tp_value("mem_bw_gbps") * 1e9,
                 profile.tp_value("peak_tflops") * 1e12)
    launch = (rest_s - roof) / shape.kernels(world)
    if launch > 0:
        out["tp_launch_us"] = Number(launch * 1e6, "measured", f"(the rest of {note} - roofline "
                                     f"{roof * 1e3:.3f} ms) / {shape.kernels(world)} ops")
    return out
