"""Teardown: terminate the pod, verify with the provider that it is gone, settle the ledger, record.

Why one path: every way out of a lab (success, error, Ctrl-C, the TERMINATE button, a lost
connection, a cap, a spot interruption) ends here, so "no pod outlives its lab" is one piece of
code to get right. ``detach`` is the one other way out: the dashboard's confirmed "leave it
running", which stops the client side and leaves the pod, its record and its hold open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Callable

from tplab.money.budget_config import fmt_usd
from tplab.lab import instances
from tplab.lab.lab_config import COMPLETE, FAILED, STOPPED
from tplab.lab.context import LabContext
from tplab.lab.ending import cloud_words, end_pod_within, iso
from tplab.cloud.registry import gone_routes
from tplab.lab.provision import Creation, adopt_pod
from tplab.lab.ssh_session import PodSession
from tplab.keys.redact import one_line

PROOF = "proof-terminated.json"


async def _find_created_pod(ctx: LabContext, creation: Creation) -> None:
    """A stop during create: wait for the call's answer; a failed create may still have made a
    pod, so look for it by name."""
    pod, prov = ctx.facts.pod, ctx.provider
    if creation.future is not None and pod.id is None:
        try:
            adopt_pod(ctx, await creation.future)
        except Exception:
            pass
    if pod.id is None and pod.record is not None and prov is not None:
        with contextlib.suppress(Exception):
            for info in await asyncio.to_thread(prov.list_pods):
                if info.name == pod.record.pod_name:
                    adopt_pod(ctx, info)


#: what a failed lab fetches from its pod before it goes (small files; bounded in time)
FAILURE_LOGS = ("job.log", "watchdog.log", "guard.log")
#: what the pod finished, fetched before a lab its user stopped is torn down (bounded in time)
FINISHED_FILES = ("results.json", "events.jsonl")
FINISHED_FETCH_S = 20.0


async def _fetch_what_the_pod_finished(ctx: LabContext, session: PodSession) -> None:
    """A lab stopped by its user while the connection is still there: results.json and
    events.jsonl come back before the pod goes (Ctrl-C just after the job's `finished` keeps
    the whole measurement). Not for the lab's own stops (a cap: the pod's seconds are the
    budget's) and not when the body fetched them already. A fetch cut short by its bound
    leaves no half file."""
    facts = ctx.facts
    names = [n for n in FINISHED_FILES if n not in facts.artifacts]
    if facts.status != STOPPED or not names:
        return
    try:
        await asyncio.wait_for(session.fetch(names), FINISHED_FETCH_S)
    except Exception as exc:  # noqa: BLE001 - a timeout, a drop, a bad results.json
        for name in names:
            if name not in facts.artifacts:
                with contextlib.suppress(OSError):
                    (facts.out_dir / name).unlink()
        ctx.stream.warn(f"what the pod finished could not be fetched before the teardown "
                        f"({one_line(exc) or type(exc).__name__}); the pod is ended all the same")
        return
    if "results.json" in facts.artifacts:
        ctx.stream.log("the pod's results.json and events.jsonl were fetched before the teardown")


async def teardown(ctx: LabContext, creation: Creation, session: PodSession | None) -> None:
    """Terminate and verify gone (whatever happened), then settle the budget.

    Terminate comes before anything that can fail on a full disk; every write after it (the
    proof, the instance record) is reported when it fails, never a reason to skip a step."""
    facts, stream, prov = ctx.facts, ctx.stream, ctx.provider
    pod = facts.pod
    await _adopt_pending_authorization(ctx)
    await _find_created_pod(ctx, creation)
    if session is not None and session.conn is not None:
        if pod.id is not None:
            await _fetch_what_the_pod_finished(ctx, session)
        if facts.status != COMPLETE and pod.id is not None:
            # what the pod can tell about the failure, before it goes (bounded)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.fetch(FAILURE_LOGS), 10)
        session.close()
        stream.emit("ssh", state="closed")
    if pod.id is not None and prov is not None:
        await _end_the_pod(ctx)
    elif pod.record is not None and pod.creation_unknown:
        # an ambiguous create whose pod list could not be read: the record stays INTENT (the
        # next start looks for the pod by name) and settle keeps the hold
        pod.record.note = ("creation unknown: the create failed ambiguously and the pod list "
                           "could not be read")
        ctx.save_record()
    elif pod.record is not None:
        pod.record.state = instances.NOT_CREATED
        pod.record.ended_at = time.time()
        ctx.save_record()
    await settle(ctx)
    await _mark_settled(ctx)


async def _end_the_pod(ctx: LabContext) -> None:
    """End the pod within the lab's bound (``tplab.lab.ending``: a line every few seconds while
    it lasts), then the proof and the record. Not proven gone: the lab's last sentence says
    so, with what is known and the command that tries again, and its record stays open (the
    next start, `tplab status` and `tplab terminate` find it)."""
    facts, stream, prov, cfg = ctx.facts, ctx.stream, ctx.cloud, ctx.config
    pod = facts.pod
    assert pod.id is not None
    pod_id = pod.id
    stream.phase("terminate", pod_id=pod_id)
    report = await end_pod_within(
        prov, pod_id, cfg.end_bound_s, say=lambda line: stream.log(line, headline=True),
        on_accepted=lambda: stream.phase("verify", pod_id=pod_id))
    if "verify" not in stream.timeline:  # no end call was accepted: still, the look is the proof
        stream.phase("verify", pod_id=pod_id)
    pod.proof = report.proof
    pod.verified_gone = report.gone
    if pod.verified_gone:
        pod.gone_at = time.time()
    _reported(ctx, "proof-terminated.json", lambda: write_proof(ctx))
    if pod.verified_gone:
        ctx.instance_event(None, state="GONE")
        if pod.record is not None:
            pod.record.state = instances.GONE
            pod.record.ended_at = pod.gone_at
            ctx.save_record()
        return
    noun, verb = cloud_words(prov)
    sentence = report.sentence(cfg.terminate_command(pod_id), noun, verb)
    stream.warn(sentence)
    if facts.status == COMPLETE:
        facts.status, facts.reason = FAILED, f"the lab completed, but {sentence}"
    else:
        facts.reason = f"{facts.reason.rstrip('. ')}; {sentence}"
    if pod.record is not None:
        pod.record.lab_ended = True
        pod.record.note = one_line(sentence)
        ctx.save_record()


async def _mark_settled(ctx: LabContext) -> None:
    """Note in the instance record that its hold is settled (so `tplab terminate` does not
    settle it again); a hold still open (settle failed, say) leaves the record unsettled."""
    money, rec = ctx.facts.money, ctx.facts.pod.record
    if rec is None or money.auth_id is None or money.guard is None:
        return
    try:
        summary = await asyncio.to_thread(money.guard.summary)
    except Exception:  # noqa: BLE001 - unknown: leave it for `tplab terminate` to check
        return
    if all(a.auth_id != money.auth_id for a in summary.open_authorizations):
        rec.settled = True
        ctx.save_record()


def _reported(ctx: LabContext, what: str, write: Callable[[], object]) -> None:
    """Run a write of the teardown; a failure (a full disk) is a warning, never an abort."""
    try:
        write()
    except (OSError, ValueError) as exc:
        ctx.stream.warn(f"{what} could not be written ({one_line(exc)}); the pod was handled "
                        "all the same")


async def _adopt_pending_authorization(ctx: LabContext) -> None:
    """A stop while BudgetGuard.authorize ran in its thread: wait for its answer, so the hold
    it wrote is settled below instead of left open in the ledger."""
    money = ctx.facts.money
    pending = money.pending_auth
    if money.auth_id is None and pending is not None:
        try:
            money.auth_id = await pending
            money.authorized_usd = money.pending_amount
        except Exception:  # noqa: BLE001 - refused (BudgetGuardExceeded): nothing is held
            pass


def write_proof(ctx: LabContext) -> None:
    """proof-terminated.json: the provider's own answer for the pod after terminate."""
    pod = ctx.facts.pod
    proof = pod.proof
    data = {
        "pod_id": pod.id,
        "provider": ctx.provider_name,
        "mock": ctx.config.mock,
        "verified_gone": pod.verified_gone,
        "checked_at": proof.checked_at if proof else None,
        "listed": proof.listed if proof else None,
        "answer": proof.answer if proof else None,
        "terminate_requested_at": iso(ctx.stream.timeline.get("terminate")),
        "routes": gone_routes(ctx.provider_name),
        "note": "the provider's own answer for this pod after terminate, and whether it "
                "still appeared in the provider's list of pods",
    }
    path = ctx.facts.out_dir / PROOF
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    ctx.facts.add_artifact(PROOF)


