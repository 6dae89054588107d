"""Each mock fault switch gives the documented behaviour: a clear error, and no pod left."""

from __future__ import annotations

import socket
import time

import pytest

from tplab.cloud.base import NoCapacityError, NotReadyError, ProviderError, TransientError
from tplab.cloud.runpod_provider import RunPodProvider
from tests.mock.helpers import GPU, new_key, spec, ssh_run


def _provider(cloud, **kw):
    kw.setdefault("poll_interval_s", 0.05)
    kw.setdefault("retry_delays", (0.01, 0.01))
    kw.setdefault("terminate_delays", (0.01, 0.01, 0.01))
    kw.setdefault("ssh_probe_timeout_s", 2.0)
    return RunPodProvider(**cloud.provider_kwargs(), **kw)


def _views(cloud, name):
    return [v for v in cloud.pods() if v["name"] == name]


def _assert_nothing_left(cloud, name):
    for view in _views(cloud, name):
        assert view["desiredStatus"] == "TERMINATED", view
        assert view["alivePids"] == [] and not view["sshListening"], view


def test_no_spot_capacity_creates_nothing(cloud):
    cloud.set_faults(no_spot_capacity=True)
    with pytest.raises(NoCapacityError, match=r"No spot capacity .* nothing was created"):
        _provider(cloud).create(spec(new_key(), name="tplab-f-nospot"))
    assert _views(cloud, "tplab-f-nospot") == []


def test_runtime_null_past_the_bound_terminates(cloud):
    cloud.set_faults(runtime_null_s=30)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-rtnull"))
    with pytest.raises(NotReadyError, match=r"runtime is not up yet.*has been terminated"):
        p.wait_ready(info.id, 1.0)
    assert p.verify_gone(info.id).gone
    _assert_nothing_left(cloud, "tplab-f-rtnull")


def test_runtime_null_within_the_bound_is_waited_for(cloud):
    cloud.set_faults(runtime_null_s=0.6)
    p = _provider(cloud)
    t0 = time.monotonic()
    info = p.create(spec(new_key(), name="tplab-f-rtslow"))
    ready = p.wait_ready(info.id, 15)
    assert time.monotonic() - t0 >= 0.6 and ready.ssh is not None
    p.terminate(info.id)


def test_ssh_refusing_past_the_bound_terminates(cloud):
    cloud.set_faults(ssh_refuse_s=30)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-refuse"))
    with pytest.raises(NotReadyError, match=r"handshake.*has been terminated"):
        p.wait_ready(info.id, 1.5)
    _assert_nothing_left(cloud, "tplab-f-refuse")


def test_ssh_refusing_for_a_while_is_waited_for(cloud):
    cloud.set_faults(ssh_refuse_s=0.7)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-refuse2"))
    first_ports = None
    deadline = time.monotonic() + 10
    while first_ports is None and time.monotonic() < deadline:
        first_ports = p.status(info.id).ssh
        time.sleep(0.02)
    assert first_ports is not None  # the port shows while SSH still refuses
    with pytest.raises(OSError):
        socket.create_connection((first_ports.host, first_ports.port), timeout=1).close()
    ready = p.wait_ready(info.id, 15)
    assert ready.ssh.host_key
    p.terminate(info.id)


def test_http_500_on_create_raises_and_leaves_nothing(cloud):
    cloud.set_faults(http_500={"podRentInterruptable": 1})
    with pytest.raises(ProviderError, match=r"server error page.*Nothing was created") as err:
        _provider(cloud).create(spec(new_key(), name="tplab-f-500"))
    assert not isinstance(err.value, NoCapacityError)
    assert _views(cloud, "tplab-f-500") == []


def test_http_500_on_rest_create_raises_and_leaves_nothing(cloud):
    cloud.set_faults(http_500={"POST /v1/pods": 1})
    with pytest.raises(ProviderError, match=r"HTTP 500.*Nothing was created"):
        _provider(cloud, creation_api="rest").create(spec(new_key(), name="tplab-f-500r"))
    assert _views(cloud, "tplab-f-500r") == []


