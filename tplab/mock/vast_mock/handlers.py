"""What each route of the mock Vast cloud does, once routes.py has checked the request.

Each handler takes the state, the typed path and query parameters, the JSON body (already held to
the document) and the caller's instance id when it holds a per-instance key (else None), and
returns (status, body) or raises ``VastError`` (Vast's error JSON).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from tplab.mock.vast_mock import answers, limits
from tplab.mock.vast_mock.catalog import OLD_DRIVER_CUDA, find_machine, market, matches, search
from tplab.mock.vast_mock.state import SshKey, VastError, VastState, iso_now

#: the runtypes of an SSH instance; the CLI sends several, space-separated ("ssh_direc ssh_proxy")
SSH_RUNTYPES = ("ssh", "ssh_direct", "ssh_direc", "ssh_proxy")
#: how Vast answers a create whose offer moved (the ``offer_taken`` switch): status -> error,
#: msg ("{ask}" filled in); 410 and 404 take the offer away, 400 raises its price
OFFER_MOVED = {
    410: ("no_such_ask", "error 410/3907: no_such_ask Instance type {ask} is no longer "
                         "available."),
    404: ("no_such_ask", "error 404/3603: no_such_ask Instance type by id {ask} is not "
                         "available."),
    400: ("invalid_price", "error 400/3480: invalid_price: the create does not match a fresh "
                           "search quote: search again, then retry"),
}
#: how much a stale quote's offer costs after it moved
REPRICE = 1.1
#: what ``calls`` counts the list's pages after the first under (an after_token was sent)
LATER_PAGES = "GET /api/v1/instances (after_token)"
Result = tuple[int, Any]


def _public_key(text: str) -> str:
    import asyncssh

    try:
        asyncssh.import_public_key(text.strip())
    except (ValueError, asyncssh.KeyImportError) as exc:
        raise VastError(400, "invalid_args", f"ssh_key is not an SSH public key: {exc}") from exc
    return text.strip()


def _env(raw: Any) -> dict[str, str]:
    """``env`` as Docker flags (``"-e K=V -p 22:22"``) or a dict (``{"K": "V", "-p 22:22":
    "1"}``): the variables; the port flags are the mock's business (22 is always mapped)."""
    if isinstance(raw, dict):
        return {k: str(v) for k, v in raw.items() if not k.startswith("-")}
    out: dict[str, str] = {}
    try:
        words = shlex.split(raw or "")
    except ValueError as exc:
        raise VastError(400, "invalid_args", f"env is not valid Docker flags: {exc}") from exc
    for flag, value in zip(words, words[1:]):
        if flag == "-e" and "=" in value:
            name, _, val = value.partition("=")
            out[name] = val
    return out


