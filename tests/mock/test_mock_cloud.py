"""The mock cloud as RunPod's REST v2: auth and scoping, the OpenAPI rules, SSH pods and their
start script, environment, billing, terminate, and the per-route call counts."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import asyncssh
import pytest

from tplab.cloud.runpod.provider import RunPodProvider
from tests.mock.helpers import GPU, http, new_key, spec, ssh_run

IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"


def _provider(cloud):
    return RunPodProvider(**cloud.provider_kwargs(), poll_interval_s=0.05,
                          retry_delays=(0.01, 0.01), terminate_delays=(0.01, 0.01))


def _body(key, name="tplab-raw", **extra):
    return {"name": name, "image": IMAGE, "gpu": {"id": GPU, "count": 1}, "ports": ["22/tcp"],
            "env": {"PUBLIC_KEY": key.export_public_key().decode().strip()}, **extra}


def _view(cloud, pod_id):
    return next(v for v in cloud.pods() if v["id"] == pod_id)


def _wait(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def ready_pod(cloud):
    key = new_key()
    p = _provider(cloud)
    info = p.create(spec(key, name="tplab-mocktest", spot=False))
    ready = p.wait_ready(info.id, 20)
    yield p, ready, key
    p.terminate(ready.id)


def test_wrong_key_gets_401_like_runpod(cloud, monkeypatch):
    import runpod
    from runpod.api.graphql import run_graphql_query

    monkeypatch.setenv("RUNPOD_API_BASE_URL", cloud.api_url)
    with pytest.raises(runpod.error.AuthenticationError):
        run_graphql_query("query { myself { id } }", api_key="rpa_wrongwrongwrong")
    assert http("GET", cloud.api_url + "/_mock/pods", None)[0] == 401
    status, body = http("GET", cloud.api_url + "/v2/pods", "nope-nope-nope")
    assert status == 401 and body["title"] == "Unauthorized"


def test_v1_is_gone_and_unknown_fields_get_422(cloud):
    key = new_key()
    for method in ("GET", "POST", "DELETE"):
        status, body = http(method, cloud.api_url + "/v1/pods", cloud.api_key,
                            {} if method == "POST" else None)
        assert status == 410 and "retired" in body["detail"] and "v2" in body["detail"]
    status, body = http("POST", cloud.api_url + "/v2/pods", cloud.api_key,
                        _body(key, interruptible=True))
    assert status == 422 and body["status"] == 422
    assert any("interruptible" in e for e in body["errors"])
    status, body = http("POST", cloud.api_url + "/v2/pods", cloud.api_key,
                        _body(key, gpu={"id": GPU, "bidPerGpu": 0.35}))
    assert status == 422 and any("bidPerGpu" in e for e in body["errors"])
    assert not [v for v in cloud.pods() if v["name"] == "tplab-raw"]


def test_create_get_list_delete_and_the_boot_timeline(cloud):
    key = new_key()
    status, pod = http("POST", cloud.api_url + "/v2/pods", cloud.api_key, _body(key))
    assert status == 201 and pod["status"] == "PROVISIONING" and pod["cost"] == 0.69
    assert pod["ssh"]["direct"] is None and pod["runtime"] is None
    url = cloud.api_url + f"/v2/pods/{pod['id']}"
    seen = []

    def running():
        got = http("GET", url, cloud.api_key)[1]
        seen.append(got["status"])
        return got if got["ssh"]["direct"] else None

    got = _wait(running)
    assert got["status"] == "RUNNING" and "STARTING" in seen
    assert got["runtime"]["ports"] == [{"private": 22, "public": got["ssh"]["direct"]["port"],
                                        "type": "tcp", "ip": "127.0.0.1"}]
    listed = http("GET", cloud.api_url + "/v2/pods", cloud.api_key)[1]["pods"]
    assert pod["id"] in [p["id"] for p in listed]
    assert http("DELETE", url, cloud.api_key)[0] == 204
    assert http("GET", url, cloud.api_key)[0] == 404
    assert http("DELETE", url, cloud.api_key)[0] == 404


def test_catalog_rules_and_stock(cloud):
    base = cloud.api_url + "/v2/catalog/gpus"
    status, body = http("GET", base + "?include=AVAILABILITY&product=POD&count=2&cloud=SECURE",
                        cloud.api_key)
    gpu = next(g for g in body["gpus"] if g["id"] == GPU)
    assert status == 200 and gpu["price"]["secure"] == 0.69 and gpu["availability"] == "HIGH"
    assert http("GET", base + "?include=AVAILABILITY", cloud.api_key)[0] == 400  # no product
    assert http("GET", base + "?count=2", cloud.api_key)[0] == 400  # count without include
    nine = http("GET", base + "?include=AVAILABILITY&product=POD&count=9", cloud.api_key)[1]
    assert next(g for g in nine["gpus"] if g["id"] == GPU)["availability"] == "NONE"


def test_pod_runs_commands_with_its_environment_from_the_start_script(cloud, ready_pod):
    p, pod, key = ready_pod
    r = ssh_run(pod.ssh.host, pod.ssh.port, key,
                'echo "$RUNPOD_POD_ID|$RUNPOD_API_BASE_URL|$PWD|${PYTHONPATH-unset}|$(command -v python)"'
                ' ; . "$TPLAB_RP_ENV_FILE" && echo "file:$RUNPOD_POD_ID:$RUNPOD_API_KEY"',
                host_key=pod.ssh.host_key)
    assert r.exit_status == 0, r.stderr
    first, second = r.stdout.splitlines()
    pod_id, url, cwd, pythonpath, python = first.split("|")
    assert pod_id == pod.id and url == cloud.api_url and pythonpath == "unset"
    assert Path(python).parent == Path(sys.executable).parent
    view = _view(cloud, pod.id)
    assert cwd == view["sandbox"]
    file_id, _, pod_key = second.removeprefix("file:").partition(":")
    assert file_id == pod.id and pod_key.startswith("rpa_") and pod_key != cloud.api_key
    assert oct((Path(view["sandbox"]) / "etc" / "rp_environment").stat().st_mode & 0o777) == "0o600"
    assert "start.sh: sshd started" in (Path(view["sandbox"]) / "container.log").read_text()


def test_args_replace_the_start_script_unless_they_hand_over(cloud):
    """REST v2 ``args`` is the container's command: no sshd unless it runs the start script,
    and what it starts is a pod process from the pod's first second (killed on terminate)."""
    p = _provider(cloud)
    k1, k2 = new_key(), new_key()
    plain = http("POST", cloud.api_url + "/v2/pods", cloud.api_key,
                 _body(k1, name="tplab-args-plain", args="sleep 300"))[1]
    guarded = http("POST", cloud.api_url + "/v2/pods", cloud.api_key, _body(
        k2, name="tplab-args-guard",
        args='(sleep 301 &) ; echo guard > guard.txt; exec "$TPLAB_MOCK_START_SH"'))[1]
    ready = p.wait_ready(guarded["id"], 15)
    r = ssh_run(ready.ssh.host, ready.ssh.port, k2, "cat guard.txt")
    assert r.stdout.strip() == "guard"
    with pytest.raises(Exception, match="handshake.*has been terminated"):
        p.wait_ready(plain["id"], 0.8)   # its port shows after the 0.2 s boot, no sshd behind
    view = _view(cloud, guarded["id"])
    assert view["args"].startswith("(sleep 301") and len(view["alivePids"]) >= 2
    p.terminate(guarded["id"])
    assert _view(cloud, guarded["id"])["alivePids"] == []
    assert _view(cloud, plain["id"])["alivePids"] == []


