"""The command line agrees with itself: every flag of every `tplab` command and of `tplab-tui`
has help text, and a flag name means one thing wherever it appears (same kind of value)."""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from tplab.commands.main import build_parser


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from tui.app import build_parser as tui_parser
    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    out = {f"tplab {name}": p for name, p in sub.choices.items()}
    out["tplab-tui"] = tui_parser()
    return out


def _kind(action: argparse.Action) -> str:
    """What kind of value a flag takes: a switch, a whole number, a number, or text/a path."""
    if action.nargs == 0:
        return "switch"
    t = action.type
    if t is int or getattr(t, "__name__", "").endswith("_int"):
        return "whole number"
    if t is float or getattr(t, "__name__", "").endswith("_float"):
        return "number"
    if t in (None, str, Path):
        return "text or path"
    return getattr(t, "__name__", repr(t))


def test_every_flag_has_help_text():
    missing = [f"{cmd} {', '.join(a.option_strings)}"
               for cmd, parser in _parsers().items() for a in parser._actions
               if a.option_strings and a.help in (None, "", argparse.SUPPRESS)
               and not isinstance(a, argparse._HelpAction)]
    assert missing == []


def test_one_meaning_per_flag_name():
    kinds: dict[str, set[str]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for cmd, parser in _parsers().items():
        for a in parser._actions:
            for flag in a.option_strings:
                if flag.startswith("--") and flag not in ("--help", "--version"):
                    kinds[flag].add(_kind(a))
                    where[flag].append(cmd)
    clashes = {f: (sorted(k), where[f]) for f, k in kinds.items() if len(k) > 1}
    assert clashes == {}
    # the ones that used to disagree
    assert kinds["--prompts"] == {"whole number"} and kinds["--prompts-file"] == {"text or path"}
    assert {"tplab local", "tplab run", "tplab-tui"} <= set(where["--prompts"])
    assert "tplab train" not in where["--out"]  # --out is a folder; train --save writes a file


def test_prompts_is_a_count_and_prompts_file_the_file_in_run_and_local():
    parsers = _parsers()
    for cmd in ("tplab run", "tplab local"):
        args = parsers[cmd].parse_args(["--prompts", "4", "--prompts-file", "p.txt", "--out", "o"]
                                       if cmd == "tplab local" else
                                       ["--prompts", "4", "--prompts-file", "p.txt"])
        assert args.num_prompts == 4 and str(args.prompts if cmd == "tplab local"
                                             else args.prompts_file) == "p.txt"
