"""The d_model sweep's records and its measured crossover, as results.json holds them.

Why apart from ``dmodel_sweep``: the client reads these records (the dashboard, `tplab local`,
`tplab scaling --calibrate`) and must not import torch; the job builds them. Standard library only.

A point is one d_model decoded single-device and with TP on the same ranks (``DModelPoint``); a
size the job did not run is a ``SkippedSize`` with the reason. The measured crossover is where the
TP curve goes below the single-device one, interpolated between the two measured points that
bracket the change (linear in log d_model of log(tp/single), so a crossover between 256 and 512
lands where the ratio of the two curves reaches 1); ``None`` with the reason otherwise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from tplab.records.job_flags import parse_d_models


@dataclass(frozen=True, slots=True)
class DModelPoint:
    d_model: int
    n_head: int
    params: int                 # the single-device model's parameters
    tokens: int                 # timed new tokens per mode (step 0, the prefill, excluded from ms)
    single_ms: float            # mean per-token ms, single device (rank 0 alone)
    tp_ms: float                # mean per-token ms, TP, uninstrumented pass
    allreduce_ms: float         # collective ms per token, rank 0, instrumented pass
    allreduce_calls: float      # collectives per token (all-reduces and the logits all-gather)
    tp_instrumented_ms: float   # mean per-token ms of the instrumented pass
    single_p50_ms: float
    tp_p50_ms: float
    outputs_match: bool         # single tokens == TP tokens == instrumented TP tokens
    seconds: float              # wall time this point took (build, warm-up, three decodes)

    @property
    def allreduce_ms_per_call(self) -> float:
        return self.allreduce_ms / self.allreduce_calls if self.allreduce_calls else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["allreduce_ms_per_call"] = self.allreduce_ms_per_call
        return out


@dataclass(frozen=True, slots=True)
class SkippedSize:
    d_model: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sweep_sizes_from_args(text: str, tokens: int) -> list[int]:
    """The job's --sweep-d-model (none when empty) checked with its --sweep-tokens."""
    sizes = parse_d_models(text) if text else []
    if sizes and tokens < 2:
        raise ValueError(f"--sweep-tokens must be at least 2, got {tokens}.")
    return sizes


def measured_crossover(points: Sequence[dict[str, Any]]) -> tuple[float | None, str]:
    """(the d_model where TP becomes faster, interpolated, or None; the reason when None).

    Only points whose outputs matched count. The first pair (a, b) of consecutive points with TP
    slower at a and faster at b brackets the crossover; log(tp/single) is interpolated linearly in
    log d_model between them.
    """
    pts = sorted((p for p in points if p.get("outputs_match") and p.get("single_ms", 0) > 0
                  and p.get("tp_ms", 0) > 0), key=lambda p: p["d_model"])
    if len(pts) < 2:
        return None, (f"the sweep has {len(pts)} usable measured point(s); a measured crossover "
                      "needs two")
    ratios = [(float(p["d_model"]), math.log(p["tp_ms"] / p["single_ms"])) for p in pts]
    if ratios[0][1] < 0:
        return None, (f"TP is already faster at the smallest measured d_model "
                      f"{ratios[0][0]:.0f}; the crossover lies below the sweep")
    for (d0, r0), (d1, r1) in zip(ratios, ratios[1:]):
        if r0 >= 0 > r1:
            x0, x1 = math.log(d0), math.log(d1)
            return math.exp(x0 + (x1 - x0) * r0 / (r0 - r1)), ""
    return None, (f"TP stays slower than one device at every measured d_model up to "
                  f"{ratios[-1][0]:.0f} (TP/single {math.exp(ratios[-1][1]):.2f}x there); the "
                  "crossover lies above the sweep")


def sweep_section(points: Sequence[DModelPoint], skipped: Sequence[SkippedSize],
                  note: str) -> dict[str, Any]:
    """The results.json keys of a d_model sweep: ``d_model_sweep`` (the measured points),
    ``d_model_sweep_skipped``, ``measured_crossover_d_model`` (+ ``_reason``), and how it was
    measured (``d_model_sweep_method``)."""
    rows = [p.to_dict() for p in points]
    cross, why = measured_crossover(rows)
    return {"d_model_sweep": rows,
            "d_model_sweep_skipped": [s.to_dict() for s in skipped],
            "measured_crossover_d_model": cross,
            "measured_crossover_reason": why,
            "d_model_sweep_method": note}
