"""What the mock Vast cloud answers: an instance, the account, charges — in Vast's shapes.

Why apart from the routes: these are the mock's claims about Vast's answers, the part the
document checks (contract.py); plain functions of the state, so a test can validate them.
The instance view is one dict for both show (``{"instances": {...}}``) and list. ``extra_env``
is the create's variables as ``[name, value]`` pairs, as the v1 list's schema and the CLI have
it (contract.EXCEPTIONS: the show schema says a list of strings). Direct SSH (``public_ipaddr``
+ ``ports["22/tcp"]``) exists only where the machine opens direct ports; the proxy
(``ssh_host``, ``ssh_port``) always; with ``direct_port_blocked`` the direct mapping names a
port that takes connections and never answers.
"""

from __future__ import annotations

import time
from typing import Any

from tplab.mock.vast_mock.catalog import STORAGE_GB_MONTH
from tplab.mock.vast_mock.state import Instance, VastState


def instance_view(state: VastState, inst: Instance) -> dict[str, Any]:
    m = inst.machine
    port = inst.public_port
    direct = port if port and not inst.faults.no_direct_ports else None
    if direct and inst.blackhole is not None:   # direct_port_blocked: a port that never answers
        direct = inst.blackhole.getsockname()[1]
    ports = {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(direct)}]} if direct else None
    address = (" 127.0.0.1\n" if inst.faults.padded_ipaddr else "127.0.0.1") if direct else ""
    up = inst.compute_seconds()
    compute, storage = inst.charges()
    return {
        "id": inst.id, "label": inst.label,
        "actual_status": inst.actual_status, "intended_status": inst.intended_status,
        "cur_state": "stopped" if inst.actual_status in ("stopped", "exited") else "running",
        "next_state": inst.intended_status, "status_msg": inst.status_msg,
        "image_uuid": inst.image, "image_runtype": inst.runtype, "image_args": [],
        "onstart": inst.onstart, "extra_env": [[k, v] for k, v in inst.user_env.items()],
        "template_id": None, "template_hash_id": None,
        "template_name": None, "jupyter_token": "",
        "public_ipaddr": address, "local_ipaddrs": "127.0.0.1",
        "ports": ports, "ssh_host": "127.0.0.1", "ssh_idx": "0",
        "ssh_port": port or 0,
        "direct_port_count": 0 if inst.faults.no_direct_ports else m.direct_port_count,
        "direct_port_start": 0, "direct_port_end": 0, "static_ip": False,
        "machine_id": m.machine_id, "host_id": 7000 + m.machine_id % 100, "bundle_id": m.ask_id,
        "gpu_name": m.gpu_name, "num_gpus": m.num_gpus, "gpu_ram": m.gpu_ram_mb,
        "gpu_totalram": m.gpu_ram_mb * m.num_gpus, "gpu_frac": 1.0,
        "gpu_util": 0.0 if port else None, "gpu_temp": None,
        "cpu_cores": 16 * m.num_gpus, "cpu_ram": 64000 * m.num_gpus, "cpu_util": 0.0,
        "disk_space": float(inst.disk_gb), "disk_usage": 0.0, "disk_util": 0.0,
        "geolocation": m.geolocation, "verification": "verified", "rentable": True,
        "reliability2": m.reliability2, "is_bid": inst.is_bid, "min_bid": m.min_bid,
        "dph_base": inst.price, "dph_total": round(inst.price + inst.storage_per_hr, 6),
        "storage_cost": STORAGE_GB_MONTH, "storage_total_cost": round(storage, 8),
        "start_date": inst.created_epoch, "duration": time.monotonic() - inst.created_mono,
        "uptime_mins": round(up / 60, 3) if inst.actual_status == "running" else None,
        "client_run_time": round(compute, 8), "host_run_time": up,
        "credit_balance": None, "credit_discount": None, "external": False,
    }


def user_view(state: VastState) -> dict[str, Any]:
    """``GET /api/v0/users/current``: ``credit`` is the dollars left, as Vast's own tools read
    it; ``balance`` is not (departures.BEHAVIOURS): here, minus what was charged since the
    account's last top-up, so a client that reads it as dollars left is caught."""
    left = round(state.credit(), 8)
    return {"id": state.user_id, "key_id": 1, "email": "mock@vast.invalid",
            "username": "tplab-mock", "balance": round(left - state.initial_credit, 8),
            "credit": left,
            "ssh_key": next(iter(state.account_keys.values())).key
            if state.account_keys else "", "sid": "mock"}


def charge_rows(state: VastState, day_from: float | None,
                day_to: float | None) -> list[dict[str, Any]]:
    """One row per instance that was charged in [day_from, day_to) (epoch seconds):
    ``{start, end, type: "instance", source: "instance-<id>", amount, items: [gpu, disk]}``."""
    rows = []
    now_mono, now = time.monotonic(), time.time()
    for inst in sorted(state.instances.values(), key=lambda i: i.id):
        start = inst.created_epoch
        end = (start + inst.storage_seconds(now_mono)) if inst.destroyed_mono else now
        if (day_to is not None and start >= day_to) or (day_from is not None and end < day_from):
            continue
        compute, storage = inst.charges(now_mono)
        source = f"instance-{inst.id}"
        rows.append({
            "start": int(start), "end": int(end), "type": "instance", "source": source,
            "amount": round(compute + storage, 8),
            "metadata": {"label": inst.label or ""},
            "items": [{"start": int(start), "end": int(end), "type": "gpu", "source": source,
                       "amount": round(compute, 8), "metadata": {}, "items": []},
                      {"start": int(start), "end": int(end), "type": "disk", "source": source,
                       "amount": round(storage, 8), "metadata": {}, "items": []}],
        })
    return rows
