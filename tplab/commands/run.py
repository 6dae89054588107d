"""`tplab run`: one lab, headless — phases, a progress bar, a final table; `--json` for scripts.

Exit 0 only when the lab completed and its pod is verified gone. Ctrl-C and SIGTERM stop the
lab through terminate + verify gone (a non-zero exit); SIGKILL cannot be caught, which is what
the pod's watchdog and `tplab status` are for.
"""

from __future__ import annotations

import argparse
import sys

HELP = "run the TP lab headless (add --mock for the local mock cloud)"
DESCRIPTION = ("Run lab 02 end to end: authorize, create a spot pod, upload, run single vs TP "
               "decode, stream timings, fetch, terminate and verify gone, record spend, write the "
               "manifest. Exit 0 only when the lab completed and the pod is verified gone.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tplab.lab.options import add_lab_arguments
    add_lab_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the event stream as JSON lines (one event a line) instead")


def main(args: argparse.Namespace) -> int:
    import asyncio
    from tplab.lab.options import config_from_args
    config = config_from_args(args)
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


async def run_lab(config, as_json: bool = False, out=None) -> int:
    import asyncio
    import signal
    from tplab.lab.faces.headless import HeadlessView
    from tplab.lab.orchestrator import Lab
    out = out or sys.stdout
    lab = Lab(config)
    loop = asyncio.get_running_loop()
    seen: list[str] = []

    def on_signal(name: str) -> None:
        if seen:
            print(f"\ntplab: {name} again — still terminating the pod; wait for `done`.",
                  file=sys.stderr)
        seen.append(name)
        lab.request_terminate(name)

    for sig, name in ((signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")):
        try:
            loop.add_signal_handler(sig, on_signal, name)
        except (NotImplementedError, RuntimeError):
            pass
    events = lab.subscribe()
    view = None
    if as_json:
        async def consume() -> None:
            async for ev in events:
                out.write(ev.to_json() + "\n")
            out.flush()
    else:
        view = HeadlessView(out)
        view.set_plan(config.num_prompts, config.new_tokens, config.gpus)

        async def consume() -> None:
            await view.consume(events)
    consumer = asyncio.create_task(consume())
    try:
        outcome = await lab.run()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
    await consumer
    if view is not None:
        out.write("\n" + view.table(lab.summary()) + "\n")
        out.flush()
    if outcome.exit_code != 0:
        print(f"tplab: {outcome.status}: {outcome.reason}", file=sys.stderr)
    return outcome.exit_code
