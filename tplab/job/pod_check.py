"""Can this pod run the job at all? Asked once, at the job's start, before any process group.

Why a check of its own: a pod runs its image's torch on its host's driver and GPUs, none of which
the client controls once the pod exists. A torch too old or too new for the job, a CPU build on a
GPU pod, a driver too old for the image's CUDA, fewer GPUs than ranks, a GPU the torch build has no
kernels for (an RTX 5090 under a CUDA 12.4 torch) or a torch without NCCL each fail somewhere deep
in the first token, as a traceback, after the boot and the upload were paid for. Checked here,
each is one sentence that says what to change, as the job's first error event, and the client
ends the pod with that reason.

The facts come from torch in one place (``facts``); the verdict is a pure function of them
(``problem``), so every refusal is tested on a machine without a GPU.

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from tplab.records.torch_support import SUPPORTED_TORCH, has_kernels_for, unsupported_torch


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    capability: tuple[int, int]


@dataclass(frozen=True, slots=True)
class TorchFacts:
    """What this pod's torch reports about itself and the GPUs it sees."""

    version: str
    cuda: str | None                  # torch.version.cuda: None for a CPU build
    cuda_available: bool
    gpus: tuple[Gpu, ...] = ()        # the visible GPUs, in device order
    arch_list: tuple[str, ...] = ()   # torch.cuda.get_arch_list()
    nccl: bool = False                # torch.distributed.is_nccl_available()
    driver: str = ""                  # the host driver's version (nvidia-smi), "" when unknown


def _driver_version() -> str:
    if shutil.which("nvidia-smi") is None:
        return ""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = done.stdout.strip().splitlines() if done.returncode == 0 else []
    return lines[0].strip() if lines else ""


def facts() -> TorchFacts:
    """This process's torch, asked (CUDA is initialised only when a GPU is there to be asked)."""
    import torch
    import torch.distributed as dist

    available = torch.cuda.is_available()
    gpus: tuple[Gpu, ...] = ()
    arch: tuple[str, ...] = ()
    if available:
        caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
        gpus = tuple(Gpu(torch.cuda.get_device_name(i), (int(c[0]), int(c[1])))
                     for i, c in enumerate(caps))
        arch = tuple(torch.cuda.get_arch_list())
    return TorchFacts(version=str(torch.__version__), cuda=torch.version.cuda,
                      cuda_available=available, gpus=gpus, arch_list=arch,
                      nccl=bool(dist.is_available() and dist.is_nccl_available()),
                      # asked only where it explains a refusal: a CUDA build that sees no GPU
                      driver=_driver_version() if torch.version.cuda and not available else "")


def _sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def problem(f: TorchFacts, device: str, world_size: int) -> str | None:
    """One sentence saying why this pod cannot run a ``world_size``-rank job on ``device``
    ("cuda": the lab rented GPUs; "auto": GPUs when there are any; "cpu"), or None."""
    bad_torch = unsupported_torch(f.version)
    if bad_torch is not None:
        return bad_torch
    wants_gpu = device == "cuda" or (device == "auto" and f.cuda_available and bool(f.gpus))
    if not wants_gpu:
        return None
    if f.cuda is None:
        return (f"this pod's torch {f.version} is a CPU build, so it cannot use the pod's GPUs: "
                f"use an image with a CUDA build of torch {SUPPORTED_TORCH}.")
    if not f.cuda_available or not f.gpus:
        driver = f" (driver {f.driver})" if f.driver else ""
        return (f"torch {f.version} (CUDA {f.cuda}) sees no GPU on this pod: the host's "
                f"driver{driver} cannot run CUDA {f.cuda}, or no GPU is attached; rent a host "
                f"whose driver runs CUDA {f.cuda}, or use an image with an older CUDA.")
    if len(f.gpus) < world_size:
        n = len(f.gpus)
        return (f"{world_size} ranks need {world_size} GPUs but only {n} "
                f"{'is' if n == 1 else 'are'} visible on this pod; rent {world_size} GPUs or "
                f"run with --gpus {n}.")
    for i, gpu in enumerate(f.gpus[:world_size]):
        if not has_kernels_for(gpu.capability, f.arch_list):
            built = ", ".join(f.arch_list) or "no GPU architecture"
            newer = " (CUDA 12.8 or newer)" if gpu.capability >= (10, 0) else ""
            return (f"GPU {i} ({gpu.name}) is {_sm(gpu.capability)}, and this pod's torch "
                    f"{f.version} (CUDA {f.cuda}) has kernels for {built} only: use an image "
                    f"with a torch built for {_sm(gpu.capability)}{newer}.")
    if not f.nccl:
        return (f"this pod's torch {f.version} was built without NCCL, which TP on GPUs needs: "
                f"use an official CUDA build of torch.")
    return None
