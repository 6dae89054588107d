"""Predicted per-token decode latency, single device vs tensor parallel, as d_model grows.

Why: the lab measures a slowdown for a 0.5M-parameter model; this model says when TP starts to pay,
and why. Per token, for a model of MiniGPT-grammar's pattern scaled in d_model (``ModelShape``):

    single(d)  = max(weight+KV bytes / mem_bw,  FLOPs / peak)            + K1 · launch
    tp(d, p)   = max(weight+KV bytes / p / mem_bw', FLOPs / p / peak')   + Kp · launch'
                 + (2·n_layer + 1) · allreduce(d·4 B) + allgather(vocab·4 B)

(mem_bw', peak', launch' are a TP rank's when the profile sets ``tp_*`` — ranks sharing one host's
memory bandwidth, TP's own per-op costs — and the single-device values otherwise.)

    allreduce(n) = 2(p-1)·α + 2(p-1)/p · n/β      (ring)
    allgather(N) =  (p-1)·α +  (p-1)/p · N/β      (ring, N = gathered bytes)

Assumptions (stated, not hidden): batch 1, fp32, weights read once per token (no cache reuse),
memory and compute overlap perfectly (roofline ``max``), the launch term is host overhead per
eager kernel and is *not* divided by TP (every rank launches every kernel, plus TP's own extra
ones: ``Kp > K1``), communication does not overlap compute, replicated parts (LayerNorms, position
embedding, row-parallel biases) are read by every rank. Kernel counts and the model's shape are
data in ``tplab/assets/hardware_profiles.json``; so are the hardware profiles, each number marked
assumed or measured. ``tplab.scaling.calibration`` calibrates a profile from a run (fitted to its d_model
sweep when it has one); ``tplab.scaling.chart`` draws the curves.

Client side: no torch.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from tplab.home.paths import ASSETS, DEFAULT_CHECKPOINT
from tplab.model.config import GPTConfig  # a plain dataclass: no torch

PROFILES_PATH = ASSETS / "hardware_profiles.json"
SHEET_D_MODELS = (64, 256, 1024, 4096)
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
    def from_json(cls, obj: Any, where: str) -> Number:
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
    # what one TP rank gets, when it differs from one device alone (ranks sharing a host's memory
    # bandwidth, TP's own per-op costs); None: the single-device value
    tp_mem_bw_gbps: Number | None = None
    tp_peak_tflops: Number | None = None
    tp_launch_us: Number | None = None
    #: bootstrap replicates of the profile's measured terms (``replicate_terms``, each row one
    #: resample of the run that calibrated the profile): their spread is the profile's own
    #: uncertainty, which ``tplab.scaling.crossover`` carries into a crossover; () when assumed
    replicate_terms: tuple[str, ...] = ()
    replicates: tuple[tuple[float, ...], ...] = ()
    replicates_note: str = ""

    def replicate(self, i: int) -> HardwareProfile:
        """This profile with its terms from replicate ``i`` (modulo their count); itself when it
        has none."""
        if not self.replicates:
            return self
        row = self.replicates[i % len(self.replicates)]
        changes: dict[str, Any] = {name: Number(v, "measured", "bootstrap replicate")
                                   for name, v in zip(self.replicate_terms, row)}
        return dataclasses.replace(self, **changes)

    def numbers(self) -> dict[str, Number]:
        out = {k: getattr(self, k) for k in _NUMBER_FIELDS}
        out.update({k: getattr(self, k) for k in _TP_FIELDS if getattr(self, k) is not None})
        return out

    def tp_value(self, name: str) -> float:
        """A TP rank's mem_bw_gbps, peak_tflops or launch_us (the single value when not set)."""
        n = getattr(self, "tp_" + name)
        return (n if n is not None else getattr(self, name)).value

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description,
                               "devices": self.devices, "interconnect": self.interconnect,
                               "nvlink": self.nvlink}
        out.update({k: v.to_json() for k, v in self.numbers().items()})
        if self.calibrated_from:
            out["calibrated_from"] = self.calibrated_from
        if self.replicates:
            out["replicates"] = {"terms": list(self.replicate_terms), "count": len(self.replicates),
                                 "about": self.replicates_note}
        return out


_NUMBER_FIELDS = ("mem_bw_gbps", "peak_tflops", "launch_us", "alpha_us", "beta_gbps")
_TP_FIELDS = ("tp_mem_bw_gbps", "tp_peak_tflops", "tp_launch_us")


_MODEL = GPTConfig()  # the model's own defaults; load_shape reads the shipped checkpoint's


