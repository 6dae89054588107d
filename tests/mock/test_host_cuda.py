"""The mocks model hosts' drivers: Vast's offers carry ``cuda_max_good`` and ``compute_cap`` (old
drivers and a Blackwell GPU among them), and the mock RunPod places a pod only on a host whose CUDA
its create allows (``allowedCudaVersions``, ``minCudaVersion``), as RunPod's document says."""

from __future__ import annotations

from tests.mock.helpers import http
from tplab.mock.vast_mock.catalog import MACHINES

IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"


def _offers(vast, **query) -> list[dict]:
    status, body = http("POST", f"{vast.api_url}/api/v0/bundles/", vast.api_key,
                        {"type": "bid", **query})
    assert status == 200, body
    return body["offers"]


def test_vast_offers_say_which_cuda_their_driver_runs_and_their_gpus_capability(vast):
    offers = _offers(vast, num_gpus={"eq": 2}, limit=500)
    by_name = {}
    for o in offers:
        by_name.setdefault(o["gpu_name"], set()).add((o["cuda_max_good"], o["compute_cap"]))
    assert by_name["RTX 3090"] == {(12.2, 860)}             # old drivers only
    assert by_name["RTX 5090"] == {(12.8, 1200)}            # Blackwell
    assert by_name["L40S"] == {(12.2, 890), (12.8, 890)}    # one host of each
    assert by_name["RTX 4090"] == {(12.2, 890), (12.8, 890)}  # a market of both
    assert _offers(vast, gpu_name={"in": ["RTX 3090"]}, cuda_max_good={"gte": 12.4}) == []
    assert all(m.cuda_max_good in (12.2, 12.8) for m in MACHINES)


def _create(cloud, gpu: dict) -> tuple[int, dict]:
    return http("POST", f"{cloud.api_url}/v2/pods", cloud.api_key,
                {"name": "tplab-hostcuda", "image": IMAGE, "gpu": gpu})


def test_mock_runpod_places_a_pod_only_on_a_host_whose_cuda_the_create_allows(cloud):
    status, body = http("GET", f"{cloud.api_url}/v2/catalog/gpus?include=AVAILABILITY"
                               "&product=POD&count=2", cloud.api_key)
    assert status == 200
    versions = {g["id"]: [v["version"] for v in g.get("cudaVersions", [])] for g in body["gpus"]}
    assert versions["NVIDIA GeForce RTX 4090"] == ["12.2", "12.4", "12.8"]
    assert versions["NVIDIA GeForce RTX 3090"] == ["12.2"]
    assert versions["NVIDIA GeForce RTX 5090"] == ["12.8"]
    status, scoped = http("GET", f"{cloud.api_url}/v2/catalog/gpus?include=AVAILABILITY"
                                 "&product=POD&count=2&minCudaVersion=12.4", cloud.api_key)
    rtx3090 = next(g for g in scoped["gpus"] if g["id"] == "NVIDIA GeForce RTX 3090")
    assert rtx3090["cudaVersions"] == [] and rtx3090["availability"] == "NONE"

    made = []
    try:
        for gpu, want in (({"allowedCudaVersions": ["12.8"]}, "12.8"),
                          ({"allowedCudaVersions": ["12.4", "12.8"]}, "12.4"),
                          ({"minCudaVersion": "12.3"}, "12.4"), ({}, "12.2")):
            status, pod = _create(cloud, {"id": "NVIDIA GeForce RTX 4090", "count": 2, **gpu})
            assert status == 201, pod
            made.append(pod["id"])
            assert pod["cudaVersion"] == want, (gpu, pod["cudaVersion"])
        before = len(cloud.pods())
        status, err = _create(cloud, {"id": "NVIDIA GeForce RTX 3090", "count": 2,
                                      "allowedCudaVersions": ["12.4", "12.8"]})
        assert status == 400 and "No machine with CUDA in 12.4, 12.8" in err["detail"]
        status, err = _create(cloud, {"id": "NVIDIA GeForce RTX 4090", "count": 2,
                                      "minCudaVersion": "12.4", "allowedCudaVersions": ["12.8"]})
        assert status == 400 and "mutually exclusive" in err["detail"]
        assert len(cloud.pods()) == before
    finally:
        for pod_id in made:
            http("DELETE", f"{cloud.api_url}/v2/pods/{pod_id}", cloud.api_key)
