"""Every error answer of a mock cloud is in its provider's shape — unknown routes, wrong methods and
the mock's own crashes included (RunPod: application/problem+json; Vast: its JSON) — and a crash
is recorded so the test that caused it fails."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.mock.helpers import http
from tplab.mock.runpod_mock import server as runpod_server
from tplab.mock.runpod_mock.faults import Faults
from tplab.mock.runpod_mock.state import CloudState
from tplab.mock.vast_mock import server as vast_server
from tplab.mock.vast_mock.faults import VastFaults
from tplab.mock.vast_mock.state import VastState

pytestmark = pytest.mark.slow


def _problem(status, headers, body, want):
    assert status == want, body
    assert headers["Content-Type"].startswith("application/problem+json")
    assert body["status"] == want and body["title"] and body["detail"]


def test_runpod_errors_are_problem_json(cloud):
    import urllib.error
    import urllib.request

    for method, path, want in (("GET", "/v2/nothing", 404), ("PUT", "/v2/pods", 405),
                               ("GET", "/v2/billing/pods?startTime=", 400)):
        req = urllib.request.Request(cloud.api_url + path, method=method,
                                     headers={"Authorization": f"Bearer {cloud.api_key}"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        _problem(err.value.code, err.value.headers, json.loads(err.value.read()), want)
        if want == 405:
            assert "GET" in err.value.headers["Allow"]


def test_runpod_billing_echoes_early_years_as_rfc3339(cloud):
    status, body = http("GET", cloud.api_url + "/v2/billing/pods?startTime=0190-02-24T13:02:31Z",
                        cloud.api_key)
    assert status == 200, body
    assert body["metadata"]["query"]["startTime"] == "0190-02-24T00:00:00Z"
    for query in ("lastN=2000000000&bucketSize=year", "lastN=99999999&bucketSize=hour",
                  "startTime=0001-01-01T00:00:00Z&bucketSize=week",
                  "endTime=9999-12-31T23:59:59Z&bucketSize=month"):
        status, body = http("GET", cloud.api_url + "/v2/billing/pods?" + query, cloud.api_key)
        assert status == 200, (query, body)


async def _crash(request: web.Request) -> web.Response:
    raise RuntimeError("boom")


async def _get(app: web.Application, path: str) -> tuple[int, str, dict]:
    async with TestClient(TestServer(app)) as client:
        resp = await client.get(path)
        return resp.status, resp.content_type, await resp.json(content_type=None)


def test_a_crash_of_either_mock_is_a_500_in_the_providers_shape_and_recorded(tmp_path):
    rp_state = CloudState(api_key="k", balance_usd=1.0, faults=Faults(), boot_delay_s=0.1,
                          state_dir=tmp_path / "rp")
    rp_app = runpod_server.build_app(rp_state)
    rp_app.router.add_get("/v2/crash", _crash)
    status, media, body = asyncio.run(_get(rp_app, "/v2/crash"))
    assert (status, media) == (500, "application/problem+json") and body["status"] == 500
    assert "boom" in rp_state.schema_violations[0]

    v_state = VastState(api_key="k", balance_usd=1.0, faults=VastFaults(), boot_delay_s=0.1,
                        state_dir=tmp_path / "vast")
    v_app = vast_server.build_app(v_state)
    v_app.router.add_get("/api/v0/crash", _crash)
    status, media, body = asyncio.run(_get(v_app, "/api/v0/crash"))
    assert (status, media) == (500, "application/json")
    assert body["success"] is False and body["error"] == "server_error"
    assert "boom" in v_state.schema_violations[0]
