"""Fault switches of the mock cloud: the ways a real cloud misbehaves, on demand, for tests.

Each switch, what the mock then does, and (in brackets) what tplab answers with:

``no_spot_capacity`` (bool)
    GraphQL ``lowestPrice`` reports no spot offer (``minimumBidPrice``, ``stockStatus`` null) and
    ``podRentInterruptable`` fails with RunPod's "no longer any instances available"; nothing is
    created. [the lab ends EDUCATIONAL_STUB: "no spot capacity ... --on-demand ..."]
``spot_removed`` (bool)
    RunPod has removed spot: ``podRentInterruptable`` is no longer in the GraphQL schema (a
    request naming it fails validation: "Cannot query field 'podRentInterruptable' on type
    'Mutation'", the answer to an unknown mutation) and ``minimumBidPrice`` is null. [the quote
    says spot is not offered; the default lab ends EDUCATIONAL_STUB naming ``--on-demand`` and its
    quote, with nothing created; ``--on-demand`` works]
``no_on_demand_capacity`` (bool)
    The v2 catalog shows ``availability: NONE`` and ``POST /v2/pods`` answers 400 "There are no
    longer any instances available ..." (capacity, in ``detail`` only, as on RunPod).
``runtime_null_s`` (seconds)
    The pod stays ``STARTING`` (``runtime`` null, ``ssh.direct`` null) this much longer than the
    boot delay (an image pull that takes its time). [waited for within the boot bound]
``ssh_refuse_s`` (seconds)
    Once the pod is RUNNING with port 22 mapped, its sshd refuses connections this long.
``boot_error`` (bool)
    The pod goes PROVISIONING -> STARTING -> ``ERROR`` (its container could not start); billing
    stops, it stays listed until terminated. [a clear failure naming ERROR, not a timeout; the pod
    is terminated]
``http_500`` ({call: N})
    The first N requests for a call get HTTP 500 before anything runs (nothing is created or
    terminated). Calls: a v2 route as ``METHOD /path`` with its template (``POST /v2/pods``,
    ``GET /v2/pods``, ``GET /v2/pods/{id}``, ``DELETE /v2/pods/{id}``, ``GET /v2/catalog/gpus``,
    ``GET /v2/billing/pods``) or a GraphQL root field (``myself``, ``gpuTypes``,
    ``podRentInterruptable``, ``podTerminate``; a document refused at validation, which runs
    nothing, is no such call). [reads retried with bounded backoff; a create
    that got a 5xx is ambiguous: see ``create_500_after_create``]
``error_page`` (bool)
    The ``http_500`` answers are a proxy's HTML page (``loopback.ERROR_PAGE``: "500 Internal
    Server Error", a script and all), not RunPod's problem JSON. [tplab's sentences quote the
    page's words, never its HTML]
``create_500_after_create`` (int)
    The first N creates (``POST /v2/pods`` or ``podRentInterruptable``) make the pod (it boots
    and bills) and then answer HTTP 500. [the lab keeps its INTENT record and its authorization,
    looks for the pod by name, finds it, and terminates it: "RunPod answered the create with an
    error, yet pod ... was made"]
``http_429`` ({call: N}) with ``retry_after_s`` (int, default 1)
    The first N requests for a call (names as for ``http_500``) get HTTP 429 with
    ``Retry-After: retry_after_s``. [tplab waits as asked, a bounded number of times; past that:
    "RunPod kept rate-limiting tplab (HTTP 429) ..."]
``spot_interrupt_after_s`` (seconds)
    A spot pod is interrupted this long after it reaches RUNNING: ``EXITED``, ``runtime`` null,
    every process killed, sshd closed, billing stopped; listed until terminated, as on RunPod.
``terminate_fail_n`` (int)
    The first N terminates (v2 ``DELETE`` or GraphQL ``podTerminate``) fail (HTTP 500 problem /
    GraphQL error "Something went wrong...") and the pod keeps running. [retried with backoff]
``terminate_lingers`` (int)
    A terminate is accepted (204 / GraphQL ok) but the pod stays RUNNING, listed and billing for
    N more reads of it (``GET /v2/pods``, ``GET /v2/pods/{id}``), then goes; -1: it never goes
    (until the mock exits). [verify keeps polling to its bound and re-sends terminate; a pod
    that never goes is not "verified gone": the lab ends FAILED, exit 1, with the command to
    run; the dashboard's leftover sweep says so]
``http_delay`` ({call: N}) with ``delay_s`` (seconds, default 5)
    The first N requests for a call (names as for ``http_500``) are answered only after
    ``delay_s``: a client whose timeout is shorter sees a timeout. [reads retried; a create that
    timed out is ambiguous]
``pod_key_delete_refused`` (bool)
    ``DELETE /v2/pods/{id}`` with the pod-scoped key (the one in the pod's
    ``/etc/rp_environment``) answers 403: whether RunPod lets that key delete its own pod through
    v2 can only be known live. [the watchdog falls back to GraphQL ``podTerminate``; both attempts
    are in ``watchdog.log``] Given a status instead of true (403 or 404), that status: RunPod's
    404 means "not found or not accessible to the caller" [from inside a pod, never "already
    gone": the watchdog says so and tries the next way]
``graphql_retired`` ("": off; "404", "410" or "html")
    RunPod's GraphQL API is gone, as it is to be in early 2027: ``POST /graphql`` answers 404
    with an HTML page, 410 with a JSON error, or 200 with an HTML page. [``tplab check`` and a
    lab still work: spot "not offered" (its only way is gone), the balance unknown, on-demand
    through REST v2; a pod's self-end skips GraphQL for its next way]

Faults come from a JSON object with these keys (``--faults FILE``), from command-line flags
(``--no-spot-capacity``, ``--spot-removed`` ...), or at run time from ``POST /_mock/faults``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass
class Faults:
    no_spot_capacity: bool = False
    spot_removed: bool = False
    no_on_demand_capacity: bool = False
    runtime_null_s: float = 0.0
    ssh_refuse_s: float = 0.0
    boot_error: bool = False
    http_500: dict[str, int] = field(default_factory=dict)
    error_page: bool = False
    create_500_after_create: int = 0
    http_429: dict[str, int] = field(default_factory=dict)
    retry_after_s: int = 1
    spot_interrupt_after_s: float | None = None
    terminate_fail_n: int = 0
    pod_key_delete_refused: bool | int = False
    terminate_lingers: int = 0
    graphql_retired: str = ""
    http_delay: dict[str, int] = field(default_factory=dict)
    delay_s: float = 5.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Faults:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown fault switch(es) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        faults = cls(**data)
        faults.http_500 = {str(k): int(v) for k, v in (faults.http_500 or {}).items()}
        faults.http_429 = {str(k): int(v) for k, v in (faults.http_429 or {}).items()}
        faults.http_delay = {str(k): int(v) for k, v in (faults.http_delay or {}).items()}
        if faults.graphql_retired not in ("", "404", "410", "html"):
            raise ValueError("graphql_retired is one of 404, 410, html")
        return faults

    @classmethod
    def from_file(cls, path: str | Path) -> Faults:
        return cls.from_dict(json.loads(Path(path).read_text()))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def merged(self, changes: dict[str, Any]) -> Faults:
        """A copy with ``changes`` applied (unknown keys raise ValueError)."""
        data = self.to_dict()
        data.update(changes)
        return Faults.from_dict(data)

    def take_http_500(self, call: str) -> bool:
        """Whether this call should fail with HTTP 500 now (consumes one of its N)."""
        left = self.http_500.get(call, 0)
        if left > 0:
            self.http_500[call] = left - 1
            return True
        return False

    def take_http_429(self, call: str) -> bool:
        """Whether this call should get HTTP 429 now (consumes one of its N)."""
        left = self.http_429.get(call, 0)
        if left > 0:
            self.http_429[call] = left - 1
            return True
        return False

    def take_create_500(self) -> bool:
        """Whether this create should answer 500 after making its pod (consumes one)."""
        if self.create_500_after_create > 0:
            self.create_500_after_create -= 1
            return True
        return False

    def take_http_delay(self, call: str) -> float:
        """Seconds to hold this call's answer back now (consumes one of its N), else 0."""
        left = self.http_delay.get(call, 0)
        if left > 0:
            self.http_delay[call] = left - 1
            return self.delay_s
        return 0.0

    def take_terminate_failure(self) -> bool:
        if self.terminate_fail_n > 0:
            self.terminate_fail_n -= 1
            return True
        return False


