"""One mock pod's SSH server: asyncssh with SFTP on a loopback port, like the sshd of a real pod.

Why a real SSH server: in mock mode tplab's own SSH code (connect, upload over SFTP, launch the
job detached, tail its events, fetch results) must run unchanged, so the pod speaks real SSH.

- A fresh ed25519 host key per pod; only the keys in the sandbox's ``.ssh/authorized_keys`` may
  log in (where the pod's start script put ``$PUBLIC_KEY``, or the Vast mock the instance's
  keys), read at every login as OpenSSH's sshd does (a key attached later works at once), public
  key auth only, any user name, as the root login of a RunPod or Vast image.
- SFTP is chrooted to the pod's sandbox directory; commands run as ``bash -c <command>`` with cwd
  and HOME in the sandbox. Use paths relative to the login directory: they mean the same on a
  real pod (``/root``) and here.
- A session's environment is the pod's own ``env`` (what sshd passes: on RunPod the container's
  variables), over the ``KEY=value`` lines of ``env_file`` when one is named, read at every
  login as sshd's pam_env reads ``/etc/environment`` (on Vast the container's variables reach
  an SSH session only through that file).
- Each session's bash is the leader of its own process group; when the client goes away the group
  gets SIGHUP, as under sshd, so ``nohup``/``setsid`` children survive and plain children don't.
- ``reserve()`` binds the port without listening, so connections are refused (the
  ``ssh_refuse_s`` fault, or the moment before sshd starts); ``listen()`` then serves on it.
  ``suspend()`` stops serving (drops every connection) but keeps the port bound and the host key,
  so a later ``listen()`` serves again on the same port (a Vast instance stopped and resumed),
  or on a fresh one when another server was handed the kept port meanwhile (``listen``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
import struct
from pathlib import Path
from typing import Any

import asyncssh

_OUTPUT_GRACE_S = 2.0  # after bash exits, how long to wait for its output pipes to reach EOF


class _PodServer(asyncssh.SSHServer):
    def __init__(self, owner: PodSshServer) -> None:
        self._owner = owner
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._owner.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._owner.connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        return True  # authentication required (public key only)

    def password_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return self._owner.is_authorized(key)

    def kbdint_auth_supported(self) -> bool:
        return False


class PodSshServer:
    """The SSH side of one mock pod. Create, ``reserve()``, later ``listen()``, finally ``close()``."""

    def __init__(self, pod_id: str, sandbox: Path, env: dict[str, str],
                 env_file: Path | None = None) -> None:
        self.pod_id = pod_id
        self.sandbox = sandbox
        self.env = dict(env)
        self.env_file = env_file
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.connections: set[asyncssh.SSHServerConnection] = set()
        self.roots: set[int] = set()  # pids of live session shells (process group leaders)
        self.port: int | None = None
        self._sock: socket.socket | None = None
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._sessions: set[asyncio.Task[Any]] = set()
        #: one of listen, suspend and close at a time: asyncssh takes the reserved socket over
        #: across awaits, and a suspend that closed it meanwhile left asyncssh a dead descriptor
        #: (EBADF: a Vast instance stopped while its boot started sshd)
        self._serving = asyncio.Lock()

    @property
    def host_key_openssh(self) -> str:
        return self.host_key.export_public_key().decode().strip()

    def reserve(self, port: int = 0) -> int:
        """Bind 127.0.0.1 on ``port`` (0: a free one) without listening: connections are
        refused for now. A fresh port is bound without SO_REUSEADDR: Linux lets two
        SO_REUSEADDR sockets that do not listen yet share a port, so another mock (or any
        server binding port 0: asyncio's servers set SO_REUSEADDR) could be handed this one and
        one of the two listens would fail (EADDRINUSE, seen with mocks side by side). A pod's
        own port is bound again after a suspend the same way, and only when that fails (a
        dropped connection of its own in TIME_WAIT) with SO_REUSEADDR, which reopens that
        window for as long as the pod is suspended."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if not port or exc.errno != errno.EADDRINUSE:
                sock.close()
                raise
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
        self._sock = sock
        self.port = sock.getsockname()[1]
        return self.port

    def is_authorized(self, key: asyncssh.SSHKey) -> bool:
        """Whether ``key`` is in the sandbox's authorized_keys now (read at every login)."""
        try:
            text = (self.sandbox / ".ssh" / "authorized_keys").read_text()
        except OSError:
            return False
        wanted = key.export_public_key("openssh").split()[:2]
        for line in text.splitlines():
            try:
                found = asyncssh.import_public_key(line.strip())
            except (ValueError, asyncssh.KeyImportError):
                continue
            if found.export_public_key("openssh").split()[:2] == wanted:
                return True
        return False

    async def listen(self) -> None:
        """Serve SSH on the reserved port. When a kept port was taken meanwhile (bound again
        with SO_REUSEADDR after a suspend, it can be handed to another server binding port 0),
        serve on a fresh one, as a resumed Vast instance may get new port mappings. Already
        serving: nothing to do (a Vast instance resumed while its boot still waited for sshd
        is asked twice, by the resume and by the boot)."""
        async with self._serving:
            if self._acceptor is not None:
                return
            if self._sock is None:
                self.reserve(self.port or 0)
            try:
                await self._listen()
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                if self._sock is not None:
                    self._sock.close()
                self.reserve(0)
                await self._listen()

    async def _listen(self) -> None:
        assert self._sock is not None
        sandbox = str(self.sandbox).encode()
        self._acceptor = await asyncssh.listen(
            sock=self._sock,
            server_factory=lambda: _PodServer(self),
            server_host_keys=[self.host_key],
            process_factory=self._session,
            sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=sandbox),
            allow_scp=True,
            encoding=None,
            agent_forwarding=False,
            allow_pty=True,
            x11_forwarding=False,
            line_editor=False,
        )
        self._sock = None  # owned by the acceptor now

    @property
    def listening(self) -> bool:
        return self._acceptor is not None

    async def suspend(self) -> None:
        """Stop serving and drop every connection, keeping the port (refusing) and host key."""
        async with self._serving:
            port = self.port
            await self._close()
            if port:
                self.reserve(port)

    async def close(self) -> None:
        """Stop accepting, drop every connection and free the port. The connections are reset
        (SO_LINGER 0) before the listener closes: closed gracefully, this side would keep each
        in TIME_WAIT and the port could not be bound again without SO_REUSEADDR."""
        async with self._serving:
            await self._close()

    async def _close(self) -> None:
        self._reset_connections()
        if self._acceptor is not None:
            self._acceptor.close()
            try:
                await asyncio.wait_for(self._acceptor.wait_closed(), 5)
            except TimeoutError:
                pass
            self._acceptor = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._reset_connections()  # any that came up while the listener closed
        self.connections.clear()
        for task in list(self._sessions):
            task.cancel()

    def _reset_connections(self) -> None:
        for conn in list(self.connections):
            sock = conn.get_extra_info("socket")
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.abort()

    def _session(self, process: asyncssh.SSHServerProcess) -> Any:
        task = asyncio.ensure_future(self._run(process))
        self._sessions.add(task)
        task.add_done_callback(self._sessions.discard)
        return task

    def _env_for(self, process: asyncssh.SSHServerProcess) -> dict[str, str]:
        env: dict[str, str] = {}
        for key, value in (process.env or {}).items():  # what the client sent (SendEnv)
            k = key.decode() if isinstance(key, bytes) else str(key)
            v = value.decode() if isinstance(value, bytes) else str(value)
            env[k] = v
        if self.env_file is not None:
            env.update(read_environment_file(self.env_file))
        env.update(self.env)  # the pod's own variables win
        return env

    async def _run(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command
        argv = ["bash", "-c", command] if command else ["bash"]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=str(self.sandbox),
                env=self._env_for(process), start_new_session=True)
        except OSError as exc:
            process.stderr.write(f"mock pod: cannot start bash: {exc}\n".encode())
            process.exit(127)
            return
        self.roots.add(proc.pid)
        pumps = [asyncio.ensure_future(_pump_out(proc.stdout, process.stdout)),
                 asyncio.ensure_future(_pump_out(proc.stderr, process.stderr))]
        feeder = asyncio.ensure_future(_pump_in(process.stdin, proc.stdin))
        closed = asyncio.ensure_future(process.wait_closed())
        waiter = asyncio.ensure_future(proc.wait())
        try:
            done, _ = await asyncio.wait({waiter, closed}, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:  # the client went away first: hang up, as sshd does
                _killpg(proc.pid, signal.SIGHUP)
                rc = await waiter
                return
            rc = waiter.result()
            await asyncio.wait(pumps, timeout=_OUTPUT_GRACE_S)
            if rc < 0:
                name = signal.Signals(-rc).name.removeprefix("SIG")
                process.exit_with_signal(name)
            else:
                process.exit(rc)
        except asyncio.CancelledError:
            _killpg(proc.pid, signal.SIGKILL)
            # reaped before the cancellation goes on: a child left unreaped keeps pipes whose
            # loop may be closed by the time they are collected
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({waiter}, timeout=_OUTPUT_GRACE_S)
            raise
        except (OSError, asyncssh.Error):
            pass
        finally:
            self.roots.discard(proc.pid)
            for task in (*pumps, feeder, closed, waiter):
                if not task.done():
                    task.cancel()


def read_environment_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines (``export`` and quotes allowed), as pam_env reads /etc/environment;
    {} when there is no such file."""
    import shlex

    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        name, sep, value = line.partition("=")
        if not sep or not name.isidentifier():
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        out[name] = words[0] if words else ""
    return out


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _pump_out(reader: asyncio.StreamReader | None, writer: Any) -> None:
    if reader is None:
        return
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return
        try:
            writer.write(chunk)
            await writer.drain()
        except (OSError, asyncssh.Error, BrokenPipeError):
            return


async def _pump_in(reader: Any, writer: asyncio.StreamWriter | None) -> None:
    if writer is None:
        return
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
    except (OSError, asyncssh.Error, BrokenPipeError, ConnectionResetError):
        pass
    finally:
        try:
            writer.close()
        except (OSError, RuntimeError):
            pass
