"""`tplab local`: the whole lab without any cloud — the job under torchrun on this CPU.

Why: the lab's numbers, events, scaling curve and manifest can be produced and checked for free
before a dollar is spent. It runs ``python -m tplab.job`` through ``torch.distributed.run`` with
``--device cpu``, shows its events as they arrive, then writes the scaling curve calibrated from
the run (α, β from the sweep, launch overhead from the baseline) and a manifest whose status is
EDUCATIONAL_STUB (reason: no cloud run), and prints a short summary table.

``--comm`` picks the transport of the TP collectives: gloo (TCP loopback, the default), shm
(shared memory between the ranks, ``tplab.tp.shm``) or both (shm carries the figures, and the
same run repeats the TP passes and the sweep over gloo, so the table shows the two side by side).
The curve starts from the matching profile (``cpu-gloo`` or ``cpu-shm``).

Standard library only at module level, per the CLI contract (the job runs in child processes;
matplotlib and plotext are imported when the curve is drawn).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS, executable_arg
from tplab.records.job_flags import add_job_flags, positive_int  # stdlib only

HELP = "run the lab on this CPU (torchrun; gloo or shared memory): results, events, curve, manifest"
DESCRIPTION = (
    "Run the lab job through torchrun on this CPU (no cloud, no cost): the single-device baseline "
    "on rank 0, TP decoding on --tp ranks with the collectives over gloo or shared memory "
    "(--comm), the all-reduce sweep. Writes "
    "OUT/results.json, OUT/events.jsonl, OUT/scaling-curve.png (calibrated from the run), "
    "OUT/manifest.json (status EDUCATIONAL_STUB, reason: no cloud run) and OUT/torchrun.log.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tp", type=positive_int, default=2, metavar="N",
                        help="TP ranks (default 2)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="a new or empty folder for the run's files")
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), metavar="PATH",
                        help="full MiniGPT checkpoint (default: the shipped one)")
    parser.add_argument("--prompts-file", default=str(DEFAULT_PROMPTS), metavar="PATH",
                        dest="prompts", help="prompts file, one a line (default: the shipped one)")
    add_job_flags(parser, ("num_prompts", "new_tokens", "warmup", "instrumented_prompts",
                           "no_sweep", "sweep_max_bytes", "comm", "sweep_d_model", "sweep_tokens",
                           "sweep_budget_s", "profile_tokens"),
                  defaults={"instrumented_prompts": 3, "sweep_budget_s": 150.0})
    parser.add_argument("--profile", default=None,
                        help="hardware profile the curve is calibrated from (default cpu-gloo, "
                             "or cpu-shm with --comm shm or both)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="give up on the job after this many seconds (default 600)")
    parser.add_argument("--pod-python", metavar="PATH", type=executable_arg, default=None,
                        help="the Python the job runs with (default: this one), e.g. a venv with "
                             "the pod images' torch 2.4.0")
    parser.add_argument("--quiet", action="store_true", help="do not show the job's progress")
    from tplab.commands.json_out import add_flag
    add_flag(parser)


def _job_command(args: argparse.Namespace) -> list[str]:
    cmd = [args.pod_python or sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={args.tp}", "-m", "tplab.job",
           "--checkpoint", str(args.checkpoint), "--prompts", str(args.prompts),
           "--out", str(args.out), "--num-prompts", str(args.num_prompts),
           "--new-tokens", str(args.new_tokens), "--warmup", str(args.warmup),
           "--device", "cpu", "--threads", "1", "--comm", args.comm,
           "--sweep-max-bytes", str(args.sweep_max_bytes),
           "--profile-tokens", str(args.profile_tokens)]
    if args.no_sweep:
        cmd.append("--no-sweep")
    if args.sweep_d_model:
        cmd += ["--sweep-d-model", args.sweep_d_model, "--sweep-tokens", str(args.sweep_tokens),
                "--sweep-budget-s", str(args.sweep_budget_s)]
    cmd += ["--instrumented-prompts", str(min(args.instrumented_prompts, args.num_prompts))]
    return cmd


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop torchrun and its workers (they share the process group torchrun leads)."""
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue


