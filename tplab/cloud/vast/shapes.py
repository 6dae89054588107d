"""Vast.ai's shapes and tplab's records: the offer search, the create body, an instance as
``PodInfo``, the charges for one instance.

Why apart from the provider: pure functions of Vast's documented shapes (``vast-openapi.json``
and what the service answers, ``tplab.mock.vast_mock.departures``), readable and testable without a network.

- GPU names: Vast writes "RTX 4090", "H100 SXM"; tplab's default is RunPod's id "NVIDIA GeForce
  RTX 4090", so a leading "NVIDIA" and "GeForce" are dropped (``vast_gpu_name``).
- Search (``POST /api/v0/bundles``): interruptible offers are ``type: "bid"``; filters as
  ``{"field": {"op": value}}``; asked in price order (``order: [["dph_total", "asc"]]``, as
  every public client sends one: without it Vast answers in its own order) with a ``limit``
  large enough to see past the cheap hosts that cannot run the image (without one Vast answers
  64); sorted here again by tplab's own price.
- Create (``PUT /api/v0/asks/{offer}``): ``runtype: ssh_direct``, ``price`` = the bid per
  machine, ``label`` = tplab's pod name, ``onstart`` (with any args, at most 4,096
  characters) keeps the instance's id and key for SSH sessions (``self_end.ENV_FILE``) and
  starts the boot guard, whose zip travels in ``env`` (a dict, as Vast's own CLI sends it), cut
  into variables of at most 256 characters (``service_rules``: Vast refuses a longer one).
- An instance's state (``actual_status``, ``intended_status``, ``next_state``, ``status_msg``)
  in tplab's words (``state_of``): running is RUNNING, unless Vast means to stop it (its
  intended or next state ``stopped``: an interruption, INTERRUPTED); stopped or frozen is
  INTERRUPTED (outbid, or out of credit: paused, not gone, still billing storage; tplab never
  stops its own instances); an instance still coming up whose intended or next state is
  ``stopped`` failed (ERROR, with Vast's reason), as does one ``created`` whose status_msg
  says "OCI runtime create failed" (its container never starts); ``restarting`` is waited
  for (STARTING); exited is EXITED; unknown and offline never reach running (ERROR); a record
  whose ``actual_status`` says ``destroyed`` or ``terminated`` (Vast's CLI reads both as gone) is
  TERMINATED, as is no record at all (GONE). What was asked is not what is: a record whose
  ``intended_status`` is ``destroyed`` while ``actual_status`` is still ``running`` is a running
  instance (a destroy accepted and not yet done), never gone.
- SSH: direct, ``public_ipaddr`` (stripped: it may carry whitespace) + ``ports["22/tcp"][0]
  ["HostPort"]`` (needs the machine's direct ports: the search asks for ``direct_port_count >=
  1``), with the proxy (``ssh_host`` + ``ssh_port``) as its fallback when direct does not
  answer; only the proxy when ``ports`` is null.
- Which rental an instance is (``rental_problem``): ``is_bid`` and ``dph_base``, read back after
  every interruptible create, because the create's answer does not say.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from tplab.cloud import images
from tplab.cloud.base import INTERRUPTED, PodInfo, PodSpec, SshEndpoint
from tplab.cloud.vast.self_end import ENV_FILE, ID_VAR, KEY_VAR
from tplab.cloud.vast.service_rules import ARGS_MAX, ENV_TOTAL_MAX, ENV_VALUE_MAX

#: an image with python3 and torch; Vast adds its own sshd for runtype ssh_direct (the
#: provider passes the image chosen for the GPU, tplab.cloud.image_fit.choose_image)
DEFAULT_IMAGE = images.PYTORCH_24_RUNTIME.name
#: the environment variables the boot guard's zip travels in, in order: ``TPLAB_GUARD_000`` ...
#: (Vast takes at most ENV_VALUE_MAX characters a variable; the zip is some 13,000)
PAYLOAD_PREFIX = "TPLAB_GUARD_"
#: fields of an instance never kept in PodInfo.raw (env and onstart hold what tplab passed)
_NOT_KEPT = ("extra_env", "onstart", "jupyter_token", "instance_api_key", "env")
_STARTING = {None, "", "loading", "created", "scheduling", "rebooting", "restarting",
             "starting"}
_GONE = ("destroyed", "terminated")
#: Vast's words for a container that will never start
OCI_FAILED = "oci runtime create failed"


def vast_gpu_name(gpu_type: str) -> str:
    """'NVIDIA GeForce RTX 4090' -> 'RTX 4090'; 'NVIDIA H100 SXM' -> 'H100 SXM'."""
    name = re.sub(r"^\s*nvidia\s+", "", gpu_type.strip(), flags=re.I)
    return re.sub(r"^geforce\s+", "", name, flags=re.I).strip()


def search_body(gpu_type: str, gpu_count: int, kind: str = "bid",
                limit: int = 1000) -> dict[str, Any]:
    """The offer search for ``gpu_count`` x ``gpu_type`` (``kind``: "bid" or "ondemand"),
    cheapest first."""
    return {"gpu_name": {"in": [vast_gpu_name(gpu_type)]}, "num_gpus": {"in": [int(gpu_count)]},
            "rentable": {"eq": True}, "verified": {"eq": True},
            "direct_port_count": {"gte": 1}, "type": kind, "order": [["dph_total", "asc"]],
            "limit": int(limit)}


def offer_price(offer: dict[str, Any], kind: str, disk_gb: float) -> float | None:
    """What the offer costs per hour for the whole machine: the minimum bid (interruptible) or
    ``dph_total`` (on-demand), plus the disk's storage (``storage_cost`` is $/GB/month)."""
    base = _float(offer.get("min_bid") if kind == "bid" else offer.get("dph_total"))
    if base is None:
        return None
    storage = (_float(offer.get("storage_cost")) or 0.0) * disk_gb / (30 * 24)
    return round(base + storage, 6)


