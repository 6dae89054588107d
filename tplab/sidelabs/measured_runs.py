"""The runs whose measured figures the distributed survey may quote, read and checked.

``DISTRIBUTED.md`` quotes a measured figure only from a run the user points at: a ``tplab ddp
--out DIR`` run (``ddp-results.json``: the gradient all-reduce's share of a training step) and a
``tplab local --out DIR`` run (``results.json``: the TP collectives' time per decoded token). Each
is accepted only if it is a run of the same model shape as the checkpoint the survey describes and
if it did not fail, so a figure is never borrowed from another model or from a broken run; a run
that is not given is reported as "not measured here". Nothing here searches for runs.

Standard library only (``tplab.records.results`` is torch-free).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DDP_FILE = "ddp-results.json"
TP_FILE = "results.json"
CONFIG_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "d_model", "d_ff")


class MeasuredRunError(ValueError):
    """A run cannot be quoted; the message says why and what to do."""


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def _resolve(path: Path, name: str, flag: str, command: str) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / name
    if not p.is_file():
        raise MeasuredRunError(f"{flag} {path}: no {name} there; pass the directory a `{command} --out DIR` "
                               "run wrote, or leave the flag out.")
    return p


def _read_json(p: Path, flag: str) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise MeasuredRunError(f"{flag} {p} is not readable JSON ({exc}); pass a complete run.") from None
    if not isinstance(data, dict):
        raise MeasuredRunError(f"{flag} {p} is not a tplab run file.")
    return data


def _date(data: dict[str, Any], p: Path) -> str:
    ts = data.get("started_at")
    if isinstance(ts, (int, float)):
        return _utc(float(ts))
    return f"{_utc(os.path.getmtime(p))} (file time; the run did not record its start)"


def _config(model: Any, flag: str, p: Path) -> dict[str, int]:
    try:
        return {k: int(model[k]) for k in CONFIG_KEYS}
    except (KeyError, TypeError, ValueError):
        raise MeasuredRunError(f"{flag} {p} does not record the model's shape; re-run it with this tplab.") from None


@dataclass(frozen=True)
class DDPMeasured:
    """What a ``tplab ddp`` run measured, as the survey quotes it."""

    path: str
    date: str
    nproc: int
    steps: int
    batch_size: int
    backend: str
    bucket_cap_mb: float
    model: dict[str, int]
    params: int
    step_ms_median: float
    allreduce_ms_median: float
    allreduce_share: float
    bytes_per_step: int
    buckets_per_step: float
    loss_fell: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DDPMeasured:
        return cls(**data)


@dataclass(frozen=True)
class TPMeasured:
    """What a ``tplab local`` (or cloud lab) run measured, as the survey quotes it.

    ``crossover`` is the run's own crossover band (``tplab.scaling.crossover``: the one its
    `tplab local` stored in results.json's ``calibration``, else made now from the whole
    results.json the same way), so the survey quotes the answer every other face gives.
    """

    path: str
    date: str
    world_size: int
    backend: str
    device: str
    compiled: bool
    model: dict[str, int]
    allreduce_ms_per_token: float
    collectives_per_token: float
    bytes_per_collective: float
    tp_per_token_ms: float
    single_per_token_ms: float
    instrumented_per_token_ms: float  # TP token time in the pass whose collectives were timed
    instrumented_prompts: int
    crossover: dict[str, Any] | None = None

    @property
    def bytes_per_token(self) -> float:
        return self.collectives_per_token * self.bytes_per_collective

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TPMeasured:
        return cls(**data)


def load_ddp_run(path: Path, flag: str = "--ddp-run") -> DDPMeasured:
    """The figures of a ``tplab ddp --out DIR`` run (DIR or its ddp-results.json)."""
    p = _resolve(path, DDP_FILE, flag, "tplab ddp")
    d = _read_json(p, flag)
    if d.get("lab") != "ddp":
        raise MeasuredRunError(f"{flag} {p} is not a `tplab ddp` result (no \"lab\": \"ddp\").")
    if not d.get("params_in_sync"):
        raise MeasuredRunError(f"{flag} {p}: the DDP replicas ended out of sync, so its timings are not "
                               "of a working DDP run; run `tplab ddp` again.")
    try:
        s, rank0 = d["settings"], d["per_rank"][0]
        return DDPMeasured(
            path=str(p.resolve()), date=_date(d, p), nproc=int(s["nproc"]), steps=int(s["steps"]),
            batch_size=int(s["batch_size"]), backend=str(d.get("backend", "gloo")),
            bucket_cap_mb=float(s["bucket_cap_mb"]), model=_config(s["model"], flag, p),
            params=int(d["params"]), step_ms_median=float(d["step_ms_median"]),
            allreduce_ms_median=float(d["allreduce_ms_median"]), allreduce_share=float(d["allreduce_share"]),
            bytes_per_step=int(rank0["bytes_per_step"]), buckets_per_step=float(rank0["buckets_per_step"]),
            loss_fell=bool(d.get("loss_fell")))
    except (KeyError, IndexError, TypeError, ValueError):
        raise MeasuredRunError(f"{flag} {p} lacks fields a complete `tplab ddp` run writes; "
                               "run `tplab ddp` again.") from None


def load_tp_run(path: Path, flag: str = "--tp-run") -> TPMeasured:
    """The figures of a ``tplab local --out DIR`` run (DIR or its results.json)."""
    from tplab.records.results import load_results

    p = _resolve(path, TP_FILE, flag, "tplab local")
    try:
        d = load_results(p)
    except ValueError as exc:
        raise MeasuredRunError(f"{flag}: {exc}") from None
    if d.get("outputs_match") is not True:
        raise MeasuredRunError(f"{flag} {p}: the TP outputs did not match the single-device ones, so its "
                               "timings are not of a working TP run; run `tplab local` again.")
    try:
        env = d.get("env") or {}
        names = env.get("device_names") or [d.get("device_type") or "?"]
        return TPMeasured(
            path=str(p.resolve()), date=_date(d, p), world_size=int(d["world_size"]),
            backend=str(d.get("backend")), device=str(names[0]),
            compiled=bool((d.get("config") or {}).get("compile")), model=_config(d.get("model"), flag, p),
            allreduce_ms_per_token=float(d["allreduce_ms_per_token"]),
            collectives_per_token=float(d["allreduce_calls_per_token"]),
            bytes_per_collective=float(d["allreduce_bytes_per_call"]),
            tp_per_token_ms=float(d["tp_per_token_ms"]), single_per_token_ms=float(d["single_per_token_ms"]),
            instrumented_per_token_ms=float(d["tp"]["instrumented_per_token_ms"]["mean"]),
            instrumented_prompts=int((d.get("config") or {}).get("instrumented_prompts") or 0),
            crossover=_run_band(d))
    except (KeyError, IndexError, TypeError, ValueError):
        raise MeasuredRunError(f"{flag} {p} lacks fields a complete `tplab local` run writes; "
                               "run `tplab local` again.") from None


def _run_band(results: dict[str, Any]) -> dict[str, Any] | None:
    """The run's crossover band: stored by the run, else made from its results now (None when
    the run cannot be calibrated)."""
    from tplab.scaling import crossover, latency
    stored = crossover.CrossoverBand.from_dict((results.get("calibration") or {}).get("crossover"))
    if stored is not None:
        return stored.to_dict()
    name = latency.cpu_profile_name(results.get("comm")) if results.get("device_type") == "cpu" \
        else None
    try:
        from tplab.scaling.calibration import profile_for_run
        name = name or profile_for_run(results)[0]
        if name is None:
            return None
        return crossover.for_run(latency.load_profile(name), results).to_dict()
    except (latency.ScalingError, KeyError, TypeError, ValueError):
        return None


def check_same_model(run_model: dict[str, int], config: dict[str, int], flag: str, run_path: str,
                     checkpoint: str) -> None:
    """MeasuredRunError unless the run's model has the checkpoint's shape."""
    diff = [f"{k} {run_model.get(k)} vs {config.get(k)}" for k in CONFIG_KEYS if run_model.get(k) != config.get(k)]
    if diff:
        raise MeasuredRunError(f"{flag} {run_path} measured a model of another shape than {checkpoint} "
                               f"({', '.join(diff)}); re-run it on this checkpoint or leave {flag} out.")
