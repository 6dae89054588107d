"""The torch releases the pod side runs on are declared once (``SUPPORTED_TORCH``), and what
quotes them elsewhere says the same: the package's own dependency, the setup's pin of the
oldest, the README."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tplab.records.torch_support import (OLDEST_TORCH_PIN, SUPPORTED_TORCH, has_kernels_for,
                                         torch_release, unsupported_torch)

REPO = Path(__file__).resolve().parents[2]


def test_the_range_holds_both_ends_and_refuses_outside():
    assert SUPPORTED_TORCH.contains("2.4.0+cu121") and SUPPORTED_TORCH.contains("2.13.0+cpu")
    assert unsupported_torch("2.4.1") is None and unsupported_torch("2.13.0") is None
    assert "outside" in (unsupported_torch("2.3.1") or "")
    assert unsupported_torch("2.14.1") is None  # the newest release, tested on
    assert "outside" in (unsupported_torch("2.15.0") or "")
    assert "not a release number" in (unsupported_torch("main") or "")
    assert torch_release("2.10.0a0+git1234") == (2, 10)
    assert torch_release(OLDEST_TORCH_PIN) == SUPPORTED_TORCH.oldest


def test_the_package_dependency_and_the_readme_quote_the_range():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch_dep,) = [d for d in deps if re.match(r"torch\b", d)]
    lo, hi = SUPPORTED_TORCH.oldest, SUPPORTED_TORCH.newest
    assert torch_dep.replace(" ", "") == f"torch>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1] + 1}"
    readme = (REPO / "README.md").read_text()
    assert f"torch {SUPPORTED_TORCH}" in readme and f"torch=={OLDEST_TORCH_PIN}" in readme


def test_kernels_by_compute_capability():
    cu124 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert has_kernels_for((8, 9), cu124)      # sm_86 cubins run on an 8.9 (RTX 4090, L4)
    assert has_kernels_for((9, 0), cu124)      # H100, H200
    assert not has_kernels_for((12, 0), cu124)  # RTX 5090 needs sm_120
    assert not has_kernels_for((10, 0), cu124)  # B200
    assert has_kernels_for((12, 0), cu124 + ["sm_100", "sm_120"])
    assert has_kernels_for((12, 0), ["compute_90"])  # PTX is compiled by the driver
    assert not has_kernels_for((7, 5), ["sm_80", "compute_80"])  # nothing runs on older GPUs
    assert not has_kernels_for((8, 0), [])
