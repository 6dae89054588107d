"""A lab's figures as one typed record, made once, which every face renders.

Why one record: the headless table, the dashboard (its strip, panels, legends and timeline
header), the manifest and its lesson notes, the proof picture, `tplab timeline` and the hand-in
each made their figures again from the parts, and so disagreed: an "AR 91%" legend beside an
"AR 90%" strip, an all-reduce above TP's latency with no word that two passes measured them, a
profiled token at 50.8 ms under a strip showing 30.79. Here each figure is made once, from
results.json (``from_results``), the lab's cost figure (``tplab.money.lab_money.CostFigure``,
the ledger's billed amount or the running estimate) and its crossover (``Crossover``: the
scaling model's ``CrossoverBand``, the d_model sweep's measured crossover and the hardware they
are for), each a ``tplab.figures.figure.Figure`` that says which pass took it. A face formats
nothing itself: it prints ``figure.text()`` (and ``tag()``, the pass).

While a lab runs, ``from_fold`` makes the same record from the live token stream
(``tplab.viewmodel.tokens.TokenFold``), every figure marked ``so_far``; once the lab has its
figures it writes the record (``to_dict``) into the ``figures`` event, manifest.json's
``lab_figures`` and, through them, the hand-in; ``from_dict`` reads it back.

Standard library only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from tplab.figures.figure import (INSTRUMENTED, MS, NONE, PROFILED, RATIO, SHARE, TIMED, TIMES,
                                  Figure)
from tplab.records.untrusted import finite
from tplab.viewmodel.timeline_view import Split, allreduce_text, split_text, timeline_from

if TYPE_CHECKING:
    from tplab.money.lab_money import CostFigure
    from tplab.scaling.crossover import CrossoverBand
    from tplab.viewmodel.timeline_view import Timeline
    from tplab.viewmodel.tokens import TokenFold

#: the record's figures: name -> (unit, pass, label as a table names it)
FIGURES: dict[str, tuple[str, str, str]] = {
    "single_ms": (MS, TIMED, "single per token"),
    "tp_ms": (MS, TIMED, "TP per token"),
    "speedup": (TIMES, TIMED, "speedup, single/TP"),
    "single_p50_ms": (MS, TIMED, "single p50"),
    "single_p99_ms": (MS, TIMED, "single p99"),
    "tp_p50_ms": (MS, TIMED, "TP p50"),
    "tp_p99_ms": (MS, TIMED, "TP p99"),
    "allreduce_ms": (MS, INSTRUMENTED, "all-reduce per token"),
    "instrumented_tp_ms": (MS, INSTRUMENTED, "TP per token, instrumented"),
    "allreduce_share": (SHARE, INSTRUMENTED, "all-reduce share"),
    "comm_compute": (RATIO, INSTRUMENTED, "comm/compute"),
}
#: the d_model sweep and the scaling model, as the crossover says where it comes from
MEASURED, PREDICTED = "measured", "predicted"


@dataclass(frozen=True)
class Crossover:
    """The crossover and the hardware it is for: the scaling model's band (calibrated from the
    run, or the profile's), the d_model sweep's measured crossover when it ran, and the seed's
    one number (``d_model``: the measured one when its bootstrap resolved it, else the band's
    central fit when the band says where, else none), with where that number comes from."""

    band: CrossoverBand | None
    d_model: float | None = None
    source: str | None = None            # MEASURED | PREDICTED (None: no number)
    predicted_d_model: float | None = None  # the model's central fit (the band's estimate)
    measured_d_model: float | None = None
    measured_note: str = ""               # why the sweep measured none, or its interval
    measured_on: str | None = None        # the machine the run measured on, in words
    stands_for: str | None = None         # a mock lab: the hardware it stands for (nothing ran)

    def text(self) -> str:
        """The band's one sentence, the measured crossover beside it when the sweep found one."""
        if self.band is not None:
            out = self.band.text()
        elif self.predicted_d_model:
            out = f"d_model ≈ {self.predicted_d_model:,.0f} [the scaling model's prediction]"
        else:
            out = "none predicted"
        if self.measured_d_model is not None:
            out += f"; measured by the d_model sweep at d_model ≈ {self.measured_d_model:,.0f}"
        return out

    def short(self) -> str:
        """A few characters for a title: the band's ("1.1k–1.5k"), or the seed's number."""
        if self.band is not None:
            return self.band.short()
        return f"≈{self.d_model:,.0f}" if self.d_model else "none"

    def to_dict(self) -> dict[str, Any]:
        return {"band": self.band.to_dict() if self.band is not None else None,
                "d_model": self.d_model, "source": self.source,
                "predicted_d_model": self.predicted_d_model, "measured_d_model": self.measured_d_model, "measured_note": self.measured_note,
                "measured_on": self.measured_on, "stands_for": self.stands_for,
                "shown": self.text()}

    @classmethod
    def from_dict(cls, obj: Any) -> Crossover | None:
        if not isinstance(obj, dict):
            return None
        from tplab.scaling.crossover import CrossoverBand

        def words(key: str) -> str | None:
            v = obj.get(key)
            return v[:400] if isinstance(v, str) else None
        source = obj.get("source")
        return cls(CrossoverBand.from_dict(obj.get("band")), finite(obj.get("d_model")),
                   source if source in (MEASURED, PREDICTED) else None,
                   finite(obj.get("predicted_d_model")), finite(obj.get("measured_d_model")), words("measured_note") or "",
                   words("measured_on"), words("stands_for"))


