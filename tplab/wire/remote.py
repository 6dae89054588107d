"""SSH transport to a pod: connect, upload, launch detached, tail events with resume, heartbeat, fetch.

The event file itself is tailed by ``tplab.wire.event_tail``.

Why this shape: the job must survive a dropped connection and the client must neither lose nor
repeat an event, so the job is launched detached (``setsid nohup``) and writes everything to
files on the pod; the client only *reads* those files over SFTP, from a byte offset it keeps
across reconnects. Keepalives make a silent drop visible in seconds. The pod's host key is
trusted on first use and pinned per pod (never ``known_hosts=None``). The client proves it is
alive by rewriting a heartbeat file the pod-side watchdog watches.

Client side only; no torch import.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence, cast

import asyncssh

from tplab.records import rank_traces


#: the run directory, relative to the login home (works on real pods and the mock sandbox)
REMOTE_DIR = "tplab-run"

# asyncssh logs every channel at INFO; a lab opens many. Its warnings and errors still show.
logging.getLogger("asyncssh").setLevel(logging.WARNING)

def quiet_lost_connections(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Stop asyncssh's own background tasks from printing "Task exception was never retrieved"
    when their connection dies under them (a heartbeat write in flight when the lab closes the
    session, a dropped link): the lab has already seen the drop and acted on it, and the text
    would land in the middle of the user's terminal. Anything else still reaches the loop's
    previous handler. Returns the function that puts that handler back."""
    previous = loop.get_exception_handler()

    def handler(lp: asyncio.AbstractEventLoop, context: dict) -> None:
        exc = context.get("exception")
        task = context.get("future")
        coro = getattr(task, "get_coro", lambda: None)() if task is not None else None
        where = getattr(coro, "__qualname__", "") + getattr(
            getattr(coro, "cr_code", None), "co_filename", "")
        lost = isinstance(exc, (asyncssh.ConnectionLost, asyncssh.sftp.SFTPConnectionLost,
                                ConnectionError))
        if lost and "asyncssh" in where:
            return
        if previous is not None:
            previous(lp, context)
        else:
            lp.default_exception_handler(context)

    loop.set_exception_handler(handler)
    return lambda: loop.set_exception_handler(previous)


class RemoteError(RuntimeError):
    """A transport step failed; the message is one sentence for the user (no secrets)."""


class HostKeyMismatch(RemoteError):
    """The pod presented a host key other than the one pinned for it: never retried."""


class ConnectionDropped(RemoteError):
    """The SSH connection went away (keepalive timeout, reset, closed)."""


# --------------------------------------------------------------------------------------------
# keys and host-key pinning


def _same(client: _PinningClient) -> _PinningClient:
    """asyncssh's client factory for one attempt: that attempt's client."""
    return client


def generate_client_key() -> asyncssh.SSHKey:
    """A fresh ed25519 key for one lab (kept in memory; only its public half leaves)."""
    return asyncssh.generate_private_key("ssh-ed25519", comment="tplab-lab")


def public_key_line(key: asyncssh.SSHKey) -> str:
    return key.export_public_key("openssh").decode().strip()


class HostKeyPin:
    """Trust-on-first-use pin of one pod's host key, in ``<dir>/<pod_id>`` (OpenSSH key line)."""

    def __init__(self, directory: Path, pod_id: str) -> None:
        safe = "".join(c for c in pod_id if c.isalnum() or c in "-_.") or "pod"
        self.path = Path(directory) / safe
        self.pending: asyncssh.SSHKey | None = None

    def pinned(self) -> asyncssh.SSHKey | None:
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return None
        try:
            return asyncssh.import_public_key(text)
        except (asyncssh.KeyImportError, ValueError):
            raise RemoteError(
                f"the pinned host key file {self.path} is damaged; delete it only if you "
                "trust the pod, then retry") from None

    def known_hosts(self) -> tuple[list, list, list]:
        key = self.pinned()
        return ([key] if key is not None else [], [], [])

    def accept_first(self, key: asyncssh.SSHKey) -> bool:
        """Called for a key not in the pinned set: accepted only when nothing is pinned yet."""
        if self.pinned() is not None:
            return False
        self.pending = key
        return True

    def commit(self) -> None:
        """Persist the key accepted on first use (after the server proved it holds it)."""
        if self.pending is None or self.pinned() is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(self.pending.export_public_key("openssh").decode())
        tmp.replace(self.path)
        self.pending = None


