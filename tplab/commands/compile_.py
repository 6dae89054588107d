"""`tplab compile --out DIR`: lab 03, torch.compile on MiniGPT-grammar (match, Inductor kernel dump, timings).

The lab runs in a child interpreter because Inductor's logging and debug variables only take effect
if they are set before ``import torch``; this module sets them (``tplab.sidelabs.inductor_env``), starts
``python -m tplab.sidelabs.compile_lab`` and keeps the child's log (Inductor's ``output_code`` dump) in
``DIR/inductor.log``. Stdlib only at import time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HELP = "torch.compile MiniGPT-grammar and the lab sheet's Linear+softmax; dump and annotate Inductor's kernels."
DESCRIPTION = (HELP + " Writes DIR/REPORT.md, DIR/KERNEL_ANNOTATION.md, DIR/DISTRIBUTED.md (the lab sheet's "
               "survey of DDP, FSDP, TP and PP with this checkpoint's communication costs), "
               "DIR/manifest.json, DIR/compile-results.json and the generated code under DIR/kernels/.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory (created; must be empty or new)")
    p.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, metavar="PATH",
                   help="MiniGPT-grammar checkpoint (default: the shipped one)")
    p.add_argument("--prompts-file", type=Path, default=DEFAULT_PROMPTS, metavar="PATH",
                   dest="prompts", help="prompt file, one prompt a line (default: the shipped one)")
    p.add_argument("--substitute-only", action="store_true",
                   help="only the lab sheet's Linear(64, 600)+softmax substitute, no MiniGPT")
    p.add_argument("--new-tokens", type=int, default=64, metavar="N", help="tokens per timed decode (default 64)")
    p.add_argument("--rounds", type=int, default=8,
                   help="timing rounds at least (default 8), each visiting every side of every "
                        "timing; rounds go on until every side's spread is within 15%% or "
                        "--max-rounds / --max-seconds")
    p.add_argument("--max-rounds", type=int, default=40,
                   help="timing rounds at most (default 40)")
    p.add_argument("--max-seconds", type=float, default=60.0,
                   help="seconds of timing at most (default 60); a figure still unstable then is "
                        "flagged and its ratios are not quoted")
    p.add_argument("--against", type=Path, default=None, metavar="DIR",
                   help="an earlier `tplab compile --out DIR`: REPORT.md sets each ratio beside "
                        "that run's, agree (intervals overlap), flagged (unstable) or DISAGREE")
    p.add_argument("--calls", type=int, default=200, help="calls per timing round for forwards (default 200)")
    p.add_argument("--mode", choices=("default", "max-autotune"), default="default",
                   help="max-autotune: also compile the MiniGPT forward with mode='max-autotune' and "
                        "report it side by side with the default mode (compile time and run time)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda: where to compile and time")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: torch's choice; 1 gives steadier numbers on a busy machine)")
    p.add_argument("--ddp-run", type=Path, default=None, metavar="DIR",
                   help="a `tplab ddp --out DIR` run of this checkpoint's model: DISTRIBUTED.md quotes its "
                        "measured all-reduce share of a step (default: none, 'not measured here')")
    p.add_argument("--tp-run", type=Path, default=None, metavar="DIR",
                   help="a `tplab local --out DIR` run of this checkpoint: DISTRIBUTED.md quotes its measured "
                        "TP collective time per token (default: none, 'not measured here')")
    from tplab.commands.json_out import add_flag
    add_flag(p)


def main(args: argparse.Namespace) -> int:
    from tplab.sidelabs.inductor_env import inductor_env

    out: Path = args.out
    if out.exists() and any(out.iterdir()):
        print(f"tplab compile: {out} is not empty; choose a new or empty --out directory.", file=sys.stderr)
        return 2
    if not args.substitute_only and not args.checkpoint.exists():
        print(f"tplab compile: checkpoint {args.checkpoint} not found; pass --checkpoint PATH "
              "or --substitute-only.", file=sys.stderr)
        return 2
    if args.device != "cpu" and not args.device.startswith("cuda"):
        print(f"tplab compile: --device must be cpu or cuda, not {args.device!r}.", file=sys.stderr)
        return 2
    for name in ("new_tokens", "rounds", "calls", "max_rounds"):
        if getattr(args, name) < 1:
            print(f"tplab compile: --{name.replace('_', '-')} must be at least 1.", file=sys.stderr)
            return 2
    if args.against is not None:
        problem = _against_problem(args.against)
        if problem:
            print(f"tplab compile: {problem}", file=sys.stderr)
            return 2
    survey_ok = _check_survey_inputs(args)
    if survey_ok is None:
        return 2
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "tplab.sidelabs.compile_lab", "--out", str(out),
           "--new-tokens", str(args.new_tokens), "--rounds", str(args.rounds), "--calls", str(args.calls),
           "--max-rounds", str(args.max_rounds), "--max-seconds", str(args.max_seconds)]
    if args.against is not None:
        cmd += ["--against", str(args.against)]
    if not args.substitute_only:
        cmd += ["--checkpoint", str(args.checkpoint)]
        if args.prompts and args.prompts.exists():
            cmd += ["--prompts", str(args.prompts)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.device != "cpu":
        cmd += ["--device", args.device]
    if args.mode != "default":
        cmd += ["--mode", args.mode]
    if survey_ok:
        cmd += ["--survey-checkpoint", str(args.checkpoint)]
        for flag, path in (("--ddp-run", args.ddp_run), ("--tp-run", args.tp_run)):
            if path is not None:
                cmd += [flag, str(path)]
    from tplab.commands.json_out import emit, say
    say(args.json)(f"tplab compile: compiling (the first compile takes tens of seconds on a CPU); "
                   f"log in {out / 'inductor.log'}")
    with open(out / "inductor.log", "w") as log:
        rc = subprocess.call(cmd, env=inductor_env(out), stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = (out / "inductor.log").read_text(errors="replace").splitlines()[-15:]
        print(f"tplab compile: the compile lab failed (exit {rc}); last lines of {out / 'inductor.log'}:",
              file=sys.stderr)
        print("\n".join(tail), file=sys.stderr)
        return 1
    manifest = json.loads((out / "manifest.json").read_text())
    if args.json:
        emit({"manifest": manifest, "out": out, "report": out / "REPORT.md"})
        return 0 if manifest["status"] == "COMPLETE" else 1
    print(f"substitute max |eager - compiled| = {manifest['substitute_max_abs_diff']:.3e} "
          f"(bar {manifest['match_bar']:g}); fused softmax kernel: {manifest['fused_softmax_kernel']}")
    for name, ratio in (manifest.get("ratios") or {}).items():
        agree = ((manifest.get("against") or {}).get("ratios") or {}).get(name)
        print(f"{name}: {ratio['text']}" + (f" ({agree} with {manifest['against']['path']})"
                                            if agree else ""))
    if manifest.get("decode_ms_per_token"):
        ms = manifest["decode_ms_per_token"]
        print(f"decode: eager {ms['eager']:.3f} ms/token, compiled {ms['compiled']:.3f} ms/token; "
              f"tokens equal: {manifest['decode_tokens_equal']}")
    st = manifest.get("stretch")
    if st:
        print(f"export: decode step saved, {st['export_op_count']} ops; attention per call: "
              + ", ".join(f"{k} {v:.1f} µs" for k, v in st["attention_us"].items()))
        if st["autotune"]:
            a = st["autotune"]
            print("max-autotune vs default: compile "
                  f"{a['max-autotune']['compile_s']:.1f} s vs {a['default']['compile_s']:.1f} s, run "
                  f"{a['max-autotune']['run_us']:.1f} µs vs {a['default']['run_us']:.1f} µs per forward")
    if manifest.get("distributed_survey"):
        print(f"distributed survey: {out / manifest['distributed_survey']} (pick: {manifest['distributed_pick']}; "
              f"measured runs quoted: {', '.join(manifest['distributed_measured']) or 'none'})")
    print(f"status {manifest['status']}; report: {out / 'REPORT.md'}")
    return 0 if manifest["status"] == "COMPLETE" else 1


def _against_problem(path: Path) -> str | None:
    """Why an earlier run given with --against cannot be compared (one sentence), or None."""
    f = path / "compile-results.json" if path.is_dir() else path
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return (f"--against {path} holds no readable compile-results.json; name the folder of "
                "an earlier `tplab compile --out DIR`.")
    if not isinstance(data, dict) or data.get("lab") != "compile":
        return f"--against {path} is not a compile lab's results."
    return None


def _check_survey_inputs(args: argparse.Namespace) -> bool | None:
    """Whether DISTRIBUTED.md can be written (it needs the checkpoint); None after printing why the
    runs given with --ddp-run / --tp-run cannot be quoted (checked before anything is compiled)."""
    runs = [f for f, p in (("--ddp-run", args.ddp_run), ("--tp-run", args.tp_run)) if p is not None]
    if not args.checkpoint.exists():
        if runs:
            print(f"tplab compile: {' and '.join(runs)} need the checkpoint {args.checkpoint}, which is not "
                  "there; pass --checkpoint PATH.", file=sys.stderr)
            return None
        return False
    from tplab.sidelabs.distributed_survey import collect
    from tplab.sidelabs.measured_runs import MeasuredRunError
    from tplab.model.checkpoint import CheckpointError

    try:
        collect(args.checkpoint, args.ddp_run, args.tp_run)
    except CheckpointError as exc:
        if args.substitute_only and not runs:  # the survey is the only use of the checkpoint here
            print(f"tplab compile: DISTRIBUTED.md will not be written: {exc}", file=sys.stderr)
            return False
        print(f"tplab compile: {exc}", file=sys.stderr)
        return None
    except MeasuredRunError as exc:
        print(f"tplab compile: {exc}", file=sys.stderr)
        return None
    return True
