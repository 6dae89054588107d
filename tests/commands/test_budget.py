"""`tplab budget`: the report, --json, --release, damaged lines and user errors."""

from __future__ import annotations

import argparse
import json

import pytest

from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.commands import budget as cmd


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tplab budget")
    cmd.add_arguments(parser)
    return cmd.main(parser.parse_args(argv))


def test_contract_of_a_command_module():
    assert isinstance(cmd.HELP, str) and cmd.HELP


def test_empty_budget(capsys):
    assert run([]) == 0
    out = capsys.readouterr().out
    assert "Cap        $5.00" in out and "Remaining  $5.00" in out and "(none)" in out
    assert "Pre-flight OK" in out


def test_report_shows_figures_entries_and_open_authorizations(capsys):
    guard = BudgetGuard(default_ledger_path(False), cap_usd=5.0)
    guard.authorize("lab02-tp-spinup-rtx4090x2", 3.0)
    guard.record_actual("lab02-tp-spinup-rtx4090x2", 0.42)
    guard.authorize("lab03-compile", 2.0)
    assert run([]) == 0
    out = capsys.readouterr().out
    for text in ("Spent      $0.42", "Held       $2.00  (1 open", "Remaining  $2.58",
                 "Pre-flight NOT OK: needs $3.50", "lab03-compile  $2.00", "Entries (3):",
                 "authorize", "actual"):
        assert text in out, text


def test_json_and_mock_ledger_are_separate(capsys):
    BudgetGuard(default_ledger_path(True)).record_actual("mock-lab", 1.25)
    assert run(["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["spent_usd"] == 0.0
    assert run(["--mock", "--json", "--cap", "4"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["spent_usd"] == 1.25 and data["cap_usd"] == 4.0 and data["remaining_usd"] == 2.75
    assert data["entries"][0]["label"] == "mock-lab"
    assert data["preflight"]["ok"] is False   # 2.75 < 3.00 + 0.50


def test_plain_budget_after_a_mock_lab_points_at_the_mock_ledger(capsys):
    assert run([]) == 0
    assert "--mock" not in capsys.readouterr().out  # no mock lab yet: nothing to point at
    BudgetGuard(default_ledger_path(True)).record_actual("mock-lab", 0.01)
    assert run([]) == 0
    out = capsys.readouterr().out
    assert "Entries (0):" in out and out.rstrip().endswith(
        "Mock labs keep a ledger of their own (simulated money, 1 line(s)): `tplab budget "
        "--mock` shows it.")


def test_release_a_stale_authorization(capsys):
    guard = BudgetGuard(default_ledger_path(False))
    auth_id = guard.authorize("lab02-crashed", 3.0)
    assert run(["--release", "lab02-crashed"]) == 0
    out = capsys.readouterr().out
    assert f"Released $3.00 held for 'lab02-crashed' (authorization {auth_id})" in out
    assert guard.held == 0.0
    assert run(["--release", "lab02-crashed"]) == 1
    err = capsys.readouterr().err
    assert "no open authorization for 'lab02-crashed'" in err


def test_damaged_line_is_shown_with_its_number_and_exit_is_nonzero(capsys):
    guard = BudgetGuard(default_ledger_path(False))
    guard.record_actual("a", 0.5)
    with guard.ledger_path.open("a") as f:
        f.write('{"truncated": \n')
    guard.record_actual("b", 0.25)
    assert run([]) == 1
    captured = capsys.readouterr()
    assert "line 2: not valid JSON" in captured.out
    assert "Spent      $0.75" in captured.out
    assert "1 damaged line" in captured.err


@pytest.mark.parametrize("amount", ["1e309", "NaN", "Infinity", "-Infinity", "-1", "-0.5",
                                    "1" + "0" * 40, "\"2.00\"", "true"])
def test_an_amount_that_is_not_dollars_is_a_damaged_line_and_the_rest_is_kept(capsys, amount):
    """A hand-edited ledger: `tplab budget` reports the line, counts the others, no traceback."""
    guard = BudgetGuard(default_ledger_path(False))
    guard.record_actual("a", 0.5)
    with guard.ledger_path.open("a") as f:
        f.write('{"v": 1, "ts": 1, "kind": "actual", "label": "edited", "amount_usd": '
                + amount + ', "auth_id": null}\n')
    guard.record_actual("b", 0.25)
    assert run([]) == 1
    captured = capsys.readouterr()
    assert "line 2: " in captured.out
    assert "Spent      $0.75" in captured.out
    assert "1 damaged line" in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert guard.summary().spent_usd == 0.75
    assert guard.check_preflight(1.0, 0.0).ok   # a lab's pre-flight reads the same ledger


@pytest.mark.parametrize("ts", ["1e309", "-1e309", "1" + "0" * 400])
def test_a_time_that_is_not_a_finite_number_is_a_damaged_line(capsys, ts):
    guard = BudgetGuard(default_ledger_path(False))
    guard.authorize("kept", 1.0)
    with guard.ledger_path.open("a") as f:
        f.write('{"v": 1, "ts": ' + ts + ', "kind": "authorize", "label": "edited", '
                '"amount_usd": 1, "auth_id": "a-edited"}\n')
    assert run([]) == 1
    captured = capsys.readouterr()
    assert "line 2: " in captured.out and "'ts'" in captured.out
    assert "Held       $1.00" in captured.out
    assert "Traceback" not in captured.err + captured.out


@pytest.mark.parametrize("argv, match", [
    (["--auth-id", "abc"], "--auth-id needs --release"),
    (["--lab-cap", "9"], "above the phase cap"),
    (["--cap", "-1"], ">= 0"),
])
def test_user_errors_are_one_sentence_and_nonzero(capsys, argv, match):
    assert run(argv) == 1
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1
