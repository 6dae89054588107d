"""The lab's SSH session with its pod: connect, upload, launch, tail the job's events, heartbeat, fetch.

Why one object: the connection, the SFTP channel, the lab's private key and the tail position
survive reconnects together. The job runs detached on the pod and writes its events to a file;
this session only reads that file from the byte offset it keeps (``tail``), so a dropped
connection loses and repeats nothing. While the job runs, a heartbeat file is rewritten for the
pod's watchdog and the provider is polled for the pod's state (a spot interruption). The session
works with the lab's owners: its config, its pod (the endpoint, the state the provider reports),
its report (what the job sent, the files fetched) and its stream; a pod that goes while the job
runs is a stop it asks the lab for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from tplab.wire import event_tail, remote
from tplab.cloud.base import INTERRUPTED as POD_INTERRUPTED
from tplab.cloud.base import PodInfo, ProviderError, SshEndpoint
from tplab.lab.lab_config import FAILED, INTERRUPTED, STOPPED, LabConfig, LabStop, StopRequest
from tplab.lab.pod import LabPod
from tplab.lab.report import LabReport
from tplab.lab.stream import LabStream
from tplab.home.paths import tplab_home
from tplab.keys.redact import one_line
from tplab.records.events import ErrorEvent, Event, ResultEvent

#: the job's files that come back (``exit_code`` only tells the tail the job ended)
EXIT_CODE = "exit_code"


def asyncssh_errors() -> tuple[type[BaseException], ...]:
    import asyncssh
    return (asyncssh.Error, OSError)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _json_kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


class PodSession:
    """See the module docstring. ``stop`` asks the lab to stop (the pod went while the job ran);
    ``on_result`` is called with the job's results dict the moment its ``result`` event arrives
    (the lab starts drawing the curve while the pod winds down)."""

    def __init__(self, config: LabConfig, pod: LabPod, report: LabReport, stream: LabStream,
                 stop: StopRequest, on_result: Callable[[dict[str, Any]], None]) -> None:
        self.config, self.pod, self.report, self.stream = config, pod, report, stream
        self.stop = stop
        self.on_result = on_result
        self.client_key = remote.generate_client_key()  # only its public half leaves
        self.conn: Any = None
        self.sftp: Any = None
        self.tail = event_tail.TailState()
        self._last_touch: float | None = None
        self._result_seen = False
        #: the job's own sentence from its first fatal ``error`` event (pod data: one line, cut)
        self.job_error: str | None = None
        self.endpoint: SshEndpoint | None = None   # the way to the pod's sshd that answered

    @property
    def public_key(self) -> str:
        return remote.public_key_line(self.client_key)

    # ---- connect, upload, launch -------------------------------------------------------
    async def connect(self, info: PodInfo) -> None:
        """Connect to the pod's SSH. Where the provider gives a second way to the same sshd
        (``info.ssh_fallback``: Vast's proxy), the first way gets ``direct_ssh_s`` and, when it
        does not answer in that time (some hosts' direct ports never do), the lab says so and
        connects through the second for the rest of the bound. The endpoint that answered is
        kept for every reconnect."""
        cfg, stream = self.config, self.stream
        first = self.endpoint or info.ssh
        assert first is not None
        second = info.ssh_fallback if self.endpoint is None else None
        started = time.monotonic()
        try:
            if second is not None:
                try:
                    self.conn = await self._connect_to(first, info.id,
                                                       min(cfg.direct_ssh_s, cfg.connect_timeout_s))
                except remote.RemoteError as exc:
                    took = time.monotonic() - started
                    stream.log(one_line(
                        f"direct SSH to {first.host}:{first.port} did not answer within "
                        f"{took:.0f} s ({exc}); connecting through {self.pod.provider_label()}'s "
                        f"SSH proxy at {second.host}:{second.port}"), "warning")
                    self.conn = await self._connect_to(
                        second, info.id, max(1.0, cfg.connect_timeout_s - took), via="proxy")
                    self.endpoint = second
                    return
            else:
                self.conn = await self._connect_to(first, info.id, cfg.connect_timeout_s)
            self.endpoint = first
        except remote.RemoteError as exc:
            stream.emit("ssh", state="closed")
            raise LabStop(FAILED, str(exc)) from None

    async def _connect_to(self, ssh: SshEndpoint, pod_id: str, timeout_s: float,
                          via: str = "") -> Any:
        cfg, stream = self.config, self.stream
        extra = {"via": via} if via else {}
        stream.emit("ssh", state="connecting", host=ssh.host, port=ssh.port, **extra)
        opts = remote.ConnectOptions(
            host=ssh.host, port=ssh.port, user=ssh.user, pod_id=pod_id,
            known_hosts_dir=tplab_home(cfg.mock) / "known_hosts",
            timeout_s=timeout_s, keepalive_interval=cfg.keepalive_interval_s,
            keepalive_count_max=cfg.keepalive_count_max,
            attempt_timeout_s=min(remote.ConnectOptions.attempt_timeout_s, timeout_s))
        conn = await remote.connect(
            opts, self.client_key,
            on_attempt=lambda n, why: stream.log(f"ssh attempt {n} to {ssh.host}:{ssh.port}: "
                                                 f"{why}", "debug"))
        stream.emit("ssh", state="connected", host=ssh.host, port=ssh.port, **extra)
        return conn

    async def upload(self) -> None:
        from tplab.lab.bundle import bundle_items
        cfg = self.config
        sent = await remote.upload(self.conn, bundle_items(cfg.checkpoint, cfg.prompts))
        self.stream.log(f"uploaded {sent / 1e6:.2f} MB by SFTP")

    def launch_spec(self) -> remote.LaunchSpec:
        cfg = self.config
        python = cfg.pod_python or (sys.executable if cfg.mock else "python3")
        return remote.LaunchSpec(nproc=cfg.gpus, job_args=cfg.job_args(), python=python,
                                 heartbeat_stale_s=cfg.heartbeat_timeout_s,
                                 wall_cap_s=cfg.wall_cap_s,
                                 wall_cap_left_s=self.pod.wall_cap_left(),
                                 self_end=self.pod.self_end_arg())

    async def launch(self, watchdog_timeout_s: float = 20.0) -> None:
        """Start the job and its watchdog; the lab goes on only once the watchdog has said
        "started" in its log (without it nothing would end the pod if this client vanished)."""
        await remote.launch(self.conn, self.launch_spec())
        log = f"{remote.REMOTE_DIR}/watchdog.log"
        deadline = time.monotonic() + watchdog_timeout_s
        text = ""
        async with self.conn.start_sftp_client() as sftp:
            while True:
                with contextlib.suppress(*asyncssh_errors()):
                    async with sftp.open(log, "rb") as fh:
                        text = (await fh.read(64 * 1024)).decode("utf-8", "replace")
                bad = next((ln for ln in text.splitlines() if "not started:" in ln), None)
                if bad is not None:
                    raise LabStop(FAILED, "the pod's watchdog did not start: "
                                  + one_line(bad.split("not started:", 1)[1]))
                if "started:" in text:
                    self.stream.log("the pod's watchdog started (heartbeat timeout "
                                    f"{self.config.heartbeat_timeout_s:.0f} s)")
                    return
                if time.monotonic() > deadline:
                    raise LabStop(FAILED, f"the pod's watchdog did not say it started within "
                                  f"{watchdog_timeout_s:.0f} s (watchdog.log: "
                                  f"{one_line(text[-300:]) or 'empty'}); nothing would end the "
                                  "pod if this client went away, so the lab stops here")
                await asyncio.sleep(0.2)

    # ---- while the job runs ------------------------------------------------------------
    async def run_job(self) -> None:
        """Tail the job to its end, with the heartbeat and the pod-state poll beside it."""
        hb = asyncio.create_task(self._heartbeat_loop(), name="lab-heartbeat")
        watch = asyncio.create_task(self._watch_pod(), name="lab-watch")
        try:
            await self._stream_job()
        finally:
            hb.cancel()
            watch.cancel()
            for t in (hb, watch):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def _stream_job(self) -> None:
        """Tail the job's events to the end, reconnecting (and resuming) after drops."""
        import asyncssh
        stream, report = self.stream, self.report
        idle_drops = 0
        while not self.tail.finished:
            if self.conn is None:
                if idle_drops >= 10:
                    raise LabStop(FAILED, "the SSH connection kept dropping without progress "
                                  f"({idle_drops} times); the pod is being terminated")
                stream.emit("ssh", state="connecting")
                if not await self._check_pod_alive():
                    idle_drops += 1
                    await asyncio.sleep(min(2.0 * idle_drops, 10.0))
                    continue
                try:
                    info = self.pod.info
                    assert info is not None  # the pod was created before the session
                    await self.connect(info)
                except LabStop:
                    await self._check_pod_alive()  # say "the pod went X" when that is why
                    raise
            pos_before = self.tail.read_pos
            try:
                async with self.conn.start_sftp_client() as sftp:
                    self.sftp = sftp
                    await self._touch()
                    async for batch in event_tail.tail_events(
                            sftp, self.tail, finish_grace_s=self.config.finish_grace_s):
                        stream.publish_job(batch, self.tail.last_raw)
                        report.took_events(batch)
                        if not self._result_seen:
                            self._note_result(batch)
                        if self.job_error is None:
                            self._note_error(batch)
            except (asyncssh.Error, OSError) as exc:
                idle_drops = idle_drops + 1 if self.tail.read_pos == pos_before else 1
                drops = report.ssh_dropped()
                self.sftp = None
                with contextlib.suppress(Exception):
                    self.conn.close()
                self.conn = None
                stream.emit("ssh", state="dropped", reason=one_line(type(exc).__name__),
                            drops=drops, resume_offset=self.tail.read_pos)
            finally:
                report.tail_counts(self.tail.duplicates, self.tail.gaps)
        self.sftp = None
        if self.tail.duplicates or self.tail.gaps:
            stream.log(f"event stream: {self.tail.duplicates} duplicates dropped, "
                           f"{self.tail.gaps} gaps", "warning")

    def _note_result(self, batch: list[Event]) -> None:
        for ev in batch:
            if isinstance(ev, ResultEvent):
                self._result_seen = True
                self.on_result(ev.results)
                return

    def _note_error(self, batch: list[Event]) -> None:
        for ev in batch:
            if isinstance(ev, ErrorEvent) and ev.fatal:
                msg = one_line(ev.msg).rstrip(". ")
                self.job_error = (msg[:297] + "...") if len(msg) > 300 else (msg or None)
                return

    async def _check_pod_alive(self) -> bool:
        """Before a reconnect: is the pod still RUNNING? A LabStop when it is not; False when
        the provider could not say (an API error is a reason to retry, not to end the lab)."""
        pod = self.pod
        assert pod.id is not None
        try:
            info = await asyncio.to_thread(pod.cloud.status, pod.id)
        except ProviderError as exc:
            self.stream.log(f"the pod's state could not be read ({one_line(exc)}); retrying",
                            "warning")
            return False
        if info.state.upper() != "RUNNING":
            pod.instance_event(info)
            outside = await asyncio.to_thread(pod.ended_from_outside, info.state)
            if outside:  # `tplab terminate` from another shell: the user's own stop
                raise LabStop(STOPPED, f"stopped by the user ({outside})")
            if info.state.upper() == POD_INTERRUPTED:  # the provider took it back (outbid)
                raise LabStop(INTERRUPTED, f"spot interruption: the pod {pod.id} went "
                              f"{info.state} ({info.note or 'its provider took it back'}); "
                              "what was measured before it is kept")
            if info.note:  # the provider says why
                raise LabStop(FAILED, f"the pod {pod.id} went {info.state} ({info.note}); "
                              "what was measured before it is kept")
            raise LabStop(FAILED, f"the pod {pod.id} is {info.state} (spot interruption "
                          "or watchdog); the run is lost")
        return True

    async def _touch(self) -> None:
        if self.sftp is None:
            return
        await remote.touch_heartbeat(self.sftp)
        self._last_touch = time.time()

    async def _heartbeat_loop(self) -> None:
        """Rewrite the pod's heartbeat file; say when it could not be (the pod's watchdog ends
        the pod after ``heartbeat_timeout_s`` without one), and when the pod sent lines that
        were dropped."""
        cfg, stream = self.config, self.stream
        failing_since: float | None = None
        seen_bad = 0
        while True:
            await asyncio.sleep(cfg.heartbeat_interval_s)
            age = (time.time() - self._last_touch) if self._last_touch else None
            try:
                await self._touch()
            except Exception as exc:  # noqa: BLE001 - the tail loop reconnects on a drop
                if failing_since is None:
                    failing_since = time.time()
                    stream.warn(f"the heartbeat could not be written on the pod "
                                f"({one_line(exc) or type(exc).__name__}); retrying — the pod's "
                                f"watchdog ends it after {cfg.heartbeat_timeout_s:.0f} s "
                                "without one")
            else:
                if failing_since is not None:
                    stream.log(f"heartbeat written again after {time.time() - failing_since:.0f}"
                               " s")
                    failing_since = None
            if age is not None:
                stream.emit("heartbeat", age_s=round(age, 3))
            bad = self.tail.bad_lines + self.tail.foreign
            if bad > seen_bad:
                stream.warn(f"dropped {bad - seen_bad} line(s) from the pod's event file that "
                            "were not valid job events (too long, not strict JSON, or not from "
                            "the job); the stream goes on")
                seen_bad = bad

    async def _watch_pod(self) -> None:
        """Notice a spot interruption (or a watchdog kill) while the job runs; each poll also
        refreshes the dashboard's instance fields (uptime_s, ssh endpoint)."""
        pod = self.pod
        assert pod.id is not None
        while True:
            await asyncio.sleep(self.config.status_poll_s)
            try:
                info = await asyncio.to_thread(pod.cloud.status, pod.id)
            except ProviderError:
                continue
            if info.state.upper() == "RUNNING":
                if info.ssh is None and pod.info is not None:
                    info = replace(info, ssh=pod.info.ssh)  # keep the endpoint in use
                pod.seen(info)
                continue
            pod.seen(info)
            outside = await asyncio.to_thread(pod.ended_from_outside, info.state)
            if outside:  # `tplab terminate` from another shell: the user's own stop
                self.stop(outside, STOPPED)
            elif info.state.upper() == POD_INTERRUPTED:  # the provider says it took it back
                self.stop(f"spot interruption: the pod went {info.state} ({info.note})",
                          INTERRUPTED)
            else:
                self.stop(f"the pod went {info.state} ({info.note})" if info.note else
                          f"the pod went {info.state} (a spot interruption, or its watchdog)",
                          FAILED)
            return

    # ---- after the job -----------------------------------------------------------------
    async def fetch(self, names: Sequence[str] = remote.FETCH_FILES) -> None:
        """Copy the run's files into the out dir (each within its size limit: the pod is
        untrusted); read results.json when it came, and refuse one that is not a JSON object."""
        report, stream = self.report, self.stream
        # each rank's own trace comes with the run's whole fetch, not with the teardown's few
        # files (bounded in time)
        folders = remote.FETCH_FOLDERS if tuple(names) == remote.FETCH_FILES else ()
        fetched = await remote.fetch(self.conn, report.out_dir, names, folders=folders)
        for name in fetched.got + fetched.trimmed:
            if name != EXIT_CODE:
                report.add_artifact(name)
        for name in fetched.trimmed:
            stream.warn(f"the pod's {name} was over its size limit: only its last part was "
                        "fetched")
        for name in fetched.refused:
            stream.warn(f"the pod's {name} was over its size limit and was not fetched")
        with contextlib.suppress(OSError):
            report.path(EXIT_CODE).unlink()
        if "results.json" not in fetched.got:
            return
        try:
            data = json.loads(report.path("results.json").read_text(encoding="utf-8"),
                              parse_constant=_refuse_constant)
        except (OSError, ValueError, RecursionError) as exc:
            raise LabStop(FAILED, f"the pod's results.json is not valid JSON ({one_line(exc)}); "
                          f"see {report.path('job.log')}") from None
        if not isinstance(data, dict):
            raise LabStop(FAILED, f"the pod's results.json is a JSON {_json_kind(data)}, not an "
                          f"object; see {report.path('job.log')}")
        report.take_results(data)

    def check_exit(self) -> None:
        """After fetch: what the job's end means for the lab (a LabStop when it failed)."""
        tail, stream, out = self.tail, self.stream, self.report.out_dir
        if tail.exit_code is None and tail.finished_seen_at is not None:
            stream.log("the job reported `finished` (results written, outputs matched); not "
                       "waiting for torchrun's teardown — the pod is terminated next")
        elif tail.exit_code != 0 and tail.finished_seen_at is not None:
            # the job wrote results.json and reported `finished` (outputs matched) before
            # torchrun's teardown failed: the numbers are whole, the exit is worth a look
            stream.warn(f"torchrun exited with code {tail.exit_code} after the job reported "
                        f"`finished` (results written, outputs matched); see {out / 'job.log'}")
        elif tail.exit_code != 0 and self.job_error:
            raise LabStop(FAILED, f"the job failed on the pod: {self.job_error}; see "
                          f"{out / 'job.log'} (exit code {tail.exit_code})")
        elif tail.exit_code != 0:
            raise LabStop(FAILED, f"the job exited with code {tail.exit_code}; see "
                          f"{out / 'job.log'}")

    def close(self) -> bool:
        """Close the connection (if any); True when there was one."""
        self.sftp = None
        if self.conn is None:
            return False
        with contextlib.suppress(Exception):
            self.conn.close()
        self.conn = None
        return True
