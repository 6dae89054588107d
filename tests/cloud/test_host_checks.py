"""Each provider against its mock: a pod lands only on a host that can run its image, and a GPU
type whose every host cannot is refused before anything is created, in one sentence.

Vast: every offer is a host with its ``cuda_max_good``; RunPod: the catalog's ``cudaVersions``
per GPU type and the create's ``allowedCudaVersions``, which the mock honours (a create without
it may land on the oldest host)."""

from __future__ import annotations

import pytest

from tests.mock.helpers import http, new_key, spec
from tplab.cloud.base import ImageMismatchError
from tplab.cloud.runpod.provider import RunPodProvider
from tplab.cloud.runpod.shapes import create_body
from tplab.cloud.vast.provider import VastProvider

TORCH_24_VAST = "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
TORCH_24_RUNPOD = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
CREATES = ("PUT /api/v0/asks/{id}", "POST /v2/pods", "graphql podRentInterruptable")


def _creates(mock) -> int:
    return sum(mock.calls().get(c, 0) for c in CREATES)


def _vast(mock) -> VastProvider:
    return VastProvider(mock.api_key, mock.api_url, poll_interval_s=0.05, sleep=lambda s: None)


def _runpod(mock) -> RunPodProvider:
    return RunPodProvider(**mock.provider_kwargs())


def test_vast_offers_whose_driver_is_too_old_are_refused_before_create(vast):
    p = _vast(vast)
    quote = p.quote("RTX 3090", 2)
    assert quote.image == TORCH_24_VAST and quote.spot_usd_per_hr is None
    assert quote.image_refusal.startswith(
        f"Vast.ai's one interruptible offer for 2x RTX 3090 cannot run {TORCH_24_VAST}: its "
        "host's driver runs CUDA 12.2 at most, below the image's 12.4")
    assert "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime" in quote.image_refusal
    assert [(h.host_cuda, h.ok) for h in quote.hosts] == [("12.2", False)]
    before, pods = _creates(vast), len(vast.pods())
    with pytest.raises(ImageMismatchError) as err:
        p.create(spec(new_key(), gpu_type="RTX 3090", spot=True))
    text = str(err.value)
    assert text.endswith("; nothing was created.") and "\n" not in text
    assert _creates(vast) == before and len(vast.pods()) == pods
    # the same offers with an image built for their CUDA
    ok = p.quote("RTX 3090", 2, "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime")
    assert not ok.image_refusal and ok.spot_available and ok.hosts[0].ok is True


def test_vast_passes_over_the_cheaper_old_driver_host_for_one_that_runs_the_image(vast):
    p = _vast(vast)
    quote = p.quote("L40S", 2)
    assert [(h.host_cuda, h.ok) for h in quote.hosts] == [("12.2", False), ("12.8", True)]
    cheapest_runnable = quote.hosts[1]
    assert quote.hosts[0].usd_per_hr < cheapest_runnable.usd_per_hr
    assert quote.spot_usd_per_hr == pytest.approx(cheapest_runnable.usd_per_hr * 1.02, rel=1e-4)
    info = p.create(spec(new_key(), gpu_type="L40S", spot=True))
    try:
        assert f"offer {info.raw['bundle_id']}" == cheapest_runnable.offer
        assert info.raw["image_uuid"] == TORCH_24_VAST
    finally:
        p.terminate(info.id)


def test_vast_blackwell_offer_with_the_24_image_is_refused_and_the_default_is_blackwells(vast):
    p = _vast(vast)
    quote = p.quote("RTX 5090", 2, TORCH_24_VAST)
    assert quote.image_refusal.startswith(f"the image {TORCH_24_VAST} (torch 2.4.0, CUDA 12.4) "
                                          "has no kernels for RTX 5090 (Blackwell, sm_120)")
    before = _creates(vast)
    with pytest.raises(ImageMismatchError, match="nothing was created"):
        p.create(spec(new_key(), gpu_type="RTX 5090", spot=True, image=TORCH_24_VAST))
    assert _creates(vast) == before
    default = p.quote("RTX 5090", 2)
    assert default.image == "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
    assert default.spot_available and not default.image_refusal


