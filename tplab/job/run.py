"""The lab job's sequence, run on every rank under torchrun.

    setup ─► load (full checkpoint, strict shard per rank) ─► warmup (rank 0 builds the single
    model; both modes warmed up) ─► decode (per prompt a single-device pass on rank 0 alone, the
    others at a barrier, and a TP pass, uninstrumented then instrumented; the mode going first
    alternates prompt by prompt) ─► profile (a few tokens per mode under torch.profiler:
    trace.json and results.json's timeline, ``profiled_pass.py``) ─► sweep (all-reduce sizes on this process group, alpha-beta
    fit) ─► d_model_sweep (with --sweep-d-model) ─► results.json

``--comm`` chooses the transport of the TP collectives (``comm.py``): the process group's own
(gloo), the shared-memory transport (shm), or both, in which case the TP passes and the sweep run
once per transport, alternating prompt by prompt, and results.json holds each one's figures.

Only rank 0 writes events (stdout and ``events.jsonl``, flushed per line) and results; the other
ranks print to stderr only when they fail. The exit status is 0 only when the run completed and
the TP greedy output equalled the single-device output for every prompt.

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any, Sequence

import torch
import torch.distributed as dist

from tplab.model.gpt import MiniGPT
from tplab.records.events import (
    ErrorEvent, Event, EventWriter, LogEvent, StageEvent, PromptDoneEvent, ResultEvent,
    SweepEvent, TimelineEvent, TokenEvent)
from tplab.records.job_flags import add_job_flags, positive_int
from tplab.records.untrusted import MAX_TEXT
from tplab.util.jsonfile import write_json
from tplab.stats.stability import stability_section
from tplab.records.results import (
    PromptRecord,
    build_results,
    combine_transports,
    timing_notes,
)
from tplab.tp import ShmError
from tplab.tp.shm import ShmComm

from . import comm as comm_
from . import runtime
from .allreduce_sweep import SweepPoint, fit_points, run_sweep, sweep_sizes
from .decode_timing import DecodeRun, decode_timed, decode_timed_static
from .heartbeat import Heartbeat
from .input_check import context_problem, read_prompts
from .machine_probe import MachineProbe
from .runtime import JobError, Runtime


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tplab.job",
                                description="TP inference lab job; run under torchrun.")
    p.add_argument("--checkpoint", required=True, help="full (unsharded) MiniGPT checkpoint")
    p.add_argument("--prompts", required=True, help="text file, one prompt a line")
    p.add_argument("--out", required=True, help="directory for events.jsonl and results.json")
    add_job_flags(p, ("num_prompts", "new_tokens", "warmup", "instrumented_prompts", "no_sweep",
                      "sweep_max_bytes", "sweep_d_model", "sweep_tokens", "sweep_budget_s",
                      "compile", "comm", "profile_tokens"), client=False)
    p.add_argument("--warmup-tokens", type=positive_int, default=20,
                   help="new tokens per warm-up decode (default 20)")
    p.add_argument("--sweep-min-bytes", type=positive_int, default=256)
    p.add_argument("--sweep-iters", type=positive_int, default=None,
                   help="timed all-reduces per size and round, 5 rounds (default 20 on GPU and "
                        "over gloo on the CPU, 120 over shm, whose calls take microseconds)")
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank on the CPU")
    p.add_argument("--pg-timeout", type=float, default=600.0, help="process-group timeout, s")
    p.add_argument("--heartbeat-s", type=float, default=5.0, help="heartbeat event period, s")
    return p


def _shm_in_place(shm: ShmComm, t: torch.Tensor) -> torch.Tensor:
    """The shm transport's all-reduce, in place (what the sweep times)."""
    return shm.all_reduce(t, out=t)


