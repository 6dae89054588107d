"""`tplab run`: one lab, headless — its stages, a progress bar, a final table; `--json` for scripts.

Exit 0 only when the lab completed and its pod is verified gone (3: EDUCATIONAL_STUB, 4: stopped
by the user with the pod gone, 5: interrupted, 1: failed; 141, quietly, when the reader of its
output went away and the lab was stopped for it). Ctrl-C, SIGTERM, SIGHUP and SIGQUIT, and a
closed output pipe, stop the lab through terminate + verify gone; SIGKILL cannot be caught, which is
what the pod's guard and watchdog and `tplab status` are for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from tplab.commands import reader_gone
from tplab.lab.lab_config import STOPPED, LabConfig, exit_code  # no heavy module of tplab.lab

HELP = "run the TP lab headless (add --mock for the local mock cloud)"
DESCRIPTION = ("Run lab 02 end to end: authorize, create a spot pod, upload, run single vs TP "
               "decode, stream timings, fetch, terminate and verify gone, record spend, write the "
               "manifest. Exit 0 only when the lab completed and the pod is verified gone.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tplab.lab.options import add_lab_arguments
    add_lab_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the event stream as JSON lines (one event a line) instead")
    parser.add_argument("--verbose", action="store_true",
                        help="also show other libraries' log lines (a cloud SDK, asyncssh, "
                             "matplotlib) on stderr; without it tplab prints only its own lines")


def quiet_third_party_logs(verbose: bool = False) -> None:
    """Only tplab's own lines reach the terminal: other libraries log through ``logging`` (the
    RunPod SDK even installs an INFO handler on the root logger when imported, which is how
    matplotlib's "generated new fontManager" reached the output), and their Python warnings
    are routed there too. A handler on the root logger first makes the SDK's ``basicConfig``
    a no-op; ``--verbose`` makes it a stderr handler at INFO instead of a silent one."""
    import logging
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    if verbose:
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        root.setLevel(logging.INFO)
    else:
        handler = logging.NullHandler()
    root.addHandler(handler)
    logging.captureWarnings(True)


def main(args: argparse.Namespace) -> int:
    import asyncio
    from tplab.faces.startcheck import refusal
    from tplab.lab.options import config_from_args
    quiet_third_party_logs(args.verbose)
    config = config_from_args(args)
    refused = refusal(config)
    if refused:  # nothing exists yet: one sentence, no lab folder
        print(f"tplab: {refused}", file=sys.stderr)
        return 2
    if not config.mock and not args.yes:
        if not sys.stdin.isatty():
            print("tplab: a real lab spends real money; pass --yes to run it without a prompt "
                  "(or --mock for the local mock cloud). Nothing was created.", file=sys.stderr)
            return 2
        answer = input(f"This creates a real {config.gpus}x {config.gpu_type} pod and spends real "
                       "money (within the lab cap). Continue? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("tplab: nothing was created.", file=sys.stderr)
            return 1
    return asyncio.run(run_lab(config, as_json=args.json))


class _Output:
    """stdout for the lab's view: when the reader goes away (``| head``, a closed terminal) the
    output stops quietly and the lab is asked to stop; the lab itself never waits on it."""

    def __init__(self, out: TextIO, on_closed: Callable[[], None]) -> None:
        self.out = out
        self.closed = False
        self._on_closed = on_closed

    def write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.out.write(text)
        except (BrokenPipeError, OSError, ValueError):
            self._close()

    def flush(self) -> None:
        if self.closed:
            return
        try:
            self.out.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._close()

    def isatty(self) -> bool:
        try:
            return self.out.isatty()
        except (OSError, ValueError):
            return False

    def _close(self) -> None:
        self.closed = True
        reader_gone.silence(self.out)
        self._on_closed()


def _say(text: str) -> None:
    """A line on stderr that never raises (the terminal may be gone: SIGHUP)."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        reader_gone.silence(sys.stderr)


async def run_lab(config: LabConfig, as_json: bool = False, out: TextIO | None = None) -> int:
    from tplab.faces.headless import HeadlessView
    from tplab.faces.signals import StopOnSignals
    from tplab.lab.orchestrator import Lab
    lab = Lab(config)
    output = _Output(out or sys.stdout,
                     lambda: lab.request_terminate("the output pipe was closed"))
    signals = StopOnSignals(lab, _say).install()
    events = lab.subscribe()
    view = None
    if as_json:
        async def consume() -> None:
            async for ev in events:
                output.write(ev.to_json() + "\n")
            output.flush()
    else:
        view = HeadlessView(output)
        view.set_plan(config.num_prompts, config.new_tokens, config.gpus)

        async def consume() -> None:
            await view.consume(events)
    import asyncio
    consumer = asyncio.create_task(consume())
    try:
        outcome = await lab.run()
    finally:
        signals.uninstall()
    try:
        await consumer
    except Exception as exc:  # noqa: BLE001 - the view must not change the lab's exit
        _say(f"tplab: the output stopped early ({exc})")
    if view is not None:
        output.write("\n" + view.table(lab.summary()) + "\n")
        output.flush()
    if output.closed and outcome.status == STOPPED and not signals.count and \
            outcome.exit_code == exit_code(STOPPED, False):
        # the reader went (`| head`) and the lab was stopped for it, its pod verified gone:
        # nothing more to say, and the status of a program its reader left
        return reader_gone.EXIT_STATUS
    if outcome.exit_code != 0 and (as_json or not _same_terminal(output.out, sys.stderr)):
        _say(f"tplab: {outcome.status}: {outcome.reason}")  # the done line said it already
    return outcome.exit_code


def _same_terminal(a: TextIO, b: TextIO) -> bool:
    """Whether two streams write to the same terminal (then one line saying it is enough)."""
    import os
    try:
        if not (a.isatty() and b.isatty()):
            return False
        sa, sb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (sa.st_rdev, sa.st_ino) == (sb.st_rdev, sb.st_ino)
