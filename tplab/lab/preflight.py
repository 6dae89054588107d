"""Preflight: everything a lab can check before it spends a cent, and the price it will pay.

Why first and apart: a refusal here costs nothing (no authorization, no pod), so every check
whose answer is knowable before spending belongs here: the input files, the budget's
pre-flight rule (remaining ≥ lab cap + buffer), pods of earlier labs still alive, and the
provider's quote against the lab cap — including whether RunPod still offers spot at all, so a
spot lab that cannot be had is refused before any money is authorized — and whether the pod's
image can run the job on the lab's GPU and on the hosts the provider offers. Each refusal is a
``LabStop`` with one sentence. Each check is a function of the owners it needs (the config,
the provider, the lab's pod and money, the stream), never of the ``Lab``.
"""

from __future__ import annotations

import asyncio
import functools
import shlex
from pathlib import Path

from tplab.cloud import image_fit
from tplab.cloud.base import Provider, Quote
from tplab.cloud.image_fit import ImageChoice
from tplab.keys.redact import one_line
from tplab.lab import leftovers
from tplab.lab.lab_config import FAILED, STUB, LabConfig, LabStop
from tplab.lab.pod import LabPod
from tplab.lab.pod_python import pod_python_problem
from tplab.lab.stream import LabStream
from tplab.money.budget_config import fmt_usd
from tplab.money.caps import Caps
from tplab.money.lab_money import LabMoney
from tplab.records.job_flags import COMM_CHOICES
from tplab.records.prompts_file import PromptsFileError, read_prompts


def input_problem(cfg: LabConfig) -> str | None:
    """The first problem with the lab's own inputs, found here without torch or network: the
    transport, the TP degree, the checkpoint and prompts files (the prompts read as the job
    reads them: UTF-8 text, enough prompts), ``--pod-python``. One sentence ending "Nothing was
    created.", or None. `tplab run` and the dashboard ask it before a lab folder exists; the
    lab's pre-flight asks it again."""
    if cfg.comm not in COMM_CHOICES:
        return f"--comm must be one of {', '.join(COMM_CHOICES)}, not {cfg.comm!r}. Nothing was created."
    if cfg.comm != "gloo" and not cfg.mock:
        return (f"--comm {cfg.comm} is the shared-memory transport of CPU ranks on one host (the "
                "mock lab, `tplab local`); a GPU pod's collectives go over NCCL: drop --comm. "
                "Nothing was created.")
    if cfg.gpus < 2:
        return (f"--gpus {cfg.gpus}: tensor parallelism needs at least 2 GPUs (--gpus is the TP "
                "degree); use --gpus 2. Nothing was created.")
    for path, what in ((cfg.checkpoint, "checkpoint"), (cfg.prompts, "prompts file")):
        if not Path(path).is_file():
            return f"The {what} {path} does not exist; pass an existing file. Nothing was created."
    try:
        read_prompts(cfg.prompts, cfg.num_prompts, flag="--prompts")
    except PromptsFileError as exc:
        return f"{str(exc)[0].upper()}{str(exc)[1:]} Nothing was created."
    bad_python = pod_python_problem(cfg.pod_python, cfg.mock)
    return f"{bad_python} Nothing was created." if bad_python else None


def check_inputs(config: LabConfig) -> None:
    """``input_problem``, as the lab's refusal (FAILED, nothing authorized)."""
    problem = input_problem(config)
    if problem:
        raise LabStop(FAILED, problem)


def choose_image(config: LabConfig, pod: LabPod, stream: LabStream) -> ImageChoice:
    """The pod's image (``--image``, else the default for the cloud and the GPU's generation)
    and whether it can drive the lab's GPU at all, whatever the host: the torch range, the GPU's
    kernels, sshd on RunPod, a compiler for ``--compile``. Refused: FAILED, nothing authorized.
    "Cannot tell" (an image or a GPU tplab does not know) is a warning: the pod checks its
    torch and its GPU when it starts. Whether a host's driver runs the image's CUDA is the
    quote's part (``choose_price``)."""
    name = pod.provider_name
    choice = image_fit.choose_image(name, config.gpu_type, config.image, compile=config.compile)
    pod.take_image(choice)
    fit = image_fit.gpu_fit(choice, config.gpu_type, name, compile=config.compile)
    if fit.ok is False:
        raise LabStop(FAILED, one_line(f"{fit.reason}; nothing was created"))
    stream.log(f"image {choice.describe()}")
    if fit.ok is None:
        stream.warn(fit.reason)
    return choice


