"""`tplab completion bash|zsh`: the shell's tab completion for tplab, made from its own parser.

Why generated: a hand-written completion script falls behind the first flag added. shtab reads
the parser that `tplab` itself parses with (``main.build_parser``) and writes the shell's script,
so every subcommand, flag and choice completes as it is; a flag whose value is a folder or a
file (its metavar says DIR, PATH, FILE, …) completes paths of that kind. Standard library only at
module level.
"""

from __future__ import annotations

import argparse
import sys

HELP = "print the shell's tab completion for tplab (bash or zsh), made from tplab's own parser"
DESCRIPTION = (
    "Print a completion script for tplab, generated from its parser (shtab), so every command, "
    "flag and choice completes. bash: `tplab completion bash > "
    "~/.local/share/bash-completion/completions/tplab` (or `source <(tplab completion bash)` in "
    "~/.bashrc); zsh: `tplab completion zsh > \"${fpath[1]}/_tplab\"`, then start a new shell.")

SHELLS = ("bash", "zsh")
#: a flag's metavar -> what its value completes to
DIR_METAVARS = frozenset({"DIR", "LAB_DIR", "OUT"})
FILE_METAVARS = frozenset({"PATH", "FILE", "RESULTS_JSON", "KEYFILE"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def _mark_paths(parser: argparse.ArgumentParser, shtab_dir: dict, shtab_file: dict) -> None:
    """Flags and arguments whose values are folders or files complete as such."""
    for action in parser._actions:
        meta = action.metavar if isinstance(action.metavar, str) else None
        if meta in DIR_METAVARS:
            action.complete = shtab_dir  # type: ignore[attr-defined]
        elif meta in FILE_METAVARS:
            action.complete = shtab_file  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _mark_paths(sub, shtab_dir, shtab_file)


def script(shell: str) -> str:
    """The completion script for ``shell``."""
    import shtab

    from tplab.commands.main import build_parser

    parser = build_parser()
    _mark_paths(parser, shtab.DIRECTORY, shtab.FILE)
    return str(shtab.complete(parser, shell=shell))


def main(args: argparse.Namespace) -> int:
    sys.stdout.write(script(args.shell))
    return 0
