"""Vast.ai's rules that its combined OpenAPI document leaves out, as tplab's client keeps them.

Why written down here, once: Vast enforces per-endpoint input limits and a minimum interval
between calls of each endpoint per identity, and publishes both only in the ``x-input-validation``
and ``x-rate-limit`` extensions of its per-endpoint files (vast-ai/docs,
``api-reference/openapi/yaml/<endpoint>.yaml``, commit c624622, 2026-08-07; docs
``api-reference/rate-limits-and-errors.mdx``: "a minimum interval between requests for a given
endpoint and identity", answered 429 without Retry-After). The combined document tplab's mock is
held to drops them. The client fits its requests to the limits (``shapes``) and paces its own
calls by the intervals (``pacing``), so a lab meets no 429; a 429 it meets anyway (another
client on the same key, a limit Vast tightened) teaches the pacer a longer interval.

The mock reads the same rules from its copy of the data file (``tplab.mock.vast_mock.limits``);
the client does not import the mock, so the figures it relies on are these.
"""

from __future__ import annotations

#: create (``PUT /api/v0/asks/{id}/``): the characters an ``env`` variable's value may hold, and
#: all ``NAME=value`` together
ENV_VALUE_MAX = 256
ENV_TOTAL_MAX = 32_768
#: ``args`` + ``args_str`` + ``onstart``, together
ARGS_MAX = 4_096
LABEL_MAX = 256

#: the minimum interval (seconds) between calls of an endpoint, per key, and the wait after a
#: violation where Vast gives one; keys are ``METHOD /route`` as ``pacing.endpoint`` names them
INTERVALS: dict[str, float] = {
    "PUT /api/v0/asks/{id}": 4.5,                  # create_instance
    "GET /api/v0/instances/{id}": 2.0,             # show_instance
    "PUT /api/v0/instances/{id}": 1.0,             # label / manage / stop instance
    "DELETE /api/v0/instances/{id}": 3.0,          # destroy_instance
    "DELETE /api/v0/instances/{id}/ssh/{id}": 2.0,  # detach_ssh (both ids numbers)
    "PUT /api/v0/instances/bid_price/{id}": 5.5,   # change_bid
    "GET /api/v1/instances": 1.0,                  # show_instances
    "GET /api/v0/charges": 1.0,                    # show_charges
    "POST /api/v0/ssh": 1.0,                       # create_ssh_key
    "PUT /api/v0/ssh/{id}": 1.0,                   # update_ssh_key
}
#: search_offers (``POST /api/v0/bundles``): "10 per minute" per IP, a window, not an interval;
#: one client saw it throttled after about 5 quick calls, so tplab lets 5 through a minute
SEARCH_PER_MINUTE = 5
PENALTIES: dict[str, float] = {"PUT /api/v0/asks/{id}": 12.0}
