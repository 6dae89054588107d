"""The mock cloud's GPU catalogue: RunPod's GPU type ids with plausible per-GPU hourly prices.

Prices are per GPU per hour, as RunPod quotes them (``lowestPrice`` is per GPU; a pod costs
price x gpuCount). They are only plausible figures, for a realistic budget flow in mock mode.

``host_cuda``: the CUDA versions the drivers of the GPU type's hosts run (what the catalog's
``cudaVersions`` lists and a create's ``allowedCudaVersions`` picks from). The RTX 4090 has hosts
at 12.2 too (a CUDA 12.4 image cannot start there: a create must leave them out), the RTX 3090
only such hosts, and the Blackwell types (RTX 5090, B200) hosts at 12.8.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuOffer:
    id: str
    display_name: str
    memory_gb: int
    on_demand_usd: float     # per GPU-hour (uninterruptablePrice)
    spot_usd: float          # per GPU-hour minimum bid (minimumBidPrice)
    max_count: int = 8
    stock: str = "High"
    host_cuda: tuple[str, ...] = ("12.4", "12.8")


CATALOG: tuple[GpuOffer, ...] = (
    GpuOffer("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.69, 0.35,
             host_cuda=("12.2", "12.4", "12.8")),
    GpuOffer("NVIDIA RTX A4000", "RTX A4000", 16, 0.25, 0.13),
    GpuOffer("NVIDIA RTX A6000", "RTX A6000", 48, 0.49, 0.25),
    GpuOffer("NVIDIA L40S", "L40S", 48, 0.86, 0.43, stock="Medium"),
    GpuOffer("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 1.64, 0.82, stock="Low"),
    GpuOffer("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.99, 1.75, stock="Low"),
    GpuOffer("NVIDIA GeForce RTX 3090", "RTX 3090", 24, 0.43, 0.22, host_cuda=("12.2",)),
    GpuOffer("NVIDIA GeForce RTX 5090", "RTX 5090", 32, 0.89, 0.45, host_cuda=("12.8",)),
    GpuOffer("NVIDIA B200", "B200", 180, 5.99, 3.10, stock="Low", host_cuda=("12.8",)),
)


def find_offer(gpu_type_id: str | None) -> GpuOffer | None:
    for offer in CATALOG:
        if offer.id == gpu_type_id:
            return offer
    return None
