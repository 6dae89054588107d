"""Transport tests against a real asyncssh server on 127.0.0.1 (tests/lab/sshserver.py)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import asyncssh
import pytest

from tplab import remote
from tplab import event_tail
from tplab.event_tail import TailState
from tplab.remote import ConnectOptions, HostKeyMismatch, UploadItem

from .sshserver import SandboxServer


@pytest.fixture
async def server(tmp_path):
    key = remote.generate_client_key()
    root = tmp_path / "pod"
    root.mkdir()
    srv = SandboxServer(root, key)
    await srv.start()
    srv.client_key = key
    yield srv
    await srv.stop()


def _opts(srv, tmp_path, **kw) -> ConnectOptions:
    return ConnectOptions(host="127.0.0.1", port=srv.port, user="root", pod_id="pod-1",
                          known_hosts_dir=tmp_path / "known_hosts", **kw)


async def test_host_key_pinned_on_first_use_and_enforced(server, tmp_path):
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    conn.close()
    pin = tmp_path / "known_hosts" / "pod-1"
    assert pin.read_text().split()[1] == \
        server.host_key.export_public_key().decode().split()[1]
    # same pod, same key: fine
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    conn.close()
    # the pod now presents another host key: refused at once, no retry loop
    other = SandboxServer(server.root, server.client_key)
    await other.start()
    try:
        opts = _opts(other, tmp_path, timeout_s=30)
        t0 = asyncio.get_running_loop().time()
        with pytest.raises(HostKeyMismatch):
            await remote.connect(opts, server.client_key)
        assert asyncio.get_running_loop().time() - t0 < 5
    finally:
        await other.stop()


async def test_connect_retries_until_sshd_answers(tmp_path):
    key = remote.generate_client_key()
    root = tmp_path / "pod"
    root.mkdir()
    srv = SandboxServer(root, key)
    # pick a free port, start the server only after a delay
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    attempts = []

    async def late_start():
        await asyncio.sleep(1.0)
        await srv.start(port)

    task = asyncio.create_task(late_start())
    opts = ConnectOptions(host="127.0.0.1", port=port, user="root", pod_id="p",
                          known_hosts_dir=tmp_path / "kh", timeout_s=20)
    conn = await remote.connect(opts, key, on_attempt=lambda n, why: attempts.append(why))
    conn.close()
    await task
    await srv.stop()
    assert attempts, "the first attempts should have failed while sshd was down"


async def test_connect_gives_up_within_bound(tmp_path):
    key = remote.generate_client_key()
    opts = ConnectOptions(host="127.0.0.1", port=1, user="root", pod_id="p",
                          known_hosts_dir=tmp_path / "kh", timeout_s=1.5)
    with pytest.raises(remote.RemoteError, match="could not reach"):
        await remote.connect(opts, key)


async def test_keepalive_notices_a_silent_drop(server, tmp_path):
    opts = _opts(server, tmp_path, keepalive_interval=0.5, keepalive_count_max=1)
    conn = await remote.connect(opts, server.client_key)
    # freeze the server side: stop reading from the socket, so nothing answers
    for c in server.conns:
        c._transport.pause_reading()
    t0 = asyncio.get_running_loop().time()
    await asyncio.wait_for(conn.wait_closed(), 10)
    assert asyncio.get_running_loop().time() - t0 < 5


async def test_upload_only_the_bundle(server, tmp_path):
    ckpt = tmp_path / "ck.pt"
    ckpt.write_bytes(b"x" * 1000)
    pkg = Path(remote.__file__).parent
    items = remote.bundle_items(pkg, ["cloud"], [UploadItem(ckpt, "ck.pt")])
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    sent = await remote.upload(conn, items)
    conn.close()
    run = server.root / remote.REMOTE_DIR
    assert (run / "ck.pt").read_bytes() == b"x" * 1000
    assert (run / "tplab" / "events.py").is_file()
    assert (run / "tplab" / "cloud" / "base.py").is_file()
    assert not (run / "tplab" / "remote.py").exists()
    assert not list(run.rglob("__pycache__"))
    assert sent >= 1000


WRITER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, '.')
    from tplab.events import EventWriter
    n = int(sys.argv[1])
    with open('events.jsonl', 'a') as fh:
        w = EventWriter([fh])
        for i in range(n):
            w.emit('token', mode='tp', prompt=0, pos=i, ms=1.0, ar_ms=0.5, token=i)
            time.sleep(0.006)
""")


