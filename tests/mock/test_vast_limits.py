"""Vast's rules beside its document (tplab/mock/vast_mock/limits.py): the data they are read from
is Vast's own, the create's input limits are answered as Vast answers them, and the rate limit
is an interval per endpoint and key, a penalty after a create too soon, a window for the search."""

from __future__ import annotations

import json
from pathlib import Path

from tests.mock.vast_helpers import MACHINE, api, create, destroy
from tplab.mock.vast_mock import limits

#: the reference data (tests/mock/documents/README.md says where it is from)
REFERENCE = Path(__file__).resolve().parent / "documents" / "vast-endpoint-limits.json"


def test_the_mock_reads_its_rules_from_vasts_own_data():
    assert json.loads(limits.LIMITS_PATH.read_text()) == json.loads(REFERENCE.read_text())
    rules = limits.rate_rules()
    assert rules["PUT /api/v0/asks/{id}"] == limits.RateRule(4.5, 12.0)
    assert rules["GET /api/v0/instances/{id}"].interval_s == 2.0
    assert rules["DELETE /api/v0/instances/{id}"].interval_s == 3.0
    assert rules["GET /api/v1/instances"].interval_s == 1.0
    assert rules["POST /api/v0/bundles"] == limits.RateRule(per_window=10, window_s=60.0)


def test_a_create_over_vasts_input_limits_is_refused_as_vast_answers_it(vast):
    before = len(vast.pods())
    for extra, needle in (
            ({"env": {"BIG": "x" * 257}}, "env variable BIG is 257 characters; the limit is 256"),
            ({"env": {f"V{i:03d}": "y" * 250 for i in range(140)}}, "the limit is 32768"),
            ({"env": "-e BIG=" + "z" * 300}, "env variable BIG is 300 characters"),
            ({"onstart": "o" * 3000, "args_str": "a" * 1097}, "together; the limit is 4096"),
            ({"image": "i" * 1025}, "image is 1025 characters; the limit is 1024")):
        status, body = create(vast, "tplab-limits", **extra)
        assert (status, body["success"], body["error"]) == (400, False, "invalid_args"), body
        assert body["msg"].startswith("error 400/") and needle in body["msg"], body["msg"]
        assert body["ask_id"] == MACHINE.ask_id
    status, body = create(vast, "l" * 257)
    assert status == 400 and "label is 257 characters; the limit is 256" in body["msg"]
    status, fits = create(vast, "tplab-fits", env={"OK": "x" * 256}, onstart="o" * 4096)
    assert status == 200 and fits["success"], fits
    destroy(vast, fits["new_contract"])
    assert len(vast.pods()) == before + 1


def test_the_rate_limit_is_an_interval_a_penalty_and_a_window():
    now = [0.0]
    limiter = limits.RateLimiter(lambda: 1.0, clock=lambda: now[0])
    create_, show, search = ("PUT /api/v0/asks/{id}", "GET /api/v0/instances/{id}",
                             "POST /api/v0/bundles")
    assert limiter.refuse(show, "k") is None
    now[0] = 1.9
    assert limiter.refuse(show, "k") == "API requests too frequent endpoint threshold=2"
    assert limiter.refuse(show, "other key") is None           # per key
    now[0] = 2.0
    assert limiter.refuse(show, "k") is None                   # counted from the last let in
    assert limiter.refuse(create_, "k") is None
    now[0] = 6.0                                                # 4 s: too soon, 12 s penalty
    assert limiter.refuse(create_, "k") is not None
    now[0] = 17.0
    assert limiter.refuse(create_, "k") is not None            # still shut
    now[0] = 18.1
    assert limiter.refuse(create_, "k") is None
    assert [limiter.refuse(search, "k") for _ in range(10)] == [None] * 10
    assert limiter.refuse(search, "k") == "API requests too frequent endpoint limit=10/minute"
    now[0] = 78.2
    assert limiter.refuse(search, "k") is None
    assert limiter.refuse("GET /api/v0/users/current", "k") is None   # no limit of its own
    doubled = limits.RateLimiter(lambda: 2.0, clock=lambda: now[0])
    assert doubled.refuse(show, "k") is None
    now[0] += 3.9
    assert doubled.refuse(show, "k") == "API requests too frequent endpoint threshold=4"


def test_the_limits_are_on_by_default(vast):
    vast.set_faults(rate_scale=1.0)   # the mock's default (the shared fixture turns it off)
    path = f"/api/v0/instances/{MACHINE.ask_id}/"
    codes = [api(vast, "GET", path)[0] for _ in range(2)]
    assert codes == [200, 429], codes
