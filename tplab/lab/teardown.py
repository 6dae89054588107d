"""Teardown: terminate the pod, verify with the provider that it is gone, settle the ledger, record.

Why one path: every way out of a lab (success, error, Ctrl-C, the TERMINATE button, a lost
connection, a cap, a spot interruption) ends here, so "no pod outlives its lab" is one piece of
code to get right. ``detach`` is the one other way out: the dashboard's confirmed "leave it
running", which stops the client side and leaves the pod, its record and its hold open. The
order is this module's; each part is its owner's: the pod ends itself and keeps its proof
(``LabPod.end``), the money follows that proof (``LabMoney``), the report says what it means.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from tplab.keys.redact import one_line
from tplab.lab.lab_config import COMPLETE, FAILED, STOPPED, LabConfig
from tplab.lab.pod import LabPod
from tplab.lab.report import LabReport
from tplab.lab.ssh_session import PodSession
from tplab.lab.stream import LabStream
from tplab.money.budget_config import fmt_usd
from tplab.money.lab_money import LabMoney

#: what a failed lab fetches from its pod before it goes (small files; bounded in time)
FAILURE_LOGS = ("job.log", "watchdog.log", "guard.log")
#: what the pod finished, fetched before a lab its user stopped is torn down (bounded in time)
FINISHED_FILES = ("results.json", "events.jsonl")
FINISHED_FETCH_S = 20.0


async def _fetch_what_the_pod_finished(report: LabReport, stream: LabStream,
                                       session: PodSession) -> None:
    """A lab stopped by its user while the connection is still there: results.json and
    events.jsonl come back before the pod goes (Ctrl-C just after the job's `finished` keeps
    the whole measurement). Not for the lab's own stops (a cap: the pod's seconds are the
    budget's) and not when the body fetched them already. A fetch cut short by its bound
    leaves no half file."""
    names = [n for n in FINISHED_FILES if not report.has(n)]
    if report.status != STOPPED or not names:
        return
    try:
        await asyncio.wait_for(session.fetch(names), FINISHED_FETCH_S)
    except Exception as exc:  # noqa: BLE001 - a timeout, a drop, a bad results.json
        for name in names:
            if not report.has(name):
                with contextlib.suppress(OSError):
                    report.path(name).unlink()
        stream.warn(f"what the pod finished could not be fetched before the teardown "
                    f"({one_line(exc) or type(exc).__name__}); the pod is ended all the same")
        return
    if report.has("results.json"):
        stream.log("the pod's results.json and events.jsonl were fetched before the teardown")


async def teardown(config: LabConfig, pod: LabPod, money: LabMoney, report: LabReport,
                   stream: LabStream, session: PodSession | None) -> None:
    """Terminate and verify gone (whatever happened), then settle the budget.

    Terminate comes before anything that can fail on a full disk; every write after it (the
    proof, the instance record) is reported when it fails, never a reason to skip one. A pod
    not proven gone: the lab's last sentence says so, with what is known and the command that
    tries again."""
    await money.adopt_pending()
    await pod.find_created()
    if session is not None and session.conn is not None:
        if pod.id is not None:
            await _fetch_what_the_pod_finished(report, stream, session)
        if report.status != COMPLETE and pod.id is not None:
            # what the pod can tell about the failure, before it goes (bounded)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.fetch(FAILURE_LOGS), 10)
        session.close()
        stream.emit("ssh", state="closed")
    if pod.id is not None and pod.provider is not None:
        not_gone = await pod.end()
        if not_gone:
            report.not_proven_gone(not_gone)
    else:
        pod.never_created()
    await settle(config, pod, money, stream)
    await _mark_settled(pod, money)


async def _mark_settled(pod: LabPod, money: LabMoney) -> None:
    """Note in the instance record that its hold is settled (so `tplab terminate` does not
    settle it again); a hold still open (settle failed, say) leaves the record unsettled."""
    if pod.record is None or money.auth_id is None or money.guard is None:
        return
    try:
        summary = await asyncio.to_thread(money.guard.summary)
    except Exception:  # noqa: BLE001 - unknown: leave it for `tplab terminate` to check
        return
    if not money.hold_open(summary):
        pod.hold_settled()


async def settle(config: LabConfig, pod: LabPod, money: LabMoney, stream: LabStream) -> None:
    """The hold follows the proof (``LabMoney``): released when no pod was made, kept when the
    creation is unknown or the pod is not proven gone (its whole authorization stays held for
    it, named), else the billed amount recorded against it: the provider's billing record for
    the pod when it has one, never less than the pod's cost x its billed seconds,
    cross-checked against the balance change (the manifest says which). The lab's cost figure
    is then the billed one, and a ``cost`` event says so to every face."""
    if money.guard is None or money.auth_id is None:
        return
    stream.stage("record")
    label = config.ledger_label()
    try:
        if pod.id is None and pod.creation_unknown:
            stream.warn(f"the {fmt_usd(money.authorized_usd)} authorization stays held: "
                        "whether the create made a pod is unknown (see `tplab status` and "
                        "`tplab budget`)")
        elif pod.id is None:
            await asyncio.to_thread(money.release_unused, label)
            stream.log("authorization released: no pod was created")
        elif not pod.verified_gone:
            stream.warn(money.keep_held(pod.id) + f" (`{config.terminate_command(pod.id)}`"
                        "; `tplab budget` shows the hold)")
        else:
            # billed from the create's answer until terminate was accepted (the verify stage
            # starts right after): inside the provider's own billing interval, so a floor for it
            end = stream.began("verify") or pod.gone_at or time.time()
            start = min(pod.created_at or end, end)
            cost = await asyncio.to_thread(
                pod.cloud.actual_cost, pod.id, money.balance_before, start, end,
                pod.usd_per_hr or 0.0)
            await asyncio.to_thread(money.settle_billed, label, cost, pod.gone_at or end,
                                    pod.usd_per_hr)
            stream.log(f"actual spend {fmt_usd(cost.actual_usd)} recorded from "
                       f"{cost.source} ({cost.note})")
    except Exception as exc:
        stream.warn(f"the ledger could not be settled: {exc}; see `tplab budget`")
    if pod.id is not None:  # the figure every face shows from now on
        stream.emit("cost", **money.cost_event_fields())
    await _budget_event(config, money, stream)


async def _budget_event(config: LabConfig, money: LabMoney, stream: LabStream) -> None:
    """The ledger's figures once more, as the lab leaves them."""
    if money.guard is not None:
        summary = await asyncio.to_thread(money.guard.summary)
        stream.emit(money.budget_event(summary, config.ledger_label()))


async def detach(config: LabConfig, pod: LabPod, money: LabMoney, report: LabReport,
                 stream: LabStream, session: PodSession | None, own_mock: bool) -> None:
    """Close the client side and leave the pod, its record and its hold open."""
    cfg = config
    if session is not None and session.close():
        stream.emit("ssh", state="closed")
    cmd = pod.left_running()
    report.end(FAILED, f"detached: pod {pod.id} left running; end it with `{cmd}`")
    if cfg.mock and own_mock:
        tail = ("; in --mock the pod lives only as long as its mock cloud: the mock cloud "
                f"this lab started stops as the lab ends, and mock pod {pod.id} ends with it")
    else:
        tail = (f"; its watchdog terminates it after {cfg.heartbeat_timeout_s:.0f} s "
                f"without a heartbeat or at the {cfg.wall_cap_s:.0f} s wall cap")
    stream.emit("warning", kind="detached", pod_id=pod.id, command=cmd,
                msg=f"pod {pod.id} is left running (not terminated); end it with "
                    f"`{cmd}`{tail}. No actual spend was recorded: the "
                    f"{fmt_usd(money.authorized_usd)} authorization stays held "
                    "(see `tplab budget`)")
    await _budget_event(config, money, stream)
