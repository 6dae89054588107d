"""Holistic Trace Analysis (HTA) on a lab's per-rank traces, beside tplab's own split.

The field reads a profiled run with Meta's HTA: one trace per rank in a folder, each naming its
rank in ``distributedInfo``. tplab keeps exactly that (``LAB/traces/``, ``tplab.records.
rank_traces``); this check loads the folder with HTA as it is and prints what HTA makes of it
next to what tplab measured itself (results.json's ``timeline``):

* the ranks HTA found, each with its ``distributedInfo``, its events, GPU kernels and steps;
* each rank's profiled TP token as HTA parsed it (median of the ``tp token N`` spans) beside
  tplab's own median for that rank (the same spans, read by tplab): they must agree;
* HTA's temporal breakdown, communication/computation overlap and idle time. Those read GPU
  kernels: on a GPU lab (``benchmarks/gpu_check.sh``) they must run and give numbers; on a CPU
  lab there are no kernels, and the check prints what HTA answers instead.

HTA pins its own pandas and brings Jupyter, so it lives in an environment of its own,
``.venv-hta`` (made here on first use, or by ``./scripts/setup --hta``); this script re-runs
itself there. For a machine without a package index (a lent GPU machine), ``--download DIR``
fetches the wheels HTA runs on here (42 MB) and ``--wheelhouse DIR`` installs from them there.

    python benchmarks/hta_check.py runs/lab02           # exit 1 when HTA cannot read it
    python benchmarks/hta_check.py --make-venv          # only make .venv-hta
    python benchmarks/hta_check.py --download wheels/   # HTA's wheels, for an offline machine
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: the HTA release checked (the one the issue was found with)
HTA_PIN = "HolisticTraceAnalysis==0.5.0"
#: what HTA imports when it loads and analyses traces (its declared dependencies also bring
#: Jupyter and pytest: 87 MB of wheels, against these 42 MB for a machine with no index)
HTA_RUNTIME = ("pandas", "numpy", "python-dateutil", "six", "plotly", "narwhals", "packaging",
               "networkx", "psutil", "pyyaml")
DEFAULT_VENV = REPO / ".venv-hta"


def _pip(python: Path, *args: str) -> int:
    return subprocess.call([str(python), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", *args])


def make_venv(venv: Path, wheelhouse: Path | None) -> Path:
    """``venv`` with HTA in it (from ``wheelhouse`` only, when given); its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(venv)])
    if wheelhouse:  # exactly the wheels there (``--download``), nothing from an index
        what = ["--no-index", "--no-deps", *map(str, sorted(wheelhouse.glob("*.whl")))]
    else:
        what = [HTA_PIN]
    if _pip(python, *what) != 0:
        raise SystemExit(f"hta_check: could not install {HTA_PIN} into {venv}"
                         + (f" from {wheelhouse}" if wheelhouse else ""))
    return python


