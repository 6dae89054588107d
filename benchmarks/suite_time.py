"""What the test suite costs, folder by folder, against the budget `docs/testing.md` keeps.

Runs pytest (the whole suite as the README runs it, or the paths given) with a junit report, and
prints its wall time, the test time per folder (each test's setup, call and teardown, summed; with
the suite's workers that sum is larger than the wall), each folder's budget and how far it is from
it, and the ten slowest tests. With ``--runs N`` the suite runs N times and every figure is the
median with its spread (min–max), since this machine's speed moves from run to run. ``--junit``
reads reports already written instead of running anything.

    .venv/bin/python benchmarks/suite_time.py                          # everything, 3 workers
    .venv/bin/python benchmarks/suite_time.py --runs 3                 # three times, medians
    .venv/bin/python benchmarks/suite_time.py tests/model tests/tp -- -n 0 -m "not slow"
    .venv/bin/python benchmarks/suite_time.py --junit run1.xml run2.xml

It asserts nothing about time (a benchmark, not a test); its exit status is pytest's. Standard
library only.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUDGET_DOC = REPO / "docs" / "testing.md"
BUDGET_HEADING = "## The suite's time"
WALL = "wall"  # the budget row for the whole suite's wall time
#: a budget row: | `tests/lab` | 180 | ... (a dash: no budget yet)
BUDGET_ROW = re.compile(r"^\|\s*`?(tests/[\w./-]*|tests|wall)`?\s*\|\s*(\d+(?:\.\d+)?|[-—])\s*\|")


@dataclass
class Run:
    """One pytest run as its junit report tells it."""

    wall_s: float | None
    rc: int | None
    tests: dict[str, float] = field(default_factory=dict)  # "tests/x/test_y.py::name" -> seconds
    outcomes: dict[str, int] = field(default_factory=dict)


def folder_of(test_id: str) -> str:
    """``tests/lab/test_x.py::t`` -> ``tests/lab``; a module at the top -> ``tests``."""
    path = test_id.split("::")[0]
    return str(Path(path).parent) if "/" in path else path


def _test_id(classname: str, name: str) -> str:
    """junit's dotted class name back to a path: the longest prefix that is a folder of the
    checkout, then the module, then any class."""
    parts = classname.split(".")
    i = 1
    while i < len(parts) and (REPO.joinpath(*parts[: i + 1])).is_dir():
        i += 1
    module = "/".join(parts[: i + 1]) + ".py"
    return "::".join([module, *parts[i + 1:], name.split("@")[0]])  # xdist's "@group" suffix


def read_junit(path: Path, wall_s: float | None = None, rc: int | None = None) -> Run:
    run = Run(wall_s, rc)
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = _test_id(case.get("classname", ""), case.get("name", ""))
        run.tests[tid] = run.tests.get(tid, 0.0) + float(case.get("time") or 0.0)
        kids = {child.tag for child in case}
        outcome = ("failed" if kids & {"failure", "error"} else "skipped" if "skipped" in kids
                   else "passed")
        run.outcomes[outcome] = run.outcomes.get(outcome, 0) + 1
    return run


def run_pytest(paths: list[str], extra: list[str], timeout_s: float) -> Run:
    with tempfile.TemporaryDirectory(prefix="suite-time-") as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *paths, *extra]
        print("$ " + " ".join(cmd[1:]), flush=True)
        t0 = time.monotonic()
        try:
            rc = subprocess.run(cmd, cwd=REPO, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            sys.exit(f"suite_time: pytest did not finish within {timeout_s:.0f} s")
        wall = time.monotonic() - t0
        if not report.exists():
            sys.exit(f"suite_time: pytest wrote no junit report (exit {rc})")
        return read_junit(report, wall, rc)


def read_budgets(doc: Path = BUDGET_DOC) -> dict[str, float | None]:
    """The budget table under BUDGET_HEADING: folder (or ``wall``) -> seconds (None: not set)."""
    budgets: dict[str, float | None] = {}
    inside = False
    for line in doc.read_text().splitlines() if doc.exists() else []:
        if line.startswith("## "):
            inside = line.strip() == BUDGET_HEADING
            continue
        m = BUDGET_ROW.match(line) if inside else None
        if m:
            budgets[m.group(1)] = None if m.group(2) in "-—" else float(m.group(2))
    return budgets


def _fig(xs: list[float]) -> str:
    """The median, with the spread when there is more than one run."""
    med = statistics.median(xs)
    return f"{med:7.1f}" + (f" ({min(xs):.1f}–{max(xs):.1f})" if len(xs) > 1 else "")


def _against(value: float, budget: float | None) -> str:
    if budget is None:
        return "no budget"
    return (f"within ({budget - value:.0f} s to spare)" if value <= budget
            else f"OVER by {value - budget:.0f} s")


def report(runs: list[Run], budgets: dict[str, float | None], slowest: int = 10,
           whole: bool = True) -> str:
    """The figures; the wall time is held to its budget only for the whole suite (``whole``)."""
    lines = []
    walls = [r.wall_s for r in runs if r.wall_s is not None]
    outcomes = ", ".join(f"{n} {k}" for k, n in sorted(runs[-1].outcomes.items()))
    if walls:
        against = (_against(statistics.median(walls), budgets.get(WALL)) if whole
                   else "a part of the suite: no budget")
        lines.append(f"wall time   {_fig(walls)} s   {against}"
                     f"   ({len(runs)} run(s); last: {outcomes}, exit {runs[-1].rc})")
    else:
        lines.append(f"wall time   not measured (read from junit reports; last: {outcomes})")
    folders = sorted({folder_of(t) for r in runs for t in r.tests})
    lines += ["", f"{'folder':<22} {'tests':>5}  {'test time, s':<22} {'budget':>7}  against it",]
    per_run_total: list[float] = [sum(r.tests.values()) for r in runs]
    for folder in folders:
        sums = [sum(s for t, s in r.tests.items() if folder_of(t) == folder) for r in runs]
        count = sum(1 for t in runs[-1].tests if folder_of(t) == folder)
        budget = budgets.get(folder)
        shown = "—" if budget is None else f"{budget:.0f}"
        lines.append(f"{folder:<22} {count:>5}  {_fig(sums):<22} {shown:>7}  "
                     f"{_against(statistics.median(sums), budget)}")
    lines.append(f"{'all':<22} {len(runs[-1].tests):>5}  {_fig(per_run_total):<22}")
    absent = sorted(set(budgets) - {WALL} - set(folders))
    if absent:
        lines.append(f"(not in this run: {', '.join(absent)})")
    lines += ["", f"the {slowest} slowest tests (s, median over the runs):"]
    names = {t for r in runs for t in r.tests}
    med = {t: statistics.median(r.tests.get(t, 0.0) for r in runs) for t in names}
    for t in sorted(names, key=lambda t: -med[t])[:slowest]:
        lines.append(f"  {med[t]:6.1f}  {t}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[: argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", help="test paths (default: the whole suite)")
    ap.add_argument("--runs", type=int, default=1, help="run the suite this many times (medians)")
    ap.add_argument("--junit", nargs="+", type=Path, metavar="XML",
                    help="read these junit reports instead of running pytest")
    ap.add_argument("--slowest", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds one pytest run may take")
    args = ap.parse_args(argv)
    if args.junit:
        runs = [read_junit(p) for p in args.junit]
    else:
        runs = [run_pytest(args.paths, extra, args.timeout) for _ in range(max(1, args.runs))]
    print()
    print(report(runs, read_budgets(), args.slowest, whole=not (args.paths or extra)))
    return next((r.rc for r in runs if r.rc), 0)


if __name__ == "__main__":
    sys.exit(main())
