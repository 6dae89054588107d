"""Transport tests against two real SSH servers on 127.0.0.1: asyncssh's (tests/lab/sshserver.py,
what the mock's pods run) and OpenSSH's sshd (tests/lab/openssh.py, what RunPod's images run).
Each test that takes ``server`` runs against both."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import time
from pathlib import Path

import asyncssh
import pytest

from tplab.wire import remote
from tplab.wire import event_tail
from tplab.wire.event_tail import TailState
from tplab.wire.remote import ConnectOptions, HostKeyMismatch, UploadItem

from .openssh import LoginUser, OpenSSHServer, kill_processes_in
from .sshserver import SandboxServer

# One xdist worker runs the suite's waiting tests (deadlines, paced writers, bounds) one after
# another while the other workers keep the cores busy; tests/conftest.py starts them first.
pytestmark = pytest.mark.xdist_group("waits")


@pytest.fixture(scope="session")
def ssh_user():
    user = LoginUser()
    yield user
    user.remove()


def _make_server(kind: str, request, tmp_path: Path, key, host_key=None):
    if kind == "openssh":
        user = request.getfixturevalue("ssh_user")
        user.clean()
        srv = OpenSSHServer(user, key, host_key)
        srv.python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
        return srv
    root = tmp_path / "pod"
    root.mkdir(exist_ok=True)
    srv = SandboxServer(root, key)
    if host_key is not None:
        srv.host_key = host_key
    srv.user = "root"
    srv.own = lambda path: None
    srv.python = sys.executable
    return srv


@pytest.fixture(params=["asyncssh", "openssh"])
async def server(request, tmp_path):
    key = remote.generate_client_key()
    srv = _make_server(request.param, request, tmp_path, key)
    srv.kind = request.param
    await srv.start()
    srv.client_key = key
    yield srv
    kill_processes_in(srv.root)
    await srv.stop()


def _opts(srv, tmp_path, **kw) -> ConnectOptions:
    return ConnectOptions(host="127.0.0.1", port=srv.port, user=srv.user, pod_id="pod-1",
                          known_hosts_dir=tmp_path / "known_hosts", **kw)


async def test_host_key_pinned_on_first_use_and_enforced(server, tmp_path, request):
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    conn.close()
    pin = tmp_path / "known_hosts" / "pod-1"
    assert pin.read_text().split()[1] == \
        server.host_key.export_public_key().decode().split()[1]
    # same pod, same key: fine
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    conn.close()
    # the pod now presents another host key: refused at once, no retry loop
    await server.stop()
    other = _make_server(server.kind, request, tmp_path, server.client_key)
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

    async def late_start():  # after the first attempt and its first retry (0.2 s) have failed
        await asyncio.sleep(0.3)
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
                          known_hosts_dir=tmp_path / "kh", timeout_s=0.5)  # two attempts
    with pytest.raises(remote.RemoteError, match="could not reach"):
        await remote.connect(opts, key)


@pytest.fixture
async def sandbox(tmp_path):
    """The asyncssh server alone (for what reaches into its transport)."""
    key = remote.generate_client_key()
    srv = _make_server("asyncssh", None, tmp_path, key)
    await srv.start()
    srv.client_key = key
    yield srv
    await srv.stop()


async def test_keepalive_notices_a_silent_drop(sandbox, tmp_path):
    server = sandbox
    opts = _opts(server, tmp_path, keepalive_interval=0.2, keepalive_count_max=1)
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
    items = remote.bundle_items(pkg.parent, ["records", "cloud"], [UploadItem(ckpt, "ck.pt")])
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    sent = await remote.upload(conn, items)
    conn.close()
    run = server.root / remote.REMOTE_DIR
    assert (run / "ck.pt").read_bytes() == b"x" * 1000
    assert (run / "tplab" / "records" / "events.py").is_file()
    assert (run / "tplab" / "cloud" / "base.py").is_file()
    assert not (run / "tplab" / "wire").exists()
    assert not list(run.rglob("__pycache__"))
    assert sent >= 1000


WRITER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, '.')
    from tplab.records.events import EventWriter
    n = int(sys.argv[1])
    with open('events.jsonl', 'a') as fh:
        w = EventWriter([fh])
        for i in range(n):
            w.emit('token', mode='tp', prompt=0, pos=i, ms=1.0, ar_ms=0.5, token=i)
            time.sleep(0.004)
""")


