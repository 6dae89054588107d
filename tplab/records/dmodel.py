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
import random
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from tplab.stats.fit import percentile
from tplab.records.job_flags import parse_d_models
from tplab.stats.harness import SEED, figure
from tplab.records.untrusted import Amount, Amounts, Count, Nested


@dataclass(frozen=True, slots=True)
class DModelPoint:
    """One measured size; each field's kind bounds it where the client reads it from the pod
    (``tplab.records.untrusted``: the ``sweep_point`` event carries these fields)."""

    d_model: Count
    n_head: Count
    params: Count               # the single-device model's parameters
    tokens: Count               # timed new tokens per mode (step 0, the prefill, excluded from ms)
    single_ms: Amount           # mean per-token ms, single device (rank 0 alone)
    tp_ms: Amount               # mean per-token ms, TP, uninstrumented pass
    allreduce_ms: Amount        # collective ms per token, rank 0, instrumented pass
    allreduce_calls: Amount     # collectives per token (all-reduces and the logits all-gather)
    tp_instrumented_ms: Amount  # mean per-token ms of the instrumented pass
    single_p50_ms: Amount
    tp_p50_ms: Amount
    outputs_match: bool         # single tokens == TP tokens == instrumented TP tokens
    seconds: Amount             # wall time of this size's build and first warm-up
    rounds: Count = 1           # rounds measured (one sample per figure each)
    tokens_per_round: Count = 0  # timed new tokens per visit
    single_rounds_ms: Amounts = ()     # per round: the visit's median per-token ms
    tp_rounds_ms: Amounts = ()
    allreduce_rounds_ms: Amounts = ()
    #: the profiled pass at this size (TP only): the medians of its split of a token into
    #: compute, wire, wait and rest (``tplab.records.timeline.mode_summary``); None without one
    profiled: Nested | None = None

    @property
    def allreduce_ms_per_call(self) -> float:
        return self.allreduce_ms / self.allreduce_calls if self.allreduce_calls else 0.0

    def figures(self) -> dict[str, dict[str, Any]]:
        """Each figure's spread over the rounds (``harness.Figure`` dicts), where it has rounds."""
        return {name: figure(getattr(self, f"{name[:-3]}_rounds_ms")).to_dict()
                for name in ("single_ms", "tp_ms", "allreduce_ms")
                if getattr(self, f"{name[:-3]}_rounds_ms")}

    @staticmethod
    def instability(figs: dict[str, dict[str, Any]]) -> str:
        """What makes the point unstable ("single unstable: spread 37%; ..."; "" when steady):
        its single or TP figure flagged (the all-reduce's own is not a point's verdict)."""
        return "; ".join(f"{k[:-3]} {f['note']}" for k, f in figs.items()
                         if f["unstable"] and k != "allreduce_ms")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["allreduce_ms_per_call"] = self.allreduce_ms_per_call
        figs = self.figures()
        for k in ("single_rounds_ms", "tp_rounds_ms", "allreduce_rounds_ms"):
            out[k] = list(out[k])
        out["figures"] = figs
        out["unstable_note"] = self.instability(figs)
        out["unstable"] = bool(out["unstable_note"])
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


#: a measured crossover is "resolved" when this share of the bootstrap resamples agrees with it
RESOLVED_SHARE = 0.9


def _status(cross: float | None, why: str) -> str:
    if cross is not None:
        return "found"
    return "below" if "below the sweep" in why else "above" if "above the sweep" in why else "none"


def crossover_interval(points: Sequence[dict[str, Any]], resamples: int = 400,
                       seed: int = SEED) -> dict[str, Any]:
    """How sure the measured crossover is, from the points' per-round samples.

    Each bootstrap resample redraws every point's rounds (single and TP) with replacement, takes
    their medians and finds the crossover again. ``resolved`` when at least ``RESOLVED_SHARE``
    of the resamples agree with the measurement (a crossover, or none on the same side);
    ``ci95`` the 2.5..97.5 percentiles of the resampled crossovers when it is one; ``note`` the
    sentence the report shows."""
    cross, why = measured_crossover(points)
    usable = [p for p in points if p.get("single_rounds_ms") and p.get("tp_rounds_ms")]
    if len(usable) < 2 or any(len(p["single_rounds_ms"]) < 2 for p in usable):
        return {"ci95": None, "resolved": None, "agreement": None, "resamples": 0,
                "note": "no interval: the sweep has fewer than two rounds per point"}
    rng = random.Random(seed)

    def redraw(xs: Sequence[float]) -> float:
        ys = sorted(xs[rng.randrange(len(xs))] for _ in xs)
        m = len(ys) // 2
        return ys[m] if len(ys) % 2 else (ys[m - 1] + ys[m]) / 2

    want = _status(cross, why)
    agree, values = 0, []
    for _ in range(resamples):
        pts = [{**p, "single_ms": redraw(p["single_rounds_ms"]),
                "tp_ms": redraw(p["tp_rounds_ms"])} for p in usable]
        c, w = measured_crossover(pts)
        agree += _status(c, w) == want
        if c is not None:
            values.append(c)
    share = agree / resamples
    resolved = share >= RESOLVED_SHARE
    ci = ([percentile(values, 2.5), percentile(values, 97.5)]
          if want == "found" and resolved and values else None)
    if not resolved:
        note = (f"not resolved at this noise: {share:.0%} of {resamples} resamples of the "
                f"rounds agree (needs {RESOLVED_SHARE:.0%})")
    elif ci is not None:
        note = f"95% interval d_model {ci[0]:.0f}..{ci[1]:.0f} (bootstrap over the rounds)"
    else:
        note = f"{share:.0%} of {resamples} resamples of the rounds agree"
    return {"ci95": ci, "resolved": resolved, "agreement": share, "resamples": resamples,
            "note": note}


def sweep_section(points: Sequence[DModelPoint], skipped: Sequence[SkippedSize],
                  note: str) -> dict[str, Any]:
    """The results.json keys of a d_model sweep: ``d_model_sweep`` (the measured points),
    ``d_model_sweep_skipped``, ``measured_crossover_d_model`` (+ ``_reason``, + ``_interval``:
    ``crossover_interval``), and how it was measured (``d_model_sweep_method``)."""
    rows = [p.to_dict() for p in points]
    cross, why = measured_crossover(rows)
    return {"d_model_sweep": rows,
            "d_model_sweep_skipped": [s.to_dict() for s in skipped],
            "measured_crossover_d_model": cross,
            "measured_crossover_reason": why,
            "measured_crossover_interval": crossover_interval(rows),
            "d_model_sweep_method": note}