def crossover_of(results: dict[str, Any] | None, band: CrossoverBand | None,
                 measured_on: str | None = None, stands_for: str | None = None,
                 predicted: float | None = None) -> Crossover:
    """The lab's crossover from its results (the d_model sweep's) and the model's band (or,
    without one, its ``predicted`` point): the seed's number is the sweep's when its bootstrap
    resolved it, else the model's central fit when the band is a range or a point, else none
    ("no crossover below d_model N" is no number; the band's text says it)."""
    r = results or {}
    measured = finite(r.get("measured_crossover_d_model"))
    interval = r.get("measured_crossover_interval")
    resolved = not isinstance(interval, dict) or interval.get("resolved") is not False
    central = band.estimate if band is not None else predicted
    says = band is None or band.kind in ("range", "point")
    number = measured if measured is not None and resolved else (central if says else None)
    note = ""
    if r.get("d_model_sweep") is not None:
        note = str(r.get("measured_crossover_reason") or "")
        if isinstance(interval, dict) and isinstance(interval.get("note"), str):
            note = "; ".join(x for x in (note, interval["note"]) if x)
    return Crossover(band, round(number, 1) if number else None,
                     None if not number else MEASURED if number == measured else PREDICTED,
                     round(central, 1) if central else None, measured, note, measured_on,
                     stands_for)


def _per_token(results: dict[str, Any], mode: str, key: str, stat: str) -> Any:
    section = results.get(mode)
    block = section.get(key) if isinstance(section, dict) else None
    return block.get(stat) if isinstance(block, dict) else None


def _pass_spread(results: dict[str, Any], mode: str) -> float | None:
    """The spread of a mode's per-prompt mean per-token ms over its passes (stability)."""
    section = results.get(mode)
    passes = section.get("passes") if isinstance(section, dict) else None
    mean = passes.get("mean") if isinstance(passes, dict) else None
    return finite(mean.get("spread")) if isinstance(mean, dict) else None


def _samples(name: str) -> str:
    """Which decode steps a figure of ``FIGURES`` summarises: single's, the timed TP pass's or
    the instrumented pass's."""
    if name.startswith("single"):
        return "single"
    return "instr" if FIGURES[name][1] == INSTRUMENTED else "tp"


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _split_dict(split: Split | None) -> dict[str, Any] | None:
    return asdict(split) if split is not None else None


def _split_from(obj: Any) -> Split | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("tokens"), int):
        return None
    values: dict[str, Any] = {}
    for f in fields(Split):
        if f.name in ("tokens", "ranks"):
            continue
        values[f.name] = finite(obj.get(f.name))
    if any(values[k] is None for k in ("token_us", "compute_us", "wire_us", "wait_us",
                                       "rest_us")):
        return None
    ranks = obj.get("ranks")
    return Split(obj["tokens"], ranks=ranks if isinstance(ranks, int) and ranks > 0 else 2,
                 **values)


