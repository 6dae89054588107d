"""The orchestrator: one async state machine that runs a lab and always terminates its pod.

Why one state machine: every way out of a lab — success, an error, Ctrl-C, SIGTERM, the
dashboard's terminate button, a lost connection, the dollar cap, a spot interruption — must
go through the same *terminate* and *verify gone* steps, then settle the budget and write the
manifest. ``run()`` runs the lab's body as a task and, whatever ends it, runs ``_teardown()``.
The one exception is ``detach()``, the dashboard's explicitly confirmed "leave it running": the
client side stops, the pod (guarded by its own watchdog) and its instance record stay, and the
outcome says so.

The lab emits one merged event stream (its own phases, instance and SSH state, cost ticks,
budget figures and warnings, plus every job event exactly once); ``subscribe()`` gives each
consumer (headless runner, dashboard) its own bounded queue that never blocks the lab.

Client side: no torch import. The Provider is synchronous (the runpod SDK is), so its calls run
in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator

from tplab import instance_store, remote
from tplab.cloud.base import (POD_NAME_PREFIX, AuthError, GoneProof, NoCapacityError,
                              PodInfo, PodSpec, Provider, ProviderError)
from tplab.events import Event, EventWriter
from tplab.lab_options import DEFAULT_GPU_TYPE
from tplab.budget import fmt_usd
from tplab.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS, tplab_home
from tplab.redact import redact

COMPLETE, FAILED, STUB = "COMPLETE", "FAILED", "EDUCATIONAL_STUB"
GONE_STATES = frozenset({"GONE", "TERMINATED", "DELETED"})


@dataclass
class LabConfig:
    """What one lab does; built by ``lab_options.config_from_args`` or by hand (tests, dashboard)."""
    mock: bool = False
    gpu_type: str = DEFAULT_GPU_TYPE
    gpus: int = 2
    spot: bool = True
    lab_cap_usd: float | None = None      # None: the budget config's lab cap (seed: $3)
    phase_cap_usd: float | None = None    # None: the budget config's phase cap
    num_prompts: int = 10
    new_tokens: int = 100
    warmup: int = 2
    instrumented_prompts: int = 3
    sweep: bool = True
    compile: bool = False
    out_dir: Path | None = None           # None: TPLAB_HOME/labs/<lab id>
    checkpoint: Path = DEFAULT_CHECKPOINT
    prompts: Path = DEFAULT_PROMPTS
    heartbeat_timeout_s: float = 600.0    # the pod's watchdog terminates it after this silence
    heartbeat_interval_s: float = 2.0
    wall_cap_s: float = 7200.0            # the seed's two-hour cap; the watchdog enforces it too
    boot_timeout_s: float = 600.0
    connect_timeout_s: float = 180.0      # per (re)connect
    keepalive_interval_s: float = 2.0
    keepalive_count_max: int = 2
    label: str | None = None              # ledger label; None: lab02-tp-spinup-<gpu>x<n>
    refuse_leftovers: bool = True         # headless: refuse to start while old pods live
    api_url: str | None = None            # an already running (mock) API to use
    remote_python: str | None = None      # None: python3 on a real pod, this python on the mock
    mock_options: dict[str, Any] = field(default_factory=dict)  # passed to start_mock_cloud
    finish_grace_s: float | None = 1.0    # after the job's `finished`, wait this long for torchrun
    cost_tick_s: float = 1.0
    status_poll_s: float = 3.0

    def ledger_label(self) -> str:
        if self.label:
            return self.label
        slug = re.sub(r"[^a-z0-9]+", "", self.gpu_type.lower().replace("nvidia", "")
                      .replace("geforce", ""))
        return f"lab02-tp-spinup-{slug or 'gpu'}x{self.gpus}"


@dataclass(frozen=True)
class LabOutcome:
    status: str                 # COMPLETE | FAILED | EDUCATIONAL_STUB
    reason: str
    out_dir: Path
    pod_id: str | None
    verified_gone: bool         # True when a pod existed and the provider showed it gone
    exit_code: int              # 0 only when COMPLETE and no pod is left


class LabStop(Exception):
    """Ends the lab's body with a status and a one-sentence reason."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _clean(text: str) -> str:
    """One line, no secrets, bounded length: for reasons shown to the user."""
    return redact(" ".join(str(text).split()))[:500]


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


