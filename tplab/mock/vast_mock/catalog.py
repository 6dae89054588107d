"""The mock Vast cloud's machines and offer search (``POST /api/v0/bundles/``).

Vast sells whole machines' GPU sets ("offers"/"asks"): each has an id (the ask id a create
names: ``PUT /api/v0/asks/{id}/``), ``num_gpus``, ``gpu_name`` (Vast's spelling: "RTX 4090",
"A100 PCIE"...), an on-demand price per machine-hour (``dph_total``), the minimum bid for
interruptible rental (``min_bid``, per machine-hour) and storage at ``storage_cost`` $/GB-month.
Prices are plausible figures only. A search answers the offers that match every filter
``{"field": {"op": value}}`` (ops ``eq neq gt gte lt lte in notin``), ordered by ``order``
(``[["dph_total", "asc"]]``), at most ``limit``. With ``type: "bid"`` the search is for
interruptible rental and each offer's ``dph_total`` is its minimum bid (plus storage), as
Vast's interruptible search shows it; ``is_bid`` says which.

The catalogue is a market, not a short list: besides one host per GPU and count, 2x RTX 4090 (the
default lab's GPUs) has ``MARKET_HOSTS`` more hosts, most of them cheaper than the cheapest that
can run a CUDA 12.4 image but with drivers that stop at CUDA 12.2, the rest pricier. A search
without ``order`` answers in the server's own order (``score``, highest first, as Vast's CLI
sorts by default), where the cheapest host that can run the lab comes far down, and a search
without ``limit`` answers the first ``DEFAULT_LIMIT`` (64) offers, as Vast does (gpuhunt issue
#142): a client must ask in price order and see enough offers to find it.

Each offer is one host: ``cuda_max_good`` is the newest CUDA its driver runs and ``compute_cap``
its GPUs' compute capability x 100. Most of the mock's hosts run CUDA 12.8; the RTX 3090 hosts
and one cheap 2x L40S host stop at 12.2 (a CUDA 12.4 image cannot start there), and the RTX 5090
hosts are Blackwell (12.0: torch 2.4's kernels stop at sm_90), so a lab must pass them over.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from typing import Any, Callable

ONDEMAND, BID = "ondemand", "bid"
#: the CUDA of the old drivers in the market (hosts a CUDA 12.4 image cannot start on)
OLD_DRIVER_CUDA = 12.2
STORAGE_GB_MONTH = 0.15   # $/GB per month: the mock's storage price on every machine
HOURS_PER_MONTH = 30 * 24


@dataclass(frozen=True)
class Machine:
    ask_id: int
    machine_id: int
    gpu_name: str
    num_gpus: int
    gpu_ram_mb: int
    ondemand_dph: float     # per machine-hour, on demand
    min_bid: float          # per machine-hour, interruptible minimum
    geolocation: str = "Loopback, ZZ"
    reliability2: float = 0.995
    cuda_max_good: float = 12.8
    direct_port_count: int = 64
    disk_space: float = 200.0
    verified: bool = True
    score: float = 0.5      # the server's own ranking (its default order, highest first)


def _machines() -> tuple[Machine, ...]:
    gpus = (("RTX 4090", 24564, 0.40, 0.18), ("RTX A6000", 49140, 0.45, 0.20),
            ("L40S", 46068, 0.85, 0.38), ("A100 PCIE", 81920, 1.20, 0.55),
            ("H100 SXM", 81559, 2.40, 1.10))
    out = []
    ask = 9001000
    for g, (name, ram, od, bid) in enumerate(gpus):
        for n in (1, 2, 4, 8):
            ask += 1
            out.append(Machine(ask_id=ask, machine_id=40000 + g * 10 + n, gpu_name=name,
                               num_gpus=n, gpu_ram_mb=ram, ondemand_dph=round(od * n, 4),
                               min_bid=round(bid * n, 4)))
    out[1] = dataclasses.replace(out[1], score=0.05)  # 2x RTX 4090: far down the order
    more = _more_machines(ask)
    return tuple(out) + more + _market_hosts(ask + len(more))


#: the 2x RTX 4090 hosts of the market beyond the first (see the module docstring)
MARKET_HOSTS = 180
#: market hosts at 9001002's own prices
TWINS = 2
#: what a search answers when it names no ``limit`` (Vast: 64)
DEFAULT_LIMIT = 64


def _market_hosts(ask: int) -> tuple[Machine, ...]:
    """Old-driver hosts cheaper than 9001002 (the cheapest 2x RTX 4090 that runs CUDA 12.4),
    ranked high, and hosts that run it, two at 9001002's own prices (listed after it: a lab
    whose offer was taken finds another at the price it authorized), the rest higher, ranked in
    between: deterministic."""
    out = []
    old = MARKET_HOSTS * 3 // 4
    for i in range(MARKET_HOSTS):
        ask += 1
        if i < old:   # CUDA 12.2 drivers, $0.300-0.359/h bid, $0.700-0.799/h on demand
            bid, od, cuda = 0.300 + 0.059 * i / old, 0.700 + 0.099 * i / old, 12.2
            score = 0.99 - 0.5 * ((i * 7) % old) / old
        else:         # CUDA 12.8 drivers, above 9001002's prices
            j = i - old
            bid, od, cuda = ((0.36, 0.80, 12.8) if j < TWINS else
                             (0.37 + 0.005 * j, 0.82 + 0.01 * j, 12.8))
            score = 0.98 - 0.6 * ((j * 11) % (MARKET_HOSTS - old)) / (MARKET_HOSTS - old)
        out.append(Machine(ask_id=ask, machine_id=42000 + i, gpu_name="RTX 4090", num_gpus=2,
                           gpu_ram_mb=24564, ondemand_dph=round(od, 4), min_bid=round(bid, 4),
                           cuda_max_good=cuda, score=round(score, 4)))
    return tuple(out)


#: compute capability x 100 per GPU name (NVIDIA's table), as Vast's offers carry it
COMPUTE_CAP = {"RTX 4090": 890, "RTX A6000": 860, "L40S": 890, "A100 PCIE": 800,
               "H100 SXM": 900, "RTX 3090": 860, "RTX 5090": 1200}


def _more_machines(ask: int) -> tuple[Machine, ...]:
    """Hosts whose driver or GPU a lab must check: old drivers (CUDA 12.2) and Blackwell."""
    out = []
    hosts = (("RTX 3090", 24576, 0.22, 0.10, 12.2, (1, 2, 4, 8)),
             ("RTX 5090", 32607, 0.70, 0.32, 12.8, (1, 2, 4, 8)),
             ("L40S", 46068, 0.80, 0.35, 12.2, (2,)))   # cheaper than the 12.8 L40S host
    for g, (name, ram, od, bid, cuda, counts) in enumerate(hosts):
        for n in counts:
            ask += 1
            out.append(Machine(ask_id=ask, machine_id=41000 + g * 10 + n, gpu_name=name,
                               num_gpus=n, gpu_ram_mb=ram, ondemand_dph=round(od * n, 4),
                               min_bid=round(bid * n, 4), cuda_max_good=cuda))
    return tuple(out)


MACHINES: tuple[Machine, ...] = _machines()


def market(taken: set[int], repriced: dict[int, float]) -> tuple[Machine, ...]:
    """The machines on offer now: none taken by someone else (``offer_taken``), each repriced
    one at its new prices."""
    return tuple(dataclasses.replace(m, min_bid=round(m.min_bid * repriced[m.ask_id], 4),
                                     ondemand_dph=round(m.ondemand_dph * repriced[m.ask_id], 4))
                 if m.ask_id in repriced else m for m in MACHINES if m.ask_id not in taken)


def find_machine(ask_id: int, machines: tuple[Machine, ...] = MACHINES) -> Machine | None:
    return next((m for m in machines if m.ask_id == ask_id), None)


def storage_per_hr(disk_gb: float) -> float:
    return disk_gb * STORAGE_GB_MONTH / HOURS_PER_MONTH


def offer_view(m: Machine, kind: str, disk_gb: float = 10.0) -> dict[str, Any]:
    """One offer as Vast's search answers it (the fields a lab reads, and some neighbours)."""
    compute = m.min_bid if kind == BID else m.ondemand_dph
    storage = storage_per_hr(disk_gb)
    return {
        "id": m.ask_id, "ask_contract_id": m.ask_id, "bundle_id": m.ask_id,
        "machine_id": m.machine_id, "host_id": 7000 + m.machine_id % 100,
        "num_gpus": m.num_gpus, "gpu_name": m.gpu_name, "gpu_ram": m.gpu_ram_mb,
        "gpu_total_ram": m.gpu_ram_mb * m.num_gpus, "gpu_frac": 1.0,
        "dph_base": compute, "dph_total": round(compute + storage, 6),
        "min_bid": m.min_bid, "is_bid": kind == BID, "storage_cost": STORAGE_GB_MONTH,
        "reliability": m.reliability2, "reliability2": m.reliability2,
        "geolocation": m.geolocation, "cuda_max_good": m.cuda_max_good,
        "compute_cap": COMPUTE_CAP.get(m.gpu_name),
        "direct_port_count": m.direct_port_count, "disk_space": m.disk_space,
        "rentable": True, "rented": False, "verified": m.verified,
        "verification": "verified" if m.verified else "unverified", "external": False,
        "static_ip": False, "cpu_cores": 16 * m.num_gpus, "cpu_ram": 64000 * m.num_gpus,
        "inet_up": 1000.0, "inet_down": 1000.0, "os_version": "22.04", "score": m.score,
    }


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq, "neq": operator.ne, "gt": operator.gt, "gte": operator.ge,
    "lt": operator.lt, "lte": operator.le,
    "in": lambda a, b: a in (b if isinstance(b, list) else [b]),
    "notin": lambda a, b: a not in (b if isinstance(b, list) else [b]),
}
#: search fields that are not offer fields
_NOT_FILTERS = {"limit", "type", "order", "allocated_storage"}


