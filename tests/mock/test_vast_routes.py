"""The mock Vast cloud's routes, as a lab uses them: search, create, keys, show, list, bid, destroy,
account, charges; auth and the per-instance key; errors in Vast's shape."""

from __future__ import annotations

import time

import asyncssh
import pytest

from tests.mock.helpers import new_key, ssh_run
from tests.mock.vast_helpers import MACHINE, api, create, destroy, show, ssh_port, wait_for

pytestmark = pytest.mark.slow


def _search(vast, **body):
    status, answer = api(vast, "POST", "/api/v0/bundles/", body)
    assert status == 200, answer
    return answer["offers"]


def test_search_finds_interruptible_offers_by_gpu_and_count_cheapest_first(vast):
    offers = _search(vast, gpu_name={"in": ["RTX 4090", "RTX_A6000"]}, num_gpus={"eq": 2},
                     rentable={"eq": True}, verified={"eq": True},
                     direct_port_count={"gte": 1}, type="bid", order=[["dph_total", "asc"]],
                     limit=5)
    assert [(o["gpu_name"], o["num_gpus"]) for o in offers] == [("RTX 4090", 2)] * 5
    assert all(o["is_bid"] for o in offers)
    assert [o["dph_total"] for o in offers] == sorted(o["dph_total"] for o in offers)
    assert all(o["id"] == o["ask_contract_id"] for o in offers)
    assert offers[0]["dph_total"] < MACHINE.min_bid   # the market's cheapest: old drivers
    fitting = _search(vast, gpu_name={"in": ["RTX 4090"]}, num_gpus={"eq": 2}, type="bid",
                      cuda_max_good={"gte": 12.4}, order=[["dph_total", "asc"]], limit=5)
    assert fitting[0]["id"] == MACHINE.ask_id and fitting[0]["min_bid"] == MACHINE.min_bid
    assert fitting[0]["dph_total"] < MACHINE.ondemand_dph  # a bid search shows the bid price
    on_demand = _search(vast, gpu_name={"eq": "RTX 4090"}, num_gpus={"eq": 2},
                        cuda_max_good={"gte": 12.4}, order=[["dph_total", "asc"]])
    assert on_demand[0]["dph_base"] == MACHINE.ondemand_dph and not on_demand[0]["is_bid"]
    # no order: the server's own (its score, highest first); no limit: its first 64
    plain = _search(vast, gpu_name={"eq": "RTX 4090"}, num_gpus={"eq": 2})
    assert len(plain) == 64 and MACHINE.ask_id not in [o["id"] for o in plain]
    assert [o["score"] for o in plain] == sorted((o["score"] for o in plain), reverse=True)
    assert _search(vast, gpu_name={"eq": "RTX 4090"}, num_gpus={"eq": 3}) == []


def test_unknown_or_ill_typed_create_fields_are_refused_and_nothing_is_made(vast):
    before = len(vast.pods())
    for extra, needle in (({"interruptible": True}, "interruptible"),
                          ({"price": "cheap"}, "price"), ({"price": 500}, "price"),
                          ({"runtype": "tunnel"}, "runtype")):
        status, body = create(vast, "tplab-bad", **extra)
        assert status == 400, body
        assert body["success"] is False and body["error"] == "invalid_args"
        assert needle in body["msg"]
    status, body = create(vast, "tplab-long", onstart="x" * 4097)
    assert (status, body["error"]) == (400, "invalid_args") and "4096" in body["msg"]
    status, body = api(vast, "PUT", "/api/v0/asks/1/", {"image": "x"})
    assert (status, body["error"]) == (404, "no_such_ask")
    assert len(vast.pods()) == before


