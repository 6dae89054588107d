"""The cloud facts before Start: is the key good, the balance, the quote and stock for the lab's
GPU, whether spot is offered, whether the lab fits the budget — shown in the idle Instance panel.

Why injectable: the facts come from ``tplab check`` (its function returns a ``CheckReport``),
which asks the provider over the network. The dashboard takes any callable that returns such a
report (or None), runs it in a worker thread after the first paint and after each lab, and
shows what it returns; it never needs to know the report's class. ``default_precheck`` is the
one place that chooses the callable for ``tplab-tui``: ``tplab check``'s ``gather_check`` for the
lab the options describe, except in mock mode without ``--api-url`` (the lab starts a mock cloud
of its own, so a check would ask a throwaway one: ``no_precheck``; the budget is still shown,
read from the ledger).

A report is shown as label/value rows: its ``rows()`` if it has one (a list of (label, value)),
else its dataclass fields (nested dataclasses flattened one level), with booleans as ✓/✗ and
``*_usd`` figures as dollars. Fields named like secrets are never shown.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

#: returns the check's report (``tplab check``'s CheckReport) or None; runs in a worker thread
Precheck = Callable[[], Any]

_SECRET = re.compile(r"(key|token|secret|password)$", re.I)
_MAX_ROWS = 12


def no_precheck() -> None:
    """Asks nothing: the default until the cloud check is wired in."""
    return None


def default_precheck(config: Any, mock: bool, api_url: str | None) -> Precheck:
    """The callable ``tplab-tui`` uses for ``config`` (a ``tui.lab_port.LazyConfig``): `tplab
    check` for that lab (see the module docstring for mock mode)."""
    if mock and not api_url:
        return no_precheck

    def check() -> Any:
        from tplab.faces.cloud_check import gather_check
        cfg = config.get()
        name = cfg.provider_name()
        return gather_check(mock=cfg.mock, api_url=cfg.api_url, gpu_type=cfg.gpu_type,
                            gpus=cfg.gpus, spot=cfg.spot, lab_cap_usd=cfg.lab_cap_usd,
                            phase_cap_usd=cfg.phase_cap_usd, wall_cap_s=cfg.wall_cap_s,
                            image=cfg.image,
                            name=None if name == "auto" else name)
    return check


def _value(name: str, v: Any) -> str:
    if isinstance(v, bool):
        return "✓ yes" if v else "✗ no"
    if v is None:
        return "—"
    if isinstance(v, float) and name.endswith("_usd"):
        return f"${v:,.2f}"
    if isinstance(v, float) and name.endswith(("_usd_per_hr", "_per_hr")):
        return f"${v:,.3f}/h"
    if isinstance(v, float):
        return f"{v:,.4g}"
    return " ".join(str(v).split())


def _label(name: str) -> str:
    for suffix in ("_usd_per_hr", "_per_hr", "_usd"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name.replace("_", " ")


def report_rows(report: Any) -> list[tuple[str, str]]:
    """The report as at most ``_MAX_ROWS`` (label, value) rows (see the module docstring)."""
    if report is None:
        return []
    rows_fn = getattr(report, "rows", None)
    if callable(rows_fn):
        return [(str(a), str(b)) for a, b in rows_fn()][:_MAX_ROWS]
    if not dataclasses.is_dataclass(report):
        return [("check", " ".join(str(report).split()))]
    out: list[tuple[str, str]] = []
    for f in dataclasses.fields(report):
        if _SECRET.search(f.name):
            continue
        v = getattr(report, f.name)
        if dataclasses.is_dataclass(v):
            for g in dataclasses.fields(v):
                if not _SECRET.search(g.name):
                    out.append((f"{_label(f.name)} {_label(g.name)}",
                                _value(g.name, getattr(v, g.name))))
        elif not isinstance(v, (list, dict, tuple)):
            out.append((_label(f.name), _value(f.name, v)))
    return out[:_MAX_ROWS]
