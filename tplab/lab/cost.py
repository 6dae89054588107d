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
    """One tick; False while there is no pod (nothing to count)."""
    cfg, pod, money = ctx.config, ctx.facts.pod, ctx.facts.money
    if pod.created_at is None or pod.usd_per_hr is None:
        return False
    end = pod.gone_at or time.time()
    accrued = pod.usd_per_hr * (end - pod.created_at) / 3600.0
    cap = money.authorized_usd
    left = max(0.0, (cap - accrued) / pod.usd_per_hr * 3600.0) if cap else 0.0
    wall_left = cfg.wall_cap_s - (end - pod.created_at)
    money.accrued_usd = accrued
    money.seconds_left = min(left, max(0.0, wall_left))
    ctx.stream.emit("cost", accrued_usd=round(accrued, 6), usd_per_hr=pod.usd_per_hr,
                    seconds_left=round(money.seconds_left, 1), authorized_usd=cap)
    if (n + 1) % 5 == 0 and money.guard is not None:
        # the ledger is read in a thread; the event is emitted here, on the lab's loop
        ctx.budget_event(await asyncio.to_thread(money.guard.summary))
    if pod.gone_at is not None:
        return True
    if cap and accrued >= 0.8 * cap and not money.warned_80:
        money.warned_80 = True
        ctx.stream.emit("warning", msg=f"budget alert: {fmt_usd(accrued)} accrued, 80% of "
                        f"the lab's {fmt_usd(cap)} authorization", kind="budget80")
    if cap and accrued >= cap:
        ctx.request_stop(f"the lab cap {fmt_usd(cap)} was reached")
    elif wall_left <= 0:
        ctx.request_stop(f"the wall-clock cap {cfg.wall_cap_s:.0f} s was reached")
    return True
