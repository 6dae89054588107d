"""The RunPod provider against the mock cloud, through the real runpod SDK."""

from __future__ import annotations

import time

import pytest

from tplab.cloud.base import (
    AuthError,
    NoCapacityError,
    Provider,
    ProviderError,
    UnknownGpuError,
)
from tplab.cloud.runpod_provider import RunPodProvider
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
        assert view["desiredStatus"] == "TERMINATED", view
        assert view["alivePids"] == [] and not view["sshListening"], view


def test_is_a_provider(cloud):
    assert isinstance(_provider(cloud), Provider)


def test_quote_spot_and_on_demand_for_n_gpus(cloud):
    q = _provider(cloud).quote(GPU, 2)
    assert q.spot_available and q.on_demand_available
    assert q.spot_usd_per_hr == pytest.approx(0.70) and q.on_demand_usd_per_hr == pytest.approx(1.38)
    assert not _provider(cloud).quote(GPU, 9).spot_available  # more than maxGpuCount


def test_lifecycle_create_wait_ready_run_terminate_verify_gone(cloud):
    p = _provider(cloud)
    key = new_key()
    before = p.balance()
    started = time.time()
    info = p.create(spec(key, name="tplab-life"))
    assert info.state == "RUNNING" and info.spot and info.ssh is None  # RUNNING is not ready
    assert info.usd_per_hr == pytest.approx(0.70) and info.gpu_count == 2
    ready = p.wait_ready(info.id, 20)
    view = _mock_pods(cloud, "tplab-life")[0]
    assert ready.ssh.host == "127.0.0.1" and ready.ssh.port == view["sshPort"]
    assert ready.ssh.host_key == view["hostKey"]  # the key the handshake saw, to pin
    r = ssh_run(ready.ssh.host, ready.ssh.port, key, "echo $RUNPOD_POD_ID",
                host_key=ready.ssh.host_key)
    assert r.stdout.strip() == info.id
    assert info.id in [x.id for x in p.list_pods()]
    p.terminate(info.id)
    ended = time.time()
    proof = p.verify_gone(info.id)
    assert proof.gone and proof.answer == {"pod": None} and not proof.listed
    assert p.status(info.id).state == "GONE"
    p.terminate(info.id)  # idempotent: not found means gone
    cost = p.actual_cost(info.id, before, started, ended, info.usd_per_hr)
    assert cost.balance_delta_usd is not None and cost.balance_delta_usd > 0
    assert cost.actual_usd == pytest.approx(cost.rate_x_seconds_usd, abs=0.7 / 3600 * 2)
    assert "agrees" in cost.note
    _assert_nothing_left(cloud, "tplab-life")


def test_wait_ready_with_the_lab_key_logs_in(cloud):
    p = _provider(cloud)
    key = new_key()
    info = p.create(spec(key, name="tplab-login"))
    try:
        assert p.wait_ready(info.id, 20, client_key=key).ssh.host_key
    finally:
        p.terminate(info.id)


def test_list_pods_only_shows_tplab_pods(cloud):
    from tplab.cloud.sdk import ctl

    p = _provider(cloud)
    other = p._api.call("creating", ctl().create_pod, "someone-elses", "img", GPU,
                        gpu_count=1, docker_args=None, ports="22/tcp")
    mine = p.create(spec(new_key(), name="tplab-listed"))
    try:
        ids = [x.id for x in p.list_pods()]
        assert mine.id in ids and other["id"] not in ids
    finally:
        p.terminate(mine.id)
        p.terminate(other["id"])


def test_rest_v1_creation_behind_the_same_interface(cloud):
    p = _provider(cloud, creation_api="rest")
    key = new_key()
    info = p.create(spec(key, name="tplab-rest"))
    assert info.spot and info.usd_per_hr == pytest.approx(0.70)
    ready = p.wait_ready(info.id, 20)
    assert ssh_run(ready.ssh.host, ready.ssh.port, key, "echo $RUNPOD_POD_ID").stdout.strip() == info.id
    p.terminate(info.id)
    assert p.verify_gone(info.id).gone


