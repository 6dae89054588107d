"""The cost ticker: what the pod has cost so far, the 80% alert, and the caps that stop the lab.

Why on the client as well as on the pod: the pod's watchdog enforces the wall cap even when the
client is gone, but only the client knows the lab's dollar authorization. Every tick emits a
``cost`` event (accrued dollars at the quoted price, seconds left before a cap); every fifth the
ledger's figures; at 80% of the authorization a warning; at 100%, or at the wall cap, a stop
asked of the lab. The figures and the alert are the lab's money's (``LabMoney.tick``); the
pod says how long it has run.
"""

from __future__ import annotations

import asyncio
import time

from tplab.keys.redact import one_line
from tplab.lab.lab_config import FAILED, LabConfig, StopRequest
from tplab.lab.pod import LabPod
from tplab.lab.stream import LabStream
from tplab.money.budget_config import fmt_usd
from tplab.money.lab_money import LabMoney


async def cost_ticker(config: LabConfig, pod: LabPod, money: LabMoney, stream: LabStream,
                      stop: StopRequest) -> None:
    """Runs until cancelled (the orchestrator cancels it once the lab has torn down). A tick
    that fails (the ledger unreadable, say) is a warning; the next tick tries again."""
    n = 0
    failed: set[str] = set()
    while True:
        await asyncio.sleep(config.cost_tick_s)
        try:
            if await _tick(config, pod, money, stream, stop, n):
                n += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported once per distinct failure
            msg = one_line(exc) or type(exc).__name__
            if msg not in failed:
                failed.add(msg)
                stream.warn(f"the cost ticker failed ({msg}); it keeps trying, and the "
                                "pod's watchdog enforces the wall cap regardless")


async def _tick(config: LabConfig, pod: LabPod, money: LabMoney, stream: LabStream,
                stop: StopRequest, n: int) -> bool:
    """One tick; False while there is no pod (nothing to count). Once the pod is gone and its
    cost billed, the figure it emits is the billed one."""
    cfg = config
    if pod.created_at is None or pod.usd_per_hr is None:
        return False
    end = pod.gone_at or time.time()
    alert = cap_reached = False
    if money.actual_cost_usd is None:  # billed once settled: the estimate stops there
        alert, cap_reached = money.tick(pod.usd_per_hr, end - pod.created_at, cfg.wall_cap_s)
    stream.emit("cost", **money.cost_event_fields())
    if (n + 1) % 5 == 0 and money.guard is not None:
        # the ledger is read in a thread; the event is emitted here, on the lab's loop
        summary = await asyncio.to_thread(money.guard.summary)
        stream.emit(money.budget_event(summary, cfg.ledger_label()))
    if pod.gone_at is not None:
        return True
    if alert:
        stream.emit("warning", msg=money.alert_text(), kind="budget80")
    if cap_reached:
        stop(f"the lab cap {fmt_usd(money.authorized_usd)} was reached", FAILED)
    elif cfg.wall_cap_s - (end - pod.created_at) <= 0:
        stop(f"the wall-clock cap {cfg.wall_cap_s:.0f} s was reached", FAILED)
    return True