def test_a_bid_below_the_minimum_still_makes_a_stopped_instance_that_bills_storage(vast):
    status, body = create(vast, "tplab-low", price=MACHINE.min_bid / 2)
    assert status == 200 and body["success"] is False and body["error"] == "bid_failed", body
    left = body["new_contract"]
    try:
        inst = show(vast, left)
        assert (inst["actual_status"], inst["intended_status"]) == ("stopped", "stopped")
        assert "below the minimum" in inst["status_msg"] and inst["is_bid"]
        record = next(p for p in vast.pods() if p["id"] == left)
        assert record["storageUsd"] > 0 and record["computeUsd"] == 0
    finally:
        destroy(vast, left)
    assert show(vast, left) is None


def test_instance_boots_runs_its_onstart_over_ssh_and_is_destroyed(vast, tmp_path):
    key = new_key()
    status, body = create(vast, "tplab-life", env={"LAB_VAR": "seven", "-p 22:22": "1"},
                          onstart="echo started-$LAB_VAR > onstart.out; "
                                  "echo EXPORTED=$LAB_VAR >> etc/environment; echo container:"
                                  "$CONTAINER_ID:$PUBLIC_IPADDR:$VAST_TCP_PORT_22:"
                                  "$VAST_API_BASE_URL:${CONTAINER_API_KEY:+has-key} "
                                  "> container.env; sleep 600 &")
    assert status == 200 and body["success"] is True, body
    inst_id, inst_key = body["new_contract"], body["instance_api_key"]
    assert isinstance(inst_id, int) and inst_key
    first = show(vast, inst_id)["actual_status"]
    assert first in (None, "loading")
    status, attached = api(vast, "POST", f"/api/v0/instances/{inst_id}/ssh/",
                           {"ssh_key": key.export_public_key().decode()})
    assert status == 200 and attached["success"], attached
    inst = wait_for(vast, inst_id, "running")
    assert inst["intended_status"] == "running" and inst["public_ipaddr"] == "127.0.0.1"
    assert inst["is_bid"] and inst["label"] == "tplab-life"
    port = ssh_port(inst)
    host_key = next(p["hostKey"] for p in vast.pods() if p["id"] == inst_id)
    deadline = time.monotonic() + 15
    while True:
        try:
            out = ssh_run("127.0.0.1", port, key, "cat onstart.out container.env; echo "
                          "ssh:$CONTAINER_ID:$PUBLIC_IPADDR:$VAST_TCP_PORT_22:$LAB_VAR:$EXPORTED; "
                          "test -n \"$CONTAINER_API_KEY\" && echo has-key", host_key)
            if "started-seven" in out.stdout and "container:" in out.stdout:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the instance's sshd or onstart never came up"
        time.sleep(0.1)
    lines = out.stdout.split("\n")
    # the container (onstart) has the instance's variables; an SSH session has none of them
    assert lines[1] == f"container:{inst_id}:127.0.0.1:{port}:{vast.api_url}:has-key"
    # ... but what the container exported to (the sandbox's) /etc/environment, read at login
    assert lines[2] == "ssh:::::seven" and "has-key" not in lines[2:]
    status, gone = api(vast, "DELETE", f"/api/v0/instances/{inst_id}/")
    assert status == 200 and gone["success"] is True
    assert show(vast, inst_id) is None
    status, again = api(vast, "DELETE", f"/api/v0/instances/{inst_id}/")
    assert (status, again["error"]) == (404, "no_such_instance")
    record = next(p for p in vast.pods() if p["id"] == inst_id)
    assert record["destroyed"] and record["alivePids"] == [] and record["killedPids"] >= 1
    with pytest.raises(OSError):
        ssh_run("127.0.0.1", port, key, "true", host_key)


