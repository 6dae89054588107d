"""Predicted per-token decode latency, single device vs tensor parallel, as d_model grows.

Why: the lab measures a slowdown for a 0.5M-parameter model; this model says when TP starts to pay,
and why. Per token, for a model of MiniGPT-grammar's pattern scaled in d_model (``ModelShape``):

    single(d)  = max(weight+KV bytes / mem_bw,  FLOPs / peak)            + K1 · launch
    tp(d, p)   = max(weight+KV bytes / p / mem_bw, FLOPs / p / peak)     + Kp · launch
                 + (2·n_layer + 1) · allreduce(d·4 B) + allgather(vocab·4 B)

    allreduce(n) = 2(p-1)·α + 2(p-1)/p · n/β      (ring)
    allgather(N) =  (p-1)·α +  (p-1)/p · N/β      (ring, N = gathered bytes)

Assumptions (stated, not hidden): batch 1, fp32, weights read once per token (no cache reuse),
memory and compute overlap perfectly (roofline ``max``), the launch term is host overhead per
eager kernel and is *not* divided by TP (every rank launches every kernel, plus TP's own extra
ones: ``Kp > K1``), communication does not overlap compute, replicated parts (LayerNorms, position
embedding, row-parallel biases) are read by every rank. Kernel counts and the model's shape are
data in ``assets/hardware_profiles.json``; so are the hardware profiles, each number marked
assumed or measured. ``calibrate`` replaces α, β (from a run's all-reduce sweep) and the launch
overhead (from the run's measured single-device per-token time) with measured values.

Client side: no torch. matplotlib and plotext are imported inside the plotting functions.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from tplab.job.fit import fit_alpha_beta
from tplab.paths import ASSETS

PROFILES_PATH = ASSETS / "hardware_profiles.json"
SEED_D_MODELS = (64, 256, 1024, 4096)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
D_MIN, D_MAX = 16.0, 65536.0


class ScalingError(ValueError):
    """A profile, a results file or a request the scaling model cannot use (one clear sentence)."""


@dataclass(frozen=True, slots=True)
class Number:
    """A value with its provenance: ``source`` is "assumed" or "measured"."""

    value: float
    source: str
    note: str = ""

    @classmethod
    def from_json(cls, obj: Any, where: str) -> "Number":
        if not isinstance(obj, dict) or "value" not in obj or "source" not in obj:
            raise ScalingError(f"{where} must be an object with value and source.")
        value = obj["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ScalingError(f"{where} must have a non-negative number as value, got {value!r}.")
        if obj["source"] not in ("assumed", "measured"):
            raise ScalingError(f"{where}.source must be 'assumed' or 'measured'.")
        return cls(float(value), obj["source"], str(obj.get("note", "")))

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "note": self.note}


@dataclass(frozen=True, slots=True)
class HardwareProfile:
    name: str
    description: str
    devices: str
    interconnect: str
    nvlink: bool
    mem_bw_gbps: Number
    peak_tflops: Number
    launch_us: Number
    alpha_us: Number
    beta_gbps: Number
    calibrated_from: str = ""

    def numbers(self) -> dict[str, Number]:
        return {k: getattr(self, k) for k in _NUMBER_FIELDS}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description,
                               "devices": self.devices, "interconnect": self.interconnect,
                               "nvlink": self.nvlink}
        out.update({k: v.to_json() for k, v in self.numbers().items()})
        if self.calibrated_from:
            out["calibrated_from"] = self.calibrated_from
        return out


_NUMBER_FIELDS = ("mem_bw_gbps", "peak_tflops", "launch_us", "alpha_us", "beta_gbps")


@dataclass(frozen=True, slots=True)
class ModelShape:
    """MiniGPT-grammar's pattern, with d_model free (d_ff = 4·d_model, n_head = d_model/head_dim)."""

    n_layer: int = 6
    vocab_size: int = 600
    head_dim: int = 16
    context: int = 65
    bytes_per_elem: int = 4
    batch: int = 1
    kernels_per_layer: int = 12
    kernels_fixed: int = 7
    tp_kernels_per_layer: int = 16
    tp_kernels_fixed: int = 17

    def kernels(self, world_size: int) -> int:
        if world_size <= 1:
            return self.n_layer * self.kernels_per_layer + self.kernels_fixed
        return self.n_layer * self.tp_kernels_per_layer + self.tp_kernels_fixed

    def weight_elems(self, d: float, world_size: int = 1) -> float:
        """Parameters (plus KV-cache elements) one rank reads per decoded token."""
        p = max(world_size, 1)
        L, V = self.n_layer, self.vocab_size
        sharded = L * 12 * d * d + V * d + 2 * L * self.context * d * self.batch  # matrices, head, KV
        sharded_bias = L * (3 * d + 4 * d)  # qkv and up biases are column-split
        replicated = L * (2 * d + 4 * d) + 2 * d + 2 * d  # proj/down bias, 2 LNs per layer, ln_f, emb rows
        return sharded / p + sharded_bias / p + replicated

    def flops(self, d: float, world_size: int = 1) -> float:
        """FLOPs one rank does per decoded token (2 per multiply-add)."""
        p = max(world_size, 1)
        L, V = self.n_layer, self.vocab_size
        matmul = 2 * (L * 12 * d * d + V * d) * self.batch
        attention = 4 * L * self.context * d * self.batch
        return (matmul + attention) / p

    def allreduces_per_token(self) -> int:
        return 2 * self.n_layer + 1

    def message_bytes(self, d: float) -> float:
        return d * self.bytes_per_elem * self.batch

    def logits_bytes(self) -> float:
        return self.vocab_size * self.bytes_per_elem * self.batch

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class Prediction:
    d_model: float
    world_size: int
    single_ms: float
    tp_ms: float
    single_memory_ms: float
    single_compute_ms: float
    single_launch_ms: float
    tp_memory_ms: float
    tp_compute_ms: float
    tp_launch_ms: float
    comm_ms: float
    allreduces_per_token: int
    message_bytes: float
    weight_bytes: float
    flops: float

    @property
    def speedup(self) -> float:
        return self.single_ms / self.tp_ms

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["speedup"] = self.speedup
        return out


