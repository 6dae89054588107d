"""Each fault of the mock Vast cloud does what a lab must survive: outbid (paused, storage billing,
resumes), a failed bid that leaves a stopped instance, 429, 5xx, a lingering destroy, an instance
that exits during boot, no interruptible offers, an SSH port that never appears, a machine with
no direct ports (the SSH proxy only)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.mock.helpers import new_key, ssh_run
from tests.mock.vast_helpers import MACHINE, api, create, destroy, show, ssh_port, wait_for

pytestmark = pytest.mark.slow


def _proc_states(pids: list[int]) -> set[str]:
    states = set()
    for pid in pids:
        try:
            states.add(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass
    return states


def _admin(vast, inst_id: int) -> dict:
    return next(p for p in vast.pods() if p["id"] == inst_id)


def test_outbid_pauses_the_instance_storage_keeps_billing_and_it_resumes(vast):
    """What it pays for (~3 s): the outbid timer, a second paused (billing is by the second
    begun: storage must show one more) and the resume after it."""
    vast.set_faults(outbid_after_s=0.5, outbid_resume_s=2.0)
    key = new_key()
    _, body = create(vast, "tplab-outbid", onstart="sleep 600 &")
    inst_id = body["new_contract"]
    api(vast, "POST", f"/api/v0/instances/{inst_id}/ssh/",
        {"ssh_key": key.export_public_key().decode()})
    try:
        port = ssh_port(wait_for(vast, inst_id, "running"))
        inst = wait_for(vast, inst_id, "stopped", timeout_s=10)
        assert inst["intended_status"] == "running" and "outbid" in inst["status_msg"]
        assert inst["ports"] is None and inst["uptime_mins"] is None
        paused = _admin(vast, inst_id)
        assert paused["alivePids"] and _proc_states(paused["alivePids"]) <= {"T", "t"}
        with pytest.raises(OSError):
            ssh_run("127.0.0.1", port, key, "true")
        time.sleep(1.1)
        later = _admin(vast, inst_id)
        assert later["computeUsd"] == pytest.approx(paused["computeUsd"])  # no GPU billing
        assert later["storageUsd"] > paused["storageUsd"]                 # storage bills on
        resumed = wait_for(vast, inst_id, "running", timeout_s=10)
        assert ssh_port(resumed) == port and "resumed" in resumed["status_msg"]
        assert "T" not in _proc_states(_admin(vast, inst_id)["alivePids"])
        deadline = time.monotonic() + 10
        while True:
            try:
                assert ssh_run("127.0.0.1", port, key, "echo back").stdout == "back\n"
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        destroy(vast, inst_id)
    assert _admin(vast, inst_id)["alivePids"] == []


def test_a_failed_bid_answers_success_false_and_leaves_a_stopped_instance(vast):
    vast.set_faults(failed_bid_n=1)
    status, body = create(vast, "tplab-failbid")
    assert status == 200 and body["success"] is False, body
    inst_id = body["new_contract"]
    inst = show(vast, inst_id)
    assert (inst["actual_status"], inst["intended_status"]) == ("stopped", "stopped")
    status, found = api(vast, "GET", '/api/v1/instances/?select_filters={"label":'
                                     '{"eq":"tplab-failbid"}}')
    assert [i["id"] for i in found["instances"]] == [inst_id]
    time.sleep(0.5)
    assert _admin(vast, inst_id)["storageUsd"] > 0 and _admin(vast, inst_id)["computeUsd"] == 0
    destroy(vast, inst_id)
    assert show(vast, inst_id) is None
    assert create(vast, "tplab-failbid-2")[1]["success"] is True  # only the first N fail
    destroy(vast, vast.pods()[-1]["id"])


def test_429_and_500_come_in_vasts_shapes_and_run_nothing(vast):
    before = len(vast.pods())
    vast.set_faults(http_429={"PUT /api/v0/asks/{id}": 1}, http_500={"PUT /api/v0/asks/{id}": 1})
    status, body = create(vast, "tplab-429")
    assert status == 429 and body == {"detail": "API requests too frequent"}
    status, body = create(vast, "tplab-500")
    assert status == 500 and body["success"] is False and body["error"]
    assert len(vast.pods()) == before
    calls = vast.calls()["PUT /api/v0/asks/{id}"]
    status, body = create(vast, "tplab-ok")
    assert status == 200 and body["success"]
    assert vast.calls()["PUT /api/v0/asks/{id}"] == calls + 1
    destroy(vast, body["new_contract"])


def test_vasts_rate_limit_is_per_endpoint_and_per_key_and_sends_no_retry_after(vast):
    _, made = create(vast, "tplab-limited", target_state="stopped")
    inst_id, inst_key = made["new_contract"], made["instance_api_key"]
    path = f"/api/v0/instances/{inst_id}/"
    before = vast.state()["rateLimited"]
    vast.set_faults(rate_scale=10.0)   # Vast's intervals (vast_endpoint_limits.json) x 10
    try:
        assert api(vast, "PUT", path, {"label": "a"}, key=inst_key)[0] == 200
        assert api(vast, "PUT", path, {"label": "b"}, key=inst_key) \
            == (429, {"detail": "API requests too frequent endpoint threshold=10"})
        assert api(vast, "PUT", path, {"label": "c"})[0] == 200        # another key
        assert api(vast, "GET", path)[0] == 200                         # another endpoint
        assert api(vast, "GET", path) \
            == (429, {"detail": "API requests too frequent endpoint threshold=20"})
        after = vast.state()["rateLimited"]
        assert {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)} \
            == {"GET /api/v0/instances/{id}": 1, "PUT /api/v0/instances/{id}": 1}
    finally:
        vast.set_faults(rate_scale=0.0)
        destroy(vast, inst_id)


@pytest.mark.parametrize("reads", [2, -1])
def test_a_destroy_that_lingers(vast, reads):
    _, body = create(vast, f"tplab-linger{reads}")
    inst_id = body["new_contract"]
    vast.set_faults(destroy_lingers=reads)
    status, answer = api(vast, "DELETE", f"/api/v0/instances/{inst_id}/")
    assert status == 200 and answer["success"] is True
    assert show(vast, inst_id) is not None
    if reads > 0:
        assert show(vast, inst_id) is None  # the second read after the destroy: gone
    else:
        for _ in range(5):
            assert show(vast, inst_id) is not None
        vast.set_faults(destroy_lingers=0)
        assert api(vast, "DELETE", f"/api/v0/instances/{inst_id}/")[0] == 200
        assert show(vast, inst_id) is None


def test_an_instance_that_exits_during_boot_never_runs(vast):
    vast.set_faults(boot_exited=True)
    _, body = create(vast, "tplab-exited")
    inst_id = body["new_contract"]
    try:
        inst = wait_for(vast, inst_id, "exited")
        assert inst["ports"] is None and _admin(vast, inst_id)["computeUsd"] == 0
    finally:
        destroy(vast, inst_id)


def test_no_interruptible_offers(vast):
    vast.set_faults(no_bid_offers=True)
    status, body = api(vast, "POST", "/api/v0/bundles/", {"type": "bid",
                                                         "gpu_name": {"in": ["RTX 4090"]}})
    assert (status, body) == (200, {"offers": []})
    status, body = create(vast, "tplab-nobid")
    assert (status, body["error"]) == (410, "no_such_ask")
    status, body = api(vast, "POST", "/api/v0/bundles/", {"gpu_name": {"in": ["RTX 4090"]}})
    assert body["offers"]  # on demand is still there


def test_a_public_ssh_port_that_never_appears(vast):
    vast.set_faults(no_ssh_port=True)
    _, body = create(vast, "tplab-noport", bid=False,
                     onstart='echo "port=[$VAST_TCP_PORT_22]" > port.out')
    inst_id = body["new_contract"]
    try:
        deadline = time.monotonic() + 10
        while show(vast, inst_id)["actual_status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        inst = show(vast, inst_id)
        assert inst["ports"] is None and inst["public_ipaddr"] == ""
        assert not inst["is_bid"] and inst["dph_base"] == MACHINE.ondemand_dph
        admin = _admin(vast, inst_id)
        assert not admin["sshListening"]
        out = Path(admin["sandbox"]) / "port.out"
        while not out.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert out.read_text() == "port=[]\n"
    finally:
        destroy(vast, inst_id)


def test_without_direct_ports_only_the_ssh_proxy_leads_in(vast):
    vast.set_faults(no_direct_ports=True)
    status, body = api(vast, "POST", "/api/v0/bundles/", {"type": "bid",
                                                         "gpu_name": {"in": ["RTX 4090"]},
                                                         "direct_port_count": {"gte": 1}})
    assert (status, body) == (200, {"offers": []})   # what tplab's search asks for: none
    key = new_key()
    _, made = create(vast, "tplab-proxy")
    inst_id = made["new_contract"]
    try:
        api(vast, "POST", f"/api/v0/instances/{inst_id}/ssh/",
            {"ssh_key": key.export_public_key().decode()})
        deadline = time.monotonic() + 10
        while not (inst := show(vast, inst_id))["ssh_port"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert inst["ports"] is None and inst["public_ipaddr"] == ""
        assert inst["direct_port_count"] == 0
        from tplab.cloud.vast.shapes import ssh_endpoint
        via = ssh_endpoint(inst)
        assert via is not None and (via.host, via.port) == (inst["ssh_host"], inst["ssh_port"])
        host_key = _admin(vast, inst_id)["hostKey"]
        while True:
            try:
                assert ssh_run(via.host, via.port, key, "echo proxied", host_key).stdout \
                    == "proxied\n"
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        destroy(vast, inst_id)


def test_two_mocks_that_hand_out_the_same_id_never_reach_each_others_processes(tmp_path):
    """Vast's ids are unique within one mock only: two mocks at once (two labs, a lab beside
    `tplab mock-cloud`) can both make instance 31000001. Each instance's processes carry a mark
    that names its own mock's run, so destroying one never kills the other's container."""
    import asyncio
    import os
    import subprocess
    import sys

    from tplab.mock.procs import MARKER_VAR, pod_pids
    from tplab.mock.vast_mock.faults import VastFaults
    from tplab.mock.vast_mock.catalog import MACHINES
    from tplab.mock.vast_mock.state import VastState

    async def make(name: str):
        state = VastState(api_key="k", balance_usd=1.0, faults=VastFaults(), boot_delay_s=60,
                          state_dir=tmp_path / name)
        state._next_id = 31000000  # the same id from both
        inst = state.create(MACHINES[0], price=0.5, image="img", label=None, disk_gb=10,
                            onstart="", runtype="ssh", env={})
        for task in inst.tasks:  # its boot is not what this test is about
            task.cancel()
        return inst

    a, b = (asyncio.run(make(name)) for name in ("run-a-1", "run-b-2"))
    assert a.id == b.id and a.marker != b.marker
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            env={**os.environ, MARKER_VAR: a.marker})
    try:
        assert proc.pid in pod_pids(a.marker) and proc.pid not in pod_pids(b.marker)
    finally:
        proc.kill()
        proc.wait(5)
