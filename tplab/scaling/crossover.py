"""The crossover with its uncertainty: from which d_model TP decodes faster than one device, as a
range from the measurements' own spread, or "no crossover below d_model N" when they cannot tell
TP's gain from zero.

Why: the crossover is a root of tp(d) − single(d), and where TP's saving on the weight reads is
small that root runs off to any d_model at all: a calibration that fits one TP rank's bandwidth 1 %
above half a device's gives a crossover, one 1 % below gives none. A single number hides that;
two runs of one machine then give two lessons. So the crossover is made here, once, as a
``CrossoverBand`` every face renders (the manifest, results.json's ``calibration``, the
dashboard before and after the run, ``tplab scaling``, DISTRIBUTED.md, the PNG, which draws the
band):

* **How**: a seeded percentile bootstrap. Each resample redraws the figures the calibration
  reads from their own samples — the lab's passes (each prompt's mean per-token ms, single and
  TP), the profiled TP tokens (the split's medians), the all-reduce sweep's rounds per size, and
  the d_model sweep's rounds (one round index drawn for every point together: a round visits
  every size, so its slow moments are shared) — calibrates again (``calibration.calibrate``) and
  solves the crossover again. The terms a run cannot fit (one point says nothing about how the
  weight reads grow with d_model) come from the profile, and the profile carries its own
  bootstrap replicates from the sweep it was calibrated on: resample ``i`` takes replicate ``i``,
  so the band carries that uncertainty too. A profile whose figures are assumed (a spec sheet)
  has no replicates; its crossover is a point, and says so.
* **What**: with ``None`` (no crossover up to ``D_MAX``) counted as +∞, the 2.5 and 97.5
  percentiles of the resampled crossovers: both finite, a *range*; only the lower one, *none
  below N* (above N the data cannot tell TP's gain from zero); neither, *none below D_MAX*.
* **Which**: the band says whether it is the profile's (as stored) or calibrated from a run.

Client side: no torch.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import asdict, dataclass
from typing import Any, Sequence, TypeVar

from tplab.scaling import calibration, latency
from tplab.scaling.latency import HardwareProfile, ModelShape, ScalingError
from tplab.scaling.split_compare import annotate_both_ways
from tplab.stats.harness import SEED, median

#: bootstrap resamples of a run (the profiles store their own replicates)
RESAMPLES = 400
LEVEL = 0.95
#: where a band comes from
CALIBRATED, PROFILE = "calibrated", "profile"
#: a band's kinds
RANGE, NONE_BELOW, NONE, POINT = "range", "none below", "none", "point"


def _d(v: float) -> str:
    return f"{v:,.0f}"


def _k(v: float) -> str:
    return f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"


@dataclass(frozen=True)
class CrossoverBand:
    """The crossover of one profile (as stored, or calibrated from a run) with its 95 % band."""

    profile: str
    source: str                      # CALIBRATED | PROFILE
    estimate: float | None           # the central fit's crossover (None: none up to ``limit``)
    lo: float | None                 # 2.5 % of the resampled crossovers (None: beyond ``limit``)
    hi: float | None                 # 97.5 % (None: some resamples find none up to ``limit``)
    limit: float
    resamples: int                   # 0: the profile's figures are assumed, no interval
    no_crossover_share: float        # resamples with no crossover up to ``limit``
    method: str                      # what was redrawn, in words

    @property
    def kind(self) -> str:
        if self.resamples == 0:
            return POINT
        if self.lo is None:
            return NONE
        return RANGE if self.hi is not None else NONE_BELOW

    @property
    def where(self) -> str:
        """"cpu-gloo calibrated from this run" / "cpu-gloo profile as stored"."""
        point = self.kind == POINT
        if self.source == CALIBRATED:
            return f"{self.profile} calibrated from this run" + (
                ", no samples to draw an interval from" if point else "")
        return f"{self.profile} profile as stored" + (
            ", assumed figures without an interval" if point else "")

    def text(self) -> str:
        """The one sentence every face shows."""
        kind = self.kind
        if kind == POINT:
            what = (f"d_model ≈ {_d(self.estimate)}" if self.estimate is not None
                    else f"no crossover up to d_model {_d(self.limit)}")
        elif kind == RANGE and _d(self.lo or 0) == _d(self.hi or 0):
            what = f"d_model ≈ {_d(self.lo or 0)} (every resample agrees)"
        elif kind == RANGE:
            what = (f"d_model {_d(self.lo or 0)}–{_d(self.hi or 0)}"
                    + (f" (central fit ≈ {_d(self.estimate)})" if self.estimate else ""))
        elif kind == NONE_BELOW:
            what = (f"no crossover below d_model {_d(self.lo or 0)}: above it the data cannot "
                    f"tell TP's gain from zero ({self.no_crossover_share:.0%} of the resamples "
                    f"find none up to {_d(self.limit)})")
        else:
            what = f"no crossover below d_model {_d(self.limit)}"
        interval = "" if kind == POINT else f"; {LEVEL:.0%} bootstrap, {self.resamples} resamples"
        return f"{what} [{self.where}{interval}]"

    def short(self) -> str:
        """A few characters for a title: "1.4k–2.3k", "none < 2.9k", "≈1,953"."""
        kind = self.kind
        if kind == POINT:
            return f"≈{_d(self.estimate)}" if self.estimate is not None else "none"
        if kind == RANGE and _k(self.lo or 0) == _k(self.hi or 0):
            return f"≈{_k(self.lo or 0)}"
        if kind == RANGE:
            return f"{_k(self.lo or 0)}–{_k(self.hi or 0)}"
        return f"none < {_k(self.lo if kind == NONE_BELOW and self.lo else self.limit)}"

    @property
    def below(self) -> float:
        """The d_model under which there is no crossover, at this confidence."""
        return self.lo if self.lo is not None else self.limit

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(kind=self.kind, text=self.text(), level=LEVEL)
        return out

    @classmethod
    def from_dict(cls, obj: Any) -> CrossoverBand | None:
        """A stored band (a manifest, results.json), or None when it is not one."""
        if not isinstance(obj, dict):
            return None
        try:
            def opt(k: str) -> float | None:
                v = obj.get(k)
                return None if v is None else float(v)
            return cls(str(obj["profile"]), str(obj["source"]), opt("estimate"), opt("lo"),
                       opt("hi"), float(obj["limit"]), int(obj["resamples"]),
                       float(obj["no_crossover_share"]), str(obj.get("method", "")))
        except (KeyError, TypeError, ValueError):
            return None


def _rank(values: Sequence[float], q: float) -> float:
    """The ``q`` (0..1) order statistic of sorted ``values`` (nearest rank; +∞ allowed)."""
    i = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[i]


def _band(profile: str, source: str, estimate: float | None, crossings: list[float | None],
          method: str, limit: float) -> CrossoverBand:
    if not crossings:
        return CrossoverBand(profile, source, estimate, estimate, estimate, limit, 0,
                             0.0 if estimate is not None else 1.0, method)
    values = sorted(math.inf if c is None else c for c in crossings)
    tail = (1 - LEVEL) / 2
    lo, hi = _rank(values, tail), _rank(values, 1 - tail)
    none = sum(1 for c in crossings if c is None) / len(crossings)
    return CrossoverBand(profile, source, estimate, None if math.isinf(lo) else lo,
                         None if math.isinf(hi) else hi, limit, len(crossings), none, method)


def for_profile(profile: HardwareProfile, world_size: int = 2,
                shape: ModelShape | None = None) -> CrossoverBand:
    """The crossover of a profile as stored: over its bootstrap replicates when it has them
    (measured profiles), else the point of its assumed figures."""
    shape = shape or latency.load_shape()
    estimate = latency.crossover_d_model(profile, world_size, shape)
    crossings = [latency.crossover_d_model(profile.replicate(i), world_size, shape)
                 for i in range(len(profile.replicates))]
    method = (f"over the profile's {len(crossings)} bootstrap replicates ({profile.replicates_note})"
              if crossings else "the profile's assumed figures: no measured spread to carry")
    return _band(profile.name, PROFILE, estimate, crossings, method, latency.D_MAX)


# ------------------------------------------------------------------------------ a run, redrawn

T = TypeVar("T")


def _redraw(xs: Sequence[T], rng: random.Random) -> list[T]:
    return [xs[rng.randrange(len(xs))] for _ in xs]


def _num(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    return float(v) if ok else None


def _samples(v: Any) -> list[float] | None:
    ok = (isinstance(v, list) and len(v) >= 2
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v))
    return [float(x) for x in v] if ok else None


def _tokens_median(tokens: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """A mode's split medians from its token steps: per step the mean over the ranks, then the
    median over the steps (as the job's ``timeline.mode_summary``)."""
    parts = ("token_us", "compute_us", "wire_us", "wait_us", "rest_us")
    per_step: dict[str, list[float]] = {k: [] for k in parts}
    for t in tokens:
        ranks = t.get("ranks") if isinstance(t, dict) else None
        if not isinstance(ranks, list) or not ranks:
            return None
        for k in parts:
            vals = [_num(r.get(k)) for r in ranks if isinstance(r, dict)]
            got = [v for v in vals if v is not None]
            if not got or len(got) != len(ranks):
                return None
            per_step[k].append(sum(got) / len(got))
    return {k: median(v) for k, v in per_step.items()} if tokens else None


class _Redrawer:
    """Makes resampled copies of a results.json: each figure the calibration reads redrawn from
    its own samples (what each one is: ``what``)."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.r = results
        self.what: list[str] = []
        self.passes: dict[str, list[float]] = {}
        for mode, key in (("single", "single_per_token_ms"), ("tp", "tp_per_token_ms")):
            xs = _samples(((results.get(mode) or {}).get("passes") or {}).get("pass_means_ms"))
            if xs:
                self.passes[key] = xs
        if self.passes:
            self.what.append("the lab's passes (each prompt's mean per-token ms)")
        tl = ((results.get("timeline") or {}).get("modes") or {}).get("tp") or {}
        tokens = tl.get("tokens")
        self.tokens: list[dict[str, Any]] = tokens if isinstance(tokens, list) else []
        if len(self.tokens) >= 2 and _tokens_median(self.tokens) is not None:
            self.what.append("the profiled TP tokens")
        else:
            self.tokens = []
        self.sweep = [p for p in ((results.get("sweep") or {}).get("points") or [])
                      if isinstance(p, dict) and _samples(p.get("repeat_ms"))]
        if self.sweep:
            self.what.append("the all-reduce sweep's rounds")
        pts = [p for p in results.get("d_model_sweep") or [] if isinstance(p, dict)]
        counts = {len(p.get("single_rounds_ms") or ()) for p in pts}
        self.rounds = counts.pop() if pts and len(counts) == 1 else 0
        self.points = pts if self.rounds >= 2 and all(
            len(p.get(k) or ()) == self.rounds
            for p in pts for k in ("tp_rounds_ms", "allreduce_rounds_ms")) else []
        if self.points:
            self.what.append("the d_model sweep's rounds")

    def draw(self, rng: random.Random) -> dict[str, Any]:
        r = dict(self.r)
        for key, xs in self.passes.items():
            drawn = _redraw(xs, rng)
            r[key] = sum(drawn) / len(drawn)
        if self.tokens:
            tl = dict(r["timeline"])
            modes = dict(tl["modes"])
            modes["tp"] = {**modes["tp"], "median": _tokens_median(_redraw(self.tokens, rng))}
            r["timeline"] = {**tl, "modes": modes}
        if self.sweep:
            points = [{**p, "repeat_ms": _redraw(p["repeat_ms"], rng)} for p in self.sweep]
            r["sweep"] = {**r["sweep"], "points": points}
        if self.points:
            idx = [rng.randrange(self.rounds) for _ in range(self.rounds)]
            r["d_model_sweep"] = [
                {**p, **{f"{k}_ms": median([p[f"{k}_rounds_ms"][i] for i in idx])
                         for k in ("single", "tp", "allreduce")}} for p in self.points]
        return r


def for_run(prior: HardwareProfile, results: dict[str, Any], shape: ModelShape | None = None,
            world_size: int | None = None, resamples: int = RESAMPLES,
            seed: int = SEED) -> CrossoverBand:
    """The crossover of ``prior`` calibrated from ``results``, with the band of the bootstrap
    (module docstring); ScalingError when the run cannot be calibrated at all."""
    shape = latency.shape_from_results(results, shape)
    world = world_size or int(results.get("world_size") or 2)
    central = calibration.calibrate(prior, results, shape)
    estimate = latency.crossover_d_model(central, world, shape)
    redrawer = _Redrawer(results)
    rng = random.Random(seed)
    crossings: list[float | None] = []
    failed = 0
    for i in range(resamples if (redrawer.what or prior.replicates) else 0):
        try:
            cal = calibration.calibrate(prior.replicate(i), redrawer.draw(rng), shape)
        except ScalingError:
            failed += 1
            continue
        crossings.append(latency.crossover_d_model(cal, world, shape))
    parts = list(redrawer.what)
    if prior.replicates:
        parts.append(f"the {prior.name} profile's replicates for the terms the run does not fit")
    method = ("seeded bootstrap over " + ", ".join(parts) if parts
              else "nothing to redraw: the run has no samples and the profile no replicates")
    if failed:
        method += f" ({failed} resamples could not be calibrated and were left out)"
    return _band(prior.name, CALIBRATED, estimate, crossings, method, latency.D_MAX)


def replicate_rows(prior: HardwareProfile, results: dict[str, Any], shape: ModelShape | None,
                   terms: Sequence[str], resamples: int,
                   seed: int = SEED) -> list[tuple[float, ...]]:
    """The values of ``terms`` in each bootstrap resample of ``results`` calibrated again: a
    measured profile's replicates (``tplab.scaling.profile_file``)."""
    prior = dataclasses.replace(prior, replicate_terms=(), replicates=(), replicates_note="")
    redrawer = _Redrawer(results)
    rng = random.Random(seed)
    rows = []
    for _ in range(resamples):
        try:
            cal = calibration.calibrate(prior, redrawer.draw(rng), shape)
        except ScalingError:
            continue
        rows.append(tuple(getattr(cal, t).value if getattr(cal, t) is not None
                          else cal.tp_value(t.removeprefix("tp_")) for t in terms))
    return rows


def annotate_run(results: dict[str, Any], prior: HardwareProfile,
                 shape: ModelShape | None = None
                 ) -> tuple[HardwareProfile, dict[str, Any], CrossoverBand]:
    """What every face that calibrates a run calls, once: the calibrated profile, results.json's
    ``calibration`` block (``split_compare.annotate_both_ways``, stored in ``results`` in place)
    with the band in it (``crossover``; ``predicted_crossover_d_model`` its central fit), and
    the band. ScalingError when the run cannot be calibrated."""
    calibrated = calibration.calibrate(prior, results, shape)
    block = annotate_both_ways(results, calibrated, prior, shape)
    band = for_run(prior, results, shape)
    block["predicted_crossover_d_model"] = band.estimate
    block["crossover"] = band.to_dict()
    return calibrated, block, band
