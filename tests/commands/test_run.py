"""`tplab run`'s output is tplab's alone, and a start that cannot work is refused in one
sentence, before any lab folder exists."""

from __future__ import annotations

import io
import subprocess
import sys

from tplab.commands.main import main
from tplab.records.events import EventWriter
from tplab.faces.headless import HeadlessView

_LOGS = r"""
import logging, sys, warnings
from tplab.commands.run import quiet_third_party_logs
quiet_third_party_logs(verbose=sys.argv[1] == "verbose")
# what the runpod SDK does when imported, then what matplotlib logs when it builds its font cache
logging.basicConfig(level=logging.INFO, handlers=[logging.StreamHandler()])
logging.getLogger("matplotlib.font_manager").info("generated new fontManager")
warnings.warn("a third-party warning")
print("tplab's own line")
"""


def _run_logs(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _LOGS, mode], capture_output=True, text=True,
                          timeout=60)


def test_other_libraries_log_lines_are_shown_only_with_verbose():
    quiet = _run_logs("quiet")
    assert quiet.returncode == 0 and quiet.stdout == "tplab's own line\n" and quiet.stderr == ""
    loud = _run_logs("verbose")
    assert "generated new fontManager" in loud.stderr and "a third-party warning" in loud.stderr


def test_with_no_key_at_all_run_status_and_check_name_both_clouds_keys_vast_first(
        tmp_path, monkeypatch, capsys):
    """A first run, no key anywhere: each command names both clouds' keys, Vast.ai's first
    (its GPUs are the interruptible ones a default lab needs), and never says "no spot"."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.runpod/config.toml, no vastai key file
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for var in ("RUNPOD_API_KEY", "VAST_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert main(["run", "--yes"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert 0 <= err.index("VAST_API_KEY") < err.index("RUNPOD_API_KEY"), err
    home = tmp_path / "tplab-home"
    assert not (home / "labs").exists() or list((home / "labs").iterdir()) == []
    assert main(["status"]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and 0 <= err.index("VAST_API_KEY") < err.index("RUNPOD_API_KEY")
    assert main(["check"]) == 1
    out, err = capsys.readouterr()
    assert 0 <= out.index("VAST_API_KEY") < out.index("RUNPOD_API_KEY"), out
    assert "Side by side: Vast.ai: no usable API key" in out
    for said in (out, err):
        assert "no spot" not in said.lower(), said


def test_a_budget_that_fails_preflight_refuses_before_the_mock_cloud_starts(tmp_path, capsys):
    home = tmp_path / "tplab-home"
    (home / "mock").mkdir(parents=True)
    (home / "mock" / "budget.toml").write_text("phase_cap_usd = 1.0\nlab_cap_usd = 1.0\n")
    assert main(["run", "--mock"]) == 2
    err = capsys.readouterr().err
    assert "Budget pre-flight would fail" in err and "$1.50 needed" in err
    assert not (home / "mock" / "labs").exists()
    assert not (home / "mock" / "clouds").exists() or not list((home / "mock" / "clouds").iterdir())


def test_the_failure_reason_is_printed_once():
    out = io.StringIO()
    view = HeadlessView(out, tty=False)
    reason = "pods of earlier labs are still alive (x1)"
    view.handle(EventWriter(src="lab").make("phase", name="done", status="FAILED",
                                            reason=reason))
    out.write(view.table({"status": "FAILED", "reason": reason, "pod_id": None,
                          "actual_cost_usd": None, "job_events": 0}))
    assert out.getvalue().count(reason) == 1


def _no_mock_lab(home) -> bool:
    return not (home / "mock" / "labs").exists() and not (home / "mock" / "ledger.jsonl").exists()


def test_inputs_the_job_would_refuse_on_the_pod_are_refused_before_anything_exists(
        tmp_path, capsys):
    """One GPU, a latin-1 prompts file, a binary one: each a sentence with what to do, exit 2,
    no lab folder, no ledger line, no mock cloud (the job would have failed on a rented pod)."""
    home = tmp_path / "tplab-home"
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("el caf\xe9 goed\n".encode("latin-1"))
    binary = tmp_path / "binary.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    undecodable = tmp_path / "noise.bin"  # no NUL byte, still not UTF-8
    undecodable.write_bytes(bytes(range(128, 256)) * 4)
    cases = {("--gpus", "1"): "--gpus 1: tensor parallelism needs at least 2 GPUs",
             ("--prompts-file", str(latin1)): f"{latin1} is not UTF-8 text (byte 0xe9 on line 1)",
             ("--prompts-file", str(binary)): f"{binary} is not a text file",
             ("--prompts-file", str(undecodable)): f"{undecodable} is not UTF-8 text"}
    for args, sentence in cases.items():
        assert main(["run", "--mock", *args]) == 2, args
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, err
        assert sentence in err and err.rstrip().endswith("Nothing was created."), err
        assert _no_mock_lab(home), args
        if args[0] == "--prompts-file":  # `tplab local` reads it as the job would, first
            assert main(["local", *args, "--out", str(tmp_path / "local")]) == 2
            err = capsys.readouterr().err
            assert sentence in err and not (tmp_path / "local").exists(), err


def test_caps_that_do_not_fit_are_told_by_the_flag_they_came_from(tmp_path, capsys):
    """`--lab-cap 10` is a flag: the advice names the flag, not budget.toml's keys."""
    assert main(["run", "--mock", "--lab-cap", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lab_cap_usd" not in err, err
    assert ("--lab-cap $10.00 is above the phase cap $5.00 (the default): one lab may not "
            "authorize more than the whole phase; pass --lab-cap $5.00 or less.") in err
    home = tmp_path / "tplab-home"
    (home / "mock").mkdir(parents=True, exist_ok=True)
    (home / "budget.toml").write_text("lab_cap_usd = 4.5\n")
    assert main(["run", "--mock", "--phase-cap", "4"]) == 2
    err = capsys.readouterr().err
    assert (f"the lab cap $4.50 (lab_cap_usd in {home / 'budget.toml'}) is above --phase-cap "
            "$4.00") in err and "pass --phase-cap $4.50 or more." in err
