"""SSH transport to a pod: connect, upload, launch detached, tail events with resume, heartbeat, fetch.

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
import contextlib
import json
import logging
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable, Sequence

import asyncssh

from tplab.events import (EVENT_FIELDS, SCHEMA_VERSION, SOURCES, Event, EventDecoder,
                          EventError, decode_line, from_dict)

# asyncssh logs every channel at INFO; a lab opens many. Its warnings and errors still show.
logging.getLogger("asyncssh").setLevel(logging.WARNING)

#: the run directory, relative to the login home (works on real pods and the mock sandbox)
REMOTE_DIR = "tplab-run"
#: the environment file a RunPod pod exports its variables in; the mock points the env var elsewhere
ENV_FILE_EXPR = '"${TPLAB_RP_ENV_FILE:-/etc/rp_environment}"'


class RemoteError(RuntimeError):
    """A transport step failed; the message is one sentence for the user (no secrets)."""


class HostKeyMismatch(RemoteError):
    """The pod presented a host key other than the one pinned for it: never retried."""


class ConnectionDropped(RemoteError):
    """The SSH connection went away (keepalive timeout, reset, closed)."""


# --------------------------------------------------------------------------------------------
# keys and host-key pinning


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
                    lambda: client, opts.host, opts.port, username=opts.user,
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
        except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
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
    """The pod-side files: ``tplab/__init__.py``, ``tplab/events.py`` and whole sub-packages."""
    items: list[UploadItem] = []
    for name in ("__init__.py", "events.py"):
        items.append(UploadItem(package_root / name, f"tplab/{name}"))
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
    started_at: float | None = None     # the pod's creation (epoch s): the wall cap counts from it
    extra_env: dict[str, str] = field(default_factory=dict)


def launch_command(spec: LaunchSpec) -> str:
    """The shell line that starts job and watchdog detached (survives the SSH session)."""
    py = shlex.quote(spec.python)
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.extra_env.items())
    job = (f"{env} PYTHONPATH=. {py} -m torch.distributed.run --standalone "
           f"--nproc-per-node={int(spec.nproc)} -m tplab.job "
           + " ".join(shlex.quote(a) for a in spec.job_args)
           + " > job.log 2>&1; echo $? > exit_code.tmp && mv exit_code.tmp exit_code")
    dog = (f"PYTHONPATH=. {py} -m tplab.job.watchdog --heartbeat heartbeat "
           f"--stale-after {spec.heartbeat_stale_s:g} --wall-cap {spec.wall_cap_s:g} "
           f"--poll {min(5.0, max(0.2, spec.heartbeat_stale_s / 5)):g} --log watchdog.log"
           + (f" --started-at {spec.started_at:.3f}" if spec.started_at else ""))
    return (f"set -a; . {ENV_FILE_EXPR} 2>/dev/null; set +a; cd {REMOTE_DIR} || exit 3; "
            f"date +%s > heartbeat; rm -f exit_code events.jsonl; "
            f"setsid nohup sh -c {shlex.quote(dog)} > /dev/null 2>&1 < /dev/null & "
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
# fast decoding (the client's hot path)

_SPECS = {t: tuple((name, types, bool in types) for name, types in spec.items())
          for t, spec in EVENT_FIELDS.items()}
_new_event = object.__new__
_set = object.__setattr__
_MISSING = object()


def fast_from_dict(obj: Any) -> Event:
    """``events.from_dict`` for the common, valid case at a fraction of the cost; anything unusual
    goes through ``from_dict`` itself, so errors (and what counts as valid) are the same.

    Takes ownership of ``obj`` (a dict fresh from ``json.loads``): its header keys are popped
    and what is left becomes the event's ``fields``.
    """
    get = obj.get if obj.__class__ is dict else None
    if get is None:
        return from_dict(obj)
    seq = get("seq")
    ts = get("ts")
    src = get("src")
    type_ = get("type")
    spec = _SPECS.get(type_) if type_.__class__ is str else None
    if (spec is None or get("v") != SCHEMA_VERSION or seq.__class__ is not int or seq < 0
            or not (ts.__class__ is float or ts.__class__ is int) or src not in SOURCES):
        return from_dict(obj)
    for name, types, bool_ok in spec:
        val = get(name, _MISSING)
        if not isinstance(val, types) or (val.__class__ is bool and not bool_ok):
            return from_dict(obj)  # _MISSING is no instance of any field type
    pop = obj.pop
    pop("v")
    pop("seq")
    pop("ts")
    pop("src")
    ev = _new_event(Event)
    _set(ev, "type", pop("type"))
    _set(ev, "seq", seq)
    _set(ev, "ts", float(ts))
    _set(ev, "src", src)
    _set(ev, "fields", obj)
    _set(ev, "v", SCHEMA_VERSION)
    return ev


class FastDecoder(EventDecoder):
    """An EventDecoder that parses all complete lines of a chunk with one ``json.loads`` and
    keeps the raw bytes of those lines (``last_raw``) so they can be stored without re-encoding.
    Same contract as EventDecoder (partial lines held, ``offset`` = bytes consumed); a chunk
    with anything odd in it (blank or bad line) falls back to the line-by-line decoder."""

    def __init__(self, offset: int = 0) -> None:
        super().__init__(offset)
        self.last_raw = b""
        self.bad_lines = 0

    def feed(self, data: bytes) -> list[Event]:
        buf = self._buf
        buf.extend(data)
        last = buf.rfind(b"\n")
        if last < 0:
            self.last_raw = b""
            return []
        raw = bytes(buf[:last + 1])
        self.last_raw = raw
        del buf[:last + 1]
        try:
            objs = json.loads(b"[" + raw[:-1].replace(b"\n", b",") + b"]")
            events = [fast_from_dict(o) for o in objs]
        except (ValueError, EventError):
            # a blank or bad line somewhere: line by line, keeping every good event
            events = []
            for line in raw.split(b"\n"):
                if not line.strip():
                    continue
                try:
                    events.append(decode_line(line))
                except EventError:
                    self.bad_lines += 1
            self.last_raw = b""
        self.offset += len(raw)
        return events


# --------------------------------------------------------------------------------------------
# tailing events with resume


@dataclass
class TailState:
    """Survives reconnects: the byte position read so far and the last job seq delivered."""
    decoder: FastDecoder = field(default_factory=FastDecoder)
    last_seq: int = -1
    duplicates: int = 0
    gaps: int = 0
    finished: bool = False
    exit_code: int | None = None
    #: raw bytes of the lines behind the last batch yielded ("" if some were dropped as duplicates)
    last_raw: bytes = b""
    #: when the job's own ``finished`` phase arrived (its last event: results written, outputs
    #: matched); after ``finish_grace_s`` without an exit code the tail ends without waiting for
    #: torchrun's teardown, and ``exit_code`` stays None
    finished_seen_at: float | None = None

    @property
    def read_pos(self) -> int:
        return self.decoder.offset + self.decoder.pending

    @property
    def bad_lines(self) -> int:
        return self.decoder.bad_lines


def _accept(state: TailState, events: list[Event]) -> list[Event]:
    out = []
    for ev in events:
        if ev.seq <= state.last_seq:
            state.duplicates += 1
            continue
        if ev.seq != state.last_seq + 1:
            state.gaps += 1
        state.last_seq = ev.seq
        out.append(ev)
    if any(ev.type == "phase" and ev.fields.get("name") == "finished" for ev in out):
        state.finished_seen_at = time.monotonic()
    return out


async def tail_events(sftp: asyncssh.SFTPClient, state: TailState, poll_s: float = 0.05,
                      chunk: int = 1 << 18, finish_grace_s: float | None = None,
                      max_poll_s: float = 0.4) -> AsyncIterator[list[Event]]:
    """Yield batches of new job events from ``events.jsonl`` until the job's exit code appears.

    Polls every ``poll_s`` while events flow, backing off to ``max_poll_s`` while the file is
    quiet: on the mock cloud the pod shares this machine's cores, and a busy poll would slow
    the very job it watches (gloo all-reduce latency suffers from every extra wake-up).

    Resumable: reads from ``state.read_pos``; every event is yielded exactly once across calls
    (events at or below ``state.last_seq`` are dropped and counted). Raises the transport's
    errors as they come (the caller reconnects and calls again with the same state).
    """
    path = f"{REMOTE_DIR}/events.jsonl"
    exit_path = f"{REMOTE_DIR}/exit_code"
    fh = None

    async def drain() -> AsyncIterator[list[Event]]:
        while True:
            data = await fh.read(chunk, state.read_pos)
            if not data:
                return
            batch = state.decoder.feed(data)
            accepted = _accept(state, batch)
            state.last_raw = state.decoder.last_raw if len(accepted) == len(batch) else b""
            if accepted:
                yield accepted
            if len(data) < chunk:
                return

    delay = poll_s
    try:
        while not state.finished:
            if fh is None:
                with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                    fh = await sftp.open(path, "rb")
            before = state.read_pos
            if fh is not None:
                async for batch in drain():
                    yield batch
            if state.read_pos != before:
                delay = poll_s
                await asyncio.sleep(poll_s)
                continue
            code = await _read_exit_code(sftp, exit_path)
            early = (code is None and finish_grace_s is not None
                     and state.finished_seen_at is not None
                     and time.monotonic() - state.finished_seen_at >= finish_grace_s)
            if code is not None or early:
                # the job has exited: one last read catches anything written just before
                if fh is None:
                    with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                        fh = await sftp.open(path, "rb")
                if fh is not None:
                    async for batch in drain():
                        yield batch
                state.exit_code = code
                state.finished = True
                break
            await asyncio.sleep(delay)
            delay = min(max_poll_s, delay * 2)
    finally:
        if fh is not None:
            with contextlib.suppress(asyncssh.Error, OSError):
                await fh.close()


async def _read_exit_code(sftp: asyncssh.SFTPClient, path: str) -> int | None:
    try:
        async with sftp.open(path, "rb") as fh:
            text = (await fh.read()).decode(errors="replace").strip()
    except asyncssh.SFTPNoSuchFile:
        return None
    try:
        return int(text)
    except ValueError:
        return -1


# --------------------------------------------------------------------------------------------
# fetch


#: what comes back from the pod after the run
FETCH_FILES = ("results.json", "events.jsonl", "job.log", "watchdog.log", "exit_code")


async def fetch(conn: asyncssh.SSHClientConnection, out_dir: Path,
                names: Sequence[str] = FETCH_FILES) -> list[str]:
    """Copy the run's files into ``out_dir``; returns the names fetched (missing ones skipped)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    got = []
    async with conn.start_sftp_client() as sftp:
        for name in names:
            try:
                await sftp.get(f"{REMOTE_DIR}/{name}", str(out_dir / name))
                got.append(name)
            except asyncssh.SFTPNoSuchFile:
                continue
    return got
