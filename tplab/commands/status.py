"""`tplab status`: tplab's live pods (the provider's list plus instance.json records) and their
cost so far, so a pod left by a crashed client is found and can be terminated.

With ``--mock`` (and no ``--api-url``) it asks every mock cloud running on this machine (found
through ``tplab.home.mock_clouds``), so a mock lab running in another terminal shows its pod here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the command imports the provider side lazily, when it runs
    from tplab.cloud.base import PodInfo
    from tplab.lab.instances import InstanceRecord

HELP = "list tplab's live pods and what they have cost so far"
#: a mock lab's pod whose mock cloud is no longer running ended with it
ENDED_WITH_MOCK = "ENDED (its mock cloud stopped)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mock", action="store_true",
                        help="the mock clouds running on this machine (their pods and records)")
    from tplab.lab.options import add_provider_argument
    add_provider_argument(parser)
    parser.add_argument("--api-url", metavar="URL", default=None,
                        help="ask the (mock) cloud API at URL instead; its key comes from the "
                             "provider's key variable (`tplab check` names it)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")


def mock_providers() -> list[tuple[Any, Any]]:
    """(record, provider) for every mock cloud running on this machine."""
    from tplab.home import mock_clouds
    from tplab.lab.providers import MOCK_KEY, provider_for
    return [(rec, provider_for(rec.api_key, rec.api_url, rec.provider, MOCK_KEY))
            for rec in mock_clouds.running()]


def gather(mock: bool, api_url: str | None, name: str | None = None,
           settled: list[str] | None = None) -> list[dict]:
    """One row per live pod: id, name, state, $/h, uptime, cost so far, where it was found. A
    pod its ended lab could not prove gone, now shown gone, has its hold settled (one sentence
    each into ``settled``)."""
    from tplab.lab import leftovers
    from tplab.lab.providers import cli_provider
    if mock and not api_url:
        return _gather_mocks(settled)
    provider = cli_provider(mock, api_url, name)
    assert provider is not None
    return [_row(p.info, p.record, p.found_in, api_url)
            for p in leftovers.live_pods(provider, mock, settled=settled)]


def _gather_mocks(settled: list[str] | None = None) -> list[dict]:
    """Pods of every running mock cloud, and open mock records whose cloud has stopped (a
    record whose running cloud shows its pod gone is closed, its ended lab's hold settled)."""
    from tplab.cloud.base import GONE_STATES, ProviderError
    from tplab.lab import instances
    from tplab.lab.leftovers import close_if_gone
    records = {r.pod_id: r for r in instances.open_records(True) if r.pod_id}
    rows: list[dict] = []
    clouds = mock_providers()
    for cloud, provider in clouds:
        for pod in provider.list_pods():
            if pod.state.upper() not in GONE_STATES:
                rows.append(_row(pod, records.pop(pod.id, None), "mock cloud", cloud.api_url))
    for rec in records.values():
        # its cloud (the one mock of its kind, running since before the lab) does not list
        # it: ask that cloud
        asked = [p for c, p in clouds if c.provider == rec.provider
                 and c.started_at <= rec.intent_at]
        if len(asked) == 1 and len([c for c, _ in clouds if c.provider == rec.provider]) == 1:
            try:
                notes = close_if_gone(asked[0], rec, True)
            except ProviderError:
                notes = None
            if notes is not None:
                if settled is not None:
                    settled.extend(notes)
                continue
        # a mock pod cannot outlive its mock cloud
        rows.append({"pod_id": rec.pod_id, "name": rec.pod_name, "state": ENDED_WITH_MOCK,
                     "usd_per_hr": rec.usd_per_hr, "uptime_s": None, "cost_so_far_usd": None,
                     "lab_id": rec.lab_id, "found_in": "instance.json", "cloud": None})
    return rows


def _row(pod: PodInfo, rec: InstanceRecord | None, found_in: str,
         cloud: str | None = None) -> dict[str, Any]:
    rate = pod.usd_per_hr if pod.usd_per_hr is not None else (rec.usd_per_hr if rec else None)
    up = pod.uptime_s
    if up is None and rec is not None and rec.created_at:
        up = time.time() - rec.created_at
    cost = rate * up / 3600.0 if (rate is not None and up is not None) else None
    return {"pod_id": pod.id, "name": pod.name, "state": pod.state, "usd_per_hr": rate,
            "uptime_s": up, "cost_so_far_usd": cost, "lab_id": rec.lab_id if rec else None,
            "found_in": found_in, "cloud": cloud}


def table(rows: list[dict], mock: bool) -> str:
    """The rows as aligned columns (widths from the content)."""
    from tplab.money.budget_config import fmt_usd
    head = ("POD", "STATE", "$/h", "UPTIME", "COST", "LAB") + (("CLOUD",) if mock else ())
    cells = []
    for r in rows:
        up = r["uptime_s"]
        cells.append((
            r["pod_id"] or "?", r["state"],
            f"{r['usd_per_hr']:.3f}" if r["usd_per_hr"] is not None else "?",
            f"{up // 60:.0f}m{up % 60:02.0f}s" if up is not None else "?",
            fmt_usd(r['cost_so_far_usd']) if r["cost_so_far_usd"] is not None else "?",
            r["lab_id"] or "-") + ((r.get("cloud") or "-",) if mock else ()))
    widths = [max(len(str(c[i])) for c in [head, *cells]) for i in range(len(head))]
    right = {2, 3, 4}
    lines = []
    for c in [head, *cells]:
        lines.append("  ".join(str(v).rjust(w) if i in right else str(v).ljust(w)
                               for i, (v, w) in enumerate(zip(c, widths))).rstrip())
    return "\n".join(lines)


def cli_names(args: argparse.Namespace) -> list[str | None]:
    """The clouds a `tplab status` / `tplab terminate` asks: the one named, else (auto, or none
    named) every cloud with a key (in mock mode, or with --api-url: the one named or RunPod's)."""
    from tplab.cloud import registry
    name = getattr(args, "provider", None)
    if args.mock or args.api_url:
        return [None if name == registry.AUTO else name]
    if name and name != registry.AUTO:
        return [name]
    return list(registry.configured()) or [None]


def no_key_at_all(args: argparse.Namespace) -> str | None:
    """The sentence for a `tplab status` / `tplab terminate` that names no cloud, on a machine
    with no cloud key at all (every cloud's key, Vast.ai's first); None otherwise."""
    from tplab.cloud import registry
    if args.mock or args.api_url or getattr(args, "provider", None) not in (None, registry.AUTO):
        return None
    return None if registry.configured() else registry.no_key_at_all()


def main(args: argparse.Namespace) -> int:
    from tplab.cloud.base import ProviderError
    mock = bool(args.mock)
    none = no_key_at_all(args)
    if none:
        print(f"tplab status: {none}", file=sys.stderr)
        return 1
    settled: list[str] = []
    try:
        rows = [r for name in cli_names(args)
                for r in gather(mock, args.api_url, name, settled)]
    except ProviderError as exc:
        print(f"tplab status: {exc}", file=sys.stderr)
        return 1
    for note in settled:  # said first: a hold that `tplab budget` showed is settled now
        print(note, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("No live tplab pods." + ("" if not mock or args.api_url else
                                       " (No mock cloud is running on this machine.)"
                                       if not mock_providers() else ""))
        return 0
    print(table(rows, mock))
    live = [r["pod_id"] for r in rows if r["state"] != ENDED_WITH_MOCK]
    if any(r["state"] == ENDED_WITH_MOCK for r in rows):
        print(f"\n{ENDED_WITH_MOCK}: a mock pod lives only as long as its mock cloud; the lab "
              "that made it was not there to close its record.")
    if live:
        named = (f" --provider {args.provider}" if getattr(args, "provider", None)
                 not in (None, "auto") else "")
        print(f"\nTerminate with: tplab terminate {' '.join(live)}{named}"
              f"{' --mock' if mock else ''}"
              f"{' --api-url ' + args.api_url if args.api_url else ''}")
    return 0
