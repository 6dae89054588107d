"""The lab's closing artifacts: the scaling curve calibrated from this run, and manifest.json.

Why apart from lab.py: these are pure functions of what the lab learned (results.json, pod,
times, spend) and they pull in matplotlib; the state machine only decides *when* they are
written (always, after terminate + verify + record, whatever the outcome).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tplab.lab import Lab

LESSON = ("Two-way tensor parallelism is slower than one device here: MiniGPT-grammar has about "
          "0.4M parameters, so each decode step is a few small kernels whose cost is launch "
          "overhead, not memory bandwidth or FLOPs. TP halves work that was already almost free "
          "and adds 2 all-reduces per layer (plus the logits gather) to every token, each paying "
          "a fixed latency (alpha) that NVLink shortens but cannot remove. TP costs latency at "
          "small scale and buys headroom at large scale: once a layer's weights take longer to "
          "stream from memory than an all-reduce takes, splitting them pays — see the crossover "
          "in scaling-curve.png.")


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


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def lab_manifest(lab: "Lab", crossover: float | None) -> dict[str, Any]:
    """The seed's manifest fields (and more) from what the lab knows; no secrets."""
    s = lab.summary()
    res = s.get("results") or {}
    cfg = lab.config
    start, end = s.get("start_ts"), s.get("end_ts")
    return {
        "seed": 35200,
        "lab": "02-tp-inference-cloud",
        "status": s["status"],
        "reason": s["reason"],
        "mock": cfg.mock,
        "vendor": ("mock RunPod (local)" if cfg.mock else "RunPod"),
        "instance_type": f"{cfg.gpus}x {cfg.gpu_type}" + (" spot" if cfg.spot else " on-demand"),
        "nvlink_present": False if cfg.mock else None,  # unknown for a real pod until asked
        "instance_id": s.get("pod_id"),
        "start_ts": _iso(start),
        "end_ts": _iso(end),
        "duration_hours": round((end - start) / 3600.0, 6) if start and end else None,
        "usd_per_hr": s.get("usd_per_hr"),
        "estimated_cost_usd": s.get("authorized_usd"),
        "actual_cost_usd": s.get("actual_usd"),
        "actual_cost_note": s.get("cost_note"),
        "budget_label": cfg.ledger_label(),
        "terminated_screenshot": "proof-terminated.json",
        "verified_gone": s.get("verified_gone"),
        "single_gpu_per_token_ms": res.get("single_per_token_ms"),
        "tp_per_token_ms": res.get("tp_per_token_ms"),
        "speedup": res.get("speedup"),
        "allreduce_ms_per_token": res.get("allreduce_ms_per_token"),
        "comm_compute_ratio": res.get("comm_compute_ratio"),
        "outputs_match": res.get("outputs_match"),
        "backend": res.get("backend"),
        "device_type": res.get("device_type"),
        "timing_method": res.get("timing"),
        "lesson_notes": LESSON if res else None,
        "crossover_d_model": crossover,
        "num_prompts": cfg.num_prompts,
        "new_tokens": cfg.new_tokens,
        "events": {"job_events": s["job_events"], "ssh_drops": s["ssh_drops"],
                   "duplicates_dropped": s["duplicates"], "gaps": s["gaps"]},
        "artifacts": sorted(set(s["artifacts"]) | {"manifest.json", "stream.jsonl",
                                                    "instance.json"}),
    }


def _finite(obj: Any) -> Any:
    """JSON has no inf/nan: such numbers become null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_lab_manifest(lab: "Lab", crossover: float | None = None) -> Path:
    data = _finite(lab_manifest(lab, crossover))
    path = lab.out_dir / "manifest.json"
    tmp = path.with_name("manifest.json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, allow_nan=False, default=str)
                   + "\n")
    tmp.replace(path)
    return path
