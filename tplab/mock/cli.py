"""Run the mock clouds as a process of their own: ``tplab mock-cloud`` / ``python -m tplab.mock``.

``--cloud runpod`` (the default) serves the RunPod mock, ``--cloud vast`` the Vast one
(tplab/mock/vast_mock), ``--cloud both`` both, each on its own loopback port. When ready it prints ONE
JSON line on stdout, ``{"provider", "api_url", "api_key", "state_dir", "pid"}`` (with ``both``:
RunPod's, plus ``"clouds": {"runpod": {...}, "vast": {...}}``), then serves until
SIGTERM/SIGINT (or, with ``--exit-with-parent``, until the parent process goes away), and on the
way out terminates every pod and destroys every instance (killing all their processes).

The account keys are ``$TPLAB_MOCK_API_KEY`` (RunPod) and ``$TPLAB_MOCK_VAST_API_KEY`` (Vast) if
set (never a command-line flag: argv is visible to every local user), else fresh random ones.
``--faults FILE`` and the fault flags are the RunPod mock's (faults.py); ``--vast-faults FILE``
the Vast mock's (vast_mock/faults.py). Pods' sandboxes live under ``--state-dir`` (default
``$TPLAB_HOME/mock/cloud``) in a new directory per run, removed at exit unless ``--keep-sandboxes``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tplab.mock.runpod_mock.faults import add_fault_arguments

    from tplab.home.paths import executable_arg
    from tplab.mock.clouds import NAMES

    parser.add_argument("--cloud", choices=(*NAMES, "both"), default=NAMES[0],
                        help="which mock cloud(s) to serve (default runpod)")
    parser.add_argument("--port", type=int, default=0,
                        help="API port on 127.0.0.1 (0: any free port; the ready line says which)")
    parser.add_argument("--vast-port", type=int, default=0,
                        help="the Vast mock's port with --cloud both (0: any free port)")
    parser.add_argument("--vast-faults", metavar="FILE",
                        help="JSON file of the Vast mock's fault switches "
                             "(tplab/mock/vast_mock/faults.py)")
    parser.add_argument("--balance", type=float, default=10.0, metavar="USD",
                        help="starting clientBalance in dollars (default 10)")
    parser.add_argument("--boot-delay", type=float, default=1.0, metavar="S",
                        help="seconds from create until runtime and SSH (default 1)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="where pods' sandboxes go (default $TPLAB_HOME/mock/cloud)")
    parser.add_argument("--keep-sandboxes", action="store_true",
                        help="leave pods' sandbox directories on disk at exit")
    parser.add_argument("--pod-python", metavar="PATH", type=executable_arg, default=None,
                        help="the Python the pods run their commands with (default: this one); "
                             "e.g. a venv with the images' torch")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="shut down (terminating all pods) when the parent process exits")
    add_fault_arguments(parser)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import signal
    import sys
    import time
    from pathlib import Path

    from tplab.mock.clouds import NAMES, mock_package

    served = list(NAMES) if args.cloud == "both" else [args.cloud]
    packages = {name: mock_package(name) for name in served}
    try:
        faults = {name: pkg.faults_from_args(args) for name, pkg in packages.items()}
    except (OSError, ValueError, TypeError) as exc:
        print(f"tplab mock-cloud: bad fault switches: {exc}", file=sys.stderr)
        return 2
    if args.pod_python:
        from tplab.mock import container

        if not os.access(args.pod_python, os.X_OK):
            print(f"tplab mock-cloud: --pod-python {args.pod_python} is not an executable file",
                  file=sys.stderr)
            return 2
        container.POD_PYTHON = args.pod_python
    servers_of = {name: pkg.server_type() for name, pkg in packages.items()}  # aiohttp, asyncssh
    if args.state_dir:
        base = Path(args.state_dir)
    else:
        from tplab.home.paths import tplab_home

        base = tplab_home(mock=True) / "cloud"
    state_dir = base / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    state_dir.mkdir(parents=True, exist_ok=True)
    keys = {name: os.environ.get(pkg.MOCK_KEY_VAR) or pkg.new_key()
            for name, pkg in packages.items()}
    parent = os.getppid()
    common = dict(balance_usd=args.balance, boot_delay_s=args.boot_delay, state_dir=state_dir,
                  keep_sandboxes=args.keep_sandboxes)

    async def serve() -> None:
        servers: list[Any] = []
        for name, pkg in packages.items():  # one cloud: on --port; several: each on its own flag
            port = getattr(args, pkg.PORT_ARG) if len(packages) > 1 else args.port
            servers.append(servers_of[name](api_key=keys[name], faults=faults[name], port=port,
                                            **common))
        try:
            for server in servers:
                await server.start()
        except BaseException:
            for server in servers:
                await server.stop()
            raise
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        ready = dict(servers[0].ready_info())
        if len(servers) > 1:
            ready["clouds"] = {s.provider: s.ready_info() for s in servers}
        sys.stdout.write(json.dumps(ready) + "\n")
        sys.stdout.flush()
        records = []
        if not args.exit_with_parent:  # started by hand (`tplab mock-cloud`): say so, so that
            # `tplab status --mock` and `tplab terminate --mock` with this TPLAB_HOME find it
            # (a lab's own mock is recorded by the lab that started it: tplab/mock/handle.py)
            from tplab.home import mock_clouds
            records = [mock_clouds.register(s.api_url, s.state.api_key, os.getpid(), s.provider)
                       for s in servers]
        try:
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), 0.5)
                except TimeoutError:
                    if args.exit_with_parent and os.getppid() != parent:
                        break
        finally:
            for server in servers:
                await server.stop()
            for record in records:
                mock_clouds.unregister(record)

    try:
        asyncio.run(serve())
    except OSError as exc:
        print(f"tplab mock-cloud: could not start: {exc}", file=sys.stderr)
        return 1
    return 0