def test_create_that_fails_after_creating_is_cleaned_up(cloud):
    p = _provider(cloud)
    real = p._api.graphql

    def created_then_lost(what, query):
        answer = real(what, query)
        if "podRentInterruptable" in query:
            raise TransientError("RunPod's API did not answer in time while creating; try again.")
        return answer

    p._api.graphql = created_then_lost
    with pytest.raises(ProviderError, match="was terminated"):
        p.create(spec(new_key(), name="tplab-f-lost"))
    assert len(_views(cloud, "tplab-f-lost")) == 1
    _assert_nothing_left(cloud, "tplab-f-lost")


def test_http_500_on_reads_is_retried(cloud):
    cloud.set_faults(http_500={"pod": 2, "gpuTypes": 1, "myself": 1})
    p = _provider(cloud)
    assert p.quote(GPU, 2).spot_available
    assert p.balance() is not None
    info = p.create(spec(new_key(), name="tplab-f-500read"))
    assert p.wait_ready(info.id, 15).ssh is not None
    p.terminate(info.id)


def test_http_500_that_persists_is_one_clear_sentence(cloud):
    cloud.set_faults(http_500={"gpuTypes": 10})
    with pytest.raises(TransientError, match=r"^RunPod's API failed while quoting GPU prices.*minute\.$"):
        _provider(cloud).quote(GPU, 2)


def test_spot_interruption_kills_the_pod_and_terminate_cleans_up(cloud):
    cloud.set_faults(spot_interrupt_after_s=1.0)
    p = _provider(cloud)
    key = new_key()
    info = p.create(spec(key, name="tplab-f-interrupt"))
    ready = p.wait_ready(info.id, 15)
    ssh_run(ready.ssh.host, ready.ssh.port, key, "setsid nohup sleep 300 >/dev/null 2>&1 </dev/null &")
    deadline = time.monotonic() + 10
    while p.status(info.id).state != "EXITED" and time.monotonic() < deadline:
        time.sleep(0.05)
    status = p.status(info.id)
    assert status.state == "EXITED" and status.ssh is None
    view = _views(cloud, "tplab-f-interrupt")[0]
    assert view["alivePids"] == [] and view["endReason"] == "spot interruption"
    assert info.id in [x.id for x in p.list_pods()]  # still listed until terminated
    p.terminate(info.id)
    assert p.verify_gone(info.id).gone


def test_spot_interruption_before_ssh_fails_wait_ready(cloud):
    cloud.set_faults(spot_interrupt_after_s=0.2, ssh_refuse_s=5)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-intr2"))
    with pytest.raises(NotReadyError, match=r"went EXITED.*has been terminated"):
        p.wait_ready(info.id, 10)
    assert p.verify_gone(info.id).gone


def test_terminate_failing_a_few_times_is_retried(cloud):
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-term"))
    cloud.set_faults(terminate_fail_n=2)
    p.terminate(info.id)
    assert p.verify_gone(info.id).gone


def test_terminate_failing_every_time_names_the_pod(cloud):
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-term2"))
    cloud.set_faults(terminate_fail_n=50)
    with pytest.raises(ProviderError) as err:
        p.terminate(info.id)
    msg = str(err.value)
    assert info.id in msg and "may still be running" in msg and "tplab terminate" in msg
    assert not p.verify_gone(info.id).gone
    cloud.set_faults(terminate_fail_n=0)
    p.terminate(info.id)
    assert p.verify_gone(info.id).gone


def test_docker_args_mean_no_sshd_as_on_runpod(cloud):
    """Why the provider never sets dockerArgs: the mock behaves as RunPod did, sshd never starts."""
    from tplab.cloud.sdk import ctl

    key = new_key()
    p = _provider(cloud)
    raw = p._api.call("creating", ctl().create_pod, "tplab-f-dockerargs", "img", GPU,
                      gpu_count=1, docker_args="sleep infinity", ports="22/tcp",
                      env={"PUBLIC_KEY": key.export_public_key().decode().strip()})
    with pytest.raises(NotReadyError, match=r"handshake.*has been terminated"):
        p.wait_ready(raw["id"], 1.5)
    _assert_nothing_left(cloud, "tplab-f-dockerargs")
