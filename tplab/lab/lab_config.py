"""What one lab does (``LabConfig``) and how it ended (``LabOutcome``, the statuses, ``LabStop``).

Why a module of its own: the options parser, the provider session, the stages and the
artifacts all read the config, and none of them may import the orchestrator to get it (that was
the import circle). Standard library only, so ``tplab run --help`` stays fast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tplab.cloud.base import DEFAULT_GPU_TYPE
from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS

if TYPE_CHECKING:
    from tplab.money.caps import Caps

COMPLETE, FAILED, STUB = "COMPLETE", "FAILED", "EDUCATIONAL_STUB"
#: the d_model sweep a real GPU pod runs by default (tplab.job.dmodel_sweep), within
#: DEFAULT_SWEEP_BUDGET_S of pod time (larger sizes that would overrun it are skipped on the pod)
GPU_SWEEP_D_MODELS = "64,128,256,512,1024,2048,4096"
DEFAULT_SWEEP_BUDGET_S = 180.0
#: the boot guard's allowance after the client's connect bound: a status poll (2 s), the ~2 MB
#: upload at 50 kB/s (40 s), the launch command's own bound (60 s), and slack
GUARD_AFTER_CONNECT_S = 120.0
#: the user ended the lab (TERMINATE, Ctrl-C, a signal): not a failure of the lab itself
STOPPED = "STOPPED"
#: the provider took the spot (interruptible) instance back while the lab wanted it running (an
#: outbid Vast instance is paused, not gone): ended, verified gone, the figures measured so far kept
INTERRUPTED = "INTERRUPTED"


@dataclass
class LabConfig:
    """What one lab does; built by ``options.config_from_args`` or by hand (tests, dashboard)."""
    mock: bool = False
    provider: str | None = None           # a registry name or auto; None: registry.resolve's pick
    gpu_type: str = DEFAULT_GPU_TYPE
    gpus: int = 2
    spot: bool = True
    lab_cap_usd: float | None = None      # None: the budget config's lab cap (the lab sheet: $3)
    phase_cap_usd: float | None = None    # None: the budget config's phase cap
    num_prompts: int = 10
    new_tokens: int = 100
    warmup: int = 2
    instrumented_prompts: int = 3
    sweep: bool = True
    compile: bool = False
    comm: str = "gloo"                    # the TP collectives' transport (mock pods only: shm|both)
    profile_tokens: int = 4               # tokens per mode of the profiled pass (0: none)
    #: the pod's container image (--image); None: the catalog's default for the cloud and the
    #: GPU's generation (tplab.cloud.image_fit.choose_image)
    image: str | None = None
    # the d_model sweep: None = the default (GPU_SWEEP_D_MODELS on a real pod, none in the mock
    # lab, whose 60 s bar it would break); "" = none; else "64,256,..."
    sweep_d_model: str | None = None
    sweep_budget_s: float = DEFAULT_SWEEP_BUDGET_S
    out_dir: Path | None = None           # None: TPLAB_HOME/labs/<lab id>
    checkpoint: Path = DEFAULT_CHECKPOINT
    prompts: Path = DEFAULT_PROMPTS
    heartbeat_timeout_s: float = 600.0    # the pod's watchdog terminates it after this silence
    heartbeat_interval_s: float = 2.0
    wall_cap_s: float = 7200.0            # the lab sheet's two-hour cap; the watchdog enforces it too
    boot_timeout_s: float = 600.0
    create_lookup_s: float = 60.0         # after an ambiguous create, look for the pod this long
    connect_timeout_s: float = 180.0      # per (re)connect
    #: where the provider offers a second way to sshd (Vast's proxy): how long the first way
    #: may take to answer before the lab connects through the second
    direct_ssh_s: float = 20.0
    keepalive_interval_s: float = 2.0
    keepalive_count_max: int = 2
    label: str | None = None              # ledger label; None: lab02-tp-spinup-<gpu>x<n>
    refuse_leftovers: bool = True         # headless: refuse to start while old pods live
    api_url: str | None = None            # an already running (mock) API to use
    pod_python: str | None = None         # --pod-python (mock only): the mock pods' interpreter
    mock_options: dict[str, Any] = field(default_factory=dict)  # passed to start_mock_cloud
    finish_grace_s: float | None = 1.0    # after the job's `finished`, wait this long for torchrun
    cost_tick_s: float = 1.0
    status_poll_s: float = 3.0
    end_bound_s: float = 240.0            # the end's bound: terminate until the provider shows
    #                                       it gone (tplab.lab.ending), whatever it answers
    boot_guard: bool = True               # start the pod's boot guard with its container
    guard_first_heartbeat_s: float | None = None  # None: connect timeout + GUARD_AFTER_CONNECT_S

    def provider_name(self) -> str:
        """The cloud this lab runs on ("auto": the cheapest spot offer across clouds)."""
        from tplab.cloud.registry import resolve
        return resolve(self.provider, self.mock)

    def caps(self) -> Caps:
        """The caps this lab runs under: ``tplab.money.caps.resolve_caps`` (budget.toml, then
        ``--lab-cap`` and ``--phase-cap``), with the lab's wall cap for an offer's worst case.
        A ``BudgetError`` (one sentence) when they cannot stand together."""
        from tplab.money.caps import resolve_caps
        return resolve_caps(mock=self.mock, lab_cap_usd=self.lab_cap_usd,
                            phase_cap_usd=self.phase_cap_usd, wall_cap_s=self.wall_cap_s)

    def job_args(self) -> list[str]:
        """The job's arguments on the pod (``python -m tplab.job``) for this lab, after
        torchrun's: the uploaded files, the run's sizes and what it measures."""
        args = ["--checkpoint", "checkpoint.pt", "--prompts", "prompts.txt", "--out", ".",
                "--num-prompts", str(self.num_prompts), "--new-tokens", str(self.new_tokens),
                "--warmup", str(self.warmup),
                "--instrumented-prompts", str(min(self.instrumented_prompts, self.num_prompts))]
        if not self.sweep:
            args.append("--no-sweep")
        if self.compile:
            args.append("--compile")
        if self.comm != "gloo":
            args += ["--comm", self.comm]
        args += ["--profile-tokens", str(self.profile_tokens)]
        if self.d_model_sweep():
            args += ["--sweep-d-model", self.d_model_sweep(),
                     "--sweep-budget-s", f"{self.sweep_budget_s:g}"]
        if not self.mock:  # a GPU was rented: the pod's check refuses a pod that cannot use it
            args += ["--device", "cuda"]
        return args

    def guard_bound_s(self) -> float:
        """How long after its container starts a pod waits for this client's first heartbeat
        before its boot guard ends it. The count starts when the boot (the image pull) is
        over, so the boot timeout is no part of it: what the client still has to do is see
        RUNNING (a status poll, <= 2 s), connect (its own bound: ``connect_timeout_s``), upload
        (about 2 MB) and launch, which writes the first heartbeat (measured on both mock clouds:
        2 s from the container's start, benchmarks/bench_providers.py). So: the connect bound
        plus GUARD_AFTER_CONNECT_S for the poll, the upload on a slow link and the launch's own
        60 s bound: 300 s by default."""
        if self.guard_first_heartbeat_s is not None:
            return self.guard_first_heartbeat_s
        return self.connect_timeout_s + GUARD_AFTER_CONNECT_S

    def d_model_sweep(self) -> str:
        """The sizes the job sweeps ("" for none), the default resolved."""
        if self.sweep_d_model is None:
            return "" if self.mock else GPU_SWEEP_D_MODELS
        return self.sweep_d_model.strip()

    def ledger_label(self) -> str:
        if self.label:
            return self.label
        slug = re.sub(r"[^a-z0-9]+", "", self.gpu_type.lower().replace("nvidia", "")
                      .replace("geforce", ""))
        return f"lab02-tp-spinup-{slug or 'gpu'}x{self.gpus}"

    def instance_type(self) -> str:
        """The manifest's ``instance_type``: '2x NVIDIA GeForce RTX 4090 spot'."""
        return f"{self.gpus}x {self.gpu_type}" + (" spot" if self.spot else " on-demand")

    def terminate_command(self, pod_id: str | None) -> str:
        """The exact shell command that ends ``pod_id`` on this lab's cloud."""
        cmd = f"tplab terminate {pod_id or '<pod id>'}"
        if self.provider and self.provider != "auto":
            cmd += f" --provider {self.provider}"
        if self.mock:
            cmd += " --mock"
            if self.api_url:
                cmd += f" --api-url {self.api_url}"
        return cmd


#: ask the lab to stop now (terminate + verify gone) for ``reason``, ending with ``status``
#: (STOPPED: its user's stop, INTERRUPTED: the provider took the pod back, FAILED: the lab's own
#: stop, a cap or a lost pod): the ``Lab``'s, handed to what watches the pod and the money
StopRequest = Callable[[str, str], None]


@dataclass(frozen=True)
class LabOutcome:
    status: str                 # COMPLETE | FAILED | EDUCATIONAL_STUB | STOPPED | INTERRUPTED
    reason: str
    out_dir: Path
    pod_id: str | None
    verified_gone: bool         # True when a pod existed and the provider showed it gone
    exit_code: int              # 0 only when COMPLETE and no pod is left


class LabStop(Exception):
    """Ends the lab's body with a status and a one-sentence reason."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def exit_code(status: str, pod_left: bool) -> int:
    """0 only when COMPLETE with no pod left; 3 for EDUCATIONAL_STUB, 4 for STOPPED (by the
    user, pod gone), 5 for INTERRUPTED (a spot interruption, pod gone), else 1 (FAILED, or any
    lab that left a pod behind)."""
    if pod_left:
        return 1
    return {COMPLETE: 0, STUB: 3, STOPPED: 4, INTERRUPTED: 5}.get(status, 1)

