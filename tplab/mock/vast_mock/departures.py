"""THE list of where Vast's service departs from its published OpenAPI document, as the mock serves it.

Why one list: the mock is held to Vast's own document (contract.py), and where the service and
the clients that use it (Vast's CLI ``vastai`` first: what its users and its SDK run) expect
something else, the client's expectation is what the service does. Each such place is written
here once, with its source, and nowhere else:

- ``EXCEPTIONS``: schemas of the document replaced, in memory, by what the service takes or
  answers (contract.py applies them to the mock's document; the contract tests give
  schemathesis the published document with these same replacements, nothing else loosened);
- ``BEHAVIOURS``: what the service does that no schema can say (a route's answer today, a
  header, a rate limit, a rental rule), which the mock does too, with where it does it.

What the mock refuses beyond the document's schemas is the other list, ../rejections.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

CREATE_BODY = ("paths", "/api/v0/asks/{id}", "put", "requestBody", "content",
               "application/json", "schema")
SHOW_200 = ("paths", "/api/v0/instances/{id}", "get", "responses", "200", "content",
            "application/json", "schema")
SEARCH_BODY = ("paths", "/api/v0/bundles", "post", "requestBody", "content",
               "application/json", "schema")
CLI = "vastai 1.9.1"
_PORT_MAP = {"type": ["object", "null"],
             "additionalProperties": {"type": "array", "items": {
                 "type": "object", "properties": {"HostIp": {"type": "string"},
                                                  "HostPort": {"type": "string"}}}}}
#: the create options the CLI sends as null when they are not given
CLI_NULLS = ("price", "label", "onstart", "image_login", "jupyter_dir", "template_hash_id",
             "user")
#: one runtype word; the CLI joins several with spaces, and spells "direct" "direc"
_RUNTYPE = r"(ssh|jupyter|args|ssh_proxy|ssh_direct?|jupyter_proxy|jupyter_direct?)"


@dataclass(frozen=True)
class Departure:
    """One place where the service is not what the document says. ``where``: the schema
    replaced (a path into the document; None for a behaviour); ``replace``: the schema that
    replaces it, or a function of the document's schema giving it."""
    what: str
    source: str
    where: tuple[str, ...] | None = None
    replace: dict[str, Any] | Callable[[Any], Any] | None = None

    def applied(self, original: Any) -> Any:
        new = self.replace(copy.deepcopy(original)) if callable(self.replace) else self.replace
        return copy.deepcopy(new)


def _create_options(properties: dict[str, Any]) -> dict[str, Any]:
    out = dict(properties)
    for name in CLI_NULLS:
        out[name] = {"anyOf": [out[name], {"type": "null"}]}
    out["client_id"] = {"type": "string", "description": "\"me\""}
    out["extra"] = {"type": ["string", "null"], "description": "extra docker options"}
    return out


def _with_owner(parameters: list[Any]) -> list[Any]:
    return [*parameters, {"name": "owner", "in": "query", "required": False,
                          "schema": {"type": "string"}, "description": "\"me\""}]


EXCEPTIONS: tuple[Departure, ...] = (
    Departure(
        "instance `ports`: the document says an array of integers; the service answers "
        "Docker's map {\"22/tcp\": [{\"HostIp\", \"HostPort\"}]} (as its own /api/v1/instances "
        "schema says), and clients read ports[\"22/tcp\"][0][\"HostPort\"]",
        "the document's own /api/v1/instances item schema (ports: a map of lists)",
        ("components", "schemas", "Instance", "properties", "ports"), _PORT_MAP),
    Departure(
        "create `env`: the document says a string in Docker flag form (\"-e K=V -p 22:22\"); "
        "the service also takes a dict {\"K\": \"V\", \"-p 22:22\": \"1\"}, which clients send",
        f"{CLI}, vastai/api/instances.py build_create_instance_payload (env a dict)",
        CREATE_BODY + ("properties", "env"),
        {"type": ["string", "object"], "additionalProperties": {"type": "string"}}),
    Departure(
        "show instance: `instances` is null once the instance is gone (destroyed or never "
        "existed); the document's schema has no null",
        f"{CLI}, vastai/api/instances.py show_instance (`if row is None`)",
        SHOW_200 + ("properties", "instances"),
        {"anyOf": [{"$ref": "#/components/schemas/Instance"}, {"type": "null"}]}),
    Departure(
        "search `order`: the document puts minItems/maxItems 2 on the list of orderings instead "
        "of on each [field, direction] pair, so the usual [[\"dph_total\", \"asc\"]] would be "
        "refused; each pair has two items, the list any number",
        f"{CLI}, cli/commands/offers.py search__offers (order [[\"score\", \"desc\"]])",
        SEARCH_BODY + ("properties", "order"),
        {"type": "array", "items": {"type": "array", "items": {"type": "string"},
                                    "minItems": 2, "maxItems": 2}}),
    Departure(
        "search `type`: the document's enum is ondemand, bid, reserved; the CLI's default is "
        "\"on-demand\" (an on-demand search)",
        f"{CLI}, cli/commands/offers.py search__offers (--type default \"on-demand\")",
        SEARCH_BODY + ("properties", "type"),
        lambda s: {**s, "enum": [*s["enum"], "on-demand"]}),
    Departure(
        "instance `extra_env`: the show schema says a list of strings; the service answers "
        "[name, value] pairs (the v1 list's own schema), which the CLI reads as pairs",
        f"{CLI}, vastai/api/instances.py show_instance and show_instances "
        "({env_var[0]: env_var[1] for env_var in row['extra_env']})",
        ("components", "schemas", "Instance", "properties", "extra_env"),
        {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}),
    Departure(
        "show instance takes `owner` in the query (\"me\"), which the document does not list",
        f"{CLI}, vastai/api/instances.py show_instance (GET /instances/{{id}}/?owner=me)",
        ("paths", "/api/v0/instances/{id}", "get", "parameters"), _with_owner),
    Departure(
        "create `runtype`: one word of the document's enum, or several joined by spaces, and "
        "the CLI's --ssh --direct sends \"ssh_direc ssh_proxy\" (sic)",
        f"{CLI}, vastai/api/instances.py resolve_runtype",
        CREATE_BODY + ("properties", "runtype"),
        {"type": "string", "pattern": f"^{_RUNTYPE}( {_RUNTYPE})*$"}),
    Departure(
        "create body: the CLI sends every option it has, null when not given (price null: an "
        "on-demand rental; label, onstart, image_login, jupyter_dir, template_hash_id, user), "
        "plus `client_id` \"me\" and `extra`, neither in the document",
        f"{CLI}, vastai/api/instances.py build_create_instance_payload",
        CREATE_BODY + ("properties",), _create_options),
)

