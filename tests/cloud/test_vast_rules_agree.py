"""The figures tplab's Vast client paces and sizes its requests by (``service_rules``) are the
ones the mock enforces, read from Vast's own per-endpoint limits (``vast_endpoint_limits.json``):
the client keeps its own copy (it must not import the mock), so a limit changed in one place and
not the other would let the client meet 429s or refusals only a real lab finds."""

from __future__ import annotations

import re

from tplab.cloud.vast import pacing, service_rules
from tplab.mock.vast_mock import limits


def _as_paced(call: str) -> str:
    """A mock call name as the pacer names a real call of it (every path parameter ``{id}``)."""
    return re.sub(r"\{[^}]+\}", "{id}", call)


def test_every_interval_the_client_keeps_is_vasts() -> None:
    vast = {_as_paced(name): rule for name, rule in limits.rate_rules().items()}
    for name, interval in service_rules.INTERVALS.items():
        assert name in vast, f"{name}: no such endpoint in Vast's limits (or not as paced)"
        assert interval == vast[name].interval_s, name
        assert service_rules.PENALTIES.get(name, 0.0) == vast[name].penalty_s, name
    # and a real call's route, as the pacer names it, finds its interval
    assert pacing.endpoint("DELETE", "/api/v0/instances/123/ssh/456/") in service_rules.INTERVALS
    search = vast[pacing.SEARCH]
    assert 0 < service_rules.SEARCH_PER_MINUTE <= search.per_window and search.window_s == 60.0


def test_the_create_limits_the_client_fits_are_vasts() -> None:
    rules = limits.endpoints()["create_instance"]["x-input-validation"]
    told = {"env": service_rules.ENV_VALUE_MAX, "env total": service_rules.ENV_TOTAL_MAX,
            "args": service_rules.ARGS_MAX, "label": service_rules.LABEL_MAX}
    assert told == {"env": rules["env"]["max_length"],
                    "env total": rules["env"]["max_total_length"],
                    "args": rules["args"]["max_length"], "label": rules["label"]["max_length"]}
