"""The container images tplab knows: which torch, which CUDA, which GPU kernels each carries.

Why a catalog: a real pod runs its image's torch, not the client's, and a pod whose image cannot
drive its GPU, or whose host driver cannot run the image's CUDA, fails only after the boot and
the upload have been paid for. What each image holds is written here once, with where each fact
comes from, and the lab reads it to choose an image per cloud and GPU generation and to refuse,
before anything is rented, a pod that could not run the job (``tplab.cloud.image_fit``).

The defaults, per cloud, one for Ampere/Ada/Hopper (and older) GPUs and one for Blackwell:

- RunPod: RunPod's own images, because their ``/start.sh`` is what starts sshd on a RunPod pod
  (the lab's create hands over to it). They come in one flavour only, with compilers.
- Vast.ai: the PyTorch project's images (Vast adds its own sshd for ``runtype: ssh_direct``), in
  the runtime flavour (a pull billed by the minute: 3.24 GB compressed against the devel
  flavour's 8.25 GB, pytorch/pytorch#116696), except for ``--compile``: torch.compile's
  Triton kernels need a C compiler, which the runtime flavour does not have (same issue), so
  ``--compile`` takes the devel flavour.

An image the catalog does not hold is read from its tag when the tag follows a well-known
pattern (``pytorch/pytorch:<torch>-cuda<X.Y>-cudnn<N>-<flavour>``, RunPod's
``<torch>-py<P>-cuda<X.Y.Z>-devel-ubuntu<U>`` and ``<release>-cu<XYZ>-torch<T>-ubuntu<U>``);
its kernel list is then the part every official torch build for that CUDA carries, so tplab
refuses on it only what that CUDA cannot do at all. Anything else: tplab cannot tell, and
says so; the pod checks its torch at start either way. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tplab.records.torch_support import unsupported_torch

#: what ``torch.cuda.get_arch_list()`` answers in torch's official CUDA 12 builds of 2.4 (the
#: build's TORCH_CUDA_ARCH_LIST "5.0;6.0;7.0;7.5;8.0;8.6;9.0": pytorch/builder
#: manywheel/build_cuda.sh adds 9.0 for CUDA 12.x; read in torch 2.4.0+cu121 here with
#: torch._C._cuda_getArchFlags(): "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"). No PTX: nothing
#: newer than sm_90 (no Blackwell).
ARCH_TORCH_24_CU12 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
#: torch 2.8's CUDA 12.8 builds: TORCH_CUDA_ARCH_LIST "7.0;7.5;8.0;8.6;9.0;10.0;12.0"
#: (pytorch/pytorch .ci/manywheel/build_cuda.sh, case 12.8, keeping sm_70 per pytorch/pytorch
#: #157517; pytorch/pytorch#182250 shows 2.10.0+cu128 answering the same list)
ARCH_TORCH_28_CU128 = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
#: the kernels every official torch build for a CUDA older than 12.8 (11.8 .. 12.6) carries,
#: torch 2.4 and later: no Blackwell, which CUDA 12.8 is the first toolkit to build for
_COMMON_BEFORE_128 = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
#: ... and every one for CUDA 12.8 or newer: 2.7's cu128 dropped sm_70 (back in 2.8 .. 2.10,
#: gone again in 2.11's cu128 and every cu130 build), so it is not counted
_COMMON_FROM_128 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


@dataclass(frozen=True)
class ImageFacts:
    """What one image holds. ``known``: from the catalog below; False: read from its tag."""
    name: str
    torch: str                   # the torch release inside ("2.4.0")
    cuda: str                    # the CUDA it was built for, major.minor ("12.4")
    arch_list: tuple[str, ...]   # torch.cuda.get_arch_list() in it (known) or a lower bound
    flavour: str                 # "runtime", "devel" or "" (one flavour only)
    start_sh: bool | None        # it has RunPod's /start.sh (starts sshd on a RunPod pod)
    compiler: bool | None        # it has a C compiler (torch.compile's Triton needs one)
    known: bool
    source: str                  # where the facts come from, one clause

    def describe(self) -> str:
        """'torch 2.4.0, CUDA 12.4, kernels sm_50..sm_90' (a lower bound when read from the tag)."""
        arch = f"{self.arch_list[0]}..{self.arch_list[-1]}" if self.arch_list else "none listed"
        return (f"torch {self.torch}, CUDA {self.cuda}, kernels "
                f"{'' if self.known else 'at least '}{arch}")


def _known(name: str, torch: str, cuda: str, arch: tuple[str, ...], flavour: str,
           start_sh: bool, compiler: bool, source: str) -> ImageFacts:
    return ImageFacts(name, torch, cuda, arch, flavour, start_sh, compiler, True, source)


# RunPod's images (runpod/containers, official-templates/pytorch). The tag names the torch and
# the CUDA; the base installs build-essential (official-templates/base/Dockerfile), and
# CMD /start.sh writes $PUBLIC_KEY and starts sshd.
RUNPOD_TORCH_24 = _known(
    "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04", "2.4.0", "12.4",
    ARCH_TORCH_24_CU12, "devel", True, True,
    "RunPod's official image: the tag (torch 2.4.0, CUDA 12.4.1); torch 2.4's CUDA 12 arch list")
#: docker-bake.hcl's CUDA_TORCH_COMBINATIONS: CUDA 12.8.1 with torch 2.8.0 from the cu128 wheels,
#: tagged runpod/pytorch:<release>-cu1281-torch280-<ubuntu>; release 1.0.2 is published
RUNPOD_TORCH_28 = _known(
    "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2204", "2.8.0", "12.8", ARCH_TORCH_28_CU128,
    "", True, True,
    "RunPod's official image: runpod/containers docker-bake.hcl (CUDA 12.8.1, torch 2.8.0 cu128 "
    "wheels); torch 2.8's CUDA 12.8 arch list")
# The PyTorch project's images (Docker Hub pytorch/pytorch): conda/pip torch of that release and
# CUDA; the runtime flavour has no compiler (pytorch/pytorch#116696).
PYTORCH_24_RUNTIME = _known(
    "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime", "2.4.0", "12.4", ARCH_TORCH_24_CU12,
    "runtime", False, False, "the PyTorch project's image: the tag; torch 2.4's CUDA 12 arch list")
#: the same release built for CUDA 12.1: the very build whose arch list is read above, for hosts
#: whose driver stops below CUDA 12.4
PYTORCH_24_CU121_RUNTIME = _known(
    "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", "2.4.0", "12.1", ARCH_TORCH_24_CU12,
    "runtime", False, False, "the PyTorch project's image: the tag; torch 2.4's CUDA 12 arch list")
PYTORCH_24_DEVEL = _known(
    "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-devel", "2.4.0", "12.4", ARCH_TORCH_24_CU12,
    "devel", False, True, "the PyTorch project's image: the tag; torch 2.4's CUDA 12 arch list")
PYTORCH_28_RUNTIME = _known(
    "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime", "2.8.0", "12.8", ARCH_TORCH_28_CU128,
    "runtime", False, False,
    "the PyTorch project's image: the tag; torch 2.8's CUDA 12.8 arch list")
PYTORCH_28_DEVEL = _known(
    "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel", "2.8.0", "12.8", ARCH_TORCH_28_CU128,
    "devel", False, True, "the PyTorch project's image: the tag; torch 2.8's CUDA 12.8 arch list")

CATALOG: dict[str, ImageFacts] = {f.name: f for f in (
    RUNPOD_TORCH_24, RUNPOD_TORCH_28, PYTORCH_24_RUNTIME, PYTORCH_24_CU121_RUNTIME,
    PYTORCH_24_DEVEL, PYTORCH_28_RUNTIME, PYTORCH_28_DEVEL)}

#: the two GPU families a default is chosen for
STANDARD, BLACKWELL = "standard", "blackwell"
#: cloud -> family -> (the image without a compiler need, the image for --compile)
DEFAULTS: dict[str, dict[str, tuple[ImageFacts, ImageFacts]]] = {
    "runpod": {STANDARD: (RUNPOD_TORCH_24, RUNPOD_TORCH_24),
               BLACKWELL: (RUNPOD_TORCH_28, RUNPOD_TORCH_28)},
    "vast": {STANDARD: (PYTORCH_24_RUNTIME, PYTORCH_24_DEVEL),
             BLACKWELL: (PYTORCH_28_RUNTIME, PYTORCH_28_DEVEL)},
}


def default_image(cloud: str, family: str = STANDARD, compile: bool = False) -> ImageFacts:
    """The catalog's default for ``cloud`` (a registry name) and GPU ``family``."""
    pair = DEFAULTS.get(cloud, DEFAULTS["vast"])[family]
    return pair[1] if compile else pair[0]