class _PinningClient(asyncssh.SSHClient):
    def __init__(self, pin: HostKeyPin) -> None:
        self._pin = pin
        self.rejected = False

    def validate_host_public_key(self, host: str, addr: str, port: int,
                                 key: asyncssh.SSHKey) -> bool:
        ok = self._pin.accept_first(key)
        if not ok:
            self.rejected = True
        return ok


# --------------------------------------------------------------------------------------------
# connection


@dataclass
class ConnectOptions:
    host: str
    port: int
    user: str
    pod_id: str
    known_hosts_dir: Path
    timeout_s: float = 180.0          # total time to wait for sshd to answer
    keepalive_interval: float = 2.0   # a silent drop is noticed within interval * (count_max + 1)
    keepalive_count_max: int = 2
    attempt_timeout_s: float = 10.0


async def connect(opts: ConnectOptions, client_key: asyncssh.SSHKey,
                  on_attempt: Callable[[int, str], None] | None = None
                  ) -> asyncssh.SSHClientConnection:
    """Connect with bounded retries and backoff until sshd answers; pin the host key on first use."""
    pin = HostKeyPin(opts.known_hosts_dir, opts.pod_id)
    deadline = time.monotonic() + opts.timeout_s
    delay = 0.2
    attempt = 0
    last = "no answer"
    while True:
        attempt += 1
        client = _PinningClient(pin)
        try:
            conn, _ = await asyncio.wait_for(
                asyncssh.create_connection(
                    functools.partial(_same, client), opts.host, opts.port, username=opts.user,
                    client_keys=[client_key], known_hosts=pin.known_hosts(),
                    agent_path=None, config=None, password=None, kbdint_auth=False,
                    gss_host=None, preferred_auth="publickey",
                    keepalive_interval=opts.keepalive_interval,
                    keepalive_count_max=opts.keepalive_count_max,
                    login_timeout=opts.attempt_timeout_s),
                timeout=opts.attempt_timeout_s)
        except asyncssh.HostKeyNotVerifiable:
            if client.rejected:
                raise HostKeyMismatch(
                    f"pod {opts.pod_id} presented a host key other than the one pinned in "
                    f"{pin.path}; refusing to connect (terminate the pod if unsure)") from None
            last = "host key not verifiable"
        except asyncssh.PermissionDenied:
            last = "the pod refused the lab's SSH key"
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            last = type(exc).__name__
        else:
            pin.commit()
            return conn
        if on_attempt:
            on_attempt(attempt, last)
        if time.monotonic() + delay > deadline:
            raise RemoteError(
                f"could not reach the pod's SSH server at {opts.host}:{opts.port} within "
                f"{opts.timeout_s:.0f} s ({last}); check the pod in `tplab status`")
        await asyncio.sleep(delay)
        delay = min(delay * 1.7, 3.0)


# --------------------------------------------------------------------------------------------
# upload and launch


@dataclass(frozen=True)
class UploadItem:
    local: Path
    remote: str  # relative to REMOTE_DIR


def bundle_items(package_root: Path, packages: Sequence[str], extra: Iterable[UploadItem]
                 ) -> list[UploadItem]:
    """The pod-side files: ``tplab/__init__.py`` and whole sub-packages."""
    items: list[UploadItem] = []
    items.append(UploadItem(package_root / "__init__.py", "tplab/__init__.py"))
    for pkg in packages:
        base = package_root / pkg
        if not base.is_dir():
            raise RemoteError(f"pod-side package tplab/{pkg} is missing from this install")
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            items.append(UploadItem(path, "tplab/" + path.relative_to(package_root).as_posix()))
    items.extend(extra)
    return items


async def upload(conn: asyncssh.SSHClientConnection, items: Sequence[UploadItem]) -> int:
    """Copy the items under REMOTE_DIR by SFTP (fresh directory); returns bytes sent."""
    async with conn.start_sftp_client() as sftp:
        dirs = sorted({str(Path(REMOTE_DIR, i.remote).parent) for i in items} | {REMOTE_DIR})
        for d in dirs:
            await sftp.makedirs(d, exist_ok=True)
        total = 0
        sem = asyncio.Semaphore(8)

        async def one(item: UploadItem) -> None:
            nonlocal total
            async with sem:
                await sftp.put(str(item.local), f"{REMOTE_DIR}/{item.remote}")
                total += item.local.stat().st_size

        await asyncio.gather(*(one(i) for i in items))
        return total


