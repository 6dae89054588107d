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
``min_interval_s`` (seconds, 0: off)
    Vast's own rate limit: per endpoint and per key, a call less than this long after that key's
    last call of that endpoint that was let through answers 429 ``{"detail": "API requests too
    frequent"}``, **without a Retry-After header** (a client must choose its own wait).
``http_429`` ({call: N})
    The first N requests for a call answer 429 ``{"detail": "API requests too frequent"}``
    (no Retry-After header either).
    Calls are ``METHOD /route`` with the document's route template, no trailing slash:
    ``PUT /api/v0/asks/{id}``, ``GET /api/v0/instances/{id}``, ``DELETE /api/v0/instances/{id}``,
    ``POST /api/v0/bundles``, ``GET /api/v1/instances``... (the names ``calls`` counts under).
``http_500`` ({call: N})
    The first N requests for a call answer 500 (Vast's error JSON) before anything runs.
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
    min_interval_s: float = 0.0
    http_429: dict[str, int] = field(default_factory=dict)
    http_500: dict[str, int] = field(default_factory=dict)
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