_PYTORCH_TAG = re.compile(
    r"^(?:[\w.-]+/)?pytorch/pytorch:(\d+\.\d+\.\d+)-cuda(\d+\.\d+)-cudnn\d+-(runtime|devel)$")
_RUNPOD_OLD_TAG = re.compile(
    r"^runpod/pytorch:(\d+\.\d+\.\d+)-py[\d.]+-cuda(\d+)\.(\d+)(?:\.\d+)?-devel-ubuntu[\d.]+$")
_RUNPOD_NEW_TAG = re.compile(
    r"^runpod/pytorch:\d+\.\d+\.\d+[\w.-]*?-cu(\d{2})(\d)\d-torch(\d)(\d+)(\d)-ubuntu\d+$")


def _derived_arch(cuda: str) -> tuple[str, ...]:
    major, minor = (int(p) for p in cuda.split(".")[:2])
    return _COMMON_FROM_128 if (major, minor) >= (12, 8) else _COMMON_BEFORE_128


def _from_tag(name: str) -> ImageFacts | None:
    m = _PYTORCH_TAG.match(name)
    if m:
        torch, cuda, flavour = m.groups()
        return ImageFacts(name, torch, cuda, _derived_arch(cuda), flavour, False,
                          True if flavour == "devel" else None, False,
                          "read from the tag (pytorch/pytorch's pattern)")
    m = _RUNPOD_OLD_TAG.match(name)
    if m:
        cuda = f"{int(m.group(2))}.{int(m.group(3))}"
        return ImageFacts(name, m.group(1), cuda, _derived_arch(cuda), "devel", True, True,
                          False, "read from the tag (RunPod's pattern)")
    m = _RUNPOD_NEW_TAG.match(name)
    if m:
        cuda = f"{int(m.group(1))}.{int(m.group(2))}"
        torch = f"{m.group(3)}.{int(m.group(4))}.{m.group(5)}"
        return ImageFacts(name, torch, cuda, _derived_arch(cuda), "", True, True, False,
                          "read from the tag (RunPod's pattern)")
    return None


