"""Fault switches of the mock cloud: the ways a real cloud misbehaves, on demand, for tests.

Each switch, and what the mock then does (the RunPod provider's answer is in brackets):

``no_spot_capacity`` (bool)
    ``lowestPrice`` reports no spot offer (``minimumBidPrice`` and ``stockStatus`` null) and
    ``podRentInterruptable`` / REST ``POST /v1/pods`` with ``interruptible`` fail with RunPod's
    "no longer any instances available" error; nothing is created. [NoCapacityError, no pod]
``no_on_demand_capacity`` (bool)
    The same for on-demand (``uninterruptablePrice`` null, ``podFindAndDeployOnDemand`` fails).
``runtime_null_s`` (seconds)
    After the boot delay the pod stays ``RUNNING`` with ``runtime: null`` for this much longer
    (an image pull that takes its time). [wait_ready keeps waiting; past its bound it terminates
    the pod and raises NotReadyError]
``ssh_refuse_s`` (seconds)
    Once ``runtime.ports`` shows port 22, the SSH port refuses connections (bound, not listening)
    for this long. [wait_ready retries the handshake; past its bound: terminate + NotReadyError]
``http_500`` ({call: N})
    The first N requests whose call name matches get ``HTTP 500`` with a plain-text body, before
    anything is executed (nothing is created or terminated). The call name is the GraphQL root field
    (``gpuTypes``, ``pod``, ``myself``, ``podRentInterruptable``, ``podFindAndDeployOnDemand``,
    ``podTerminate``, ``podStop``) or the REST route (``POST /v1/pods``, ``GET /v1/pods``,
    ``DELETE /v1/pods``). [reads are retried; a failed create raises ProviderError and leaves no pod]
``spot_interrupt_after_s`` (seconds)
    A spot pod is interrupted this long after it reaches runtime: it goes ``EXITED`` with
    ``runtime: null``, every process of the pod is killed, its SSH port closes and billing stops;
    it stays listed until terminated, as on RunPod. [status shows EXITED; terminate removes it]
``terminate_fail_n`` (int)
    The first N ``podTerminate`` (or REST ``DELETE``) calls fail with a GraphQL error ("Something
    went wrong...") and the pod keeps running. [terminate retries with backoff; if every attempt
    fails it raises ProviderError naming the pod id]

Faults come from a JSON object with these keys (``--faults FILE``), from command-line flags
(``--no-spot-capacity``, ``--runtime-null-s`` ...), or at run time from ``POST /_mock/faults``.
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
    no_on_demand_capacity: bool = False
    runtime_null_s: float = 0.0
    ssh_refuse_s: float = 0.0
    http_500: dict[str, int] = field(default_factory=dict)
    spot_interrupt_after_s: float | None = None
    terminate_fail_n: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Faults":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown fault switch(es) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        faults = cls(**data)
        faults.http_500 = {str(k): int(v) for k, v in (faults.http_500 or {}).items()}
        return faults

    @classmethod
    def from_file(cls, path: str | Path) -> "Faults":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def merged(self, changes: dict[str, Any]) -> "Faults":
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

    def take_terminate_failure(self) -> bool:
        if self.terminate_fail_n > 0:
            self.terminate_fail_n -= 1
            return True
        return False


def add_fault_arguments(parser: argparse.ArgumentParser) -> None:
    """The fault flags shared by ``tplab mock-cloud`` and ``python -m tplab.mock``."""
    g = parser.add_argument_group("faults (see tplab/mock/faults.py)")
    g.add_argument("--faults", metavar="FILE", help="JSON file of fault switches")
    g.add_argument("--no-spot-capacity", action="store_true", help="no spot offers")
    g.add_argument("--no-on-demand-capacity", action="store_true", help="no on-demand offers")
    g.add_argument("--runtime-null-s", type=float, metavar="S",
                   help="runtime stays null S seconds after boot")
    g.add_argument("--ssh-refuse-s", type=float, metavar="S",
                   help="SSH refuses connections S seconds after the ports show")
    g.add_argument("--http-500", action="append", metavar="CALL=N", default=[],
                   help="the first N calls named CALL get HTTP 500 (repeatable)")
    g.add_argument("--spot-interrupt-after-s", type=float, metavar="S",
                   help="spot pods are interrupted S seconds after boot")
    g.add_argument("--terminate-fail-n", type=int, metavar="N",
                   help="the first N terminate calls fail")


def faults_from_args(args: argparse.Namespace) -> Faults:
    """File first, then flags on top."""
    faults = Faults.from_file(args.faults) if getattr(args, "faults", None) else Faults()
    changes: dict[str, Any] = {}
    if args.no_spot_capacity:
        changes["no_spot_capacity"] = True
    if args.no_on_demand_capacity:
        changes["no_on_demand_capacity"] = True
    for name in ("runtime_null_s", "ssh_refuse_s", "spot_interrupt_after_s", "terminate_fail_n"):
        value = getattr(args, name)
        if value is not None:
            changes[name] = value
    if args.http_500:
        http = dict(faults.http_500)
        for item in args.http_500:
            call, sep, n = item.rpartition("=")
            if not sep or not call:
                raise ValueError(f"--http-500 wants CALL=N, got {item!r}")
            http[call] = int(n)
        changes["http_500"] = http
    return faults.merged(changes) if changes else faults
