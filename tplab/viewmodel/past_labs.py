"""Labs that already ran, as the faces list and reopen them: their folders, manifests and streams.

Why: a lab's folder keeps everything (``manifest.json``, ``stream.jsonl``, ``results.json``, the
pod's ``job.log``), so looking at one again needs no lab logic: list the folders, read each
manifest for a row, and play the stream through the same ``LabState`` a live lab fills. Every
file here was written by tplab, but a folder may be damaged or half-written (a crash): a file
that is missing, too big or not what it should be makes that row say so, never an exception.
Standard library only.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from tplab.records.events import Event, EventDecoder, EventError, decode_line
from tplab.records.untrusted import finite

MANIFEST_LIMIT = 4 << 20        # bytes: a manifest is a few kB
RESULTS_LIMIT = 8 << 20
STREAM_LIMIT = 256 << 20
JOB_LOG_TAIL = 256 << 10        # the last 256 kB of job.log is what explains a failure
MAX_LABS = 500
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


@dataclass(frozen=True)
class PastLab:
    """One row of the Labs list: what a lab's folder says about it."""

    path: Path
    lab_id: str
    started: float | None = None          # epoch seconds (manifest start_ts, else the folder)
    gpu: str = ""                         # the manifest's instance_type
    status: str = "?"
    reason: str = ""
    speedup: float | None = None          # single / TP, measured
    d_model: int | None = None            # the model the lab measured
    crossover: float | None = None        # the manifest's crossover_d_model
    crossover_band: str = ""              # the predicted crossover's band, short ("1.4k–2.1k")
    cost_usd: float | None = None         # actual, from the provider
    verified_gone: bool | None = None
    pod_id: str | None = None
    mock: bool = False
    has_stream: bool = False
    manifest: dict[str, Any] = field(default_factory=dict, repr=False)
    problem: str | None = None            # what is wrong with the folder, one sentence

    @property
    def crossover_text(self) -> str:
        """Measured side and predicted band: '>64 meas · 1.4k–2.1k pred'."""
        parts = []
        if self.speedup is not None and self.d_model:
            parts.append(f"{'>' if self.speedup < 1 else '≤'}{self.d_model} meas")
        if self.crossover_band:
            parts.append(f"{self.crossover_band} pred")
        elif self.crossover:
            parts.append(f"≈{self.crossover:,.0f} pred")
        return " · ".join(parts) or "—"


def default_roots() -> list[Path]:
    """TPLAB_HOME/labs and TPLAB_HOME/mock/labs (where labs go without --out), and the ``--out``
    folders labs on this machine were written to (``tplab.home.lab_folders``)."""
    from tplab.home.lab_folders import remembered
    from tplab.home.paths import tplab_home
    return [tplab_home(False) / "labs", tplab_home(True) / "labs",
            *remembered(False), *remembered(True)]


def is_lab_dir(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / "stream.jsonl").is_file()


def find_labs(roots: Iterable[Path] = (), extra: Iterable[Path] = ()) -> list[PastLab]:
    """The labs in ``roots`` (folders of lab folders) and ``extra`` (lab folders, or folders
    of them: the ``--out`` folders a user named), newest first, at most ``MAX_LABS``."""
    dirs: dict[Path, None] = {}
    for base in [*roots, *extra]:
        base = Path(base).expanduser()
        if is_lab_dir(base):
            dirs[base.resolve()] = None
        elif base.is_dir():
            try:
                children = sorted(base.iterdir(), key=_mtime, reverse=True)[:MAX_LABS]
            except OSError:
                continue
            for child in children:
                if child.is_dir() and is_lab_dir(child):
                    dirs[child.resolve()] = None
    labs = [read_lab(d) for d in dirs]
    labs.sort(key=lambda lab: lab.started or 0.0, reverse=True)
    return labs[:MAX_LABS]


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _read_json(path: Path, limit: int) -> tuple[dict[str, Any] | None, str | None]:
    from tplab.util.bounded_read import TooLargeError, read_bounded
    try:
        data = json.loads(read_bounded(path, limit, path.name).decode("utf-8"))
    except TooLargeError:
        return None, f"{path.name} is over {limit >> 20} MB, or not a regular file"
    except FileNotFoundError:
        return None, f"no {path.name}"
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"{path.name} is unreadable ({type(exc).__name__})"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