def test_only_the_public_key_given_at_create_logs_in(cloud, ready_pod):
    _, pod, _ = ready_pod
    with pytest.raises(asyncssh.PermissionDenied):
        ssh_run(pod.ssh.host, pod.ssh.port, new_key(), "true")


def test_pod_scoped_key_reaches_only_its_own_pod(cloud, ready_pod):
    p, pod, key = ready_pod
    pod_key = ssh_run(pod.ssh.host, pod.ssh.port, key, "printf %s \"$RUNPOD_API_KEY\"").stdout
    own = cloud.api_url + f"/v2/pods/{pod.id}"
    assert http("GET", own, pod_key)[0] == 200
    assert http("GET", cloud.api_url + "/v2/pods", pod_key)[0] == 403
    assert http("GET", cloud.api_url + "/v2/pods/someoneelse", pod_key)[0] == 403
    gql = cloud.api_url + "/graphql"
    _, body = http("POST", gql, pod_key, {"query": "query { myself { clientBalance } }"})
    assert "errors" in body and "scoped" in body["errors"][0]["message"]
    cloud.set_faults(pod_key_delete_refused=True)
    status, body = http("DELETE", own, pod_key)
    assert status == 403 and "pod-scoped" in body["detail"]
    status, body = http("POST", gql, pod_key,
                        {"query": f'mutation {{ podTerminate(input: {{podId: "{pod.id}"}}) }}'})
    assert status == 200 and "errors" not in body, body
    assert p.status(pod.id).state == "GONE"


