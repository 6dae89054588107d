"""The RunPod provider against the mock cloud: REST v2 for pods, GraphQL (through the runpod SDK)
for spot and the balance."""

from __future__ import annotations

import time

import pytest

from tplab.cloud.base import (AuthError, NoCapacityError, Provider, ProviderError,
                              SpotUnavailableError, UnknownGpuError)
from tplab.cloud.runpod.provider import RunPodProvider
from tplab.cloud.runpod.shapes import create_body, cuda_of_image
from tests.mock.helpers import GPU, new_key, spec, ssh_run


def _provider(cloud, **kw):
    kw.setdefault("poll_interval_s", 0.05)
    kw.setdefault("retry_delays", (0.01, 0.01))
    kw.setdefault("terminate_delays", (0.01, 0.01, 0.01))
    return RunPodProvider(**cloud.provider_kwargs(), **kw)


def _mock_pods(cloud, name):
    return [v for v in cloud.pods() if v["name"] == name]


def _assert_nothing_left(cloud, name):
    for view in _mock_pods(cloud, name):
        assert view["status"] == "TERMINATED", view
        assert view["alivePids"] == [] and not view["sshListening"], view


def _calls_during(cloud, fn):
    before = cloud.calls()
    out = fn()
    after = cloud.calls()
    return out, {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def test_is_a_provider(cloud):
    assert isinstance(_provider(cloud), Provider)


def test_quote_is_the_v2_catalog_with_stock_and_spot_from_graphql(cloud):
    q, calls = _calls_during(cloud, lambda: _provider(cloud).quote(GPU, 2))
    assert q.on_demand_usd_per_hr == pytest.approx(1.38) and q.availability == "HIGH"
    assert q.spot_usd_per_hr == pytest.approx(0.70) and q.spot_available and q.spot_offered
    assert q.on_demand_available
    assert calls["GET /v2/catalog/gpus"] == 1 and calls["graphql __type"] == 1
    nine = _provider(cloud).quote(GPU, 9)  # more than maxCount
    assert not nine.on_demand_available and nine.availability == "NONE"
    assert not nine.spot_available and "at most 8" in nine.spot_note


def test_on_demand_lifecycle_is_all_v2(cloud):
    p = _provider(cloud)
    key = new_key()
    before = p.balance()
    started = time.time()

    def life():
        info = p.create(spec(key, name="tplab-life", spot=False))
        assert info.state == "PROVISIONING" and info.ssh is None and info.spot is False
        assert info.usd_per_hr == pytest.approx(1.38) and info.gpu_count == 2
        ready = p.wait_ready(info.id, 20)
        assert ready.ssh.port == _mock_pods(cloud, "tplab-life")[0]["sshPort"]
        assert info.id in [x.id for x in p.list_pods()]
        p.terminate(info.id)
        return info, ready

    (info, ready), calls = _calls_during(cloud, life)
    assert calls["POST /v2/pods"] == 1 and calls["DELETE /v2/pods/{id}"] == 1
    assert calls["GET /v2/pods/{id}"] >= 1 and calls["GET /v2/pods"] == 1
    assert not [k for k in calls if k.startswith("graphql") or "/v1" in k], calls
    view = _mock_pods(cloud, "tplab-life")[0]
    assert ready.ssh.host == "127.0.0.1"
    assert ready.ssh.host_key == view["hostKey"]  # the key the handshake saw, to pin
    ended = time.time()
    proof = p.verify_gone(info.id)
    assert proof.gone and proof.answer == {"pod": None} and not proof.listed
    assert p.status(info.id).state == "GONE"
    p.terminate(info.id)  # idempotent: 404 means gone
    cost = p.actual_cost(info.id, before, started, ended, info.usd_per_hr)
    assert cost.source == "billing" and cost.billing_usd is not None
    assert cost.actual_usd == pytest.approx(cost.billing_usd, abs=2e-6)  # the mock's bill
    assert cost.actual_usd >= cost.rate_x_seconds_usd - info.usd_per_hr * 30 / 3600
    assert cost.balance_delta_usd is not None and cost.balance_delta_usd > 0
    _assert_nothing_left(cloud, "tplab-life")


def test_spot_create_is_the_only_graphql_pod_call(cloud):
    p = _provider(cloud)
    key = new_key()
    info, calls = _calls_during(cloud, lambda: p.create(spec(key, name="tplab-spot")))
    try:
        assert info.spot and info.usd_per_hr == pytest.approx(0.70)
        assert calls["graphql podRentInterruptable"] == 1
        assert calls["GET /v2/pods/{id}"] >= 1 and "POST /v2/pods" not in calls
        ready = p.wait_ready(info.id, 20, client_key=key)  # with the lab key: a real login
        r = ssh_run(ready.ssh.host, ready.ssh.port, key, "echo $RUNPOD_POD_ID",
                    host_key=ready.ssh.host_key)
        assert r.stdout.strip() == info.id
    finally:
        p.terminate(info.id)


def test_create_body_matches_the_image_cuda_and_keeps_the_start_script():
    key = new_key()
    body = create_body(spec(key, name="tplab-b", spot=False))
    assert body["gpu"] == {"id": GPU, "count": 2, "minCudaVersion": "12.4"}
    assert body["cloud"] == "SECURE" and body["ports"] == ["22/tcp"] and "args" not in body
    assert body["env"]["PUBLIC_KEY"].startswith("ssh-ed25519 ")
    assert cuda_of_image("runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404") == "12.8"
    assert cuda_of_image("ubuntu:22.04") is None


def test_list_pods_only_shows_tplab_pods(cloud):
    from tests.mock.helpers import http
    p = _provider(cloud)
    status, other = http("POST", cloud.api_url + "/v2/pods", cloud.api_key, {
        "name": "someone-elses", "image": "img", "gpu": {"id": GPU, "count": 1}})
    assert status == 201
    mine = p.create(spec(new_key(), name="tplab-listed", spot=False))
    try:
        ids = [x.id for x in p.list_pods()]
        assert mine.id in ids and other["id"] not in ids
    finally:
        p.terminate(mine.id)
        p.terminate(other["id"])


def test_spot_not_offered_creates_nothing_and_never_switches(cloud):
    p = _provider(cloud)
    for fault, needle in (("no_spot_capacity", "no spot capacity"),
                          ("spot_removed", "no longer offers spot")):
        cloud.set_faults(**{fault: True})
        q = p.quote(GPU, 2)
        assert not q.spot_available and q.on_demand_available and needle in q.spot_note
        assert q.spot_offered is (fault != "spot_removed")
        with pytest.raises(SpotUnavailableError, match=needle + ".*nothing was created"):
            p.create(spec(new_key(), name="tplab-nospot"))
        cloud.set_faults(**{fault: False})
    assert _mock_pods(cloud, "tplab-nospot") == []


def test_spot_removed_between_quote_and_create_is_an_unknown_mutation(cloud):
    p = _provider(cloud)
    offer = p._spot.offer(GPU, 2)
    cloud.set_faults(spot_removed=True)
    with pytest.raises(SpotUnavailableError, match="unknown mutation.*nothing was created"):
        p._spot.rent(spec(new_key(), name="tplab-raced"), offer.min_bid_per_gpu)
    assert _mock_pods(cloud, "tplab-raced") == []


def test_wrong_key_is_one_clear_sentence_without_the_key(cloud):
    wrong = "rpa_WRONGKEY" + "7" * 30
    p = RunPodProvider(api_key=wrong, api_base_url=cloud.api_url, retry_delays=())
    for call in (lambda: p.quote(GPU, 2), p.list_pods, p.balance):
        with pytest.raises(AuthError) as err:
            call()
        msg = str(err.value)
        assert wrong not in msg and "401" in msg and "RUNPOD_API_KEY" in msg
    assert wrong not in repr(p)


def test_no_key_anywhere(monkeypatch, tmp_path):
    monkeypatch.setattr("tplab.cloud.runpod.api_key.CONFIG_PATH", tmp_path / "none.toml")
    with pytest.raises(AuthError, match="RUNPOD_API_KEY"):
        RunPodProvider(api_base_url="http://127.0.0.1:9")


def test_unknown_gpu(cloud):
    p = _provider(cloud)
    with pytest.raises(UnknownGpuError, match="NVIDIA GeForce RTX 9999"):
        p.quote("NVIDIA GeForce RTX 9999", 2)
    with pytest.raises(UnknownGpuError):
        p.create(spec(new_key(), name="tplab-nogpu", gpu_type="NVIDIA GeForce RTX 9999"))
    # an on-demand create reads the catalog's host CUDA versions first: an unknown GPU is
    # refused there, before any POST
    before = cloud.calls().get("POST /v2/pods", 0)
    with pytest.raises(UnknownGpuError, match="RunPod offers no GPU type named"):
        p.create(spec(new_key(), name="tplab-nogpu", gpu_type="NVIDIA GeForce RTX 9999",
                      spot=False))
    assert cloud.calls().get("POST /v2/pods", 0) == before


def test_unreachable_api_is_transient_and_clear():
    p = RunPodProvider(api_key="rpa_unreachable_key_123", api_base_url="http://127.0.0.1:9",
                       retry_delays=())
    with pytest.raises(ProviderError, match="could not be reached"):
        p.list_pods()


def test_create_refuses_too_many_gpus_and_a_low_bid_before_calling(cloud):
    p = _provider(cloud)
    with pytest.raises(NoCapacityError, match="at most 8"):
        p.create(spec(new_key(), name="tplab-nine", gpu_count=9))
    with pytest.raises(ProviderError, match=r"below RunPod's minimum bid .* nothing was created"):
        p.create(spec(new_key(), name="tplab-cheap", bid_usd_per_gpu_hr=0.01))
    names = {v["name"] for v in cloud.pods()}
    assert not names & {"tplab-nine", "tplab-cheap"}


def test_a_bid_quoted_from_the_minimum_survives_rounding(cloud):
    """The lab bids quote/gpus; a total rounded to 6 decimals divided back may fall a hair under
    the minimum: the bid goes out at the minimum, never under it."""
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-roundbid", bid_usd_per_gpu_hr=0.35 - 4e-7))
    try:
        assert info.usd_per_hr == pytest.approx(0.70)
    finally:
        p.terminate(info.id)