# ------------------------------------------------------------------------------ loading

def _read_assets(path: Path | None = None) -> dict[str, Any]:
    path = Path(path or PROFILES_PATH)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScalingError(f"hardware profiles file {path} does not exist.") from None
    except json.JSONDecodeError as exc:
        raise ScalingError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        raise ScalingError(f"{path} has no 'profiles' object.")
    return data


def list_profiles(path: Path | None = None) -> list[str]:
    return sorted(_read_assets(path)["profiles"])


def profile_from_json(name: str, obj: Any) -> HardwareProfile:
    if not isinstance(obj, dict):
        raise ScalingError(f"profile {name!r} must be an object.")
    nums = {k: Number.from_json(obj.get(k), f"profile {name!r} field {k}") for k in _NUMBER_FIELDS}
    for k in ("mem_bw_gbps", "peak_tflops", "beta_gbps"):
        if nums[k].value <= 0:
            raise ScalingError(f"profile {name!r} field {k} must be positive.")
    return HardwareProfile(name=name, description=str(obj.get("description", "")),
                           devices=str(obj.get("devices", "")),
                           interconnect=str(obj.get("interconnect", "")),
                           nvlink=bool(obj.get("nvlink", False)),
                           calibrated_from=str(obj.get("calibrated_from", "")), **nums)


def load_profile(name: str, path: Path | None = None) -> HardwareProfile:
    profiles = _read_assets(path)["profiles"]
    if name not in profiles:
        raise ScalingError(f"unknown hardware profile {name!r}; choose one of "
                           f"{', '.join(sorted(profiles))}.")
    return profile_from_json(name, profiles[name])


def cpu_profile_name(comm: str | None) -> str:
    """``cpu-shm`` for --comm shm or both (shm carries the figures), else ``cpu-gloo``."""
    return "cpu-shm" if comm in ("shm", "both") else "cpu-gloo"


def load_shape(path: Path | None = None) -> ModelShape:
    """The model shape from the assets file (falls back to the dataclass defaults per field)."""
    model = _read_assets(path).get("model", {})
    kw: dict[str, int] = {}
    for f in dataclasses.fields(ModelShape):
        if f.name in model:
            kw[f.name] = int(Number.from_json(model[f.name], f"model field {f.name}").value)
    return ModelShape(**kw)


