"""Drawing the scaling curve: the PNG (matplotlib) and the terminal plot (plotext).

Why apart from the model: what is drawn must say what was measured and what was predicted. Both
plots draw the predicted single-device and TP lines and, when a run gave them, the measured points
of both curves (the d_model sweep's, and the lab's own checkpoint point), the predicted crossover
and the measured one, each labelled as such. The predicted crossover is its band
(``tplab.scaling.crossover.CrossoverBand``) when one is given: a shaded range, or the region
above "no crossover below d_model N" hatched, never a lone line where the curves overlap. Every
series has its own marker, so the terminal plot reads without colour when piped
(``color=False``): single predicted ``.``, TP predicted ``+``, single measured ``o``, TP measured
``x``, measured crossover ``*``; the predicted crossover (or its band's two ends) the vertical
line(s).

Client side: no torch; matplotlib and plotext are imported inside the functions.
"""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path
from typing import Any, Sequence

from tplab.scaling.latency import (
    HardwareProfile,
    ModelShape,
    crossover_d_model,
    curve,
    load_shape,
    log_space,
    predict,
    SHEET_D_MODELS,
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _title(profile: HardwareProfile, world_size: int) -> str:
    cal = " (calibrated)" if profile.calibrated_from else ""
    return f"decode latency per token: 1 device vs TP={world_size} on {profile.name}{cal}"


def _range(lo: float, hi: float, sweep: Sequence[dict[str, Any]] | None) -> tuple[float, float]:
    ds = [float(p["d_model"]) for p in sweep or []]
    return (min([lo, *[d / 1.5 for d in ds]]), max([hi, *[d * 1.5 for d in ds]]))


def _cross_ms(sweep: Sequence[dict[str, Any]], cross: float) -> float | None:
    """The measured curves' ms at the measured crossover (log-log interpolation of single)."""
    pts = sorted(sweep, key=lambda p: p["d_model"])
    for a, b in zip(pts, pts[1:]):
        if a["d_model"] <= cross <= b["d_model"]:
            t = math.log(cross / a["d_model"]) / math.log(b["d_model"] / a["d_model"])
            return math.exp(math.log(a["single_ms"]) * (1 - t) + math.log(b["single_ms"]) * t)
    return None


def _usable(sweep: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [p for p in sweep or [] if p.get("single_ms") and p.get("tp_ms")]


def _predicted(profile: Any, world_size: int, shape: Any, sweep: Any, lo: float, hi: float,
               n: int) -> tuple[Any, list[dict[str, Any]], list[float], list[Any], Any]:
    """What both plots draw: the shape, the usable sweep points, ``n`` d_model values over the
    range (widened to the points), the predictions there and the predicted crossover."""
    shape = shape or load_shape()
    points = _usable(sweep)
    lo, hi = _range(lo, hi, points)
    ds = log_space(lo, hi, n)
    return (shape, points, ds, curve(profile, ds, world_size, shape),
            crossover_d_model(profile, world_size, shape))


def save_png(path: str | Path, profile: HardwareProfile, world_size: int = 2,
             shape: ModelShape | None = None, measured: dict[str, float] | None = None,
             sweep: Sequence[dict[str, Any]] | None = None,
             measured_crossover: float | None = None, measured_reason: str = "",
             lo: float = 32.0, hi: float = 16384.0, banner: str | None = None,
             warning: str | None = None, band: Any = None) -> Path:
    """Write the scaling curve as a PNG: predicted lines, measured points, both crossovers (the
    predicted one as ``band`` draws it when given); ``banner`` (e.g. a mock lab's "MOCK") is
    written large above the plot, ``warning`` (a calibration that misses its own points:
    ``calibration.miss_warning``) in red on it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shape, sweep, ds, preds, cross = _predicted(profile, world_size, shape, sweep, lo, hi, 200)
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    ax.plot(ds, [p.single_ms for p in preds], label="1 device, predicted", color="tab:blue")
    ax.plot(ds, [p.tp_ms for p in preds], label=f"TP={world_size}, predicted", color="tab:orange")
    ax.plot(ds, [p.comm_ms for p in preds], label="TP comm part, predicted", color="tab:orange",
            linestyle=":", linewidth=1)
    for d in SHEET_D_MODELS:
        if lo <= d <= hi:
            ax.axvline(d, color="0.88", linewidth=0.8, zorder=0)
    if sweep:
        ax.scatter([p["d_model"] for p in sweep], [p["single_ms"] for p in sweep], marker="o",
                   s=55, color="tab:blue", edgecolor="black", zorder=5,
                   label="1 device, measured (d_model sweep)")
        ax.scatter([p["d_model"] for p in sweep], [p["tp_ms"] for p in sweep], marker="s", s=55,
                   color="tab:orange", edgecolor="black", zorder=5,
                   label=f"TP={world_size}, measured (d_model sweep)")
    if measured:
        ax.scatter([measured["d_model"]], [measured["single_ms"]], marker="D", s=45,
                   color="tab:blue", edgecolor="black", zorder=6, label="1 device, measured (lab)")
        ax.scatter([measured["d_model"]], [measured["tp_ms"]], marker="D", s=45,
                   color="tab:orange", edgecolor="black", zorder=6,
                   label=f"TP={int(measured.get('world_size', world_size))}, measured (lab)")
    notes = []
    if band is not None and band.kind != "point":
        notes += _draw_band(ax, band, lo, hi)
    elif cross is not None and lo <= cross <= hi:
        c = predict(profile, cross, world_size, shape)
        ax.axvline(cross, color="tab:red", linestyle="--", linewidth=1,
                   label=f"predicted crossover d_model ≈ {cross:.0f}")
        ax.annotate(f"predicted\n≈ {cross:.0f}", xy=(cross, c.tp_ms), xytext=(8, 30),
                    textcoords="offset points", color="tab:red", fontsize=8)
    else:
        notes.append(f"predicted: no crossover in d_model {lo:.0f}..{hi:.0f}")
    if measured_crossover is not None:
        y = _cross_ms(sweep, measured_crossover)
        ax.axvline(measured_crossover, color="tab:green", linestyle="-", linewidth=1.5,
                   label=f"measured crossover d_model ≈ {measured_crossover:.0f}")
        if y is not None:
            ax.scatter([measured_crossover], [y], marker="*", s=160, color="tab:green",
                       edgecolor="black", zorder=7)
            ax.annotate(f"measured\n≈ {measured_crossover:.0f}", xy=(measured_crossover, y),
                        xytext=(12, -34), textcoords="offset points", color="tab:green",
                        fontsize=8)
    elif sweep:
        notes.append("measured: " + (measured_reason or "no crossover within the sweep"))
    if warning:
        notes.append(textwrap.fill(warning, 110))
    if notes:
        ax.text(0.02, 0.97, "\n".join(notes), transform=ax.transAxes, color="tab:red", va="top",
                fontsize=8, wrap=True)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("d_model (n_layer, vocab fixed; d_ff = 4·d_model)")
    ax.set_ylabel("ms per token")
    ax.set_title(_title(profile, world_size), fontsize=10)
    if banner:
        fig.suptitle(banner, color="tab:red", fontweight="bold", fontsize=12)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _draw_band(ax: Any, band: Any, lo: float, hi: float) -> list[str]:
    """The predicted crossover's band on the PNG's axes; the notes it needs beside the plot."""
    where = band.where
    if band.kind == "range":
        a, b = max(band.lo, lo), min(band.hi, hi)
        if a < b:
            ax.axvspan(a, b, color="tab:red", alpha=0.15, zorder=0,
                       label=f"predicted crossover, 95% band: d_model {band.lo:,.0f}–{band.hi:,.0f}")
        if band.estimate is not None and lo <= band.estimate <= hi:
            ax.axvline(band.estimate, color="tab:red", linestyle="--", linewidth=1,
                       label=f"central fit ≈ {band.estimate:,.0f}")
        return [f"predicted crossover: {band.lo:,.0f}–{band.hi:,.0f} ({where})"]
    below = band.below
    if below < hi:
        ax.axvspan(max(below, lo), hi, facecolor="none", edgecolor="tab:red", hatch="//",
                   alpha=0.35, zorder=0,
                   label=f"a crossover, if any, lies above d_model {below:,.0f}")
    return [f"predicted: no crossover below d_model {below:,.0f} ({where}): above it the data "
            "cannot tell TP's gain from zero"]


def render_plotext(profile: HardwareProfile, world_size: int = 2,
                   shape: ModelShape | None = None, measured: dict[str, float] | None = None,
                   width: int = 100, height: int = 28, lo: float = 32.0,
                   hi: float = 16384.0, color: bool = True,
                   sweep: Sequence[dict[str, Any]] | None = None,
                   measured_crossover: float | None = None, band: Any = None) -> str:
    """The same plot for the terminal, as a string (plotext); ``color=False`` for plain text.
    A ``band`` draws the predicted crossover's two ends (or "none below N"'s N) as lines."""
    import plotext as plt

    shape, sweep, ds, preds, cross = _predicted(profile, world_size, shape, sweep, lo, hi, 120)
    plt.clear_figure()
    plt.theme("default" if color else "clear")
    plt.plotsize(width, height)
    plt.xscale("log")
    plt.yscale("log")
    plt.plot(ds, [p.single_ms for p in preds], label="1 device predicted (.)", marker=".")
    plt.plot(ds, [p.tp_ms for p in preds], label=f"TP={world_size} predicted (+)", marker="+")
    pts = list(sweep)
    if measured:
        pts.append({"d_model": measured["d_model"], "single_ms": measured["single_ms"],
                    "tp_ms": measured["tp_ms"]})
    if pts:
        plt.scatter([p["d_model"] for p in pts], [p["single_ms"] for p in pts],
                    label="1 device measured (o)", marker="o")
        plt.scatter([p["d_model"] for p in pts], [p["tp_ms"] for p in pts],
                    label="TP measured (x)", marker="x")
    parts = [profile.name]
    if band is not None and band.kind != "point":
        for end in (band.lo, band.hi) if band.kind == "range" else (band.below,):
            if end is not None and lo <= end <= hi:
                plt.vline(end, "red")
        parts.append(f"predicted crossover {band.short()} (|)")
    elif cross is not None and lo <= cross <= hi:
        plt.vline(cross, "red")
        parts.append(f"predicted crossover ~{cross:.0f} (|)")
    else:
        parts.append("no predicted crossover in range")
    if measured_crossover is not None:
        y = _cross_ms(sweep, measured_crossover)
        if y is not None:
            plt.scatter([measured_crossover], [y], label="measured crossover (*)", marker="*")
        parts.append(f"measured crossover ~{measured_crossover:.0f} (*)")
    elif sweep:
        parts.append("no measured crossover in the sweep")
    plt.title(", ".join(parts))
    plt.xlabel("d_model")
    plt.ylabel("ms/token")
    text = plt.build()
    return text if color else _ANSI.sub("", text)