BEHAVIOURS: tuple[Departure, ...] = (
    Departure(
        "search filters may hold numbers as text: the CLI's \"num_gpus=2\" is {\"num_gpus\": "
        "{\"eq\": \"2\"}} and the service compares it as a number; mock: offers.matches",
        f"{CLI}, vastai/api/query.py parse_query (values kept as text)"),
    Departure(
        "answers carry Content-Type exactly `application/json` (no charset): the CLI's offer "
        "search prints \"invalid return Content-Type: ...\" and returns nothing otherwise; "
        "mock: routes.json_answer",
        f"{CLI}, cli/commands/offers.py search__offers "
        "(r.headers.get('Content-Type') != 'application/json')"),
    Departure(
        "GET /api/v0/instances/ (the old list; not in the document) answers 410 {\"success\": "
        "false, \"error\": \"deprecated_endpoint\", \"msg\": \"/api/v0/instances/ is deprecated. "
        "Use /api/v1/instances/ instead.\"}: a client reading it sees no instances while they "
        "bill. The list is GET /api/v1/instances/ (at most 25 a page, next_token -> "
        "after_token); GET /api/v0/instances/{id}/ still answers; mock: routes.deprecated_list",
        "SkyPilot issue #10517 (2026-08-20); swm-gpu/swm issue #13 (410 Gone); vast-cli commit "
        f"9f04c5f; {CLI}, vastai/api/instances.py show_instances (v1, next_token)"),
    Departure(
        "429 {\"detail\": \"API requests too frequent endpoint threshold=<s>\"} per endpoint and "
        "per key (a minimum interval between calls let through; create 4.5 s with a 12 s "
        "penalty, show instance 2 s, destroy 3 s, the v1 list 1 s, the offer search 10 a "
        "minute), with no Retry-After header; the CLI retries 429/502/503/504 after 0.15 s, "
        "then x1.5, 3 tries in all; mock: limits.RateLimiter from vast_endpoint_limits.json, "
        "on by default (switch rate_scale), http_429",
        "x-rate-limit of the per-endpoint files in vast-ai/docs api-reference/openapi/yaml "
        "(dropped by the combined document); docs api-reference/rate-limits-and-errors.mdx "
        f"(2026-01-27); create_instance.yaml's 429 example; {CLI}, vastai/api/client.py "
        "retry_delay, _RETRYABLE_STATUS"),
    Departure(
        "input limits the combined document drops: a create's env at most 256 characters a "
        "variable and 32,768 in all, args + args_str + onstart 4,096 together (not the 4,048 "
        "onstart alone the document's prose says), label 256, image 1,024; answered 400 "
        "invalid_args \"error 400/<n>: Invalid args: ...\"; mock: limits.create_problem",
        "x-input-validation of vast-ai/docs api-reference/openapi/yaml/create_instance.yaml, "
        "label_instance.yaml, change_bid.yaml"),
    Departure(
        "a key Vast does not know (wrong or revoked) is answered 404 {\"error\": \"auth_error\"}, "
        "not 401; a deleted key 401 \"Invalid user key\"; an expired 2FA session 404 \"Session "
        "expired. Please log in again.\"; an account with 2FA 401 on most reads: a 404 is not "
        "\"not found\" until its error says so; mock: routes.refusal, switch key_refused",
        "jhammant/AIonDemandCluster PR #1 and aiod/onboard.py (a live probe, 2026-06); "
        "vast-cli vastai/cli/main.py"),
    Departure(
        "offer search without `limit` answers the first 64 offers, without `order` in the "
        "server's own order (not by price); mock: offers.search (score, highest first), its "
        "catalogue 209 offers, 181 of them 2x RTX 4090",
        "gpuhunt issue #142; vast-cli vastai/api/offers.py; dstack vastai/compute.py"),
    Departure(
        "states the document does not list: actual_status `created` with \"OCI runtime create "
        "failed\" in status_msg (a container that never starts), `restarting`; after a destroy "
        "a show (and the list) may answer a record whose actual_status / intended_status is "
        "`destroyed` (Vast's CLI also takes `terminated` as gone); intended_status or next_state "
        "`stopped` while an instance comes up means it failed; an outbid may read cur_state = "
        "intended_status = next_state = stopped; mock: state._boot, switches oci_error, "
        "restarting_s, destroyed_records, stopped_while_loading, outbid_as_stopped",
        "dstack vastai/compute.py (update_provisioning_data: OCI); dstack PR #4037; SkyPilot "
        "sky/provision/vast/instance.py; vast-cli vast.py; vast-ai/vast-claude-plugin "
        "skills/vastai/SKILL.md"),
    Departure(
        "destroy answers 200 {\"success\": true} when it took it, 404 no_such_instance when "
        "the instance is not there; a 200 with success false is a failure, not a destroy "
        "(dstack reads it so); a destroy taken may leave the instance running a while, its "
        "record's intended_status `destroyed` while actual_status is still `running` (what "
        "was asked is not what is); 429s come in bursts on it as on any endpoint; mock: "
        "handlers.destroy_instance, state.destroy, switches destroy_refused_n, "
        "destroy_lingers, destroy_intent_shown, http_429",
        "vast-ai/docs yaml/destroy_instance.yaml; dstack vastai/api_client.py "
        "(terminate_instance); SkyPilot sky/provision/vast/instance.py (actual_status)"),
    Departure(
        "an offer can move between search and create: 410 no_such_ask \"... is no longer "
        "available\", 404 no_such_ask \"... is not available\", 400 invalid_price \"... does "
        "not match a fresh search quote\", each with ask_id; mock: handlers.create_instance, "
        "switch offer_taken",
        "vast-ai/docs api-reference/openapi/yaml/create_instance.yaml (responses)"),
    Departure(
        "the account's dollars left are `credit` (Vast's own tools read it as the balance); "
        "the documented `balance` is not that (a community script saw it near -$4): the mock "
        "answers balance as minus what was charged; mock: answers.user_view",
        "vast-ai/vast-claude-plugin commands/cost.md; vast-ai/docs yaml/show_user.yaml"),
    Departure(
        "a create without `price` (or with price null) rents ON DEMAND at the offer's "
        "dph_total, also after a bid search, and the answer ({\"success\": true, "
        "\"new_contract\"}) does not say which rental it made: only the instance's `is_bid` "
        "and `dph_base` do; mock: handlers.create_instance",
        f"vast-cli PR #403 (2026-05-19); {CLI}, build_create_instance_payload (price null "
        "without --bid_price)"),
    Departure(
        "a bid below the offer's minimum still makes the instance, stopped, and answers "
        "{\"success\": false, \"error\": \"bid_failed\", \"new_contract\": <id>}: it bills "
        "storage until destroyed; mock: handlers.create_instance, fault switch failed_bid_n",
        "dstack PRs #4036, #4037 (2026-07-16)"),
    Departure(
        "CONTAINER_API_KEY, CONTAINER_ID (and the create's env) are in the container's "
        "environment (its start, onstart) but not in an SSH session's, unless exported to "
        "/etc/environment; PUBLIC_IPADDR is set once and not refreshed; mock: "
        "state.VastState.ssh_env, <sandbox>/etc/environment read at each login",
        "docs guides/instances/docker-environment.mdx"),
    Departure(
        "SSH: the proxy (ssh_host, ssh_port) works on every instance; direct is public_ipaddr "
        "+ ports[\"22/tcp\"][0][\"HostPort\"] and needs the offer's direct_port_count >= 1, "
        "and on some hosts it does not answer at all (SkyPilot moved to the proxy for it); "
        "ports may be null while ssh_host/ssh_port are set; public_ipaddr may carry whitespace; "
        "mock: answers.instance_view, switches no_direct_ports, direct_port_blocked, "
        "padded_ipaddr",
        "docs guides/instances/connect/ssh.mdx; SkyPilot sky/provision/vast/instance.py "
        "(get_cluster_info), issue #6449; dstack vastai/compute.py (.strip())"),
)