def test_the_instance_key_may_only_stop_start_or_destroy_its_own_instance(vast):
    _, mine = create(vast, "tplab-key-a")
    _, other = create(vast, "tplab-key-b")
    key = mine["instance_api_key"]
    try:
        for method, path, body in (("GET", f"/api/v0/instances/{mine['new_contract']}/", None),
                                   ("GET", "/api/v0/users/current/", None),
                                   ("DELETE", f"/api/v0/instances/{other['new_contract']}/",
                                    None)):
            status, answer = api(vast, method, path, body, key=key)
            assert status == 401 and answer["success"] is False, (path, answer)
        # its instance gone, the key is one Vast does not know: 404 auth_error, as Vast answers
        status, answer = api(vast, "DELETE", f"/api/v0/instances/{mine['new_contract']}/",
                             key=key)
        assert status == 200 and answer["success"] is True
        assert show(vast, mine["new_contract"]) is None
        status, answer = api(vast, "DELETE", f"/api/v0/instances/{mine['new_contract']}/",
                             key=key)
        assert status == 404 and answer["error"] == "auth_error"
        status, answer = api(vast, "GET", "/api/v0/users/current/", key=None)
        assert status == 404 and answer["error"] == "auth_error"
    finally:
        destroy(vast, other["new_contract"])


def test_account_keys_go_into_later_instances_and_can_be_removed(vast):
    key = new_key()
    status, made = api(vast, "POST", "/api/v0/ssh/", {"ssh_key": key.export_public_key().decode()})
    assert status == 200 and made["success"], made
    key_id = made["key"]["id"]
    status, listed = api(vast, "GET", "/api/v0/ssh/")
    assert [k["id"] for k in listed] == [key_id]
    _, body = create(vast, "tplab-acct-key")
    inst_id = body["new_contract"]
    try:
        assert api(vast, "DELETE", f"/api/v0/ssh/{key_id}/") == (200, {"success": True})
        assert api(vast, "GET", "/api/v0/ssh/") == (200, [])
        status, keys = api(vast, "GET", f"/api/v0/instances/{inst_id}/ssh/")
        assert key.export_public_key().decode().split()[1] in keys["ssh_keys"]
        inst = wait_for(vast, inst_id, "running")
        deadline = time.monotonic() + 15
        while True:  # the key the instance got at create still opens it
            try:
                assert ssh_run("127.0.0.1", ssh_port(inst), key, "echo in").stdout == "in\n"
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        status, answer = api(vast, "DELETE", f"/api/v0/ssh/{key_id}/")
        assert (status, answer["error"]) == (400, "no_such_ssh_key")
        # detached from the instance: that key no longer opens it
        status, answer = api(vast, "DELETE", f"/api/v0/instances/{inst_id}/ssh/{key_id}/")
        assert status == 200 and answer["success"], answer
        assert api(vast, "GET", f"/api/v0/instances/{inst_id}/ssh/")[1]["ssh_keys"] == ""
        with pytest.raises(asyncssh.PermissionDenied):
            ssh_run("127.0.0.1", ssh_port(inst), key, "true")
        status, answer = api(vast, "DELETE", f"/api/v0/instances/{inst_id}/ssh/{key_id}/")
        assert (status, answer["error"]) == (404, "no_such_ssh_key")
    finally:
        destroy(vast, inst_id)


def test_an_account_key_can_be_replaced(vast):
    old, new = new_key(), new_key()
    _, made = api(vast, "POST", "/api/v0/ssh/", {"ssh_key": old.export_public_key().decode()})
    key_id = made["key"]["id"]
    try:
        status, answer = api(vast, "PUT", f"/api/v0/ssh/{key_id}/",
                             {"ssh_key": new.export_public_key().decode()})
        assert status == 200 and answer["key"]["public_key"] == \
            new.export_public_key().decode().strip()
        _, listed = api(vast, "GET", "/api/v0/ssh/")
        assert [k["key"] for k in listed] == [new.export_public_key().decode().strip()]
        status, answer = api(vast, "PUT", f"/api/v0/ssh/{key_id}/", {"ssh_key": "not a key"})
        assert (status, answer["error"]) == (400, "invalid_args")
    finally:
        api(vast, "DELETE", f"/api/v0/ssh/{key_id}/")


