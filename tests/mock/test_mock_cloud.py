"""The mock cloud as a cloud: API auth and scoping, SSH pods, environment, billing, terminate."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import asyncssh
import pytest

from tplab.cloud.runpod_provider import RunPodProvider
from tests.mock.helpers import http, new_key, spec, ssh_run


def _provider(cloud):
    return RunPodProvider(**cloud.provider_kwargs(), poll_interval_s=0.05,
                          retry_delays=(0.01, 0.01), terminate_delays=(0.01, 0.01))


@pytest.fixture
def ready_pod(cloud):
    key = new_key()
    p = _provider(cloud)
    info = p.create(spec(key, name="tplab-mocktest"))
    ready = p.wait_ready(info.id, 20)
    yield p, ready, key
    p.terminate(ready.id)


def test_wrong_key_gets_401_like_runpod(cloud, monkeypatch):
    import runpod
    from runpod.api.graphql import run_graphql_query

    monkeypatch.setenv("RUNPOD_API_BASE_URL", cloud.api_url)
    with pytest.raises(runpod.error.AuthenticationError):
        run_graphql_query("query { myself { id } }", api_key="rpa_wrongwrongwrong")
    status, _ = http("GET", cloud.api_url + "/_mock/pods", None)
    assert status == 401
    status, _ = http("POST", cloud.rest_url + "/pods", "nope-nope-nope", {})
    assert status == 401


def test_pod_runs_commands_in_its_sandbox_with_its_environment(cloud, ready_pod):
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
    view = next(v for v in cloud.pods() if v["id"] == pod.id)
    assert cwd == view["sandbox"]
    file_id, _, pod_key = second.removeprefix("file:").partition(":")
    assert file_id == pod.id and pod_key.startswith("rpa_") and pod_key != cloud.api_key
    assert oct((Path(view["sandbox"]) / "etc" / "rp_environment").stat().st_mode & 0o777) == "0o600"


def test_exit_status_and_stderr_come_back(cloud, ready_pod):
    _, pod, key = ready_pod
    r = ssh_run(pod.ssh.host, pod.ssh.port, key, "echo oops >&2; exit 7")
    assert r.exit_status == 7 and r.stderr.strip() == "oops"


def test_only_the_public_key_given_at_create_logs_in(cloud, ready_pod):
    _, pod, _ = ready_pod
    with pytest.raises(asyncssh.PermissionDenied):
        ssh_run(pod.ssh.host, pod.ssh.port, new_key(), "true")


def test_sftp_is_rooted_in_the_sandbox(cloud, ready_pod):
    import asyncio

    _, pod, key = ready_pod

    async def go():
        async with asyncssh.connect(pod.ssh.host, pod.ssh.port, username="root",
                                    client_keys=[key], known_hosts=None, config=None) as conn:
            async with conn.start_sftp_client() as sftp:
                async with sftp.open("hello.txt", "w") as fh:
                    await fh.write("hi from sftp")
                return sorted(await sftp.listdir("/"))

    listing = asyncio.run(go())
    assert "hello.txt" in listing and "etc" in listing
    r = ssh_run(pod.ssh.host, pod.ssh.port, key, "cat hello.txt")
    assert r.stdout == "hi from sftp"


def test_pod_scoped_key_reaches_only_its_own_pod(cloud, ready_pod):
    p, pod, key = ready_pod
    r = ssh_run(pod.ssh.host, pod.ssh.port, key, "printf %s \"$RUNPOD_API_KEY\"")
    pod_key = r.stdout
    gql = cloud.api_url + "/graphql"
    status, body = http("POST", gql, pod_key,
                        {"query": f'query {{ pod(input: {{podId: "{pod.id}"}}) {{ id }} }}'})
    assert status == 200 and body["data"]["pod"]["id"] == pod.id
    status, body = http("POST", gql, pod_key, {"query": "query { myself { clientBalance } }"})
    assert "errors" in body and "scoped" in body["errors"][0]["message"]
    status, body = http("POST", gql, pod_key,
                        {"query": 'mutation { podTerminate(input: {podId: "someoneelse"}) }'})
    assert "errors" in body
    # the pod's own key may terminate its own pod (the on-pod watchdog's path)
    status, body = http("POST", gql, pod_key,
                        {"query": f'mutation {{ podTerminate(input: {{podId: "{pod.id}"}}) }}'})
    assert status == 200 and "errors" not in body, body
    assert p.status(pod.id).state == "GONE"


def test_terminate_kills_detached_processes_and_frees_the_port(cloud, ready_pod):
    p, pod, key = ready_pod
    r = ssh_run(pod.ssh.host, pod.ssh.port, key,
                "setsid nohup sleep 300 >/dev/null 2>&1 < /dev/null & "
                "nohup bash -c 'sleep 301' >/dev/null 2>&1 < /dev/null & "
                "(env -i sleep 302 >/dev/null 2>&1 < /dev/null &) ; echo ok")
    assert r.stdout.strip() == "ok"
    deadline = time.monotonic() + 5
    while True:
        view = next(v for v in cloud.pods() if v["id"] == pod.id)
        if len(view["alivePids"]) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    pids = view["alivePids"]
    assert len(pids) >= 2
    p.terminate(pod.id)
    view = next(v for v in cloud.pods() if v["id"] == pod.id)
    assert view["desiredStatus"] == "TERMINATED" and view["alivePids"] == []
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
    with pytest.raises(OSError):
        socket.create_connection((pod.ssh.host, pod.ssh.port), timeout=2).close()


def test_billing_deducts_cost_per_second_from_the_balance(cloud):
    p = _provider(cloud)
    before = p.balance()
    info = p.create(spec(new_key(), name="tplab-billing"))
    time.sleep(1.6)
    p.terminate(info.id)
    after = p.balance()
    view = next(v for v in cloud.pods() if v["id"] == info.id)
    assert view["billedSeconds"] in (2, 3)
    assert before - after == pytest.approx(info.usd_per_hr * view["billedSeconds"] / 3600, abs=1e-6)
    time.sleep(1.1)
    assert p.balance() == pytest.approx(after, abs=1e-9)  # no billing after terminate


def test_rest_v1_create_get_delete(cloud):
    key = new_key()
    body = {"name": "tplab-rest", "imageName": "img", "gpuTypeIds": ["NVIDIA GeForce RTX 4090"],
            "gpuCount": 1, "interruptible": True, "ports": ["22/tcp"],
            "env": {"PUBLIC_KEY": key.export_public_key().decode()}}
    status, pod = http("POST", cloud.rest_url + "/pods", cloud.api_key, body)
    assert status == 201 and pod["interruptible"] and pod["costPerHr"] == 0.35
    status, got = http("GET", cloud.rest_url + f"/pods/{pod['id']}", cloud.api_key)
    assert status == 200 and got["id"] == pod["id"]
    status, _ = http("DELETE", cloud.rest_url + f"/pods/{pod['id']}", cloud.api_key)
    assert status == 204
    status, _ = http("GET", cloud.rest_url + f"/pods/{pod['id']}", cloud.api_key)
    assert status == 404
    status, err = http("POST", cloud.rest_url + "/pods", cloud.api_key, {**body, "gpuTypeIds": ["X"]})
    assert status == 400 and "X" in err["error"]


def test_pod_stop_through_the_sdk_stops_billing_and_processes(cloud, ready_pod):
    from tplab.cloud.sdk import ctl

    p, pod, key = ready_pod
    ssh_run(pod.ssh.host, pod.ssh.port, key, "setsid nohup sleep 300 >/dev/null 2>&1 </dev/null &")
    answer = p._api.call("stopping the pod", ctl().stop_pod, pod.id)
    assert answer == {"id": pod.id, "desiredStatus": "EXITED"}
    view = next(v for v in cloud.pods() if v["id"] == pod.id)
    assert view["alivePids"] == [] and view["endReason"] == "stopped"
    billed = view["billedSeconds"]
    time.sleep(1.1)
    assert next(v for v in cloud.pods() if v["id"] == pod.id)["billedSeconds"] == billed
    assert p.status(pod.id).state == "EXITED"

