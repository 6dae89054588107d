"""Run the mock cloud as a process of its own: ``tplab mock-cloud`` / ``python -m tplab.mock``.

When ready it prints ONE JSON line on stdout, ``{"api_url", "api_key", "state_dir", "pid"}``, then serves until SIGTERM/SIGINT (or, with ``--exit-with-parent``, until the parent
process goes away), and on the way out terminates every pod (killing all their processes).

The account key is ``$TPLAB_MOCK_API_KEY`` if set (never a command-line flag: argv is visible to
every local user), else a fresh random one. Pods' sandboxes live under ``--state-dir`` (default
``$TPLAB_HOME/mock/cloud``) in a new directory per run, removed at exit unless ``--keep-sandboxes``.
"""

from __future__ import annotations

import argparse
import os


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tplab.mock.faults import add_fault_arguments

    parser.add_argument("--port", type=int, default=0,
                        help="API port on 127.0.0.1 (0: any free port; the ready line says which)")
    parser.add_argument("--balance", type=float, default=10.0, metavar="USD",
                        help="starting clientBalance in dollars (default 10)")
    parser.add_argument("--boot-delay", type=float, default=1.0, metavar="S",
                        help="seconds from create until runtime and SSH (default 1)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="where pods' sandboxes go (default $TPLAB_HOME/mock/cloud)")
    parser.add_argument("--keep-sandboxes", action="store_true",
                        help="leave pods' sandbox directories on disk at exit")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="shut down (terminating all pods) when the parent process exits")
    add_fault_arguments(parser)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import secrets
    import signal
    import sys
    import time
    from pathlib import Path

    from tplab.mock.faults import faults_from_args

    try:
        faults = faults_from_args(args)
    except (OSError, ValueError) as exc:
        print(f"tplab mock-cloud: bad fault switches: {exc}", file=sys.stderr)
        return 2
    from tplab.mock.server import MockCloudServer  # aiohttp, asyncssh, graphql: after the checks
    if args.state_dir:
        base = Path(args.state_dir)
    else:
        from tplab.home.paths import tplab_home

        base = tplab_home(mock=True) / "cloud"
    state_dir = base / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    state_dir.mkdir(parents=True, exist_ok=True)
    api_key = os.environ.get("TPLAB_MOCK_API_KEY") or "rpa_mock_" + secrets.token_hex(20)
    parent = os.getppid()

    async def serve() -> None:
        server = MockCloudServer(api_key=api_key, balance_usd=args.balance, faults=faults,
                                 boot_delay_s=args.boot_delay, state_dir=state_dir,
                                 port=args.port, keep_sandboxes=args.keep_sandboxes)
        await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        sys.stdout.write(server.ready_line() + "\n")
        sys.stdout.flush()
        try:
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), 0.5)
                except TimeoutError:
                    if args.exit_with_parent and os.getppid() != parent:
                        break
        finally:
            await server.stop()

    try:
        asyncio.run(serve())
    except OSError as exc:
        print(f"tplab mock-cloud: could not start: {exc}", file=sys.stderr)
        return 1
    return 0
