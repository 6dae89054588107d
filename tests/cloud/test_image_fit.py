"""The image a pod gets and whether it can run the job: the GPU table for both clouds' names, the
image catalog, the default per cloud and GPU generation, and each verdict's one sentence."""

from __future__ import annotations

import pytest

from tplab.cloud import gpu_arch, images
from tplab.cloud.image_fit import allowed_cuda, choose_image, gpu_fit, host_fit
from tplab.records.torch_support import SUPPORTED_TORCH

TORCH_24_VAST = "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
TORCH_24_RUNPOD = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"


@pytest.mark.parametrize("name, cap", [
    # RunPod's ids
    ("NVIDIA GeForce RTX 3090", (8, 6)), ("NVIDIA GeForce RTX 4090", (8, 9)),
    ("NVIDIA GeForce RTX 5090", (12, 0)), ("NVIDIA A100 80GB PCIe", (8, 0)),
    ("NVIDIA A100-SXM4-80GB", (8, 0)), ("NVIDIA L4", (8, 9)), ("NVIDIA L40S", (8, 9)),
    ("NVIDIA H100 80GB HBM3", (9, 0)), ("NVIDIA H200", (9, 0)), ("NVIDIA B200", (10, 0)),
    ("NVIDIA RTX A6000", (8, 6)), ("NVIDIA RTX 6000 Ada Generation", (8, 9)),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0)), ("NVIDIA RTX A4000", (8, 6)),
    # Vast's names
    ("RTX 3090", (8, 6)), ("RTX 4090", (8, 9)), ("RTX 5090", (12, 0)), ("A100 PCIE", (8, 0)),
    ("A100 SXM4", (8, 0)), ("H100 SXM", (9, 0)), ("H100 NVL", (9, 0)), ("H200", (9, 0)),
    ("B200", (10, 0)), ("RTX 6000Ada", (8, 9)), ("L40S", (8, 9)), ("A40", (8, 6)),
    ("A10", (8, 6)), ("Q RTX 6000", (7, 5)), ("Tesla V100", (7, 0)), ("Tesla T4", (7, 5)),
    ("RTX 4070 Ti", (8, 9)), ("GH200", (9, 0)),
])
def test_both_clouds_gpu_names_have_their_compute_capability(name, cap):
    assert gpu_arch.capability_of(name) == cap


def test_an_unknown_gpu_has_no_capability_and_vast_offers_carry_theirs():
    assert gpu_arch.capability_of("NVIDIA B999 Imaginary") is None
    assert gpu_arch.capability_from_vast(890) == (8, 9)
    assert gpu_arch.capability_from_vast(1200) == (12, 0)
    assert gpu_arch.capability_from_vast(None) is None
    assert gpu_arch.generation((12, 0)) == gpu_arch.generation((10, 0)) == "Blackwell"
    assert gpu_arch.first_cuda_for((12, 0)) == (12, 8) and gpu_arch.first_cuda_for((9, 0)) == (11, 8)


def test_every_catalog_image_says_what_its_tag_says_and_runs_the_job():
    for name, facts in images.CATALOG.items():
        assert SUPPORTED_TORCH.contains(facts.torch), name
        parsed = images._from_tag(name)  # the catalog's facts agree with the tag itself
        assert parsed is not None and (parsed.torch, parsed.cuda) == (facts.torch, facts.cuda)
        assert facts.known and facts.source
        # the tag-derived kernel list is a lower bound of the catalog's
        assert set(parsed.arch_list) <= set(facts.arch_list), name


def test_the_default_image_per_cloud_and_generation():
    ada = choose_image("vast", "RTX 4090")
    assert ada.image == TORCH_24_VAST and ada.facts is not None and ada.facts.flavour == "runtime"
    assert "runtime flavour" in ada.why and "Ada" in ada.why
    blackwell = choose_image("vast", "RTX 5090")
    assert blackwell.image == "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
    assert choose_image("vast", "RTX 4090", compile=True).image.endswith("-devel")
    assert choose_image("runpod", "NVIDIA GeForce RTX 4090").image == TORCH_24_RUNPOD
    rp_blackwell = choose_image("runpod", "NVIDIA B200")
    assert rp_blackwell.image == "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2204"
    assert "/start.sh" in rp_blackwell.why
    for cloud in ("runpod", "vast"):  # every default drives the GPUs it is the default for
        for gpu in ("RTX 4090", "A100 PCIE", "H100 SXM", "RTX 5090", "B200", "RTX 3090"):
            assert gpu_fit(choose_image(cloud, gpu), gpu, cloud).ok is True, (cloud, gpu)
    named = choose_image("vast", "RTX 4090", "  my/image:1  ")
    assert named.image == "my/image:1" and named.named and named.facts is None