def matches(offer: dict[str, Any], name: str, cond: Any) -> bool:
    if not isinstance(cond, dict):
        return True  # the document allows any object; a bare value is not a filter
    value = offer.get(name)
    for op, want in cond.items():
        fn = _OPS.get(op)
        if fn is None:
            continue
        if name == "gpu_name" and isinstance(want, (str, list)):  # "RTX_4090" == "RTX 4090"
            want = ([w.replace("_", " ") if isinstance(w, str) else w for w in want]
                    if isinstance(want, list) else want.replace("_", " "))
        want = ([_as_type_of(value, w) for w in want] if isinstance(want, list)
                else _as_type_of(value, want))
        try:
            if value is None or not fn(value, want):
                return False
        except TypeError:
            return False
    return True


def _as_type_of(value: Any, want: Any) -> Any:
    """A filter's text as the field's type: Vast's CLI sends numbers as text ("num_gpus=2" is
    ``{"eq": "2"}``), which the service compares as numbers (departures.BEHAVIOURS)."""
    if not isinstance(want, str) or isinstance(value, (str, bool)) or value is None:
        return want
    try:
        number = float(want)
    except ValueError:
        return want
    return int(number) if isinstance(value, int) and number.is_integer() else number


def _sort_key(field_name: str) -> Callable[[dict[str, Any]], tuple[bool, Any]]:
    def key(offer: dict[str, Any]) -> tuple[bool, Any]:
        return offer.get(field_name) is None, offer.get(field_name)
    return key


