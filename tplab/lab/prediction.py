"""A lab's prediction: its results -> the calibrated hardware profile -> the curve and crossover, once.

Why one place: the PNG, the dashboard's terminal plot, the manifest's crossover and its lesson
notes must all tell the same story, so none calibrates the profile (or picks it) on its own:
each takes a ``LabPrediction`` made here, whose crossover is one ``CrossoverBand``
(``tplab.scaling.crossover``: a range, or "no crossover below d_model N", saying whether it is
the profile's or calibrated from this run). Without results (a STUB, or a lab that failed before
the job) the prediction is the uncalibrated profile the lab would have run on, and at the
shipped model's d_model when the lab used the shipped checkpoint.

Client side: no torch; ``tplab.scaling.latency`` is pure Python (matplotlib only when drawing).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tplab.scaling import calibration, crossover, latency
from tplab.home.paths import DEFAULT_CHECKPOINT

#: the shipped checkpoint's d_model (MiniGPT-grammar: n_head 4 × head_dim 16), where a lab with
#: no results is predicted
SHIPPED_D_MODEL = 64


@dataclass(frozen=True)
class LabPrediction:
    profile: latency.HardwareProfile        # calibrated from the run when it could be
    profile_name: str                       # e.g. "cpu-gloo, calibrated from this run"
    world_size: int
    shape: latency.ModelShape | None        # the run's model shape (None: the shipped shape)
    crossover_d_model: float | None
    measured: dict[str, float] | None       # this run's measured point, to draw on the curve
    at_lab_d_model: latency.Prediction | None = None  # only for a lab without results
    sweep: list[dict[str, Any]] = field(default_factory=list)  # the run's d_model sweep points
    measured_crossover: float | None = None  # interpolated between the sweep's points
    measured_reason: str = ""               # why there is no measured crossover
    calibration: dict[str, Any] | None = None  # calibration.check: prediction vs each point
    band: crossover.CrossoverBand | None = None  # the crossover with its uncertainty

    @property
    def calibrated(self) -> bool:
        return bool(self.profile.calibrated_from)


def profile_for(results: dict[str, Any] | None, gpu_type: str,
                mock: bool = False) -> latency.HardwareProfile:
    """The hardware profile a lab's curve starts from: cpu-gloo (cpu-shm when shm carried the
    collectives) for a CPU run (and a mock lab, whose pods decode on the CPU), else by GPU type."""
    device = (results or {}).get("device_type") or ("cpu" if mock and not results else None)
    if device == "cpu":
        return latency.load_profile(latency.cpu_profile_name((results or {}).get("comm")))
    if results:
        by_run, _ = calibration.profile_for_run(results)  # the device the job really ran on
        if by_run is not None:
            return latency.load_profile(by_run)
    low = gpu_type.lower()
    name = "rtx4090x2-pcie"
    if "a100" in low:
        name = "a100x2-nvlink"
    elif "h100" in low:
        name = "h100x2-nvlink"
    return latency.load_profile(name)


def predict_lab(results: dict[str, Any] | None, *, gpu_type: str, gpus: int = 2,
                mock: bool = False, checkpoint: Path | None = None) -> LabPrediction | None:
    """The lab's prediction from its results (calibrated) or from its plan (uncalibrated);
    None when not even the profile can be read."""
    try:
        base = profile_for(results, gpu_type, mock)
    except (latency.ScalingError, OSError, ValueError):
        return None
    if results:
        return _from_results(base, results)
    try:
        world = max(2, int(gpus))
        shipped = (checkpoint is None
                   or Path(checkpoint).resolve() == Path(DEFAULT_CHECKPOINT).resolve())
        at = latency.predict(base, SHIPPED_D_MODEL, world) if shipped else None
        band = crossover.for_profile(base, world)
        return LabPrediction(base, f"{base.name}, uncalibrated", world, None, band.estimate,
                             None, at, band=band)
    except (latency.ScalingError, OSError, TypeError, ValueError):
        return None


def _from_results(base: latency.HardwareProfile, results: dict[str, Any]) -> LabPrediction:
    world = int(results.get("world_size") or 2)
    try:
        shape: latency.ModelShape | None = latency.shape_from_results(results)
    except latency.ScalingError:
        shape = None
    annotated = copy.deepcopy(results)
    block = None
    try:
        profile, block, band = crossover.annotate_run(annotated, base, shape)
        name = f"{base.name}, calibrated from this run"
    except latency.ScalingError:  # e.g. --no-sweep and no single timing: nothing to fit
        profile, name = base, f"{base.name}, uncalibrated"
        band = crossover.for_profile(base, world, shape)
    cross = calibration.crossovers(profile, results, world, shape)
    return LabPrediction(profile, name, world, shape, band.estimate,
                         calibration.measured_points(results),
                         sweep=list(annotated.get("d_model_sweep") or []),
                         measured_crossover=cross["measured"],
                         measured_reason=cross["measured_reason"], calibration=block, band=band)


def curve_points(pred: LabPrediction, lo: float, hi: float, n: int
                 ) -> tuple[list[float], list[float], list[float]]:
    """(d_models, single ms, tp ms) of the prediction's curve, for a plot."""
    ds = latency.log_space(lo, hi, n)
    preds = latency.curve(pred.profile, ds, pred.world_size, pred.shape)
    return [p.d_model for p in preds], [p.single_ms for p in preds], [p.tp_ms for p in preds]