async def settle(ctx: LabContext) -> None:
    """The hold follows the proof (``LabMoney``): released when no pod was made, kept when the
    creation is unknown or the pod is not proven gone (its whole authorization stays held for
    it, named), else the billed amount recorded against it: the provider's billing record for
    the pod when it has one, never less than the pod's cost x its billed seconds,
    cross-checked against the balance change (the manifest says which). The lab's cost figure
    is then the billed one, and a ``cost`` event says so to every face."""
    money, pod = ctx.facts.money, ctx.facts.pod
    if money.guard is None or money.auth_id is None:
        return
    ctx.stream.phase("record")
    label = ctx.config.ledger_label()
    try:
        if pod.id is None and pod.creation_unknown:
            ctx.stream.warn(f"the {fmt_usd(money.authorized_usd)} authorization stays held: "
                            "whether the create made a pod is unknown (see `tplab status` and "
                            "`tplab budget`)")
        elif pod.id is None:
            await asyncio.to_thread(money.release_unused, label)
            ctx.stream.log("authorization released: no pod was created")
        elif not pod.verified_gone:
            ctx.stream.warn(money.keep_held(pod.id) + f" (`{ctx.config.terminate_command(pod.id)}`"
                            "; `tplab budget` shows the hold)")
        else:
            # billed from the create's answer until terminate was accepted (the verify phase
            # starts right after): inside the provider's own billing interval, so a floor for it
            end = ctx.stream.timeline.get("verify") or pod.gone_at or time.time()
            start = min(pod.created_at or end, end)
            report = await asyncio.to_thread(
                ctx.cloud.actual_cost, pod.id, money.balance_before, start, end,
                pod.usd_per_hr or 0.0)
            await asyncio.to_thread(money.settle_billed, label, report, pod.gone_at or end,
                                    pod.usd_per_hr)
            ctx.stream.log(f"actual spend ${report.actual_usd:.4f} recorded from "
                           f"{report.source} ({report.note})")
    except Exception as exc:
        ctx.stream.warn(f"the ledger could not be settled: {exc}; see `tplab budget`")
    if pod.id is not None:  # the figure every face shows from now on
        ctx.stream.emit("cost", **money.cost_event_fields())
    ctx.budget_event()


