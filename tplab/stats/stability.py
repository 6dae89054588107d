"""Which figures of a run are not trustworthy: results.json's ``stability`` block.

Why one place: the report, the sweep table and the dashboard must flag the same figures with the
same sentence ("unstable: spread 37%; machine busy?"), and the calibration must know which points
to leave out. A figure is unstable when the relative spread of its samples (``harness.figure``:
IQR / median) exceeds ``harness.SPREAD_LIMIT``. The samples are:

* the lab's per-token single and TP figures: one per prompt (the prompt's median per-token ms),
  per transport (``per_pass_figures``, stored as ``single.passes`` / ``tp.passes``);
* each d_model sweep point: one per round, single and TP (``dmodel.DModelPoint``);
* each all-reduce sweep size: one per round (``tplab.job.allreduce_sweep.SweepPoint``);
* the machine itself: a fixed reference loop timed all through the run
  (``tplab.job.machine_probe``, results.json's ``machine``). When it is flagged the machine's own
  speed moved during the run, and the other flags are the machine's before they are the lab's.

Standard library only.
"""

from __future__ import annotations

from typing import Any, Sequence

from tplab.stats.fit import percentile
from tplab.stats.harness import SPREAD_DEFINITION, SPREAD_LIMIT, figure


def _pass_stat(steps: Sequence[float], q: float | None) -> float:
    return sum(steps) / len(steps) if q is None else percentile(steps, q)


def per_pass_figures(passes: Sequence[Sequence[float]]) -> dict[str, Any]:
    """p50, p99 and mean per-token ms of each pass (a prompt's decode steps), each summarized as
    a figure over the passes: its median, spread, 95 % intervals (of the median, and the t-interval
    of the mean) and n; ``pass_means_ms``: each pass's own mean, the samples a bootstrap over the
    passes redraws (``tplab.scaling.crossover``)."""
    rows = [list(p) for p in passes if p]
    if not rows:
        return {"n": 0}
    out: dict[str, Any] = {"n": len(rows)}
    for name, q in (("p50", 50.0), ("p99", 99.0), ("mean", None)):
        out[name] = figure([_pass_stat(r, q) for r in rows]).to_dict()
    out["pass_means_ms"] = [_pass_stat(r, None) for r in rows]
    return out


def _entry(name: str, fig: dict[str, Any]) -> dict[str, Any]:
    return {"figure": name, "spread": fig.get("spread"), "n": fig.get("n"),
            "note": fig.get("note") or ""}


def stability_section(results: dict[str, Any]) -> dict[str, Any]:
    """The ``stability`` block: the threshold, its definition, and every flagged figure."""
    flagged: list[dict[str, Any]] = []
    for mode in ("single", "tp"):
        fig = ((results.get(mode) or {}).get("passes") or {}).get("p50")
        if fig and fig.get("unstable"):
            flagged.append(_entry(f"{mode}_per_token_ms ({results.get('comm') or 'primary'})"
                                  if mode == "tp" else "single_per_token_ms", fig))
    for name, t in (results.get("transports") or {}).items():
        fig = ((t.get("tp") or {}).get("passes") or {}).get("p50")
        if name != results.get("comm") and fig and fig.get("unstable"):
            flagged.append(_entry(f"tp_per_token_ms ({name})", fig))
    for p in results.get("d_model_sweep") or []:
        for key, fig in (p.get("figures") or {}).items():
            if fig.get("unstable") and key != "allreduce_ms":
                flagged.append(_entry(f"d_model_sweep[{p['d_model']}].{key}", fig))
    for name, t in (results.get("transports") or {"": results}).items():
        for q in ((t.get("sweep") or {}).get("points") or []):
            fig = q.get("figure") or {}
            if fig.get("unstable"):
                flagged.append(_entry(f"sweep{f'[{name}]' if name else ''}[{q['bytes']} B].ms",
                                      fig))
    machine = ((results.get("machine") or {}).get("ms")) or {}
    if machine.get("unstable"):  # first: when the machine moved, that is the news
        flagged.insert(0, {"figure": "machine speed (reference loop)", "spread": machine["spread"],
                        "n": machine.get("n"), "note": machine_note(machine["spread"])})
    return {"spread_limit": SPREAD_LIMIT, "definition": SPREAD_DEFINITION,
            "unstable": flagged, "clean": not flagged,
            "machine_spread": machine.get("spread")}


def machine_note(spread: float) -> str:
    return (f"unstable: the machine's own speed varied {spread:.0%} during this run (a fixed "
            "reference loop); no figure can be steadier, so compare runs on a quieter machine.")


def flagged_note(results: dict[str, Any], prefix: str) -> str:
    """The note of the first flagged figure whose name starts with ``prefix`` ("" if none)."""
    for e in (results.get("stability") or {}).get("unstable") or []:
        if str(e.get("figure", "")).startswith(prefix):
            return str(e.get("note") or "")
    return ""
