"""Plan and write a hand-in: a finished lab's files where the lab sheets name them.

Why plan first, write after: the destination is the student's own repository. Every file is
computed in memory, then compared with what is already there; a file that exists with different
content is the student's and is never overwritten without ``force`` — and when one is refused,
nothing at all is written, so a hand-in is never half old and half new.

The layout (lab 02's sheet, the phase overview, the reading lab's sheet):

* ``experiments/35-tp-inference/`` — manifest.json (its ``terminated_screenshot`` the lab sheet's
  path in this tree, ``experiments/35-tp-inference/proof-terminated.png``), results.json,
  instance.json, scaling-curve.png, trace.json (the profiled pass, for Perfetto), traces/ (each
  rank's own profiler trace, as HTA and Perfetto read them), proof-terminated.png (+ the
  provider's answer as JSON), run.py (block B), README.md (where each block lives in tplab);
* ``src/minitrain/tensor_parallel.py`` and ``tests/minitrain/test_tensor_parallel.py`` (block A,
  stop condition 5) and ``src/tplab/`` (the pod-side code they and run.py import), made from
  tplab's own code (``minitrain``);
* ``experiments/35-cloud-budget/spend.jsonl`` — this lab's ledger lines, byte for byte;
* ``experiments/35-cloud-budget.md`` — the phase's spend table (``spend_table``);
* ``experiments/35-reading-notes/`` — the reading notes tplab ships (``tplab/assets/reading-notes/``);
* with ``compile_dir`` (the compile lab's sheet), ``experiments/25-compile/`` — a `tplab compile` run's
  REPORT.md, the fused kernel as ``kernel.cpp`` (or ``kernel.py``), KERNEL_ANNOTATION.md,
  DISTRIBUTED.md (about a page) with DISTRIBUTED-detail.md beside it, manifest.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tplab import __version__
from tplab.figures.lab_figures import from_manifest
from tplab.handin import minitrain, spend_table
from tplab.handin.pick import HandinError, pick_lab
from tplab.money.budget import BudgetGuard
from tplab.records import rank_traces
from tplab.util.bounded_read import TooLargeError, read_bounded
from tplab.viewmodel.past_labs import PastLab, default_roots, find_labs
from tplab.home.paths import READING_NOTES

TP_DIR = "experiments/35-tp-inference"
BUDGET_DIR = "experiments/35-cloud-budget"
BUDGET_MD = "experiments/35-cloud-budget.md"
NOTES_DIR = "experiments/35-reading-notes"
NOTES_SRC = READING_NOTES
COMPILE_DIR = "experiments/25-compile"
#: a `tplab compile` run's files that the compile lab's sheet lists, by their name there
COMPILE_FILES = ("REPORT.md", "KERNEL_ANNOTATION.md", "DISTRIBUTED.md", "DISTRIBUTED-detail.md",
                 "manifest.json", "compile-results.json")

#: the most of one file the hand-in reads: above every bound tplab fetches a pod's file within
#: (results.json 8 MiB, trace.json 9 MiB, a rank's trace ~8 MiB); a lab folder named with
#: ``--lab FOLDER`` may hold anything, and a hand-in is planned in memory before a byte is written
FILE_LIMIT = 32 << 20
#: the most of the ledger it reads (a line per authorization and settlement)
LEDGER_LIMIT = 64 << 20


def _read(path: Path, limit: int = FILE_LIMIT) -> bytes:
    """A file the hand-in copies, read within its bound: one sentence when it is not a regular
    file within it (nothing is written then)."""
    try:
        return read_bounded(path, limit, "lab file")
    except TooLargeError as exc:
        raise HandinError(f"{exc}; a file tplab wrote is smaller: hand in another lab, or "
                          "move that file away. Nothing was written.") from None


#: the lab's files that go to experiments/35-tp-inference/, and what each one is
LAB_FILES: dict[str, str] = {
    "manifest.json": "the lab sheet's manifest (block G): instance, times, cost, per-token latencies, "
                     "speedup, the why-slower paragraph, the crossover",
    "results.json": "the job's measurements on the pod: per-token timings of single vs TP, the "
                    "all-reduce time per token, greedy outputs (TP equals single)",
    "instance.json": "the instance id and its start time (block C), as tplab recorded them",
    "scaling-curve.png": "predicted 1-device and TP latency vs d_model with the measured points "
                         "and the crossover (block F)",
    "trace.json": "the profiled pass as one Chrome trace, one process per rank, every all-reduce "
                  "named by its layer: open it in ui.perfetto.dev or chrome://tracing "
                  "(`tplab timeline` prints it as text)",
    rank_traces.TRACES_DIR + "/": "each rank's own profiler trace as torch wrote it (gzip), with "
                                  "distributedInfo (rank, world size, backend): Holistic Trace "
                                  "Analysis and Perfetto read the folder as it is; the "
                                  "single-device pass in `traces/single/`",
    "proof-terminated.png": "proof of termination: the provider's own answer for the pod after "
                            "terminate (state, times, API routes) and the lab's final frame",
    "proof-terminated.json": "the same provider answer as data",
    "proof-terminated.svg": "the dashboard's screen saved as the lab ended (dashboard labs only)",
}


@dataclass(frozen=True)
class Planned:
    rel: str        # path under the destination, with forward slashes
    data: bytes


@dataclass
class Outcome:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    lab: PastLab | None = None
    why: str = ""                   # why this lab (``pick.Pick.why``)
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ the lab's money
def auth_id_of(lab_dir: Path) -> str | None:
    """The ledger authorization that held this lab's money (its instance.json)."""
    try:
        data = json.loads((lab_dir / "instance.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    auth = data.get("auth_id") if isinstance(data, dict) else None
    return auth if isinstance(auth, str) else None


# ------------------------------------------------------------------ the ledger
def _guard(mock: bool) -> BudgetGuard:
    from tplab.money.caps import resolve_caps
    return resolve_caps(mock=mock).guard()


def spend_lines(ledger_path: Path, auth_id: str | None) -> bytes:
    """This lab's lines of the ledger exactly as written (authorize, then actual or release)."""
    if auth_id is None:
        return b""
    try:
        raw = _read(ledger_path, LEDGER_LIMIT)
    except FileNotFoundError:
        return b""
    kept = []
    for line in raw.splitlines(keepends=True):
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a damaged line belongs to no lab (tplab budget reports it)
        if isinstance(data, dict) and data.get("auth_id") == auth_id:
            kept.append(line if line.endswith(b"\n") else line + b"\n")
    return b"".join(kept)


# ------------------------------------------------------------------ the plan
#: where each block of lab 02's sheet lives in tplab, and what of it is in the hand-in
BLOCKS = (
    ("A", "the TP primitives", "`tplab/tp/layers.py` (ColumnParallelLinear, RowParallelLinear, "
     "ShardedEmbedding) on `tplab/tp/collectives.py`; tested in `tests/tp/test_tensor_parallel.py`",
     f"`{minitrain.TENSOR_PARALLEL}` and `{minitrain.TESTS_FILE}` (run: `PYTHONPATH=src python "
     "-m pytest tests/minitrain`)"),
    ("B", "the experiment's script", "`tplab/job/` (the job under torchrun: `run.py`, "
     "`decode_timing.py`), uploaded by `tplab/lab/bundle.py`", "`run.py` here, starting "
     "`src/tplab/job/`, byte for byte the code the lab uploaded"),
    ("C", "pre-flight", "`tplab/lab/preflight.py`, `tplab/money/budget.py` (BudgetGuard.authorize)",
     "`instance.json` (the instance id, its start, the authorization)"),
    ("D", "run it", "`tplab/lab/orchestrator.py` (create, wait, upload, torchrun, fetch), "
     "`tplab/lab/teardown.py` (terminate, verify gone, record_actual)",
     "`proof-terminated.png`, `../35-cloud-budget/spend.jsonl`"),
    ("E", "analyse", "`tplab/records/results.py` (the figures), `tplab/lab/lesson_notes.py` (the "
     "why-slower paragraph, every claim from the figures)", "`results.json`, the manifest's "
     "figures and `lesson_notes`"),
    ("F", "the scaling curve", "`tplab/scaling/` (`latency.py` the model, `calibration.py` fitted to "
     "the run, `crossover.py` the crossover with its uncertainty, `chart.py` the plot)",
     "`scaling-curve.png`, the manifest's `crossover`"),
    ("G", "the manifest", "`tplab/lab/manifest.py`", "`manifest.json`"),
)


def figures_section(manifest: Any) -> list[str]:
    """The lab's figures as every face shows them (its record, manifest.json's
    ``lab_figures``), each named with the pass that took it; none without a manifest."""
    fig = from_manifest(manifest)
    if fig is None or not (fig.measured or fig.cost is not None):
        return []
    out = ["", "## The lab's figures", "",
           "As tplab's table, dashboard and proof picture show them (`lab_figures` in "
           "manifest.json): each figure once, with the pass that measured it (the timed pass "
           "for latency, the instrumented pass for the all-reduce, the profiled pass for the "
           "split of a token).", "", "| figure | value |", "|---|---|"]
    out += [f"| {label} | {text.replace('|', '/')} |" for label, text in fig.rows()]
    return out


def readme(lab: PastLab, present: list[str]) -> str:
    mock = lab.mock
    head = [f"# Lab 02: tensor-parallel inference, lab {lab.lab_id}"
            + (" (MOCK)" if mock else ""), ""]
    if mock:
        head += ["**MOCK**: this lab ran on tplab's local mock cloud (`tplab run --mock`): the "
                 "\"pods\" were processes on this machine's CPU (gloo), the spending simulated. "
                 "Its figures show the lab's shape, not a GPU's.", ""]
    head += [f"Gathered by `tplab handin` from `{lab.path}`. Status: {lab.status}"
             + (f" ({lab.reason})" if lab.reason else "") + "."]
    head += figures_section(lab.manifest)
    head += ["", "## The files", "", "| file | what it is |", "|---|---|"]
    rows = [f"| `{name}` | {LAB_FILES[name]} |" for name in LAB_FILES if name in present]
    rows += ["| `run.py` | block B: the job as it ran on the pod (`src/tplab/job/`), started "
             "under torchrun |",
             "| `../35-cloud-budget/spend.jsonl` | this lab's lines of the budget ledger, "
             "exactly as BudgetGuard recorded them (authorize, then actual) |",
             "| `../35-cloud-budget.md` | the phase's spend table: each lab, authorized, actual, "
             "remaining of the phase cap |",
             "| `../35-reading-notes/` | the Megatron and FSDP reading notes, the pinned "
             "Megatron SHA and the synthesis diagrams |",
             f"| `../../{minitrain.TENSOR_PARALLEL}`, `../../{minitrain.TESTS_FILE}` | block A: "
             "the TP layers and the lab sheet's four tests |",
             "| `../../src/tplab/` | tplab's pod-side code, as uploaded: what run.py and "
             "tensor_parallel.py import |"]
    blocks = ["", "## Where each block of the lab lives in tplab", "",
              f"Generated from tplab {__version__}'s own code, so the hand-in and the tool cannot "
              "disagree.", "", "| block | what | in tplab | here |", "|---|---|---|---|"]
    blocks += [f"| {b} | {what} | {where} | {here} |" for b, what, where, here in BLOCKS]
    return "\n".join(head + rows + blocks) + "\n"


def _manifest(data: bytes, proof: str | None) -> bytes:
    """The lab's manifest with ``terminated_screenshot`` the lab sheet's path in this tree."""
    try:
        m = json.loads(data)
    except ValueError:
        return data
    if not isinstance(m, dict) or proof is None:
        return data
    m["terminated_screenshot"] = f"{TP_DIR}/{proof}"
    return (json.dumps(m, indent=2, ensure_ascii=False) + "\n").encode()


def plan(lab: PastLab, guard: Any = None) -> tuple[list[Planned], list[str]]:
    """Every file of the hand-in, in memory, and notes on what is missing."""
    guard = guard or _guard(lab.mock)
    files: list[Planned] = []
    notes: list[str] = []
    present = [name for name in LAB_FILES if (lab.path / name).is_file()]
    proof = next((n for n in ("proof-terminated.png", "proof-terminated.svg",
                              "proof-terminated.json") if n in present), None)
    for name in present:
        data = _read(lab.path / name)
        if name == "manifest.json":
            data = _manifest(data, proof)
        files.append(Planned(f"{TP_DIR}/{name}", data))
    traces = rank_traces.present(lab.path)
    for rel in traces:
        files.append(Planned(f"{TP_DIR}/{rel}", _read(lab.path / rel)))
    if traces:
        present.append(rank_traces.TRACES_DIR + "/")
    for name in ("scaling-curve.png", "proof-terminated.png"):
        if name not in present:
            notes.append(f"{name}: the lab has none (it ended before it could be drawn)")
    files.append(Planned(f"{TP_DIR}/README.md", readme(lab, present).encode()))
    auth = auth_id_of(lab.path)
    lines = spend_lines(Path(guard.ledger_path), auth)
    if not lines:
        notes.append("spend.jsonl: the ledger has no line for this lab (nothing was authorized)")
    files.append(Planned(f"{BUDGET_DIR}/spend.jsonl", lines))
    lab_ids = {a: other.lab_id for other in find_labs(default_roots())
               if (a := auth_id_of(other.path))}
    if auth:
        lab_ids.setdefault(auth, lab.lab_id)
    files.append(Planned(BUDGET_MD, spend_table.render(guard.summary(), lab_ids, lab.mock,
                                                       this_auth=auth).encode()))
    files += [Planned(rel, data) for rel, data in sorted(minitrain.files(__version__).items())]
    if NOTES_SRC.is_dir():
        for src in sorted(NOTES_SRC.iterdir()):
            if src.is_file():
                files.append(Planned(f"{NOTES_DIR}/{src.name}", src.read_bytes()))
    else:
        notes.append(f"reading notes: {NOTES_SRC} is missing from this install")
    return files, notes


def plan_compile(run: Path) -> list[Planned]:
    """The compile lab's sheet's deliverables from a `tplab compile --out DIR` run (HandinError, one sentence,
    when DIR is not one)."""
    if not (run / "manifest.json").is_file() or not (run / "REPORT.md").is_file():
        raise HandinError(f"{run} is not a finished `tplab compile --out DIR` run (no REPORT.md "
                          "and manifest.json there).")
    files = [Planned(f"{COMPILE_DIR}/{name}", _read(run / name))
             for name in COMPILE_FILES if (run / name).is_file()]
    kernel = next((k for k in (run / "kernels" / "fused_softmax.cpp",
                               run / "kernels" / "fused_softmax.py") if k.is_file()), None)
    if kernel is not None:
        files.append(Planned(f"{COMPILE_DIR}/kernel{kernel.suffix}", _read(kernel)))
    return files


def write(files: list[Planned], dest: Path, force: bool = False) -> Outcome:
    """Write the plan under ``dest``; a different existing file stops everything unless ``force``."""
    out = Outcome()
    conflicts = []
    for f in files:
        path = dest / f.rel
        if path.is_dir():
            raise HandinError(f"{path} is a folder where the hand-in puts a file; move it away.")
        if path.is_file():
            if path.read_bytes() == f.data:
                out.unchanged.append(f.rel)
            else:
                conflicts.append(f.rel)
    if conflicts and not force:
        listed = ", ".join(conflicts[:4]) + (f" and {len(conflicts) - 4} more"
                                             if len(conflicts) > 4 else "")
        raise HandinError(f"{dest} already has different {listed}; nothing was written (pass "
                          "--force to overwrite them).")
    for f in files:
        if f.rel in out.unchanged:
            continue
        path = dest / f.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".handin-tmp")
        tmp.write_bytes(f.data)
        tmp.replace(path)
        out.written.append(f.rel)
    return out


def handin(dest: Path, lab_id: str | None = None, force: bool = False,
           roots: Iterable[Path] | None = None, compile_dir: Path | None = None) -> Outcome:
    """Pick the lab (``pick.pick_lab``), plan the hand-in (and a compile run's, when given),
    write it."""
    chosen = pick_lab(lab_id, roots)
    files, notes = plan(chosen.lab)
    if compile_dir is not None:
        files += plan_compile(compile_dir)
    out = write(files, dest, force)
    out.lab, out.why, out.notes = chosen.lab, chosen.why, notes
    return out