@dataclass(frozen=True, slots=True)
class ModelShape:
    """MiniGPT-grammar's pattern, with d_model free (d_ff = 4·d_model, n_head = d_model/head_dim).

    Its shape (layers, vocabulary, head size) is the model's, never written here: the defaults
    are ``GPTConfig``'s and ``load_shape`` takes the shipped checkpoint's own; the rest (context,
    kernel counts) are the scaling model's measured or assumed figures (hardware_profiles.json)."""

    n_layer: int = _MODEL.n_layer
    vocab_size: int = _MODEL.vocab_size
    head_dim: int = _MODEL.head_dim
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

    def roofline_s(self, d: float, p: int, bw: float, peak: float) -> float:
        """One rank's roofline seconds per token at d_model ``d`` over ``p`` ranks: the weights
        read at ``bw`` bytes/s or the flops at ``peak`` flop/s, whichever is longer."""
        return max(self.weight_elems(d, p) * self.bytes_per_elem / bw, self.flops(d, p) / peak)

    def comm_coefficients(self, d: float, p: int) -> tuple[float, float]:
        """(A, B) with comm seconds per token = A·α + B/β (ring all-reduces + the logits gather)."""
        n_ar = self.allreduces_per_token()
        a = n_ar * 2 * (p - 1) + (p - 1)
        b = (n_ar * 2 * (p - 1) / p * self.message_bytes(d)
             + (p - 1) / p * self.logits_bytes())
        return a, b

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
    for k in _TP_FIELDS:
        if obj.get(k) is not None:
            nums[k] = Number.from_json(obj[k], f"profile {name!r} field {k}")
    for k in ("mem_bw_gbps", "peak_tflops", "beta_gbps", "tp_mem_bw_gbps", "tp_peak_tflops"):
        if k in nums and nums[k].value <= 0:
            raise ScalingError(f"profile {name!r} field {k} must be positive.")
    terms, rows, about = _replicates(name, obj.get("replicates"), set(nums))
    return HardwareProfile(name=name, description=str(obj.get("description", "")),
                           devices=str(obj.get("devices", "")),
                           interconnect=str(obj.get("interconnect", "")),
                           nvlink=bool(obj.get("nvlink", False)),
                           calibrated_from=str(obj.get("calibrated_from", "")),
                           replicate_terms=terms, replicates=rows, replicates_note=about, **nums)


def _replicates(name: str, obj: Any, known: set[str]
                ) -> tuple[tuple[str, ...], tuple[tuple[float, ...], ...], str]:
    """A profile's ``replicates`` {terms, values, about}: each row a positive value per term."""
    if obj is None:
        return (), (), ""
    where = f"profile {name!r} field replicates"
    terms, values = (obj.get("terms"), obj.get("values")) if isinstance(obj, dict) else (None, None)
    if (not isinstance(terms, list) or not terms or not set(terms) <= known
            or not isinstance(values, list)):
        raise ScalingError(f"{where} must name some of the profile's terms and list their values.")
    rows = []
    for row in values:
        ok = (isinstance(row, list) and len(row) == len(terms)
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                      for v in row))
        if not ok:
            raise ScalingError(f"{where}: every row must hold one positive number per term.")
        rows.append(tuple(float(v) for v in row))
    return tuple(terms), tuple(rows), str(obj.get("about", ""))


def load_profile(name: str, path: Path | None = None) -> HardwareProfile:
    profiles = _read_assets(path)["profiles"]
    if name not in profiles:
        raise ScalingError(f"unknown hardware profile {name!r}; choose one of "
                           f"{', '.join(sorted(profiles))}.")
    return profile_from_json(name, profiles[name])


def cpu_profile_name(comm: str | None) -> str:
    """``cpu-shm`` for --comm shm or both (shm carries the figures), else ``cpu-gloo``."""
    return "cpu-shm" if comm in ("shm", "both") else "cpu-gloo"


#: the fields that are the model's shape, read from its checkpoint (not the assets file)
SHAPE_FIELDS = ("n_layer", "vocab_size", "head_dim")


@functools.cache
def checkpoint_shape(checkpoint: Path = DEFAULT_CHECKPOINT) -> dict[str, int]:
    """n_layer, vocab_size and head_dim of ``checkpoint`` (its header, read without torch); the
    model's defaults when the file is missing or unreadable."""
    from tplab.model.checkpoint_file import CheckpointError, Unrecognised, read_header
    try:
        cfg = read_header(checkpoint).config
    except (CheckpointError, Unrecognised, OSError):
        cfg = _MODEL
    return {"n_layer": cfg.n_layer, "vocab_size": cfg.vocab_size, "head_dim": cfg.head_dim}


