"""`--json` as every command that prints figures offers it: one JSON object on stdout.

Why one helper: a script reads a command's figures by parsing its stdout, so with ``--json`` that
stream holds exactly one JSON document (what a person reads goes to stderr or is left out), and
every command says so in the same words. The documents carry the figures as their owners made
them (the manifest, results.json's sections, the summary), never a second rendering. Standard
library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

HELP = "print the figures as one JSON object on stdout (progress and notes go to stderr)"


def add_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help=HELP)


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def emit(doc: Any, out: TextIO | None = None) -> None:
    """``doc`` as one JSON document (indented, a newline after it) on stdout."""
    stream = out or sys.stdout
    stream.write(json.dumps(doc, indent=2, ensure_ascii=False, default=_plain) + "\n")
    stream.flush()


def say(as_json: bool) -> Any:
    """``print`` for what a person reads: on stderr when stdout carries the JSON."""
    if not as_json:
        return print

    def to_stderr(*args: Any, **kw: Any) -> None:
        kw["file"] = sys.stderr
        print(*args, **kw)
    return to_stderr
