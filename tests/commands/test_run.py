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
