"""`tplab budget`: show the dollar cap and the ledger, and release a stale authorization by hand.

Why: the ledger is the budget's only state, so the user needs one place that shows cap, spent,
held and remaining, every entry, the open authorizations (a crash between authorize and record
leaves one open, and it keeps holding money until released) and any damaged lines. Releasing is
an explicit flag (``--release LABEL``), so no confirmation prompt is needed.

Standard library only at module level, per the CLI contract.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

HELP = "show the budget (cap, spent, held, remaining, ledger) or release a stale authorization"
DESCRIPTION = (
    "Show the dollar cap, what was spent, what open authorizations hold, what remains, every "
    "ledger entry and any damaged ledger lines. --release LABEL stops holding the latest open "
    "authorization for LABEL (use it for one a crashed run left behind). Caps come from "
    "budget.toml in tplab's config folder (~/.config/tplab; TPLAB_HOME when set) (lab_cap_usd, phase_cap_usd, preflight_buffer_usd, stale_after_s) "
    "and the flags below.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mock", action="store_true",
                        help="use the mock cloud's ledger (simulated spending)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--ledger", metavar="PATH", help="ledger file (default: TPLAB_HOME/spend.jsonl)")
    parser.add_argument("--config", metavar="PATH", help="budget config (default: budget.toml in the config folder)")
    parser.add_argument("--phase-cap", "--cap", type=float, metavar="USD", dest="phase_cap_usd",
                        help="the ledger's total cap: spent + held never exceeds it (default 5.00)")
    parser.add_argument("--lab-cap", type=float, metavar="USD", dest="lab_cap_usd",
                        help="most one lab may authorize (default 3.00)")
    parser.add_argument("--buffer", type=float, metavar="USD", dest="preflight_buffer_usd",
                        help="pre-flight wants remaining >= lab cap + this (default 0.50)")
    parser.add_argument("--release", metavar="LABEL",
                        help="release the latest open authorization for LABEL (no prompt)")
    parser.add_argument("--auth-id", metavar="ID",
                        help="with --release: release this authorization id instead of the latest")


def main(args: argparse.Namespace) -> int:
    from tplab.money.budget import BudgetError, fmt_usd
    from tplab.money.caps import resolve_caps

    try:
        caps = resolve_caps(mock=args.mock, lab_cap_usd=args.lab_cap_usd,
                            phase_cap_usd=args.phase_cap_usd,
                            preflight_buffer_usd=args.preflight_buffer_usd,
                            config_path=args.config, ledger_path=args.ledger)
        guard = caps.guard()
        if args.auth_id and not args.release:
            raise BudgetError("--auth-id needs --release LABEL; add the label it belongs to.")
        if args.release:
            entry = guard.release(args.release, auth_id=args.auth_id)
            if not args.json:
                print(f"Released {fmt_usd(entry.amount_usd)} held for {entry.label!r} "
                      f"(authorization {entry.auth_id}).")
        summary = guard.summary()
        preflight = guard.check_preflight(caps.lab_cap_usd, caps.preflight_buffer_usd)
    except BudgetError as exc:
        print(f"tplab budget: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tplab budget: cannot use the ledger ({exc.strerror}: {exc.filename}); "
              f"check TPLAB_HOME and its permissions.", file=sys.stderr)
        return 1

    if args.json:
        data = summary.to_dict()
        data["preflight"] = {"ok": preflight.ok, "needed_usd": preflight.needed_usd,
                             "lab_cap_usd": preflight.lab_cap_usd,
                             "buffer_usd": preflight.buffer_usd}
        print(json.dumps(data, indent=2))
    else:
        print(render(summary, preflight, mock=args.mock))
        if not args.mock and not args.ledger:
            note = mock_ledger_note()
            if note:
                print("\n" + note)
    if summary.damaged:
        print(f"tplab budget: the ledger has {len(summary.damaged)} damaged line(s), left out of "
              f"the figures above; repair or remove them in {summary.ledger_path}.", file=sys.stderr)
        return 1
    return 0


def mock_ledger_note() -> str | None:
    """A line pointing at the mock labs' own ledger when it has entries: after `tplab run
    --mock`, plain `tplab budget` (the real ledger) would otherwise show none of them."""
    from tplab.money.budget_config import default_ledger_path
    try:
        with open(default_ledger_path(mock=True), "rb") as fh:
            lines = sum(1 for line in fh if line.strip())
    except OSError:
        return None
    if not lines:
        return None
    return (f"Mock labs keep a ledger of their own (simulated money, {lines} line(s)): "
            "`tplab budget --mock` shows it.")


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def render(summary: Any, preflight: Any, mock: bool = False) -> str:
    # summary, preflight: tplab.money.budget's BudgetSummary and PreflightResult (imported lazily)
    """The human-readable report."""
    from tplab.money.budget import fmt_usd

    out = [f"Ledger     {summary.ledger_path}{'  (mock)' if mock else ''}",
           f"Cap        {fmt_usd(summary.cap_usd)}",
           f"Spent      {fmt_usd(summary.spent_usd)}",
           f"Held       {fmt_usd(summary.held_usd)}  "
           f"({len(summary.open_authorizations)} open authorization(s))",
           f"Remaining  {fmt_usd(summary.remaining_usd)}"
           + ("  OVER THE CAP" if summary.remaining_usd < 0 else ""),
           f"Pre-flight {'OK' if preflight.ok else 'NOT OK'}: needs {fmt_usd(preflight.needed_usd)} "
           f"(lab cap {fmt_usd(preflight.lab_cap_usd)} + buffer {fmt_usd(preflight.buffer_usd)})"]
    out.append("")
    if summary.open_authorizations:
        from tplab.viewmodel.ledger_view import hold_words
        out.append("Open authorizations:")
        words = hold_words(summary.open_authorizations, mock)
        for auth, said in zip(summary.open_authorizations, words):
            flag = f"  STALE: {auth.stale_reason}" if auth.stale else ""
            out.append(f"  {auth.label}  {fmt_usd(auth.amount_usd)}  since {_when(auth.ts)} UTC  "
                       f"id {auth.auth_id}{flag}")
            out.append(f"    {said}")
        if any(a.stale for a in summary.open_authorizations):
            out.append("  Check the provider has no pod left running for a stale one, then "
                       "release it: tplab budget --release LABEL")
        out.append("")
    out.append(f"Entries ({len(summary.entries)}):")
    if summary.entries:
        out.append(f"  {'line':>4}  {'time (UTC)':19}  {'kind':9}  {'amount':>9}  label")
        for e in summary.entries:
            out.append(f"  {e.line_no:>4}  {_when(e.ts)}  {e.kind:9}  {fmt_usd(e.amount_usd):>9}  "
                       f"{e.label}")
    else:
        out.append("  (none)")
    if summary.damaged:
        out.append("")
        out.append(f"Damaged lines ({len(summary.damaged)}, not counted):")
        for d in summary.damaged:
            out.append(f"  line {d.line_no}: {d.reason}")
    return "\n".join(out)