def test_pod_scoped_key_may_delete_its_own_pod_through_v2(cloud, ready_pod):
    p, pod, key = ready_pod
    pod_key = ssh_run(pod.ssh.host, pod.ssh.port, key, "printf %s \"$RUNPOD_API_KEY\"").stdout
    assert http("DELETE", cloud.api_url + f"/v2/pods/{pod.id}", pod_key)[0] == 204
    assert p.status(pod.id).state == "GONE"


def test_terminate_kills_detached_processes_and_frees_the_port(cloud, ready_pod):
    p, pod, key = ready_pod
    r = ssh_run(pod.ssh.host, pod.ssh.port, key,
                "setsid nohup sleep 300 >/dev/null 2>&1 < /dev/null & "
                "nohup bash -c 'sleep 301' >/dev/null 2>&1 < /dev/null & "
                "(env -i sleep 302 >/dev/null 2>&1 < /dev/null &) ; echo ok")
    assert r.stdout.strip() == "ok"
    def enough():
        v = _view(cloud, pod.id)
        return v if len(v["alivePids"]) >= 3 else None

    view = _wait(enough)
    pids = view["alivePids"]
    p.terminate(pod.id)
    view = _view(cloud, pod.id)
    assert view["status"] == "TERMINATED" and view["alivePids"] == []
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
    with pytest.raises(OSError):
        socket.create_connection((pod.ssh.host, pod.ssh.port), timeout=2).close()


def test_billing_is_per_second_and_reported_by_v2(cloud):
    """What it pays for (~2 s): a pod billed under a second, then a second after its terminate
    (a clock still billing would show one more second)."""
    p = _provider(cloud)
    before = p.balance()
    info = p.create(spec(new_key(), name="tplab-billing", spot=False))
    time.sleep(0.6)
    p.terminate(info.id)
    after = p.balance()
    view = _view(cloud, info.id)
    assert view["billedSeconds"] in (1, 2)   # each second begun, not a minute or an hour
    amount = info.usd_per_hr * view["billedSeconds"] / 3600
    assert before - after == pytest.approx(amount, abs=1e-6)
    assert p.billing_usd(info.id, time.time() - 60) == pytest.approx(amount, abs=1e-6)
    status, body = http("GET", cloud.api_url + f"/v2/billing/pods?podId={info.id}&lastN=1"
                        "&startTime=2026-01-01T00:00:00Z", cloud.api_key)
    assert status == 400  # lastN and startTime are exclusive
    time.sleep(1.1)
    assert p.balance() == pytest.approx(after, abs=1e-9)  # no billing after terminate


def test_boot_error_fault_ends_in_error_and_stops_billing(cloud):
    cloud.set_faults(boot_error=True)
    p = _provider(cloud)
    info = p.create(spec(new_key(), name="tplab-booterr", spot=False))
    _wait(lambda: p.status(info.id).state == "ERROR")
    pod = http("GET", cloud.api_url + f"/v2/pods/{info.id}", cloud.api_key)[1]
    assert pod["cost"] == 0 and pod["runtime"] is None and pod["actions"] == ["terminate"]
    p.terminate(info.id)


def test_calls_are_counted_per_route(cloud):
    before = cloud.calls()
    p = _provider(cloud)
    p.quote(GPU, 2)
    p.list_pods()
    http("GET", cloud.api_url + "/v1/pods", cloud.api_key)
    after = cloud.calls()
    diff = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert diff["GET /v2/catalog/gpus"] == 1 and diff["GET /v2/pods"] == 1
    assert diff["GET /v1/..."] == 1
    assert diff["graphql __type"] == 1 and diff["graphql gpuTypes"] == 1
