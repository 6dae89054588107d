"""`tplab status`: tplab's live pods (the provider's list plus instance.json records) and their
cost so far, so a pod left by a crashed client is found and can be terminated."""

from __future__ import annotations

import argparse
import json
import sys
import time

HELP = "list tplab's live pods and what they have cost so far"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mock", action="store_true", help="the mock cloud's pods and records")
    parser.add_argument("--api-url", metavar="URL", default=None,
                        help="a running (mock) cloud API (key from RUNPOD_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def gather(mock: bool, api_url: str | None) -> list[dict]:
    """One row per live pod: id, name, state, $/h, uptime, cost so far, where it was found."""
    from tplab.lab import instances, leftovers
    from tplab.lab.providers import cli_provider
    provider = cli_provider(mock, api_url)
    if provider is not None:
        return [_row(p.info, p.record, p.found_in) for p in leftovers.live_pods(provider, mock)]
    return [{"pod_id": rec.pod_id, "name": rec.pod_name,
             "state": "UNKNOWN (no mock cloud running)", "usd_per_hr": rec.usd_per_hr,
             "uptime_s": None, "cost_so_far_usd": None, "lab_id": rec.lab_id,
             "found_in": "instance.json"}
            for rec in instances.open_records(mock) if rec.pod_id]


def _row(pod, rec, found_in: str) -> dict:
    rate = pod.usd_per_hr if pod.usd_per_hr is not None else (rec.usd_per_hr if rec else None)
    up = pod.uptime_s
    if up is None and rec is not None and rec.created_at:
        up = time.time() - rec.created_at
    cost = rate * up / 3600.0 if (rate is not None and up is not None) else None
    return {"pod_id": pod.id, "name": pod.name, "state": pod.state, "usd_per_hr": rate,
            "uptime_s": up, "cost_so_far_usd": cost, "lab_id": rec.lab_id if rec else None,
            "found_in": found_in}


def main(args: argparse.Namespace) -> int:
    from tplab.cloud.base import ProviderError
    mock = bool(args.mock)
    try:
        rows = gather(mock, args.api_url)
    except ProviderError as exc:
        print(f"tplab status: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("No live tplab pods.")
        return 0
    print(f"{'POD':<20} {'STATE':<10} {'$/h':>7} {'UPTIME':>9} {'COST':>9}  LAB")
    for r in rows:
        rate = f"{r['usd_per_hr']:.3f}" if r["usd_per_hr"] is not None else "?"
        up = f"{r['uptime_s']:.0f}s" if r["uptime_s"] is not None else "?"
        cost = f"${r['cost_so_far_usd']:.4f}" if r["cost_so_far_usd"] is not None else "?"
        print(f"{r['pod_id']:<20} {r['state']:<10} {rate:>7} {up:>9} {cost:>9}  "
              f"{r['lab_id'] or '-'}")
    ids = " ".join(r["pod_id"] for r in rows)
    print(f"\nTerminate with: tplab terminate {ids}{' --mock' if mock else ''}"
          f"{' --api-url ' + args.api_url if args.api_url else ''}")
    return 0