def shape_from_results(results: dict[str, Any], base: ModelShape | None = None) -> ModelShape:
    """The shape of the model a run decoded (n_layer, vocab, head_dim) on top of ``base``."""
    base = base or load_shape()
    m = results.get("model") or {}
    try:
        return dataclasses.replace(base, n_layer=int(m["n_layer"]), vocab_size=int(m["vocab_size"]),
                                   head_dim=int(m["d_model"]) // int(m["n_head"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        raise ScalingError("results.json has no usable model section "
                           "(n_layer, vocab_size, d_model, n_head).") from None


# ------------------------------------------------------------------------------ the model

def _ring_allgather_s(total_bytes: float, p: int, alpha_s: float, beta_bps: float) -> float:
    return (p - 1) * alpha_s + (p - 1) / p * total_bytes / beta_bps


def _ring_allreduce_s(nbytes: float, p: int, alpha_s: float, beta_bps: float) -> float:
    return 2 * (p - 1) * alpha_s + 2 * (p - 1) / p * nbytes / beta_bps


def predict(profile: HardwareProfile, d_model: float, world_size: int = 2,
            shape: ModelShape | None = None) -> Prediction:
    """Predicted per-token decode latency (ms) of the single-device and the TP build."""
    if world_size < 2:
        raise ScalingError(f"TP needs a world size of at least 2, got {world_size}.")
    if d_model <= 0:
        raise ScalingError(f"d_model must be positive, got {d_model}.")
    shape = shape or load_shape()
    p = world_size
    bw = profile.mem_bw_gbps.value * 1e9
    peak = profile.peak_tflops.value * 1e12
    launch_s = profile.launch_us.value * 1e-6
    alpha = profile.alpha_us.value * 1e-6
    beta = profile.beta_gbps.value * 1e9
    b = shape.bytes_per_elem

    s_mem = shape.weight_elems(d_model, 1) * b / bw
    s_cmp = shape.flops(d_model, 1) / peak
    s_launch = shape.kernels(1) * launch_s
    t_mem = shape.weight_elems(d_model, p) * b / bw
    t_cmp = shape.flops(d_model, p) / peak
    t_launch = shape.kernels(p) * launch_s
    n = shape.message_bytes(d_model)
    comm = (shape.allreduces_per_token() * _ring_allreduce_s(n, p, alpha, beta)
            + _ring_allgather_s(shape.logits_bytes(), p, alpha, beta))
    single = max(s_mem, s_cmp) + s_launch
    tp = max(t_mem, t_cmp) + t_launch + comm
    return Prediction(d_model=float(d_model), world_size=p, single_ms=single * 1e3, tp_ms=tp * 1e3,
                      single_memory_ms=s_mem * 1e3, single_compute_ms=s_cmp * 1e3,
                      single_launch_ms=s_launch * 1e3, tp_memory_ms=t_mem * 1e3,
                      tp_compute_ms=t_cmp * 1e3, tp_launch_ms=t_launch * 1e3, comm_ms=comm * 1e3,
                      allreduces_per_token=shape.allreduces_per_token(), message_bytes=n,
                      weight_bytes=shape.weight_elems(d_model, 1) * b,
                      flops=shape.flops(d_model, 1))


def curve(profile: HardwareProfile, d_models: Iterable[float], world_size: int = 2,
          shape: ModelShape | None = None) -> list[Prediction]:
    shape = shape or load_shape()
    return [predict(profile, d, world_size, shape) for d in d_models]


def log_space(lo: float = D_MIN, hi: float = D_MAX, n: int = 200) -> list[float]:
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


def crossover_d_model(profile: HardwareProfile, world_size: int = 2,
                      shape: ModelShape | None = None, lo: float = D_MIN,
                      hi: float = D_MAX) -> float | None:
    """The smallest d_model in [lo, hi] from which TP is faster than one device, or None.

    Scans a log grid for the first sign change of tp - single from + to -, then bisects it (in
    log d) to a relative precision of 1e-9. If TP is already faster at ``lo``, returns ``lo``.
    """
    shape = shape or load_shape()

    def gap(d: float) -> float:
        pr = predict(profile, d, world_size, shape)
        return pr.tp_ms - pr.single_ms

    grid = log_space(lo, hi, 400)
    prev_d, prev_g = grid[0], gap(grid[0])
    if prev_g < 0:
        return lo
    for d in grid[1:]:
        g = gap(d)
        if prev_g >= 0 > g:
            a, b = math.log(prev_d), math.log(d)
            while b - a > 1e-9:
                mid = (a + b) / 2
                if gap(math.exp(mid)) >= 0:
                    a = mid
                else:
                    b = mid
            return math.exp((a + b) / 2)
        prev_d, prev_g = d, g
    return None


