"""Writing a measured hardware profile, with its bootstrap replicates, into the profiles file.

Why: a measured profile (the CPU's: ``cpu-gloo``, ``cpu-shm``) is a calibration of the scaling
model to one run's d_model sweep, and a one-point lab later leans on the terms it cannot fit
itself (how the weight reads grow with d_model). Those terms are only as sure as that sweep, so
the profile keeps, beside each term, the bootstrap replicates of the calibration
(``crossover.replicate_rows``: each row one resample of the sweep's rounds), and every crossover
made from the profile carries them (``crossover.for_profile``, ``crossover.for_run``).

    python -m tplab.scaling.profile_file cpu-gloo RUN1/results.json [RUN2/results.json ...]

re-measures a profile from `tplab local --sweep-d-model ...` runs of this machine (their
transport must be the profile's). Several runs are one sweep with more rounds
(``merge_sweeps``: each size's rounds from every run), so the replicates also carry how the
machine moved from run to run, which four rounds of one run cannot see. Client side: no torch.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from tplab.scaling import calibration, crossover, latency
from tplab.scaling.latency import PROFILES_PATH, ScalingError

#: the terms a profile's replicates carry (all of a calibration's)
TERMS = ("mem_bw_gbps", "peak_tflops", "launch_us", "alpha_us", "beta_gbps", "tp_mem_bw_gbps",
         "tp_peak_tflops", "tp_launch_us")
REPLICATES = 200
_NUMBERS = re.compile(r"\[\s+((?:-?[0-9.eE+-]+,\s+)*-?[0-9.eE+-]+)\s+\]")


def _sig(v: float) -> float:
    return float(f"{v:.4g}")


def merge_sweeps(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' d_model sweeps as one: the first run with every size's rounds (single, TP,
    collectives) taken from all the runs that measured it, each figure the median of them, and
    the profiled split's medians the median over the runs. One run is returned as it is."""
    if len(runs) == 1:
        return runs[0]
    from tplab.stats.harness import median
    from tplab.records.dmodel import measured_crossover
    by_d: dict[Any, list[dict[str, Any]]] = {}
    for r in runs:
        for q in r.get("d_model_sweep") or []:
            by_d.setdefault(q["d_model"], []).append(q)
    points = []
    for _, qs in sorted(by_d.items()):
        point = dict(qs[0])
        for k in ("single", "tp", "allreduce"):
            rounds = [x for q in qs for x in q.get(f"{k}_rounds_ms") or [q[f"{k}_ms"]]]
            point[f"{k}_rounds_ms"], point[f"{k}_ms"] = rounds, median(rounds)
        splits = [q["profiled"] for q in qs if isinstance(q.get("profiled"), dict)]
        if splits:
            point["profiled"] = {k: median([s[k] for s in splits]) for k in
                                 ("token_us", "compute_us", "wire_us", "wait_us", "rest_us")
                                 if all(isinstance(s.get(k), (int, float)) for s in splits)}
        point["outputs_match"] = all(q.get("outputs_match") is True for q in qs)
        point["unstable"] = False  # the runs together: their spread is the replicates'
        points.append(point)
    cross, why = measured_crossover(points)
    return {**runs[0], "d_model_sweep": points, "measured_crossover_d_model": cross,
            "measured_crossover_reason": why, "merged_runs": len(runs)}


def calibrated_entry(name: str, results: dict[str, Any], note: str = "",
                     resamples: int = REPLICATES, path: Path | None = None) -> dict[str, Any]:
    """The profiles-file entry of ``name`` calibrated from ``results`` (a run with a d_model
    sweep), each term marked measured, with ``resamples`` bootstrap replicates."""
    want, what = calibration.profile_for_run(results)
    if want != name:
        raise ScalingError(f"results.json is {what}, which calibrates {want}, not {name}.")
    if not results.get("d_model_sweep"):
        raise ScalingError("a profile is measured from a run with a d_model sweep "
                           "(tplab local --sweep-d-model 64,256,512,1024,2048).")
    prior = latency.load_profile(name, path)
    shape = latency.shape_from_results(results)
    cal = calibration.calibrate(prior, results, shape)
    when = time.strftime("%Y-%m-%d", time.gmtime(results.get("started_at") or time.time()))
    sizes = [int(p["d_model"]) for p in results["d_model_sweep"]]
    runs = results.get("merged_runs") or 1
    src = (f"{runs} run(s) of `tplab local --tp {results.get('world_size')} --comm "
           f"{results.get('comm')} --sweep-d-model {','.join(map(str, sizes))}` on {when}, their "
           "rounds together" + (f" ({note})" if note else ""))
    entry: dict[str, Any] = {"description": prior.description, "devices": prior.devices,
                             "interconnect": prior.interconnect, "nvlink": prior.nvlink}
    for term in TERMS:
        n = getattr(cal, term)
        entry[term] = {"value": _sig(n.value), "source": "measured", "note": f"{n.note}; {src}"}
    rows = crossover.replicate_rows(prior, results, shape, TERMS, resamples)
    entry["replicates"] = {
        "terms": list(TERMS), "values": [[_sig(v) for v in row] for row in rows],
        "about": f"{len(rows)} seeded bootstrap resamples of the rounds of {src}, each calibrated "
                 "again: the spread of every term"}
    return entry


def write_profile(name: str, entry: dict[str, Any], path: Path | None = None) -> Path:
    """Replace (or add) profile ``name`` in the profiles file, keeping everything else."""
    path = Path(path or PROFILES_PATH)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["profiles"][name] = entry
    latency.profile_from_json(name, entry)  # the file stays readable
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    # a list of numbers (a replicate's row) on one line
    text = _NUMBERS.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                        text)
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tplab.scaling.profile_file",
                                 description="Re-measure a hardware profile from a run's d_model "
                                             "sweep, with bootstrap replicates of every term.")
    ap.add_argument("name", help="the profile to write (cpu-gloo or cpu-shm for this machine)")
    ap.add_argument("results", type=Path, nargs="+",
                    help="the runs' results.json (one or more, the same transport)")
    ap.add_argument("--note", default="", help="how the machine was (e.g. 'load average 3-5')")
    ap.add_argument("--resamples", type=int, default=REPLICATES)
    ap.add_argument("--file", type=Path, default=None, help="the profiles file (default: assets')")
    args = ap.parse_args(argv)
    try:
        results = merge_sweeps([json.loads(p.read_text(encoding="utf-8")) for p in args.results])
        entry = calibrated_entry(args.name, results, args.note, args.resamples, args.file)
        where = write_profile(args.name, entry, args.file)
    except (OSError, ValueError) as exc:
        print(f"profile_file: {exc}", file=sys.stderr)
        return 2
    band = crossover.for_profile(latency.load_profile(args.name, where))
    print(f"wrote {args.name} into {where}: crossover {band.text()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