async def _start_writer(server, tmp_path, n: int) -> None:
    run = server.root / remote.REMOTE_DIR
    src = Path(remote.__file__).parent.parent
    (run / "tplab").mkdir(parents=True, exist_ok=True)
    (run / "tplab" / "__init__.py").write_text("")
    for package in ("records", "stats"):  # the event records and what they import, as a pod has
        (run / "tplab" / package).mkdir(exist_ok=True)
        for module in (src / package).glob("*.py"):
            (run / "tplab" / package / module.name).write_text(module.read_text())
    (run / "writer.py").write_text(WRITER)
    server.own(run)
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    cmd = (f"cd {remote.REMOTE_DIR} || exit 3; setsid nohup sh -c "
           f"'{server.python} writer.py {n}; echo $? > exit_code' >/dev/null 2>&1 </dev/null &")
    await conn.run(cmd, check=True)
    conn.close()


async def _tail_dropping(server, tmp_path, drop_after: tuple[int, ...]):
    """Tail the run's events to the end, reconnecting after each drop: every connection to the
    server is dropped once the tail has read more than each count of ``drop_after``. Returns the
    tail's state, the seqs read, what each drop closed, and the last connection (still open:
    the caller closes it)."""
    state = TailState()
    seqs: list[int] = []
    drops: list[int] = []
    while True:
        conn = await remote.connect(_opts(server, tmp_path), server.client_key)
        try:
            async with conn.start_sftp_client() as sftp:
                async for batch in event_tail.tail_events(sftp, state):
                    seqs.extend(ev.seq for ev in batch)
                    if len(drops) < len(drop_after) and len(seqs) > drop_after[len(drops)]:
                        drops.append(server.drop_all())
        except (asyncssh.Error, OSError):
            pass
        if state.finished:
            return state, seqs, drops, conn
        conn.close()


async def test_tail_resumes_after_drops_exactly_once(server, tmp_path):
    n = 120  # ~0.5 s of writing; the drops come a quarter and half way through the events
    await _start_writer(server, tmp_path, n)
    state, seqs, drops, conn = await _tail_dropping(server, tmp_path, drop_after=(30, 60))
    conn.close()
    assert len(drops) == 2
    assert seqs == list(range(n))
    assert state.exit_code == 0
    assert state.gaps == 0 and state.duplicates == 0  # resumed at its byte, not re-read


async def test_tail_holds_a_partial_line(server, tmp_path):
    run = server.root / remote.REMOTE_DIR
    run.mkdir(parents=True)
    from tplab.records.events import EventWriter
    line = EventWriter(src="job").make("heartbeat").to_json()
    (run / "events.jsonl").write_text(line[:10])
    server.own(run)
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    state = TailState()
    got = []

    async def consume():
        async with conn.start_sftp_client() as sftp:
            async for batch in event_tail.tail_events(sftp, state, poll_s=0.02):
                got.extend(batch)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.15)   # ~7 polls of the partial line
    assert got == []
    with open(run / "events.jsonl", "a") as fh:
        fh.write(line[10:] + "\n")
    await asyncio.sleep(0.15)
    (run / "exit_code").write_text("0\n")
    await asyncio.wait_for(task, 5)
    conn.close()
    assert [e.seq for e in got] == [0]


async def test_heartbeat_and_fetch(server, tmp_path):
    run = server.root / remote.REMOTE_DIR
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"ok": 1}))
    (run / "job.log").write_text("log\n")
    server.own(run)
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