# ------------------------------------------------------------------------------ calibration

def calibrate(profile: HardwareProfile, results: dict[str, Any],
              shape: ModelShape | None = None) -> HardwareProfile:
    """The profile with α, β fitted to the run's all-reduce sweep and the launch overhead fitted
    to its single-device per-token time, each marked measured. What cannot be fitted (e.g. a
    noisy sweep whose times do not grow with size) stays as the profile has it, and
    ``calibrated_from`` says so; ScalingError only when nothing can be calibrated.

    The launch overhead is what is left of the measured single per-token time once the roofline
    term at the run's d_model is taken out, divided by the kernels per token (``ModelShape``).
    """
    shape = shape_from_results(results, shape)
    world = int(results.get("world_size") or 0)
    sweep = (results.get("sweep") or {}).get("points") or []
    label = (f"results.json ({results.get('comm') or results.get('backend', '?')}, world size "
             f"{world}, {results.get('env', {}).get('device_names', ['?'])[0]})")
    changes: dict[str, Any] = {"calibrated_from": label}
    fit_error = ""
    if sweep:
        try:
            fit = fit_alpha_beta([float(p["bytes"]) for p in sweep],
                                 [float(p["ms"]) / 1e3 for p in sweep], world)
        except (KeyError, TypeError, ValueError) as exc:
            fit_error = f"sweep not fitted ({exc}); alpha and beta stay as the profile has them"
        else:
            note = (f"fitted to {fit.points} sweep points of {label} "
                    f"(max relative residual {fit.max_rel_residual:.0%})")
            changes["alpha_us"] = Number(fit.alpha_s * 1e6, "measured", note)
            changes["beta_gbps"] = Number(fit.beta_bps / 1e9, "measured", note)
    single_ms = results.get("single_per_token_ms")
    d0 = (results.get("model") or {}).get("d_model")
    if isinstance(single_ms, (int, float)) and isinstance(d0, (int, float)) and single_ms > 0:
        bw = profile.mem_bw_gbps.value * 1e9
        peak = profile.peak_tflops.value * 1e12
        roof_s = max(shape.weight_elems(d0, 1) * shape.bytes_per_elem / bw,
                     shape.flops(d0, 1) / peak)
        rest_s = single_ms / 1e3 - roof_s
        if rest_s > 0:
            changes["launch_us"] = Number(
                rest_s / shape.kernels(1) * 1e6, "measured",
                f"(single per-token {single_ms:.3f} ms - roofline {roof_s * 1e3:.3f} ms) / "
                f"{shape.kernels(1)} kernels, from {label}")
    if len(changes) == 1:
        raise ScalingError("results.json has nothing to calibrate from: "
                           + (fit_error or "no sweep") + ", and no usable single-device "
                           "per-token time.")
    if fit_error:
        changes["calibrated_from"] += f"; {fit_error}"
    return dataclasses.replace(profile, **changes)


def measured_points(results: dict[str, Any]) -> dict[str, float] | None:
    """(d_model, single ms, TP ms) of a run, for overlaying on the curve."""
    try:
        return {"d_model": float(results["model"]["d_model"]),
                "single_ms": float(results["single_per_token_ms"]),
                "tp_ms": float(results["tp_per_token_ms"]),
                "world_size": int(results["world_size"])}
    except (KeyError, TypeError, ValueError):
        return None


# ------------------------------------------------------------------------------ reporting

def summary(profile: HardwareProfile, world_size: int = 2, shape: ModelShape | None = None,
            d_models: Sequence[float] = SEED_D_MODELS) -> dict[str, Any]:
    """What a report needs: the prediction at the seed's sizes, the crossover and the inputs."""
    shape = shape or load_shape()
    return {
        "profile": profile.to_json(),
        "shape": shape.to_json(),
        "world_size": world_size,
        "crossover_d_model": crossover_d_model(profile, world_size, shape),
        "predictions": [predict(profile, d, world_size, shape).to_json() for d in d_models],
    }


