"""Preflight: everything a lab can check before it spends a cent, and the price it will pay.

Why first and apart: a refusal here costs nothing (no authorization, no pod), so every check
whose answer is knowable before spending belongs here: the input files, the budget's
pre-flight rule (remaining ≥ lab cap + buffer), pods of earlier labs still alive, and the
provider's quote against the lab cap. Each refusal is a ``LabStop`` with one sentence.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tplab.lab import leftovers
from tplab.lab.config import FAILED, STUB, LabStop
from tplab.lab.context import LabContext


def check_inputs(ctx: LabContext) -> None:
    """The checkpoint and the prompts file exist."""
    cfg = ctx.config
    for path, what in ((cfg.checkpoint, "checkpoint"), (cfg.prompts, "prompts file")):
        if not Path(path).is_file():
            raise LabStop(FAILED, f"the {what} {path} does not exist; pass an existing file")


def open_budget(ctx: LabContext) -> float:
    """Open the ledger (``facts.money.guard``) and apply its pre-flight rule; returns the lab cap."""
    from tplab.budget import BudgetConfig, BudgetGuard
    cfg = ctx.config
    bconf = BudgetConfig.load(mock=cfg.mock).with_overrides(
        lab_cap_usd=cfg.lab_cap_usd, phase_cap_usd=cfg.phase_cap_usd)
    guard = BudgetGuard.from_config(bconf, mock=cfg.mock)
    ctx.facts.money.guard = guard
    ctx.budget_event()
    pre = guard.check_preflight(bconf.lab_cap_usd, bconf.preflight_buffer_usd)
    if not pre.ok:
        raise LabStop(FAILED, pre.message)
    ctx.stream.log(pre.message)
    return bconf.lab_cap_usd


async def check_leftovers(ctx: LabContext) -> None:
    """Warn about pods of earlier labs still alive; refuse to start beside them (headless)."""
    cfg = ctx.config
    assert ctx.provider is not None
    found = await asyncio.to_thread(leftovers.live_pods, ctx.provider, cfg.mock,
                                    exclude_pod=ctx.facts.pod.id, exclude_lab=ctx.facts.lab_id)
    if not found:
        return
    desc = leftovers.describe(found)
    ctx.stream.warn(f"pods of earlier labs are still alive: {desc}",
                    pods=[p.info.id for p in found])
    if cfg.refuse_leftovers:
        ids = " ".join(p.info.id for p in found)
        raise LabStop(FAILED, f"pods of earlier labs are still alive ({desc}); "
                      f"terminate them with `tplab terminate {ids}`"
                      f"{' --mock' if cfg.mock else ''} (or `--all`) and start again")


async def choose_price(ctx: LabContext, lab_cap: float) -> float:
    """The provider's quote for the lab's GPUs (spot unless told otherwise): the hourly price,
    or a refusal when there is no capacity or the wall cap's worst case exceeds the lab cap."""
    cfg = ctx.config
    assert ctx.provider is not None
    quote = await asyncio.to_thread(ctx.provider.quote, cfg.gpu_type, cfg.gpus)
    if cfg.spot:
        price, available, kind = quote.spot_usd_per_hr, quote.spot_available, "spot"
    else:
        price, available = quote.on_demand_usd_per_hr, quote.on_demand_available
        kind = "on-demand"
    if not available or price is None:
        extra = ""
        if cfg.spot and quote.on_demand_available:
            extra = " (on-demand exists, but the lab is spot-only by default: --on-demand)"
        raise LabStop(STUB, f"no {kind} capacity for {cfg.gpus}x {cfg.gpu_type} right now"
                      f"{extra}; nothing was created")
    usd_per_hr = float(price)
    worst = usd_per_hr * cfg.wall_cap_s / 3600.0
    if worst > lab_cap + 1e-9:
        raise LabStop(STUB, f"the {kind} price ${usd_per_hr:.3f}/h for "
                      f"{cfg.wall_cap_s / 3600:.2f} h (the wall cap) could cost "
                      f"${worst:.2f}, above the lab cap ${lab_cap:.2f}; nothing was created")
    ctx.stream.log(f"{kind} quote ${usd_per_hr:.3f}/h; worst case ${worst:.2f} "
                   f"within the lab cap ${lab_cap:.2f}")
    return usd_per_hr
