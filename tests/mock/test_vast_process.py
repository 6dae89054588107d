"""The Vast mock as a process: started like the RunPod mock, alone or beside it, found by other
terminals, and its document and exceptions kept in step with Vast's published one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mock.helpers import http
from tplab.home import mock_clouds
from tplab.mock.document import SchemaViolation
from tplab.mock.handle import start_mock_vast
from tplab.mock.vast_mock import contract

REPO = Path(__file__).resolve().parents[2]
#: Vast's whole published document (tests/mock/documents/README.md says where it is from)
REFERENCE = Path(__file__).resolve().parent / "documents" / "vast-openapi.json"


def test_one_process_serves_both_clouds(tmp_path):
    env = {**os.environ, "TPLAB_MOCK_API_KEY": "rpa_both_0123456789",
           "TPLAB_MOCK_VAST_API_KEY": "vast_both_0123456789"}
    proc = subprocess.Popen([sys.executable, "-m", "tplab.mock", "--cloud", "both",
                             "--state-dir", str(tmp_path), "--boot-delay", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        info = json.loads(proc.stdout.readline())
        runpod, vast = info["clouds"]["runpod"], info["clouds"]["vast"]
        assert info["api_url"] == runpod["api_url"] != vast["api_url"]
        assert (runpod["api_key"], vast["api_key"]) == ("rpa_both_0123456789",
                                                        "vast_both_0123456789")
        assert http("GET", runpod["api_url"] + "/v2/pods", runpod["api_key"]) == (200,
                                                                                 {"pods": []})
        status, user = http("GET", vast["api_url"] + "/api/v0/users/current/", vast["api_key"])
        assert status == 200 and user["credit"] == 10.0
        # each cloud takes only its own key (Vast answers a key it does not know 404 auth_error)
        assert http("GET", vast["api_url"] + "/api/v0/users/current/", runpod["api_key"]) \
            == (404, {"success": False, "error": "auth_error",
                      "msg": "Invalid API key: no user is logged in with it."})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()


def test_start_mock_vast_gives_the_client_its_url_key_and_env(tmp_path, monkeypatch):
    monkeypatch.setenv("VAST_API_KEY", "a-real-key-that-must-not-leak")
    with start_mock_vast({"no_bid_offers": True}, boot_delay_s=0.1, state_dir=tmp_path) as cloud:
        assert cloud.provider == "vast" and cloud.api_url.startswith("http://127.0.0.1:")
        assert cloud.env() == {"VAST_API_BASE_URL": cloud.api_url, "VAST_API_KEY": cloud.api_key}
        assert cloud.api_key != "a-real-key-that-must-not-leak"
        assert cloud.state()["faults"]["no_bid_offers"] is True
        assert [r.api_url for r in mock_clouds.running("vast")] == [cloud.api_url]
        assert cloud.api_url not in [r.api_url for r in mock_clouds.running("runpod")]
        with pytest.raises(ValueError, match="unknown Vast fault"):
            cloud.set_faults(spot_removed=True)
    assert mock_clouds.running("vast") == []


def test_shipped_document_is_vasts_own_cut_to_our_routes():
    full = json.loads(REFERENCE.read_text())
    shipped = json.loads(contract.SUBSET_PATH.read_text())
    assert contract.extract_subset(full) == shipped
    assert set(shipped["paths"]) == set(contract.ROUTES)
    contract.apply_exceptions(full)  # every exception still names a schema of the document


def test_the_exceptions_are_the_only_loosening():
    shipped = json.loads(contract.SUBSET_PATH.read_text())
    patched = contract.apply_exceptions(shipped)
    changed = {"/".join(d.where) for d in contract.EXCEPTIONS if d.where}
    assert len(changed) == len(contract.EXCEPTIONS) == 9

    def diff(a, b, where=""):
        if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
            return [d for k in a for d in diff(a[k], b[k], f"{where}/{k}".lstrip("/"))]
        return [] if a == b else [where]

    differs = set(diff(shipped, patched))
    # every difference lies inside a departure, and every departure changed something
    assert all(any(d == c or d.startswith(c + "/") for c in changed) for d in differs), differs
    assert all(any(d == c or d.startswith(c + "/") or c.startswith(d + "/") for d in differs)
               for c in changed), changed - differs
    for departure in (*contract.EXCEPTIONS, *contract.BEHAVIOURS):
        assert departure.what and departure.source, departure
    sources = " ".join(d.source for d in (*contract.EXCEPTIONS, *contract.BEHAVIOURS))
    assert "vastai 1.9.1" in sources


def test_create_bodies_are_held_to_the_document():
    route = "/api/v0/asks/{id}"
    good = {"image": "img", "label": "tplab-x", "disk": 20, "runtype": "ssh_direct",
            "price": 0.4, "onstart": "echo hi", "env": {"K": "V", "-p 22:22": "1"},
            "cancel_unavail": True, "target_state": "running"}
    contract.check_request_body(route, "put", good)
    contract.check_request_body(route, "put", {**good, "env": "-e K=V -p 22:22"})
    for bad, needle in (({**good, "bid": 0.4}, "bid: unknown field"),
                        ({**good, "price": 0.0001}, "price"),
                        ({**good, "env": ["K=V"]}, "env"),
                        ({k: v for k, v in good.items() if k != "image"}, "image")):
        with pytest.raises(SchemaViolation) as err:
            contract.check_request_body(route, "put", bad)
        assert any(needle in e for e in err.value.errors), err.value.errors


def test_answers_are_held_to_the_document_formats_included():
    contract.check_response("/api/v0/instances/{id}", "get", 200, {"instances": None})
    with pytest.raises(SchemaViolation):
        contract.check_response("/api/v0/instances/{id}", "get", 200,
                                {"instances": {"ports": [22]}})
    row = {"id": 1, "user_id": 2, "key": "ssh-ed25519 AAAA", "deleted_at": None}
    contract.check_response("/api/v0/ssh", "get", 200, [{**row, "created_at":
                                                         "2026-12-01T10:00:00Z"}])
    with pytest.raises(SchemaViolation, match="date-time"):
        contract.check_response("/api/v0/ssh", "get", 200, [{**row, "created_at": "190-02-24"}])
    with pytest.raises(SchemaViolation):  # an error status the route does not list: Vast's shape
        contract.check_response("/api/v0/bundles", "post", 401, {"detail": "no"})
    contract.check_response("/api/v0/bundles", "post", 429, {"detail": "API requests too frequent"})