async def test_each_ranks_trace_comes_back_only_as_what_it_should_be(server, tmp_path,
                                                                     monkeypatch):
    """Each rank's own trace comes back from traces/ (and traces/single/); the pod is
    untrusted: only files named as a rank's trace, plain files (no link out of the run), gzip,
    within their limit."""
    from tplab.records import rank_traces

    run = server.root / remote.REMOTE_DIR
    (run / "traces" / "single").mkdir(parents=True)
    gz = rank_traces.compress(b'{"traceEvents": []}')
    for rel in ("traces/rank0.pt.trace.json.gz", "traces/rank1.pt.trace.json.gz",
                "traces/single/rank0.pt.trace.json.gz"):
        (run / rel).write_bytes(gz)
    (run / "traces" / "rank2.pt.trace.json.gz").write_bytes(b"not gzip")
    (run / "traces" / "rank3.pt.trace.json.gz").write_bytes(gz + b"x" * 200)
    (run / "traces" / "notes.txt").write_bytes(gz)
    secret = tmp_path / "secret"
    secret.write_bytes(gz)
    (run / "traces" / "rank4.pt.trace.json.gz").symlink_to(secret)
    server.own(run)
    monkeypatch.setattr(rank_traces, "FETCH_LIMIT", len(gz) + 100)
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    got = await remote.fetch(conn, tmp_path / "out", names=[], folders=remote.FETCH_FOLDERS)
    conn.close()
    assert got.got == ["traces/rank0.pt.trace.json.gz", "traces/rank1.pt.trace.json.gz",
                       "traces/single/rank0.pt.trace.json.gz"]
    assert got.refused == ["traces/rank2.pt.trace.json.gz", "traces/rank3.pt.trace.json.gz"]
    assert (tmp_path / "out" / "traces" / "single" / "rank0.pt.trace.json.gz").read_bytes() == gz
    assert sorted(p.name for p in (tmp_path / "out" / "traces").iterdir()) == [
        "rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz", "single"]


def test_launch_command_is_detached_and_hands_the_watchdog_its_providers_description():
    cmd = remote.launch_command(remote.LaunchSpec(nproc=2, job_args=["--out", "."],
                                                   python="/usr/bin/python3",
                                                   self_end="eyJhIjoxfQ=="))
    assert "--self-end eyJhIjoxfQ==" in cmd and "rp_environment" not in cmd
    assert cmd.count("setsid nohup") == 2
    assert "--nproc-per-node=2" in cmd and "tplab.job.watchdog" in cmd
    assert "> exit_code.tmp" in cmd
    # the first heartbeat (which sends the boot guard back) is written by the watchdog's own
    # detached supervisor, never by the session's shell before it: a client killed mid-launch
    # leaves either no heartbeat (the guard ends the pod) or a watchdog
    before_setsid = cmd.split("setsid nohup", 1)[0]
    assert "> heartbeat" not in before_setsid and "rm -f heartbeat" in before_setsid
    supervisor = cmd.split("setsid nohup sh -c ", 1)[1]
    assert supervisor.lstrip("'").startswith("date +%s > heartbeat; while :; do")


def test_finished_is_seen_even_when_a_heartbeat_follows_it_in_the_same_read() -> None:
    from tplab.records.events import EventWriter
    w = EventWriter(src="job")
    evs = [w.make("phase", name="results"), w.make("phase", name="finished"),
           w.make("heartbeat", phase="finished")]
    state = TailState()
    assert [e.seq for e in event_tail._accept(state, evs)] == [0, 1, 2]
    assert state.finished_seen_at is not None

    other = TailState()
    event_tail._accept(other, [EventWriter(src="job").make("phase", name="tp")])
    assert other.finished_seen_at is None


FAKE_TORCHRUN = textwrap.dedent("""
    # stands in for `python -m torch.distributed.run ... -m tplab.job` (no torch on the test
    # server's python): writes job events the way the job does, then results.json, then exits
    import json, sys, time
    sys.path.insert(0, '.')
    from tplab.records.events import EventWriter
    print('fake job starting', ' '.join(sys.argv[1:]), flush=True)
    with open('events.jsonl', 'a') as fh:
        w = EventWriter([fh])
        w.emit('phase', name='setup')
        for i in range(120):
            w.emit('token', mode='tp', prompt=0, pos=i, ms=1.0, ar_ms=0.5, token=i)
            time.sleep(0.005)
        w.emit('phase', name='finished', wall_s=0.6)
    with open('results.json', 'w') as fh:
        json.dump({'ok': True, 'tokens': 120}, fh)
    print('fake job done', flush=True)
""")