def run_job(args: argparse.Namespace, out_dir: Path) -> tuple[int, list[str]]:
    """Run torchrun, stream its events; return (exit status, error messages from the job)."""
    from tplab.faces.headless import HeadlessView
    from tplab.records.events import ErrorEvent, EventDecoder, EventError

    view = HeadlessView(sys.stdout, job_detail=True)
    view.set_plan(args.num_prompts, args.new_tokens, args.tp)

    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if args.pod_python:  # another interpreter: it finds the job's packages by path, as a pod does
        from tplab.home.paths import with_source_on_path

        env = with_source_on_path(env)
    log_path = out_dir / "torchrun.log"
    errors: list[str] = []
    with open(log_path, "w", encoding="utf-8") as log:
        # its own session, so a timeout or Ctrl-C stops torchrun *and* its workers, no orphans
        proc = subprocess.Popen(_job_command(args), stdout=subprocess.PIPE, stderr=log, env=env,
                                start_new_session=True)
        timed_out = threading.Event()

        def on_timeout() -> None:
            timed_out.set()
            _kill_group(proc)

        timer = threading.Timer(args.timeout, on_timeout)
        timer.start()
        dec = EventDecoder()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    events = dec.feed(line)
                except EventError:
                    log.write(line.decode("utf-8", "replace"))
                    continue
                for ev in events:
                    if isinstance(ev, ErrorEvent):
                        errors.append(ev.msg)
                    if not (args.quiet or args.json):
                        view.handle(ev)
            rc = proc.wait()
        finally:
            timer.cancel()
            _kill_group(proc)
    if timed_out.is_set():
        errors.append(f"the job did not finish within {args.timeout:g} s")
    return rc, errors


_COMM_LABEL = {"gloo": "gloo", "shm": "shared memory", "both": "shared memory, gloo alongside"}


def _curve(profile: Any, results: dict[str, Any], out_dir: Path,
           results_path: Path) -> tuple[Path, float | None]:
    """Calibrate the profile from the run (its d_model sweep when it has one), store the
    calibrated prediction per measured point in results.json (``calibration``), and draw
    scaling-curve.png; (the PNG, the predicted crossover)."""
    from tplab.scaling import calibration, chart, latency, split_compare
    from tplab.util.jsonfile import write_json

    shape = latency.shape_from_results(results)
    cal = calibration.calibrate(profile, results, shape)
    split_compare.annotate_both_ways(results, cal, profile, shape)
    write_json(results_path, results)
    cross = calibration.crossovers(cal, results, results["world_size"], shape)
    png = chart.save_png(out_dir / "scaling-curve.png", cal, results["world_size"], shape,
                                calibration.measured_points(results),
                                sweep=results.get("d_model_sweep"),
                                measured_crossover=cross["measured"],
                                measured_reason=cross["measured_reason"],
                                warning=calibration.miss_warning(results.get("calibration")))
    return png, cross["predicted"]


def _json_summary(out_dir: Path, manifest: dict[str, Any], results: dict[str, Any] | None,
                  crossover: float | None, job_s: float, curve: Path | None,
                  errors: list[str]) -> dict[str, Any]:
    """`--json`: the run's figures as their owners made them (the manifest; results.json, the
    calibration in it), and where its files are (absolute paths)."""
    out_dir = out_dir.resolve()
    curve = curve.resolve() if curve is not None else None
    return {"status": manifest.get("status"), "reason": manifest.get("reason"),
            "out_dir": out_dir, "job_wall_s": round(job_s, 3),
            "crossover_d_model_predicted": crossover, "errors": errors,
            "manifest": manifest,
            "results": results,
            "files": {"results": out_dir / "results.json", "manifest": out_dir / "manifest.json",
                      "scaling_curve": curve, "trace": out_dir / "trace.json",
                      "rank_traces": [out_dir / rel for rel in _rank_traces(out_dir)],
                      "log": out_dir / "torchrun.log"}}


def _rank_traces(out_dir: Path) -> list[str]:
    from tplab.records import rank_traces
    return rank_traces.present(out_dir)


