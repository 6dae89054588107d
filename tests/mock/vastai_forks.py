"""Vast's own CLI, one call after another, each in a fresh process that skips the imports.

A ``vastai`` process spends ~0.5 s starting Python and importing the CLI (aiohttp, the SDK, its
serverless client) before it sends one request; a test that walks an instance through its life
makes ~20 calls. So this module, run by ``.venv-vastai``'s Python with the environment the calls
get, imports the CLI exactly as its ``vastai`` script does (``vastai.cli.main`` and the command
modules ``main()`` imports) and then forks once per call: the child runs ``main()`` with the
call's arguments as ``sys.argv``, its stdin ``/dev/null`` and its stdout and stderr files of its
own, and exits with the status the interpreter would give ``main()``'s ``SystemExit`` (or 1 and
the traceback for any other exception). Every call starts from the same just-imported state, as
a new process does; nothing of one call (the parser ``main()`` builds, a session, a cache in
memory) reaches the next. What the CLI writes to disk (its key file, caches) is in the HOME the
server was started with, as for separate processes.

The protocol, one JSON line each way on stdin/stdout: ``{"argv": [...], "timeout_s": s}`` ->
``{"code": int, "out": str, "err": str, "timed_out": bool}``. A call that outlives its timeout
is killed (``timed_out``). The server ends when its stdin closes, killing a call still running.

Only the standard library and the CLI are imported here: it runs in the CLI's environment,
never in the tests' (``VastCLI`` in tests/mock/vast_helpers.py starts and talks to it).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import tempfile
import traceback

#: the command modules ``vastai.cli.main.main()`` imports, in its order (vastai 1.9.1)
COMMAND_MODULES = ("instances", "offers", "machines", "teams", "keys", "endpoints", "billing",
                   "storage", "auth", "misc", "deployments", "metrics", "benchmarks",
                   "price_increase", "repl", "update", "uninstall")


def _exit_status(code: object) -> int:
    """What the interpreter exits with for ``SystemExit(code)`` (printing a non-int code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _child(argv: list[str], out_path: str, err_path: str, script: str) -> None:
    """In the forked child: run the CLI's ``main()`` once, then exit without Python's teardown."""
    status = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(out_path, os.O_WRONLY | os.O_TRUNC)
        err = os.open(err_path, os.O_WRONLY | os.O_TRUNC)
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - the child's, to its exit
        sys.argv = [script, *argv]
        from vastai.cli.main import main
        try:
            main()
            status = 0
        except SystemExit as done:
            status = _exit_status(done.code)
        except BaseException:  # noqa: BLE001 - as the interpreter: the traceback, status 1
            traceback.print_exc()
            status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - the status is what counts now
                pass
        os._exit(status)


def _wait(pid: int, timeout_s: float) -> tuple[int, bool]:
    """(exit status, timed out): the child's, killing it once ``timeout_s`` has passed."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
        timed_out = not ready
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        _, raw = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return (os.waitstatus_to_exitcode(raw), timed_out)


def serve(script: str) -> int:
    sys.argv = [script]  # the parser takes its name from it when it is built, at import
    import importlib

    # the imports a call would pay, paid once, in the CLI's order: the script's, then the command
    # modules main() imports (each registers its commands on the parser, in this order)
    for name in ("vastai.cli.main", *(f"vastai.cli.commands.{c}" for c in COMMAND_MODULES)):
        importlib.import_module(name)

    work = tempfile.mkdtemp(prefix="vastai-forks-")
    out_path, err_path = os.path.join(work, "out"), os.path.join(work, "err")
    for path in (out_path, err_path):
        open(path, "w").close()
    replies = sys.stdout
    try:
        for line in sys.stdin:
            call = json.loads(line)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(call["argv"], out_path, err_path, script)
            code, timed_out = _wait(pid, float(call["timeout_s"]))
            with open(out_path, encoding="utf-8", errors="replace") as fh:
                out = fh.read()
            with open(err_path, encoding="utf-8", errors="replace") as fh:
                err = fh.read()
            replies.write(json.dumps({"code": code, "out": out, "err": err,
                                      "timed_out": timed_out}) + "\n")
            replies.flush()
    finally:
        for path in (out_path, err_path):
            os.unlink(path)
        os.rmdir(work)
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
