"""The orchestrator: one async state machine that runs a lab and always terminates its pod.

Why one state machine: every way out of a lab — success, an error, Ctrl-C, SIGTERM, the
dashboard's terminate button, a lost connection, the dollar cap, a spot interruption — must
go through the same *terminate* and *verify gone* stages, then settle the budget and write the
manifest. ``run()`` runs the lab's body as a task and, whatever ends it, runs the teardown.
The one exception is ``detach()``, the dashboard's explicitly confirmed "leave it running": the
client side stops, the pod (guarded by its own watchdog) and its instance record stay, and the
outcome says so.

The ``Lab`` builds the owners of a lab's parts — its config (``LabConfig``), its stream
(``LabStream``), its money (``LabMoney``), its pod and the pod's end (``LabPod``), the SSH
session with the pod (``PodSession``) and its report (``LabReport``) — and runs the lab's stages
in order, each in a module of its own (``preflight``, ``provision``, ``ssh_session``, ``cost``,
``teardown``, ``artifacts``), handing each the owners it needs and no more. This class holds
only the order, the control (stop, detach) and the public API that the two faces (``tplab
run``, ``tplab-tui``) use.

Client side: no torch import. The Provider is synchronous (cloud SDKs are), so its calls run
in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from tplab.money.budget_config import BudgetError
from tplab.cloud.base import GoneProof, PodInfo, Provider, ProviderError
from tplab.figures.lab_figures import LabFigures
from tplab.records.events import Event, FiguresEvent
from tplab.lab import artifacts, leftovers, preflight, provision, teardown
from tplab.lab.lab_config import (COMPLETE, FAILED, INTERRUPTED, STOPPED, LabConfig, LabOutcome, LabStop,
                              exit_code)
from tplab.lab.cost import cost_ticker
from tplab.lab.job_check import check_job_inputs
from tplab.lab.pod import LabPod
from tplab.lab.prediction import LabPrediction, predict_lab
from tplab.lab.report import LabReport
from tplab.lab.ssh_session import PodSession
from tplab.lab.stream import LabStream
from tplab.money.lab_money import LabMoney
from tplab.home import lab_folders
from tplab.home.paths import tplab_home
from tplab.keys.redact import one_line
from tplab.wire.remote import RemoteError, quiet_lost_connections

def failure_sentence(exc: BaseException, out_dir: Path) -> str:
    """The reason shown for an error that ended a lab: the error's own sentence when it is one
    of ours (provider, SSH, budget: written for users; no class names), else a bug report."""
    msg = one_line(exc)
    if isinstance(exc, (ProviderError, RemoteError, BudgetError, OSError)) and msg:
        return msg
    return one_line(f"tplab hit an unexpected error ({msg or type(exc).__name__}); this is a "
                    f"bug: report it with {out_dir / 'stream.jsonl'}")


def _prewarm_plotting() -> None:
    """Import matplotlib while the pod boots, so the proof picture and the curve are drawn
    without that wait at the lab's end. While the pod boots the client only polls (for minutes
    on a real cloud); once the job runs, a mock lab's pod is this machine, whose cores its
    ranks need. A failure here is no failure: the drawing imports it again and says so."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except Exception:  # noqa: BLE001 - see above
        pass