def main(args: argparse.Namespace) -> int:
    if args.instrumented_prompts < 1:
        print("tplab local: --instrumented-prompts must be at least 1.", file=sys.stderr)
        return 2
    if args.tp < 2:
        print("tplab local: --tp must be at least 2 (tensor parallelism needs two ranks).",
              file=sys.stderr)
        return 2
    if args.sweep_d_model:
        from tplab.records.job_flags import parse_d_models
        try:
            parse_d_models(args.sweep_d_model)
        except ValueError as exc:
            print(f"tplab local: {exc}", file=sys.stderr)
            return 2
    for what, path in (("checkpoint", args.checkpoint), ("prompts file", args.prompts)):
        if not Path(path).is_file():
            print(f"tplab local: the {what} {path} does not exist.", file=sys.stderr)
            return 2
    from tplab.records.prompts_file import PromptsFileError, read_prompts
    try:  # as the job reads it, before torchrun starts
        read_prompts(args.prompts, args.num_prompts, flag="--prompts")
    except PromptsFileError as exc:
        print(f"tplab local: {exc}", file=sys.stderr)
        return 2
    from tplab.home.lab_folders import out_dir_problem

    bad_out = out_dir_problem(args.out)  # one run a folder: never another run's files beside
    if bad_out:
        print(f"tplab local: {bad_out}", file=sys.stderr)
        return 2
    from tplab.lab.pod_python import pod_python_problem

    bad_python = pod_python_problem(args.pod_python, mock=True)
    if bad_python:
        print(f"tplab local: {bad_python}", file=sys.stderr)
        return 2
    from tplab.lab import manifest
    from tplab.scaling import latency
    from tplab.records.results import load_results

    try:
        profile = latency.load_profile(args.profile or latency.cpu_profile_name(args.comm))
    except latency.ScalingError as exc:
        print(f"tplab local: {exc}", file=sys.stderr)
        return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / "results.json"

    t0 = time.time()
    rc, errors = run_job(args, out_dir)
    job_s = time.time() - t0
    results = None
    if results_path.exists():
        try:
            results = load_results(results_path)
        except ValueError as exc:
            errors.append(str(exc))

    curve_path = crossover = None
    if results is not None:
        try:
            curve_path, crossover = _curve(profile, results, out_dir, results_path)
        except latency.ScalingError as exc:
            errors.append(f"scaling curve: {exc}")

    ok = rc == 0 and results is not None and results.get("outputs_match") is True
    status, reason = ("EDUCATIONAL_STUB", "no cloud run") if ok else (
        "FAILED", errors[-1] if errors else f"the job exited with status {rc}")
    m = manifest.build_manifest(
        results, status=status, reason=reason,
        vendor="local", instance_type=f"{args.tp}x CPU process ({_COMM_LABEL[args.comm]})",
        nvlink_present=False,
        instance_id=None, start_ts=t0, end_ts=time.time(), estimated_cost_usd=0.0,
        actual_cost_usd=0.0, terminated_screenshot=None, crossover_d_model=crossover,
        profile_name=f"{profile.name}, calibrated from this run")
    manifest.write_manifest(out_dir / "manifest.json", m)

    if args.json:
        from tplab.commands.json_out import emit
        emit(_json_summary(out_dir, m, results, crossover, job_s, curve_path, errors))
    if results is None:
        print(f"tplab local: the job failed ({reason}); see {out_dir / 'torchrun.log'}.",
              file=sys.stderr)
        return 1
    from tplab.faces.headless import format_rows, results_rows

    from tplab.scaling.split_compare import both_ways_text

    ways = (results.get("calibration") or {}).get("both_ways")
    rows = results_rows(results) + ([("calibration", both_ways_text(ways))] if ways else []) + [
        ("crossover d_model, predicted", (f"{crossover:.0f}" if crossover else
                                          "none in d_model 16..65536")
         + f" ({profile.name}, calibrated)"),
        ("job wall time", f"{job_s:.1f} s (torchrun start to exit)"),
        ("manifest", f"{out_dir / 'manifest.json'} ({status}: {reason})"),
    ]
    if curve_path is not None:
        rows.append(("scaling curve", str(curve_path)))
    if args.json:
        if not ok:
            print(f"tplab local: the run failed: {reason}", file=sys.stderr)
        return 0 if ok else 1
    print(format_rows(rows))
    if results.get("d_model_sweep") is not None:
        from tplab.scaling.dmodel_table import dmodel_report
        print(dmodel_report(results))
    if not ok:
        print(f"tplab local: the run failed: {reason}", file=sys.stderr)
        return 1
    return 0