async def test_detached_launch_survives_the_session_and_resumes_after_a_drop(
        server, tmp_path, monkeypatch):
    """The real launch line (login shell: /bin/sh on the OpenSSH server), the watchdog beside
    the job, the SSH session closed right after, a tail that loses its connection halfway and
    resumes, then fetch: every event exactly once, the job's own exit status, the files back."""
    env_file = server.root / "rp_environment"
    env_file.write_text("export RUNPOD_POD_ID=podtest1\nexport RUNPOD_API_KEY=test-pod-key-123\n"
                        "export RUNPOD_API_BASE_URL=http://127.0.0.1:9\n")
    monkeypatch.setenv("TPLAB_RP_ENV_FILE", str(env_file))  # the asyncssh server's sessions
    pkg = Path(remote.__file__).parent.parent  # tplab/
    shim = tmp_path / "torch"
    (shim / "distributed").mkdir(parents=True)
    (shim / "__init__.py").write_text("")
    (shim / "distributed" / "__init__.py").write_text("")
    (shim / "distributed" / "run.py").write_text(FAKE_TORCHRUN)
    items = remote.bundle_items(pkg, ["records", "stats", "util", "job"], [
        UploadItem(shim / "__init__.py", "torch/__init__.py"),
        UploadItem(shim / "distributed" / "__init__.py", "torch/distributed/__init__.py"),
        UploadItem(shim / "distributed" / "run.py", "torch/distributed/run.py")])
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    await remote.upload(conn, items)
    from tplab.cloud.runpod.self_end import self_end
    from tplab.records.self_end_word import encode
    await remote.launch(conn, remote.LaunchSpec(nproc=2, job_args=["--out", "."],
                                                python=server.python, heartbeat_stale_s=60,
                                                self_end=encode(self_end())))
    conn.close()  # the session ends; the job and the watchdog must not
    state, seqs, drops, conn = await _tail_dropping(server, tmp_path, drop_after=(45,))
    assert len(drops) == 1 and drops[0] > 0  # the drop closed the live session
    assert seqs == list(range(122)) and state.duplicates == 0
    assert state.exit_code == 0
    got = await remote.fetch(conn, tmp_path / "out")
    conn.close()
    assert {"results.json", "job.log", "watchdog.log", "events.jsonl"} <= set(got.got)
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == {"ok": True,
                                                                          "tokens": 120}
    assert "fake job done" in (tmp_path / "out" / "job.log").read_text()
    log = (tmp_path / "out" / "watchdog.log").read_text()
    assert "started:" in log and "not started" not in log and "test-pod-key-123" not in log


async def test_a_big_event_file_is_read_whole_in_capped_reads(server, tmp_path):
    """OpenSSH answers at most 261,120 bytes a read; a megabyte of events (five reads of
    READ_CHUNK) must all come through."""
    from tplab.records.events import EventWriter
    run = server.root / remote.REMOTE_DIR
    run.mkdir(parents=True)
    w = EventWriter(src="job")
    lines = [w.make("log", level="info", msg=f"token {i} " + "x" * 220).to_json()
             for i in range(4_000)]
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    (run / "exit_code").write_text("0\n")
    server.own(run)
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    state = TailState()
    n = 0
    t0 = asyncio.get_running_loop().time()
    async with conn.start_sftp_client() as sftp:
        async for batch in event_tail.tail_events(sftp, state):
            n += len(batch)
    conn.close()
    assert (run / "events.jsonl").stat().st_size > 4 * event_tail.READ_CHUNK
    assert n == 4_000 and state.read_pos == (run / "events.jsonl").stat().st_size
    assert asyncio.get_running_loop().time() - t0 < 20


