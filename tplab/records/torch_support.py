"""The torch versions the pod side runs on, declared once.

Why a record of its own: a mock pod runs the client's torch, a real pod runs its image's, and the
two are years apart (the default images carry torch 2.4.0; the client pins the newest CPU build).
The job reads this range before any timing and refuses, in one sentence, a torch outside it; the
client reads it to refuse, before anything is rented, an image whose torch is outside it; the
docs quote it. Standard library only: it travels to the pod with the job.

The range is by release (major.minor), both ends included: every patch release of a supported
minor release is supported, and a local suffix (``+cpu``, ``+cu124``) is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class TorchRange:
    """Releases ``oldest`` .. ``newest`` (major, minor), both included."""

    oldest: tuple[int, int]
    newest: tuple[int, int]

    def __str__(self) -> str:
        return f"{_dotted(self.oldest)} to {_dotted(self.newest)}"

    def contains(self, version: str) -> bool:
        release = torch_release(version)
        return release is not None and self.oldest <= release <= self.newest


#: every release the pod side is tested on: the oldest under a second interpreter (``.venv-pod``),
#: 2.13 as the client's own torch (scripts/setup pins it), and 2.14, the newest release, whose
#: CUDA build the pod side's tests pass under (run as the second interpreter, on the CPU). The
#: package's dependency is this range (pyproject.toml; a test holds the two equal), so installing
#: tplab never replaces a torch the job runs on.
SUPPORTED_TORCH = TorchRange(oldest=(2, 4), newest=(2, 14))

#: the oldest release as the default images carry it: ``scripts/setup --pod-torch`` installs it
#: into ``.venv-pod``, where the tests run the pod side on it
OLDEST_TORCH_PIN = "2.4.0"


def _dotted(release: tuple[int, int]) -> str:
    return f"{release[0]}.{release[1]}"


def torch_release(version: str) -> tuple[int, int] | None:
    """``"2.4.0+cu124"`` -> (2, 4); None when the text is not a version."""
    m = _VERSION.match(str(version))
    return (int(m.group(1)), int(m.group(2))) if m else None


def unsupported_torch(version: str, supported: TorchRange = SUPPORTED_TORCH) -> str | None:
    """One sentence saying why ``version`` cannot run the job, or None when it can."""
    if supported.contains(version):
        return None
    if torch_release(version) is None:
        return (f"torch reports the version {version!r}, which is not a release number; the job "
                f"runs on torch {supported}.")
    return (f"torch {version} is outside the releases the job runs on ({supported}): use an "
            f"image with a torch in that range.")


_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)[a-z]?$")


def _arch(entry: str) -> tuple[str, tuple[int, int]] | None:
    m = _ARCH.match(entry.strip())
    return (m.group(1), (int(m.group(2)), int(m.group(3)))) if m else None


def has_kernels_for(capability: tuple[int, int], arch_list: list[str] | tuple[str, ...]) -> bool:
    """Whether a torch built for ``arch_list`` (``torch.cuda.get_arch_list()``: ``sm_86``,
    ``sm_90``, ``compute_90``, ...) can drive a GPU of compute ``capability`` (major, minor).

    A cubin (``sm_MN``) runs on GPUs of the same major and a minor at least its own (sm_80 runs
    on an 8.6 and an 8.9, never on a 9.0); PTX (``compute_MN``) is compiled by the driver for any
    GPU at least that capability. So an RTX 5090 (12.0) needs a torch with ``sm_120`` (or PTX):
    torch 2.4's CUDA 12.4 build stops at ``sm_90``.
    """
    for entry in arch_list:
        parsed = _arch(entry)
        if parsed is None:
            continue
        kind, (major, minor) = parsed
        if kind == "sm" and major == capability[0] and minor <= capability[1]:
            return True
        if kind == "compute" and (major, minor) <= capability:
            return True
    return False
