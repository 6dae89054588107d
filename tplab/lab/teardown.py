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
from datetime import datetime, timezone

from tplab.budget_config import fmt_usd
from tplab.cloud.base import GoneProof, Provider
from tplab.lab import instances
from tplab.lab.config import COMPLETE, FAILED
from tplab.lab.context import LabContext
from tplab.lab.provision import Creation, adopt_pod
from tplab.lab.ssh_session import PodSession
from tplab.redact import one_line

PROOF = "proof-terminated.json"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


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
        instances.mark(pod_id, instances.GONE, mock)
    return proof


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


async def teardown(ctx: LabContext, creation: Creation, session: PodSession | None) -> None:
    """Terminate and verify gone (whatever happened), then settle the budget."""
    facts, stream, prov = ctx.facts, ctx.stream, ctx.provider
    pod = facts.pod
    await _find_created_pod(ctx, creation)
    if session is not None and session.conn is not None:
        if facts.status != COMPLETE and not facts.artifacts.get("results.json"):
            # save what the pod has before it goes (best effort, bounded)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.fetch(), 15)
        session.close()
        stream.emit("ssh", state="closed")
    if pod.id is not None and prov is not None:
        stream.phase("terminate", pod_id=pod.id)
        for attempt in range(5):
            try:
                await asyncio.to_thread(prov.terminate, pod.id)
                break
            except Exception as exc:  # noqa: BLE001 - keep trying whatever went wrong
                stream.log(f"terminate attempt {attempt + 1} failed: {exc}", "warning")
                await asyncio.sleep(1 + attempt)
        stream.phase("verify", pod_id=pod.id)
        try:
            pod.proof = await verify_gone(prov, pod.id, 120.0)
        except Exception as exc:  # noqa: BLE001 - reported, and the exit is non-zero
            stream.log(f"could not verify the pod is gone: {exc}", "error")
            pod.proof = None
        pod.gone_at = time.time()
        pod.verified_gone = bool(pod.proof and pod.proof.gone)
        write_proof(ctx)
        if pod.verified_gone:
            ctx.instance_event(None, state="GONE")
            if pod.record is not None:
                pod.record.state = instances.GONE
                pod.record.ended_at = pod.gone_at
                ctx.save_record()
        else:
            stream.warn(f"pod {pod.id} could not be verified gone; run "
                        f"`tplab terminate {pod.id}` and check the provider console")
    elif pod.record is not None:
        pod.record.state = instances.NOT_CREATED
        pod.record.ended_at = time.time()
        ctx.save_record()
    await settle(ctx)


def write_proof(ctx: LabContext) -> None:
    """proof-terminated.json: the provider's own answer for the pod after terminate."""
    pod = ctx.facts.pod
    proof = pod.proof
    data = {
        "pod_id": pod.id,
        "provider": ctx.provider_name,
        "verified_gone": pod.verified_gone,
        "checked_at": proof.checked_at if proof else None,
        "listed": proof.listed if proof else None,
        "answer": proof.answer if proof else None,
        "terminate_requested_at": iso(ctx.stream.timeline.get("terminate")),
        "note": "the provider's own answer for this pod after terminate, and whether it "
                "still appeared in the provider's list of pods",
    }
    path = ctx.facts.add_artifact(PROOF)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


async def settle(ctx: LabContext) -> None:
    """Release the hold (no pod), keep it (creation unknown), or record the actual spend against
    it: RunPod's billing record for the pod when it has one, never less than the pod's cost x
    its billed seconds, cross-checked against the balance change (the manifest says which)."""
    from tplab.lab.provision import keep_unknown_creation
    money, pod = ctx.facts.money, ctx.facts.pod
    if money.guard is None or money.auth_id is None:
        return
    ctx.stream.phase("record")
    label = ctx.config.ledger_label()
    try:
        if keep_unknown_creation(ctx):
            ctx.stream.warn(f"the {fmt_usd(money.authorized_usd)} authorization stays held: "
                            "whether the create made a pod is unknown (see `tplab status` and "
                            "`tplab budget`)")
        elif pod.id is None:
            await asyncio.to_thread(money.guard.release, label, money.auth_id)
            ctx.stream.log("authorization released: no pod was created")
        else:
            # billed from the create's answer until terminate was accepted (the verify phase
            # starts right after): inside RunPod's own billing interval, so a floor for it
            end = ctx.stream.timeline.get("verify") or pod.gone_at or time.time()
            start = min(pod.created_at or end, end)
            report = await asyncio.to_thread(
                ctx.provider.actual_cost, pod.id, money.balance_before, start, end,
                pod.usd_per_hr or 0.0)
            money.actual_usd = report.actual_usd
            money.cost_note = report.note
            money.cost_source = report.source
            await asyncio.to_thread(money.guard.record_actual, label,
                                    max(0.0, report.actual_usd), money.auth_id)
            ctx.stream.log(f"actual spend ${report.actual_usd:.4f} recorded from "
                           f"{report.source} ({report.note})")
    except Exception as exc:
        ctx.stream.warn(f"the ledger could not be settled: {exc}; see `tplab budget`")
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
