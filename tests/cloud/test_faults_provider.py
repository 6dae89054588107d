"""Each mock fault switch gives the provider's documented answer: a clear error, and no pod left."""

from __future__ import annotations

import socket
import time

import pytest

from tplab.cloud.base import (AmbiguousCreateError, NoCapacityError, NotReadyError,
                              ProviderError, RateLimitedError, SpotUnavailableError,
                              TransientError)
from tplab.cloud.runpod.provider import RunPodProvider
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
        assert view["status"] == "TERMINATED", view
        assert view["alivePids"] == [] and not view["sshListening"], view


def test_no_spot_capacity_creates_nothing(cloud):
    cloud.set_faults(no_spot_capacity=True)
    with pytest.raises(SpotUnavailableError, match=r"no spot capacity .* nothing was created"):
        _provider(cloud).create(spec(new_key(), name="tplab-f-nospot"))
    assert _views(cloud, "tplab-f-nospot") == []


def test_no_on_demand_capacity_is_a_400_with_the_detail(cloud):
    cloud.set_faults(no_on_demand_capacity=True)
    p = _provider(cloud)
    assert p.quote(GPU, 2).availability == "NONE"
    with pytest.raises(NoCapacityError, match=r"no capacity .*HTTP 400: There are no longer"):
        p.create(spec(new_key(), name="tplab-f-noond", spot=False))
    assert _views(cloud, "tplab-f-noond") == []


def test_runtime_late_past_the_bound_terminates(cloud):
    cloud.set_faults(runtime_null_s=30)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-rtnull", spot=False))
    with pytest.raises(NotReadyError, match=r"STARTING and 22/tcp has no public port.*terminated"):
        p.wait_ready(info.id, 0.5)
    assert p.verify_gone(info.id).gone
    _assert_nothing_left(cloud, "tplab-f-rtnull")


def test_ssh_refusing_past_the_bound_terminates(cloud):
    cloud.set_faults(ssh_refuse_s=30)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-refuse", spot=False))
    with pytest.raises(NotReadyError, match=r"handshake.*has been terminated"):
        p.wait_ready(info.id, 0.8)   # the port shows after the 0.2 s boot; SSH refuses
    _assert_nothing_left(cloud, "tplab-f-refuse")


def test_ssh_refusing_for_a_while_is_waited_for(cloud):
    cloud.set_faults(ssh_refuse_s=0.7)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-refuse2", spot=False))
    first = None
    deadline = time.monotonic() + 10
    while first is None and time.monotonic() < deadline:
        first = p.status(info.id).ssh
        time.sleep(0.02)
    assert first is not None  # the port shows while SSH still refuses
    with pytest.raises(OSError):
        socket.create_connection((first.host, first.port), timeout=1).close()
    assert p.wait_ready(info.id, 15).ssh.host_key
    p.terminate(info.id)


def test_boot_error_is_a_clear_failure_not_a_timeout(cloud):
    cloud.set_faults(boot_error=True)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-error", spot=False))
    t0 = time.monotonic()
    with pytest.raises(NotReadyError, match=r"went ERROR before SSH came up \(RunPod could not "
                                            r"start its container\); it has been terminated"):
        p.wait_ready(info.id, 60)
    assert time.monotonic() - t0 < 10
    _assert_nothing_left(cloud, "tplab-f-error")


def test_http_500_before_create_is_ambiguous_and_leaves_nothing(cloud):
    cloud.set_faults(http_500={"POST /v2/pods": 1})
    with pytest.raises(AmbiguousCreateError, match=r"HTTP 500.*may have been created") as err:
        _provider(cloud).create(spec(new_key(), name="tplab-f-500", spot=False))
    assert err.value.pod_name == "tplab-f-500"
    assert _views(cloud, "tplab-f-500") == []


@pytest.mark.parametrize("spot", [False, True])
def test_create_500_after_create_leaves_a_pod_to_find_by_name(cloud, spot):
    cloud.set_faults(create_500_after_create=1)
    name = f"tplab-f-made-{'spot' if spot else 'od'}"
    p = _provider(cloud)
    with pytest.raises(AmbiguousCreateError) as err:
        p.create(spec(new_key(), name=name, spot=spot))
    assert err.value.pod_name == name
    found = [x for x in p.list_pods() if x.name == name]
    assert len(found) == 1 and _views(cloud, name)[0]["status"] != "TERMINATED"
    p.terminate(found[0].id)
    _assert_nothing_left(cloud, name)


def test_http_500_on_reads_is_retried(cloud):
    cloud.set_faults(http_500={"GET /v2/pods/{id}": 2, "GET /v2/catalog/gpus": 1, "myself": 1,
                               "gpuTypes": 1})
    p = _provider(cloud)
    assert p.quote(GPU, 2).spot_available
    assert p.balance() is not None
    info = p.create(spec(new_key(), name="tplab-f-500read", spot=False))
    assert p.wait_ready(info.id, 15).ssh is not None
    p.terminate(info.id)


def test_http_500_that_persists_is_one_clear_sentence(cloud):
    cloud.set_faults(http_500={"GET /v2/catalog/gpus": 10})
    with pytest.raises(TransientError, match=r"^RunPod's API failed while quoting GPU prices "
                                             r"\(HTTP 500: internal error\) 3 times; try again"):
        _provider(cloud).quote(GPU, 2)


def test_429_is_waited_out_as_retry_after_asks(cloud):
    cloud.set_faults(http_429={"POST /v2/pods": 2}, retry_after_s=1)
    slept: list[float] = []
    p = _provider(cloud, sleep=lambda s: (slept.append(s), time.sleep(min(s, 0.05))))
    info = p.create(spec(new_key(), name="tplab-f-429", spot=False))
    assert slept[:2] == [1.0, 1.0]
    p.terminate(info.id)


def test_429_that_persists_is_one_clear_sentence_and_no_pod(cloud):
    cloud.set_faults(http_429={"POST /v2/pods": 50}, retry_after_s=2)
    p = _provider(cloud, sleep=lambda s: None)
    with pytest.raises(RateLimitedError, match=r"kept rate-limiting tplab \(HTTP 429\) while "
                                               r"creating the pod tplab-f-429b, after waiting 6 s"):
        p.create(spec(new_key(), name="tplab-f-429b", spot=False))
    assert _views(cloud, "tplab-f-429b") == []


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
    assert status.state == "EXITED" and status.ssh is None and status.usd_per_hr == 0
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
    info = p.create(spec(new_key(), name="tplab-f-term", spot=False))
    cloud.set_faults(terminate_fail_n=2)
    p.terminate(info.id)
    assert p.verify_gone(info.id).gone


def test_terminate_failing_every_time_names_the_pod(cloud):
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-f-term2", spot=False))
    cloud.set_faults(terminate_fail_n=50)
    with pytest.raises(ProviderError) as err:
        p.terminate(info.id)
    msg = str(err.value)
    assert info.id in msg and "may still be running" in msg and "tplab terminate" in msg
    assert not p.verify_gone(info.id).gone
    cloud.set_faults(terminate_fail_n=0)
    p.terminate(info.id)
    assert p.verify_gone(info.id).gone
