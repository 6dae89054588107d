"""`tplab timeline LAB_DIR`: a finished lab's profiled pass as text, token by token, rank by rank.

Why: the dashboard's timeline view needs the dashboard; a lab folder (from `tplab run`, the
dashboard or `tplab local --out`) holds the same record in its results.json (``timeline``), or,
for a lab stopped after the profiled pass but before its results, in its event stream. This
prints it (``tplab.faces.timeline_text``): per profiled token, each rank's lane of compute, on
the wire and waiting, labelled with the layers, and the medians. Quiet on a closed pipe
(``| head``). Standard library only at module level.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

HELP = "print a finished lab's profiled pass: each token's lanes per rank, compute/wire/wait"
DESCRIPTION = (
    "Print the timeline of a lab's profiled pass (the job's --profile-tokens): for each profiled "
    "token, one lane per rank drawn in time (compute, on the wire, waiting for the other rank), "
    "labelled with the layers, each rank's split and the medians. LAB_DIR is a lab's folder (or "
    "its results.json); the whole trace is LAB_DIR/trace.json, for ui.perfetto.dev.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lab_dir", metavar="LAB_DIR", help="the lab's folder, or its results.json")
    parser.add_argument("--mode", choices=("tp", "single", "both"), default="both",
                        help="which mode's tokens (default: both)")
    parser.add_argument("--token", type=int, default=None, metavar="K",
                        help="only the K-th profiled token of each mode (1-based)")
    parser.add_argument("--width", type=int, default=None, metavar="COLS",
                        help="the lanes' width in columns (default: the terminal's, else 100)")
    from tplab.commands.json_out import add_flag
    add_flag(parser)


def _section(path: Path) -> tuple[Any, str]:
    """(the timeline section, or None; where it was looked for)."""
    results = path if path.is_file() else path / "results.json"
    if results.is_file():
        try:
            data = json.loads(results.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            data = None
        if isinstance(data, dict) and data.get("timeline") is not None:
            return data["timeline"], str(results)
    from tplab.records.events import EventError, TimelineEvent, read_events
    for name in ("stream.jsonl", "events.jsonl"):
        stream = path / name
        if path.is_dir() and stream.is_file():
            try:
                for ev in read_events(str(stream)):
                    if isinstance(ev, TimelineEvent):
                        return ev.section, str(stream)
            except (OSError, EventError):
                continue
    return None, str(results)


def _figures(path: Path) -> Any:
    """The lab's record of its figures (``tplab.figures.lab_figures``): manifest.json's
    ``lab_figures`` where the lab wrote one, else made from its results.json; None without
    either."""
    from tplab.figures.lab_figures import LabFigures, from_manifest
    lab = path if path.is_dir() else path.parent
    for name in ("manifest.json", "results.json"):
        try:
            data = json.loads((lab / name).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        if name == "manifest.json" and data.get("lab_figures") is not None:
            return from_manifest(data)
        elif data.get("tp_per_token_ms") is not None:
            return LabFigures.from_results(data)
    return None


def _print_lines(lines: Any) -> int:
    try:
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader left (`| head`): stop quietly, and let no exit flush raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


def _json_doc(section: dict[str, Any], where: str, path: Path, modes: tuple[str, ...],
              token: int | None, figures: Any) -> dict[str, Any]:
    """`--json`: the timeline section as the job wrote it, its modes' tokens narrowed to those
    asked for (``--mode``, ``--token``), where the traces are, and the lab's figures (its
    record: the profiled split beside the timed pass's figures, each with its pass)."""
    from tplab.records import rank_traces

    picked = {}
    for mode, body in (section.get("modes") or {}).items():
        if mode not in modes or not isinstance(body, dict):
            continue
        tokens = body.get("tokens") or []
        if token is not None:
            tokens = tokens[token - 1:token]
        picked[mode] = {**body, "tokens": tokens}
    lab = path if path.is_dir() else path.parent
    return {"source": where, "timeline": {**section, "modes": picked},
            "trace": str(lab / "trace.json") if (lab / "trace.json").is_file() else None,
            "rank_traces": [str(lab / rel) for rel in rank_traces.present(lab)],
            "figures": figures.to_dict() if figures is not None else None}


def main(args: argparse.Namespace) -> int:
    from tplab.faces.timeline_text import timeline_lines
    from tplab.viewmodel.timeline_view import timeline_from

    path = Path(args.lab_dir).expanduser()
    if not path.exists():
        print(f"tplab timeline: {path} does not exist; name a lab's folder (tplab handin --list "
              "shows the finished ones).", file=sys.stderr)
        return 2
    section, where = _section(path)
    timeline = timeline_from(section)
    if timeline is None:
        print(f"tplab timeline: {where} holds no profiled pass (its timeline section); the lab "
              "ran without one (--profile-tokens 0) or stopped before it.", file=sys.stderr)
        return 1
    if args.token is not None and args.token < 1:
        print("tplab timeline: --token counts from 1.", file=sys.stderr)
        return 2
    modes = ("tp", "single") if args.mode == "both" else (args.mode,)
    figures = _figures(path)
    if args.json:
        from tplab.commands.json_out import emit
        emit(_json_doc(section, where, path, modes, args.token, figures))
        return 0
    width = args.width or (shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty()
                           else 100)
    return _print_lines(timeline_lines(timeline, width=max(20, width), modes=modes,
                                       token=args.token, figures=figures))
