"""The job's flags, declared once: the job (``python -m tplab.job``), the lab's options (`tplab run`,
`tplab-tui`) and `tplab local` all add them from here, with the same types and validators.

Why here: the job's command line is a contract between the client that writes it and the pod
that parses it. Declared three times, the three drifted apart (one front end took ``--warmup -1``
that another refused; the job took ``--new-tokens 0``). Each flag is one ``JobFlag``; a front end
picks the flags it offers with ``add_job_flags`` and may set another default where it differs on
purpose (the clients time the all-reduces on 3 prompts, the job on every prompt by default).
On the clients ``--num-prompts`` is also spelled ``--prompts`` (a count there; the job's
``--prompts`` is the prompts file). Standard library only: travels to the pod with the job.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable

#: the transports of the TP collectives (``tplab.job.comm`` sets them up)
COMM_CHOICES = ("gloo", "shm", "both")


def _whole_number_at_least(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value} must be {least} or more")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number, 1 or more."""
    return _whole_number_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: a whole number, 0 or more."""
    return _whole_number_at_least(text, 0)


#: the most tokens per mode the profiled pass may record (each adds a few hundred trace events
#: a rank; the trace is bounded anyway, ``tplab.records.trace_merge.MAX_TRACE_BYTES``)
MAX_PROFILE_TOKENS = 32


def profile_tokens(text: str) -> int:
    """argparse type of --profile-tokens: a whole number from 0 (no profiled pass) to
    ``MAX_PROFILE_TOKENS``."""
    value = non_negative_int(text)
    if value > MAX_PROFILE_TOKENS:
        raise argparse.ArgumentTypeError(f"{value} is more than {MAX_PROFILE_TOKENS}: the "
                                         "profiled pass shows a few tokens, not a run")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number more than 0 (not NaN)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} must be more than 0")
    return value


def parse_d_models(text: str) -> list[int]:
    """``"64,128,256"`` -> [64, 128, 256] (sorted, unique); ValueError with one sentence."""
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            d = int(part)
        except ValueError:
            raise ValueError(f"--sweep-d-model takes integers separated by commas, got {part!r}."
                             ) from None
        if d < 8:
            raise ValueError(f"--sweep-d-model sizes must be at least 8, got {d}.")
        out.add(d)
    if not out:
        raise ValueError("--sweep-d-model needs at least one size, e.g. 64,256,512.")
    return sorted(out)


def sweep_d_model_arg(text: str) -> str:
    """argparse type of --sweep-d-model: "" for none/off, else the sizes sorted, a typo refused
    by the parser in one sentence."""
    if text.strip().lower() in ("", "none", "off"):
        return ""
    try:
        return ",".join(str(d) for d in parse_d_models(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True)
class JobFlag:
    """One flag of the job's command line: its spelling, type (validator), default and help."""

    flag: str
    help: str
    type: Callable[[str], Any] | None = None
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    #: a store_true switch (no value)
    switch: bool = False
    #: other spellings the clients accept (``--prompts`` for the count)
    client_aliases: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


JOB_FLAGS: dict[str, JobFlag] = {f.dest: f for f in (
    JobFlag("--num-prompts", "how many prompts to decode, the first N of the prompts file "
            "(default: %(default)s)", positive_int, 10, "N", client_aliases=("--prompts",)),
    JobFlag("--new-tokens", "new tokens per prompt (default: %(default)s)", positive_int, 100,
            "N"),
    JobFlag("--warmup", "untimed warm-up decodes per mode before timing (default: %(default)s)",
            non_negative_int, 2, "N"),
    JobFlag("--instrumented-prompts", "time the all-reduces (a second, instrumented TP pass) on "
            "the first K prompts (the job's default: every prompt; a client's: 3, since on a CPU "
            "a gloo all-reduce costs ~1 ms and a token does 14); latency always comes from the "
            "uninstrumented pass over every prompt", positive_int, None, "K"),
    JobFlag("--no-sweep", "skip the all-reduce size sweep", switch=True),
    JobFlag("--sweep-max-bytes", "largest all-reduce message of the sweep (default: 4 MiB)",
            positive_int, 4 << 20, "BYTES"),
    JobFlag("--sweep-d-model", "also decode MiniGPT-grammar's architecture with random weights "
            "at these d_model values, single and TP (e.g. 64,256,512): the measured scaling "
            "curve and crossover; 'none' for none", sweep_d_model_arg, "", "D,D,..."),
    JobFlag("--sweep-tokens", "timed new tokens per mode at each size of the d_model sweep "
            "(default: %(default)s)", positive_int, 32, "N"),
    JobFlag("--sweep-budget-s", "seconds the d_model sweep may take; larger sizes that would "
            "overrun it are skipped with the reason (default: %(default)s)", positive_float,
            180.0, "S"),
    JobFlag("--compile", "torch.compile the models (both; compilation happens in the warm-up)",
            switch=True),
    JobFlag("--profile-tokens", "tokens per mode decoded under torch.profiler after the timed "
            "passes (single on rank 0, TP on every rank): the merged trace.json for Perfetto and "
            "the timeline of compute, on the wire, waiting; 0 for none (default: %(default)s, at "
            f"most {MAX_PROFILE_TOKENS})", profile_tokens, 4, "N"),
    JobFlag("--comm", "transport of the TP collectives on the CPU: gloo (the process group, "
            "default), shm (shared memory between the ranks on one host) or both (shm carries "
            "the figures; gloo is measured alongside); GPU pods use NCCL", None, "gloo",
            choices=COMM_CHOICES),
)}


def add_job_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, names: tuple[str, ...],
                  *, client: bool = True, defaults: dict[str, Any] | None = None,
                  helps: dict[str, str] | None = None) -> None:
    """Add the named job flags (``JOB_FLAGS`` keys) to a parser or group. ``client`` adds the
    clients' extra spellings; ``defaults`` / ``helps`` replace a flag's default or help text
    where a front end differs on purpose."""
    defaults = defaults or {}
    helps = helps or {}
    for name in names:
        f = JOB_FLAGS[name]
        spellings = ((*f.client_aliases, f.flag) if client else (f.flag,))
        text = helps.get(name, f.help)
        if f.switch:
            parser.add_argument(*spellings, dest=f.dest, action="store_true", help=text)
            continue
        kw: dict[str, Any] = {"dest": f.dest, "default": defaults.get(name, f.default),
                              "help": text}
        if f.type is not None:
            kw["type"] = f.type
        if f.metavar is not None:
            kw["metavar"] = f.metavar
        if f.choices is not None:
            kw["choices"] = f.choices
        parser.add_argument(*spellings, **kw)
