"""`tplab check`: can a lab run right now? Read-only, in the spirit of SkyPilot's `sky check`.

The facts and how they are asked are ``tplab/faces/cloud_check.py`` (the dashboard shows the same
report before Start); this is the command: its flags, the printed lines, the exit status.
"""

from __future__ import annotations

import argparse
import json
import sys

from tplab.faces.cloud_check import DEFAULT_GPU_TYPE, where_asked, gather_check

HELP = ("check, creating nothing, whether a lab could run now (key, balance, price, stock, "
        "spot, the image and the hosts that can run it)")


# ---- the command ---------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tplab.lab.options import add_image_argument, add_provider_argument
    parser.add_argument("--mock", action="store_true",
                        help="check against the local mock cloud (started for the check)")
    add_provider_argument(parser)
    parser.add_argument("--api-url", metavar="URL", default=None,
                        help="a running (mock) cloud API; without --mock it must be https")
    parser.add_argument("--gpu-type", default=DEFAULT_GPU_TYPE, help="GPU type (default: %(default)s)")
    parser.add_argument("--gpus", type=int, default=2, help="GPUs = TP degree (default: 2)")
    add_image_argument(parser)
    parser.add_argument("--on-demand", action="store_true",
                        help="check for an on-demand lab instead of the default spot lab")
    parser.add_argument("--lab-cap", type=float, default=None, metavar="USD",
                        help="the lab cap to check against (default: the budget config's)")
    parser.add_argument("--phase-cap", type=float, default=None, metavar="USD",
                        help="the phase cap the ledger is held to (default: the budget "
                             "config's)")
    parser.add_argument("--wall-cap", type=float, default=7200.0, metavar="S",
                        help="the lab's wall-clock cap in seconds (default: 7200)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


_MARK = {True: "ok  ", False: "FAIL", None: "note"}
_OFFER_MARK = {True: "runs      ", False: "cannot run", None: "may run   "}


def check_names(args: argparse.Namespace) -> list[str]:
    """The clouds `tplab check` asks: the one named; auto (or none named, with keys for several):
    every cloud, side by side; in mock mode with none named: RunPod's mock, as before."""
    from tplab.cloud import registry
    name = getattr(args, "provider", None)
    if name and name != registry.AUTO:
        return [name]
    if name == registry.AUTO:
        return list(registry.PROVIDERS)
    if args.mock or args.api_url:
        return [registry.DEFAULT]
    keys = registry.configured()
    if not keys:  # no key at all: every cloud's key, Vast.ai's first (its GPUs interruptible)
        return list(registry.FIRST_KEY_ORDER)
    return list(registry.PROVIDERS) if len(keys) != 1 else keys


def _side(report) -> str:  # type: ignore[no-untyped-def]
    """One cloud's answer in a few words: a key problem is never "no spot"."""
    if not report.key_ok:
        return ("the key not checked: no answer (see its key line)" if not report.key_checked
                and report.key_source else "no usable API key (see its key line)")
    return (f"spot ${report.spot_usd_per_hr:.3f}/h" if report.spot_usd_per_hr else "no spot") \
        + (" (can run)" if report.can_run else "")


def main(args: argparse.Namespace) -> int:
    reports = [gather_check(mock=bool(args.mock), api_url=args.api_url, gpu_type=args.gpu_type,
                            gpus=args.gpus, spot=not args.on_demand, lab_cap_usd=args.lab_cap,
                            phase_cap_usd=args.phase_cap, wall_cap_s=args.wall_cap, name=name,
                            image=args.image)
               for name in check_names(args)]
    can_run = any(r.can_run for r in reports)
    if args.json:
        data = [r.to_dict() for r in reports]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=2))
    else:
        for report in reports:
            print(f"tplab check ({where_asked(report)}"
                  f"{', ' + report.api_url if report.api_url else ''}): "
                  f"{report.gpus}x {report.gpu_type}, {'spot' if report.spot else 'on-demand'} lab")
            for line in report.lines:
                print(f"  [{_MARK[line.ok]}] {line.name:<9} {line.text}")
                if line.name == "hosts":
                    for offer in report.offers:  # each offer's host, cheapest first
                        print(f"      {_OFFER_MARK[offer.ok]} {offer.text}")
        if len(reports) > 1:
            print("Side by side: " + "; ".join(f"{where_asked(r)}: {_side(r)}" for r in reports))
        print("A lab can run now." if can_run else
              "A lab could NOT run now (see FAIL above). Nothing was created.")
    if not can_run:
        print("tplab check: a lab could not run now; nothing was created.", file=sys.stderr)
    return 0 if can_run else 1