@dataclass(frozen=True)
class LabFigures:
    """Every figure of one lab (see the module docstring); ``FIGURES`` names the timed and the
    instrumented ones, the profiled split, the crossover and the cost are records of their
    own."""

    single_ms: Figure
    tp_ms: Figure
    speedup: Figure
    single_p50_ms: Figure
    single_p99_ms: Figure
    tp_p50_ms: Figure
    tp_p99_ms: Figure
    allreduce_ms: Figure
    instrumented_tp_ms: Figure
    allreduce_share: Figure
    comm_compute: Figure
    outputs_match: bool | None = None
    comm: str | None = None                 # what carried TP's collectives
    profiled_tp: Split | None = None        # the profiled pass: a TP token's median split
    profiled_single: Split | None = None
    crossover: Crossover | None = None
    cost: CostFigure | None = None
    so_far: bool = False                    # the live stream's figures, the lab still running

    # ------------------------------------------------------------------ made
    @classmethod
    def from_results(cls, results: dict[str, Any], *, cost: CostFigure | None = None,
                     crossover: Crossover | None = None) -> LabFigures:
        """The record of a run from its results.json (a ``result`` event's dict)."""
        r = results
        vals: dict[str, Any] = {
            "single_ms": r.get("single_per_token_ms"), "tp_ms": r.get("tp_per_token_ms"),
            "speedup": r.get("speedup"),
            "single_p50_ms": _per_token(r, "single", "per_token_ms", "p50"),
            "single_p99_ms": _per_token(r, "single", "per_token_ms", "p99"),
            "tp_p50_ms": _per_token(r, "tp", "per_token_ms", "p50"),
            "tp_p99_ms": _per_token(r, "tp", "per_token_ms", "p99"),
            "allreduce_ms": r.get("allreduce_ms_per_token"),
            "instrumented_tp_ms": _per_token(r, "tp", "instrumented_per_token_ms", "mean"),
            "comm_compute": r.get("comm_compute_ratio"),
        }
        ar, instr = finite(vals["allreduce_ms"]), finite(vals["instrumented_tp_ms"])
        vals["allreduce_share"] = _ratio(ar, instr) if ar and ar > 0 else None
        n = {"single": _count(_per_token(r, "single", "per_token_ms", "n")),
             "tp": _count(_per_token(r, "tp", "per_token_ms", "n")),
             "instr": _count(_per_token(r, "tp", "instrumented_per_token_ms", "n"))}
        spread = {"single_ms": _pass_spread(r, "single"), "tp_ms": _pass_spread(r, "tp")}
        made: dict[str, Any] = {name: Figure(finite(vals[name]), unit, taken, n=n[_samples(name)],
                             spread=spread.get(name))
                for name, (unit, taken, _label) in FIGURES.items()}
        timeline = timeline_from(r.get("timeline"))
        match = r.get("outputs_match")
        return cls(**made, outputs_match=match if isinstance(match, bool) else None,
                   comm=str(r.get("comm") or r.get("backend") or "") or None,
                   profiled_tp=timeline.splits.get("tp") if timeline else None,
                   profiled_single=timeline.splits.get("single") if timeline else None,
                   crossover=crossover, cost=cost)

    @classmethod
    def from_fold(cls, tokens: TokenFold, *, timeline: Timeline | None = None,
                  cost: CostFigure | None = None) -> LabFigures:
        """The record so far, from the live token stream (each prompt's prefill step left out
        of the means, as results.json does)."""
        single, tp = tokens.modes["single"], tokens.modes["tp"]
        s, t = single.decode_mean_ms, tp.decode_mean_ms
        instr = (tp.ar_measured_token_ms / tp.ar_measured_count if tp.ar_measured_count
                 else None)
        vals = {"single_ms": s, "tp_ms": t, "speedup": _ratio(s, t),
                "single_p50_ms": single.p(0.5), "single_p99_ms": single.p(0.99),
                "tp_p50_ms": tp.p(0.5), "tp_p99_ms": tp.p(0.99),
                "allreduce_ms": tp.ar_measured_mean_ms, "instrumented_tp_ms": instr,
                "allreduce_share": tp.ar_share, "comm_compute": tp.comm_compute_ratio}
        n = {"single": single.decode_count, "tp": tp.decode_count,
             "instr": tp.ar_measured_count}
        made: dict[str, Any] = {name: Figure(vals[name], unit, taken, n=n[_samples(name)] or None, so_far=True)
                for name, (unit, taken, _label) in FIGURES.items()}
        return cls(**made, outputs_match=None,
                   profiled_tp=timeline.splits.get("tp") if timeline else None,
                   profiled_single=timeline.splits.get("single") if timeline else None,
                   cost=cost, so_far=True,
                   comm=timeline.comm if timeline else None)

    # ------------------------------------------------------------------ read
    def figure(self, name: str) -> Figure:
        """One of ``FIGURES`` by name."""
        if name not in FIGURES:
            raise KeyError(name)
        return getattr(self, name)

    @property
    def measured(self) -> bool:
        """Some latency was measured (a lab that ended before its first token has none)."""
        return self.single_ms.value is not None or self.tp_ms.value is not None

    def label(self, name: str) -> str:
        """A figure's name in a table, with its pass: "TP per token (timed pass)"."""
        unit, taken, label = FIGURES[name]
        fig = self.figure(name)
        return f"{label} ({taken}{', so far' if fig.so_far else ''})"

    def allreduce_text(self) -> str:
        """'18.5 ms of a 21.2 ms token': the all-reduce inside the instrumented pass's own
        token (it timed both), not the timed pass's."""
        ar, tok = self.allreduce_ms, self.instrumented_tp_ms
        if ar.value is None:
            return NONE
        if tok.value is None:
            return f"{ar.text()} per token"
        return f"{ar.text()} of a {tok.text()} token"

    def profiled_text(self, mode: str = "tp") -> str:
        """The profiled pass's median split of a token of ``mode``: '59.9 ms a token; medians:
        compute 2968, wire 48398, wait 5255, rest 3062 µs (median of 4 profiled tokens)'."""
        split = self.profiled_tp if mode == "tp" else self.profiled_single
        if split is None:
            return NONE
        return f"{split_text(split)} (median of {split.tokens} profiled tokens)"

    def profiled_against_timed(self, mode: str = "tp") -> str:
        """A mode's two figures of one token, each with how it was taken, so neither reads as
        the other: 'profiled TP 59.9 ms (median of 4, profiler on) vs timed 22.3 ms (mean)'
        (the profiler's own cost slows a profiled token; a median of a few tokens is not the
        mean of all)."""
        split = self.profiled_tp if mode == "tp" else self.profiled_single
        timed = self.tp_ms if mode == "tp" else self.single_ms
        if split is None or timed.value is None:
            return ""
        name = "TP" if mode == "tp" else "single"
        profiled = Figure(split.token_us / 1000, MS, PROFILED)
        return (f"profiled {name} {profiled.text()} (median of {split.tokens}, profiler on) vs "
                f"timed {timed.text()} (mean{' so far' if timed.so_far else ''})")

    def profiled_rows(self) -> list[tuple[str, str]]:
        """The profiled pass's figures as rows: a TP token's median split, an all-reduce's
        wait and wire, why it is not the timed figure, a single token's split."""
        rows = []
        if self.profiled_tp is not None:
            rows.append((f"TP token ({PROFILED})", self.profiled_text("tp")))
            ar = allreduce_text(self.profiled_tp)
            if ar:
                rows.append((f"per all-reduce ({PROFILED})", ar))
            if self.profiled_against_timed():
                rows.append((f"{PROFILED} vs {TIMED}", self.profiled_against_timed()))
        if self.profiled_single is not None:
            rows.append((f"single token ({PROFILED})", self.profiled_text("single")))
        return rows

    def rows(self) -> list[tuple[str, str]]:
        """The figures as (label with its pass, text) rows, in reading order: the one table
        a face prints (the headless table, the hand-in's README)."""
        rows = [(self.label("single_ms"), self.single_ms.text()),
                (self.label("tp_ms"), self.tp_ms.text()),
                (self.label("speedup"), self.speedup.text()),
                (f"all-reduce ({INSTRUMENTED}{', so far' if self.so_far else ''})",
                 self.allreduce_text() + (f", {self.allreduce_share.text()} of it"
                                          if self.allreduce_share.value is not None else "")),
                (self.label("comm_compute"), self.comm_compute.text())]
        rows += self.profiled_rows()
        if self.crossover is not None:
            rows.append(("crossover", self.crossover.text()))
            if self.crossover.measured_on:
                rows.append(("measured on", self.crossover.measured_on))
            if self.crossover.stands_for:
                rows.append(("stands for", self.crossover.stands_for))
        if self.cost is not None:
            rows.append(("cost", self.cost.text()))
        return rows

    # ------------------------------------------------------------------ stored
    def to_dict(self) -> dict[str, Any]:
        """The record as manifest.json's ``lab_figures`` and the ``figures`` event carry it:
        each figure with its value, unit, text as shown and pass."""
        out: dict[str, Any] = {name: self.figure(name).to_dict() for name in FIGURES}
        out.update(outputs_match=self.outputs_match, comm=self.comm,
                   profiled_tp=_split_dict(self.profiled_tp),
                   profiled_single=_split_dict(self.profiled_single),
                   crossover=self.crossover.to_dict() if self.crossover is not None else None,
                   cost=_cost_dict(self.cost), so_far=self.so_far)
        return out

    @classmethod
    def from_dict(cls, obj: Any) -> LabFigures | None:
        """A stored record (``to_dict``'s), or None when ``obj`` is not one."""
        if not isinstance(obj, dict) or not all(isinstance(obj.get(k), dict) for k in FIGURES):
            return None
        made: dict[str, Any] = {name: Figure.from_dict(obj[name], unit, taken)
                for name, (unit, taken, _label) in FIGURES.items()}
        match, comm = obj.get("outputs_match"), obj.get("comm")
        return cls(**made, outputs_match=match if isinstance(match, bool) else None,
                   comm=comm[:40] if isinstance(comm, str) else None,
                   profiled_tp=_split_from(obj.get("profiled_tp")),
                   profiled_single=_split_from(obj.get("profiled_single")),
                   crossover=Crossover.from_dict(obj.get("crossover")),
                   cost=_cost_from(obj.get("cost")), so_far=obj.get("so_far") is True)