async def settle_dead_holds(config: LabConfig, provider: Provider, stream: LabStream) -> None:
    """Holds that dead clients left with nothing billing against them are settled before the
    budget is checked (``leftovers.reconcile_holds``): not money this lab should be refused for."""
    notes = await asyncio.to_thread(leftovers.reconcile_holds, provider, config.mock)
    for note in notes:
        stream.log(note)


def open_budget(config: LabConfig, money: LabMoney, stream: LabStream) -> Caps:
    """Open the ledger under the lab's caps (``LabConfig.caps``, taken by ``money.open``) and
    apply its pre-flight rule; returns the caps."""
    caps = config.caps()
    guard = money.open(caps)
    summary = guard.summary()
    damaged = summary.damaged_note()
    if damaged:
        stream.warn(damaged)
    stream.emit(money.budget_event(summary, config.ledger_label()))
    pre = money.preflight()
    if not pre.ok:
        raise LabStop(FAILED, pre.message)
    stream.log(pre.message)
    return caps


async def check_leftovers(config: LabConfig, provider: Provider, lab_id: str,
                          stream: LabStream) -> None:
    """Warn about pods of earlier labs still alive; refuse to start beside them (headless). A
    pod an earlier lab could not prove gone that the provider now shows gone has that lab's
    hold settled here, at what it billed (said in the log)."""
    cfg = config
    settled: list[str] = []  # holds of ended labs whose pods the listing now shows gone
    found = await asyncio.to_thread(functools.partial(
        leftovers.live_pods, provider, cfg.mock, exclude_lab=lab_id, settled=settled))
    for note in settled:
        stream.log(note)
    if not found:
        return
    desc = leftovers.describe(found)
    stream.warn(f"pods of earlier labs are still alive: {desc}", pods=[p.info.id for p in found])
    if cfg.refuse_leftovers:
        ids = " ".join(p.info.id for p in found)
        raise LabStop(FAILED, f"pods of earlier labs are still alive ({desc}); "
                      f"terminate them with `tplab terminate {ids}`"
                      f"{' --mock' if cfg.mock else ''} (or `--all`) and start again")


#: the planned run, for ``estimated_cost_usd``: boot, upload, torchrun start and teardown take
#: about this long on RunPod, whatever the job ...
PLANNED_OVERHEAD_S = 300.0
#: ... and each decoded token about this long per pass (single device, TP, instrumented TP)
PLANNED_S_PER_TOKEN = 0.02
PLANNED_PASSES = 3
ESTIMATE_FORMULA = (f"price_usd_per_hr x min(wall cap, {PLANNED_OVERHEAD_S:.0f} s + prompts x "
                    f"new tokens x {PLANNED_PASSES} passes x {PLANNED_S_PER_TOKEN} s + the "
                    "d_model sweep's budget when it runs) / 3600")




def planned_seconds(cfg: LabConfig) -> float:
    """How long the planned run should keep the pod (see ESTIMATE_FORMULA)."""
    job = cfg.num_prompts * cfg.new_tokens * PLANNED_PASSES * PLANNED_S_PER_TOKEN
    sweep = cfg.sweep_budget_s if cfg.d_model_sweep() else 0.0  # the pod skips what overruns it
    return min(cfg.wall_cap_s, PLANNED_OVERHEAD_S + job + sweep)


#: LabConfig field -> its `tplab run` flag (options.add_lab_arguments), for on_demand_command
_FLAGS = (("api_url", "--api-url"), ("gpu_type", "--gpu-type"), ("gpus", "--gpus"),
          ("lab_cap_usd", "--lab-cap"), ("phase_cap_usd", "--phase-cap"),
          ("num_prompts", "--prompts"), ("new_tokens", "--new-tokens"), ("warmup", "--warmup"),
          ("instrumented_prompts", "--instrumented-prompts"), ("out_dir", "--out"),
          ("checkpoint", "--checkpoint"), ("prompts", "--prompts-file"),
          ("heartbeat_timeout_s", "--heartbeat-timeout"), ("wall_cap_s", "--wall-cap"),
          ("boot_timeout_s", "--boot-timeout"), ("sweep_budget_s", "--sweep-budget-s"),
          ("image", "--image"), ("profile_tokens", "--profile-tokens"),
          ("end_bound_s", "--terminate-timeout"))


def on_demand_command(cfg: LabConfig) -> str:
    """The `tplab run` line that runs this same lab on an on-demand pod (every setting that
    differs from the defaults, plus ``--on-demand``)."""
    default = LabConfig()
    parts = ["tplab run --on-demand"]
    if cfg.mock:
        parts.append("--mock")
    for name, flag in _FLAGS:
        value = getattr(cfg, name)
        if value is not None and value != getattr(default, name):
            text = f"{value:g}" if isinstance(value, float) else str(value)
            parts.append(f"{flag} {shlex.quote(text)}")
    if not cfg.sweep:
        parts.append("--no-sweep")
    if cfg.compile:
        parts.append("--compile")
    if cfg.comm != "gloo":
        parts.append(f"--comm {cfg.comm}")
    if cfg.sweep_d_model is not None:
        parts.append(f"--sweep-d-model {shlex.quote(cfg.sweep_d_model or 'none')}")
    return " ".join(parts)


