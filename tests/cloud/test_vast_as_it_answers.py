"""The Vast provider against the mock Vast cloud answering as the service does beyond its document
(tplab/mock/vast_mock/departures.py): every state as Vast reports it, SSH that gets through, an
offer that moves between search and create, money as Vast's own tools read it, a refused key.
Each case is a mock fault switch; the whole labs are in tests/lab/test_lab_vast.py."""

from __future__ import annotations

import time

import pytest

from tests.mock.helpers import new_key, spec
from tests.mock.vast_helpers import api, create, destroy
from tplab.cloud.base import (GONE_STATES, INTERRUPTED, AuthError, NotReadyError,
                              SpotUnavailableError)
from tplab.cloud.vast import shapes
from tplab.cloud.vast.provider import OFFER_TRIES, VastProvider


def _vast(mock, **kw) -> VastProvider:
    return VastProvider(mock.api_key, mock.api_url, poll_interval_s=0.05, **kw)


def _until(provider: VastProvider, pod_id: str, want, timeout_s: float = 15.0):
    deadline = time.monotonic() + timeout_s
    seen = []
    while time.monotonic() < deadline:
        info = provider.status(pod_id)
        if not seen or seen[-1] != info.state:
            seen.append(info.state)
        if want(info):
            return info, seen
        time.sleep(0.05)
    raise AssertionError(f"instance {pod_id} went {seen}")


# ---- item 4: every state as the service reports it ------------------------------------------
def test_a_destroyed_record_is_gone_and_verified_so(vast):
    vast.set_faults(destroyed_records=True)
    p = _vast(vast)
    made = p.create(spec(new_key(), "tplab-destroyed"))
    p.terminate(made.id)
    inst = api(vast, "GET", f"/api/v0/instances/{made.id}/")[1]["instances"]
    assert inst is not None and inst["actual_status"] == "destroyed"   # a record, not null
    assert p.status(made.id).state in GONE_STATES
    proof = p.verify_gone(made.id)
    assert proof.gone and proof.answer["pod"]["status"] == "TERMINATED"


def test_a_stopped_intent_while_coming_up_fails_at_once_with_the_reason(vast):
    vast.set_faults(stopped_while_loading=True)
    p = _vast(vast)
    made = p.create(spec(new_key(), "tplab-stopping"))
    started = time.monotonic()
    with pytest.raises(NotReadyError) as err:
        p.wait_ready(made.id, timeout_s=60.0)
    assert time.monotonic() - started < 10.0     # not the whole boot timeout
    assert "set it to stop while it was coming up" in str(err.value)
    assert "it has been destroyed" in str(err.value)
    assert p.status(made.id).state in GONE_STATES


def test_an_oci_error_fails_at_once_with_vasts_message(vast):
    vast.set_faults(oci_error=True)
    p = _vast(vast)
    made = p.create(spec(new_key(), "tplab-oci"))
    with pytest.raises(NotReadyError, match="OCI runtime create failed") as err:
        p.wait_ready(made.id, timeout_s=60.0)
    assert "could not be created" in str(err.value) and "destroyed" in str(err.value)


def test_restarting_is_waited_for(vast):
    vast.set_faults(restarting_s=1.0)
    p = _vast(vast)
    made = p.create(spec(new_key(), "tplab-restarting"))
    try:
        info, seen = _until(p, made.id, lambda i: i.state == "RUNNING")
        assert "STARTING" in seen and info.ssh is not None
        raw = api(vast, "GET", f"/api/v0/instances/{made.id}/")[1]["instances"]
        assert shapes.state_of({**raw, "actual_status": "restarting"})[0] == "STARTING"
    finally:
        p.terminate(made.id)


def test_an_outbid_reported_as_a_stopped_intent_is_an_interruption(vast):
    vast.set_faults(outbid_as_stopped=True, outbid_resume_s=-1)
    p = _vast(vast)
    made = p.create(spec(new_key(), "tplab-outbid-stopped"))
    try:
        _until(p, made.id, lambda i: i.state == "RUNNING")
        vast.outbid(made.id)
        info, _ = _until(p, made.id, lambda i: i.state != "RUNNING")
        assert info.state == INTERRUPTED and info.raw["intended_status"] == "stopped"
    finally:
        p.terminate(made.id)