def cheapest(offers: Iterable[Any], kind: str, disk_gb: float) -> tuple[dict, float] | None:
    """The cheapest offer and its hourly price, or None."""
    priced: list[tuple[dict, float]] = []
    for offer in offers:
        price = offer_price(offer, kind, disk_gb) if isinstance(offer, dict) else None
        if price is not None and offer.get("id") is not None:
            priced.append((offer, price))
    return min(priced, key=lambda op: op[1]) if priced else None


def payload_env(payload_b64: str) -> dict[str, str]:
    """The guard's zip (base64) cut into variables Vast takes: ``TPLAB_GUARD_000=...`` and on,
    each ``NAME=value`` at most ``ENV_VALUE_MAX`` characters (so it fits whether Vast counts the
    value or the whole assignment)."""
    size = ENV_VALUE_MAX - len(PAYLOAD_PREFIX) - 4
    chunks = [payload_b64[i:i + size] for i in range(0, len(payload_b64), size)]
    if len(chunks) > 1000:
        raise ValueError(f"the boot guard's zip needs {len(chunks)} variables; at most 1000")
    return {f"{PAYLOAD_PREFIX}{i:03d}": chunk for i, chunk in enumerate(chunks)}


def onstart(spec: PodSpec) -> str:
    """The instance's on-start script: keep its id and key for SSH sessions (mode 600, on the
    instance only), then join the boot guard's zip from its variables (``payload_env``), unpack
    it and start it: the guard runs from the container's first second."""
    d = ENV_FILE.rsplit("/", 1)[0]
    script = (f'umask 077; mkdir -p "{d}"; '
              f'printf "export {ID_VAR}=%s\\nexport {KEY_VAR}=%s\\n" "${ID_VAR}" "${KEY_VAR}" '
              f'> "{ENV_FILE}"')
    if spec.boot is not None:
        script += (f"; env | LC_ALL=C sort | sed -n 's/^{PAYLOAD_PREFIX}[0-9]*=//p' | "
                   f'tr -d "\\n" | base64 -d > "{spec.boot.path}" && {spec.boot.command}')
    if len(script) > ARGS_MAX:
        raise ValueError(f"the onstart script is {len(script)} characters, over Vast's "
                         f"{ARGS_MAX} for args and onstart together")
    return script


