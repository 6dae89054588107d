"""`tplab-tui`: the command line of the dashboard (the App itself is ``tui/dashboard.py``).

    tplab-tui [--mock] [--start] [lab options]     a live lab (press s to start)
    tplab-tui --replay DIR [--speed 1|10|max]      a finished lab played back: no pod, ever
    tplab-tui --lab-dir DIR ...                     more lab folders for the Labs screen (l)

Only argparse and the App are imported here: the orchestrator (asyncssh, the provider) is
imported in a worker after the first paint, and torch never.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from collections.abc import Sequence

from tui.dashboard import MAX_HZ, MIN_HZ, TplabApp


def _speed(text: str) -> float:
    from tui.replay import parse_speed
    try:
        return parse_speed(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a speed: give 1, 10 (any positive number) or max") from None


def _refresh_hz(text: str) -> float:
    try:
        hz = float(text)
    except ValueError:
        hz = float("nan")
    if not MIN_HZ <= hz <= MAX_HZ:  # NaN too
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a redraw rate from {MIN_HZ:g} to {MAX_HZ:g} Hz")
    return hz


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tplab-tui",
        description="Live dashboard of a tensor-parallel lab on a rented pod (or --mock); "
                    "also replays a finished lab (--replay DIR).")
    parser.add_argument("--start", action="store_true",
                        help="start the lab at once (otherwise press s)")
    parser.add_argument("--refresh-hz", type=_refresh_hz, default=10.0, metavar="HZ",
                        help=f"panel redraw rate, {MIN_HZ:g}-{MAX_HZ:g} Hz (default 10)")
    parser.add_argument("--replay", type=Path, metavar="DIR", default=None,
                        help="play a finished lab's stream.jsonl (DIR: its folder) through the "
                             "dashboard instead of running a lab; no pod is created")
    parser.add_argument("--speed", type=_speed, default=10.0, metavar="X",
                        help="replay speed: 1 (as it ran), 10, any positive number, or max "
                             "(as fast as it draws); + and - change it while it plays "
                             "(default 10)")
    parser.add_argument("--lab-dir", type=Path, metavar="DIR", action="append", default=[],
                        help="a lab folder (or a folder of them) to list in the Labs screen "
                             "besides TPLAB_HOME's; repeatable")
    from tplab.lab.options import add_lab_arguments  # torch-free, stdlib argparse only

    add_lab_arguments(parser)
    return parser


def app_from_args(argv: Sequence[str] | None = None) -> TplabApp:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.replay is not None:
        return _replay_app(parser, args)
    from tplab.viewmodel.ledger_view import read_ledger_budget
    from tui.lab_port import LazyConfig, real_lab_factory, real_sweep_factory
    from tui.precheck import default_precheck
    from tui.widgets.scaling_panel import ScalingSource

    # what the panels need comes from the parsed options; the LabConfig itself (which imports
    # tplab.lab) is built in a worker when the lab starts
    config = LazyConfig(args)
    mock = bool(args.mock)
    plan = {"num_prompts": args.num_prompts, "new_tokens": args.new_tokens,
            "world_size": args.gpus, "gpu_type": args.gpu_type, "spot": not args.on_demand}
    scaling = ScalingSource(str(args.gpu_type or ""), int(args.gpus or 2), mock)
    lab_dirs = list(args.lab_dir) + ([args.out] if args.out else [])
    return TplabApp(real_lab_factory(config), start=args.start, plan=plan,
                    refresh_hz=args.refresh_hz, scaling=scaling,
                    sweep_factory=real_sweep_factory(config), mock=mock, api_url=args.api_url,
                    ledger=lambda: read_ledger_budget(mock, args.lab_cap, args.phase_cap),
                    precheck=default_precheck(config, mock, args.api_url), lab_dirs=lab_dirs)


def _replay_app(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TplabApp:
    from tplab.viewmodel.past_labs import read_lab
    from tui.runner import source_for_lab

    folder = args.replay.expanduser()
    if not (folder / "stream.jsonl").is_file():
        parser.exit(2, f"tplab-tui: {folder} has no stream.jsonl to replay; give the folder "
                       "of a lab that ran (see the Labs screen, key l).\n")
    lab = read_lab(folder)
    m = lab.manifest
    plan = {k: m.get(k) for k in ("num_prompts", "new_tokens", "world_size")
            if isinstance(m.get(k), int)}
    return TplabApp(None, start=True, plan=plan, refresh_hz=args.refresh_hz,
                    scaling=source_for_lab(m), save_proof=False, mock=lab.mock,
                    replay_dir=folder, replay_speed=args.speed, lab_dirs=list(args.lab_dir))


def main(argv: Sequence[str] | None = None) -> int:
    # the RunPod SDK installs a stderr log handler when imported: it would write over the screen
    logging.getLogger().addHandler(logging.NullHandler())
    logging.captureWarnings(True)
    app = app_from_args(argv)
    code = app.run()
    if app.runner.quitting.left_running:
        pod = app.state.instance.pod_id
        print(f"tplab-tui: pod {pod} left running; its watchdog still guards it. "
              f"Stop it with: tplab terminate {pod or ''}{app.runner.quitting.cloud_flags()}".rstrip(),
              file=sys.stderr)
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
