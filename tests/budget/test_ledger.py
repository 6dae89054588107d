"""The ledger file layer: damage-tolerant parsing, durable appends, torn last lines."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tplab.money.ledger import Ledger, encode_line, parse_lines


def test_parse_reports_each_damaged_line_and_keeps_the_rest():
    raw = (b'{"a": 1}\n'
           b'{"a": 2\n'                 # truncated
           b'\n'                        # blank: skipped, not damage
           b'[1, 2]\n'                  # not an object
           b'{"a": NaN}\n'              # NaN is not money
           b'\xff\xfe{"a": 3}\n'        # not UTF-8
           b'{"a": 4.10}\n')
    good, damaged = parse_lines(raw)
    assert [(g.line_no, g.data["a"]) for g in good] == [(1, 1), (7, Decimal("4.10"))]
    assert [d.line_no for d in damaged] == [2, 4, 5, 6]
    reasons = {d.line_no: d.reason for d in damaged}
    assert "not valid JSON" in reasons[2]
    assert "not a JSON object" in reasons[4]
    assert "NaN" in reasons[5]
    assert "UTF-8" in reasons[6]


def test_decimal_round_trips_as_a_plain_json_number():
    line = encode_line({"amount_usd": Decimal("0.100000")})
    assert line.endswith(b"\n")
    assert json.loads(line) == {"amount_usd": 0.1}


def test_append_after_a_torn_last_line_starts_a_new_line(tmp_path):
    path = tmp_path / "spend.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2, "trunc')   # a crash mid-write left no newline
    ledger = Ledger(path)
    with ledger.locked() as held:
        held.append({"n": 3})
    good, damaged = ledger.read()
    assert [g.data["n"] for g in good] == [1, 3]
    assert [d.line_no for d in damaged] == [2]
    assert path.read_bytes().endswith(b'{"n": 3}\n')


def test_missing_ledger_reads_empty_and_append_creates_it(tmp_path):
    ledger = Ledger(tmp_path / "sub" / "spend.jsonl")
    assert ledger.read() == ([], [])
    with ledger.locked() as held:
        held.append({"n": 1})
    assert ledger.path.read_text() == '{"n": 1}\n'
    assert ledger.lock_path.exists()


def test_append_needs_the_exclusive_lock(tmp_path):
    ledger = Ledger(tmp_path / "spend.jsonl")
    with ledger.locked(exclusive=False) as held, pytest.raises(RuntimeError):
        held.append({"n": 1})
    assert not ledger.path.exists()


def test_append_returns_the_line_number_it_wrote(tmp_path):
    path = tmp_path / "spend.jsonl"
    path.write_bytes(b'{"n": 1}\n\n{"n": 2')     # a blank line, then a torn one
    with Ledger(path).locked() as held:
        assert held.append({"n": 3}) == 4
        assert held.append({"n": 4}) == 5
    good, _ = Ledger(path).read()
    assert [(g.line_no, g.data["n"]) for g in good] == [(1, 1), (4, 3), (5, 4)]