def create_body(spec: PodSpec, price_per_machine: float | None) -> dict[str, Any]:
    """The ``PUT /api/v0/asks/{offer}`` body: an interruptible instance at this bid (``None``:
    on-demand, which only a user's explicit ``--on-demand`` asks for). Vast rents a create
    without ``price`` on demand, silently, so an interruptible spec without a bid is refused
    here rather than sent. Every field fits Vast's input limits (``service_rules``), or the
    create is refused here, saying which."""
    if spec.spot and price_per_machine is None:
        raise ValueError("an interruptible instance needs its bid: a create without a price "
                         "rents on demand")
    env = {"PUBLIC_KEY": spec.public_key.strip(), **spec.env}
    if spec.boot is not None:
        env.update(payload_env(spec.boot.payload_b64))
    for name, value in env.items():
        if len(value) > ENV_VALUE_MAX:
            raise ValueError(f"the variable {name} is {len(value)} characters, over Vast's "
                             f"{ENV_VALUE_MAX}")
    total = sum(len(f"{k}={v}") for k, v in env.items())
    if total > ENV_TOTAL_MAX:
        raise ValueError(f"the instance's variables are {total} characters, over Vast's "
                         f"{ENV_TOTAL_MAX}")
    body: dict[str, Any] = {
        "image": spec.image or DEFAULT_IMAGE, "disk": float(spec.container_disk_gb),
        "label": spec.name, "runtype": "ssh_direct", "target_state": "running",
        "cancel_unavail": True, "onstart": onstart(spec), "env": env}
    if price_per_machine is not None:
        body["price"] = round(max(0.001, price_per_machine), 6)
    return body


#: how far above the bid an interruptible instance's rate may read (Vast's rounding)
RATE_TOLERANCE = (0.01, 0.001)   # 1 %, plus a tenth of a cent per hour


def rental_problem(inst: dict[str, Any], bid_per_machine: float) -> str | None:
    """What Vast.ai did instead of the interruptible rental at ``bid_per_machine`` ($/h, what
    the create's ``price`` said), as the end of a sentence, or None when it did that. Vast's create answer never says which rental
    it made (a create without ``price`` rents on demand at the offer's price, silently); the
    instance does: ``is_bid`` (created by bidding) and ``dph_base`` (its compute rate: the bid
    for an interruptible instance). A rate below the bid costs less and is accepted."""
    rate = _float(inst.get("dph_base"))
    if inst.get("is_bid") is not True:
        at = f" at ${rate:.3f}/h" if rate is not None else ""
        return f"rented it on demand{at}"
    if rate is None:
        return "showed it without a rate (dph_base), so its price could not be confirmed"
    share, cents = RATE_TOLERANCE
    if rate > bid_per_machine * (1 + share) + cents:
        return f"rented it at ${rate:.3f}/h, above the bid"
    return None


def ssh_endpoint(inst: dict[str, Any]) -> SshEndpoint | None:
    """Direct SSH (``public_ipaddr`` + the host port mapped to 22/tcp, which needs the machine's
    direct ports), else Vast's SSH proxy (``ssh_host`` + ``ssh_port``, on every instance);
    None until one exists."""
    return _direct_ssh(inst) or _proxy_ssh(inst)


def ssh_fallback(inst: dict[str, Any]) -> SshEndpoint | None:
    """The proxy, when direct SSH is the first way (tried when direct does not answer)."""
    return _proxy_ssh(inst) if _direct_ssh(inst) is not None else None


def _direct_ssh(inst: dict[str, Any]) -> SshEndpoint | None:
    host = str(inst.get("public_ipaddr") or "").strip()
    ports = inst.get("ports")
    mapped = ports.get("22/tcp") if isinstance(ports, dict) else None
    if not host or not isinstance(mapped, list) or not mapped:
        return None
    first = mapped[0] if isinstance(mapped[0], dict) else {}
    try:
        port = int(first.get("HostPort") or 0)
    except (TypeError, ValueError):
        return None
    return SshEndpoint(host=host, port=port, user="root") if port > 0 else None