def test_list_filters_by_label_and_pages_with_next_token(vast):
    ids = [create(vast, "tplab-page")[1]["new_contract"] for _ in range(3)]
    other = create(vast, "tplab-else")[1]["new_contract"]
    try:
        seen, token = [], None
        for _ in range(5):
            query = '?select_filters={"label":{"eq":"tplab-page"}}&limit=2'
            if token:
                query += f"&after_token={token}"
            status, page = api(vast, "GET", "/api/v1/instances/" + query)
            assert status == 200, page
            seen += [i["id"] for i in page["instances"]]
            assert page["total_instances"] == 3
            token = page["next_token"]
            if token is None:
                break
        assert seen == sorted(ids)
        status, bad = api(vast, "GET", "/api/v1/instances/?select_filters=[1")
        assert (status, bad["error"]) == (400, "invalid_request")
    finally:
        for inst_id in ids + [other]:
            destroy(vast, inst_id)


def test_change_bid_and_manage_state(vast):
    _, body = create(vast, "tplab-bid")
    inst_id = body["new_contract"]
    try:
        status, answer = api(vast, "PUT", f"/api/v0/instances/bid_price/{inst_id}/",
                             {"client_id": "me", "price": MACHINE.min_bid * 2})
        assert (status, answer) == (200, {"success": True})
        assert show(vast, inst_id)["dph_base"] == pytest.approx(MACHINE.min_bid * 2)
        wait_for(vast, inst_id, "running")
        assert api(vast, "PUT", f"/api/v0/instances/{inst_id}/", {"state": "stopped"})[0] == 200
        inst = show(vast, inst_id)
        assert (inst["actual_status"], inst["intended_status"]) == ("stopped", "stopped")
        assert inst["ports"] is None
        assert api(vast, "PUT", f"/api/v0/instances/{inst_id}/", {"state": "running"})[0] == 200
        wait_for(vast, inst_id, "running")
        status, answer = api(vast, "PUT", "/api/v0/instances/bid_price/1/",
                             {"client_id": "me", "price": 1.0})
        assert (status, answer["error"]) == (404, "no_such_instance")
    finally:
        destroy(vast, inst_id)


def test_charges_bill_compute_while_running_and_storage_while_it_exists(vast):
    _, before = api(vast, "GET", "/api/v0/users/current/")
    _, body = create(vast, "tplab-charge", disk=100)
    inst_id = body["new_contract"]
    wait_for(vast, inst_id, "running")
    time.sleep(0.2)   # billed by the second begun: one second of GPU at least
    destroy(vast, inst_id)
    now = int(time.time())
    status, charges = api(vast, "GET", "/api/v0/charges/?select_filters="
                          f'{{"day":{{"gte":{now - 3600},"lte":{now + 60}}}}}')
    assert status == 200, charges
    row = next(r for r in charges["results"] if r["source"] == f"instance-{inst_id}")
    gpu = next(i for i in row["items"] if i["type"] == "gpu")
    disk = next(i for i in row["items"] if i["type"] == "disk")
    price = MACHINE.min_bid * 1.2
    assert price * 1 / 3600 <= gpu["amount"] <= price * 30 / 3600
    assert disk["amount"] > 0 and row["amount"] == pytest.approx(gpu["amount"] + disk["amount"])
    _, after = api(vast, "GET", "/api/v0/users/current/")
    assert after["credit"] <= before["credit"] - row["amount"] + 1e-6
    # balance is not the dollars left (credit is: departures.BEHAVIOURS)
    assert after["balance"] == pytest.approx(after["credit"] - 5.0)
    status, bad = api(vast, "GET", "/api/v0/charges/")
    assert (status, bad["error"]) == (400, "invalid_args")


def test_errors_come_in_vasts_json_shape(vast):
    for method, path, want in (("GET", "/api/v0/nothing/", 404),
                               ("POST", "/api/v0/users/current/", 405),
                               ("GET", "/api/v0/instances/abc/", 400)):
        status, body = api(vast, method, path)
        assert status == want, body
        assert body["success"] is False and body["error"] and body["msg"]
    assert api(vast, "GET", "/api/v0/users/current")[0] == 200  # with or without the slash
    calls = vast.calls()
    assert calls["GET /api/v0/users/current"] >= 1
    assert calls["GET (unknown route)"] >= 1
