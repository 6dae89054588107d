"""`tplab timeline LAB_DIR`: a finished lab's profiled pass as text — every token's lanes per
rank, labelled, with each rank's split and the medians; from results.json or, for a lab stopped
before its results, its stream; one sentence and a non-zero exit when there is nothing to show;
quiet on a closed pipe."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.synthetic_lab import ScriptOptions, lab_script, synthetic_timeline
from tplab.commands.main import main
from tplab.records.events import ResultEvent


def _lab(tmp_path, *, results: bool = True):
    folder = tmp_path / "lab-1"
    folder.mkdir()
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=6, profiled=True,
                                      until="done" if results else "profiled"))
    (folder / "stream.jsonl").write_text("".join(e.to_json() + "\n" for e in events))
    if results:
        (folder / "results.json").write_text(json.dumps(
            next(e.results for e in events if isinstance(e, ResultEvent))))
    return folder


def test_it_prints_every_profiled_token_as_lanes_per_rank_with_the_split(tmp_path, capsys):
    folder = _lab(tmp_path)
    assert main(["timeline", str(folder), "--width", "60"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("profiled pass: TP over nccl")
    assert sum(1 for ln in lines if ln.startswith("TP token ")) == 4
    assert sum(1 for ln in lines if ln.startswith("single token ")) == 4
    lanes = [ln for ln in lines if ln.startswith(("r0  ", "r1  "))]
    assert len(lanes) == 4 * 2 + 4 and all(len(ln) <= 60 for ln in lanes)
    assert any("▒" in ln for ln in lanes) and any("░" in ln for ln in lanes)
    assert any(ln.strip().startswith("E ") and ln.rstrip().endswith("G") for ln in lines)
    assert "is waiting for the other rank" in out and "TP, median of 4 profiled tokens" in out
    assert "trace: trace.json in the lab folder" in out

    assert main(["timeline", str(folder / "results.json"), "--mode", "tp", "--token", "2"]) == 0
    one = capsys.readouterr().out
    assert "TP token 2/4 (step 4)" in one and "TP token 1/4" not in one
    assert "single token" not in one


def test_the_profiled_median_is_said_beside_the_timed_figure_and_why_they_differ(tmp_path,
                                                                                 capsys):
    """A profiled TP token's median (the profiler on) is not the timed pass's per-token figure
    the strip shows: the text says which is which and why, at the record's rounding; --json
    carries the lab's record (each figure with its pass)."""
    from tplab.figures.lab_figures import LabFigures
    folder = _lab(tmp_path)
    results = json.loads((folder / "results.json").read_text())
    f = LabFigures.from_results(results)
    assert main(["timeline", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f.profiled_against_timed("tp") in out and f.profiled_against_timed("single") in out
    assert f"vs timed {f.tp_ms.text()} (mean)" in out
    assert f"vs timed {f.single_ms.text()} (mean)" in out
    assert main(["timeline", str(folder), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert LabFigures.from_dict(doc["figures"]) == f
    assert doc["figures"]["tp_ms"]["taken"] == "timed pass"


def test_a_lab_stopped_after_its_profiled_pass_is_read_from_its_stream(tmp_path, capsys):
    folder = _lab(tmp_path, results=False)
    assert main(["timeline", str(folder)]) == 0
    assert "TP token 4/4" in capsys.readouterr().out


def test_nothing_to_show_is_one_sentence_and_a_non_zero_exit(tmp_path, capsys):
    assert main(["timeline", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.startswith("tplab timeline: ")
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"schema": 1}))
    assert main(["timeline", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "holds no profiled pass" in err and "--profile-tokens 0" in err
    assert len(err.strip().splitlines()) == 1
    (folder / "results.json").write_text(json.dumps({"timeline": synthetic_timeline()}))
    assert main(["timeline", str(folder), "--token", "0"]) == 2


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    folder = _lab(tmp_path)
    # lanes 4000 columns wide: more than a pipe holds, so the writer meets the closed pipe
    done = subprocess.run(f"{sys.executable} -m tplab timeline {folder} --width 4000 | head -1",
                          shell=True, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("profiled pass:") and done.stdout.count("\n") == 1