def _proxy_ssh(inst: dict[str, Any]) -> SshEndpoint | None:
    """The proxy only once the instance runs (before that its port leads nowhere yet)."""
    host = str(inst.get("ssh_host") or "").strip()
    try:
        port = int(inst.get("ssh_port") or 0)
    except (TypeError, ValueError):
        return None
    running = str(inst.get("actual_status") or "").lower() == "running"
    return SshEndpoint(host=host, port=port, user="root") if host and port > 0 and running \
        else None


def state_of(inst: dict[str, Any]) -> tuple[str, str]:
    """tplab's state for an instance and Vast's reason, one clause (see the module docstring)."""
    actual = inst.get("actual_status")
    actual = actual.lower() if isinstance(actual, str) else actual
    intended = str(inst.get("intended_status") or "running").lower()
    stopping = "stopped" in (intended, str(inst.get("next_state") or "").lower())
    msg = str(inst.get("status_msg") or "").strip()
    why = f": {msg}" if msg else ""
    if actual in _GONE:
        return "TERMINATED", f"Vast.ai shows it {actual}"
    if intended in _GONE:  # asked to go; what it is decides: not gone until it says so
        return _still(actual), (f"Vast.ai was asked to destroy it (intended_status {intended}) "
                                f"but shows it {actual or 'without a state'}{why}")
    if actual == "running":
        if stopping:
            return INTERRUPTED, f"Vast.ai is stopping it (outbid, or out of credit){why}"
        return "RUNNING", ""
    if actual in ("stopped", "frozen", "paused"):
        return INTERRUPTED, (f"Vast.ai paused it while it was meant to run (outbid, or out "
                             f"of credit){why}")
    if actual == "exited":
        return "EXITED", f"its container exited{why}"
    if actual in ("unknown", "offline"):
        return "ERROR", f"Vast.ai reports it {actual}{why}"
    if actual == "created" and OCI_FAILED in msg.lower():
        return "ERROR", f"its container could not be created{why}"
    if actual in _STARTING:
        if stopping:
            return "ERROR", (f"Vast.ai set it to stop while it was coming up "
                             f"({'next_state' if intended != 'stopped' else 'intended_status'} "
                             f"stopped), so it will not start{why}")
        return ("PROVISIONING" if actual in (None, "") else "STARTING"), msg
    return str(actual).upper(), msg


def _still(actual: Any) -> str:
    """tplab's state for an instance on its way out, by what it is now (never gone)."""
    if actual == "running":
        return "RUNNING"
    if actual in ("stopped", "frozen", "paused"):
        return INTERRUPTED
    if actual == "exited":
        return "EXITED"
    return "STARTING" if actual in _STARTING else str(actual).upper()


def pod_info(inst: dict[str, Any]) -> PodInfo:
    """A Vast instance as tplab's record."""
    state, note = state_of(inst)
    uptime = _float(inst.get("uptime_mins"))
    return PodInfo(
        id=str(inst.get("id")), name=str(inst.get("label") or ""), state=state,
        gpu_type=inst.get("gpu_name"), gpu_count=inst.get("num_gpus"),
        usd_per_hr=_float(inst.get("dph_total")), spot=inst.get("is_bid") is True,
        ssh=ssh_endpoint(inst), uptime_s=uptime * 60 if uptime is not None else None,
        raw={k: v for k, v in inst.items() if k not in _NOT_KEPT}, note=note,
        ssh_fallback=ssh_fallback(inst))


def charges_total(results: Iterable[Any], instance_id: str) -> float | None:
    """The instance's charges (``source`` "instance-<id>"), summed; None when none is its."""
    amounts = [_float(r.get("amount")) or 0.0 for r in results
               if isinstance(r, dict) and r.get("source") == f"instance-{instance_id}"]
    return round(sum(amounts), 8) if amounts else None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
