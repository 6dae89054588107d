"""`tplab generate`, `tplab eval`, `tplab train`: outputs and one-sentence errors (in-process, cheap)."""

from __future__ import annotations

import argparse
import json

from tplab.commands import eval_, generate, train


def _run(module, argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return module.main(parser.parse_args(argv))


def test_generate_prints_the_correction_and_flags_unknown_words(capsys):
    assert _run(generate, ["he", "goed", "to", "school"]) == 0
    assert capsys.readouterr().out == "he went to school\n"
    assert _run(generate, ["she", "dont", "like", "zanzibar"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "she doesn't like zanzibar\n"
    assert "carried through as placeholders: zanzibar" in captured.err
    assert _run(generate, ["josé dont like apples"]) == 0  # an accent does not split a word
    captured = capsys.readouterr()
    assert captured.out == "josé doesn't like apples\n"
    assert "carried through as placeholders: josé\n" in captured.err
    assert _run(generate, ["zoë goed to münchen"]) == 0
    assert capsys.readouterr().out == "zoë went to münchen\n"
    many = "qa qb qc qd qe qf qg qh qi is here"
    assert _run(generate, many.split()) == 0
    assert "read as <unk> (more than 8 unknown words): qi" in capsys.readouterr().err


def test_generate_errors_are_one_sentence(tmp_path, capsys):
    assert _run(generate, ["--checkpoint", str(tmp_path / "none.pt"), "hi"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert _run(generate, ["--tp", "3", "i has eat"]) == 1
    assert "n_head=4 is not divisible by 3" in capsys.readouterr().err


def test_eval_reports_both_sets_and_the_content_word_change_rate(capsys):
    assert _run(eval_, ["--examples", "40", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "held-out exact match:" in out and "irregular_past" in out
    assert "outside-corpus set exact match:" in out
    assert out.count("content words changed:") == 2 and out.count("repeated n-grams:") == 2
    assert _run(eval_, ["--examples", "8", "--threads", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # --json: one document, nothing else
    assert doc["held-out"]["total"] == 8 and 0 <= doc["held-out"]["accuracy"] <= 1
    assert set(doc["outside-corpus set"]) >= {"accuracy", "content_change_rate", "per_kind"}


def test_train_rejects_bad_arguments(capsys):
    assert _run(train, ["--steps", "0"]) == 2
    assert "--steps must be positive" in capsys.readouterr().err
    assert _run(train, ["--n-layer", "0"]) == 2
    assert "n_layer must be a positive integer" in capsys.readouterr().err