class Job:
    """State of one run on one rank."""

    def __init__(self, args: argparse.Namespace, rt: Runtime, writer: EventWriter | None,
                 comms: comm_.Transports | None = None) -> None:
        self.args = args
        self.rt = rt
        self.comms = comms or comm_.Transports(names=["gloo"], backend=rt.backend)
        self.w = writer
        self.heartbeat: Heartbeat | None = None
        self.tp_model: Any = None
        self.tp_raw: Any = None  # the eager TP model (what the profiled pass decodes)
        self.n_instr = 0
        self.params_full = 0
        self.params_rank = 0
        self.d_models: list[int] = []
        self.prompt_slots: list[list[str]] = []  # per prompt: its unknown words (placeholder slots)
        self.probe = MachineProbe() if rt.rank == 0 else None  # how steady the machine was

    # ------------------------------------------------------------------ events (rank 0 only)
    def emit(self, ev: Event) -> None:
        if self.w is not None:
            self.w.emit(ev)

    def stage(self, name: str, **fields: Any) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stage = name
        self.emit(StageEvent(name=name, **fields))

    def log(self, msg: str, level: str = "info") -> None:
        self.emit(LogEvent(level=level, msg=msg))

    def barrier(self) -> None:
        dist.barrier(device_ids=[self.rt.device.index] if self.rt.is_cuda else None)

    # ------------------------------------------------------------------ steps
    def _prepare(self, model: MiniGPT) -> Any:
        """The model itself, or with --compile its static-cache compiled decoder."""
        model.eval()
        if self.args.compile:
            from tplab.model.compiled import build_decoder
            return build_decoder(model, compile=True)
        return model

    def _decode(self, model: Any, ids: list[int], instrument: bool = False,
                tokens: int | None = None) -> DecodeRun:
        sync = self.rt.sync if (instrument and self.rt.is_cuda) else None
        timed = decode_timed_static if self.args.compile else decode_timed
        return timed(model, ids, tokens or self.args.new_tokens, self.rt.device,
                     instrument=instrument, sync=sync)

    def _warm_up_model(self, model: Any, prompt_ids: list[list[int]]) -> None:
        """``--warmup`` untimed decodes of one model (as it decodes: eager or compiled)."""
        for i in range(self.args.warmup):
            self._decode(model, prompt_ids[i % len(prompt_ids)],
                         tokens=max(1, min(self.args.warmup_tokens, self.args.new_tokens)))

    def _emit_tokens(self, mode: str, index: int, run: DecodeRun,
                     instr: DecodeRun | None = None) -> None:
        if self.w is None:
            return
        for pos, (tok, ms) in enumerate(zip(run.tokens, run.step_ms)):
            if instr is None:
                self.w.emit(TokenEvent(mode=mode, prompt=index, pos=pos, ms=ms, ar_ms=0.0,
                                       token=tok))
            else:
                self.w.emit(TokenEvent(mode=mode, prompt=index, pos=pos, ms=ms,
                                       ar_ms=instr.ar_ms[pos], ms_instrumented=instr.step_ms[pos],
                                       ar_calls=instr.ar_calls[pos], token=tok, ar_measured=True))

    def run(self) -> int:
        """The whole sequence on this rank; 0 only if it completed and the outputs matched."""
        started = time.time()
        self._announce_backend()
        prompts = self._check_args()
        self.stage("load", checkpoint=str(self.args.checkpoint))
        ckpt, prompt_ids = self._load(prompts)
        records, single = self._passes(ckpt, prompts, prompt_ids)
        timeline = self._profile(single, prompt_ids[0], ckpt.config.block_size)
        del single
        if self.rt.is_cuda:
            torch.cuda.empty_cache()
        sweeps = self._sweep()
        dmodel = self._dmodel_sweep(ckpt, prompt_ids)
        if self.rt.rank != 0:
            return 0
        return self._finish(ckpt, records, sweeps, started,
                            {**dmodel, **({"timeline": timeline} if timeline else {})})

    # ------------------------------------------------------------------ the sequence
    def _announce_backend(self) -> None:
        rt = self.rt
        if rt.backend == "gloo":
            self.log(f"gloo on the CPU ({rt.fallback_reason}): {rt.world_size} ranks, "
                     f"torch.set_num_threads({rt.threads}) on each; the single-device baseline "
                     "uses the same thread count",
                     level="warning" if rt.fallback_reason == "no GPU is visible" else "info")
        else:
            self.log(f"nccl on {rt.world_size} GPUs; NCCL_* variables found: "
                     f"{sorted(runtime.nccl_env()) or 'none'} (the job sets none)")
        shm = self.comms.shm
        if shm is not None:
            alongside = [self.comms.label(n) for n in self.comms.names[1:]]
            self.log(f"TP collectives over shared memory (shm): segment {shm.name} in "
                     f"{shm.segment.path.parent}, unlinked once every rank mapped it; ranks' pids "
                     f"{shm.peer_pids()}"
                     + (f"; repeated over {', '.join(alongside)} alongside" if alongside else ""))

    def _check_args(self) -> list[str]:
        a = self.args
        prompts = read_prompts(a.prompts, a.num_prompts)
        if a.instrumented_prompts is not None and a.instrumented_prompts < 1:
            raise JobError("--instrumented-prompts must be at least 1.")
        if a.new_tokens < 2:
            raise JobError(f"--new-tokens must be at least 2 (a prefill and one decode step), "
                           f"got {a.new_tokens}.")
        if a.compile and a.warmup < 1:
            a.warmup = 1
            self.log("--compile: one warm-up decode per mode so compilation is not timed")
        self.n_instr = min(a.num_prompts, a.instrumented_prompts or a.num_prompts)
        from tplab.records.dmodel import sweep_sizes_from_args
        try:
            self.d_models = sweep_sizes_from_args(a.sweep_d_model, a.sweep_tokens)
        except ValueError as exc:
            raise JobError(str(exc)) from None
        return prompts

    def _load(self, prompts: list[str]) -> tuple[Any, list[list[int]]]:
        """The full checkpoint (every rank reads it whole, then keeps its strict shard)."""
        from tplab.model.checkpoint import build_tp, load_checkpoint
        ckpt = load_checkpoint(self.args.checkpoint)
        prompt_ids = [ckpt.tokenizer.prompt_ids(p) for p in prompts]
        self.prompt_slots = [ckpt.tokenizer.slots(p) for p in prompts]
        too_long = context_problem(max(len(ids) for ids in prompt_ids), self.args.new_tokens,
                                   ckpt.config.block_size)
        if too_long:
            raise JobError(too_long)
        tp_raw = self.tp_raw = build_tp(ckpt, self.rt.device)
        self.params_rank = sum(p.numel() for p in tp_raw.parameters())
        self.tp_model = self._prepare(tp_raw)
        return ckpt, prompt_ids

    def _warm_up(self, ckpt: Any, prompt_ids: list[list[int]]) -> tuple[Any, Any]:
        """Rank 0 builds the single-device model; both modes (and every transport) are warmed
        up before any pass is timed. Returns rank 0's (single model as decoded, eager model);
        (None, None) elsewhere."""
        from tplab.model.checkpoint import build_single
        self.stage("warmup", modes=["single", "tp"])
        single = single_raw = None
        self.params_full = 0
        if self.rt.rank == 0:
            single_raw = build_single(ckpt, self.rt.device)
            self.params_full = sum(p.numel() for p in single_raw.parameters())
            single = self._prepare(single_raw)
            self._warm_up_model(single, prompt_ids)
        self.barrier()
        for name in self.comms.names:
            with self.comms.use(name):
                self._warm_up_model(self.tp_model, prompt_ids)
        return single, single_raw

    def _single_pass(self, single: Any, i: int, ids: list[int], tok: Any) -> DecodeRun | None:
        """One single-device pass on rank 0 alone; the others wait at a barrier, blocked in the
        kernel (not spinning: on a 2-core machine the cores may be one core's two hyperthreads,
        and a spinning peer would slow rank 0's compute)."""
        run = None
        if self.rt.rank == 0:
            if self.probe is not None:
                self.probe.sample()
            run = self._decode(single, ids)
            self._emit_tokens("single", i, run)
            self.emit(PromptDoneEvent(mode="single", prompt=i, n_tokens=len(run.tokens),
                                      text=tok.decode(run.tokens, self.prompt_slots[i])))
        self.barrier()
        return run

    def _passes(self, ckpt: Any, prompts: list[str],
                prompt_ids: list[list[int]]) -> tuple[dict[str, list[PromptRecord]], Any]:
        """The timed passes, interleaved prompt by prompt: a single-device pass and, per
        transport, an uninstrumented TP pass (latency) and for the first prompts an instrumented
        one (all-reduce time). Which mode goes first alternates prompt by prompt (single first
        on even prompts), as does the first transport, so drift in the machine's speed hits
        single and TP alike and every figure's samples span the whole stage (a slow stretch of
        a few seconds no longer owns one mode's figure). Rank 0 compares the outputs. Returns the
        records and rank 0's eager single-device model (for the profiled pass)."""
        single, single_raw = self._warm_up(ckpt, prompt_ids)
        self.stage("decode", modes=["single", "tp"], order="interleaved prompt by prompt",
                   transports=[self.comms.label(n) for n in self.comms.names])
        tok = ckpt.tokenizer
        records: dict[str, list[PromptRecord]] = {n: [] for n in self.comms.names}
        for i, ids in enumerate(prompt_ids):
            first_single = i % 2 == 0
            s_run = self._single_pass(single, i, ids, tok) if first_single else None
            runs: dict[str, tuple[DecodeRun, DecodeRun | None]] = {}
            for name in comm_.rotated(self.comms.names, i):
                with self.comms.use(name):
                    plain = self._decode(self.tp_model, ids)
                    instr = (self._decode(self.tp_model, ids, instrument=True)
                             if i < self.n_instr else None)
                runs[name] = (plain, instr)
                if name == self.comms.primary:
                    self._emit_tokens("tp", i, plain, instr)
            if not first_single:
                s_run = self._single_pass(single, i, ids, tok)
            if self.rt.rank != 0 or s_run is None:
                continue
            for name in self.comms.names:
                self._record(records[name], name, i, prompts[i], s_run, *runs[name], tok)
        return records, single_raw

    def _profile(self, single: Any, ids: list[int], block_size: int) -> dict[str, Any] | None:
        """The profiled pass (--profile-tokens, 0: none) over the transport carrying the
        figures; its ``timeline`` event and results.json section (rank 0; None elsewhere)."""
        from .profiled_pass import ProfiledPass
        a, rt, label = self.args, self.rt, self.comms.label(self.comms.primary)
        if not a.profile_tokens:
            return None
        self.stage("profile", tokens=a.profile_tokens, modes=["single", "tp"], comm=label)
        with self.comms.use(self.comms.primary):
            section = ProfiledPass(
                tokens=a.profile_tokens, rank=rt.rank, world_size=rt.world_size,
                device=rt.device, barrier=self.barrier, sync=rt.sync if rt.is_cuda else None,
                out_dir=Path(a.out), comm=label, compiled=a.compile,
            ).run(single, self.tp_raw, ids, block_size)
        if section is not None:
            self.emit(TimelineEvent(section=section))
        return section

    def _record(self, into: list[PromptRecord], name: str, i: int, prompt: str,
                s_run: DecodeRun, plain: DecodeRun, instr: DecodeRun | None, tok: Any) -> None:
        """Rank 0: one prompt's record over one transport, its prompt_done and a mismatch's error
        (the TP tokens were emitted as their pass ended)."""
        rec = PromptRecord(
            index=i, prompt=prompt, single=s_run.record(), tp=plain.record(),
            tp_instr=instr.record() if instr is not None else None,
            single_text=tok.decode(s_run.tokens, self.prompt_slots[i]),
            tp_text=tok.decode(plain.tokens, self.prompt_slots[i]))
        into.append(rec)
        mode = "tp" if name == self.comms.primary else f"tp-{self.comms.label(name)}"
        self.emit(PromptDoneEvent(mode=mode, prompt=i, text=rec.tp_text, n_tokens=len(plain.tokens),
                                  match=rec.match, comm=self.comms.label(name)))
        if not rec.match:
            self.emit(ErrorEvent(fatal=False, msg=(
                f"prompt {i}: TP output differs from the single-device output (over "
                f"{self.comms.label(name)}; first difference at token {rec.first_difference()}).")))

    def _sweep_point(self, label: str, p: SweepPoint) -> None:
        self.emit(SweepEvent(bytes=p.bytes, ms=p.ms, algbw_gbps=p.algbw_gbps,
                             busbw_gbps=p.busbw_gbps, p99_ms=p.p99_ms, spread=p.spread,
                             unstable=p.unstable, comm=label))

    def _sweep(self) -> dict[str, tuple[list[dict[str, Any]], Any, str]]:
        """Per transport: all-reduce sizes on this run's ranks, and their alpha-beta fit."""
        a, rt = self.args, self.rt
        if a.no_sweep:
            return {n: ([], None, "sweep skipped (--no-sweep)") for n in self.comms.names}
        self.stage("sweep", transports=[self.comms.label(n) for n in self.comms.names])
        sizes = sweep_sizes(a.sweep_min_bytes, a.sweep_max_bytes)
        out: dict[str, tuple[list[dict[str, Any]], Any, str]] = {}
        for name in self.comms.names:
            label = self.comms.label(name)
            shm = self.comms.shm if name == "shm" else None
            # ten shm calls last a millisecond, less than one descheduling of a busy machine:
            # take more, so that their median is the transport's and not the scheduler's
            iters = a.sweep_iters or (120 if shm and not rt.is_cuda else 20)
            points = run_sweep(
                rt.device, sizes, iters,
                all_reduce=functools.partial(_shm_in_place, shm) if shm else None,
                on_point=functools.partial(self._sweep_point, label))
            try:
                out[name] = ([p.to_dict() for p in points], fit_points(points, rt.world_size), "")
            except ValueError as exc:
                self.log(f"alpha-beta fit over {label} failed: {exc}", level="warning")
                out[name] = ([p.to_dict() for p in points], None, str(exc))
        return out

    def _dmodel_sweep(self, ckpt: Any, prompt_ids: list[list[int]]) -> dict[str, Any]:
        """The d_model sweep (--sweep-d-model) over the transport carrying the figures; its
        results.json keys (``dmodel_results.sweep_section``), empty without the flag."""
        from tplab.records.dmodel import sweep_section
        from .dmodel_sweep import DModelSweep, SweepSettings, method_note
        a, rt = self.args, self.rt
        if not a.sweep_d_model:
            return {}
        settings = SweepSettings(d_models=self.d_models, tokens=a.sweep_tokens,
                                 warmup_tokens=max(1, min(a.warmup_tokens, a.sweep_tokens)),
                                 budget_s=a.sweep_budget_s)
        label = self.comms.label(self.comms.primary)
        self.stage("d_model_sweep", d_models=settings.d_models, tokens=settings.tokens,
                   budget_s=settings.budget_s, comm=label)
        sweep = DModelSweep(settings, ckpt.config, prompt_ids[0], rt.device, rt.rank,
                            rt.world_size, self.barrier, rt.sync if rt.is_cuda else None,
                            self.emit, self.log, self.probe.sample if self.probe else None,
                            a.profile_tokens)
        with self.comms.use(self.comms.primary):
            points, skipped = sweep.run()
        return sweep_section(points, skipped,
                             method_note(settings, rt.device.type, rt.world_size, label))

    def _finish(self, ckpt: Any, records: dict[str, list[PromptRecord]],
                sweeps: dict[str, tuple[list[dict[str, Any]], Any, str]], started: float,
                dmodel: dict[str, Any] | None = None) -> int:
        """results.json and the result event (rank 0); a mismatch fails the run."""
        a, rt, comms = self.args, self.rt, self.comms
        self.stage("results")
        warmup_tokens = min(a.warmup_tokens, a.new_tokens)
        config = {"checkpoint": str(a.checkpoint), "prompts_file": str(a.prompts),
                  "num_prompts": a.num_prompts, "new_tokens": a.new_tokens, "warmup": a.warmup,
                  "warmup_tokens": warmup_tokens, "instrumented_prompts": self.n_instr,
                  "sweep": not a.no_sweep, "compile": a.compile, "device": a.device,
                  "threads_per_rank": rt.threads, "comm": a.comm}
        model = {**ckpt.config.to_dict(), "params": self.params_full,
                 "params_per_rank": self.params_rank}
        env = {**runtime.capture_env(rt), "comm": comms.env()}
        finished = time.time()
        per_transport: dict[str, dict[str, Any]] = {}
        for name in comms.names:
            label = comms.label(name)
            sync_desc = ("sync=torch.cuda.synchronize" if rt.is_cuda
                         else f"sync=None: {label} collectives are blocking")
            timing = timing_notes(rt.device.type, rt.threads, a.warmup, sync_desc,
                                  warmup_tokens=warmup_tokens, instrumented=self.n_instr,
                                  num_prompts=a.num_prompts)
            timing["comm"] = comms.note()
            points, fit, fit_error = sweeps[name]
            res = build_results(
                records=records[name], config=config, model=model, env=env, timing=timing,
                sweep=points, fit=fit, fit_error=fit_error, started_at=started,
                finished_at=finished)
            res["sweep"]["transport"] = label
            per_transport[label] = res
        results = combine_transports(per_transport, comms.label(comms.primary))
        results.update(dmodel or {})
        results["machine"] = self.probe.section() if self.probe else None
        results["config"]["sweep_d_model"], results["stability"] = self.d_models, stability_section(results)
        # a TP mismatch at any size of the d_model sweep fails the run like a prompt's does
        bad_d = [p["d_model"] for p in results.get("d_model_sweep", []) if not p["outputs_match"]]
        results["outputs_match"] = results["ok"] = results["outputs_match"] and not bad_d
        results["finished_at"] = finished = time.time()
        results["wall_s"] = finished - started
        write_json(Path(a.out) / "results.json", results)
        self.emit(ResultEvent(results=results))
        if not results["outputs_match"]:
            bad = [f"prompts {t['mismatched_prompts']} over {k}" for k, t in results["transports"].items()
                   if t["mismatched_prompts"]] + ([f"d_model sweep sizes {bad_d}"] if bad_d else [])
            self.emit(ErrorEvent(fatal=True, msg="TP greedy output differs from the single-device "
                                 "output (" + "; ".join(bad) + "); the run failed."))
            return 1
        self.stage("finished", wall_s=results["wall_s"])
        return 0