def from_manifest(manifest: Any) -> LabFigures | None:
    """A lab's record from its manifest.json: the ``lab_figures`` it holds, or, for a manifest
    written before it held one, the record made from its seed fields (the timed pass's
    latencies and speedup, the instrumented pass's all-reduce, the cost recorded); None when it
    is no manifest."""
    if not isinstance(manifest, dict):
        return None
    made = LabFigures.from_dict(manifest.get("lab_figures"))
    if made is not None:
        return made
    m = manifest
    cost = None
    if finite(m.get("actual_cost_usd")) is not None:
        from tplab.money.lab_money import BILLED, ESTIMATE, CostFigure
        cost = CostFigure(finite(m.get("actual_cost_usd")),
                          ESTIMATE if m.get("cost_is") == ESTIMATE else BILLED,
                          finite(m.get("usd_per_hr")))
    from tplab.scaling.crossover import CrossoverBand
    cross = crossover_of({}, CrossoverBand.from_dict(m.get("crossover")),
                         predicted=finite(m.get("predicted_crossover_d_model")))
    return LabFigures.from_results({**m, "single_per_token_ms": m.get("single_gpu_per_token_ms")},
                                   cost=cost, crossover=cross)


def _cost_dict(cost: CostFigure | None) -> dict[str, Any] | None:
    if cost is None:
        return None
    return {"usd": cost.usd, "what": cost.what, "usd_per_hr": cost.usd_per_hr,
            "seconds": cost.seconds, "ended_at": cost.ended_at, "shown": cost.text()}


def _cost_from(obj: Any) -> CostFigure | None:
    if not isinstance(obj, dict):
        return None
    from tplab.money.lab_money import BILLED, ESTIMATE, CostFigure
    what = obj.get("what")
    return CostFigure(finite(obj.get("usd")), what if what in (BILLED, ESTIMATE) else ESTIMATE,
                      finite(obj.get("usd_per_hr")), finite(obj.get("seconds")),
                      finite(obj.get("ended_at")))
