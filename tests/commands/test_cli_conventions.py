"""A command line's conventions: ``NO_COLOR`` turns tplab's colours off on a terminal; shell
completion for bash and zsh is made from the parser itself; every command that prints figures
takes ``--json`` and then prints exactly one JSON document on stdout."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from tests.commands.test_timeline import _lab as _profiled_lab
from tplab.commands.main import COMMANDS, build_parser, main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_color_leaves_the_terminal_plot_without_an_escape(monkeypatch):
    """On a terminal `tplab scaling` draws its plot in colour; with NO_COLOR set, not one escape
    (an empty NO_COLOR is unset, as no-color.org says)."""
    def scaling() -> str:
        out = _Terminal()
        monkeypatch.setattr("sys.stdout", out)
        assert main(["scaling", "--profile", "cpu-gloo"]) == 0
        return out.getvalue()

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\x1b[" in scaling()
    monkeypatch.setenv("NO_COLOR", "")
    assert "\x1b[" in scaling()
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b" not in scaling()


def _bash_complete(script: str, line: str) -> list[str]:
    """What bash offers for ``line`` (completing its last word) with ``script`` loaded."""
    words = line.split(" ")
    probe = (f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); "
             f"COMP_CWORD={len(words) - 1}; COMP_LINE={line!r}; COMP_POINT={len(line)}; "
             "_shtab_tplab; printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completes_commands_flags_and_choices_from_the_parser(capsys):
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert _bash_complete(script, "tplab lo") == ["local"]
    assert set(_bash_complete(script, "tplab ")) >= set(COMMANDS)
    assert "--json" in _bash_complete(script, "tplab timeline --")
    assert _bash_complete(script, "tplab local --comm ") == ["gloo", "shm", "both"]
    assert "--profile-tokens" in _bash_complete(script, "tplab local --prof")


def test_zsh_gets_a_completion_function_naming_every_command(capsys):
    assert main(["completion", "zsh"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("#compdef tplab")
    assert all(f"{name}:" in script or f"'{name}'" in script or f'"{name}' in script
               for name in COMMANDS)
    assert "--json" in script and "_files -/" in script  # --out DIR completes folders
    with pytest.raises(SystemExit):
        main(["completion", "fish"])
    assert "invalid choice" in capsys.readouterr().err


def test_every_command_that_prints_figures_takes_json():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    figures = ("check", "run", "status", "budget", "handin", "local", "scaling", "timeline",
               "eval", "compile", "ddp")
    for name in figures:
        flags = {o for a in sub.choices[name]._actions for o in a.option_strings}
        assert "--json" in flags, name


def test_timeline_json_is_the_section_as_written_narrowed_as_asked(tmp_path, capsys):
    folder = _profiled_lab(tmp_path)
    assert main(["timeline", str(folder), "--json", "--mode", "tp", "--token", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    written = json.loads((folder / "results.json").read_text())["timeline"]
    assert list(doc["timeline"]["modes"]) == ["tp"]
    assert doc["timeline"]["modes"]["tp"]["tokens"] == written["modes"]["tp"]["tokens"][1:2]
    assert doc["timeline"]["sum_check"] == written["sum_check"]
    assert doc["source"].endswith("results.json") and doc["rank_traces"] == []


def test_scaling_json_is_the_summary_and_nothing_else(tmp_path, capsys):
    assert main(["scaling", "--profile", "cpu-gloo", "--json", "--out", str(tmp_path)]) == 0
    got = capsys.readouterr()
    doc = json.loads(got.out)
    assert doc == json.loads((tmp_path / "scaling.json").read_text())
    assert doc["profile"]["name"] == "cpu-gloo" and doc["predictions"]
    assert "wrote" in got.err


def _finished(path: Path, home_labs: Path | None = None) -> Path:
    from tests.handin.test_handin import _lab
    _lab(path, 1_800_000_000, "COMPLETE", mock=True)
    return path


def test_handin_json_lists_the_labs_and_what_it_wrote(tmp_path, capsys):
    from tplab.home.paths import tplab_home
    lab = _finished(tplab_home(True) / "labs" / "20261201-000000-aaaaaa")
    assert main(["handin", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["labs"]
    assert [(x["id"], x["status"], x["mock"], x["not_for_handin"]) for x in listed] == [
        (lab.name, "COMPLETE", True, None)]
    assert main(["handin", str(tmp_path / "student"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["lab"]["id"] == lab.name and doc["dest"] == str(tmp_path / "student")
    assert "experiments/35-tp-inference/manifest.json" in doc["written"]
    assert all((tmp_path / "student" / rel).is_file() for rel in doc["written"])
