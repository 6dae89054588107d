"""BudgetGuard semantics: the figures match the ledger by hand, caps hold, damage is reported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tplab.money.budget import (BudgetConfig, BudgetError, BudgetGuard, BudgetGuardExceeded,
                          default_ledger_path, fmt_usd)


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_figures_match_the_ledger_by_hand(tmp_path):
    path = tmp_path / "spend.jsonl"
    guard = BudgetGuard(path, cap_usd=5.0)
    guard.authorize("lab02-tp-spinup-rtx4090x2", 3.00)
    assert (guard.total_spent, guard.held, guard.remaining) == (0.0, 3.0, 2.0)
    guard.record_actual("lab02-tp-spinup-rtx4090x2", 0.47)
    guard.authorize("lab03-compile", 1.25)
    guard.authorize("lab04-reading", 0.30)
    guard.release("lab04-reading")

    entries = lines(path)
    assert [e["kind"] for e in entries] == ["authorize", "actual", "authorize", "authorize",
                                            "release"]
    # by hand: spent = actual lines; held = authorize lines not settled later
    settled = {e["auth_id"] for e in entries if e["kind"] in ("actual", "release")}
    spent = sum(e["amount_usd"] for e in entries if e["kind"] == "actual")
    held = sum(e["amount_usd"] for e in entries
               if e["kind"] == "authorize" and e["auth_id"] not in settled)
    assert spent == guard.total_spent == 0.47
    assert held == guard.held == 1.25
    assert guard.remaining == (500 - 47 - 125) / 100 == 3.28   # in cents, no float drift


def test_no_float_drift_at_the_cap(tmp_path):
    guard = BudgetGuard(tmp_path / "spend.jsonl", cap_usd=3.00)
    for _ in range(30):   # 0.1 * 30 in floats is 3.0000000000000013 > 3.00
        guard.authorize("tick", 0.10)
    assert guard.held == 3.0 and guard.remaining == 0.0
    with pytest.raises(BudgetGuardExceeded):
        guard.authorize("tick", 0.01)


def test_authorize_past_the_cap_raises_and_writes_nothing(tmp_path):
    path = tmp_path / "spend.jsonl"
    guard = BudgetGuard(path, cap_usd=5.0)
    guard.authorize("a", 3.0)
    before = path.read_bytes()
    with pytest.raises(BudgetGuardExceeded) as info:
        guard.authorize("b", 2.01)
    assert "remaining $2.00" in str(info.value)
    assert info.value.remaining_usd == 2.0 and info.value.label == "b"
    assert path.read_bytes() == before
    guard.authorize("b", 2.0)   # exactly the remainder fits
    assert guard.remaining == 0.0


def test_lab_cap_is_enforced_per_authorization(tmp_path):
    guard = BudgetGuard.from_config(BudgetConfig(lab_cap_usd=3.0, phase_cap_usd=5.0),
                                    ledger_path=tmp_path / "spend.jsonl")
    with pytest.raises(BudgetGuardExceeded, match="lab cap"):
        guard.authorize("lab02", 3.01)
    assert guard.held == 0.0
    guard.authorize("lab02", 3.0)


@pytest.mark.parametrize("amount", [0, -1, float("nan"), float("inf"), "abc", True, None])
def test_bad_amounts_are_refused(tmp_path, amount):
    guard = BudgetGuard(tmp_path / "spend.jsonl")
    with pytest.raises(BudgetError):
        guard.authorize("x", amount)
    assert not (tmp_path / "spend.jsonl").exists()


def test_actual_above_authorized_is_recorded_honestly(tmp_path):
    guard = BudgetGuard(tmp_path / "spend.jsonl", cap_usd=5.0)
    guard.authorize("lab", 3.0)
    entry = guard.record_actual("lab", 5.40)
    assert entry.amount_usd == 5.40 and entry.line_no == 2
    assert guard.total_spent == 5.40 and guard.held == 0.0
    assert guard.remaining == pytest.approx(-0.40)
    assert lines(guard.ledger_path)[-1]["authorized_usd"] == 3.0
    with pytest.raises(BudgetGuardExceeded):
        guard.authorize("next", 0.01)


def test_repeated_labels_settle_the_latest_open_or_the_named_one(tmp_path):
    guard = BudgetGuard(tmp_path / "spend.jsonl", cap_usd=10.0)
    first = guard.authorize("lab02", 1.0)
    second = guard.authorize("lab02", 2.0)
    assert first != second
    assert guard.record_actual("lab02", 0.5).auth_id == second
    assert [a.auth_id for a in guard.summary().open_authorizations] == [first]
    with pytest.raises(BudgetError, match="no open authorization"):
        guard.record_actual("lab02", 0.1, auth_id=second)   # already settled
    assert guard.release("lab02", auth_id=first).amount_usd == 1.0
    with pytest.raises(BudgetError, match="no open authorization"):
        guard.release("lab02")
    assert guard.held == 0.0 and guard.total_spent == 0.5


def test_spending_without_an_authorization_is_still_recorded(tmp_path):
    guard = BudgetGuard(tmp_path / "spend.jsonl")
    entry = guard.record_actual("orphan-pod", 0.12)
    assert entry.auth_id is None
    assert guard.total_spent == 0.12 and guard.remaining == 4.88


def test_open_authorization_survives_a_crash(tmp_path):
    path = tmp_path / "spend.jsonl"
    code = ("import os, sys; from tplab.money.budget import BudgetGuard; "
            f"BudgetGuard({str(path)!r}).authorize('lab02-crashed', 3.0); os._exit(9)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 9, proc.stderr
    guard = BudgetGuard(path, cap_usd=5.0)           # a new client, after the crash
    assert guard.held == 3.0 and guard.remaining == 2.0
    (auth,) = guard.summary().open_authorizations
    assert auth.label == "lab02-crashed" and auth.stale
    assert "has ended" in auth.stale_reason
    guard.release("lab02-crashed")
    assert guard.remaining == 5.0


def test_old_open_authorization_is_flagged_stale(tmp_path):
    now = [1_000_000.0]
    guard = BudgetGuard(tmp_path / "spend.jsonl", stale_after_s=3600, clock=lambda: now[0])
    guard.authorize("lab", 1.0)          # this process is alive: not stale yet
    assert not guard.summary().open_authorizations[0].stale
    now[0] += 3601
    (auth,) = guard.summary().open_authorizations
    assert auth.stale and "1h 00m" in auth.stale_reason


def test_damaged_lines_are_reported_and_the_rest_counted(tmp_path):
    path = tmp_path / "spend.jsonl"
    guard = BudgetGuard(path, cap_usd=5.0)
    a = guard.authorize("good", 1.0)
    with path.open("a") as f:
        f.write('{"v": 1, "ts": 1, "kind": "actual", "label": "x", "amount_usd": "3.00"}\n')
        f.write('{"v": 1, "ts": 1, "kind": "actual", "label": 7, "amount_usd": 1}\n')
        f.write('{"v": 1, "ts": 1, "kind": "refund", "label": "x", "amount_usd": 1}\n')
        f.write('{"v": 1, "ts": 1, "kind": "actual", "label": "x", "amount_usd": -2}\n')
        f.write('{"v": 1, "kind": "actual", "label": "x", "amount_usd": 2}\n')
        f.write('{"v": 1, "ts": 1, "kind": "release", "label": "x", "amount_usd": 1, '
                '"auth_id": "nope"}\n')
        f.write(json.dumps({"v": 1, "ts": 1, "kind": "authorize", "label": "dup",
                            "amount_usd": 1, "auth_id": a}) + "\n")
        f.write('{"v": 1, "ts": 1, "kind": "actual", "label": "good", "amount_usd": 0.25, "au')
    guard.record_actual("good", 0.40)     # lands on its own line after the torn one
    summary = guard.summary()
    reasons = {d.line_no: d.reason for d in summary.damaged}
    assert sorted(reasons) == [2, 3, 4, 5, 6, 7, 8, 9]
    assert "amount_usd" in reasons[2] and "'3.00'" in reasons[2]
    assert "label" in reasons[3]
    assert "unknown kind 'refund'" in reasons[4]
    assert "amount_usd" in reasons[5]
    assert "'ts'" in reasons[6]
    assert "not open" in reasons[7]
    assert "appears twice" in reasons[8]
    assert "not valid JSON" in reasons[9]
    assert [e.line_no for e in summary.entries] == [1, 10]
    assert summary.spent_usd == 0.40 and summary.held_usd == 0.0 and summary.remaining_usd == 4.60


def test_preflight_needs_lab_cap_plus_buffer(tmp_path):
    guard = BudgetGuard(tmp_path / "spend.jsonl", cap_usd=5.0)
    assert guard.preflight(3.0, 0.5).ok
    guard.record_actual("earlier-lab", 1.51)
    result = guard.check_preflight(3.0, 0.5)
    assert not result.ok and result.remaining_usd == 3.49 and result.needed_usd == 3.5
    assert "$3.49" in result.message and "$3.50" in result.message
    with pytest.raises(BudgetGuardExceeded, match="pre-flight"):
        guard.preflight(3.0, 0.5)
    assert guard.preflight(2.99, 0.5).ok
    configured = BudgetGuard.from_config(
        BudgetConfig(lab_cap_usd=2.0, phase_cap_usd=5.0, preflight_buffer_usd=1.5),
        ledger_path=guard.ledger_path)
    result = configured.check_preflight()       # the config's lab cap and buffer
    assert (result.needed_usd, result.ok) == (3.5, False)


def test_config_file_and_overrides(tmp_path, _tplab_home):
    assert BudgetConfig.load() == BudgetConfig()
    (_tplab_home / "budget.toml").write_text(
        "lab_cap_usd = 2.5\nphase_cap_usd = 4\npreflight_buffer_usd = 0.25\n")
    config = BudgetConfig.load()
    assert (config.lab_cap_usd, config.phase_cap_usd, config.preflight_buffer_usd) == (2.5, 4.0, 0.25)
    assert BudgetConfig.load(mock=True) == config          # mock falls back to the real file
    assert config.with_overrides(phase_cap_usd=6.0, lab_cap_usd=None).phase_cap_usd == 6.0
    guard = BudgetGuard.from_config(mock=True)
    assert guard.cap_usd == 4.0 and guard.ledger_path == default_ledger_path(True)
    assert default_ledger_path(True) != default_ledger_path(False)
    assert default_ledger_path(False) == _tplab_home / "spend.jsonl"


@pytest.mark.parametrize("text, match", [
    ("lab_cap = 3\n", "unknown setting"),
    ("lab_cap_usd = 6\n", "above the phase cap"),
    ("lab_cap_usd = -1\n", ">= 0"),
    ("lab_cap_usd = 'x'\n", ">= 0"),
    ("lab_cap_usd = \n", "not valid TOML"),
])
def test_bad_config_is_one_clear_error(_tplab_home, text, match):
    (_tplab_home / "budget.toml").write_text(text)
    with pytest.raises(BudgetError, match=match):
        BudgetConfig.load()


def test_fmt_usd():
    assert fmt_usd(3) == "$3.00"
    assert fmt_usd(0.5) == "$0.50"
    assert fmt_usd(0.0042) == "$0.0042"
    assert fmt_usd(-0.4) == "-$0.40"
    # one amount, one text: the budget's rows, the hand-in's spend table and a lab's cost figure
    # (strip, panels, tables, manifest) all show a billed $0.007 the same way
    from tplab.money.lab_money import BILLED, CostFigure
    assert fmt_usd(0.007) == "$0.0070"
    assert CostFigure(0.007, BILLED).text() == "$0.0070 billed"
    assert CostFigure(0.00355, BILLED).text() == f"{fmt_usd(0.00355)} billed" == "$0.0036 billed"
