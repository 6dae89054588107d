"""A GPU's compute capability from its name, as RunPod and Vast.ai write it.

Why: whether an image's torch can drive a GPU is a question of the GPU's compute capability (an
RTX 5090 is 12.0, and torch's CUDA 12.4 builds stop at sm_90), and the lab knows the GPU only by
the name the user gave or the cloud offers: RunPod's ids ("NVIDIA GeForce RTX 4090", "NVIDIA H100
80GB HBM3", "NVIDIA RTX 6000 Ada Generation") and Vast's names ("RTX 4090", "H100 SXM", "RTX
6000Ada", "A100 PCIE"). One table reads both; a name it does not know has no capability (None),
and the lab then says it cannot check and leaves the check to the pod.

The figures are NVIDIA's (developer.nvidia.com/cuda-gpus, "CUDA GPU Compute Capability"); the
first CUDA toolkit that compiles for each capability is from NVIDIA's CUDA toolkit release notes
(11.0: sm_80; 11.1: sm_86; 11.8: sm_89 and sm_90; 12.8: sm_100 and sm_120; 12.9: sm_103).
Standard library only.
"""

from __future__ import annotations

import re

Capability = tuple[int, int]

#: (pattern over the normalised name, compute capability), first match wins; the name is
#: lower case, without "nvidia", "geforce" and "tesla", one space between words
_TABLE: tuple[tuple[re.Pattern[str], Capability], ...] = tuple(
    (re.compile(p), cap) for p, cap in (
        # Blackwell: workstation RTX PRO (12.0) before the plain RTX 50x0 rule
        (r"\brtx pro \d{4}\b", (12, 0)),
        (r"\brtx 50[5-9]0\b", (12, 0)),
        (r"\bg?b300\b", (10, 3)),
        (r"\bg?b(100|200)\b", (10, 0)),
        # Hopper
        (r"\bg?h(100|200|800)\b", (9, 0)),
        # Ada Lovelace ("RTX 6000 Ada Generation", Vast's "RTX 6000Ada")
        (r"\brtx \d{4} ?ada\b", (8, 9)),
        (r"\brtx 40[5-9]0\b", (8, 9)),
        (r"\bl40s?\b", (8, 9)),
        (r"\bl4\b", (8, 9)),
        # Ampere
        (r"\brtx a\d{4}\b", (8, 6)),
        (r"\brtx 30[5-9]0\b", (8, 6)),
        (r"\ba(10g?|16|2|40)\b", (8, 6)),
        (r"\ba(100|30|800)\b", (8, 0)),
        # Turing ("Quadro RTX 6000", Vast's "Q RTX 6000")
        (r"\b(q|quadro) rtx \d{4}\b", (7, 5)),
        (r"\btitan rtx\b", (7, 5)),
        (r"\brtx 20[6-8]0\b", (7, 5)),
        (r"\bt4\b", (7, 5)),
        # Volta, Pascal
        (r"\bv100\b", (7, 0)),
        (r"\btitan v\b", (7, 0)),
        (r"\bp100\b", (6, 0)),
        (r"\b(p4|p40|gtx 10[5-8]0)\b", (6, 1)),
    ))

#: the first CUDA toolkit (major, minor) that builds kernels for a compute capability (sm_MN)
_FIRST_CUDA: tuple[tuple[Capability, tuple[int, int]], ...] = (
    ((12, 0), (12, 8)), ((10, 3), (12, 9)), ((10, 0), (12, 8)), ((9, 0), (11, 8)),
    ((8, 9), (11, 8)), ((8, 6), (11, 1)), ((8, 0), (11, 0)),
)


def normalise(gpu_name: str) -> str:
    """'NVIDIA GeForce RTX 4090' -> 'rtx 4090'; 'Tesla V100-SXM2-16GB' -> 'v100 sxm2 16gb'."""
    name = re.sub(r"[^a-z0-9]+", " ", gpu_name.lower())
    name = re.sub(r"\b(nvidia|geforce|tesla)\b", " ", name)
    return " ".join(name.split())


def capability_of(gpu_name: str) -> Capability | None:
    """The compute capability of the GPU named ``gpu_name`` (either cloud's spelling), or None
    when the table does not know the name."""
    name = normalise(gpu_name)
    for pattern, cap in _TABLE:
        if pattern.search(name):
            return cap
    return None


def capability_from_vast(compute_cap: object) -> Capability | None:
    """A Vast offer's ``compute_cap`` (the capability x 100: 890 is 8.9), or None."""
    try:
        value = int(float(str(compute_cap)))
    except (TypeError, ValueError):
        return None
    return (value // 100, (value % 100) // 10) if value >= 100 else None


def generation(cap: Capability) -> str:
    """The architecture's name: 'Blackwell', 'Hopper', 'Ada', 'Ampere', 'Turing', ..."""
    major, minor = cap
    if major >= 10:
        return "Blackwell"
    if major == 9:
        return "Hopper"
    if (major, minor) == (8, 9):
        return "Ada"
    return {8: "Ampere", 7: "Volta" if minor < 5 else "Turing", 6: "Pascal"}.get(major, "older")


def sm(cap: Capability) -> str:
    """(12, 0) -> 'sm_120'."""
    return f"sm_{cap[0]}{cap[1]}"


def first_cuda_for(cap: Capability) -> tuple[int, int] | None:
    """The oldest CUDA toolkit that builds kernels for ``cap`` (None: older than sm_80, which
    every CUDA 11 and 12 toolkit builds)."""
    for known, cuda in _FIRST_CUDA:
        if cap >= known and cap[0] == known[0]:
            return cuda
    return None
