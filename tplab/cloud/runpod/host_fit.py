"""Which of RunPod's hosts can run the lab's image: the CUDA versions its catalog lists per GPU
type, and the ``allowedCudaVersions`` a create sends so the pod lands only on one of them.

Why: RunPod places a pod on any host with the GPU unless told otherwise, and a host whose driver
is older than the image's CUDA starts the container and fails at its first CUDA call (torch
falls back to the CPU, or stops). ``GET /v2/catalog/gpus?include=AVAILABILITY&product=POD``
answers, per GPU type, ``cudaVersions`` [{version, available}] (the hosts' driver CUDA versions
and whether one of them has capacity); ``gpu.allowedCudaVersions`` on the create is an exact set
of those ("a version no machine reports yields a capacity error rather than a fallback"; it
excludes ``minCudaVersion``). So the create sends the catalog's versions that run the image's
CUDA, and when the catalog lists versions and none does, the lab is refused before anything is
created. A catalog without ``cudaVersions`` for the GPU says nothing: the create then sends the
image's CUDA as ``minCudaVersion``, a floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tplab.cloud import images
from tplab.cloud.base import HostOffer
from tplab.cloud.image_fit import Fit, ImageChoice, allowed_cuda, gpu_fit, host_fit


@dataclass(frozen=True)
class CudaHosts:
    """RunPod's hosts for one GPU type, judged for one image."""
    hosts: tuple[HostOffer, ...]   # one per CUDA version the catalog lists
    allowed: list[str]             # the versions that run the image ([] : none, or none listed)
    refusal: str                   # why no listed host can run it ("" otherwise)

    @property
    def listed(self) -> bool:
        return bool(self.hosts)

    @property
    def capacity(self) -> bool:
        """A host that runs the image has capacity now (True when the catalog lists none)."""
        return not self.hosts or any(h.available and h.ok is not False for h in self.hosts)


def versions(gpu: dict[str, Any]) -> list[tuple[str, bool]]:
    """The catalog entry's ``cudaVersions`` as (version, available), in its order."""
    out = []
    for item in gpu.get("cudaVersions") or []:
        if isinstance(item, dict) and images.cuda_tuple(item.get("version")) is not None:
            out.append((str(item["version"]), bool(item.get("available"))))
    return out


def judge(gpu: dict[str, Any], choice: ImageChoice, gpu_type: str, gpu_count: int,
          usd_per_hr: float | None) -> CudaHosts:
    """The catalog entry ``gpu`` judged for ``choice``."""
    listed = versions(gpu)
    device = gpu_fit(choice, gpu_type, "runpod")
    hosts = tuple(
        HostOffer(offer=f"hosts with CUDA {v}", usd_per_hr=usd_per_hr, host_cuda=v,
                  ok=(fit := Fit.worst(device, host_fit(choice, v))).ok, why=fit.clause,
                  available=available)
        for v, available in listed)
    allowed = allowed_cuda(choice, [v for v, _ in listed]) if device.ok is not False else []
    refusal = ""
    if listed and not allowed:
        if device.ok is False:
            refusal = device.reason
        else:
            newest = max(images.cuda_tuple(v) or (0, 0) for v, _ in listed)
            need = images.cuda_tuple(choice.cuda) or (0, 0)
            older = images.older_cuda_image("runpod", newest)
            refusal = (f"none of RunPod's hosts for {gpu_count}x {gpu_type} can run "
                       f"{choice.image}: their drivers run CUDA {newest[0]}.{newest[1]} at "
                       f"most, below the image's {need[0]}.{need[1]}; name an image built for "
                       f"CUDA {newest[0]}.{newest[1]} or older with --image"
                       + (f" (such as {older.name})" if older else "") + ", or another GPU type")
    return CudaHosts(hosts, allowed, refusal)
