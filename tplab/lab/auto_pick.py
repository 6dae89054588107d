"""``--provider auto``: spot first across clouds. Quote interruptible capacity on every cloud the
user can use, pick the cheapest offer whose worst case (price x the wall cap) fits the lab cap,
and say which and why.

Why apart: choosing the cloud happens before the lab has a provider (and, in ``--mock`` mode,
before its mock cloud starts), and it is a rule of its own: spot only; when no cloud has
interruptible capacity under the cap the lab is an EDUCATIONAL_STUB whose sentence lists each
cloud's answer (no spot at all / no capacity / over the cap with the price / could not be asked)
and the on-demand quotes, and nothing is created anywhere. The lab never switches to on-demand by
itself. The clouds asked: in mock mode every cloud's mock (each started for the quote and
stopped); else every cloud with a key.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from tplab.cloud import registry
from tplab.cloud.base import AuthError, ProviderError, Quote
from tplab.lab.lab_config import FAILED, STUB, LabConfig, LabStop
from tplab.money.caps import Caps
from tplab.keys.redact import one_line


@dataclass(frozen=True)
class Answer:
    """One cloud's answer to the spot question."""
    name: str
    quote: Quote | None = None
    error: str = ""
    key_refused: bool = False           # the error is the key's (missing or refused)

    @property
    def label(self) -> str:
        return registry.label(self.name)

    def spot_price(self) -> float | None:
        q = self.quote
        if q is None or q.image_refusal:
            return None
        return q.spot_usd_per_hr if q.spot_available and q.spot_usd_per_hr else None

    def describe(self, caps: Caps) -> str:
        """This cloud's answer in a few words, for the pick and the stub."""
        q = self.quote
        if q is None and self.key_refused:
            return f"{self.label}: its key was refused ({self.error})"
        if q is None:
            return f"{self.label}: could not be asked ({self.error})"
        if q.image_refusal:
            return f"{self.label}: {q.image_refusal}"
        price = self.spot_price()
        if price is None:
            kind = "no spot at all" if q.spot_offered is False else "no spot capacity"
            return f"{self.label}: {kind} ({(q.spot_note or 'no offer').rstrip('.')})"
        worst = caps.worst_case(price)
        if not worst.fits:
            return (f"{self.label}: spot ${price:.3f}/h, worst case {worst.text()} over the lab "
                    f"cap ${caps.lab_cap_usd:.2f}")
        return f"{self.label}: spot ${price:.3f}/h, worst case {worst.text()}"


def names(config: LabConfig) -> list[str]:
    """The clouds ``auto`` asks: every mock in mock mode; else every cloud with a key."""
    return list(registry.PROVIDERS) if config.mock else registry.configured()


def _ask(config: LabConfig, name: str) -> Answer:
    """One cloud's quote for the image this lab would get there (blocking: runs in a worker
    thread)."""
    from tplab.cloud.image_fit import choose_image
    from tplab.lab import providers
    image = choose_image(name, config.gpu_type, config.image, compile=config.compile).image
    try:
        if config.mock:
            cloud = registry.package(name).start_mock(**providers.mock_options(config, name))
            try:
                prov = providers.provider_for(cloud.api_key, cloud.api_url, name)
                return Answer(name, prov.quote(config.gpu_type, config.gpus, image))
            finally:
                cloud.stop()
        prov = providers.real_provider(None, name)
        return Answer(name, prov.quote(config.gpu_type, config.gpus, image))
    except AuthError as exc:
        return Answer(name, error=one_line(exc).rstrip("."), key_refused=True)
    except ProviderError as exc:
        return Answer(name, error=one_line(exc).rstrip("."))


def decide(config: LabConfig, answers: list[Answer], caps: Caps) -> tuple[str, str]:
    """(the cloud picked, the sentence saying why); LabStop(STUB) with each cloud's answer and
    the on-demand quotes when none has spot under the cap. The caps are the lab's own
    (``LabConfig.caps``: the one resolution), so the cloud picked is one whose worst case
    the lab's pre-flight then accepts."""
    cap = caps.lab_cap_usd
    fits = [a for a in answers
            if (p := a.spot_price()) is not None and caps.worst_case(p).fits]
    said = "; ".join(a.describe(caps) for a in answers) or "no cloud has a key"
    if fits:
        best = min(fits, key=lambda a: a.spot_price() or 0.0)
        return best.name, (f"--provider auto picked {best.label}: the cheapest spot offer for "
                           f"{config.gpus}x {config.gpu_type} whose worst case fits the lab cap "
                           f"${cap:.2f} ({said})")
    ond = [f"{a.label} ${a.quote.on_demand_usd_per_hr:.3f}/h" for a in answers
           if a.quote and a.quote.on_demand_available and a.quote.on_demand_usd_per_hr]
    raise LabStop(STUB, (
        f"no provider has spot (interruptible) capacity for {config.gpus}x {config.gpu_type} "
        f"under the lab cap ${cap:.2f} ({said}); on-demand: {', '.join(ond) or 'none quoted'}; "
        "the lab is spot-first and never switches to on-demand by itself (`tplab run "
        "--on-demand --provider NAME` asks for it); nothing was created"))


async def pick(config: LabConfig) -> tuple[str, str]:
    """Ask every cloud at once, then ``decide``. No cloud with a key, or every key refused, is
    a key problem (FAILED, each key named), never "no spot"."""
    asked = names(config)
    if not asked:
        raise LabStop(FAILED, registry.no_key_at_all())
    from tplab.money.budget_config import BudgetError
    try:
        caps = config.caps()
    except BudgetError as exc:  # the caps cannot stand together: no cloud is asked
        raise LabStop(FAILED, f"{str(exc).rstrip('.')}; nothing was created") from None
    answers = await asyncio.gather(*(asyncio.to_thread(_ask, config, n) for n in asked))
    refused = [a for a in answers if a.key_refused]
    if refused and len(refused) == len(answers):
        raise LabStop(FAILED, "; ".join(a.error for a in refused) + "; nothing was created")
    return decide(config, list(answers), caps)
