"""`tplab handin` on finished lab folders: the lab it picks (the newest that completed, a real one
before a mock one; said, and why the newer ones were passed over), the one-sentence refusals,
and the spend table on a ledger with every kind of ending. `tplab handin` after a real mock lab
(the lab sheet's tree, the spend lines equal to the ledger's, the budget table's totals equal to
`tplab budget`'s, a student's file refused without --force) is asserted on the suite's full
lab, which it shares (tests/lab/test_lab_e2e.py::test_full_lab_completes_with_every_artifact,
with the helpers below: ``SHEET_TREE``, ``PNG``, ``_tree``, ``_totals``, ``_budget_json``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tplab.commands import main as cli
from tplab.money.budget import BudgetGuard
from tplab.money.budget_config import fmt_usd
from tplab import __version__
from tplab.handin import minitrain, spend_table

SHEET_TREE = {
    "experiments/35-tp-inference/manifest.json", "experiments/35-tp-inference/results.json",
    "experiments/35-tp-inference/instance.json", "experiments/35-tp-inference/scaling-curve.png",
    "experiments/35-tp-inference/proof-terminated.png", "experiments/35-tp-inference/trace.json",
    "experiments/35-tp-inference/proof-terminated.json", "experiments/35-tp-inference/README.md",
    "experiments/35-cloud-budget/spend.jsonl", "experiments/35-cloud-budget.md",
    "experiments/35-reading-notes/megatron-tp-layers.md",
    "experiments/35-reading-notes/fsdp-prefetch.md", "experiments/35-reading-notes/synthesis.md",
    "experiments/35-reading-notes/megatron-sha.txt"} | set(minitrain.files(__version__))
#: each rank's own trace, as HTA reads the folder (a lab that ran its profiled pass)
SHEET_TREE |= {f"experiments/35-tp-inference/traces/{f}" for f in (
    "rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz", "single/rank0.pt.trace.json.gz")}
PNG = b"\x89PNG\r\n\x1a\n"


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _totals(md: str) -> list[str]:
    after = md.split("## Totals", 1)[1]
    return re.findall(r"^\| (\$[\d.]+) \| (\$[\d.]+) \| (\$[\d.]+) \| (\$[\d.]+) \|$", after, re.M)[0]


def _budget_json(capsys) -> dict:
    assert cli.main(["budget", "--mock", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_no_lab_yet_is_one_sentence(tmp_path, capsys) -> None:
    assert cli.main(["handin", str(tmp_path / "student")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no finished lab yet" in err and "tplab run --mock" in err
    assert "--lab DIR" in err
    assert not (tmp_path / "student").exists()


def test_the_newest_finished_lab_is_found_in_the_labs_folder_and_in_remembered_out_folders(
        tmp_path) -> None:
    from tplab.handin.pick import pick_lab
    from tplab.home import lab_folders
    from tplab.home.paths import tplab_home

    def find_lab(lab_id):
        return pick_lab(lab_id).lab

    def finished(folder: Path, start: float) -> Path:
        _lab(folder, start, "COMPLETE")
        return folder

    home_lab = finished(tplab_home(True) / "labs" / "20261201-000000-aaaaaa", 1_800_000_000)
    assert find_lab(None).path == home_lab.resolve()
    out_lab = finished(tmp_path / "runs" / "lab02", 1_800_000_100)
    assert find_lab(None).path == home_lab.resolve()  # an --out folder no lab remembered
    lab_folders.remember(out_lab, mock=False)
    lab_folders.remember(out_lab, mock=False)  # once
    assert lab_folders.remembered(False) == [out_lab.resolve()]
    assert find_lab(None).path == out_lab.resolve()
    import shutil
    shutil.rmtree(out_lab)  # deleted since: skipped
    assert lab_folders.remembered(False) == [] and find_lab(None).path == home_lab.resolve()


def _lab(folder: Path, start: float, status: str, results: bool = True, mock: bool = False,
         reason: str = "") -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(
        {"start_ts": start, "status": status, "reason": reason, "mock": mock}))
    if results:
        (folder / "results.json").write_text("{}")
    return folder


def test_only_a_lab_the_sheet_accepts_is_handed_in_and_the_choice_is_said(tmp_path,
                                                                          capsys) -> None:
    """A STOPPED lab after a COMPLETE one, and one stopped in pre-flight with no results: the
    COMPLETE one is handed in, saying which and why; a STOPPED or results-less lab named with
    --lab is refused in one sentence, exit 1, nothing written; a real lab comes before a mock."""
    from tplab.home.paths import tplab_home
    labs = tplab_home(True) / "labs"
    done = _lab(labs / "20261203-100000-aaaaaa", 1_800_000_000, "COMPLETE", mock=True)
    stopped = _lab(labs / "20261203-110000-bbbbbb", 1_800_000_100, "STOPPED", mock=True,
                   reason="stopped by the user (Ctrl-C)")
    _lab(labs / "20261203-120000-cccccc", 1_800_000_200, "STOPPED", results=False, mock=True,
         reason="stopped by the user (the output pipe was closed)")
    hollow = _lab(labs / "20261203-130000-dddddd", 1_800_000_300, "COMPLETE", results=False,
                  mock=True)
    dest = tmp_path / "student"
    assert cli.main(["handin", str(dest)]) == 0
    said = capsys.readouterr().out
    assert said.startswith("Handed in lab 20261203-100000-aaaaaa (COMPLETE, MOCK), the newest "
                           "mock lab that completed; newer, passed over: 20261203-130000-dddddd "
                           "(its results.json is missing), 20261203-120000-cccccc (it ended "
                           "STOPPED: stopped by the user (the output pipe was closed)), "
                           "20261203-110000-bbbbbb (it ended STOPPED: ")
    manifest = dest / "experiments/35-tp-inference/manifest.json"
    assert manifest.read_bytes() == (done / "manifest.json").read_bytes()
    for lab in (stopped, hollow):
        again = tmp_path / f"again-{lab.name}"
        assert cli.main(["handin", str(again), "--lab", lab.name]) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and not again.exists()
        assert f"lab {lab.name} cannot be handed in: " in err
        assert "the lab sheet takes a lab that completed (COMPLETE), or one that could not run" in err
    assert cli.main(["handin", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].endswith("(not for handin: its results.json is missing)")
    assert "not for handin" not in listed[-1]


def test_a_lab_file_that_is_no_file_tplab_wrote_is_one_sentence_and_nothing_is_written(
        tmp_path, capsys) -> None:
    """A lab folder named with --lab may hold anything: a trace.json larger than any tplab
    writes (a sparse file here) is refused in one sentence, exit 1, before a byte of the
    hand-in is written, and is never read past the hand-in's bound."""
    from tplab.handin.gather import FILE_LIMIT
    lab = _lab(tmp_path / "20261203-100000-aaaaaa", 1_800_000_000, "COMPLETE", mock=True)
    with open(lab / "trace.json", "wb") as f:
        f.truncate(FILE_LIMIT + 1)
    dest = tmp_path / "student"
    assert cli.main(["handin", str(dest), "--lab", str(lab)]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "trace.json is over 32 MiB: not read" in err
    assert "Nothing was written." in err and not dest.exists()


def test_a_real_lab_comes_before_a_mock_one_and_a_completed_one_before_a_stub(tmp_path) -> None:
    from tplab.handin.pick import pick_lab
    real, mock = tmp_path / "real", tmp_path / "mock"
    stub = _lab(real / "20261203-080000-ffffff", 1_799_998_000, "EDUCATIONAL_STUB")
    assert pick_lab(None, [real, mock]).lab.path == stub.resolve()
    done = _lab(real / "20261203-070000-eeeeee", 1_799_997_000, "COMPLETE")
    _lab(mock / "20261203-100000-aaaaaa", 1_800_000_000, "COMPLETE", mock=True)
    chosen = pick_lab(None, [real, mock])
    assert chosen.lab.path == done.resolve()
    assert chosen.why == ("the newest real lab that completed; newer, passed over: "
                          "20261203-100000-aaaaaa (a mock lab; a real one comes first), "
                          "20261203-080000-ffffff (an EDUCATIONAL_STUB; a lab that completed "
                          "comes first)")


def test_no_lab_the_sheet_accepts_is_one_sentence(tmp_path, capsys) -> None:
    from tplab.home.paths import tplab_home
    _lab(tplab_home(True) / "labs" / "20261203-110000-bbbbbb", 1_800_000_100, "STOPPED",
         results=False, reason="stopped by the user (Ctrl-C)")
    assert cli.main(["handin", str(tmp_path / "student")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no lab that can be handed in yet: the newest, " in err
    assert "it ended STOPPED" in err and not (tmp_path / "student").exists()


def test_the_spend_table_has_a_row_per_lab_and_tplab_budgets_totals(tmp_path) -> None:
    clock = iter(range(1_800_000_000, 1_800_000_100))
    guard = BudgetGuard(tmp_path / "spend.jsonl", 5.0, clock=lambda: float(next(clock)))
    a = guard.authorize("lab02-a", 3.0)
    guard.record_actual("lab02-a", 0.4213, a)
    guard.authorize("lab02-b", 2.0)
    guard.release("lab02-b")
    guard.authorize("lab02-c", 1.5)          # still open: held
    s = guard.summary()
    rows = spend_table.spend_rows(s)
    assert [(r.label, r.outcome) for r in rows] == [
        ("lab02-a", "spent"), ("lab02-b", "released (no pod)"), ("lab02-c", "HELD (open)")]
    assert [str(r.remaining_after) for r in rows] == ["4.5787", "4.5787", "3.0787"]
    assert float(rows[-1].remaining_after) == pytest.approx(s.remaining_usd)
    md = spend_table.render(s, {a: "20261201-000000-aaaaaa"}, this_auth=a)
    assert _totals(md) == (fmt_usd(5.0), fmt_usd(s.spent_usd), fmt_usd(s.held_usd),
                           fmt_usd(s.remaining_usd)) == ("$5.00", "$0.4213", "$1.50", "$3.08")
    assert "| 1 | 20261201-000000-aaaaaa (this hand-in) | `lab02-a` |" in md
    assert "MOCK" not in md and "within the $5.00 cap" in md


def test_a_compile_run_is_handed_in_where_the_compile_lab_sheet_names_its_files(tmp_path) -> None:
    from tplab.handin.gather import COMPILE_DIR, HandinError, plan_compile
    run = tmp_path / "compile"
    (run / "kernels").mkdir(parents=True)
    for name in ("REPORT.md", "KERNEL_ANNOTATION.md", "DISTRIBUTED.md", "DISTRIBUTED-detail.md",
                 "manifest.json", "compile-results.json"):
        (run / name).write_text(name)
    (run / "kernels" / "fused_softmax.cpp").write_text("extern \"C\" void kernel() {}")
    planned = {p.rel: p.data for p in plan_compile(run)}
    assert set(planned) == {f"{COMPILE_DIR}/{n}" for n in (
        "REPORT.md", "KERNEL_ANNOTATION.md", "DISTRIBUTED.md", "DISTRIBUTED-detail.md",
        "manifest.json", "compile-results.json", "kernel.cpp")}
    assert planned[f"{COMPILE_DIR}/kernel.cpp"].startswith(b"extern")
    with pytest.raises(HandinError, match="is not a finished `tplab compile"):
        plan_compile(tmp_path / "nothing")
