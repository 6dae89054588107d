"""A mock pod's SSH port across a suspend (a Vast instance stopped and resumed): kept when it
can be, and a fresh one when another server was handed it meanwhile, never a failed boot."""

from __future__ import annotations

import asyncio
import socket

from tplab.mock.sshpod import PodSshServer


async def _serves(server: PodSshServer) -> bool:
    """An SSH server answers on the pod's port (its version banner)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port or 0)
    try:
        return (await asyncio.wait_for(reader.read(4), 5)).startswith(b"SSH-")
    finally:
        writer.close()


async def test_a_resumed_pod_keeps_its_port(tmp_path):
    server = PodSshServer("p1", tmp_path, {})
    port = server.reserve()
    await server.listen()
    await server.suspend()
    try:
        await server.listen()
        assert server.port == port and await _serves(server)
    finally:
        await server.close()


async def test_a_kept_port_taken_meanwhile_is_exchanged_for_a_fresh_one(tmp_path):
    server = PodSshServer("p2", tmp_path, {})
    server.reserve()
    await server.listen()
    await server.suspend()
    kept = server.port
    # what asyncio's servers do when they bind: SO_REUSEADDR, which Linux lets share a port
    # with a bound SO_REUSEADDR socket that does not listen (the suspended pod's)
    assert server._sock is not None
    server._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    other.bind(("127.0.0.1", kept or 0))
    other.listen()
    try:
        await server.listen()
        assert server.port != kept and await _serves(server)
    finally:
        other.close()
        await server.close()


async def test_listening_twice_serves_once(tmp_path):
    """A Vast instance stopped and resumed while its boot waits for sshd is asked to listen by
    the resume and by the boot: the second is a no-op, not EADDRINUSE."""
    server = PodSshServer("p3", tmp_path, {})
    port = server.reserve()
    try:
        await server.listen()
        await server.listen()
        assert server.port == port and await _serves(server)
    finally:
        await server.close()