class Lab:
    """One lab run. See the module docstring; the public API is used by `tplab run` and the TUI."""

    def __init__(self, config: LabConfig, provider: Provider | None = None) -> None:
        self.config = config
        self.lab_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
        out_dir = Path(config.out_dir) if config.out_dir else \
            tplab_home(config.mock) / "labs" / self.lab_id
        self.stream = LabStream()
        self.report = LabReport(self.lab_id, out_dir)
        self.money = LabMoney()
        self.pod = LabPod(self.lab_id, config, self.stream, self.report)
        self.provider = provider
        if provider is not None:
            self.pod.use(provider)
        self.session: PodSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_reason: str | None = None
        #: how a lab cancelled by a stop request ends: STOPPED (the user asked), FAILED (the lab's
        #: own stop: a cap, a lost pod) or INTERRUPTED (the provider took the spot instance back)
        self._stop_status = FAILED
        self._stop_event: asyncio.Event | None = None
        self._detach_requested = False    # detach(): leave the pod running, stop the client
        self.detached = False             # True once run() ended by detaching (pod left alive)
        self._tearing_down = False
        self._own_mock = False            # run() started the mock cloud (it stops with run())
        self._prediction_task: asyncio.Task | None = None
        self._prediction: LabPrediction | None = None
        self._figures: LabFigures | None = None
        self._prewarm: asyncio.Task | None = None

    # ------------------------------------------------------------------ read-only views
    @property
    def out_dir(self) -> Path:
        return self.report.out_dir

    @property
    def pod_id(self) -> str | None:
        return self.pod.id

    @property
    def verified_gone(self) -> bool:
        return self.pod.verified_gone

    @property
    def results(self) -> dict[str, Any] | None:
        return self.report.results

    @property
    def artifacts(self) -> dict[str, str]:
        return self.report.artifacts

    @property
    def ssh_drops(self) -> int:
        return self.report.transport.ssh_drops

    @property
    def dropped_events(self) -> int:
        return self.stream.dropped_events

    @property
    def stage_times(self) -> dict[str, float]:
        """When each of the lab's stages began (epoch s)."""
        return self.stream.stage_times

    def summary(self) -> dict[str, Any]:
        """Figures for the final table (the manifest reads the owners themselves)."""
        report, pod, transport = self.report, self.pod, self.report.transport
        return {
            "lab_id": self.lab_id, "status": report.status, "reason": report.reason,
            "pod_id": pod.id, "verified_gone": pod.verified_gone,
            "usd_per_hr": pod.usd_per_hr, **self.money.manifest_fields(),
            "start_ts": pod.created_at, "end_ts": pod.gone_at,
            "job_events": transport.job_events, "ssh_drops": transport.ssh_drops,
            "duplicates": transport.duplicates, "gaps": transport.gaps,
            "results": report.results, "artifacts": dict(report.artifacts),
            "partial": report.partial_figures(),
        }

    def subscribe(self, maxsize: int = 10_000) -> AsyncIterator[Event]:
        """Every event from now on, until ``done`` (see ``tplab.lab.stream``)."""
        return self.stream.subscribe(maxsize)

    # ------------------------------------------------------------------ control
    def request_terminate(self, reason: str = "user", by_user: bool = True) -> None:
        """Ask the lab to stop now (terminate + verify gone). Idempotent, safe from any thread.
        ``by_user``: the user asked (TERMINATE, Ctrl-C, a signal), so a lab without results ends
        STOPPED; the lab's own stops (a cap, a lost pod) pass False and end FAILED."""
        self._stop(reason, STOPPED if by_user else FAILED)

    def _stop(self, reason: str, status: str) -> None:
        """A stop asked by a part of the lab (``StopRequest``: the cost ticker, the watch on the
        pod), or by the user: ends the lab ``status`` (a provider taking the spot instance back
        ends it INTERRUPTED). Idempotent, safe from any thread."""
        if not self._in_loop(self._request, reason, status) and self._stop_reason is None:
            self._stop_reason, self._stop_status = reason, status

    def _request(self, reason: str, status: str = STOPPED) -> None:
        if self._stop_reason is None:
            self._stop_reason, self._stop_status = reason, status
            self.stream.log(f"terminate requested: {reason}", "warning")
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
        if self._stop_event is not None:
            self._in_loop(self._stop_event.set)

    def _in_loop(self, fn: Callable[..., None], *args: Any) -> bool:
        """Call ``fn(*args)`` on the lab's loop: now when this is that loop's thread, else
        thread-safely. False (and nothing called) before ``run()`` has started."""
        loop = self._loop
        if loop is None:
            return False
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)
        return True

    def terminate_command(self) -> str:
        """The exact command that ends this lab's pod from a shell."""
        return self.config.terminate_command(self.pod_id)

    # ------------------------------------------------------------------ leftovers
    def find_leftover_pods(self) -> list[PodInfo]:
        """Pods of earlier labs still alive: the provider's tplab pods plus open instance records."""
        if self.provider is None:
            return []
        return [p.info for p in leftovers.live_pods(self.provider, self.config.mock,
                                                    exclude_pod=self.pod_id,
                                                    exclude_lab=self.lab_id)]

    async def terminate_pod(self, pod_id: str, timeout_s: float | None = None) -> GoneProof:
        """Terminate one pod, poll until the provider shows it gone, settle the hold its
        instance record names; returns the provider's proof."""
        assert self.provider is not None
        ended = await leftovers.end_pod(self.provider, pod_id, self.config.mock,
                                        timeout_s or self.config.end_bound_s,
                                        say=lambda line: self.stream.log(line, headline=True))
        for note in ended.settled:
            self.stream.log(note)
        return ended.proof

    # ------------------------------------------------------------------ run
    async def run(self) -> LabOutcome:
        """Run the lab to its end; never returns with a pod of this lab left alive if it can help it."""
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        if self._stop_reason is not None:
            self._stop_event.set()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.config.out_dir:  # outside TPLAB_HOME/labs: remembered, so handin finds it
            lab_folders.remember(self.out_dir, self.config.mock)
        self.stream.open_record(self.report.add_artifact("stream.jsonl"))
        restore_handler = quiet_lost_connections(self._loop)
        mock_cm = None
        try:
            if self.provider is None:
                from tplab.lab import auto_pick, providers
                if self.config.provider_name() == "auto":  # the cheapest spot across clouds
                    self.config.provider, why = await auto_pick.pick(self.config)
                    self.stream.log(why, headline=True)
                if self.config.mock:
                    mock_cm = providers.mock_session(self.config)
                    self.provider = await mock_cm.__aenter__()
                    self._own_mock = not self.config.api_url
                else:
                    self.provider = await asyncio.to_thread(
                        providers.real_provider, self.config.api_url, self.config.provider_name())
                self.pod.use(self.provider)
            return await self._run_with_provider()
        except LabStop as stop:  # --provider auto: no cloud has spot under the cap
            self.report.end(stop.status, one_line(stop.reason))
            return await self._finish()
        except Exception as exc:  # provider could not even be built (no key, mock failed)
            self.report.end(FAILED, one_line(exc) or type(exc).__name__)
            return await self._finish()
        finally:
            if mock_cm is not None:
                await mock_cm.__aexit__(None, None, None)
            self.stream.close_record()
            restore_handler()

    async def _run_with_provider(self) -> LabOutcome:
        body = asyncio.create_task(self._body(), name="lab-body")
        assert self._stop_event is not None  # run() made it before the provider
        stopper = asyncio.create_task(self._stop_event.wait(), name="lab-stop")
        ticker = asyncio.create_task(
            cost_ticker(self.config, self.pod, self.money, self.stream, self._stop),
            name="lab-cost")
        cancelled = False
        try:
            await asyncio.wait({body, stopper}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # run() itself was cancelled (e.g. the app is closing): still tear down,
            # unless the pod is being left running on purpose (detach)
            cancelled = True
            if not self._detach_requested:
                self._request("the lab task was cancelled", STOPPED)
        stopper.cancel()
        # from here on nothing may cut the teardown short: it runs as a task of its own and
        # a further cancellation of run() only waits for it again
        closing = asyncio.create_task(self._close(body, ticker), name="lab-teardown")
        while True:
            try:
                outcome = await asyncio.shield(closing)
                break
            except asyncio.CancelledError:
                cancelled = True
                if closing.done():
                    raise
                self.stream.log("still tearing down (stage "
                                f"{self.stream.stage_name}); the pod is ended first", "warning")
        if cancelled:
            raise asyncio.CancelledError
        return outcome

    async def _close(self, body: asyncio.Task, ticker: asyncio.Task) -> LabOutcome:
        """End the body, tear down (or detach), then the closing artifacts."""
        report = self.report
        detach = self._detach_requested and self._stop_reason is None
        if not body.done():
            body.cancel()
        try:
            await body
            report.end(COMPLETE, "the lab completed")
        except LabStop as stop:
            report.end(stop.status, stop.reason)
        except asyncio.CancelledError:
            why = self._stop_reason or ("detach requested before a pod existed"
                                        if self._detach_requested else "cancelled")
            status = STOPPED if self._detach_requested else self._stop_status
            report.end(status, {STOPPED: f"stopped by the user ({why})",
                                INTERRUPTED: f"{why}; what was measured before it is kept"}.get(
                                    status, f"terminated on request ({why})"))
        except Exception as exc:
            report.end(FAILED, failure_sentence(exc, self.out_dir))
        self._tearing_down = True
        owners = (self.config, self.pod, self.money, self.report, self.stream, self.session)
        try:
            if detach and self.pod_id is not None:
                self.detached = True
                await teardown.detach(*owners, self._own_mock)
            else:
                await teardown.teardown(*owners)
                self._completed_before_the_stop()
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ticker
        return await self._finish()

    def _completed_before_the_stop(self) -> None:
        """A stop that came after the job's `finished` (results written, outputs matched) whose
        results the teardown fetched: the measurement is whole, so the lab completed."""
        report, session = self.report, self.session
        if (report.status == STOPPED and report.results is not None and session is not None
                and session.tail.finished_seen_at is not None and self.pod.verified_gone):
            report.end(COMPLETE, f"the lab completed: the stop ({self._stop_reason or 'cancelled'}) "
                                 "came after the job had finished, and its results were fetched "
                                 "before the teardown")

    # ------------------------------------------------------------------ the body
    async def _body(self) -> None:
        cfg, stream, pod, money = self.config, self.stream, self.pod, self.money
        provider = pod.cloud
        stream.stage("preflight", num_prompts=cfg.num_prompts, new_tokens=cfg.new_tokens,
                    world_size=cfg.gpus, lab_id=self.lab_id, mock=cfg.mock)
        preflight.check_inputs(cfg)
        preflight.choose_image(cfg, pod, stream)
        # the job's own input checks need torch: a subprocess, beside the rest of preflight
        job_inputs = asyncio.create_task(check_job_inputs(cfg), name="lab-job-inputs")
        try:
            # closes the records of pods found gone
            await preflight.check_leftovers(cfg, provider, self.lab_id, stream)
            await preflight.settle_dead_holds(cfg, provider, stream)
            preflight.open_budget(cfg, money, stream)
            await preflight.choose_price(cfg, pod, money, stream)
            warning = await job_inputs
        finally:
            job_inputs.cancel()
        if warning:
            stream.warn(warning)
        await provision.authorize(cfg, provider, money, stream)

        self.session = PodSession(cfg, pod, self.report, stream, self._stop,
                                  on_result=self._start_prediction)
        await provision.create(cfg, pod, money, stream, self.session.public_key)
        # a pod exists, so its proof picture will be drawn: matplotlib, imported while it boots
        # (nothing waits for it: it ends on its own, the loop's executor joined at its close)
        self._prewarm = asyncio.create_task(asyncio.to_thread(_prewarm_plotting),
                                            name="lab-prewarm")
        info = await provision.boot(cfg, pod, stream)

        stream.stage("connect")
        await self.session.connect(info)
        stream.stage("upload")
        await self.session.upload()
        stream.stage("run")
        await self.session.launch()
        await self.session.run_job()

        stream.stage("fetch")
        await self.session.fetch()
        self.session.check_exit()

    # ------------------------------------------------------------------ artifacts
    def _start_prediction(self, results: dict[str, Any]) -> None:
        """The job's results arrived: calibrate and draw the curve while the pod winds down."""
        if self._prediction_task is None:
            self._prediction_task = asyncio.create_task(
                asyncio.to_thread(self._predict_and_draw, results), name="lab-prediction")

    def _predict_and_draw(self, results: dict[str, Any] | None) -> None:
        cfg = self.config
        self._prediction = predict_lab(results, gpu_type=cfg.gpu_type, gpus=cfg.gpus,
                                       mock=cfg.mock, checkpoint=cfg.checkpoint)
        if results and self._prediction is not None:
            artifacts.write_curve(self._prediction, self.out_dir, mock=cfg.mock)
            self.report.add_artifact(artifacts.CURVE)

    def _say_figures(self) -> None:
        """The lab's figures, made once (``artifacts.lab_figures``) and said to every face (the
        ``figures`` event) before the proof picture and the manifest render them."""
        try:
            self._figures = artifacts.lab_figures(self.config, self.report, self.pod, self.money,
                                                  self._prediction)
            self.stream.emit(FiguresEvent(figures=self._figures.to_dict()))
        except Exception as exc:
            self.stream.warn(f"the lab's figures could not be gathered: {exc}")

    def _write_manifest(self) -> Path:
        path = artifacts.write_lab_manifest(self.config, self.report, self.pod, self.money,
                                            self._prediction, self._figures)
        self.report.add_artifact("manifest.json")
        return path

    async def _finish(self) -> LabOutcome:
        report, stream = self.report, self.stream
        stream.stage("manifest")
        try:
            if self._prediction_task is not None:
                await self._prediction_task
            else:
                await asyncio.to_thread(self._predict_and_draw, report.results)
        except Exception as exc:
            stream.warn(f"the scaling curve could not be drawn: {exc}")
        self._say_figures()
        # a pod not proven gone: the teardown said so in the lab's last sentence
        pod_left = self.pod_id is not None and not self.verified_gone and not self.detached
        try:
            stream.flush()  # the final frame is drawn from stream.jsonl
            await asyncio.to_thread(artifacts.write_proof_picture, self.report, self.summary(),
                                    self.config.mock)
        except Exception as exc:
            stream.warn(f"proof-terminated.png could not be drawn: {exc}")
        try:
            self._write_manifest()
        except Exception as exc:
            stream.warn(f"the manifest could not be written: {exc}")
        code = exit_code(report.status, pod_left or self.detached)
        stream.emit("phase", name="done", status=report.status, reason=report.reason,
                    out_dir=str(self.out_dir), pod_id=self.pod_id,
                    verified_gone=self.verified_gone if self.pod_id is not None else None,
                    exit_code=code,
                    manifest=str(self.out_dir / "manifest.json"))
        stream.flush()
        stream.close_subs()
        return LabOutcome(report.status, report.reason, self.out_dir, self.pod_id,
                          self.verified_gone, code)

    def add_artifact(self, name: str) -> Path | None:
        """List a file saved in the out dir after the lab ended (the dashboard's
        ``proof-terminated.svg``): add it to ``artifacts`` and re-write manifest.json (whose
        ``terminated_screenshot`` prefers the SVG). Returns the manifest's path, or None when
        ``name`` is not a file directly in the out dir."""
        path = self.out_dir / name
        if Path(name).name != name or not path.is_file():
            return None
        self.report.add_artifact(name)
        return self._write_manifest()