def _has_hta(python: Path) -> bool:
    return python.exists() and subprocess.call(
        [str(python), "-c", "import hta.trace_analysis"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL) == 0


# ------------------------------------------------------------------ inside HTA's environment
PARTS = ("token_us", "compute_us", "wire_us", "wait_us", "rest_us")


def tplab_split(lab: Path) -> dict[int, dict[int, dict[str, float]]]:
    """tplab's own figures: rank -> token position -> the parts of that profiled TP token (µs)."""
    try:
        timeline = json.loads((lab / "results.json").read_text(encoding="utf-8"))["timeline"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    out: dict[int, dict[int, dict[str, float]]] = {}
    for step in ((timeline.get("modes") or {}).get("tp") or {}).get("tokens") or []:
        for r in step.get("ranks") or []:
            out.setdefault(int(r["rank"]), {})[int(step["pos"])] = {k: float(r[k]) for k in PARTS}
    return out


def _frame_summary(analysis: Any, rank: int) -> dict[str, Any]:
    """What HTA parsed of one rank: its events, kernels, steps, and its TP token spans (µs)."""
    df = analysis.t.get_trace(rank)
    names = analysis.t.symbol_table.get_sym_table()
    decoded = df["name"].map(lambda i: names[i] if 0 <= i < len(names) else "")
    kernels = int((df["stream"] >= 0).sum()) if "stream" in df else 0
    is_token = decoded.str.startswith("tp token ")
    steps = int(decoded.str.startswith("ProfilerStep#").sum())
    # HTA keeps a trace's times in the unit it was written in (µs for torch's exports)
    tokens = {int(n.rsplit(" ", 1)[1]): float(d)
              for n, d in zip(decoded[is_token], df["dur"][is_token])}
    info = (analysis.t.meta_data.get(rank) or {}).get("distributedInfo")
    return {"events": len(df), "kernels": kernels, "steps": steps, "tp_tokens": tokens,
            "distributedInfo": info}


def _analyses(analysis: Any) -> dict[str, Any]:
    """HTA's GPU analyses: each its result (as text) or what HTA said instead."""
    out: dict[str, Any] = {}
    calls = {"temporal breakdown": lambda: analysis.get_temporal_breakdown(visualize=False),
             "comm/comp overlap": lambda: analysis.get_comm_comp_overlap(visualize=False),
             "idle time": lambda: analysis.get_idle_time_breakdown(visualize=False)}
    for name, call in calls.items():
        try:
            got = call()
            frame = got[0] if isinstance(got, tuple) else got
            nan = bool(frame.select_dtypes("number").isna().any().any())
            out[name] = {"ok": not nan, "text": frame.to_string(max_rows=12)}
        except Exception as exc:  # HTA's own answer, whatever it is, is the finding
            out[name] = {"ok": False, "text": f"{type(exc).__name__}: {exc}"}
    return out


def check(lab: Path) -> int:
    import logging

    import hta
    from hta.trace_analysis import TraceAnalysis

    sys.path.insert(0, str(REPO))
    from tplab.records import rank_traces

    logging.getLogger("hta").setLevel(logging.WARNING)
    folder = lab / rank_traces.TRACES_DIR
    files = [p for p in rank_traces.present(lab) if "/" + rank_traces.SINGLE_DIR + "/" not in p]
    world = len(files)
    print(f"HTA {getattr(hta, '__version__', '0.5.0')} on {folder} ({world} trace files)")
    ok = world > 0
    for rel in files:
        rank = rank_traces.rank_of_name(rel.rsplit("/", 1)[-1])
        doc = rank_traces.read_rank_trace((lab / rel).read_bytes())
        problems = rank_traces.check_rank_trace(doc, rank if rank is not None else -1, world)
        ok &= not problems
        print(f"  {rel}: {problems or 'what HTA needs is there'}")
    analysis = TraceAnalysis(trace_dir=str(folder))
    ranks = sorted(int(r) for r in analysis.t.traces)
    ok &= ranks == list(range(world))
    print(f"HTA's ranks: {ranks}")
    mine = tplab_split(lab)
    gpu = False
    for rank in ranks:
        s = _frame_summary(analysis, rank)
        gpu |= s["kernels"] > 0
        own = mine.get(rank, {})
        print(f"  rank {rank}: distributedInfo {json.dumps(s['distributedInfo'])}")
        print(f"          {s['events']} events, {s['kernels']} GPU kernels, {s['steps']} profiler "
              f"steps, TP tokens {sorted(s['tp_tokens'])} (HTA leaves out the last profiler "
              f"step; tplab profiled {sorted(own)})")
        both = sorted(set(s["tp_tokens"]) & set(own))
        ok &= bool(both)
        for pos in both:
            hta_us, t = s["tp_tokens"][pos], own[pos]
            agree = abs(hta_us - t["token_us"]) <= max(1.0, 1e-3 * t["token_us"])
            ok &= agree
            print(f"          tp token {pos}: HTA {hta_us:.1f} µs, tplab {t['token_us']:.1f} µs"
                  f"{'' if agree else ' DISAGREE'} = compute {t['compute_us']:.0f} + wire "
                  f"{t['wire_us']:.0f} + wait {t['wait_us']:.0f} + rest {t['rest_us']:.0f}")
    for name, got in _analyses(analysis).items():
        state = "ok" if got["ok"] else ("FAILED" if gpu else "not on a CPU trace")
        if gpu:
            ok &= got["ok"]
        print(f"HTA {name} ({state}):")
        print("    " + got["text"].replace("\n", "\n    "))
    if not gpu:
        print("(a CPU lab has no GPU kernels: HTA's GPU analyses answer as above; on a GPU lab "
              "benchmarks/gpu_check.sh requires them)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("lab", nargs="?", type=Path, help="a lab folder (with traces/ and "
                    "results.json)")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV,
                    help="HTA's environment (default .venv-hta; made when missing)")
    ap.add_argument("--wheelhouse", type=Path, help="install HTA from these wheels only")
    ap.add_argument("--make-venv", action="store_true", help="only make the environment")
    ap.add_argument("--download", type=Path, metavar="DIR",
                    help="only download the wheels HTA runs on into DIR (for --wheelhouse)")
    ap.add_argument("--python-version", metavar="X.Y",
                    help="with --download: the Python the wheels are for (default: this one)")
    ap.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.download:
        target = (["--python-version", args.python_version, "--only-binary=:all:"]
                  if args.python_version else [])
        return subprocess.call([sys.executable, "-m", "pip", "download", "-q",
                                "--disable-pip-version-check", "--no-deps", *target, "-d",
                                str(args.download), HTA_PIN, *HTA_RUNTIME])
    if args.here:
        return check(args.lab.resolve())
    python = args.venv / "bin" / "python"
    if args.make_venv or not _has_hta(python):
        python = make_venv(args.venv, args.wheelhouse)
        if args.make_venv:
            print(f"hta_check: {HTA_PIN} is in {args.venv}")
            return 0
    if args.lab is None:
        ap.error("name a lab folder")
    if not (args.lab / "traces").is_dir():
        print(f"hta_check: {args.lab} has no traces/ folder (a lab from a tplab that kept no "
              "per-rank traces, or one that ended before its profiled pass)", file=sys.stderr)
        return 2
    return subprocess.call([str(python), str(Path(__file__).resolve()), str(args.lab.resolve()),
                            "--here"], env=dict(os.environ, PYTHONWARNINGS="ignore"))


if __name__ == "__main__":
    sys.exit(main())