@dataclass
class LaunchSpec:
    """What to start on the pod: the job under torchrun, and the watchdog beside it."""
    nproc: int
    job_args: list[str]
    python: str = "python3"
    heartbeat_stale_s: float = 60.0
    wall_cap_s: float = 7200.0
    #: what is left of the wall cap, counted by the client (an elapsed time, so the pod's clock
    #: and the laptop's are never compared); the pod's boot guard record counts it too
    wall_cap_left_s: float | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    #: how the pod ends itself (the provider's description, ``tplab.records.self_end_word.encode``'d): the
    #: watchdog reads the pod's id and key where it says; "" starts no watchdog that can end it
    self_end: str = ""


#: the boot guard's record of the container's start, relative to the run directory
GUARD_FILE = "../tplab-guard.json"


def launch_command(spec: LaunchSpec) -> str:
    """The shell line that starts job and watchdog detached (survives the SSH session)."""
    py = shlex.quote(spec.python)
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.extra_env.items())
    # torchrun through tplab.job.torchrun: the same run, its exit status without the teardown.
    # One OpenMP thread a rank unless the pod says otherwise: torchrun's own default, stated
    # so that torchrun does not print a paragraph about it into the lab's stderr
    job = (f"{env} OMP_NUM_THREADS=${{OMP_NUM_THREADS:-1}} PYTHONPATH=. {py} "
           f"-m tplab.job.torchrun --standalone "
           f"--nproc-per-node={int(spec.nproc)} -m tplab.job "
           + " ".join(shlex.quote(a) for a in spec.job_args)
           + " > job.log 2>&1; echo $? > exit_code.tmp && mv exit_code.tmp exit_code")
    dog = (f"PYTHONPATH=. {py} -m tplab.job.watchdog --heartbeat heartbeat "
           f"--stale-after {spec.heartbeat_stale_s:g} --wall-cap {spec.wall_cap_s:g} "
           f"--poll {min(5.0, max(0.2, spec.heartbeat_stale_s / 5)):g} --log watchdog.log "
           f"--guard-file {GUARD_FILE}"
           + (f" --self-end {shlex.quote(spec.self_end)}" if spec.self_end else "")
           + (f" --wall-cap-left {spec.wall_cap_left_s:.1f}"
              if spec.wall_cap_left_s is not None else ""))
    # the supervisor: restart the watchdog whenever it exits, unless it ended in order
    # (watchdog.log.done: terminated, or told to stop) or could not start at all (exit 2).
    # It writes the first heartbeat itself, once it runs in its own session: the boot guard
    # stands back (to stale + 60 s) when the heartbeat appears, so the heartbeat must never
    # exist without a watchdog that survives the client (a client killed mid-launch dropped
    # the session's shell between the two, and the pod lived ~65 s past its 13 s bound)
    supervised = (f"date +%s > heartbeat; "
                  f"while :; do {dog}; c=$?; [ -e watchdog.log.done ] && break; "
                  f"[ $c -eq 2 ] && break; echo \"$(date -u +%Y-%m-%dT%H:%M:%SZ) supervisor: "
                  f"the watchdog exited ($c); restarting it\" >> watchdog.log; sleep 1; done")
    return (f"cd {REMOTE_DIR} || exit 3; "
            f"rm -f heartbeat exit_code events.jsonl watchdog.log.done; "
            f"setsid nohup sh -c {shlex.quote(supervised)} > /dev/null 2>&1 < /dev/null & "
            f"setsid nohup sh -c {shlex.quote(job)} > /dev/null 2>&1 < /dev/null & "
            f"echo launched")


async def launch(conn: asyncssh.SSHClientConnection, spec: LaunchSpec) -> None:
    result = await conn.run(launch_command(spec), check=False, timeout=60)
    if result.exit_status != 0 or "launched" not in str(result.stdout):
        raise RemoteError(
            f"the job did not start on the pod (exit {result.exit_status}): "
            f"{str(result.stderr).strip()[:300]}")


# --------------------------------------------------------------------------------------------
# heartbeat


async def touch_heartbeat(sftp: asyncssh.SFTPClient) -> None:
    """Rewrite the heartbeat file: the pod's clock sets its mtime, so skew does not matter."""
    async with sftp.open(f"{REMOTE_DIR}/heartbeat", "wb") as fh:
        await fh.write(f"{time.time():.3f}\n".encode())


# --------------------------------------------------------------------------------------------
# fetch


#: what comes back from the pod after the run
FETCH_FILES = ("results.json", "events.jsonl", "trace.json", "job.log", "watchdog.log",
               "guard.log", "exit_code")