def _epoch(ts: Any) -> float | None:
    seconds = finite(ts)
    if seconds is not None:
        return seconds
    if isinstance(ts, str):
        try:
            d = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            return None
        return (d if d.tzinfo else d.replace(tzinfo=_dt.UTC)).timestamp()
    return None


def read_lab(path: Path) -> PastLab:
    """What ``path``'s manifest (and results, for the model's d_model) say."""
    path = Path(path)
    m, problem = _read_json(path / "manifest.json", MANIFEST_LIMIT)
    m = m or {}
    res, _ = _read_json(path / "results.json", RESULTS_LIMIT)
    model = (res or {}).get("model")
    d_model = model.get("d_model") if isinstance(model, dict) else None
    status = m["status"] if isinstance(m.get("status"), str) else "?"
    if problem and (path / "stream.jsonl").is_file():
        problem += " (its stream can still be replayed)"
    return PastLab(
        path=path, lab_id=path.name,
        started=_epoch(m.get("start_ts")) or _epoch(m.get("end_ts")) or _first_ts(path)
        or _mtime(path),
        gpu=str(m.get("instance_type") or ""), status=status,
        reason=str(m.get("reason") or ""), speedup=finite(m.get("speedup")),
        d_model=d_model if isinstance(d_model, int) and not isinstance(d_model, bool) else None,
        crossover=finite(m.get("crossover_d_model")), crossover_band=_band_short(m),
        cost_usd=finite(m.get("actual_cost_usd")),
        verified_gone=m.get("verified_gone") if isinstance(m.get("verified_gone"), bool)
        else None,
        pod_id=m.get("instance_id") if isinstance(m.get("instance_id"), str) else None,
        mock=m.get("mock") is True or "mock" in str(m.get("vendor", "")).lower()
        or "/mock/" in path.as_posix(),
        has_stream=(path / "stream.jsonl").is_file(), manifest=m, problem=problem)


def _band_short(m: dict[str, Any]) -> str:
    """The stored crossover band's short form ("" when the manifest has none)."""
    from tplab.scaling.crossover import CrossoverBand
    band = CrossoverBand.from_dict(m.get("crossover"))
    return band.short() if band is not None else ""


def _first_ts(path: Path) -> float | None:
    """The time of a stream's first event (a lab whose manifest is missing still sorts)."""
    try:
        with open(path / "stream.jsonl", "rb") as fh:
            return decode_line(fh.readline(1 << 16)).ts
    except (OSError, EventError):
        return None


def read_stream(path: Path, limit: int = STREAM_LIMIT) -> Iterator[Event]:
    """The events of a lab's ``stream.jsonl`` in order (damaged lines skipped, at most
    ``limit`` bytes read)."""
    dec = EventDecoder(skip_bad=True)
    read = 0
    with open(Path(path) / "stream.jsonl", "rb") as fh:
        while read < limit and (chunk := fh.read(1 << 16)):
            read += len(chunk)
            yield from dec.feed(chunk)


def remote_stderr(path: Path) -> list[str]:
    """The pod's ``job.log`` (torchrun's stdout and stderr) without the event lines the job
    also prints there: its last ``JOB_LOG_TAIL`` bytes, as text lines."""
    log = Path(path) / "job.log"
    try:
        size = log.stat().st_size
        with open(log, "rb") as fh:
            if size > JOB_LOG_TAIL:
                fh.seek(size - JOB_LOG_TAIL)
                fh.readline()  # a partial first line
            raw = fh.read(JOB_LOG_TAIL)  # never more: a path to a device reads forever
    except OSError:
        return []
    out = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        line = _ANSI.sub("", line).rstrip()
        if not line.strip() or line.lstrip().startswith('{"v":') or set(line.strip()) <= {"*"}:
            continue
        out.append(line[:2000])
    return out
