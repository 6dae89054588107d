"""Which image a lab's pod gets, and whether that image can run the job on a given GPU and host.

Why before the create: a pod that cannot run the job fails at its first line of torch, after the
boot, the image pull and the upload were billed. Three things decide it, all knowable before
anything is rented:

1. the image's torch is one the job runs on (``tplab.records.torch_support.SUPPORTED_TORCH``);
2. the image's torch has kernels for the GPU's compute capability (``has_kernels_for``: an
   RTX 5090 is sm_120, which torch 2.4's CUDA 12.4 build does not have);
3. the host's driver runs the image's CUDA (a Vast offer's ``cuda_max_good``; RunPod's hosts'
   CUDA versions in its catalog, and ``allowedCudaVersions`` on the create).

And, per cloud: a RunPod pod's sshd comes from the image's ``/start.sh``; ``--compile`` needs a C
compiler in the image. Each verdict is a ``Fit``: True (it runs), False (refused, one clause
saying why and what to do) or None (tplab cannot tell: the pod checks its torch at start).

``choose_image`` picks the default for the cloud and the GPU's generation (``images.DEFAULTS``)
unless the user named one (``--image``). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from tplab.cloud import gpu_arch, images
from tplab.cloud.images import ImageFacts
from tplab.records.torch_support import SUPPORTED_TORCH, has_kernels_for, unsupported_torch

_CLOUD_LABEL = {"runpod": "RunPod", "vast": "Vast.ai"}


@dataclass(frozen=True)
class ImageChoice:
    """The image a lab's pod gets and why."""
    image: str
    facts: ImageFacts | None   # None: tplab cannot tell the image's torch or CUDA
    why: str                   # "the default for Ada GPUs on Vast.ai (runtime flavour ...)"
    named: bool = False        # the user named it (--image)

    @property
    def cuda(self) -> str | None:
        return self.facts.cuda if self.facts else None

    def describe(self) -> str:
        """'X (torch 2.4.0, CUDA 12.4, kernels sm_50..sm_90): why'."""
        what = self.facts.describe() if self.facts else "torch and CUDA unknown to tplab"
        return f"{self.image} ({what}): {self.why}"

    def to_dict(self) -> dict[str, object]:
        """The manifest's ``image`` section."""
        f = self.facts
        return {"name": self.image, "why": self.why, "named": self.named,
                "torch": f.torch if f else None, "cuda": f.cuda if f else None,
                "arch_list": list(f.arch_list) if f else None,
                "arch_list_complete": f.known if f else None,
                "flavour": f.flavour if f else None, "source": f.source if f else None}


@dataclass(frozen=True)
class Fit:
    """Whether a pod can run the job: True, False (refused), None (tplab cannot tell).
    ``reason``: the sentence (what and what to do); ``short``: the same in a few words, for a
    line per offer ("" : the reason is short already)."""
    ok: bool | None
    reason: str
    short: str = ""

    @property
    def clause(self) -> str:
        return self.short or self.reason

    @staticmethod
    def worst(*fits: Fit) -> Fit:
        """The first refusal, else the first "cannot tell", else the last fine one."""
        for fit in fits:
            if fit.ok is False:
                return fit
        for fit in fits:
            if fit.ok is None:
                return fit
        return fits[-1]


def _family(cap: gpu_arch.Capability | None) -> str:
    return images.BLACKWELL if cap is not None and cap[0] >= 10 else images.STANDARD


def choose_image(cloud: str, gpu_type: str, requested: str | None = None, *,
                 compile: bool = False) -> ImageChoice:
    """The image for a pod of ``gpu_type`` on ``cloud`` (a registry name): ``requested`` when
    the user named one, else the catalog's default for the GPU's generation."""
    if requested and requested.strip():
        name = requested.strip()
        return ImageChoice(name, images.facts_for(name), "named with --image", named=True)
    cap = gpu_arch.capability_of(gpu_type)
    facts = images.default_image(cloud, _family(cap), compile)
    where = _CLOUD_LABEL.get(cloud, cloud)
    gen = (f"{gpu_arch.generation(cap)} GPUs ({gpu_arch.sm(cap)})" if cap else
           f"a GPU tplab does not know ({gpu_type})")
    flavour = ""
    if facts.flavour == "runtime":
        flavour = "; the runtime flavour, several GB less to pull than devel"
    elif facts.flavour == "devel" and compile:
        flavour = "; the devel flavour: --compile needs its C compiler"
    elif facts.start_sh and cloud == "runpod":
        flavour = "; RunPod's own image, whose /start.sh starts sshd"
    return ImageChoice(facts.name, facts, f"the default for {gen} on {where}{flavour}")