def spot_stub_reason(cfg: LabConfig, quote: Quote | None, why: str, caps: Caps) -> str:
    """The EDUCATIONAL_STUB sentence when spot is not to be had: why, the on-demand quote, its
    worst case against the lab cap, and the exact command that asks for on-demand."""
    why = why.rstrip(". ")
    price = quote.on_demand_usd_per_hr if quote else None
    if quote is None or price is None or not quote.on_demand_available:
        stock = f" (stock {quote.availability})" if quote and quote.availability else ""
        return (f"no spot pod for {cfg.gpus}x {cfg.gpu_type}: {why}; the lab is spot-first and "
                f"never switches to on-demand by itself, and on-demand has no capacity right "
                f"now either{stock}; nothing was created")
    worst = caps.worst_case(price)
    lab_cap = caps.lab_cap_usd
    fits = (f"within the lab cap ${lab_cap:.2f}" if worst.fits else
            f"ABOVE the lab cap ${lab_cap:.2f} (lower --wall-cap or raise --lab-cap)")
    return (f"no spot pod for {cfg.gpus}x {cfg.gpu_type}: {why}; the lab is spot-first and "
            f"never switches to on-demand by itself. On-demand is ${price:.3f}/h (stock "
            f"{quote.availability or '?'}), worst case {worst.text()} for the {worst.hours:.2f} "
            f"h wall cap, {fits}: to use it, run `{on_demand_command(cfg)}`; nothing was created")


async def choose_price(config: LabConfig, pod: LabPod, money: LabMoney,
                       stream: LabStream) -> float:
    """The provider's quote for the lab's GPUs (spot unless told otherwise) — REST v2's catalog
    price and stock, spot from GraphQL while RunPod offers it: the hourly price, or a refusal
    (EDUCATIONAL_STUB, nothing authorized, nothing created) when there is no offer or the wall
    cap's worst case exceeds the lab cap. Records the quote, the expected cost of the planned
    run (ESTIMATE_FORMULA) and the worst case with the lab's money (``LabMoney.take_offer``)
    and the price with its pod."""
    cfg = config
    caps = money.caps
    assert caps is not None  # the pre-flight opened the budget first
    quote = await asyncio.to_thread(pod.cloud.quote, cfg.gpu_type, cfg.gpus, pod.image_name)
    money.take_quote(quote)
    if quote.image_refusal:  # offers there are, but no host whose driver runs the image
        raise LabStop(FAILED, one_line(f"{quote.image_refusal}; nothing was created"))
    for host in quote.hosts:
        mark = {True: "runs", False: "cannot run", None: "may run"}[host.ok]
        stream.log(f"{host.offer} {mark} the image: {host.why}")
    if cfg.spot:
        if not quote.spot_available or quote.spot_usd_per_hr is None:
            raise LabStop(STUB, spot_stub_reason(cfg, quote, quote.spot_note or "no spot offer",
                                                 caps))
        price, kind = float(quote.spot_usd_per_hr), "spot"
    else:
        if not quote.on_demand_available or quote.on_demand_usd_per_hr is None:
            raise LabStop(STUB, f"no on-demand capacity for {cfg.gpus}x {cfg.gpu_type} right "
                          f"now (the provider's stock: {quote.availability or 'unknown'}); "
                          "nothing was created")
        price, kind = float(quote.on_demand_usd_per_hr), "on-demand"
    worst = money.take_offer(price, kind, planned_seconds(cfg))
    lab_cap = caps.lab_cap_usd
    if not worst.fits:
        raise LabStop(STUB, f"the {kind} price ${price:.3f}/h for "
                      f"{worst.hours:.2f} h (the wall cap) could cost "
                      f"{worst.text()}, above the lab cap ${lab_cap:.2f}; nothing was created")
    pod.take_price(price)
    stock = f", stock {quote.availability}" if quote.availability else ""
    expected = money.estimated_cost_usd
    stream.log(f"{kind} quote ${price:.3f}/h{stock}; expected "
               f"{fmt_usd(expected) if expected is not None else 'an unknown amount'} for "
               f"the planned run, worst case {worst.text()} at the wall cap, within the lab "
               f"cap ${lab_cap:.2f}")
    return price
