"""The pod's own check at the job's start: every reason a pod cannot run the job is one sentence
that says what to change, decided from what torch reports (so each is tested without a GPU)."""

from __future__ import annotations

import torch

from tplab.job.pod_check import Gpu, TorchFacts, facts, problem
from tplab.records.torch_support import SUPPORTED_TORCH

#: torch 2.4.0's CUDA 12.4 build (the default images'): no Blackwell kernels
ARCH_24 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
H100 = Gpu("NVIDIA H100 80GB HBM3", (9, 0))
RTX_4090 = Gpu("NVIDIA GeForce RTX 4090", (8, 9))
RTX_5090 = Gpu("NVIDIA GeForce RTX 5090", (12, 0))


def gpu_pod(*gpus: Gpu, version: str = "2.4.0+cu124", cuda: str | None = "12.4",
            arch: tuple[str, ...] = ARCH_24, nccl: bool = True) -> TorchFacts:
    return TorchFacts(version=version, cuda=cuda, cuda_available=bool(gpus), gpus=gpus,
                      arch_list=arch, nccl=nccl, driver="550.54.15")


def one_sentence(text: str | None) -> str:
    assert text is not None
    assert text.endswith(".") and "\n" not in text and "Traceback" not in text
    return text


def test_a_pod_the_job_can_run_passes():
    assert problem(gpu_pod(RTX_4090, RTX_4090), "cuda", 2) is None
    assert problem(gpu_pod(H100, H100), "auto", 2) is None
    blackwell_image = gpu_pod(RTX_5090, RTX_5090, version="2.7.1+cu128", cuda="12.8",
                              arch=ARCH_24 + ("sm_100", "sm_120"))
    assert problem(blackwell_image, "cuda", 2) is None


def test_a_cpu_pod_runs_on_gloo_without_gpus():
    cpu = TorchFacts(version="2.13.0+cpu", cuda=None, cuda_available=False)
    assert problem(cpu, "auto", 2) is None
    assert problem(cpu, "cpu", 2) is None


def test_torch_outside_the_supported_releases_is_refused_first():
    for version in ("2.3.1+cu121", "2.15.0", "1.13.1"):
        text = one_sentence(problem(gpu_pod(H100, H100, version=version), "cuda", 2))
        assert f"torch {version} is outside" in text and str(SUPPORTED_TORCH) in text
        assert one_sentence(problem(TorchFacts(version, None, False), "cpu", 2))
    assert "2.4 to 2.14" in str(SUPPORTED_TORCH)


def test_no_cuda_where_a_gpu_was_rented():
    cpu_build = TorchFacts(version="2.4.0+cpu", cuda=None, cuda_available=False)
    assert "is a CPU build" in one_sentence(problem(cpu_build, "cuda", 2))
    old_driver = gpu_pod()  # a CUDA build whose CUDA the host's driver cannot run: no GPU seen
    text = one_sentence(problem(old_driver, "cuda", 2))
    assert "sees no GPU" in text and "CUDA 12.4" in text and "driver 550.54.15" in text


def test_fewer_gpus_visible_than_ranks():
    text = one_sentence(problem(gpu_pod(RTX_4090), "cuda", 2))
    assert "2 ranks need 2 GPUs but only 1 is visible" in text and "--gpus 1" in text
    assert "only 1 is visible" in one_sentence(problem(gpu_pod(RTX_4090), "auto", 2))


def test_a_gpu_the_torch_build_has_no_kernels_for():
    text = one_sentence(problem(gpu_pod(RTX_5090, RTX_5090), "cuda", 2))
    assert "GPU 0 (NVIDIA GeForce RTX 5090) is sm_120" in text
    assert "sm_90 only" in text and "CUDA 12.8 or newer" in text


def test_nccl_missing():
    text = one_sentence(problem(gpu_pod(H100, H100, nccl=False), "cuda", 2))
    assert "without NCCL" in text


def test_facts_are_this_torch():
    found = facts()
    assert found.version == str(torch.__version__)
    assert found.cuda == torch.version.cuda
    assert found.cuda_available == torch.cuda.is_available()
