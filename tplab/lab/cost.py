"""The cost ticker: what the pod has cost so far, the 80% alert, and the caps that stop the lab.

Why on the client as well as on the pod: the pod's watchdog enforces the wall cap even when the
client is gone, but only the client knows the lab's dollar authorization. Every tick emits a
``cost`` event (accrued dollars at the quoted price, seconds left before a cap); every fifth the
ledger's figures; at 80% of the authorization a warning; at 100%, or at the wall cap, a stop.
"""

from __future__ import annotations

import asyncio
import time

from tplab.money.budget_config import fmt_usd
from tplab.lab.context import LabContext
from tplab.keys.redact import one_line


async def cost_ticker(ctx: LabContext) -> None:
    """Runs until cancelled (the orchestrator cancels it once the lab has torn down). A tick
    that fails (the ledger unreadable, say) is a warning; the next tick tries again."""
    n = 0
    failed: set[str] = set()
    while True:
        await asyncio.sleep(ctx.config.cost_tick_s)
        try:
            if await _tick(ctx, n):
                n += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported once per distinct failure
            msg = one_line(exc) or type(exc).__name__
            if msg not in failed:
                failed.add(msg)
                ctx.stream.warn(f"the cost ticker failed ({msg}); it keeps trying, and the "
                                "pod's watchdog enforces the wall cap regardless")


async def _tick(ctx: LabContext, n: int) -> bool:
    """One tick; False while there is no pod (nothing to count). The figures and the alert
    are the lab's money owner's (``LabMoney.tick``); once the pod is gone and its cost billed,
    the figure it emits is the billed one."""
    cfg, pod, money = ctx.config, ctx.facts.pod, ctx.facts.money
    if pod.created_at is None or pod.usd_per_hr is None:
        return False
    end = pod.gone_at or time.time()
    alert = cap_reached = False
    if money.actual_cost_usd is None:  # billed once settled: the estimate stops there
        alert, cap_reached = money.tick(pod.usd_per_hr, end - pod.created_at, cfg.wall_cap_s)
    ctx.stream.emit("cost", **money.cost_event_fields())
    if (n + 1) % 5 == 0 and money.guard is not None:
        # the ledger is read in a thread; the event is emitted here, on the lab's loop
        ctx.budget_event(await asyncio.to_thread(money.guard.summary))
    if pod.gone_at is not None:
        return True
    if alert:
        ctx.stream.emit("warning", msg=money.alert_text(), kind="budget80")
    if cap_reached:
        ctx.request_stop(f"the lab cap {fmt_usd(money.authorized_usd)} was reached")
    elif cfg.wall_cap_s - (end - pod.created_at) <= 0:
        ctx.request_stop(f"the wall-clock cap {cfg.wall_cap_s:.0f} s was reached")
    return True