def main(argv: Sequence[str] | None = None, stdout: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code, left = _run(args, stdout or sys.stdout)
    if not left:  # the run is over and written: end without the process group, not never
        print(f"tplab.job rank {os.environ.get('RANK', '?')}: the process group did not close "
              f"within {runtime.SHUTDOWN_TIMEOUT_S:.0f} s after the run ended; exiting without "
              "it.", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run(args: argparse.Namespace, stdout: IO[str]) -> tuple[int, bool]:
    """The job's exit status, and whether its process group closed in time."""
    rt: Runtime | None = None
    writer: EventWriter | None = None
    events_fh: IO[str] | None = None
    job: Job | None = None
    comms: comm_.Transports | None = None
    try:
        # rank 0 opens the event sinks before joining the group, so a failure to start (too few
        # GPUs, no torchrun) is an error event too, not only a line on stderr
        if os.environ.get("RANK", "0") == "0":
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            events_fh = open(out / "events.jsonl", "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
            writer = EventWriter([stdout, events_fh], src="job")
        rt = runtime.init(args.device, args.threads, args.pg_timeout)
        job = Job(args, rt, writer)
        job.stage("setup", rank_count=rt.world_size, backend=rt.backend, comm=args.comm)
        comms = job.comms = comm_.setup(args.comm, rt, args.pg_timeout)
        if writer is not None:
            job.heartbeat = Heartbeat(writer, args.heartbeat_s)
            job.heartbeat.start()
        code = job.run()
        # every rank leaves together: a gloo rank that tore its process group down while its peer
        # was still writing results has aborted at exit ("terminate called without an active
        # exception"), turning a finished run into a failed torchrun
        job.barrier()
    except Exception as exc:  # noqa: BLE001 - every failure becomes one error event
        user_error = isinstance(exc, JobError) or type(exc).__name__ == "CheckpointError"
        # a dead or stuck peer in the shm transport says so in one sentence of its own
        clear = user_error or isinstance(exc, ShmError)
        msg = str(exc) if clear else f"{type(exc).__name__}: {exc}"
        if writer is not None:
            writer.emit(ErrorEvent(msg=msg[:MAX_TEXT], fatal=True))
        rank = rt.rank if rt is not None else os.environ.get("RANK", "?")
        print(f"tplab.job rank {rank}: {msg}", file=sys.stderr)
        if not user_error:
            traceback.print_exc(file=sys.stderr)
        code = 1
    finally:
        if job is not None and job.heartbeat is not None:
            job.heartbeat.stop()
        if events_fh is not None:
            events_fh.close()
        if comms is not None:
            comms.close()  # tells the peers this rank left, then unmaps
        left = runtime.shutdown()
    return code, left