def test_a_blackwell_gpu_with_the_24_image_is_refused_in_one_sentence():
    fit = gpu_fit(choose_image("vast", "RTX 5090", TORCH_24_VAST), "RTX 5090", "vast")
    assert fit.ok is False
    assert fit.reason.startswith(f"the image {TORCH_24_VAST} (torch 2.4.0, CUDA 12.4) has no "
                                 "kernels for RTX 5090 (Blackwell, sm_120)")
    assert "drop --image for the default pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime" in fit.reason
    assert fit.reason.count(". ") == 0 and "\n" not in fit.reason
    # the same on RunPod, with RunPod's own images
    fit = gpu_fit(choose_image("runpod", "NVIDIA B200", TORCH_24_RUNPOD), "NVIDIA B200", "runpod")
    assert fit.ok is False and "sm_100" in fit.reason and "runpod/pytorch:1.0.2-cu1281" in fit.reason


@pytest.mark.parametrize("image, gpu, where, ok, words", [
    # a torch outside the supported range
    ("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", "RTX 4090", "vast", False,
     "torch 2.3.0 is outside the releases the job runs on"),
    # RunPod's sshd comes from the image's /start.sh
    (TORCH_24_VAST, "NVIDIA GeForce RTX 4090", "runpod", False, "has no /start.sh"),
    # read from the tag: a cu126 build cannot have Blackwell kernels, a cu128 build has them
    ("pytorch/pytorch:2.6.0-cuda12.6-cudnn9-runtime", "RTX 5090", "vast", False,
     "needs a torch built for CUDA 12.8"),
    ("pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", "RTX 5090", "vast", True, "sm_120"),
    ("runpod/pytorch:1.0.3-cu1290-torch291-ubuntu2204", "NVIDIA GeForce RTX 5090", "runpod",
     True, "torch 2.9.1"),
    # read from the tag, a GPU whose kernels not every cu128 build has: the pod decides
    ("pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", "Tesla V100", "vast", None,
     "the pod checks it when it starts"),
    # an image tplab cannot read, a GPU it does not know
    ("ghcr.io/me/trainer:latest", "RTX 4090", "vast", None, "the pod checks its torch"),
    (TORCH_24_VAST, "NVIDIA B999 Imaginary", "vast", None, "does not know the compute capability"),
])
def test_what_an_image_can_drive(image, gpu, where, ok, words):
    fit = gpu_fit(choose_image(where, gpu, image), gpu, where)
    assert fit.ok is ok and words in fit.reason, fit


def test_compile_needs_a_compiler_in_the_image():
    fit = gpu_fit(choose_image("vast", "RTX 4090", TORCH_24_VAST), "RTX 4090", "vast",
                  compile=True)
    assert fit.ok is False and "no C compiler" in fit.reason and "-devel" in fit.reason
    devel = choose_image("vast", "RTX 4090", compile=True)
    assert gpu_fit(devel, "RTX 4090", "vast", compile=True).ok is True


def test_the_host_driver_must_run_the_image_cuda():
    choice = choose_image("vast", "RTX 4090")
    old = host_fit(choice, 12.2)
    assert old.ok is False and old.reason.startswith("its driver runs CUDA 12.2 at most, below "
                                                     "the 12.4 of")
    assert host_fit(choice, "12.4").ok is True and host_fit(choice, 13.0).ok is True
    assert host_fit(choice, None).ok is None
    assert host_fit(choose_image("vast", "RTX 4090", "me/x:1"), 11.0).ok is None
    assert allowed_cuda(choice, ["12.2", "12.4", "12.8", "13.0"]) == ["12.4", "12.8", "13.0"]
    assert allowed_cuda(choice, ["12.2"]) == []
    older = images.older_cuda_image("vast", (12, 2))
    assert older is not None and older.cuda == "12.1" and older.torch == "2.4.0"
    assert images.older_cuda_image("runpod", (12, 2)) is None