def _filters(text: str | None, error: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError as exc:
        raise VastError(400, error, f"select_filters is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise VastError(400, error, "select_filters must be a JSON object")
    return value


# ---- offers and instances --------------------------------------------------------------------
async def search_offers(state: VastState, p: dict[str, Any], body: Any, own: int | None) -> Result:
    offers = search(body, no_bid=state.faults.no_bid_offers,
                    no_ondemand=state.faults.no_ondemand_offers,
                    machines=market(state.taken, state.repriced))
    if state.faults.cuda_unknown:  # old-driver hosts that do not say what CUDA they run
        offers = [{k: v for k, v in o.items() if k != "cuda_max_good"}
                  if o.get("cuda_max_good") == OLD_DRIVER_CUDA else o for o in offers]
    if state.faults.no_direct_ports:
        wanted = body.get("direct_port_count")
        offers = [o for o in ({**o, "direct_port_count": 0} for o in offers)
                  if wanted is None or matches(o, "direct_port_count", wanted)]
    return 200, {"offers": offers}


async def create_instance(state: VastState, p: dict[str, Any], body: Any,
                          own: int | None) -> Result:
    """Rents the offer: interruptible at ``price`` (per machine), else on demand at the offer's
    price. A bid below the offer's minimum still makes the instance, stopped, and answers
    ``bid_failed`` with its ``new_contract`` (contract.BEHAVIOURS)."""
    ask = p["id"]
    if ask in state.taken:
        raise VastError(410, "no_such_ask", OFFER_MOVED[410][1].format(ask=ask), ask_id=ask)
    machine = find_machine(ask, market(state.taken, state.repriced))
    if machine is None:
        raise VastError(404, "no_such_ask", OFFER_MOVED[404][1].format(ask=ask), ask_id=ask)
    if state.faults.take_n("create_invalid_args"):
        raise VastError(400, "invalid_args", "onstart: the value does not pass validation "
                        "(an invalid character).", ask_id=ask)
    runtype = body.get("runtype") or "ssh"
    if not set(runtype.split()) <= set(SSH_RUNTYPES):
        raise VastError(400, "invalid_args", f"runtype {runtype!r}: the mock runs SSH instances "
                        f"only ({', '.join(SSH_RUNTYPES)}).", ask_id=ask)
    env = _env(body.get("env"))
    problem = limits.create_problem(body, env)
    if problem:
        raise VastError(400, "invalid_args", problem, ask_id=ask)
    onstart = body.get("onstart") or ""
    price = body.get("price")
    faults = state.faults
    if faults.offer_taken:
        status = faults.offer_taken.pop(0)
        if status == 400:
            state.repriced[ask] = state.repriced.get(ask, 1.0) * REPRICE
        else:
            state.taken.add(ask)
        error, msg = OFFER_MOVED[status]
        raise VastError(status, error, msg.format(ask=ask), ask_id=ask)
    if (price is not None and faults.no_bid_offers) or (price is None
                                                        and faults.no_ondemand_offers):
        raise VastError(410, "no_such_ask", f"Offer {ask} is no longer available.", ask_id=ask)
    if state.credit() <= 0:
        raise VastError(403, "insufficient_credit", "Your credit is used up: add credit.",
                        ask_id=ask)
    if price is not None and faults.take_bid_ignored():
        price = None  # rented on demand, and the answer below does not say so
    below = price is not None and price < machine.min_bid - 1e-9
    failed_bid = price is not None and (below or faults.take_failed_bid())
    inst = state.create(machine, price=price, image=body["image"], label=body.get("label"),
                        disk_gb=float(body.get("disk") or 10.0), onstart=onstart,
                        runtype=runtype, env=env,
                        stopped=failed_bid or body.get("target_state") == "stopped")
    if failed_bid:
        inst.status_msg = ("Your bid was not accepted: below the minimum bid" if below
                           else "Your bid was not accepted: outbid")
        return 200, {"success": False, "error": "bid_failed", "new_contract": inst.id,
                     "msg": f"Your bid was not accepted (the minimum is ${machine.min_bid}/hr); "
                            f"instance {inst.id} was created stopped."}
    return 200, {"success": True, "new_contract": inst.id, "instance_api_key": inst.api_key}


async def show_instance(state: VastState, p: dict[str, Any], body: Any, own: int | None) -> Result:
    found = await state.read(p["id"]) or state.shown_destroyed(p["id"])
    return 200, {"instances": answers.instance_view(state, found[0]) if found else None}


async def manage_instance(state: VastState, p: dict[str, Any], body: Any,
                          own: int | None) -> Result:
    inst = state.get(p["id"])
    problem = limits.label_problem(body)
    if problem:
        raise VastError(400, "invalid_args", problem)
    if "label" in body:
        inst.label = body["label"]
    if body.get("state") == "stopped":
        await state.pause(inst, "user", "Instance stopped by its renter")
    elif body.get("state") == "running":
        await state.resume(inst, "Instance started by its renter")
    return 200, {"success": True}


async def destroy_instance(state: VastState, p: dict[str, Any], body: Any,
                           own: int | None) -> Result:
    state.get(p["id"])  # 404 no_such_instance when it is not there
    if state.faults.take_n("destroy_refused_n"):
        return 200, {"success": False, "error": "destroy_failed",
                     "msg": f"Instance {p['id']} could not be destroyed right now; try again."}
    await state.destroy(p["id"])
    return 200, {"success": True, "msg": f"Instance {p['id']} destroyed."}


async def list_instances(state: VastState, p: dict[str, Any], body: Any,
                         own: int | None) -> Result:
    filters = _filters(p.get("select_filters"), "invalid_request")
    limit = p.get("limit", 25)
    if limit < 1:
        raise VastError(400, "invalid_request", "limit must be between 1 and 25")
    after = p.get("after_token")
    if after is not None and not after.isdigit():
        raise VastError(400, "invalid_token", "after_token is not one this API gave out")
    if after is not None:
        state.calls[LATER_PAGES] += 1
    shown = [answers.instance_view(state, i)
             for i in [*await state.read(), *state.shown_destroyed()]]
    found = [v for v in shown if all(matches(v, k, c) for k, c in filters.items())]
    found.sort(key=lambda v: v["id"])
    rest = [v for v in found if after is None or v["id"] > int(after)]
    page = rest[:limit]
    more = len(rest) > len(page)
    return 200, {"success": True, "instances_found": len(page), "total_instances": len(found),
                 "next_token": str(page[-1]["id"]) if more else None, "instances": page}


async def change_bid(state: VastState, p: dict[str, Any], body: Any, own: int | None) -> Result:
    try:
        inst = state.get(p["id"])
    except VastError as exc:
        raise VastError(404, "no_such_instance", exc.msg) from exc
    if not inst.is_bid:
        raise VastError(400, "invalid_args", f"Instance {inst.id} is on demand: it has no bid.")
    problem = limits.bid_problem(body["price"], inst.machine.num_gpus)
    if problem:
        raise VastError(400, "invalid_args", problem)
    if body["price"] < inst.machine.min_bid - 1e-9:
        raise VastError(400, "invalid_args", f"A bid of ${body['price']}/hr is below the minimum "
                        f"of ${inst.machine.min_bid}/hr.")
    inst.price = float(body["price"])
    return 200, {"success": True}


# ---- SSH keys ---------------------------------------------------------------------------------
async def attach_ssh(state: VastState, p: dict[str, Any], body: Any, own: int | None) -> Result:
    inst = state.get(p["id"])
    if not body.get("ssh_key"):
        raise VastError(400, "invalid_args", "ssh_key is required.")
    key = _public_key(body["ssh_key"])
    if all(k.key != key for k in inst.keys):
        inst.keys.append(SshKey(state.new_key_id(), key))
        state.write_keys(inst)
    return 200, {"success": True, "msg": f"SSH key attached to instance {inst.id}."}


async def show_instance_ssh(state: VastState, p: dict[str, Any], body: Any,
                            own: int | None) -> Result:
    inst = state.get(p["id"])
    return 200, {"success": True, "ssh_keys": "\n".join(k.key for k in inst.keys)}


async def detach_ssh(state: VastState, p: dict[str, Any], body: Any, own: int | None) -> Result:
    inst = state.get(p["id"])
    kept = [k for k in inst.keys if k.id != p["ssh_key_id"]]
    if len(kept) == len(inst.keys):
        raise VastError(404, "no_such_ssh_key", f"Key {p['ssh_key_id']} is not on this instance.")
    inst.keys = kept
    state.write_keys(inst)
    return 200, {"success": True, "msg": "SSH key detached."}


def _key_row(state: VastState, key: SshKey, field: str) -> dict[str, Any]:
    return {"id": key.id, "user_id": state.user_id, field: key.key,
            "created_at": key.created_at, "deleted_at": None}


async def create_ssh_key(state: VastState, p: dict[str, Any], body: Any,
                         own: int | None) -> Result:
    if not body.get("ssh_key", "").strip():
        raise VastError(400, "no_ssh_key", "ssh_key is required.")
    try:
        text = _public_key(body["ssh_key"])
    except VastError as exc:
        raise VastError(400, "no_ssh_key", exc.msg) from exc
    key = SshKey(state.new_key_id(), text, iso_now())
    state.account_keys[key.id] = key
    return 200, {"success": True, "key": _key_row(state, key, "public_key")}


async def list_ssh_keys(state: VastState, p: dict[str, Any], body: Any, own: int | None) -> Result:
    return 200, [_key_row(state, k, "key") for k in state.account_keys.values()]


async def update_ssh_key(state: VastState, p: dict[str, Any], body: Any,
                         own: int | None) -> Result:
    key = state.account_keys.get(p["id"])
    if key is None:
        raise VastError(400, "no_such_ssh_key", f"SSH key {p['id']} does not exist.")
    key.key = _public_key(body["ssh_key"])
    return 200, {"success": True, "key": _key_row(state, key, "public_key")}


async def delete_ssh_key(state: VastState, p: dict[str, Any], body: Any,
                         own: int | None) -> Result:
    if state.account_keys.pop(p["id"], None) is None:
        raise VastError(400, "no_such_ssh_key", f"SSH key {p['id']} does not exist.")
    return 200, {"success": True}


# ---- account ----------------------------------------------------------------------------------
async def show_user(state: VastState, p: dict[str, Any], body: Any, own: int | None) -> Result:
    return 200, answers.user_view(state)


async def show_charges(state: VastState, p: dict[str, Any], body: Any, own: int | None) -> Result:
    """Filters: ``{"day": {"gte": <epoch s>, "lte": <epoch s>}}`` (either bound optional);
    paged by ``limit``/``after_token`` (an offset), newest first unless ``latest_first=false``."""
    filters = _filters(p.get("select_filters"), "invalid_args")
    day = filters.get("day") or filters.get("when") or {}
    if not isinstance(day, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                            for v in day.values()):
        raise VastError(400, "invalid_args", "select_filters.day wants {\"gte\": epoch, \"lte\": "
                        "epoch} in seconds")
    rows = answers.charge_rows(state, day.get("gte"), day.get("lte"))
    if p.get("latest_first", True):
        rows.reverse()
    after = p.get("after_token")
    if after is not None and not after.isdigit():
        raise VastError(400, "invalid_args", "after_token is not one this API gave out")
    start = int(after or 0)
    limit = p.get("limit", 100)
    page = rows[start:start + limit]
    more = start + limit < len(rows)
    return 200, {"success": True, "count": len(page), "total": len(rows),
                 "next_token": str(start + limit) if more else None, "results": page}
