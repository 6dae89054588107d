"""Which of Vast.ai's offers can run the lab's image, and the sentence when none can.

Why per offer: on Vast every offer is one host with its own driver (``cuda_max_good``, the newest
CUDA the driver runs) and its own GPUs (``compute_cap``, the compute capability x 100). The
cheapest offer for "2x RTX 4090" may be a host whose driver stops at CUDA 12.2, where a CUDA 12.4
image cannot start; renting it would bill the pull and the boot for a pod that fails at its
first CUDA call. So the quote and the create take the cheapest offer that can run the image
(``tplab.cloud.image_fit``: its driver's CUDA, its GPU's kernels in the image's torch), and when
offers exist but none can, the lab is refused before anything is rented, saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from tplab.cloud import gpu_arch, images
from tplab.cloud.base import HostOffer
from tplab.cloud.image_fit import Fit, ImageChoice, gpu_fit, host_fit
from tplab.cloud.vast import shapes

#: offers shown per quote (the cheapest first): enough to see why the cheapest were passed over
SHOWN = 6


@dataclass(frozen=True)
class JudgedOffer:
    offer: dict[str, Any]
    price: float                 # the whole machine per hour, storage included
    fit: Fit
    kind: str = "bid"            # "bid" (interruptible) or "ondemand"

    @property
    def what(self) -> str:
        """What ``price`` is, in words."""
        return ("minimum bid + storage" if self.kind == "bid" else "on-demand price + storage")


#: the order offers are taken in: a known fit, then a host that does not say (its CUDA or its
#: GPU unknown: the pod checks itself at start, so it is taken only when no known fit is
#: offered), then one that cannot run the image
RANK = {True: 0, None: 1, False: 2}


def judge(offers: Iterable[Any], kind: str, disk_gb: float, choice: ImageChoice,
          gpu_type: str) -> list[JudgedOffer]:
    """The priced offers, cheapest first, each judged for ``choice`` (shown in that order, so
    the cheaper ones passed over say why; ``cheapest_runnable`` takes them by ``RANK``)."""
    out = []
    for offer in offers:
        if not isinstance(offer, dict) or offer.get("id") is None:
            continue
        price = shapes.offer_price(offer, kind, disk_gb)
        if price is None:
            continue
        cap = gpu_arch.capability_from_vast(offer.get("compute_cap"))
        fit = Fit.worst(gpu_fit(choice, str(offer.get("gpu_name") or gpu_type), "vast", cap),
                        host_fit(choice, offer.get("cuda_max_good")))
        out.append(JudgedOffer(offer, price, fit, kind))
    return sorted(out, key=lambda j: j.price)


def cheapest_runnable(judged: list[JudgedOffer]) -> JudgedOffer | None:
    """The offer the lab takes: the cheapest known fit; only when there is none, the cheapest
    whose host does not say (the pod checks itself at start); never a refused one."""
    return min((j for j in judged if j.fit.ok is not False),
               key=lambda j: (RANK[j.fit.ok], j.price), default=None)


def host_offers(judged: list[JudgedOffer], shown: int = SHOWN) -> tuple[HostOffer, ...]:
    """The cheapest ``shown`` offers as the quote's ``hosts``."""
    return tuple(HostOffer(offer=f"offer {j.offer['id']}", usd_per_hr=j.price,
                           host_cuda=_cuda_text(j.offer.get("cuda_max_good")), ok=j.fit.ok,
                           why=j.fit.clause, price_what=j.what) for j in judged[:shown])


def refusal(judged: list[JudgedOffer], choice: ImageChoice, gpu_count: int,
            gpu_type: str, what: str) -> str:
    """The clause when offers exist and none can run ``choice`` ("" when one can, or none
    exists); ``what``: "interruptible" or "on-demand". The caller says what was not done."""
    if not judged or cheapest_runnable(judged) is not None:
        return ""
    name = shapes.vast_gpu_name(gpu_type)
    head = (f"Vast.ai's one {what} offer for {gpu_count}x {name} cannot run {choice.image}"
            if len(judged) == 1 else
            f"none of Vast.ai's {len(judged)} {what} offers for {gpu_count}x {name} can run "
            f"{choice.image}")
    hosts = [images.cuda_tuple(j.offer.get("cuda_max_good")) for j in judged]
    newest = max((h for h in hosts if h is not None), default=None)
    need = images.cuda_tuple(choice.cuda)
    if need is not None and newest is not None and newest < need and all(
            "driver runs CUDA" in j.fit.reason for j in judged):
        older = images.older_cuda_image("vast", newest)
        hint = (f"name an image built for CUDA {newest[0]}.{newest[1]} or older with --image"
                + (f" (such as {older.name})" if older else "") + ", or another GPU type")
        whose = "its host's driver runs" if len(judged) == 1 else "their hosts' drivers run"
        return (f"{head}: {whose} CUDA {newest[0]}.{newest[1]} at most, below the image's "
                f"{need[0]}.{need[1]}; {hint}")
    return judged[0].fit.reason  # the GPU's kernels: the same for every offer, image named


def _cuda_text(value: Any) -> str | None:
    cuda = images.cuda_tuple(value)
    return f"{cuda[0]}.{cuda[1]}" if cuda else None