def _prewarm_plotting() -> None:
    """Import matplotlib while the job runs, so the curve is drawn without that wait after it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401


async def verify_gone(provider: Provider, pod_id: str, timeout_s: float = 60.0) -> GoneProof:
    """Poll the provider until it no longer lists the pod (or the bound passes); the last proof."""
    deadline = time.monotonic() + timeout_s
    delay = 0.2
    while True:
        proof = await asyncio.to_thread(provider.verify_gone, pod_id)
        if proof.gone or time.monotonic() > deadline:
            return proof
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, 3.0)


async def terminate_and_verify(provider: Provider, pod_id: str, mock: bool,
                               timeout_s: float = 60.0) -> GoneProof:
    """Terminate a pod, verify it gone, and close its instance records when it is."""
    await asyncio.to_thread(provider.terminate, pod_id)
    proof = await verify_gone(provider, pod_id, timeout_s)
    if proof.gone:
        instance_store.mark(pod_id, instance_store.GONE, mock)
    return proof


class Lab:
    """One lab run. See the module docstring; the public API is used by `tplab run` and the TUI."""

    def __init__(self, config: LabConfig, provider: Provider | None = None) -> None:
        self.config = config
        self.provider = provider
        self.lab_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
        self.out_dir = Path(config.out_dir) if config.out_dir else \
            tplab_home(config.mock) / "labs" / self.lab_id
        self._writer = EventWriter(src="lab")
        self._subs: list[asyncio.Queue] = []
        self.dropped_events = 0
        self._stream_fh = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_reason: str | None = None
        self._stop_event: asyncio.Event | None = None
        self._detach_requested = False    # detach(): leave the pod running, stop the client
        self.detached = False             # True once run() ended by detaching (pod left alive)
        self._tearing_down = False
        self._own_mock = False            # run() started the mock cloud (it stops with run())
        self._status = FAILED
        self._reason = "the lab did not finish"
        # pod and money
        self.pod_id: str | None = None
        self.pod: PodInfo | None = None
        self.usd_per_hr: float | None = None
        self._create_future: asyncio.Future | None = None
        self._pod_created_at: float | None = None
        self._pod_gone_at: float | None = None
        self._record: instance_store.InstanceRecord | None = None
        self._guard = None
        self._auth_id: str | None = None
        self._authorized_usd: float = 0.0
        self._balance_before: float | None = None
        self._warned_80 = False
        self._proof: GoneProof | None = None
        self.verified_gone = False
        # transport
        self._client_key = None
        self._conn = None
        self._sftp = None
        self._last_touch: float | None = None
        self.tail = remote.TailState()
        self.job_events = 0
        self.ssh_drops = 0
        self.results: dict[str, Any] | None = None
        self.artifacts: dict[str, str] = {}
        self.timeline: dict[str, float] = {}
        self._cost: dict[str, float] = {}
        self._phase: str | None = None
        self._curve_task: asyncio.Task | None = None
        self._crossover: float | None = None

    # ------------------------------------------------------------------ events

    def subscribe(self, maxsize: int = 10_000) -> AsyncIterator[Event]:
        """Every event from now on, until ``done``. Events travel in batches (one per read from
        the pod, one per lab event); a consumer more than ``maxsize`` batches behind loses its
        oldest batch (counted in ``dropped_events``) — the lab itself never waits."""
        q: asyncio.Queue = asyncio.Queue(maxsize=maxsize)
        self._subs.append(q)

        async def gen() -> AsyncIterator[Event]:
            try:
                while True:
                    batch = await q.get()
                    if batch is None:
                        return
                    for ev in batch:
                        yield ev
            finally:
                with contextlib.suppress(ValueError):
                    self._subs.remove(q)
        return gen()

    def _publish(self, ev: Event, record: bool = True) -> None:
        if record and self._stream_fh is not None:
            self._stream_fh.write(ev.to_json() + "\n")
        self._publish_batch((ev,))

    def _publish_batch(self, batch: list[Event] | tuple[Event, ...]) -> None:
        if not batch:
            return
        for q in self._subs:
            try:
                q.put_nowait(batch)
            except asyncio.QueueFull:
                with contextlib.suppress(asyncio.QueueEmpty):
                    self.dropped_events += len(q.get_nowait() or ())
                q.put_nowait(batch)

    def _close_subs(self) -> None:
        """End every subscription (a full queue loses its oldest batch to make room)."""
        for q in list(self._subs):
            if q.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    self.dropped_events += len(q.get_nowait() or ())
            q.put_nowait(None)

    def _emit(self, type_: str, **fields: Any) -> Event:
        ev = self._writer.make(type_, **fields)
        self._publish(ev)
        return ev

    def _phase_(self, name: str, **extra: Any) -> None:
        self._phase = name
        self.timeline.setdefault(name, time.time())
        self._emit("phase", name=name, **extra)

    def _log(self, msg: str, level: str = "info") -> None:
        self._emit("log", level=level, msg=_clean(msg))

    def _instance_event(self, info: PodInfo | None, state: str | None = None) -> None:
        info = info or self.pod
        ssh = info.ssh if info else None
        self._emit("instance", state=state or (info.state if info else "UNKNOWN"),
                   pod_id=self.pod_id, provider=getattr(self.provider, "name", "?"),
                   gpu_type=self.config.gpu_type, gpu_count=self.config.gpus,
                   spot=self.config.spot, usd_per_hr=self.usd_per_hr,
                   ssh_host=ssh.host if ssh else None, ssh_port=ssh.port if ssh else None,
                   uptime_s=info.uptime_s if info else None)

    def _budget_event(self) -> None:
        if self._guard is None:
            return
        s = self._guard.summary()
        self._emit("budget", cap_usd=s.cap_usd, spent_usd=s.spent_usd, held_usd=s.held_usd,
                   remaining_usd=s.remaining_usd, authorized_usd=self._authorized_usd,
                   label=self.config.ledger_label())

    # ------------------------------------------------------------------ control

    def request_terminate(self, reason: str = "user") -> None:
        """Ask the lab to stop now (terminate + verify gone). Idempotent, safe from any thread."""
        loop = self._loop
        if loop is None:
            self._stop_reason = self._stop_reason or reason
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._request(reason)
        else:
            loop.call_soon_threadsafe(self._request, reason)

    def _request(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
            self._log(f"terminate requested: {reason}", "warning")
        if self._stop_event is not None:
            self._stop_event.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop_reason is not None

    def detach(self) -> None:
        """Leave the pod running and stop only the client side (SSH stream, heartbeat, cost ticks):
        no terminate. For the dashboard's explicitly confirmed "leave it running"; the pod's
        watchdog still ends it when the heartbeat goes stale or the wall cap passes.

        ``run()`` then returns FAILED ("detached: pod … left running", exit code 1), leaves the
        instance record open (the next start finds the pod as a leftover), records no actual
        spend (the authorization stays held in the ledger), and emits a ``warning`` with the
        command that ends the pod. Too late once terminate has begun, and before a pod exists
        there is nothing to leave: then the lab tears down as usual. In ``--mock`` mode with the
        mock cloud started by this lab, the pod ends with that mock cloud, which stops as
        ``run()`` returns (it could not outlive this process anyway); the warning says so.
        Idempotent, safe from any thread."""
        if self._tearing_down:
            return
        self._detach_requested = True
        loop = self._loop
        if loop is None or self._stop_event is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._stop_event.set()
        else:
            loop.call_soon_threadsafe(self._stop_event.set)

    def terminate_command(self) -> str:
        """The exact command that ends this lab's pod from a shell."""
        cmd = f"tplab terminate {self.pod_id or '<pod id>'}"
        if self.config.mock:
            cmd += " --mock"
            if self.config.api_url:
                cmd += f" --api-url {self.config.api_url}"
        return cmd

    # ------------------------------------------------------------------ leftovers

    def find_leftover_pods(self) -> list[PodInfo]:
        """Pods of earlier labs still alive: the provider's tplab pods plus open instance records."""
        if self.provider is None:
            return []
        found: dict[str, PodInfo] = {}
        for pod in self.provider.list_pods():
            if pod.id != self.pod_id and pod.state.upper() not in GONE_STATES:
                found[pod.id] = pod
        for rec in instance_store.open_records(self.config.mock):
            if rec.lab_id == self.lab_id or not rec.pod_id or rec.pod_id in found:
                continue
            try:
                info = self.provider.status(rec.pod_id)
            except ProviderError:
                continue
            if info.state.upper() in GONE_STATES:
                instance_store.mark(rec.pod_id, instance_store.GONE, self.config.mock)
            else:
                found[rec.pod_id] = info
        return list(found.values())

    async def terminate_pod(self, pod_id: str, timeout_s: float = 60.0) -> GoneProof:
        """Terminate one pod and poll until the provider shows it gone; returns the proof."""
        assert self.provider is not None
        return await terminate_and_verify(self.provider, pod_id, self.config.mock, timeout_s)

    async def _verify(self, pod_id: str, timeout_s: float) -> GoneProof:
        assert self.provider is not None
        return await verify_gone(self.provider, pod_id, timeout_s)

    # ------------------------------------------------------------------ run

    async def run(self) -> LabOutcome:
        """Run the lab to its end; never returns with a pod of this lab left alive if it can help it."""
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        if self._stop_reason is not None:
            self._stop_event.set()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._stream_fh = open(self.out_dir / "stream.jsonl", "w", encoding="utf-8",
                               buffering=1 << 16)
        self.artifacts["stream.jsonl"] = str(self.out_dir / "stream.jsonl")
        mock_cm = None
        try:
            if self.provider is None:
                if self.config.mock:
                    from tplab.mock_session import mock_session
                    mock_cm = mock_session(self.config)
                    self.provider = await mock_cm.__aenter__()
                    self._own_mock = not self.config.api_url
                else:
                    from tplab.mock_session import real_provider
                    self.provider = await asyncio.to_thread(real_provider, self.config)
            return await self._run_with_provider()
        except Exception as exc:  # provider could not even be built (no key, mock failed)
            self._status, self._reason = FAILED, _clean(str(exc)) or type(exc).__name__
            return await self._finish()
        finally:
            if mock_cm is not None:
                await mock_cm.__aexit__(None, None, None)
            if self._stream_fh is not None:
                self._stream_fh.close()
                self._stream_fh = None

    async def _run_with_provider(self) -> LabOutcome:
        body = asyncio.create_task(self._body(), name="lab-body")
        stopper = asyncio.create_task(self._stop_event.wait(), name="lab-stop")
        ticker = asyncio.create_task(self._cost_ticker(), name="lab-cost")
        cancelled = False
        try:
            try:
                await asyncio.wait({body, stopper}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                # run() itself was cancelled (e.g. the app is closing): still tear down,
                # unless the pod is being left running on purpose (detach)
                cancelled = True
                if not self._detach_requested:
                    self._request("the lab task was cancelled")
            detach = self._detach_requested and self._stop_reason is None
            if not body.done():
                body.cancel()
            try:
                await body
                self._status, self._reason = COMPLETE, "the lab completed"
                if self.tail.exit_code not in (None, 0) and self.tail.finished_seen_at is None:
                    self._status = FAILED
                    self._reason = f"the job exited with status {self.tail.exit_code}"
            except LabStop as stop:
                self._status, self._reason = stop.status, stop.reason
            except asyncio.CancelledError:
                self._status = FAILED
                why = self._stop_reason or ("detach requested before a pod existed"
                                            if self._detach_requested else "cancelled")
                self._reason = f"terminated on request ({why})"
            except Exception as exc:
                self._status = FAILED
                self._reason = _clean(f"{type(exc).__name__}: {exc}")
            if detach and self.pod_id is not None:
                await self._detach_client()
            else:
                await self._teardown()
        finally:
            stopper.cancel()
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ticker
        outcome = await self._finish()
        if cancelled:
            raise asyncio.CancelledError
        return outcome

    # ------------------------------------------------------------------ the body

    async def _body(self) -> None:
        cfg = self.config
        prov = self.provider
        assert prov is not None
        self._phase_("preflight", num_prompts=cfg.num_prompts, new_tokens=cfg.new_tokens,
                     world_size=cfg.gpus, lab_id=self.lab_id, mock=cfg.mock)
        for path, what in ((cfg.checkpoint, "checkpoint"), (cfg.prompts, "prompts file")):
            if not Path(path).is_file():
                raise LabStop(FAILED, f"the {what} {path} does not exist; pass an existing file")
        from tplab.budget import BudgetConfig, BudgetGuard
        bconf = BudgetConfig.load(mock=cfg.mock).with_overrides(
            lab_cap_usd=cfg.lab_cap_usd, phase_cap_usd=cfg.phase_cap_usd)
        self._guard = BudgetGuard.from_config(bconf, mock=cfg.mock)
        lab_cap = bconf.lab_cap_usd
        self._budget_event()
        pre = self._guard.check_preflight(lab_cap, bconf.preflight_buffer_usd)
        if not pre.ok:
            raise LabStop(FAILED, pre.message)
        self._log(pre.message)

        leftovers = await asyncio.to_thread(self.find_leftover_pods)
        if leftovers:
            desc = ", ".join(f"{p.id} ({p.state}"
                             + (f", ${p.usd_per_hr:.2f}/h" if p.usd_per_hr else "") + ")"
                             for p in leftovers)
            self._emit("warning", msg=f"pods of earlier labs are still alive: {desc}",
                       pods=[p.id for p in leftovers])
            if cfg.refuse_leftovers:
                ids = " ".join(p.id for p in leftovers)
                raise LabStop(FAILED, f"pods of earlier labs are still alive ({desc}); "
                              f"terminate them with `tplab terminate {ids}`"
                              f"{' --mock' if cfg.mock else ''} (or `--all`) and start again")

        quote = await asyncio.to_thread(prov.quote, cfg.gpu_type, cfg.gpus)
        if cfg.spot:
            price, available = quote.spot_usd_per_hr, quote.spot_available
            kind = "spot"
        else:
            price, available = quote.on_demand_usd_per_hr, quote.on_demand_available
            kind = "on-demand"
        if not available or price is None:
            extra = ""
            if cfg.spot and quote.on_demand_available:
                extra = " (on-demand exists, but the lab is spot-only by default: --on-demand)"
            raise LabStop(STUB, f"no {kind} capacity for {cfg.gpus}x {cfg.gpu_type} right now"
                          f"{extra}; nothing was created")
        self.usd_per_hr = float(price)
        worst = self.usd_per_hr * cfg.wall_cap_s / 3600.0
        if worst > lab_cap + 1e-9:
            raise LabStop(STUB, f"the {kind} price ${self.usd_per_hr:.3f}/h for "
                          f"{cfg.wall_cap_s / 3600:.2f} h (the wall cap) could cost "
                          f"${worst:.2f}, above the lab cap ${lab_cap:.2f}; nothing was created")
        self._log(f"{kind} quote ${self.usd_per_hr:.3f}/h; worst case ${worst:.2f} "
                  f"within the lab cap ${lab_cap:.2f}")

        self._phase_("authorize", amount_usd=lab_cap, label=cfg.ledger_label())
        from tplab.budget import BudgetGuardExceeded
        try:
            self._auth_id = await asyncio.to_thread(self._guard.authorize, cfg.ledger_label(),
                                                    lab_cap)
        except BudgetGuardExceeded as exc:
            raise LabStop(FAILED, _clean(str(exc))) from None
        self._authorized_usd = lab_cap
        self._budget_event()
        try:
            self._balance_before = await asyncio.to_thread(prov.balance)
        except ProviderError:
            self._balance_before = None

        # ---- create: intent first, pod id the moment it is known
        self._phase_("create")
        self._client_key = remote.generate_client_key()
        name = f"{POD_NAME_PREFIX}{self.lab_id}"
        self._record = instance_store.InstanceRecord(
            lab_id=self.lab_id, label=cfg.ledger_label(), pod_name=name,
            provider=getattr(prov, "name", "?"), gpu_type=cfg.gpu_type, gpu_count=cfg.gpus,
            spot=cfg.spot, usd_per_hr=self.usd_per_hr, out_dir=str(self.out_dir), mock=cfg.mock)
        self._save_record()
        spec = PodSpec(name=name, gpu_type=cfg.gpu_type, gpu_count=cfg.gpus,
                       public_key=remote.public_key_line(self._client_key), spot=cfg.spot,
                       bid_usd_per_gpu_hr=(self.usd_per_hr / cfg.gpus) if cfg.spot else None)
        self._create_future = asyncio.ensure_future(asyncio.to_thread(prov.create, spec))
        try:
            info = await asyncio.shield(self._create_future)
        except NoCapacityError as exc:
            raise LabStop(STUB, _clean(f"{exc} Nothing was created.")) from None
        self._adopt_pod(info)

        # ---- boot: poll so a terminate request is honoured at once
        self._phase_("boot")
        info = await self._wait_ready()

        # ---- connect, upload, launch
        self._phase_("connect")
        await self._connect(info)
        self._phase_("upload")
        sent = await remote.upload(self._conn, self._bundle())
        self._log(f"uploaded {sent / 1e6:.2f} MB by SFTP")
        self._phase_("run")
        await remote.launch(self._conn, self._launch_spec())
        prewarm = asyncio.create_task(asyncio.to_thread(_prewarm_plotting), name="lab-prewarm")
        hb = asyncio.create_task(self._heartbeat_loop(), name="lab-heartbeat")
        watch = asyncio.create_task(self._watch_pod(), name="lab-watch")
        try:
            await self._stream_job()
        finally:
            hb.cancel()
            watch.cancel()
            for t in (hb, watch, prewarm):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

        self._phase_("fetch")
        await self._fetch()
        if self.tail.exit_code is None and self.tail.finished_seen_at is not None:
            self._log("the job reported `finished` (results written, outputs matched); not "
                      "waiting for torchrun's teardown — the pod is terminated next")
        elif self.tail.exit_code != 0 and self.tail.finished_seen_at is not None:
            # the job wrote results.json and reported `finished` (outputs matched) before
            # torchrun's teardown failed: the numbers are whole, the exit is worth a look
            self._emit("warning", msg=f"torchrun exited with code {self.tail.exit_code} after the "
                       f"job reported `finished` (results written, outputs matched); see "
                       f"{self.out_dir / 'job.log'}")
        elif self.tail.exit_code != 0:
            raise LabStop(FAILED, f"the job exited with code {self.tail.exit_code}; see "
                          f"{self.out_dir / 'job.log'}")

    def _adopt_pod(self, info: PodInfo) -> None:
        self.pod = info
        self.pod_id = info.id
        self._pod_created_at = time.time()
        if info.usd_per_hr:
            self.usd_per_hr = float(info.usd_per_hr)
        if self._record is not None:
            self._record.pod_id = info.id
            self._record.state = instance_store.CREATED
            self._record.created_at = self._pod_created_at
            self._save_record()
        self._instance_event(info)

    def _save_record(self) -> None:
        if self._record is not None:
            instance_store.save(self._record, [self.out_dir / "instance.json"])
            self.artifacts["instance.json"] = str(self.out_dir / "instance.json")

    async def _wait_ready(self) -> PodInfo:
        assert self.provider is not None and self.pod_id is not None
        deadline = time.monotonic() + self.config.boot_timeout_s
        last_state, last_ssh = None, None
        while True:
            try:
                info = await asyncio.to_thread(self.provider.status, self.pod_id)
            except AuthError:
                raise
            except ProviderError as exc:  # a passing API error: keep waiting, within the bound
                self._log(f"reading the pod's status failed ({exc}); retrying", "warning")
                if time.monotonic() > deadline:
                    raise LabStop(FAILED, f"the pod {self.pod_id} could not be read within "
                                  f"{self.config.boot_timeout_s:.0f} s ({exc})") from None
                await asyncio.sleep(1.0)
                continue
            if info.state != last_state or info.ssh != last_ssh:
                # on every state change, and once more when SSH appears: the `ready` event
                # carries ssh_host, ssh_port and uptime_s
                last_state, last_ssh = info.state, info.ssh
                self.pod = info
                self._instance_event(info)
            if info.state.upper() in GONE_STATES or info.state.upper() == "EXITED":
                raise LabStop(FAILED, f"the pod {self.pod_id} went {info.state} while booting "
                              "(spot interruption?)")
            if info.state.upper() == "RUNNING" and info.ssh is not None:
                self.pod = info
                if self._record is not None:
                    self._record.ssh_host, self._record.ssh_port = info.ssh.host, info.ssh.port
                    self._save_record()
                return info
            if time.monotonic() > deadline:
                raise LabStop(FAILED, f"the pod {self.pod_id} was not ready within "
                              f"{self.config.boot_timeout_s:.0f} s")
            await asyncio.sleep(0.25)

    async def _connect(self, info: PodInfo) -> None:
        cfg = self.config
        assert info.ssh is not None
        self._emit("ssh", state="connecting", host=info.ssh.host, port=info.ssh.port)
        opts = remote.ConnectOptions(
            host=info.ssh.host, port=info.ssh.port, user=info.ssh.user, pod_id=info.id,
            known_hosts_dir=tplab_home(cfg.mock) / "known_hosts",
            timeout_s=cfg.connect_timeout_s, keepalive_interval=cfg.keepalive_interval_s,
            keepalive_count_max=cfg.keepalive_count_max)
        try:
            self._conn = await remote.connect(
                opts, self._client_key,
                on_attempt=lambda n, why: self._log(f"ssh attempt {n}: {why}", "debug"))
        except remote.RemoteError as exc:
            self._emit("ssh", state="closed")
            raise LabStop(FAILED, str(exc)) from None
        self._emit("ssh", state="connected", host=info.ssh.host, port=info.ssh.port)

    def _bundle(self) -> list[remote.UploadItem]:
        from tplab.bundle import bundle_items
        return bundle_items(self.config.checkpoint, self.config.prompts)

    def _launch_spec(self) -> remote.LaunchSpec:
        cfg = self.config
        args = ["--checkpoint", "checkpoint.pt", "--prompts", "prompts.txt", "--out", ".",
                "--num-prompts", str(cfg.num_prompts), "--new-tokens", str(cfg.new_tokens),
                "--warmup", str(cfg.warmup),
                "--instrumented-prompts", str(min(cfg.instrumented_prompts, cfg.num_prompts))]
        if not cfg.sweep:
            args.append("--no-sweep")
        if cfg.compile:
            args.append("--compile")
        python = cfg.remote_python or (sys.executable if cfg.mock else "python3")
        return remote.LaunchSpec(nproc=cfg.gpus, job_args=args, python=python,
                                 heartbeat_stale_s=cfg.heartbeat_timeout_s,
                                 wall_cap_s=cfg.wall_cap_s, started_at=self._pod_created_at)

    async def _stream_job(self) -> None:
        """Tail the job's events to the end, reconnecting (and resuming) after drops."""
        import asyncssh
        idle_drops = 0
        while not self.tail.finished:
            if self._conn is None:
                if idle_drops >= 10:
                    raise LabStop(FAILED, "the SSH connection kept dropping without progress "
                                  f"({idle_drops} times); the pod is being terminated")
                self._emit("ssh", state="connecting")
                await self._check_pod_alive()
                try:
                    await self._connect(self.pod)
                except LabStop:
                    await self._check_pod_alive()  # say "the pod went X" when that is why
                    raise
            pos_before = self.tail.read_pos
            try:
                async with self._conn.start_sftp_client() as sftp:
                    self._sftp = sftp
                    await self._touch()
                    async for batch in remote.tail_events(
                            sftp, self.tail, finish_grace_s=self.config.finish_grace_s):
                        raw = self.tail.last_raw
                        if raw and self._stream_fh is not None:
                            self._stream_fh.write(raw.decode("utf-8"))  # as the job wrote it
                        elif self._stream_fh is not None:
                            for ev in batch:
                                self._stream_fh.write(ev.to_json() + "\n")
                        self.job_events += len(batch)
                        self._publish_batch(batch)
                        if self._curve_task is None:
                            for ev in batch:
                                if ev.type == "result":
                                    # draw the curve while torchrun winds down and the pod goes
                                    self._curve_task = asyncio.create_task(asyncio.to_thread(
                                        self._write_curve, ev["results"]))
            except (asyncssh.Error, OSError) as exc:
                idle_drops = idle_drops + 1 if self.tail.read_pos == pos_before else 1
                self.ssh_drops += 1
                self._sftp = None
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
                self._emit("ssh", state="dropped", reason=_clean(type(exc).__name__),
                           drops=self.ssh_drops, resume_offset=self.tail.read_pos)
        self._sftp = None
        if self.tail.duplicates or self.tail.gaps:
            self._log(f"event stream: {self.tail.duplicates} duplicates dropped, "
                      f"{self.tail.gaps} gaps", "warning")

    async def _check_pod_alive(self) -> None:
        assert self.provider is not None and self.pod_id is not None
        info = await asyncio.to_thread(self.provider.status, self.pod_id)
        if info.state.upper() != "RUNNING":
            self._instance_event(info)
            raise LabStop(FAILED, f"the pod {self.pod_id} is {info.state} (spot interruption "
                          "or watchdog); the run is lost")

    async def _touch(self) -> None:
        if self._sftp is None:
            return
        await remote.touch_heartbeat(self._sftp)
        self._last_touch = time.time()

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_interval_s)
            age = (time.time() - self._last_touch) if self._last_touch else None
            try:
                await self._touch()
            except Exception:
                pass  # the tail loop sees the drop and reconnects
            if age is not None:
                self._emit("heartbeat", age_s=round(age, 3))

    async def _watch_pod(self) -> None:
        """Notice a spot interruption (or a watchdog kill) while the job runs; each poll also
        refreshes the dashboard's instance fields (uptime_s, ssh endpoint)."""
        assert self.provider is not None and self.pod_id is not None
        while True:
            await asyncio.sleep(self.config.status_poll_s)
            try:
                info = await asyncio.to_thread(self.provider.status, self.pod_id)
            except ProviderError:
                continue
            if info.state.upper() == "RUNNING":
                if info.ssh is None and self.pod is not None:
                    info = replace(info, ssh=self.pod.ssh)  # keep the endpoint in use
                self.pod = info
                self._instance_event(info)
                continue
            self.pod = info
            self._instance_event(info)
            self.request_terminate(f"the pod went {info.state} (a spot interruption, or "
                                   "its watchdog)")
            return

    async def _fetch(self) -> None:
        got = await remote.fetch(self._conn, self.out_dir)
        for name in got:
            if name != "exit_code":
                self.artifacts[name] = str(self.out_dir / name)
        rp = self.out_dir / "results.json"
        if rp.is_file():
            try:
                self.results = json.loads(rp.read_text())
            except ValueError:
                self.results = None
        code = self.out_dir / "exit_code"
        with contextlib.suppress(OSError):
            code.unlink()

    # ------------------------------------------------------------------ cost

    async def _cost_ticker(self) -> None:
        """Accrued $ at the quoted price, time left before the cap; 80% warning; cap → stop."""
        n = 0
        while True:
            await asyncio.sleep(self.config.cost_tick_s)
            if self._pod_created_at is None or self.usd_per_hr is None:
                continue
            end = self._pod_gone_at or time.time()
            accrued = self.usd_per_hr * (end - self._pod_created_at) / 3600.0
            cap = self._authorized_usd
            left = max(0.0, (cap - accrued) / self.usd_per_hr * 3600.0) if cap else 0.0
            wall_left = self.config.wall_cap_s - (end - self._pod_created_at)
            self._cost = {"accrued_usd": accrued, "seconds_left": min(left, max(0.0, wall_left))}
            self._emit("cost", accrued_usd=round(accrued, 6), usd_per_hr=self.usd_per_hr,
                       seconds_left=round(self._cost["seconds_left"], 1),
                       authorized_usd=cap)
            n += 1
            if n % 5 == 0:
                await asyncio.to_thread(self._budget_event)
            if self._pod_gone_at is not None:
                continue
            if cap and accrued >= 0.8 * cap and not self._warned_80:
                self._warned_80 = True
                self._emit("warning", msg=f"budget alert: {fmt_usd(accrued)} accrued, 80% of "
                           f"the lab's {fmt_usd(cap)} authorization", kind="budget80")
            if cap and accrued >= cap:
                self.request_terminate(f"the lab cap {fmt_usd(cap)} was reached")
            elif wall_left <= 0:
                self.request_terminate(f"the wall-clock cap {self.config.wall_cap_s:.0f} s "
                                       "was reached")

    # ------------------------------------------------------------------ teardown

    async def _teardown(self) -> None:
        """Terminate and verify gone (whatever happened), then settle the budget."""
        self._tearing_down = True
        prov = self.provider
        if self._sftp is not None:
            self._sftp = None
        if self._create_future is not None and self.pod_id is None:
            # create was in flight when the lab was stopped: wait for it to learn the pod id
            try:
                info = await self._create_future
                self._adopt_pod(info)
            except Exception:
                pass
        if self.pod_id is None and self._record is not None and prov is not None:
            # create failed in a way that might still have made a pod: look for it by name
            with contextlib.suppress(Exception):
                for pod in await asyncio.to_thread(prov.list_pods):
                    if pod.name == self._record.pod_name:
                        self._adopt_pod(pod)
        if self._conn is not None:
            if self._status != COMPLETE and not self.artifacts:
                # save what the pod has before it goes (best effort, bounded)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._fetch(), 15)
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
            self._emit("ssh", state="closed")
        if self.pod_id is not None and prov is not None:
            self._phase_("terminate", pod_id=self.pod_id)
            for attempt in range(5):
                try:
                    await asyncio.to_thread(prov.terminate, self.pod_id)
                    break
                except Exception as exc:  # noqa: BLE001 - keep trying whatever went wrong
                    self._log(f"terminate attempt {attempt + 1} failed: {exc}", "warning")
                    await asyncio.sleep(1 + attempt)
            self._phase_("verify", pod_id=self.pod_id)
            try:
                self._proof = await self._verify(self.pod_id, 120.0)
            except Exception as exc:  # noqa: BLE001 - reported, and the exit is non-zero
                self._log(f"could not verify the pod is gone: {exc}", "error")
                self._proof = None
            self._pod_gone_at = time.time()
            self.verified_gone = bool(self._proof and self._proof.gone)
            self._write_proof()
            if self.verified_gone:
                self._instance_event(None, state="GONE")
                if self._record is not None:
                    self._record.state = instance_store.GONE
                    self._record.ended_at = self._pod_gone_at
                    self._save_record()
            else:
                self._emit("warning", msg=f"pod {self.pod_id} could not be verified gone; "
                           f"run `tplab terminate {self.pod_id}` and check the provider console")
        elif self._record is not None:
            self._record.state = instance_store.NOT_CREATED
            self._record.ended_at = time.time()
            self._save_record()
        await self._settle()

    async def _detach_client(self) -> None:
        """detach(): close the client side and leave the pod, its record and its hold open."""
        self._tearing_down = True
        self.detached = True
        self._sftp = None
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
            self._emit("ssh", state="closed")
        if self._record is not None:
            self._record.note = _clean(f"detached at {_iso(time.time())}: left running on "
                                       "request; its watchdog still guards it")
            self._save_record()
        cmd = self.terminate_command()
        self._status = FAILED
        self._reason = f"detached: pod {self.pod_id} left running; end it with `{cmd}`"
        if self.config.mock and self._own_mock:
            tail = ("; in --mock the pod lives only as long as its mock cloud: the mock cloud "
                    "this lab started stops as the lab ends, and mock pod "
                    f"{self.pod_id} ends with it")
        else:
            tail = (f"; its watchdog terminates it after {self.config.heartbeat_timeout_s:.0f} s "
                    f"without a heartbeat or at the {self.config.wall_cap_s:.0f} s wall cap")
        self._emit("warning", kind="detached", pod_id=self.pod_id, command=cmd,
                   msg=f"pod {self.pod_id} is left running (not terminated); end it with "
                       f"`{cmd}`{tail}. No actual spend was recorded: the "
                       f"{fmt_usd(self._authorized_usd)} authorization stays held "
                       "(see `tplab budget`)")
        self._budget_event()

    def _write_proof(self) -> None:
        proof = self._proof
        data = {
            "pod_id": self.pod_id,
            "provider": getattr(self.provider, "name", "?"),
            "verified_gone": self.verified_gone,
            "checked_at": proof.checked_at if proof else None,
            "listed": proof.listed if proof else None,
            "answer": proof.answer if proof else None,
            "terminate_requested_at": _iso(self.timeline.get("terminate")),
            "note": "the provider's own answer for this pod after terminate, and whether it "
                    "still appeared in the provider's list of pods",
        }
        path = self.out_dir / "proof-terminated.json"
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        self.artifacts["proof-terminated.json"] = str(path)

    async def _settle(self) -> None:
        if self._guard is None or self._auth_id is None:
            return
        self._phase_("record")
        label = self.config.ledger_label()
        try:
            if self.pod_id is None:
                await asyncio.to_thread(self._guard.release, label, self._auth_id)
                self._log("authorization released: no pod was created")
            else:
                end = self._pod_gone_at or time.time()
                start = self._pod_created_at or end
                report = await asyncio.to_thread(
                    self.provider.actual_cost, self.pod_id, self._balance_before, start, end,
                    self.usd_per_hr or 0.0)
                self._cost["actual_usd"] = report.actual_usd
                self._cost["cost_note"] = report.note
                await asyncio.to_thread(self._guard.record_actual, label,
                                        max(0.0, report.actual_usd), self._auth_id)
                self._log(f"actual spend ${report.actual_usd:.4f} recorded ({report.note})")
        except Exception as exc:
            self._emit("warning", msg=_clean(f"the ledger could not be settled: {exc}; "
                                             "see `tplab budget`"))
        self._budget_event()

    async def _finish(self) -> LabOutcome:
        self._phase_("manifest")
        try:
            if self._curve_task is not None:
                await self._curve_task
            elif self.results:
                await asyncio.to_thread(self._write_curve, self.results)
        except Exception as exc:
            self._emit("warning", msg=_clean(f"the scaling curve could not be drawn: {exc}"))
        try:
            self._write_manifest()
        except Exception as exc:
            self._emit("warning", msg=_clean(f"the manifest could not be written: {exc}"))
        pod_ok = self.pod_id is None or self.verified_gone
        if self.pod_id is not None and not self.verified_gone and self._status == COMPLETE:
            self._status = FAILED
            self._reason = f"the pod {self.pod_id} could not be verified gone"
        code = 0 if (self._status == COMPLETE and pod_ok) else (3 if self._status == STUB else 1)
        self._emit("phase", name="done", status=self._status, reason=self._reason,
                   out_dir=str(self.out_dir), pod_id=self.pod_id,
                   verified_gone=self.verified_gone, exit_code=code,
                   manifest=str(self.out_dir / "manifest.json"))
        if self._stream_fh is not None:
            self._stream_fh.flush()
        self._close_subs()
        return LabOutcome(self._status, self._reason, self.out_dir, self.pod_id,
                          self.verified_gone, code)

    # ------------------------------------------------------------------ artifacts

    def _write_curve(self, results: dict[str, Any]) -> None:
        from tplab.lab_artifacts import write_scaling_curve
        path, self._crossover = write_scaling_curve(results, self.out_dir, self.config.gpu_type)
        if path:
            self.artifacts["scaling-curve.png"] = str(path)

    def _write_manifest(self) -> None:
        from tplab.lab_artifacts import write_lab_manifest
        path = write_lab_manifest(self, self._crossover)
        self.artifacts["manifest.json"] = str(path)

    def add_artifact(self, name: str) -> Path | None:
        """List a file saved in the out dir after the lab ended (the dashboard's
        ``proof-terminated.svg``): add it to ``artifacts`` and re-write manifest.json (whose
        ``terminated_screenshot`` prefers the SVG). Returns the manifest's path, or None when
        ``name`` is not a file directly in the out dir."""
        path = self.out_dir / name
        if Path(name).name != name or not path.is_file():
            return None
        self.artifacts[name] = str(path)
        self._write_manifest()
        return self.out_dir / "manifest.json"

    def summary(self) -> dict[str, Any]:
        """Figures for the final table and the manifest (from the job's results when present)."""
        return {
            "lab_id": self.lab_id, "status": self._status, "reason": self._reason,
            "pod_id": self.pod_id, "verified_gone": self.verified_gone,
            "usd_per_hr": self.usd_per_hr, "authorized_usd": self._authorized_usd,
            "actual_usd": self._cost.get("actual_usd"), "cost_note": self._cost.get("cost_note"),
            "start_ts": self._pod_created_at, "end_ts": self._pod_gone_at,
            "job_events": self.job_events, "ssh_drops": self.ssh_drops,
            "duplicates": self.tail.duplicates, "gaps": self.tail.gaps,
            "results": self.results, "artifacts": dict(self.artifacts),
        }
