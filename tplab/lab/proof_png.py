"""proof-terminated.png: a picture a person reads as proof that the lab's pod is gone.

Why a picture beside ``proof-terminated.json``: the lab sheet (lab 02) asks for a screenshot of the
provider's console showing the instance terminated. tplab has no browser; what it has is better
evidence: the provider's own answer after terminate (read by ``tplab.lab.teardown.write_proof``)
and the lab's final frame. This module draws both, for every lab whose pod was terminated:

* top: the provider's answer — pod id, its state as the provider reported it, when terminate was
  asked and when the provider was checked, whether the pod still appeared in the provider's list,
  and the API routes that gave those answers;
* bottom: the lab's final frame — its stages with their times, and the final table that
  ``tplab run`` prints (``HeadlessView.table``, folded from the same events the dashboard folds).

It reads only files the lab already wrote (proof-terminated.json, stream.jsonl), so it can be
drawn again for a finished lab. Client side: matplotlib is imported inside ``write_proof_png``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tplab.cloud.registry import gone_routes
from tplab.records.events import Event, EventDecoder, StageEvent
from tplab.util.bounded_read import iter_chunks, read_bounded

PROOF_PNG = "proof-terminated.png"
#: what a mock lab's proof says above everything (its "provider" is the local mock cloud)
MOCK_BANNER = "MOCK lab: the local mock cloud's answer, not a real provider's"

def _state(answer: Any) -> str:
    """The pod's state as the provider reported it."""
    if not isinstance(answer, dict):
        return "no answer"
    if "error" in answer and "pod" not in answer:
        return f"no answer ({answer['error']})"
    pod = answer.get("pod")
    if pod is None:
        return "no such pod (404: the provider has no record of it)"
    status = pod.get("status") or pod.get("desiredStatus") if isinstance(pod, dict) else None
    return f"{status or 'unknown'} (the provider still has a record of it)"


def provider_lines(proof: dict[str, Any]) -> list[tuple[str, str]]:
    """The provider's answer, one (label, value) row each, from proof-terminated.json."""
    listed = proof.get("listed")
    rows = [
        ("pod id", str(proof.get("pod_id"))),
        ("provider", str(proof.get("provider"))),
        ("state reported", _state(proof.get("answer"))),
        ("still listed", "no" if listed is False else "YES" if listed else "unknown"),
        ("terminate asked", str(proof.get("terminate_requested_at") or "-")),
        ("provider checked", str(proof.get("checked_at") or "-")),
        ("verified gone", "YES" if proof.get("verified_gone") else "NO: check the console"),
    ]
    for n, route in enumerate(proof.get("routes") or gone_routes(proof.get("provider"))):
        rows.append(("API route" if n == 0 else "", route))
    raw = json.dumps(proof.get("answer"), sort_keys=True)
    rows.append(("raw answer", raw if len(raw) <= 160 else raw[:157] + "..."))
    return rows


#: the most of stream.jsonl the picture reads (a lab's stream is a few MB; a path that leads
#: to a device or a runaway file is not read past this)
STREAM_LIMIT = 256 << 20
#: the most of proof-terminated.json it reads
PROOF_LIMIT = 1 << 20


def read_events(path: Path, limit: int = STREAM_LIMIT) -> Iterator[Event]:
    """The lab's recorded events (stream.jsonl), decoded as they are read, at most ``limit``
    bytes of it; a file that is not a regular one, or unreadable, gives none."""
    dec = EventDecoder()
    try:
        for chunk in iter_chunks(path, limit):
            yield from dec.feed(chunk)
    except OSError:
        return
    yield from dec.feed(b"\n")  # a last line without its newline


def final_frame(events: Iterable[Event], summary: dict[str, Any], max_stages: int = 14) -> str:
    """The lab's last screen as text: its stages (seconds since the lab's first event,
    stamped as ``tplab run`` stamped them) and the final table ``tplab run`` prints, folded
    from ``events`` by the headless view (taken one at a time: none is kept but the stages)."""
    from tplab.faces.headless import HeadlessView, stamp
    view = HeadlessView(io.StringIO(), tty=False)
    t0: float | None = None  # as the terminal's: from the lab's first event
    stages = []
    for ev in events:
        view.handle(ev)
        t0 = ev.ts if t0 is None else t0
        if isinstance(ev, StageEvent) and ev.src != "job":
            stages.append(f"{stamp(ev.ts - t0)} {ev.name}"
                          + (f" (pod {ev.pod_id})" if ev.pod_id else ""))
    if len(stages) > max_stages:
        stages = stages[:2] + ["  ..."] + stages[-(max_stages - 3):]
    table = view.table({**summary, "artifacts": {}})
    return "\n".join(stages + [""] + table.splitlines())


def fit_lines(frame: str, width: int = 118) -> list[str]:
    """The frame's lines as the picture draws them: a line over ``width`` is cut at its end,
    its indentation and columns kept as the terminal showed them."""
    return [ln[:width - 3].rstrip() + "..." if len(ln) > width else ln
            for ln in frame.splitlines()]


def write_proof_png(out_dir: Path, summary: dict[str, Any], mock: bool = False) -> Path | None:
    """Draw proof-terminated.png from the out dir's proof-terminated.json and stream.jsonl;
    None (nothing drawn) when the lab has no proof (no pod was terminated)."""
    proof_path = out_dir / "proof-terminated.json"
    if not proof_path.is_file():
        return None
    proof = json.loads(read_bounded(proof_path, PROOF_LIMIT, "proof").decode("utf-8"))
    frame = final_frame(read_events(out_dir / "stream.jsonl"), summary)
    return draw(out_dir / PROOF_PNG, proof, frame, mock)


def draw(path: Path, proof: dict[str, Any], frame: str, mock: bool) -> Path:
    """The picture itself: banner, the provider's answer, the final frame (monospace)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from functools import partial

    rows = provider_lines(proof)
    frame_lines = fit_lines(frame)
    height = 1.9 + 0.2 * len(rows) + 0.19 * len(frame_lines)
    fig = plt.figure(figsize=(10, height), dpi=110)
    text = partial(fig.text, parse_math=False)  # "$0.0181" is money, not mathtext
    gone = bool(proof.get("verified_gone"))
    y = 1.0 - 0.25 / height
    if mock:
        text(0.5, y, MOCK_BANNER, ha="center", va="top", fontsize=13, weight="bold",
                 color="tab:red")
        y -= 0.35 / height
    verdict = (f"Pod {proof.get('pod_id')} is GONE: the provider's own answer" if gone
               else f"Pod {proof.get('pod_id')} was NOT verified gone")
    text(0.03, y, verdict, va="top", fontsize=14, weight="bold",
             color="tab:green" if gone else "tab:red")
    y -= 0.4 / height
    for label, value in rows:
        text(0.05, y, label, va="top", fontsize=9.5, family="monospace", weight="bold")
        text(0.25, y, value, va="top", fontsize=9.5, family="monospace")
        y -= 0.2 / height
    y -= 0.15 / height
    text(0.03, y, "The lab's final frame (tplab run's last screen)", va="top", fontsize=12,
             weight="bold")
    y -= 0.3 / height
    text(0.05, y, "\n".join(frame_lines), va="top", fontsize=8.5, family="monospace",
             linespacing=1.55,
             bbox={"boxstyle": "round,pad=0.6", "facecolor": "#f4f4f4", "edgecolor": "0.7"})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png")
    plt.close(fig)
    tmp.replace(path)
    return path
