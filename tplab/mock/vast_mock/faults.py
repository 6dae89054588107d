"""Fault switches of the mock Vast cloud: the ways Vast misbehaves, on demand, for tests.

Each switch and what the mock then does:

``outbid_after_s`` (seconds, None: off)
    An interruptible instance is outbid this long after it reaches ``running``: ``actual_status``
    ``stopped`` while ``intended_status`` stays ``running`` (status_msg says outbid); compute
    billing stops, **storage keeps billing**; every process of the instance is paused (SIGSTOP)
    and its sshd stops answering (connections refused, open ones dropped).
``outbid_resume_s`` (seconds, default 30; -1: never)
    An outbid instance that still exists resumes by itself this long after it stopped:
    processes continued (SIGCONT), sshd back on the same port, ``running``, compute billing again.
``failed_bid_n`` (int)
    The first N creates with a ``price`` fail as a bid below the offer's minimum always does:
    they answer ``{"success": false, "error": "bid_failed", "new_contract": <id>}`` **and**
    leave that instance, stopped (``intended_status`` stopped), billing storage, until
    destroyed.
``bid_ignored_n`` (int)
    The first N creates with a ``price`` are rented as a create without one is: **on demand**
    at the offer's price (``is_bid`` false), and the answer is the same ``{"success": true,
    "new_contract": ...}`` as a bid's (a client that dropped the price on the way).
``rate_scale`` (factor, default 1.0: the service's own limits)
    Vast's rate limits, on by default, read from ``vast_endpoint_limits.json`` (limits.py): per
    endpoint and per key, a minimum interval between calls let through (show instance 2 s,
    destroy 3 s, create 4.5 s with a 12 s penalty, the v1 list 1 s, ...; the offer search 10 a
    minute), answered 429 ``{"detail": "API requests too frequent endpoint threshold=..."}``
    **without a Retry-After header**. Every interval is multiplied by this factor: 2.0 doubles
    the limits, 0 turns them off (the mock's own unit tests, which call it faster than any
    client may).
``key_refused`` ("": off)
    How the account key is refused, as Vast answers each case: ``revoked`` (a wrong or revoked
    key: 404 ``{"error": "auth_error"}``, which is also what any unknown key gets), ``deleted``
    (401 "Invalid user key"), ``session`` (404 "Session expired. Please log in again."),
    ``2fa`` (401 "... Two Factor Authentication").
``offer_taken`` (list of statuses)
    The next creates answer these in turn, as Vast answers an offer that moved between search
    and create: 410 ``no_such_ask`` "... is no longer available" and 404 ``no_such_ask`` "... is
    not available" (someone else rented it: it is gone from later searches), 400
    ``invalid_price`` "... does not match a fresh search quote" (its price rose 10 %); nothing
    is created. Setting the switch (to anything, ``[]`` too) puts every offer back.
``destroyed_records`` (bool)
    A destroyed instance is still answered, as a record whose ``actual_status`` and
    ``intended_status`` read ``destroyed`` (show, and the v1 list), as the service may answer
    after a destroy; a second destroy answers 404 ``no_such_instance``.
``stopped_while_loading`` (bool)
    While an instance comes up (``loading``), Vast turns its ``intended_status`` and
    ``next_state`` to ``stopped``: it never runs (storage bills until it is destroyed).
``outbid_as_stopped`` (bool)
    An outbid (``outbid_after_s``, ``POST /_mock/outbid``) is reported as
    ``cur_state`` = ``intended_status`` = ``next_state`` = ``stopped`` (dstack #4037), not as a
    running intent.
``oci_error`` (bool)
    Instances stop at ``actual_status`` ``created`` with ``status_msg`` "... OCI runtime create
    failed ...": the container never starts.
``restarting_s`` (seconds)
    Between ``loading`` and ``running`` an instance shows ``restarting`` this long.
``direct_port_blocked`` (bool)
    The direct SSH endpoint (``public_ipaddr`` + ``ports["22/tcp"]``) leads to a port that
    takes the connection and never answers (a host whose direct ports are filtered); the proxy
    (``ssh_host``:``ssh_port``) works.
``padded_ipaddr`` (bool)
    ``public_ipaddr`` carries whitespace around the address (dstack strips it).
``http_429`` ({call: N})
    The first N requests for a call answer 429 ``{"detail": "API requests too frequent"}``
    (no Retry-After header either).
    Calls are ``METHOD /route`` with the document's route template, no trailing slash:
    ``PUT /api/v0/asks/{id}``, ``GET /api/v0/instances/{id}``, ``DELETE /api/v0/instances/{id}``,
    ``POST /api/v0/bundles``, ``GET /api/v1/instances``... (the names ``calls`` counts under).
``http_500`` ({call: N})
    The first N requests for a call answer 500 (Vast's error JSON) before anything runs.
``error_page`` (bool)
    Those 500s are a proxy's HTML page (``loopback.ERROR_PAGE``), not Vast's JSON.
``http_delay`` ({call: N}) with ``delay_s`` (seconds, default 5)
    The first N requests for a call are answered only after ``delay_s`` (a hung call: a client
    whose timeout is shorter sees none; a large ``delay_s`` is an API that never answers).
``destroy_refused_n`` (int)
    The next N destroys answer 200 ``{"success": false, "error": "destroy_failed", "msg": ...}``
    and the instance stays (as dstack reads Vast's destroy: a failure).
``destroy_intent_shown`` (bool)
    While a destroy lingers (``destroy_lingers``), the record says ``intended_status``
    ``destroyed`` while ``actual_status`` is still ``running`` (and it bills): asked, not done.
``cuda_unknown`` (bool)
    The hosts whose driver stops at CUDA 12.2 answer without ``cuda_max_good`` (a host that does
    not say): cheaper than every host known to run a CUDA 12.4 image.
``create_invalid_args`` (int)
    The next N creates answer 400 ``invalid_args`` (Vast would not take what was sent); nothing
    is created.
``destroy_lingers`` (int)
    A destroy is accepted (``success: true``) but the instance stays (running, billing, shown)
    for N more reads of it (show, list); -1: it never goes (until the mock exits).
``boot_exited`` (bool)
    Instances go ``loading`` -> ``exited`` instead of ``running`` (the container died during
    boot); they never run, stay shown and billing storage until destroyed.
``no_bid_offers`` (bool)
    No interruptible offers: a ``type: "bid"`` search answers no offers, and a create with a
    ``price`` answers 410 ``no_such_ask``.
``no_ondemand_offers`` (bool)
    The same for on-demand offers (searches without ``type: "bid"``, creates without a price).
``no_direct_ports`` (bool)
    Machines open no direct ports: offers show ``direct_port_count`` 0 and instances get no
    direct mapping (``ports`` null, ``public_ipaddr`` empty); the SSH proxy (``ssh_host``,
    ``ssh_port``) still works.
``no_ssh_port`` (bool)
    Instances run but their public SSH port never appears: ``ports`` stays null and sshd never
    listens (``VAST_TCP_PORT_22`` is empty inside).

From a JSON object (``--faults FILE`` with ``--cloud vast``), or at run time from
``POST /_mock/faults`` on the Vast mock's own URL.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

TOO_FREQUENT = "API requests too frequent"


@dataclass
class VastFaults:
    outbid_after_s: float | None = None
    outbid_resume_s: float = 30.0
    failed_bid_n: int = 0
    bid_ignored_n: int = 0
    rate_scale: float = 1.0
    key_refused: str = ""
    offer_taken: list[int] = field(default_factory=list)
    destroyed_records: bool = False
    stopped_while_loading: bool = False
    outbid_as_stopped: bool = False
    oci_error: bool = False
    restarting_s: float = 0.0
    direct_port_blocked: bool = False
    padded_ipaddr: bool = False
    http_429: dict[str, int] = field(default_factory=dict)
    http_500: dict[str, int] = field(default_factory=dict)
    error_page: bool = False
    http_delay: dict[str, int] = field(default_factory=dict)
    delay_s: float = 5.0
    destroy_refused_n: int = 0
    destroy_intent_shown: bool = False
    cuda_unknown: bool = False
    create_invalid_args: int = 0
    destroy_lingers: int = 0
    boot_exited: bool = False
    no_bid_offers: bool = False
    no_ondemand_offers: bool = False
    no_direct_ports: bool = False
    no_ssh_port: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VastFaults:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown Vast fault switch(es) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        faults = cls(**data)
        faults.http_429 = {str(k): int(v) for k, v in (faults.http_429 or {}).items()}
        faults.http_500 = {str(k): int(v) for k, v in (faults.http_500 or {}).items()}
        faults.http_delay = {str(k): int(v) for k, v in (faults.http_delay or {}).items()}
        faults.offer_taken = [int(s) for s in faults.offer_taken or []]
        if set(faults.offer_taken) - {400, 404, 410}:
            raise ValueError("offer_taken takes the statuses 400, 404 and 410")
        if faults.key_refused not in ("", "revoked", "deleted", "session", "2fa"):
            raise ValueError("key_refused is one of revoked, deleted, session, 2fa")
        return faults

    @classmethod
    def from_file(cls, path: str | Path) -> VastFaults:
        return cls.from_dict(json.loads(Path(path).read_text()))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def merged(self, changes: dict[str, Any]) -> VastFaults:
        data = self.to_dict()
        data.update(changes)
        return VastFaults.from_dict(data)

    def take(self, counts: dict[str, int], call: str) -> bool:
        """Whether ``call`` is hit now (consumes one of its N in ``counts``)."""
        left = counts.get(call, 0)
        if left > 0:
            counts[call] = left - 1
            return True
        return False

    def take_n(self, name: str) -> bool:
        """Whether the counted switch ``name`` is hit now (consumes one of its N)."""
        left = getattr(self, name)
        if left > 0:
            setattr(self, name, left - 1)
            return True
        return False

    def take_failed_bid(self) -> bool:
        if self.failed_bid_n > 0:
            self.failed_bid_n -= 1
            return True
        return False

    def take_bid_ignored(self) -> bool:
        if self.bid_ignored_n > 0:
            self.bid_ignored_n -= 1
            return True
        return False