def test_on_demand_only_when_asked(cloud):
    p = _provider(cloud)
    cloud.set_faults(no_spot_capacity=True)
    q = p.quote(GPU, 2)
    assert not q.spot_available and q.on_demand_available
    with pytest.raises(NoCapacityError) as err:
        p.create(spec(new_key(), name="tplab-nospot"))
    assert "nothing was created" in str(err.value)
    assert _mock_pods(cloud, "tplab-nospot") == []
    info = p.create(spec(new_key(), name="tplab-ondemand", spot=False))
    try:
        assert info.spot is False and info.usd_per_hr == pytest.approx(1.38)
    finally:
        p.terminate(info.id)


def test_spot_mutation_refused_for_capacity_is_no_capacity(cloud):
    p = _provider(cloud)
    # the quote says yes, then capacity goes before the mutation arrives
    original = p._gpu_type

    def quote_then_vanish(gpu_type, gpu_count):
        gpu = original(gpu_type, gpu_count)
        cloud.set_faults(no_spot_capacity=True)
        return gpu

    p._gpu_type = quote_then_vanish
    with pytest.raises(NoCapacityError):
        p.create(spec(new_key(), name="tplab-raced"))
    assert _mock_pods(cloud, "tplab-raced") == []


def test_wrong_key_is_one_clear_sentence_without_the_key(cloud):
    wrong = "rpa_WRONGKEY" + "7" * 30
    p = RunPodProvider(api_key=wrong, api_base_url=cloud.api_url, retry_delays=())
    with pytest.raises(AuthError) as err:
        p.quote(GPU, 2)
    msg = str(err.value)
    assert wrong not in msg and "401" in msg and "RUNPOD_API_KEY" in msg
    assert wrong not in repr(p)


def test_no_key_anywhere(monkeypatch, tmp_path):
    monkeypatch.setattr("tplab.cloud.keys.CONFIG_PATH", tmp_path / "none.toml")
    with pytest.raises(AuthError, match="RUNPOD_API_KEY"):
        RunPodProvider(api_base_url="http://127.0.0.1:9")


def test_unknown_gpu(cloud):
    p = _provider(cloud)
    with pytest.raises(UnknownGpuError, match="NVIDIA GeForce RTX 9999"):
        p.quote("NVIDIA GeForce RTX 9999", 2)
    with pytest.raises(UnknownGpuError):
        p.create(spec(new_key(), name="tplab-nogpu", gpu_type="NVIDIA GeForce RTX 9999"))


def test_unreachable_api_is_transient_and_clear():
    p = RunPodProvider(api_key="rpa_unreachable_key_123", api_base_url="http://127.0.0.1:9",
                       retry_delays=())
    with pytest.raises(ProviderError, match="Could not reach RunPod's API"):
        p.balance()


def test_sdk_globals_are_per_call_and_thread_safe(cloud):
    import os
    import threading

    good = _provider(cloud)
    bad = RunPodProvider(api_key="rpa_other_account_key_000", api_base_url=cloud.api_url,
                         retry_delays=())
    from tplab.cloud.sdk import import_runpod

    runpod = import_runpod()
    key_before = runpod.api_key
    assert "RUNPOD_API_BASE_URL" not in os.environ
    results: dict[str, list[str]] = {"good": [], "bad": []}

    def hammer(p, label):
        for _ in range(15):
            try:
                p.list_pods()  # the SDK's get_pods reads the global runpod.api_key
                results[label].append("ok")
            except AuthError:
                results[label].append("auth")

    threads = [threading.Thread(target=hammer, args=(good, "good")),
               threading.Thread(target=hammer, args=(bad, "bad"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results["good"] == ["ok"] * 15 and results["bad"] == ["auth"] * 15
    assert "RUNPOD_API_BASE_URL" not in os.environ and runpod.api_key == key_before


def test_create_refuses_too_many_gpus_and_a_low_bid_before_calling(cloud):
    p = _provider(cloud)
    with pytest.raises(NoCapacityError, match="9 x"):
        p.create(spec(new_key(), name="tplab-nine", gpu_count=9))
    with pytest.raises(ProviderError, match=r"below RunPod's minimum bid .* nothing was created"):
        p.create(spec(new_key(), name="tplab-cheap", bid_usd_per_gpu_hr=0.01))
    names = {v["name"] for v in cloud.pods()}
    assert not names & {"tplab-nine", "tplab-cheap"}