async def detach(ctx: LabContext, session: PodSession | None, own_mock: bool) -> None:
    """Close the client side and leave the pod, its record and its hold open."""
    cfg, facts, stream = ctx.config, ctx.facts, ctx.stream
    pod = facts.pod
    if session is not None and session.close():
        stream.emit("ssh", state="closed")
    if pod.record is not None:
        pod.record.note = one_line(f"detached at {iso(time.time())}: left running on "
                                   "request; its watchdog still guards it")
        ctx.save_record()
    cmd = cfg.terminate_command(pod.id)
    facts.status = FAILED
    facts.reason = f"detached: pod {pod.id} left running; end it with `{cmd}`"
    if cfg.mock and own_mock:
        tail = ("; in --mock the pod lives only as long as its mock cloud: the mock cloud "
                f"this lab started stops as the lab ends, and mock pod {pod.id} ends with it")
    else:
        tail = (f"; its watchdog terminates it after {cfg.heartbeat_timeout_s:.0f} s "
                f"without a heartbeat or at the {cfg.wall_cap_s:.0f} s wall cap")
    stream.emit("warning", kind="detached", pod_id=pod.id, command=cmd,
                msg=f"pod {pod.id} is left running (not terminated); end it with "
                    f"`{cmd}`{tail}. No actual spend was recorded: the "
                    f"{fmt_usd(facts.money.authorized_usd)} authorization stays held "
                    "(see `tplab budget`)")
    ctx.budget_event()
