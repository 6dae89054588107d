"""`--out DIR` holds one run: `tplab run` and `tplab local` never overwrite a finished lab nor
put their files beside another run's, and an `--out` that is a file (or cannot be made) is one
sentence, before anything exists."""

from __future__ import annotations

import json

import pytest

from tplab.commands.main import main


def _finished_lab(folder, status="COMPLETE"):
    """A lab's folder as a lab leaves it: its id is in its stream's first event."""
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"status": status, "mock": True}))
    (folder / "stream.jsonl").write_text(json.dumps(
        {"v": 1, "seq": 0, "ts": 1.0, "src": "lab", "type": "phase", "name": "preflight",
         "lab_id": "20261203-101010-abcdef"}) + "\n")
    (folder / "results.json").write_text("{}")
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _no_lab_started(home) -> bool:
    return not (home / "mock" / "labs").exists() and not (home / "mock" / "ledger.jsonl").exists()


@pytest.mark.parametrize("command", [["run", "--mock"], ["local"]])
def test_a_folder_holding_a_finished_lab_is_refused_and_left_as_it_was(tmp_path, capsys,
                                                                        command):
    out = tmp_path / "runs" / "lab02"
    before = _finished_lab(out)
    assert main([*command, "--out", str(out)]) == 2
    o, err = capsys.readouterr()
    assert o == "" and err.count("\n") == 1, err
    assert (f"--out {out} already holds lab 20261203-101010-abcdef (COMPLETE), which a new lab "
            f"never overwrites; name a new folder (e.g. --out {out}-2)") in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _no_lab_started(tmp_path / "tplab-home")


@pytest.mark.parametrize("command", [["run", "--mock"], ["local"]])
def test_an_out_that_is_a_file_or_holds_other_files_is_one_sentence(tmp_path, capsys, command):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "draft.md").write_text("mine\n")
    cases = {a_file: f"--out {a_file} is a file, not a folder",
             a_file / "lab": f"--out {a_file / 'lab'} cannot be made: {a_file} is a file",
             other: f"--out {other} is not empty (draft.md); name a new or empty folder"}
    for out, sentence in cases.items():
        assert main([*command, "--out", str(out)]) == 2, out
        o, err = capsys.readouterr()
        assert o == "" and err.count("\n") == 1 and sentence in err, err
        assert "Traceback" not in err and "Error" not in err
    assert a_file.read_text() == "mine\n" and sorted(p.name for p in other.iterdir()) == [
        "draft.md"]
    assert _no_lab_started(tmp_path / "tplab-home")


def test_an_empty_or_new_folder_is_taken(tmp_path):
    from tplab.home.lab_folders import out_dir_problem
    (tmp_path / "empty").mkdir()
    assert out_dir_problem(tmp_path / "empty") is None
    assert out_dir_problem(tmp_path / "new" / "deeper") is None