async def test_the_launch_line_survives_a_missing_env_file(server, tmp_path, monkeypatch):
    """Not every pod has /etc/rp_environment; under a POSIX sh login shell (dash: the OpenSSH
    server's test user) a bare `. missing-file` ended the whole launch line."""
    monkeypatch.setenv("TPLAB_RP_ENV_FILE", str(tmp_path / "no-such-env-file"))
    run = server.root / remote.REMOTE_DIR
    run.mkdir(parents=True)
    # a torch without torch.distributed in the run folder, which `python -m` puts first on the
    # path: the launched `python -m torch.distributed.run` ends at once with status 1, as under
    # the OpenSSH server's Python, which has no torch (a real torchrun would import torch for
    # seconds to end the same way: the job it starts has no arguments)
    (run / "torch").mkdir()
    (run / "torch" / "__init__.py").write_text("")
    server.own(run)
    conn = await remote.connect(_opts(server, tmp_path), server.client_key)
    try:
        await remote.launch(conn, remote.LaunchSpec(nproc=1, job_args=[], python=server.python))
    finally:
        conn.close()
    deadline = time.monotonic() + 30  # written by the detached supervisor, once it runs
    while not (run / "heartbeat").is_file() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert (run / "heartbeat").is_file()
    # the job ends at once with status 1: wait for it (bounded), so that the test leaves
    # nothing behind
    deadline = time.monotonic() + 60
    while not (run / "exit_code").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert (run / "exit_code").exists(), "the launched job did not end within 60 s"
    assert (run / "exit_code").read_text().strip() == "1"


async def test_a_silent_sshd_is_noticed_by_keepalive_without_stray_errors(ssh_user, tmp_path):
    """OpenSSH frozen mid-tail (SIGSTOP: the link stays up, nothing answers): the keepalive
    ends the connection within its bound, the tail raises for the caller to reconnect, and no
    error is left unretrieved in the event loop (nothing printed behind the user's back)."""
    key = remote.generate_client_key()
    ssh_user.clean()
    srv = OpenSSHServer(ssh_user, key)
    await srv.start()
    run = ssh_user.home / remote.REMOTE_DIR
    run.mkdir()
    (run / "events.jsonl").write_text("")
    srv.own(run)
    stray: list = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, ctx: stray.append(ctx.get("message")))
    try:
        opts = ConnectOptions(host="127.0.0.1", port=srv.port, user=srv.user, pod_id="pod-k",
                              known_hosts_dir=tmp_path / "kh", keepalive_interval=0.2,
                              keepalive_count_max=1)
        conn = await remote.connect(opts, key)
        t0 = loop.time()
        with pytest.raises((asyncssh.Error, OSError)):
            async with conn.start_sftp_client() as sftp:
                srv.freeze_all()
                async for _ in event_tail.tail_events(sftp, TailState()):
                    pass
        assert loop.time() - t0 < 8
        conn.close()
        await asyncio.sleep(0.5)
        import gc
        gc.collect()
        await asyncio.sleep(0.1)
        assert stray == []
    finally:
        loop.set_exception_handler(None)
        srv.drop_all()
        await srv.stop()


async def test_asyncssh_tasks_that_lose_their_connection_print_nothing():
    """asyncssh's own background tasks (a write in flight when the session closes) end with
    'connection lost' that nobody retrieves; that must not reach the user's terminal, while
    any other unretrieved error still does."""
    loop = asyncio.get_running_loop()
    seen: list = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx["exception"]))
    restore = remote.quiet_lost_connections(loop)
    try:
        ns: dict = {}
        exec(compile("async def start_task():\n    pass\n",
                     "/site-packages/asyncssh/sftp.py", "exec"), ns)
        theirs = loop.create_task(ns["start_task"]())
        ours = loop.create_task(asyncio.sleep(0))
        await asyncio.gather(theirs, ours)
        handler = loop.get_exception_handler()
        handler(loop, {"message": "x", "exception": asyncssh.sftp.SFTPConnectionLost("lost"),
                       "future": theirs})
        handler(loop, {"message": "y", "exception": asyncssh.sftp.SFTPConnectionLost("lost"),
                       "future": ours})
        handler(loop, {"message": "z", "exception": ValueError("a bug"), "future": theirs})
        assert [type(e).__name__ for e in seen] == ["SFTPConnectionLost", "ValueError"]
    finally:
        restore()
        loop.set_exception_handler(None)