def _newer_hint(choice: ImageChoice, cloud: str, cap: gpu_arch.Capability) -> str:
    better = images.default_image(cloud, _family(cap)).name
    first = gpu_arch.first_cuda_for(cap)
    built = f"built for CUDA {first[0]}.{first[1]} or newer" if first else "built for it"
    if better == choice.image:
        return f"name an image {built} with --image"
    return (f"{'drop --image for the default' if choice.named else 'use'} {better}, or name "
            f"another image {built}")


def gpu_fit(choice: ImageChoice, gpu_type: str, cloud: str,
            capability: gpu_arch.Capability | None = None, *, compile: bool = False) -> Fit:
    """Whether ``choice`` can drive ``gpu_type`` on ``cloud`` at all, whatever the host: the
    torch range, the GPU's kernels, sshd on RunPod, a compiler for ``--compile``."""
    f = choice.facts
    if f is None:
        return Fit(None, f"tplab cannot tell the torch or CUDA of {choice.image}; the pod "
                         f"checks its torch ({SUPPORTED_TORCH}) and the GPU when it starts",
                   "the image's torch and CUDA are unknown to tplab: the pod checks them")
    torch_problem = unsupported_torch(f.torch)
    if torch_problem:
        return Fit(False, f"the image {choice.image}: {torch_problem.rstrip('.')}")
    if cloud == "runpod" and f.start_sh is False:
        return Fit(False, f"the image {choice.image} has no /start.sh, which is what starts sshd on a "
                          f"RunPod pod: use a runpod/pytorch image such as "
                          f"{images.default_image('runpod').name}")
    if compile and f.compiler is False:
        devel = images.default_image(cloud, images.STANDARD, compile=True).name
        return Fit(False, f"the image {choice.image} has no C compiler, which --compile's Triton kernels "
                          f"need: name a devel image (such as {devel}) or drop --compile")
    cap = capability or gpu_arch.capability_of(gpu_type)
    if cap is None:
        return Fit(None, f"tplab does not know the compute capability of {gpu_type}; the pod "
                         f"checks that torch {f.torch} has kernels for it when it starts",
                   "its GPU's compute capability is unknown to tplab: the pod checks it")
    target = f"{gpu_type} ({gpu_arch.generation(cap)}, {gpu_arch.sm(cap)})"
    first = gpu_arch.first_cuda_for(cap)
    cuda = images.cuda_tuple(f.cuda)
    if first is not None and cuda is not None and cuda < first:
        return Fit(False, f"the image {choice.image} (torch {f.torch}, CUDA {f.cuda}) has no "
                          f"kernels for {target}, which needs a torch built for CUDA "
                          f"{first[0]}.{first[1]} or newer: {_newer_hint(choice, cloud, cap)}",
                   f"its GPU is {gpu_arch.sm(cap)}: no kernels in torch {f.torch} (CUDA {f.cuda})")
    if has_kernels_for(cap, f.arch_list):
        return Fit(True, f"torch {f.torch} has kernels for {target}")
    if not f.known:
        return Fit(None, f"tplab cannot tell whether torch {f.torch} of {choice.image} has "
                         f"kernels for {target}; the pod checks it when it starts",
                   f"whether torch {f.torch} has kernels for {gpu_arch.sm(cap)} is unknown to "
                   "tplab: the pod checks it")
    return Fit(False, f"the image {choice.image} (torch {f.torch}) has kernels for "
                      f"{', '.join(f.arch_list)}, none of which runs on {target}: "
                      f"{_newer_hint(choice, cloud, cap)}",
               f"its GPU is {gpu_arch.sm(cap)}: no kernels in torch {f.torch}")


def host_fit(choice: ImageChoice, host_cuda: str | float | None) -> Fit:
    """Whether a host whose driver runs CUDA up to ``host_cuda`` can run the image's CUDA."""
    need, have = images.cuda_tuple(choice.cuda), images.cuda_tuple(host_cuda)
    if need is None:
        return Fit(None, "the image's CUDA is unknown to tplab, so any host is taken")
    if have is None:
        return Fit(None, "the host does not say which CUDA its driver runs (unknown: taken "
                         "only after every offer known to run the image)",
                   "CUDA unknown: taken after every known fit")
    if have < need:
        return Fit(False, f"its driver runs CUDA {have[0]}.{have[1]} at most, below the "
                          f"{need[0]}.{need[1]} of {choice.image}")
    return Fit(True, f"its driver runs CUDA {have[0]}.{have[1]} (the image needs "
                     f"{need[0]}.{need[1]})")


def allowed_cuda(choice: ImageChoice, offered: list[str]) -> list[str]:
    """The host CUDA versions (of ``offered``, a catalog's list) that run the image's CUDA, in
    the catalog's order; all of them when the image's CUDA is unknown."""
    need = images.cuda_tuple(choice.cuda)
    return [v for v in offered
            if need is None or ((have := images.cuda_tuple(v)) is not None and have >= need)]