# ---- item 5: SSH that gets through -----------------------------------------------------------
def test_a_padded_address_and_a_blocked_direct_port_leave_the_proxy_as_the_fallback(vast):
    vast.set_faults(padded_ipaddr=True, direct_port_blocked=True)
    p = _vast(vast)
    made = p.create(spec(new_key(), "tplab-proxy"))
    try:
        info, _ = _until(p, made.id, lambda i: i.state == "RUNNING" and i.ssh is not None)
        raw = api(vast, "GET", f"/api/v0/instances/{made.id}/")[1]["instances"]
        assert raw["public_ipaddr"] != raw["public_ipaddr"].strip()
        assert info.ssh.host == "127.0.0.1"                         # stripped
        assert info.ssh_fallback is not None
        assert (info.ssh_fallback.host, info.ssh_fallback.port) == (raw["ssh_host"],
                                                                    raw["ssh_port"])
        assert info.ssh.port != info.ssh_fallback.port               # the blocked one first
    finally:
        p.terminate(made.id)
    # ports null (a host without direct ports): the proxy is the way, with no fallback
    vast.set_faults(padded_ipaddr=False, direct_port_blocked=False, no_direct_ports=True)
    inst = str(create(vast, "tplab-proxy-only")[1]["new_contract"])
    try:
        info, _ = _until(p, inst, lambda i: i.state == "RUNNING" and i.ssh is not None)
        assert info.raw["ports"] is None and info.ssh_fallback is None
        assert info.ssh.port == info.raw["ssh_port"]
    finally:
        p.terminate(inst)


# ---- item 6: an offer taken between search and create -------------------------------------
def test_an_offer_that_moves_is_searched_again_each_try_said_a_bounded_number_of_times(vast):
    notes: list[str] = []
    p = _vast(vast)
    p.on_note = notes.append
    vast.set_faults(offer_taken=[404, 410])
    before = len(vast.pods())
    made = p.create(spec(new_key(), "tplab-moved"))
    try:
        assert len(vast.pods()) == before + 1 and len(notes) == 2
        assert "HTTP 404 no_such_ask" in notes[0] and "try 2 of 3" in notes[0]
        assert "HTTP 410 no_such_ask" in notes[1] and "try 3 of 3" in notes[1]
        assert made.state in ("PROVISIONING", "STARTING", "RUNNING")
    finally:
        p.terminate(made.id)
    vast.set_faults(offer_taken=[410, 400, 410, 410])
    with pytest.raises(SpotUnavailableError) as err:
        p.create(spec(new_key(), "tplab-moved-away"))
    assert f"would not rent any of the {OFFER_TRIES} cheapest" in str(err.value)
    assert "nothing was created" in str(err.value) and len(vast.pods()) == before + 1


# ---- item 7: money as Vast's own tools read it ----------------------------------------------
def test_the_balance_is_vasts_credit(vast):
    user = api(vast, "GET", "/api/v0/users/current/")[1]
    assert _vast(vast).balance() == pytest.approx(user["credit"]) != user["balance"]


# ---- item 2: auth is auth -------------------------------------------------------------------
@pytest.mark.parametrize("how", ["revoked", "deleted", "session", "2fa"])
def test_every_way_vast_refuses_a_key_is_the_key_on_every_call_never_gone(vast, how):
    _, made = create(vast, f"tplab-key-{how}", target_state="stopped")
    inst = str(made["new_contract"])
    p = _vast(vast, key_source="~/.config/vastai/vast_api_key")
    vast.set_faults(key_refused=how)
    try:
        calls = {"status": lambda: p.status(inst), "list": p.list_pods,
                 "destroy": lambda: p.terminate(inst), "verify": lambda: p.verify_gone(inst),
                 "quote": lambda: p.quote("RTX 4090", 2), "balance": p.balance,
                 "create": lambda: p.create(spec(new_key(), "tplab-refused"))}
        for name, call in calls.items():
            with pytest.raises(AuthError) as err:
                call()
            said = str(err.value)
            assert said.startswith("Vast.ai refused the API key from "
                                   "~/.config/vastai/vast_api_key (HTTP "), (name, said)
            assert "gone" not in said.lower() and "\n" not in said, (name, said)
            assert said.endswith("or set VAST_API_KEY."), (name, said)
    finally:
        vast.set_faults(key_refused="")
    assert api(vast, "GET", f"/api/v0/instances/{inst}/")[1]["instances"] is not None
    destroy(vast, int(inst))
