"""A tiny asyncssh server on 127.0.0.1 for transport tests: runs commands with bash in a sandbox
directory and serves SFTP rooted there, and can drop every client connection on demand."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncssh


class SandboxServer:
    def __init__(self, root: Path, authorized: asyncssh.SSHKey) -> None:
        self.root = root
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self._authorized = authorized
        self._server: asyncssh.SSHAcceptor | None = None
        self.conns: list[asyncssh.SSHServerConnection] = []
        self.port = 0

    async def start(self, port: int = 0) -> None:
        outer = self

        class _Server(asyncssh.SSHServer):
            def connection_made(self, conn):
                outer.conns.append(conn)

            def connection_lost(self, exc):
                pass

            def begin_auth(self, username):
                return True

            def public_key_auth_supported(self):
                return True

            def validate_public_key(self, username, key):
                return key.public_data == outer._authorized.public_data

        async def handle(process: asyncssh.SSHServerProcess) -> None:
            proc = await asyncio.create_subprocess_exec(
                "bash", "-c", process.command or "", cwd=outer.root,
                env={**os.environ, "HOME": str(outer.root)},
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            await process.redirect(stdin=proc.stdin)

            async def pump(src: asyncio.StreamReader, dst: asyncssh.SSHWriter) -> None:
                while chunk := await src.read(65536):
                    dst.write(chunk.decode("utf-8", "replace"))

            # the output is forwarded to its end before the exit status: with redirect() for
            # stdout too, exit() could overtake the last bytes on a loaded machine (the client
            # then saw exit 0 and no output); bounded, in case a child the command left in the
            # background still holds the pipe
            pumps = asyncio.gather(pump(proc.stdout, process.stdout),
                                   pump(proc.stderr, process.stderr))
            code = await proc.wait()
            try:
                await asyncio.wait_for(pumps, 5)
            except TimeoutError:
                pass
            process.exit(code)

        self._server = await asyncssh.create_server(
            _Server, "127.0.0.1", port, server_host_keys=[self.host_key],
            process_factory=handle,
            sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(outer.root)),
            allow_scp=False)
        self.port = self._server.sockets[0].getsockname()[1]

    def drop_all(self) -> int:
        n = 0
        for conn in self.conns:
            try:
                conn.abort()
                n += 1
            except Exception:
                pass
        self.conns.clear()
        return n

    async def stop(self) -> None:
        self.drop_all()
        if self._server:
            self._server.close()
            await self._server.wait_closed()