def load_shape(path: Path | None = None, checkpoint: Path = DEFAULT_CHECKPOINT) -> ModelShape:
    """The shipped model's shape (``checkpoint_shape``) with the scaling model's figures from the
    assets file (the dataclass defaults for any it lacks)."""
    model = _read_assets(path).get("model", {})
    kw: dict[str, int] = dict(checkpoint_shape(checkpoint))
    for f in dataclasses.fields(ModelShape):
        if f.name in model and f.name not in SHAPE_FIELDS:
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
    t_mem = shape.weight_elems(d_model, p) * b / (profile.tp_value("mem_bw_gbps") * 1e9)
    t_cmp = shape.flops(d_model, p) / (profile.tp_value("peak_tflops") * 1e12)
    t_launch = shape.kernels(p) * profile.tp_value("launch_us") * 1e-6
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


def gap_ms(profile: HardwareProfile, world_size: int = 2,
           shape: ModelShape | None = None) -> Callable[[float], float]:
    """d_model -> TP minus single-device ms per token (``predict``'s two totals without building
    a ``Prediction``: the crossover and its bootstrap evaluate it tens of thousands of times)."""
    shape = shape or load_shape()
    p = world_size
    bw, peak = profile.mem_bw_gbps.value * 1e9, profile.peak_tflops.value * 1e12
    bw_p, peak_p = profile.tp_value("mem_bw_gbps") * 1e9, profile.tp_value("peak_tflops") * 1e12
    launch = shape.kernels(1) * profile.launch_us.value * 1e-6
    launch_p = shape.kernels(p) * profile.tp_value("launch_us") * 1e-6
    alpha, beta = profile.alpha_us.value * 1e-6, profile.beta_gbps.value * 1e9
    b = shape.bytes_per_elem
    n_ar = shape.allreduces_per_token()
    fixed_comm = _ring_allgather_s(shape.logits_bytes(), p, alpha, beta) + n_ar * 2 * (p - 1) * alpha
    per_byte = n_ar * 2 * (p - 1) / p / beta

    def gap(d: float) -> float:
        single = max(shape.weight_elems(d, 1) * b / bw, shape.flops(d, 1) / peak) + launch
        tp = (max(shape.weight_elems(d, p) * b / bw_p, shape.flops(d, p) / peak_p) + launch_p
              + fixed_comm + per_byte * shape.message_bytes(d))
        return (tp - single) * 1e3

    return gap


#: points of the log grid the crossover is first looked for on, then bisected
CROSSOVER_GRID = 96


def crossover_d_model(profile: HardwareProfile, world_size: int = 2,
                      shape: ModelShape | None = None, lo: float = D_MIN,
                      hi: float = D_MAX) -> float | None:
    """The smallest d_model in [lo, hi] from which TP is faster than one device, or None.

    Scans a log grid for the first sign change of tp - single from + to -, then bisects it (in
    log d) to a relative precision of 1e-7. If TP is already faster at ``lo``, returns ``lo``.
    """
    if world_size < 2:
        raise ScalingError(f"TP needs a world size of at least 2, got {world_size}.")
    gap = gap_ms(profile, world_size, shape)
    grid = log_space(lo, hi, CROSSOVER_GRID)
    prev_d, prev_g = grid[0], gap(grid[0])
    if prev_g < 0:
        return lo
    for d in grid[1:]:
        g = gap(d)
        if prev_g >= 0 > g:
            a, b = math.log(prev_d), math.log(d)
            while b - a > 1e-7:
                mid = (a + b) / 2
                if gap(math.exp(mid)) >= 0:
                    a = mid
                else:
                    b = mid
            return math.exp((a + b) / 2)
        prev_d, prev_g = d, g
    return None


# ------------------------------------------------------------------------------ reporting

def summary(profile: HardwareProfile, world_size: int = 2, shape: ModelShape | None = None,
            d_models: Sequence[float] = SHEET_D_MODELS) -> dict[str, Any]:
    """What a report needs: the prediction at the lab sheet's sizes and the inputs (the crossover is
    ``tplab.scaling.crossover``'s band, with its uncertainty)."""
    shape = shape or load_shape()
    return {
        "profile": profile.to_json(),
        "shape": shape.to_json(),
        "world_size": world_size,
        "predictions": [predict(profile, d, world_size, shape).to_json() for d in d_models],
    }