def add_fault_arguments(parser: argparse.ArgumentParser) -> None:
    """The fault flags shared by ``tplab mock-cloud`` and ``python -m tplab.mock``."""
    g = parser.add_argument_group("faults (see tplab/mock/runpod_mock/faults.py)")
    g.add_argument("--faults", metavar="FILE", help="JSON file of fault switches")
    g.add_argument("--no-spot-capacity", action="store_true", help="no spot offers")
    g.add_argument("--spot-removed", action="store_true",
                   help="RunPod no longer offers spot (podRentInterruptable unknown)")
    g.add_argument("--no-on-demand-capacity", action="store_true", help="no on-demand offers")
    g.add_argument("--boot-error", action="store_true", help="pods end in ERROR while booting")
    g.add_argument("--create-500-after-create", type=int, metavar="N",
                   help="the first N creates make the pod, then answer HTTP 500")
    g.add_argument("--http-429", action="append", metavar="CALL=N", default=[],
                   help="the first N calls named CALL get HTTP 429 (repeatable)")
    g.add_argument("--retry-after-s", type=int, metavar="S", help="Retry-After of those 429s")
    g.add_argument("--pod-key-delete-refused", action="store_true",
                   help="v2 DELETE with a pod-scoped key answers 403")
    g.add_argument("--runtime-null-s", type=float, metavar="S",
                   help="runtime stays null S seconds after boot")
    g.add_argument("--ssh-refuse-s", type=float, metavar="S",
                   help="SSH refuses connections S seconds after the ports show")
    g.add_argument("--http-500", action="append", metavar="CALL=N", default=[],
                   help="the first N calls named CALL get HTTP 500 (repeatable)")
    g.add_argument("--error-page", action="store_true",
                   help="those 500s are a proxy's HTML page, not RunPod's JSON")
    g.add_argument("--spot-interrupt-after-s", type=float, metavar="S",
                   help="spot pods are interrupted S seconds after boot")
    g.add_argument("--terminate-fail-n", type=int, metavar="N",
                   help="the first N terminate calls fail")
    g.add_argument("--terminate-lingers", type=int, metavar="N",
                   help="an accepted terminate leaves the pod running for N more reads of it "
                        "(-1: it never goes)")
    g.add_argument("--http-delay", action="append", metavar="CALL=N", default=[],
                   help="the first N calls named CALL answer only after --delay-s (repeatable)")
    g.add_argument("--delay-s", type=float, metavar="S", help="how long those answers wait")


def faults_from_args(args: argparse.Namespace) -> Faults:
    """File first, then flags on top."""
    faults = Faults.from_file(args.faults) if getattr(args, "faults", None) else Faults()
    changes: dict[str, Any] = {}
    if args.no_spot_capacity:
        changes["no_spot_capacity"] = True
    for name in ("spot_removed", "no_on_demand_capacity", "boot_error",
                 "pod_key_delete_refused", "error_page"):
        if getattr(args, name):
            changes[name] = True
    for name in ("runtime_null_s", "ssh_refuse_s", "spot_interrupt_after_s", "terminate_fail_n",
                 "create_500_after_create", "retry_after_s", "terminate_lingers", "delay_s"):
        value = getattr(args, name)
        if value is not None:
            changes[name] = value
    for name, flag in (("http_500", "--http-500"), ("http_429", "--http-429"),
                       ("http_delay", "--http-delay")):
        items = getattr(args, name)
        if items:
            calls = dict(getattr(faults, name))
            for item in items:
                call, sep, n = item.rpartition("=")
                if not sep or not call:
                    raise ValueError(f"{flag} wants CALL=N, got {item!r}")
                calls[call] = int(n)
            changes[name] = calls
    return faults.merged(changes) if changes else faults
