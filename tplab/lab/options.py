"""The lab's command-line options, shared by `tplab run` and the dashboard (`tplab-tui`).

Why shared: both front ends start the same Lab; one parser definition keeps their flags and
defaults identical. Standard library only (the CLI imports this at parse time).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tplab.cloud.base import DEFAULT_GPU_TYPE
from tplab.lab.lab_config import DEFAULT_SWEEP_BUDGET_S, GPU_SWEEP_D_MODELS, LabConfig
from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS, executable_arg
from tplab.records.job_flags import add_job_flags, positive_float, positive_int


def api_url_problem(mock: bool, api_url: str | None) -> str | None:
    """Why ``api_url`` may not be used, or None. Without --mock the real API key goes to that
    URL, so it must be https (a key sent in clear to an arbitrary address is a key given away);
    the local mock cloud runs on plain http and carries only its own throwaway key."""
    if not api_url or mock:
        return None
    if not api_url.lower().startswith("https://"):
        return (f"--api-url {api_url} is not https: without --mock the real API key "
                "would go to it in clear; use an https URL, or --mock for a local mock cloud. "
                "Nothing was created.")
    return None


def add_provider_argument(parser: Any) -> None:
    """``--provider NAME|auto``, the registry's names (tplab run, tplab-tui, check, status,
    terminate)."""
    from tplab.cloud.registry import CHOICES
    parser.add_argument("--provider", type=str.lower, choices=CHOICES, default=None,
                        help="the cloud: " + ", ".join(CHOICES) + " (auto: the cheapest "
                             "interruptible offer across the clouds you have keys for; default: "
                             "auto when several have keys, else the one that has; --mock: the first)")


def add_image_argument(parser: Any) -> None:
    """``--image NAME``, the pod's container image (tplab run, tplab-tui, tplab check)."""
    parser.add_argument("--image", metavar="NAME", default=None,
                        help="the pod's container image (default: per cloud and GPU generation, "
                             "the image `tplab check` names; one tplab cannot read is checked by "
                             "the pod when it starts)")


def add_lab_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("lab")
    g.add_argument("--mock", action="store_true",
                   help="run against the local mock cloud (started and stopped automatically; "
                        "the job runs on this CPU, spending is simulated)")
    add_provider_argument(g)
    g.add_argument("--api-url", metavar="URL", default=None,
                   help="use an already running (mock) cloud API at URL instead of starting one; "
                        "its key comes from the provider's key variable (`tplab check` names "
                        "it; without --mock it must be https)")
    g.add_argument("--gpu-type", default=DEFAULT_GPU_TYPE, help="GPU type (default: %(default)s)")
    g.add_argument("--gpus", type=positive_int, default=2, help="GPUs = TP degree (default: 2)")
    add_image_argument(g)
    g.add_argument("--on-demand", action="store_true",
                   help="rent an on-demand pod (REST v2) instead of spot; the lab is spot-first "
                        "and never switches by itself")
    g.add_argument("--lab-cap", type=positive_float, default=None, metavar="USD",
                   help="dollars this lab may authorize (default: the budget config, $3)")
    g.add_argument("--phase-cap", type=positive_float, default=None, metavar="USD",
                   help="the ledger's total cap (default: the budget config)")
    add_job_flags(g, ("num_prompts", "new_tokens", "warmup", "instrumented_prompts", "no_sweep",
                      "sweep_d_model", "sweep_budget_s", "compile", "comm", "profile_tokens"),
                  defaults={"instrumented_prompts": 3, "sweep_d_model": None,
                            "sweep_budget_s": DEFAULT_SWEEP_BUDGET_S},
                  helps={"sweep_d_model": "the d_model sweep (MiniGPT-grammar's architecture "
                         "with random weights, single vs TP at each size: the measured "
                         f"crossover); default {GPU_SWEEP_D_MODELS} on a GPU pod, within "
                         "--sweep-budget-s and included in the cost estimate, none in the mock "
                         "lab; 'none' for none",
                         "comm": "transport of the TP collectives, mock lab only (its pods are "
                         "this CPU): gloo (default), shm (shared memory between the ranks) or "
                         "both (shm carries the figures, gloo is measured alongside); GPU pods "
                         "use NCCL",
                         "compile": "torch.compile the models on the pod"})
    g.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="a new or empty folder for the lab's files (default: "
                        "TPLAB_HOME/labs/<lab id>, TPLAB_HOME/mock/labs/<lab id> with --mock)")
    g.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, metavar="PATH",
                   help="checkpoint to upload (default: the shipped MiniGPT-grammar)")
    g.add_argument("--prompts-file", type=Path, default=DEFAULT_PROMPTS, metavar="PATH",
                   help="prompts to upload, one a line (default: the shipped prompts)")
    g.add_argument("--heartbeat-timeout", type=positive_float, default=600.0, metavar="S",
                   help="the pod's watchdog terminates it after this long without a heartbeat "
                        "from the client (default: 600, the lab sheet's 10 min)")
    g.add_argument("--wall-cap", type=positive_float, default=7200.0, metavar="S",
                   help="hard wall-clock cap for the pod in seconds (default: 7200, the lab sheet's 2 h)")
    g.add_argument("--terminate-timeout", type=positive_float, default=LabConfig.end_bound_s,
                   metavar="S",
                   help="the bound on ending the pod: terminate and look until the provider "
                        "shows it gone, whatever it answers, saying every 5 s what it does; past "
                        "it the lab says what it knows and the command that retries, and keeps "
                        f"the money held (default: {LabConfig.end_bound_s:.0f})")
    g.add_argument("--boot-timeout", type=positive_float, default=600.0, metavar="S",
                   help="give up on a pod not ready after this long (default: 600)")
    g.add_argument("--boot-guard", type=positive_float, default=None, metavar="S",
                   help="the pod ends itself when this client has not shown up S seconds after "
                        "its container started (default: the connect timeout + 120 s = 300 s)")
    g.add_argument("--pod-python", metavar="PATH", type=executable_arg, default=None,
                   help="mock lab only: the Python its pods run the job with (e.g. a venv with "
                        "the images' torch 2.4.0); a real pod runs its image's python3")
    g.add_argument("--yes", "-y", action="store_true",
                   help="do not ask before spending real money")


def config_from_args(args: argparse.Namespace) -> LabConfig:
    """The LabConfig these parsed options describe. (A non-https ``--api-url`` without ``--mock``
    is refused where the key would be sent, ``providers.real_api_url``: the lab then ends FAILED
    with ``api_url_problem``'s sentence, in `tplab run` and in the dashboard alike.)"""
    return LabConfig(
        mock=bool(args.mock), provider=getattr(args, "provider", None), api_url=args.api_url,
        gpu_type=args.gpu_type, gpus=args.gpus, image=args.image,
        spot=not args.on_demand, lab_cap_usd=args.lab_cap, phase_cap_usd=args.phase_cap,
        num_prompts=args.num_prompts, new_tokens=args.new_tokens, warmup=args.warmup,
        instrumented_prompts=args.instrumented_prompts,
        sweep=not args.no_sweep, compile=args.compile, comm=args.comm, out_dir=args.out,
        profile_tokens=args.profile_tokens,
        sweep_d_model=args.sweep_d_model, sweep_budget_s=args.sweep_budget_s,
        checkpoint=args.checkpoint, prompts=args.prompts_file,
        heartbeat_timeout_s=args.heartbeat_timeout, wall_cap_s=args.wall_cap,
        boot_timeout_s=args.boot_timeout, guard_first_heartbeat_s=args.boot_guard,
        end_bound_s=args.terminate_timeout,
        pod_python=args.pod_python)
