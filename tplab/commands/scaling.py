"""`tplab scaling`: the predicted per-token latency of one device vs TP as d_model grows.

Why: the lab's measured slowdown is one point; the curve says where TP starts to pay on a given
machine and why (weight reads divided by p against collectives and launches that are not). It
draws the plot in the terminal and prints the prediction at the lab sheet's d_model 64, 256, 1024 and
4096; with ``--out DIR`` it also writes ``scaling-curve.png`` and ``scaling.json``. With
``--calibrate results.json`` the profile is the one of the run's device and transport (another one
asked for is refused), calibrated to the run's d_model sweep when it has one, and the run's
measured points and measured crossover are drawn beside the predicted ones, each labelled.

Standard library only at module level, per the CLI contract.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HELP = "predict single vs TP decode latency over d_model; plot the crossover"
DESCRIPTION = (
    "Predict per-token decode latency of one device vs TP over --tp ranks for d_model from 32 to "
    "16384 (memory, compute, launch overhead, ring all-reduce alpha-beta), solve the crossover "
    "and draw the plot in the terminal; with --out DIR also write DIR/scaling-curve.png and "
    "DIR/scaling.json. --calibrate results.json starts from the profile of the run's device and "
    "transport, fits the model to the run's d_model sweep (or, without one, alpha and beta to its "
    "all-reduce sweep and the launch overhead to its one point), and draws its measured points "
    "and measured crossover beside the predicted ones.")

SHEET_RANGE = (1024, 2048)  # the lab sheet's expected crossover on 2x RTX 4090


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=None,
                        help="hardware profile (see --list; default rtx4090x2-pcie, or with "
                             "--calibrate the profile of the run's device and transport)")
    parser.add_argument("--calibrate", metavar="RESULTS_JSON",
                        help="a job's results.json to fit alpha, beta and launch overhead from")
    parser.add_argument("--out", metavar="DIR",
                        help="also write DIR/scaling-curve.png and DIR/scaling.json (optional)")
    parser.add_argument("--tp", type=int, default=None, metavar="P",
                        help="TP world size (default 2, or the run's with --calibrate)")
    parser.add_argument("--list", action="store_true", help="list the hardware profiles and exit")
    parser.add_argument("--no-terminal", action="store_true", help="do not draw the terminal plot")
    from tplab.commands.json_out import add_flag
    add_flag(parser)


def _fmt_num(n: Any) -> str:  # a tplab.scaling Number (value, source)
    return f"{n.value:g} ({n.source})"


def explain(band: Any, profile_name: str) -> str:
    """Why the crossover sits where it does, in the model's own terms (``band``: the
    ``CrossoverBand`` every face quotes)."""
    if band.kind in ("none", "none below"):
        return (f"Crossover: {band.text()}. Below that the per-token collectives and TP's extra "
                "launches cost more than the weight reads TP divides; where the data cannot tell "
                "how much TP saves on those reads from nothing, no crossover can be promised.")
    cross = band.estimate
    lo, hi = SHEET_RANGE
    if profile_name.startswith("rtx4090"):
        inside = (band.lo or cross) <= hi and (band.hi or cross) >= lo
        verdict = ("inside the lab sheet's expected 1024-2048" if inside else
                   f"outside the lab sheet's expected {lo}-{hi}")
    else:
        verdict = "the lab sheet's 1024-2048 expectation is for 2x RTX 4090"
    return (f"Crossover: {band.text()}; {verdict}. Below it a token's weights are read "
            "faster than the 2·n_layer+1 all-reduces (each at least 2(p-1)·alpha) and TP's extra "
            "kernel launches cost; above it the weight reads, which grow as d_model², dominate and "
            "dividing them by p pays. Faster memory (HBM on A100/H100) pushes the crossover up, "
            "a lower alpha (NVLink) pulls it down.")


def _load_run(args: argparse.Namespace) -> tuple[dict | None, str]:
    """The run to calibrate from (or None) and the profile name to start from."""
    from tplab.scaling import calibration
    from tplab.records.results import load_results

    if not args.calibrate:
        return None, args.profile or "rtx4090x2-pcie"
    try:
        results = load_results(args.calibrate)
    except ValueError as exc:
        raise calibration.ScalingError(str(exc)) from None
    if args.profile:
        calibration.check_profile_matches(args.profile, results)
        return results, args.profile
    name, what = calibration.profile_for_run(results)
    if name is None:
        raise calibration.ScalingError(f"results.json is {what}, for which there is no hardware "
                                       "profile; pass --profile NAME (see --list).")
    return results, name


def main(args: argparse.Namespace) -> int:
    from tplab.scaling import calibration, chart, crossover, latency, split_compare

    try:
        if args.list:
            for name in latency.list_profiles():
                p = latency.load_profile(name)
                print(f"{name:<16} {p.description}")
            return 0
        if args.tp is not None and args.tp < 2:
            print("tplab scaling: --tp must be at least 2.", file=sys.stderr)
            return 2
        results, name = _load_run(args)
        profile = latency.load_profile(name)
        shape = latency.load_shape()
        measured = None
        tp = args.tp or int((results or {}).get("world_size") or 2)
        cross: dict[str, Any] = {"measured": None,
                                 "measured_reason": "no run given (--calibrate)"}
        band = crossover.for_profile(profile, tp, shape)
        if results is not None:
            shape = latency.shape_from_results(results, shape)
            measured = calibration.measured_points(results)
            if int(results.get("world_size") or 0) != tp:
                # a run at another world size is not a point on this curve
                measured, results = None, {**results, "d_model_sweep": None}
                profile = calibration.calibrate(profile, results, shape)
                band = crossover.for_run(latency.load_profile(name), results, shape, tp)
            else:
                profile, _, band = crossover.annotate_run(results, profile, shape)
            cross = calibration.crossovers(profile, results, tp, shape)
    except latency.ScalingError as exc:
        print(f"tplab scaling: {exc}", file=sys.stderr)
        return 2

    summary = latency.summary(profile, tp, shape)
    summary["crossover_d_model"] = band.estimate
    summary["crossover"] = band.to_dict()
    summary["measured"] = measured
    summary["measured_crossover_d_model"] = cross["measured"]
    summary["measured_crossover_reason"] = cross["measured_reason"]
    sweep = (results or {}).get("d_model_sweep") or None
    if sweep:
        summary["d_model_sweep"] = sweep
    if sweep or measured:
        summary["calibration"] = (results or {}).get("calibration")
    warning = calibration.miss_warning((results or {}).get("calibration")) if measured else None
    ways = ((results or {}).get("calibration") or {}).get("both_ways")
    if ways:
        summary["calibration_both_ways"] = ways
    summary["explanation"] = explain(band, profile.name)

    def write_out() -> str:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        png = chart.save_png(out / "scaling-curve.png", profile, tp, shape, measured,
                             sweep=sweep, measured_crossover=cross["measured"],
                             measured_reason=cross["measured_reason"], warning=warning,
                             band=band)
        (out / "scaling.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        return f"wrote {png} and {out / 'scaling.json'}"

    if args.json:
        from tplab.commands.json_out import emit
        if args.out is not None:
            print(write_out(), file=sys.stderr)
        emit(summary)
        return 0
    if not args.no_terminal:
        from tplab.faces.colour import colour_on
        print(chart.render_plotext(profile, tp, shape, measured, sweep=sweep,
                                   measured_crossover=cross["measured"],
                                   color=colour_on(sys.stdout), band=band))
    print(f"profile {profile.name}: {profile.description}"
          + (f"\n  calibrated from {profile.calibrated_from}" if profile.calibrated_from else ""))
    for key, n in profile.numbers().items():
        print(f"  {key:<15} {_fmt_num(n)}{'  ' + n.note if n.note else ''}")
    print(f"\n  predicted (TP={tp}):")
    print(f"  {'d_model':>8} {'single ms':>10} {'TP ms':>10} {'speedup':>8} {'comm ms':>9}")
    for p in summary["predictions"]:
        print(f"  {p['d_model']:>8.0f} {p['single_ms']:>10.4f} {p['tp_ms']:>10.4f} "
              f"{p['speedup']:>8.2f} {p['comm_ms']:>9.4f}")
    if measured:
        print(f"  measured at d_model {measured['d_model']:.0f} (the lab's checkpoint): single "
              f"{measured['single_ms']:.4f} ms, TP {measured['tp_ms']:.4f} ms")
    if warning and not sweep:  # with a sweep, its table below lists every point that is off
        print(f"  WARNING, {warning}")
    if sweep:
        from tplab.scaling.dmodel_table import dmodel_report
        print(dmodel_report(results or {}, f"{Path(args.out) / 'scaling.json'} (calibration, "
                                    "d_model_sweep[i].predicted_*)" if args.out else None))
    if ways:
        print(f"\n  {split_compare.both_ways_text(ways)} (tp_split_from: "
              f"{(results or {}).get('calibration', {}).get('tp_split_from')})")
    print("\n" + summary["explanation"])
    if args.out is not None:
        print("\n" + write_out())
    return 0
