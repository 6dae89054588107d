"""The lab's closing artifacts: the scaling curve calibrated from this run, and manifest.json.

Why apart from lab.py: these are pure functions of what the lab learned (results.json, pod,
times, spend) and they pull in matplotlib; the state machine only decides *when* they are
written (always, after terminate + verify + record, whatever the outcome). The manifest itself
is tplab.manifest's (the same builder `tplab local` uses); this module only says what the lab knows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tplab.lab import Lab


def profile_for(results: dict[str, Any], gpu_type: str):
    """The hardware profile a run's curve starts from: cpu-gloo for a CPU run, else by GPU type."""
    from tplab import scaling
    if results.get("device_type") == "cpu":
        return scaling.load_profile("cpu-gloo")
    name = "rtx4090x2-pcie"
    low = gpu_type.lower()
    if "a100" in low:
        name = "a100x2-nvlink"
    elif "h100" in low:
        name = "h100x2-nvlink"
    return scaling.load_profile(name)


_profile_for = profile_for  # the name the dashboard first used


def write_scaling_curve(results: dict[str, Any], out_dir: Path, gpu_type: str = ""
                        ) -> tuple[Path | None, float | None]:
    """scaling-curve.png calibrated from this run's sweep and timings; (path, crossover d_model)."""
    from tplab import scaling
    base = profile_for(results, gpu_type)
    try:
        prof = scaling.calibrate(base, results)
    except scaling.ScalingError:
        prof = base  # e.g. --no-sweep: nothing to fit; the curve says it is uncalibrated
    world = int(results.get("world_size") or 2)
    shape = scaling.shape_from_results(results)
    path = scaling.save_png(out_dir / "scaling-curve.png", prof, world, shape=shape,
                            measured=scaling.measured_points(results))
    return path, scaling.crossover_d_model(prof, world, shape)


#: the shipped checkpoint's d_model (MiniGPT-grammar: n_head 4 × head_dim 16), where a lab with
#: no results is predicted
SHIPPED_D_MODEL = 64
PROOF = "proof-terminated.json"
#: the dashboard's screen saved after the lab ended (listed via Lab.add_artifact)
PROOF_SVG = "proof-terminated.svg"


def _no_run_prediction(cfg: Any) -> tuple[Any, float | None, str]:
    """(prediction at the shipped d_model or None, crossover d_model, profile name) from the
    uncalibrated profile this lab would have run on; a lab with no results is described by these."""
    from tplab import scaling
    from tplab.paths import DEFAULT_CHECKPOINT
    try:
        prof = profile_for({"device_type": "cpu"} if cfg.mock else {}, cfg.gpu_type)
        world = max(2, int(cfg.gpus))
        shipped = Path(cfg.checkpoint).resolve() == Path(DEFAULT_CHECKPOINT).resolve()
        pred = scaling.predict(prof, SHIPPED_D_MODEL, world) if shipped else None
        return pred, scaling.crossover_d_model(prof, world), f"{prof.name}, uncalibrated"
    except (scaling.ScalingError, OSError, TypeError, ValueError):
        return None, None, ""


def _curve_profile_name(results: dict[str, Any], gpu_type: str) -> str:
    """The name of the profile write_scaling_curve drew this run's curve (and crossover) from."""
    from tplab import scaling
    try:
        base = profile_for(results, gpu_type)
    except (scaling.ScalingError, OSError, ValueError):
        return ""
    try:
        scaling.calibrate(base, results)
    except scaling.ScalingError:
        return f"{base.name}, uncalibrated"
    return f"{base.name}, calibrated from this run"


def lab_manifest(lab: "Lab", crossover: float | None) -> dict[str, Any]:
    """The seed's manifest fields (and the lab's own) from what the lab knows, built by
    tplab.manifest.build_manifest: lesson notes from this run's numbers, no secrets."""
    from tplab import manifest
    s = lab.summary()
    res = s.get("results") or None
    cfg = lab.config
    status, reason = s["status"], s["reason"]
    if status == "COMPLETE" and not res:
        status, reason = "FAILED", "the lab finished without the job's results"
    elif status == "COMPLETE" and res.get("outputs_match") is not True:
        status, reason = "FAILED", "the TP output differs from the single-device output"
    prediction, profile_name = None, ""
    if res:
        profile_name = _curve_profile_name(res, cfg.gpu_type)
    else:
        prediction, crossover, profile_name = _no_run_prediction(cfg)
    # the dashboard's screenshot when it saved one, else the provider's answer (json)
    proof = next((n for n in (PROOF_SVG, PROOF) if (lab.out_dir / n).is_file()), None)
    return manifest.build_manifest(
        res, status=status, reason=reason,
        vendor="mock RunPod (local)" if cfg.mock else "RunPod",
        instance_type=f"{cfg.gpus}x {cfg.gpu_type}" + (" spot" if cfg.spot else " on-demand"),
        nvlink_present=False if cfg.mock else manifest.nvlink_from_results(res),
        instance_id=s.get("pod_id"), start_ts=s.get("start_ts"), end_ts=s.get("end_ts"),
        estimated_cost_usd=s.get("authorized_usd"), actual_cost_usd=s.get("actual_usd"),
        terminated_screenshot=proof,
        crossover_d_model=crossover, prediction=prediction, profile_name=profile_name,
        extra={
            "mock": cfg.mock,
            "verified_gone": s.get("verified_gone"),
            "usd_per_hr": s.get("usd_per_hr"),
            "actual_cost_note": s.get("cost_note"),
            "budget_label": cfg.ledger_label(),
            "device_type": (res or {}).get("device_type"),
            "timing_method": (res or {}).get("timing"),
            "num_prompts": cfg.num_prompts,
            "new_tokens": cfg.new_tokens,
            "events": {"job_events": s["job_events"], "ssh_drops": s["ssh_drops"],
                       "duplicates_dropped": s["duplicates"], "gaps": s["gaps"]},
            "artifacts": sorted(set(s["artifacts"]) | {"manifest.json", "stream.jsonl",
                                                        "instance.json"}),
        })


def write_lab_manifest(lab: "Lab", crossover: float | None = None) -> Path:
    """manifest.json in the lab's out dir (atomically, redacted: tplab.manifest.write_manifest)."""
    from tplab import manifest
    return manifest.write_manifest(lab.out_dir / "manifest.json", lab_manifest(lab, crossover))