def test_runpod_create_sends_allowed_cuda_versions_from_the_image(cloud):
    body = create_body(spec(new_key(), image=TORCH_24_RUNPOD), allowed_cuda=["12.4", "12.8"])
    assert body["gpu"]["allowedCudaVersions"] == ["12.4", "12.8"]
    assert "minCudaVersion" not in body["gpu"]  # the two exclude each other
    assert create_body(spec(new_key(), image=TORCH_24_RUNPOD))["gpu"]["minCudaVersion"] == "12.4"
    p = _runpod(cloud)
    quote = p.quote("NVIDIA GeForce RTX 4090", 2)
    assert [(h.host_cuda, h.ok) for h in quote.hosts] == [("12.2", False), ("12.4", True),
                                                          ("12.8", True)]
    # the mock puts a pod on the oldest host it may: 12.2 without a constraint; tplab's creates
    # (REST v2 on-demand and the spot mutation alike) send the catalog's versions that run the
    # image, and so leave that host out
    for spot in (False, True):
        info = p.create(spec(new_key(), name=f"tplab-cuda-{spot}", spot=spot))
        try:
            assert info.raw["cudaVersion"] == "12.4", info.raw
            assert info.raw["image"] == TORCH_24_RUNPOD
            mock_pod = next(m for m in cloud.pods() if m["id"] == info.id)
            assert mock_pod["allowedCudaVersions"] == ["12.4", "12.8"]
        finally:
            p.terminate(info.id)
    status, raw = http("POST", f"{cloud.api_url}/v2/pods", cloud.api_key, {
        "name": "tplab-unconstrained", "image": TORCH_24_RUNPOD,
        "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 2}})
    assert status == 201 and raw["cudaVersion"] == "12.2"
    p.terminate(raw["id"])


def test_runpod_gpu_whose_hosts_are_all_too_old_is_refused_before_create(cloud):
    p = _runpod(cloud)
    quote = p.quote("NVIDIA GeForce RTX 3090", 2)
    assert quote.image_refusal.startswith(
        f"none of RunPod's hosts for 2x NVIDIA GeForce RTX 3090 can run {TORCH_24_RUNPOD}: their "
        "drivers run CUDA 12.2 at most, below the image's 12.4")
    assert not quote.on_demand_available and not quote.spot_available
    before = _creates(cloud)
    for spot in (False, True):
        with pytest.raises(ImageMismatchError, match="; nothing was created.$"):
            p.create(spec(new_key(), gpu_type="NVIDIA GeForce RTX 3090", spot=spot))
    assert _creates(cloud) == before
    blackwell = p.quote("NVIDIA GeForce RTX 5090", 2)
    assert blackwell.image == "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2204"
    assert not blackwell.image_refusal and blackwell.hosts[0].ok is True


def test_vast_hosts_that_do_not_say_their_cuda_are_taken_after_every_known_fit(vast):
    """The cheap old-driver hosts answer without cuda_max_good: they were "may run" and won
    by price; now the quote and the create take the cheapest host known to run the image
    (offer 9001002) and show the others as unknown."""
    vast.set_faults(cuda_unknown=True)
    p = _vast(vast)
    quote = p.quote("RTX 4090", 2)
    unknown = [h for h in quote.hosts if h.ok is None]
    assert unknown and all(h.host_cuda is None for h in unknown)
    assert all("CUDA unknown: taken after every known fit" in h.why for h in unknown)
    known = next(h for h in quote.hosts if h.ok) if any(h.ok for h in quote.hosts) else None
    info = p.create(spec(new_key(), gpu_type="RTX 4090", spot=True))
    try:
        assert info.raw["bundle_id"] == 9001002, info.raw["bundle_id"]
        assert min(h.usd_per_hr for h in unknown) < quote.spot_usd_per_hr / 1.02  # cheaper
        assert known is None or known.offer == "offer 9001002"
    finally:
        p.terminate(info.id)


def test_vast_invalid_args_is_said_as_what_it_is_never_no_spot(vast):
    """A create Vast refuses as invalid_args: tplab's request, said so; not "no spot pod", not
    advice to try --on-demand."""
    from tplab.cloud.base import RequestBugError, SpotUnavailableError
    vast.set_faults(create_invalid_args=1)
    with pytest.raises(RequestBugError) as refused:
        _vast(vast).create(spec(new_key(), gpu_type="RTX 4090", spot=True))
    said = str(refused.value)
    assert not isinstance(refused.value, SpotUnavailableError)
    assert "invalid_args" in said and "nothing was created" in said
    assert "no other offer or --on-demand would help" in said and "no spot" not in said