async def _start_writer(server, tmp_path, n: int) -> None:
    run = server.root / remote.REMOTE_DIR
    (run / "tplab").mkdir(parents=True, exist_ok=True)
    (run / "tplab" / "__init__.py").write_text("")
    (run / "tplab" / "events.py").write_text(
        (Path(remote.__file__).parent / "events.py").read_text())
    (run / "writer.py").write_text(WRITER)
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    cmd = (f"cd {remote.REMOTE_DIR} || exit 3; setsid nohup sh -c "
           f"'{sys.executable} writer.py {n}; echo $? > exit_code' >/dev/null 2>&1 </dev/null &")
    await conn.run(cmd, check=True)
    conn.close()


async def test_tail_resumes_after_drops_exactly_once(server, tmp_path):
    n = 600
    await _start_writer(server, tmp_path, n)
    state = TailState()
    seqs: list[int] = []
    drops = 0
    while not state.finished:
        conn = await remote.connect(_opts(server, tmp_path), server.client_key)
        try:
            async with conn.start_sftp_client() as sftp:
                async for batch in event_tail.tail_events(sftp, state):
                    seqs.extend(ev.seq for ev in batch)
                    if drops < 2 and len(seqs) > (drops + 1) * 150:
                        drops += 1
                        server.drop_all()
        except (asyncssh.Error, OSError):
            pass
        finally:
            conn.close()
    assert drops == 2
    assert seqs == list(range(n))
    assert state.exit_code == 0
    assert state.gaps == 0


async def test_tail_holds_a_partial_line(server, tmp_path):
    run = server.root / remote.REMOTE_DIR
    run.mkdir(parents=True)
    from tplab.events import EventWriter
    line = EventWriter(src="job").make("heartbeat").to_json()
    (run / "events.jsonl").write_text(line[:10])
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    state = TailState()
    got = []

    async def consume():
        async with conn.start_sftp_client() as sftp:
            async for batch in event_tail.tail_events(sftp, state, poll_s=0.02):
                got.extend(batch)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.3)
    assert got == []
    with open(run / "events.jsonl", "a") as fh:
        fh.write(line[10:] + "\n")
    await asyncio.sleep(0.3)
    (run / "exit_code").write_text("0\n")
    await asyncio.wait_for(task, 5)
    conn.close()
    assert [e.seq for e in got] == [0]


async def test_heartbeat_and_fetch(server, tmp_path):
    run = server.root / remote.REMOTE_DIR
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"ok": 1}))
    (run / "job.log").write_text("log\n")
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    async with conn.start_sftp_client() as sftp:
        await remote.touch_heartbeat(sftp)
    assert (run / "heartbeat").is_file()
    got = await remote.fetch(conn, tmp_path / "out")
    assert sorted(got.got) == ["job.log", "results.json"]
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == {"ok": 1}
    # the pod is untrusted: a log over its limit comes back as its last part, anything else
    # over its limit not at all
    (run / "job.log").write_text("x" * 5000 + "THE END\n")
    (run / "results.json").write_text(json.dumps({"pad": "y" * 5000}))
    got = await remote.fetch(conn, tmp_path / "capped", ["job.log", "results.json"],
                             limits={"job.log": 100, "results.json": 100})
    conn.close()
    assert got.got == [] and got.trimmed == ["job.log"] and got.refused == ["results.json"]
    log = (tmp_path / "capped" / "job.log").read_text()
    assert log.endswith("THE END\n") and "were not fetched" in log and len(log) < 200
    assert not (tmp_path / "capped" / "results.json").exists()


def test_launch_command_is_detached_and_sources_env():
    cmd = remote.launch_command(remote.LaunchSpec(nproc=2, job_args=["--out", "."],
                                                   python="/usr/bin/python3"))
    assert "TPLAB_RP_ENV_FILE:-/etc/rp_environment" in cmd
    assert cmd.count("setsid nohup") == 2
    assert "--nproc-per-node=2" in cmd and "tplab.job.watchdog" in cmd
    assert "> exit_code.tmp" in cmd


def test_finished_is_seen_even_when_a_heartbeat_follows_it_in_the_same_read() -> None:
    from tplab.events import EventWriter
    w = EventWriter(src="job")
    evs = [w.make("phase", name="results"), w.make("phase", name="finished"),
           w.make("heartbeat", phase="finished")]
    state = TailState()
    assert [e.seq for e in event_tail._accept(state, evs)] == [0, 1, 2]
    assert state.finished_seen_at is not None

    other = TailState()
    event_tail._accept(other, [EventWriter(src="job").make("phase", name="tp")])
    assert other.finished_seen_at is None
