"""How steady are the lab's numbers? Run `tplab local` N times and show each figure run by run.

Why this exists (issue 24): a student who runs the lab twice must get the same lesson. This runs
`tplab local` (by default ``--tp 2 --sweep-d-model 64,256,512``) N times in a row, each in its own
subprocess and output directory, and prints, side by side, every run's figures: the lab's
per-token single and TP medians, each d_model sweep point's single and TP ms (with the figure's
own spread and the unstable flag), the calibrated model's worst error, whether TP is monotone in
d_model, the measured crossover with its interval, the number of flagged figures and the wall
time. Then, per figure, the run-to-run spread ((max - min) / median over the runs) and the bars of
the issue, marked "met" / "NOT met". A future change to the measurement shows it made the numbers
steadier by a smaller run-to-run spread here. The row "machine reference loop ms" is the
machine's own floor (``tplab.job.machine_probe``: a fixed matmul loop timed all through each run):
when it moves run to run or is flagged within a run, the machine's speed moved, and no figure
can be steadier than that. It asserts nothing (a benchmark, not a test); the
load average is printed before and after, because figures from a busy machine are not comparable.

    .venv/bin/python benchmarks/measurement_spread.py [--runs 5] [--comm gloo|shm]
        [--sweep-d-model 64,256,512 | --sweep-d-model none] [--hog] [--out DIR]
        [--local-args "--prompts 3 --new-tokens 40"]
        [--reuse DIR]   # re-read the runs already in DIR instead of running again

``--hog`` starts one busy-loop process per CPU beside every run (the "deliberately loaded run"
bar): its figures should come back flagged unstable rather than clean.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HOG = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    pass\n"


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def run_once(out: Path, args: argparse.Namespace) -> tuple[dict[str, Any] | None, float]:
    cmd = [sys.executable, "-m", "tplab", "local", "--tp", str(args.tp), "--comm", args.comm,
           "--out", str(out), "--quiet"]
    if args.sweep_d_model != "none":
        cmd += ["--sweep-d-model", args.sweep_d_model]
    cmd += shlex.split(args.local_args)
    hogs = []
    if args.hog:
        hogs = [subprocess.Popen([sys.executable, "-c", HOG.format(s=args.timeout)])
                for _ in range(os.cpu_count() or 1)]
    t0 = time.monotonic()
    try:
        with open(out.parent / f"{out.name}.log", "w", encoding="utf-8") as log:
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout,
                           check=False)
    except subprocess.TimeoutExpired:
        print(f"  {out.name}: did not finish within {args.timeout} s", file=sys.stderr)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    wall = time.monotonic() - t0
    try:
        return json.loads((out / "results.json").read_text(encoding="utf-8")), wall
    except (OSError, ValueError):
        return None, wall


def figures(r: dict[str, Any]) -> dict[str, tuple[float | None, str]]:
    """name -> (value, cell note) of one run."""
    out: dict[str, tuple[float | None, str]] = {}
    for mode in ("single", "tp"):
        per = (r.get(mode) or {}).get("per_token_ms") or {}
        fig = ((r.get(mode) or {}).get("passes") or {}).get("p50") or {}
        note = (f"±{fig['spread']:.0%}" + ("!" if fig.get("unstable") else "")) if fig else ""
        out[f"lab {mode} p50 ms/token"] = (per.get("p50"), note)
    single, tp = (((r.get(m) or {}).get("per_token_ms") or {}).get("p50") for m in ("single", "tp"))
    out["lab tp / single (p50s)"] = (tp / single if tp and single else None, "")
    probe = (r.get("machine") or {}).get("ms") or {}
    if probe:  # the machine's own steadiness: a fixed loop timed all through the run
        out["machine reference loop ms"] = (probe.get("median"), f"±{probe['spread']:.0%}"
                                            + ("!" if probe.get("unstable") else ""))
    for p in r.get("d_model_sweep") or []:
        for key in ("single_ms", "tp_ms"):
            fig = (p.get("figures") or {}).get(key) or {}
            note = (f"±{fig['spread']:.0%}" + ("!" if fig.get("unstable") else "")) if fig else ""
            out[f"d_model {p['d_model']} {key}"] = (p.get(key), note)
    cal = r.get("calibration") or {}
    if r.get("d_model_sweep"):
        out["calibrated worst error"] = (cal.get("max_abs_error"), "")
        out["measured crossover d_model"] = (r.get("measured_crossover_d_model"), "")
    return out


def monotone(r: dict[str, Any]) -> bool | None:
    pts = sorted(r.get("d_model_sweep") or [], key=lambda p: p["d_model"])
    if len(pts) < 2:
        return None
    return all(a["tp_ms"] <= b["tp_ms"] for a, b in zip(pts, pts[1:]))


def _interval(r: dict[str, Any]) -> str:
    """The measured crossover's interval in a few characters."""
    iv = r.get("measured_crossover_interval") or {}
    if iv.get("ci95"):
        return f"{iv['ci95'][0]:.0f}..{iv['ci95'][1]:.0f}"
    if iv.get("resolved") is False:
        return "not resolved"
    return f"none, {iv['agreement']:.0%} agree" if iv.get("agreement") is not None else "n/a"


