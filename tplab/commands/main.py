"""`tplab`: the headless command line.

Each subcommand lives in ``tplab/commands/<name>.py`` and exposes ``HELP`` (one line),
``add_arguments(parser)`` and ``main(args) -> int``. Command modules import only the standard
library at module level (heavy imports such as torch or a cloud SDK go inside ``main``), so
``tplab --help`` stays fast. This file holds no lab logic.
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType
import sys
from typing import Sequence

from tplab import __version__

#: subcommand name -> module under tplab.commands (order is the order shown in --help)
COMMANDS: dict[str, str] = {
    "check": "check",
    "run": "run",
    "status": "status",
    "terminate": "terminate",
    "budget": "budget",
    "handin": "handin",
    "local": "local",
    "scaling": "scaling",
    "timeline": "timeline",
    "generate": "generate",
    "eval": "eval_",
    "train": "train",
    "compile": "compile_",
    "ddp": "ddp",
    "mock-cloud": "mock_cloud",
    "completion": "completion",
}


def _load(module: str) -> ModuleType:
    return importlib.import_module(f"tplab.commands.{module}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tplab",
        description="Tensor-parallel inference lab on rented GPUs under a hard dollar cap.")
    parser.add_argument("--version", action="version", version=f"tplab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        try:
            mod = _load(module)
        except ModuleNotFoundError as exc:
            if exc.name != f"tplab.commands.{module}":
                raise
            continue  # not built yet
        p = sub.add_parser(name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:  # its reader went away (`| head -1`), from --help to the last line
        from tplab.commands import reader_gone
        if not reader_gone.stdout_is_gone():
            raise  # another pipe than the reader's: a real error
        return reader_gone.end_quietly()


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    try:
        code = int(args._main(args) or 0)
        sys.stdout.flush()  # here, not at the interpreter's exit, where a reader gone is noise
        return code
    except KeyboardInterrupt:
        print("tplab: interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