#: the most of each file the client takes from the (untrusted) pod; a longer log comes back as
#: its last part, anything else longer is not fetched (trace.json: the job bounds it to
#: ``tplab.records.trace_merge.MAX_TRACE_BYTES``, 8 MiB)
FETCH_LIMITS = {"results.json": 8 << 20, "events.jsonl": 256 << 20, "trace.json": 9 << 20,
                "job.log": 16 << 20, "watchdog.log": 4 << 20, "guard.log": 1 << 20,
                "exit_code": 64}
DEFAULT_FETCH_LIMIT = 16 << 20
#: the folders of each rank's own trace (``tplab.records.rank_traces``): only the files named
#: as a rank's trace, plain files, gzip, each within ``rank_traces.FETCH_LIMIT``, at most
#: ``rank_traces.MAX_RANKS`` a folder
FETCH_FOLDERS = (rank_traces.TRACES_DIR, f"{rank_traces.TRACES_DIR}/{rank_traces.SINGLE_DIR}")
_LOGS = (".log",)
_GZIP = b"\x1f\x8b"


@dataclass
class Fetched:
    got: list[str] = field(default_factory=list)       # fetched whole
    trimmed: list[str] = field(default_factory=list)   # logs over their limit: the last part
    refused: list[str] = field(default_factory=list)   # over the limit (or not what it should
                                                       # be), not fetched


async def _read_at_most(sftp: asyncssh.SFTPClient, path: str, cap: int) -> bytes:
    """Up to ``cap + 1`` bytes of a remote file: one more than allowed tells it grew past it."""
    async with sftp.open(path, "rb") as fh:
        return cast(bytes, await fh.read(cap + 1))


async def _rank_trace_names(sftp: asyncssh.SFTPClient, folder: str) -> list[str]:
    """The rank traces a pod folder holds: names as ``rank_traces`` makes them, plain files."""
    try:
        entries = await sftp.readdir(f"{REMOTE_DIR}/{folder}")
    except (asyncssh.SFTPNoSuchFile, asyncssh.SFTPFailure, asyncssh.SFTPPermissionDenied):
        return []
    names = sorted(str(e.filename) for e in entries
                   if rank_traces.rank_of_name(str(e.filename)) is not None
                   and e.attrs.type == asyncssh.FILEXFER_TYPE_REGULAR)
    return [f"{folder}/{n}" for n in names[:rank_traces.MAX_RANKS]]


async def fetch(conn: asyncssh.SSHClientConnection, out_dir: Path,
                names: Sequence[str] = FETCH_FILES,
                limits: dict[str, int] | None = None,
                folders: Sequence[str] = ()) -> Fetched:
    """Copy the run's files into ``out_dir`` within their size limits (missing ones skipped),
    and each rank's own trace from ``folders`` (the run's whole fetch: ``FETCH_FOLDERS``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    limits = {**FETCH_LIMITS, **(limits or {})}
    result = Fetched()
    async with conn.start_sftp_client() as sftp:
        for name in names:
            path = f"{REMOTE_DIR}/{name}"
            try:
                size = (await sftp.stat(path)).size or 0
            except asyncssh.SFTPNoSuchFile:
                continue
            cap = limits.get(name, DEFAULT_FETCH_LIMIT)
            data = await _read_at_most(sftp, path, cap) if size <= cap else None
            if data is not None and len(data) <= cap:
                (out_dir / name).write_bytes(data)
                result.got.append(name)
            elif name.endswith(_LOGS):
                size = max(size, (await sftp.stat(path)).size or 0)
                async with sftp.open(path, "rb") as fh:
                    tail = cast(bytes, await fh.read(cap, size - cap))  # "rb": bytes
                (out_dir / name).write_bytes(
                    f"[tplab: the first {size - cap} bytes of this {size}-byte log were not "
                    "fetched]\n".encode() + tail[:cap])
                result.trimmed.append(name)
            else:
                result.refused.append(name)
        for folder in folders:
            for rel in await _rank_trace_names(sftp, folder):
                data = await _read_at_most(sftp, f"{REMOTE_DIR}/{rel}", rank_traces.FETCH_LIMIT)
                if len(data) > rank_traces.FETCH_LIMIT or not data.startswith(_GZIP):
                    result.refused.append(rel)
                    continue
                (out_dir / folder).mkdir(parents=True, exist_ok=True)
                (out_dir / rel).write_bytes(data)
                result.got.append(rel)
    return result