def _cell(v: float | None, note: str) -> str:
    if v is None:
        return "n/a"
    return (f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}") + (f" {note}" if note else "")


def report(runs: list[tuple[dict[str, Any] | None, float]], args: argparse.Namespace) -> None:
    ok = [(r, w) for r, w in runs if r is not None]
    print(f"\n{len(ok)} of {len(runs)} runs produced results.json ({args.comm}, "
          f"--sweep-d-model {args.sweep_d_model}{', CPU hog beside each' if args.hog else ''})")
    if not ok:
        return
    names: list[str] = []
    for r, _ in ok:
        names += [n for n in figures(r) if n not in names]
    head = ["figure"] + [f"run {i + 1}" for i in range(len(ok))] + ["run-to-run"]
    rows = [head]
    spreads: dict[str, float] = {}
    for n in names:
        vals = [figures(r).get(n, (None, "")) for r, _ in ok]
        xs = sorted(v for v, _ in vals if isinstance(v, (int, float)))
        s = ""
        if len(xs) >= 2 and xs[len(xs) // 2] and n != "calibrated worst error":
            spreads[n] = (xs[-1] - xs[0]) / xs[len(xs) // 2]
            s = f"{spreads[n]:.0%}"
        rows.append([n] + [_cell(v, note) for v, note in vals] + [s])
    rows.append(["TP monotone in d_model"] + [str(monotone(r)) for r, _ in ok] + [""])
    rows.append(["crossover interval"] + [_interval(r) for r, _ in ok] + [""])
    rows.append(["flagged figures"] + [
        str(len((r.get("stability") or {}).get("unstable") or [])) for r, _ in ok] + [""])
    rows.append(["wall s"] + [f"{w:.1f}" for _, w in ok] + [""])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))))
    print("  (± = the figure's own spread over its samples, ! = flagged unstable; run-to-run = "
          "(max - min) / median over the runs)")
    _bars(ok, spreads, args)


def _bars(ok: list[tuple[dict[str, Any], float]], spreads: dict[str, float],
          args: argparse.Namespace) -> None:
    def say(text: str, met: bool | None) -> None:
        print(f"  {text}: " + ("n/a" if met is None else "met" if met else "NOT met"))

    print("bars (issue 24):")
    if any(r.get("d_model_sweep") for r, _ in ok):
        say("calibrated prediction within ±25% of every point in every run",
            all((r.get("calibration") or {}).get("within_tolerance") for r, _ in ok))
        say("TP monotone in d_model in every run", all(monotone(r) for r, _ in ok))
        say("every sweep figure has its spread and sample count",
            all(all(f.get("n") and "spread" in f for p in r["d_model_sweep"]
                    for f in (p.get("figures") or {}).values()) for r, _ in ok))
    tp = spreads.get("lab tp p50 ms/token")
    say(f"lab TP per-token median run-to-run spread <= 10% ({args.comm}: "
        + (f"{tp:.1%})" if tp is not None else "n/a)"), None if tp is None else tp <= 0.10)
    if args.hog:
        say("a loaded run flags its unstable figures",
            all((r.get("stability") or {}).get("unstable") for r, _ in ok))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--comm", default="gloo", choices=("gloo", "shm", "both"))
    p.add_argument("--sweep-d-model", default="64,256,512",
                   help='sizes of the d_model sweep, or "none" for the lab alone')
    p.add_argument("--hog", action="store_true", help="a busy loop per CPU beside each run")
    p.add_argument("--local-args", default="", metavar="ARGS",
                   help='more `tplab local` flags, e.g. "--prompts 3 --new-tokens 40"')
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--out", default=None, help="keep the runs here (default: a temp dir)")
    p.add_argument("--reuse", default=None, metavar="DIR",
                   help="report on DIR/run-*/results.json instead of running")
    args = p.parse_args(argv)
    if args.reuse:
        dirs = sorted(Path(args.reuse).glob("run-*/"))
        runs = []
        for d in dirs:
            try:
                runs.append((json.loads((d / "results.json").read_text(encoding="utf-8")),
                             0.0))
            except (OSError, ValueError):
                runs.append((None, 0.0))
        report(runs, args)
        return 0
    root = Path(args.out or tempfile.mkdtemp(prefix="tplab-spread-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"{_load()} before; runs in {root}")
    runs = []
    for i in range(args.runs):
        res, wall = run_once(root / f"run-{i + 1}", args)
        print(f"  run {i + 1}: {'ok' if res else 'no results'} in {wall:.1f} s ({_load()})",
              flush=True)
        runs.append((res, wall))
    report(runs, args)
    print(f"{_load()} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
