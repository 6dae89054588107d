"""A mock pod's container: its start script (the stand-in for ``/start.sh``) and its main process.

Why modelled at all: on RunPod, what runs in a pod from its first second is the container's
command. RunPod's official images run ``/start.sh``, which installs ``$PUBLIC_KEY`` in
``~/.ssh/authorized_keys``, starts sshd, exports the ``RUNPOD_*`` variables (the pod id and a
pod-scoped API key) to ``/etc/rp_environment`` and keeps the container alive. REST v2's create
takes ``args``, a string passed to the container's entrypoint, which *replaces* that command: a
pod created with ``args`` gets sshd only if its command hands over to the start script
(``...; exec /start.sh``). A guard process that must run from the pod's first second lives there.

The mock does the same with a start script of each pod's own, written to ``<sandbox>/start.sh``
and named by ``$TPLAB_MOCK_START_SH`` in the pod's environment (so a command hands over with
``exec "${TPLAB_MOCK_START_SH:-/start.sh}"``, which reads the same on a real pod):

- without ``args`` the container's command is ``bash <sandbox>/start.sh``;
- with ``args`` it is ``bash -c "<args>"`` (its own process, killed on terminate like every
  process of the pod), and sshd comes up only if that command runs the start script.

The mock's sshd is an asyncssh server in the mock process, so "start sshd" in the script means:
create the file named by ``$TPLAB_MOCK_SSHD_FLAG``; the mock then serves SSH on the pod's port,
with the keys the script put in ``~/.ssh/authorized_keys``. The container's output goes to
``<sandbox>/container.log``; if its command exits, the pod is EXITED (the container ended).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

#: the Python the pods' commands run with (``--pod-python``); None: the mock's own
POD_PYTHON: str | None = None

START_SH = r"""#!/bin/bash
# tplab mock cloud: this pod's stand-in for /start.sh of RunPod's official images.
# It installs $PUBLIC_KEY, exports the RUNPOD_* variables to /etc/rp_environment (here
# $TPLAB_RP_ENV_FILE), starts sshd (here: asks the mock to, through $TPLAB_MOCK_SSHD_FLAG), and
# keeps the container alive.
umask 077
mkdir -p "$HOME/.ssh"
if [ -n "${PUBLIC_KEY:-}" ]; then
    printf '%s\n' "$PUBLIC_KEY" >> "$HOME/.ssh/authorized_keys"
fi
{
    for name in $(compgen -e); do
        case "$name" in
            RUNPOD_*|PUBLIC_KEY)
                value=${!name}
                printf "export %s='%s'\n" "$name" "${value//\'/\'\\\'\'}"
                ;;
        esac
    done
} > "$TPLAB_RP_ENV_FILE.tmp" && mv "$TPLAB_RP_ENV_FILE.tmp" "$TPLAB_RP_ENV_FILE"
: > "$TPLAB_MOCK_SSHD_FLAG"
echo "start.sh: sshd started, environment exported"
exec sleep infinity
"""


def write_start_script(sandbox: Path) -> Path:
    path = sandbox / "start.sh"
    path.write_text(START_SH)
    path.chmod(0o755)
    return path


def sshd_flag(sandbox: Path) -> Path:
    return sandbox / "run" / "sshd.started"


async def start_container(sandbox: Path, env: dict[str, str],
                          args: str) -> asyncio.subprocess.Process:
    """The container's main process: ``args`` under bash, else the start script."""
    (sandbox / "run").mkdir(exist_ok=True)
    start_sh = write_start_script(sandbox)
    argv = ["bash", "-c", args] if args.strip() else ["bash", str(start_sh)]
    log = open(sandbox / "container.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        return await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(sandbox),
            env=env, start_new_session=True)
    finally:
        log.close()


async def wait_for_sshd_request(sandbox: Path, proc: asyncio.subprocess.Process,
                                poll_s: float = 0.05) -> bool:
    """True once the start script asked for sshd; False if the container ended first."""
    flag = sshd_flag(sandbox)
    while True:
        if flag.exists():
            return True
        if proc.returncode is not None:
            return False
        try:
            await asyncio.wait_for(proc.wait(), poll_s)
        except TimeoutError:
            pass


async def end_all(marker: str, ssh: Any, container_pid: int | None) -> int:
    """End a pod or instance: close its sshd (``PodSshServer`` or None) and SIGKILL every one
    of its processes (marked ``marker``, or under its sessions or container); how many died."""
    from tplab.mock.procs import kill_pod_processes

    roots = set(ssh.roots) if ssh is not None else set()
    if container_pid:
        roots.add(container_pid)
    if ssh is not None:
        await ssh.close()
    return await asyncio.to_thread(kill_pod_processes, marker, roots)


def base_env(sandbox: Path) -> dict[str, str]:
    """What every command of a mock pod or instance starts with (a root login in the sandbox)."""
    import os
    import sys

    bindir = os.path.dirname(os.path.abspath(POD_PYTHON or sys.executable))
    return {"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(sandbox),
            "TMPDIR": str(sandbox / "tmp"), "LANG": "C.UTF-8", "SHELL": "/bin/bash",
            "USER": "root"}


def container_env(sandbox: Path) -> dict[str, str]:
    """The variables that tell a pod's commands where its start script and flag are."""
    return {"TPLAB_MOCK_START_SH": str(sandbox / "start.sh"),
            "TPLAB_MOCK_SSHD_FLAG": str(sshd_flag(sandbox)),
            "TPLAB_RP_ENV_FILE": str(sandbox / "etc" / "rp_environment")}