def _title(profile: HardwareProfile, world_size: int) -> str:
    cal = " (calibrated)" if profile.calibrated_from else ""
    return f"decode latency per token: 1 device vs TP={world_size} on {profile.name}{cal}"


def save_png(path: str | Path, profile: HardwareProfile, world_size: int = 2,
             shape: ModelShape | None = None, measured: dict[str, float] | None = None,
             lo: float = 32.0, hi: float = 16384.0, banner: str | None = None) -> Path:
    """Write the scaling curve (both curves, crossover annotated, measured points) as a PNG;
    ``banner`` (e.g. a mock lab's "MOCK") is written large above the plot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shape = shape or load_shape()
    ds = log_space(lo, hi, 200)
    preds = curve(profile, ds, world_size, shape)
    cross = crossover_d_model(profile, world_size, shape)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    ax.plot(ds, [p.single_ms for p in preds], label="1 device (predicted)", color="tab:blue")
    ax.plot(ds, [p.tp_ms for p in preds], label=f"TP={world_size} (predicted)", color="tab:orange")
    ax.plot(ds, [p.comm_ms for p in preds], label="TP comm part", color="tab:orange",
            linestyle=":", linewidth=1)
    for d in SEED_D_MODELS:
        if lo <= d <= hi:
            ax.axvline(d, color="0.85", linewidth=0.8, zorder=0)
    if cross is not None and lo <= cross <= hi:
        c = predict(profile, cross, world_size, shape)
        ax.axvline(cross, color="tab:red", linestyle="--", linewidth=1)
        ax.annotate(f"crossover d_model ≈ {cross:.0f}\n({c.tp_ms:.3g} ms/token)",
                    xy=(cross, c.tp_ms), xytext=(-170, 40), textcoords="offset points",
                    color="tab:red", arrowprops={"arrowstyle": "->", "color": "tab:red"})
    else:
        ax.text(0.02, 0.95, f"no crossover in d_model {lo:.0f}..{hi:.0f}",
                transform=ax.transAxes, color="tab:red", va="top")
    if measured:
        ax.scatter([measured["d_model"]], [measured["single_ms"]], marker="o", s=50,
                   color="tab:blue", edgecolor="black", zorder=5, label="1 device (measured)")
        ax.scatter([measured["d_model"]], [measured["tp_ms"]], marker="s", s=50,
                   color="tab:orange", edgecolor="black", zorder=5,
                   label=f"TP={int(measured.get('world_size', world_size))} (measured)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("d_model (n_layer, vocab fixed; d_ff = 4·d_model)")
    ax.set_ylabel("ms per token")
    ax.set_title(_title(profile, world_size), fontsize=10)
    if banner:
        fig.suptitle(banner, color="tab:red", fontweight="bold", fontsize=12)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left" if cross is None else "lower right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def render_plotext(profile: HardwareProfile, world_size: int = 2,
                   shape: ModelShape | None = None, measured: dict[str, float] | None = None,
                   width: int = 100, height: int = 28, lo: float = 32.0,
                   hi: float = 16384.0, color: bool = True) -> str:
    """The same plot for the terminal, as a string (plotext); ``color=False`` for plain text."""
    import plotext as plt

    shape = shape or load_shape()
    ds = log_space(lo, hi, 120)
    preds = curve(profile, ds, world_size, shape)
    cross = crossover_d_model(profile, world_size, shape)
    plt.clear_figure()
    plt.theme("default" if color else "clear")
    plt.plotsize(width, height)
    plt.xscale("log")
    plt.yscale("log")
    plt.plot(ds, [p.single_ms for p in preds], label="1 device", marker="braille")
    plt.plot(ds, [p.tp_ms for p in preds], label=f"TP={world_size}", marker="braille")
    if measured:
        plt.scatter([measured["d_model"]], [measured["single_ms"]], label="1 device measured",
                    marker="o")
        plt.scatter([measured["d_model"]], [measured["tp_ms"]], label="TP measured", marker="x")
    if cross is not None and lo <= cross <= hi:
        plt.vline(cross, "red")
        title = f"{profile.name}: crossover d_model ~ {cross:.0f}"
    else:
        title = f"{profile.name}: no crossover in d_model {lo:.0f}..{hi:.0f}"
    plt.title(title)
    plt.xlabel("d_model")
    plt.ylabel("ms/token")
    text = plt.build()
    return text if color else _ANSI.sub("", text)