def search(query: dict[str, Any], *, no_bid: bool, no_ondemand: bool,
           machines: tuple[Machine, ...] = MACHINES) -> list[dict[str, Any]]:
    """The offers matching ``query`` (a search body that passed the document), among
    ``machines`` (the market now: ``VastState.market()``)."""
    kind = BID if query.get("type") == BID else ONDEMAND
    if (kind == BID and no_bid) or (kind == ONDEMAND and no_ondemand):
        return []
    disk = float(query.get("allocated_storage") or 10.0)
    offers = [offer_view(m, kind, disk) for m in machines]
    defaults = {"verified": {"eq": True}, "rentable": {"eq": True}, "rented": {"eq": False}}
    filters = {**defaults, **{k: v for k, v in query.items() if k not in _NOT_FILTERS}}
    found = [o for o in offers if all(matches(o, k, c) for k, c in filters.items())]
    for field_name, direction in reversed(query.get("order") or [["score", "desc"]]):
        key = field_name.rstrip("-")
        if key not in (found[0] if found else {}):
            continue
        found.sort(key=_sort_key(key), reverse=direction == "desc" or field_name.endswith("-"))
    limit = query.get("limit", DEFAULT_LIMIT)
    return found[:limit] if isinstance(limit, int) and limit >= 0 else found[:DEFAULT_LIMIT]
