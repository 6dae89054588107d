"""tplab's REST v2 client against a scripted server: one sentence per problem+json status,
bounded waits and retries, pagination, and the key never in any text."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tplab.cloud.base import (AmbiguousCreateError, AuthError, BalanceError, ForbiddenError,
                              NoCapacityError, RateLimitedError, RequestBugError,
                              RequestRejectedError, TransientError)
from tplab.cloud.runpod.http_api import RestV2

KEY = "rpa_HTTPTEST_" + "k" * 24


class Scripted:
    """Answers each request with the next scripted (status, body, headers); records requests."""

    def __init__(self, script):
        self.script = list(script)
        self.seen: list[tuple[str, str, dict]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _go(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                api.seen.append((self.command, self.path, dict(self.headers), raw))
                status, body, headers = api.script.pop(0)
                data = b"" if body is None else (body if isinstance(body, bytes)
                                                 else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("Content-Type", "application/problem+json" if status >= 400
                                 else "application/json")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _go

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()  # shutdown() waits up to one poll

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def problem(status, detail, **extra):
    return (status, {"title": "x", "status": status, "detail": detail, **extra}, None)


@pytest.fixture
def serve():
    servers = []

    def make(*script):
        s = Scripted(script)
        servers.append(s)
        slept: list[float] = []
        return s, RestV2(KEY, s.url, retry_delays=(0.1, 0.2), sleep=slept.append), slept

    yield make
    for s in servers:
        s.close()


@pytest.mark.parametrize("answer, exc, needle", [
    (problem(400, "There are no longer any instances available"), NoCapacityError,
     "no capacity for creating the pod right now (HTTP 400: There are no longer"),
    (problem(400, "dataCenterIds and gpu conflict"), RequestRejectedError,
     "refused creating the pod (HTTP 400: dataCenterIds and gpu conflict)"),
    ((401, {"title": "Unauthorized", "status": 401, "detail": "bad " + KEY}, None), AuthError,
     "refused the API key from RUNPOD_API_KEY or ~/.runpod/config.toml (HTTP 401)"),
    (problem(402, "insufficient balance"), BalanceError, "lack of funds (HTTP 402: insufficient"),
    (problem(403, "no access to pool"), ForbiddenError, "(HTTP 403: no access to pool); this API"),
    (problem(422, "Request validation failed.", errors=["(body): 'x' was unexpected"]),
     RequestBugError, "malformed (HTTP 422: Request validation failed. ((body): 'x' was "
                      "unexpected)); this is a bug in tplab"),
])
def test_each_status_is_one_sentence_without_the_key(serve, answer, exc, needle):
    _, api, _ = serve(answer)
    with pytest.raises(exc) as err:
        api.call("creating the pod", "POST", "/pods", json={"name": "tplab-x"})
    assert needle in str(err.value) and KEY not in str(err.value)
    assert "\n" not in str(err.value)


def test_every_call_sends_the_bearer_key_and_has_a_timeout(serve, monkeypatch):
    s, api, _ = serve((200, {"pods": []}, None))
    timeouts = []
    real = api.session.request

    def spy(*a, **kw):
        timeouts.append(kw.get("timeout"))
        return real(*a, **kw)

    monkeypatch.setattr(api.session, "request", spy)
    api.call("listing pods", "GET", "/pods")
    assert s.seen[0][2]["Authorization"] == f"Bearer {KEY}" and s.seen[0][1] == "/v2/pods"
    assert timeouts == [api.timeout_s] and api.timeout_s > 0
    assert KEY not in repr(api)


def test_429_waits_retry_after_bounded_then_gives_up(serve):
    _, api, slept = serve(*[(429, {"title": "t", "status": 429, "detail": "slow down"},
                             {"Retry-After": "600"})] * 4)
    with pytest.raises(RateLimitedError, match="after waiting 90 s as its Retry-After asked"):
        api.call("listing pods", "GET", "/pods")
    assert slept == [30.0, 30.0, 30.0]  # each wait capped at max_retry_after_s


def test_5xx_retried_with_backoff_for_reads_but_never_for_a_create(serve):
    s, api, slept = serve(problem(503, "upstream"), problem(500, "upstream"),
                          (200, {"pods": []}, None))
    assert api.call("listing pods", "GET", "/pods").body == {"pods": []}
    assert slept == [0.1, 0.2]
    s2, api2, slept2 = serve(problem(502, "bad gateway"))
    with pytest.raises(AmbiguousCreateError, match="HTTP 502.*may have been created") as err:
        api2.call("creating the pod", "POST", "/pods", json={}, create_name="tplab-amb")
    assert err.value.pod_name == "tplab-amb" and slept2 == [] and len(s2.seen) == 1


def test_non_json_success_is_transient(serve):
    _, api, _ = serve((200, b"<html>oops</html>", None))
    with pytest.raises(TransientError, match="not JSON"):
        api.call("listing pods", "GET", "/pods")


def test_404_is_an_answer_not_an_error(serve):
    _, api, _ = serve(problem(404, "pod not found"))
    ans = api.call("reading the pod", "GET", "/pods/x")
    assert not ans.found and ans.body is None


def test_list_pods_follows_pagination_when_present(serve):
    from tplab.cloud.runpod.provider import RunPodProvider

    pod = {"id": "a", "name": "tplab-a", "status": "RUNNING", "cost": 1.0}
    s, api, _ = serve((200, {"pods": [pod], "nextCursor": "c2"}, None),
                      (200, {"pods": [{**pod, "id": "b", "name": "tplab-b"},
                                      {**pod, "id": "c", "name": "other"}]}, None))
    p = RunPodProvider(api_key=KEY, api_base_url=s.url)
    p._rest = api
    assert [x.id for x in p.list_pods()] == ["a", "b"]
    assert s.seen[1][1] == "/v2/pods?cursor=c2"


def test_spend_is_billing_never_below_cost_times_seconds():
    from tplab.cloud.runpod.shapes import billing_total
    from tplab.cloud.spend import settle
    recs = [{"podId": "p", "totalAmount": 0.01}, {"podId": "q", "totalAmount": 5.0},
            {"podId": "p", "totalAmount": 0.004}]
    assert billing_total(recs, "p") == pytest.approx(0.014) and billing_total(recs, "x") is None
    r = settle("p", 1.38, 36.2, 0.0146, 0.0146)       # 37 s billed: floor $0.014183
    assert r.source == "billing" and r.actual_usd == 0.0146 and "agrees" in r.note
    r = settle("p", 1.38, 36.2, 0.002, None)           # billing lags behind the pod
    assert r.source == "rate_x_seconds" and r.actual_usd == pytest.approx(0.014183, abs=1e-6)
    assert "below cost x billed seconds" in r.note
    r = settle("p", 1.38, 36.2, None, 1.0)             # no record yet; other pods on the balance
    assert r.source == "rate_x_seconds" and "no record" in r.note and "other pods" in r.note
    r = settle("p", 1.38, 36.2, 0.01418333, None)      # equal up to rounding: the bill
    assert r.source == "billing" and r.actual_usd >= r.rate_x_seconds_usd
    r = settle("p", 1.38, 36.2, 0.0138, None)          # 36 s billed in a 37 s client window
    assert r.source == "billing" and r.actual_usd == 0.0138 and "round trips" in r.note