def older_cuda_image(cloud: str, host_cuda: tuple[int, int]) -> ImageFacts | None:
    """A catalog image for ``cloud`` whose torch is supported and whose CUDA a host running
    ``host_cuda`` at most can run (the newest such), or None."""
    fits = [f for f in CATALOG.values()
            if (cloud != "runpod" or f.start_sh) and f.flavour != "devel"
            and (c := cuda_tuple(f.cuda)) is not None and c <= host_cuda
            and unsupported_torch(f.torch) is None]
    return max(fits, key=lambda f: cuda_tuple(f.cuda) or (0, 0), default=None)


def facts_for(name: str) -> ImageFacts | None:
    """What tplab knows of the image ``name``: the catalog's entry, else what a well-known tag
    pattern says, else None (tplab cannot tell its torch or CUDA)."""
    name = name.strip()
    if name.startswith("docker.io/"):
        name = name[len("docker.io/"):]
    return CATALOG.get(name) or _from_tag(name)


def cuda_tuple(version: str | float | None) -> tuple[int, int] | None:
    """'12.4' / 12.4 / '12.4.1' -> (12, 4); None when it is not a version."""
    if version is None:
        return None
    m = re.match(r"^\s*(\d+)\.(\d+)", str(version))
    return (int(m.group(1)), int(m.group(2))) if m else None
