"""Getting a pod: authorize the spend, create the pod (intent recorded first), boot it until SSH.

Why the order matters: money is authorized in the ledger before any pod exists; the instance
record is written *before* the create call (a crash mid-call still leaves a trace the next start
finds) and gets the pod id the moment the provider answers; the create call runs as a future
that teardown can still await, so a stop during create still learns the pod id and ends it.
"""

from __future__ import annotations

import asyncio
import time

from tplab.cloud.base import (GONE_STATES, POD_NAME_PREFIX, AuthError, NoCapacityError,
                              PodInfo, PodSpec, ProviderError)
from tplab.lab import instances
from tplab.lab.config import FAILED, STUB, LabStop
from tplab.lab.context import LabContext
from tplab.redact import one_line


async def authorize(ctx: LabContext, lab_cap: float) -> None:
    """Hold the lab cap in the ledger (BudgetGuard.authorize), and note the balance before.

    The ledger write runs in a thread that a stop cannot interrupt; the call is kept as a future
    (``money.pending_auth``) so that teardown learns the id of a hold written while the lab was
    being stopped, and releases it, instead of leaving it open."""
    from tplab.budget import BudgetGuardExceeded
    cfg, money = ctx.config, ctx.facts.money
    ctx.stream.phase("authorize", amount_usd=lab_cap, label=cfg.ledger_label())
    money.pending_amount = lab_cap
    money.pending_auth = asyncio.ensure_future(
        asyncio.to_thread(money.guard.authorize, cfg.ledger_label(), lab_cap))
    try:
        money.auth_id = await asyncio.shield(money.pending_auth)
    except BudgetGuardExceeded as exc:
        raise LabStop(FAILED, one_line(str(exc))) from None
    money.authorized_usd = lab_cap
    ctx.budget_event()
    try:
        money.balance_before = await asyncio.to_thread(ctx.provider.balance)
    except ProviderError:
        money.balance_before = None


def adopt_pod(ctx: LabContext, info: PodInfo) -> None:
    """The provider answered with a pod: it is this lab's from now on (record, event)."""
    pod = ctx.facts.pod
    pod.info = info
    pod.id = info.id
    pod.created_at = time.time()
    if info.usd_per_hr:
        pod.usd_per_hr = float(info.usd_per_hr)
    if pod.record is not None:
        pod.record.pod_id = info.id
        pod.record.state = instances.CREATED
        pod.record.created_at = pod.created_at
        ctx.save_record()
    ctx.instance_event(info)


class Creation:
    """The create call in flight, so teardown can wait for its answer (``pending``)."""

    def __init__(self) -> None:
        self.future: asyncio.Future | None = None

    @property
    def pending(self) -> bool:
        return self.future is not None


async def create(ctx: LabContext, creation: Creation, public_key: str) -> PodInfo:
    """Write the intent record, then create the pod; a no-capacity answer is a STUB."""
    cfg, facts = ctx.config, ctx.facts
    ctx.stream.phase("create")
    name = f"{POD_NAME_PREFIX}{facts.lab_id}"
    facts.pod.record = instances.InstanceRecord(
        lab_id=facts.lab_id, label=cfg.ledger_label(), pod_name=name,
        provider=ctx.provider_name, gpu_type=cfg.gpu_type, gpu_count=cfg.gpus,
        spot=cfg.spot, usd_per_hr=facts.pod.usd_per_hr, out_dir=str(facts.out_dir),
        mock=cfg.mock)
    if not ctx.save_record():
        raise LabStop(FAILED, "the instance record could not be written (see the warning); "
                      "without it a crash could leave a pod nobody finds, so nothing was created")
    price = facts.pod.usd_per_hr
    spec = PodSpec(name=name, gpu_type=cfg.gpu_type, gpu_count=cfg.gpus,
                   public_key=public_key, spot=cfg.spot,
                   bid_usd_per_gpu_hr=(price / cfg.gpus) if (cfg.spot and price) else None)
    creation.future = asyncio.ensure_future(asyncio.to_thread(ctx.provider.create, spec))
    try:
        info = await asyncio.shield(creation.future)
    except NoCapacityError as exc:
        raise LabStop(STUB, one_line(f"{exc} Nothing was created.")) from None
    adopt_pod(ctx, info)
    return info


async def boot(ctx: LabContext) -> PodInfo:
    """Poll the pod until it is RUNNING with an SSH endpoint (within the boot timeout); a stop
    request is honoured at once because this is a plain loop of short awaits."""
    cfg, pod = ctx.config, ctx.facts.pod
    assert ctx.provider is not None and pod.id is not None
    ctx.stream.phase("boot")
    deadline = time.monotonic() + cfg.boot_timeout_s
    last_state, last_ssh = None, None
    while True:
        try:
            info = await asyncio.to_thread(ctx.provider.status, pod.id)
        except AuthError:
            raise
        except ProviderError as exc:  # a passing API error: keep waiting, within the bound
            ctx.stream.log(f"reading the pod's status failed ({exc}); retrying", "warning")
            if time.monotonic() > deadline:
                raise LabStop(FAILED, f"the pod {pod.id} could not be read within "
                              f"{cfg.boot_timeout_s:.0f} s ({exc})") from None
            await asyncio.sleep(1.0)
            continue
        if info.state != last_state or info.ssh != last_ssh:
            # on every state change, and once more when SSH appears: the `ready` event
            # carries ssh_host, ssh_port and uptime_s
            last_state, last_ssh = info.state, info.ssh
            pod.info = info
            ctx.instance_event(info)
        if info.state.upper() in GONE_STATES or info.state.upper() == "EXITED":
            raise LabStop(FAILED, f"the pod {pod.id} went {info.state} while booting "
                          "(spot interruption?)")
        if info.state.upper() == "RUNNING" and info.ssh is not None:
            pod.info = info
            if pod.record is not None:
                pod.record.ssh_host, pod.record.ssh_port = info.ssh.host, info.ssh.port
                ctx.save_record()
            return info
        if time.monotonic() > deadline:
            raise LabStop(FAILED, f"the pod {pod.id} was not ready within "
                          f"{cfg.boot_timeout_s:.0f} s")
        await asyncio.sleep(0.25)
