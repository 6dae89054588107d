"""``python -m tplab.mock``: the mock cloud as a process (what handle.py starts). See cli.py."""

from __future__ import annotations

import argparse
import sys

from tplab.mock.cli import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tplab.mock",
                                     description="Mock clouds (RunPod, Vast.ai) on 127.0.0.1.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
