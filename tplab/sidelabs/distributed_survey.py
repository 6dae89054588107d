"""DISTRIBUTED.md: lab 03's one-page survey of DDP, FSDP, TP and PP, priced for MiniGPT-grammar,
and DISTRIBUTED-detail.md beside it with every figure worked out.

Lab 03 (torch.compile on MiniGPT-grammar, Part F) lists the survey among the compile lab's deliverables and its report (Part G)
points to it, so ``tplab compile`` writes it into the same directory. Each section says the pattern,
its API, when to use it and when not in two or three sentences of our own, then what it would
communicate for this model, computed from the checkpoint's shapes (``distributed_costs``), and the
measured figure of a run the user pointed at (``measured_runs``), or "not measured here". The
closing three sentences pick a pattern with ``distributed_costs.choose`` and argue it from those
numbers, then say from which model size the answer changes (``distributed_costs.thresholds``).

The lab sheet asks for about a page (~500 words, four sections of ~125 words): ``render`` is that page,
each section the pattern in our own words and one line of this model's figures, then the three
closing sentences; ``render_detail`` is the same survey with every figure worked out (per-layer
payloads, measured runs, where TP would pay with its uncertainty, the strategy chooser's tables),
written beside it as ``DETAIL_FILE``.

``collect`` reads the checkpoint (torch) and the runs into plain data, stored in
compile-results.json; ``render`` turns that data into the page with no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from tplab.sidelabs import distributed_costs as dc
from tplab.sidelabs import strategy
from tplab.sidelabs.measured_runs import DDPMeasured, TPMeasured, check_same_model, load_ddp_run, load_tp_run
from tplab.sidelabs.model_shapes import ModelShapes, read_model_shapes

FILE = "DISTRIBUTED.md"
SECTIONS = ("## 1. DDP — Distributed Data Parallel", "## 2. FSDP — Fully Sharded Data Parallel",
            "## 3. Tensor parallel (TP)", "## 4. Pipeline parallel (PP)")
CLOSING = "## Which one for MiniGPT-grammar"
CHOOSER = "## Choosing by size and topology"
NOT_MEASURED = "not measured here"
#: the page's detail: every figure of the page worked out, the measured runs, the chooser
DETAIL_FILE = "DISTRIBUTED-detail.md"
#: each pattern in a few sentences of our own: what it is, its API, when to use it and when not
PROSE = (
    ("Every device holds the whole model and its own slice of each batch; after `backward()` the "
    "gradients are averaged with an all-reduce, bucket by bucket while the backward still runs, so "
    "every replica takes the same step. API: `torch.nn.parallel.DistributedDataParallel(model)`. "
    "Use it when the model with its gradients and optimizer state fits on one device and you want "
    "throughput; not when it does not fit (FSDP) or one layer alone does not (TP)."),
    ("Parameters, gradients and optimizer state are split so each device keeps 1/N; a layer's "
    "weights are all-gathered just before it runs and freed after, and the backward gathers them "
    "again and reduce-scatters the gradients. API: `torch.distributed.fsdp.fully_shard(block)` per "
    "block, then on the model (or `FullyShardedDataParallel(model, auto_wrap_policy=...)`). Use it "
    "when the training state does not fit on one device but a layer does; not when the model fits "
    "(DDP moves less) or a single layer does not (TP)."),
    ("Inside each layer the weight matrices are split: a column-parallel linear gives each device "
    "some output features, the row-parallel linear after it multiplies its slice and an all-reduce "
    "sums the partial results. API: `torch.distributed.tensor.parallel.parallelize_module` with "
    "`ColwiseParallel`/`RowwiseParallel`, Megatron-LM, or tplab's own `tplab/tp`, which this lab "
    "runs. Use it when one layer does not fit on a device, or to cut a large model's per-token "
    "latency over NVLink; not when the collectives are slow next to a layer's compute (small "
    "models, PCIe or network links)."),
    ("The model is cut by depth into stages, one per device, and each batch into micro-batches that "
    "flow through them: activations go forward across each cut, their gradients come back. API: "
    "`torch.distributed.pipelining` (`PipelineStage` with `ScheduleGPipe` or `Schedule1F1B`; the "
    "lab sheet's `pipeline.sync.Pipe` is gone from torch). Use it for deep models on slowly linked "
    "devices, as it sends only activations at the cuts; not with few layers or fast links, where "
    "the bubble (stages idle while the pipe fills and drains) costs more than DDP or TP."),
)


def collect(checkpoint: Path, ddp_run: Path | None = None, tp_run: Path | None = None) -> dict[str, Any]:
    """The survey's inputs as JSON-ready data. Raises CheckpointError or MeasuredRunError."""
    shapes = read_model_shapes(checkpoint)
    ddp = load_ddp_run(ddp_run) if ddp_run is not None else None
    tp = load_tp_run(tp_run) if tp_run is not None else None
    if ddp is not None:
        check_same_model(ddp.model, shapes.config, "--ddp-run", ddp.path, str(checkpoint))
    if tp is not None:
        check_same_model(tp.model, shapes.config, "--tp-run", tp.path, str(checkpoint))
    return {"model": shapes.to_json(), "ddp_run": ddp.to_json() if ddp else None,
            "tp_run": tp.to_json() if tp else None}


def byte_figure(n: float) -> str:
    """A byte count as the page writes every one: exact, with thousands separators."""
    return f"{round(n):,} B"


def _span(values: Iterable[int]) -> str:
    """One byte figure, or "x to y" when the units differ in size."""
    v = sorted(set(values))
    return byte_figure(v[0]) if len(v) == 1 else f"{byte_figure(v[0])} to {byte_figure(v[-1])}"


def _names(modules: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in modules)


def _d(x: float | None) -> str:
    return f"≈ {x:,.0f}" if x is not None else "none up to 65,536"


def _header(m: ModelShapes) -> list[str]:
    c = m.config
    return [
        "# Four ways to distribute a model, priced for MiniGPT-grammar: the detail", "",
        f"The figures behind [{FILE}]({FILE}), worked out. The model is `{m.checkpoint}`: {c['n_layer']} blocks, d_model {c['d_model']}, "
        f"{c['n_head']} heads, d_ff {c['d_ff']}, vocabulary {c['vocab_size']}, block_size {c['block_size']}; "
        f"{m.n_params:,} parameters in {m.dtype} ({m.bytes_per_elem} bytes each), as run here. Byte figures "
        "are computed from the checkpoint's parameter shapes and tplab's TP layout; a *payload* is the "
        f"tensor a collective works on, of which each of p = {dc.WORLD_SIZE} ranks in a ring sends "
        "2(p-1)/p (all-reduce) or (p-1)/p (all-gather, reduce-scatter). Measured figures name their run; "
        f"the others say \"{NOT_MEASURED}\".", ""]


def _ddp(m: ModelShapes, run: DDPMeasured | None) -> list[str]:
    cost = dc.ddp_cost(m)
    lines = [SECTIONS[0], "",
             PROSE[0], "",
             "For MiniGPT-grammar:",
             f"- One gradient all-reduce per step, whatever the batch: {byte_figure(cost.grad_bytes)} of "
             f"payload ({cost.params:,} gradients × {m.bytes_per_elem} B); each rank sends "
             f"{byte_figure(cost.wire_bytes_per_rank)}."]
    if run is None:
        lines.append(f"- Its share of a step: {NOT_MEASURED} (pass `--ddp-run DIR` from `tplab ddp --out DIR`).")
    else:
        same = ("as computed" if run.bytes_per_step == cost.grad_bytes
                else f"NOT the computed {byte_figure(cost.grad_bytes)}")
        lines.append(f"- Measured (`tplab ddp`, {run.nproc} {run.backend} ranks on this machine's CPU, "
                     f"{run.steps} steps of {run.batch_size} sequences per rank; `{run.path}`, {run.date}): "
                     f"the all-reduce took {run.allreduce_ms_median:.2f} ms of a {run.step_ms_median:.1f} ms "
                     f"step (medians), **{run.allreduce_share:.1%} of the step time**, over "
                     f"{run.buckets_per_step:g} bucket(s) carrying {byte_figure(run.bytes_per_step)} per step, "
                     f"{same}.")
    return lines + [""]


def _fsdp(m: ModelShapes) -> list[str]:
    f, ddp = dc.fsdp_cost(m), dc.ddp_cost(m)
    blocks = f.blocks
    each = _span(u.bytes for u in blocks)
    per_layer = _span(u.bytes * (u.all_gathers + u.reduce_scatters) for u in blocks)
    return [SECTIONS[1], "",
            PROSE[1], "",
            "For MiniGPT-grammar (FULL_SHARD, a unit per block; embeddings, `ln_f`, `lm_head` in the root):",
            f"- Per layer per step: all-gather the block's {each} of weights before its forward and again "
            f"before its backward, reduce-scatter its {each} of gradients: {per_layer} of payload, "
            f"× {len(blocks)} blocks; the root's {byte_figure(f.root.bytes)} is gathered once (the root is not "
            "freed after the forward) and reduce-scattered once.",
            f"- Per step: {byte_figure(f.all_gather_bytes)} all-gathered, {byte_figure(f.reduce_scatter_bytes)} "
            f"reduce-scattered; each rank sends {byte_figure(f.wire_bytes_per_rank)}, "
            f"{f.wire_bytes_per_rank / ddp.wire_bytes_per_rank:.2f}× DDP's {byte_figure(ddp.wire_bytes_per_rank)}, in "
            f"{sum(u.all_gathers + u.reduce_scatters for u in f.units)} collectives. It buys: the training "
            f"state ({dc.TRAIN_STATE_COPIES} copies of each parameter: weights, gradients, two AdamW moments) "
            f"drops from {byte_figure(f.state_bytes)} to {byte_figure(f.state_bytes_per_rank)} per rank.",
            f"- Time: {NOT_MEASURED} (tplab has no FSDP run).", ""]


def _tp(m: ModelShapes, run: TPMeasured | None, th: dc.Thresholds) -> list[str]:
    t = dc.tp_cost(m)
    ar_each, ag_each = _span(t.all_reduce_bytes), _span(t.all_gather_bytes)
    outside = [c.module for c in m.tp_collectives if c.op == "all_reduce" and not c.module.startswith("blocks.")]
    in_block = [c.module.removeprefix("blocks.0.") for c in m.tp_collectives
                if c.op == "all_reduce" and c.module.startswith("blocks.0.")]
    gathers = [c.module for c in m.tp_collectives if c.op == "all_gather"]
    lines = [SECTIONS[2], "",
             PROSE[2], "",
             "For MiniGPT-grammar (the layout of `tplab/model/gpt.py`, one decoded token at batch 1):",
             f"- {t.all_reduces} all-reduces per token, {len(outside)} after the vocabulary-sharded embedding "
             f"({_names(outside)}) and {len(in_block)} per block ({_names(in_block)}) × {m.config['n_layer']}, "
             f"{ar_each} each: {byte_figure(sum(t.all_reduce_bytes))}; plus {t.all_gathers} all-gather of the "
             f"logits ({_names(gathers)}, `gather_output=True`), {ag_each} gathered. In all {t.collectives} "
             "collectives and "
             f"{byte_figure(t.bytes_per_token)} per token (a prefill of T tokens: × T each)."]
    if t.not_divisible:
        lines.append(f"- This checkpoint cannot be split over {dc.WORLD_SIZE} ranks as it is: "
                     + ", ".join(f"{k}={m.config[k]}" for k in t.not_divisible)
                     + f" is not divisible by {dc.WORLD_SIZE}.")
    if run is None:
        lines.append(f"- Their time per token: {NOT_MEASURED} (pass `--tp-run DIR` from `tplab local --out DIR`).")
    else:
        counted = ("as computed" if round(run.collectives_per_token) == t.collectives
                   and round(run.bytes_per_token) == t.bytes_per_token else
                   f"NOT the computed {t.collectives} and {byte_figure(t.bytes_per_token)}")
        ratio = run.single_per_token_ms / run.tp_per_token_ms
        lines.append(f"- Measured (`tplab local`, TP={run.world_size} over {run.backend} on {run.device}"
                     f"{', compiled' if run.compiled else ''}; `{run.path}`, {run.date}): the run counted "
                     f"{run.collectives_per_token:g} collectives and {byte_figure(run.bytes_per_token)} per token, "
                     f"{counted}; they took **{run.allreduce_ms_per_token:.3f} ms per token**, "
                     f"{run.allreduce_ms_per_token / run.instrumented_per_token_ms:.0%} of the "
                     f"{run.instrumented_per_token_ms:.3f} ms token of the timed pass (first "
                     f"{run.instrumented_prompts} prompt(s)). Untimed, a TP token took {run.tp_per_token_ms:.3f} ms "
                     f"and one device {run.single_per_token_ms:.3f} ms: TP ran at {ratio:.2f}× the single "
                     "device's speed.")
    if th.tp_crossover:
        lines.append("- When it pays (`tplab/scaling/crossover.py`, this pattern grown in d_model): "
                     + "; ".join(f"`{k}`: {b.text()}" for k, b in th.tp_crossover.items()) + ".")
    return lines + [""]


def _pp(m: ModelShapes) -> list[str]:
    p = dc.pp_cost(m)
    return [SECTIONS[3], "",
            PROSE[3], "",
            f"For MiniGPT-grammar ({p.stages} stages of {' and '.join(str(x) for x in p.layers_per_stage)} "
            f"blocks; `tplab ddp`'s {dc.TRAIN_SEQUENCES}-sequence step cut into {p.micro_batches} "
            f"micro-batches of {p.micro_batch} sequences × {p.tokens} tokens):",
            f"- Per micro-batch per stage: stage 0 sends {byte_figure(p.bytes_per_micro_batch)} of activations "
            f"forward ({p.micro_batch} × {p.tokens} × d_model {p.d_model} × {m.bytes_per_elem} B) and receives "
            f"{byte_figure(p.bytes_per_micro_batch)} of gradients back; {byte_figure(p.bytes_per_step)} per step, "
            f"with a bubble of (p-1)/(m+p-1) = {p.bubble:.0%} of the step. Decoding sends "
            f"{byte_figure(p.bytes_per_token)} per token, but the stages run one after the other, so it is "
            "never faster than one device.",
            f"- Time: {NOT_MEASURED} (tplab has no pipeline run).", ""]


def closing_sentences(m: ModelShapes, ddp_run: DDPMeasured | None, tp_run: TPMeasured | None,
                      th: dc.Thresholds) -> list[str]:
    """The closing paragraph, three sentences argued from the numbers above."""
    pick, ddp, f, t, p = dc.choose(m), dc.ddp_cost(m), dc.fsdp_cost(m), dc.tp_cost(m), dc.pp_cost(m)
    fits = dc.DEVICE_MEMORY_BYTES / f.state_bytes
    share = (f"which took {ddp_run.allreduce_share:.1%} of a training step when measured here"
             if ddp_run else f"whose share of a step is {NOT_MEASURED}")
    tp_time = (f" (measured here: {tp_run.allreduce_ms_per_token / tp_run.instrumented_per_token_ms:.0%} of "
               f"a TP token, which ran at {tp_run.single_per_token_ms / tp_run.tp_per_token_ms:.2f}× one "
               "device's speed)" if tp_run else "")
    if pick == "DDP":
        s1 = (f"I would pick DDP: the whole training state is {byte_figure(f.state_bytes)}, so it fits "
              f"{fits:,.0f} times on one {dc.DEVICE_MEMORY_BYTES // 10**9} GB device and the only price of "
              f"data parallelism is one {byte_figure(ddp.grad_bytes)} gradient all-reduce per step, {share}.")
    else:
        s1 = (f"I would pick {pick}: the training state is {byte_figure(f.state_bytes)}, more than one "
              f"{dc.DEVICE_MEMORY_BYTES // 10**9} GB device holds, so DDP's replicas cannot work.")
    s2 = (f"FSDP would send {f.wire_bytes_per_rank / ddp.wire_bytes_per_rank:.2f}× DDP's bytes per step to "
          f"save {byte_figure(f.state_bytes - f.state_bytes_per_rank)} per rank, TP would add {t.collectives} "
          f"latency-bound collectives ({byte_figure(t.bytes_per_token)}) to every token{tp_time}, and "
          f"PP would leave {p.bubble:.0%} of each step idle across only {m.config['n_layer']} blocks.")
    cross = {k: b.estimate for k, b in th.tp_crossover.items()
             if not k.startswith("cpu-") and b.estimate is not None}
    tp_when = (f"for serving, TP=2 starts to beat one device between d_model {_d(min(cross.values()))} "
               f"(`{min(cross, key=cross.__getitem__)}`) and {_d(max(cross.values()))} "
               f"(`{max(cross, key=cross.__getitem__)}`) "
               "in tplab's scaling model" if cross else "tplab's scaling model finds no width where TP=2 "
               "decodes faster than one device")
    s3 = (f"The answer changes only with a much larger model of the same pattern ({m.config['n_layer']} "
          f"blocks, d_ff = 4·d_model): {tp_when}, FSDP becomes necessary for training once the state "
          f"outgrows an {dc.DEVICE_MEMORY_BYTES // 10**9} GB device at d_model {_d(th.fsdp_d_model)} "
          f"(about {th.fsdp_params / 1e9:.1f} billion parameters), and TP becomes necessary when a single "
          f"block's state does not fit, at d_model {_d(th.tp_memory_d_model)}.")
    return [s1, s2, s3]


def _page_figures(m: ModelShapes, ddp_run: DDPMeasured | None, tp_run: TPMeasured | None,
                  th: dc.Thresholds) -> list[str]:
    """One line per pattern: this model's figure that section's detail works out."""
    ddp, f, t, p = dc.ddp_cost(m), dc.fsdp_cost(m), dc.tp_cost(m), dc.pp_cost(m)
    share = (f", {ddp_run.allreduce_share:.1%} of a step measured here" if ddp_run
             else f"; its share of a step {NOT_MEASURED}")
    tp_time = (f"; they took {tp_run.allreduce_ms_per_token:.3f} ms of a "
               f"{tp_run.instrumented_per_token_ms:.3f} ms token measured here" if tp_run
               else f"; their time {NOT_MEASURED}")
    gpu = {k: b for k, b in th.tp_crossover.items() if not k.startswith("cpu-")}
    cpu = {k: b for k, b in th.tp_crossover.items() if k.startswith("cpu-")}
    pays = ("; TP=2 would beat one device from d_model "
            + ", ".join(f"{b.short().lstrip('≈')} on `{k}`" for k, b in gpu.items())
            + "".join(f", and on this CPU ({k}) {b.text().split(' [')[0]}" for k, b in cpu.items())
            if th.tp_crossover else "")
    return [
        f"For MiniGPT-grammar: one all-reduce of {byte_figure(ddp.grad_bytes)} of gradients per step "
        f"(each rank sends {byte_figure(ddp.wire_bytes_per_rank)}){share}.",
        f"For MiniGPT-grammar: each rank sends {byte_figure(f.wire_bytes_per_rank)} per step, "
        f"{f.wire_bytes_per_rank / ddp.wire_bytes_per_rank:.2f}× DDP, to keep "
        f"{byte_figure(f.state_bytes_per_rank)} of the {byte_figure(f.state_bytes)} training state "
        "per rank.",
        f"For MiniGPT-grammar: {t.collectives} latency-bound collectives per decoded token, "
        f"{byte_figure(t.bytes_per_token)} in all{tp_time}{pays}.",
        f"For MiniGPT-grammar: {p.stages} stages, {byte_figure(p.bytes_per_micro_batch)} of activations "
        f"per micro-batch across the cut and a bubble of {p.bubble:.0%} of each step; in decoding the "
        "stages run one after the other, never faster than one device."]


def render(data: dict[str, Any]) -> str:
    """The page (about 500 words), from ``collect``'s data; its detail is ``render_detail``."""
    m = ModelShapes.from_json(data["model"])
    ddp_run = DDPMeasured.from_json(data["ddp_run"]) if data.get("ddp_run") else None
    tp_run = TPMeasured.from_json(data["tp_run"]) if data.get("tp_run") else None
    th = dc.thresholds(m, tp_run.crossover if tp_run else None)
    c = m.config
    lines = ["# Four ways to distribute a model, priced for MiniGPT-grammar", "",
             f"Lab 03, Part F, for `{m.checkpoint}` ({m.n_params:,} parameters, {c['n_layer']} blocks, "
             f"d_model {c['d_model']}) on {dc.WORLD_SIZE} ranks. Each figure is worked out in "
             f"[{DETAIL_FILE}]({DETAIL_FILE}), with the measured runs and the strategy chooser.", ""]
    for title, prose, figure in zip(SECTIONS, PROSE, _page_figures(m, ddp_run, tp_run, th)):
        lines += [title, "", prose, "", figure, ""]
    lines += [CLOSING, "", " ".join(closing_sentences(m, ddp_run, tp_run, th)), ""]
    return "\n".join(lines)


def render_detail(data: dict[str, Any]) -> str:
    """The detail beside the page, from ``collect``'s data."""
    m = ModelShapes.from_json(data["model"])
    ddp_run = DDPMeasured.from_json(data["ddp_run"]) if data.get("ddp_run") else None
    tp_run = TPMeasured.from_json(data["tp_run"]) if data.get("tp_run") else None
    th = dc.thresholds(m, tp_run.crossover if tp_run else None)
    lines = _header(m) + _ddp(m, ddp_run) + _fsdp(m) + _tp(m, tp_run, th) + _pp(m)
    lines += [CLOSING, "", " ".join(closing_sentences(m, ddp_run, tp_run, th)), ""]
    if not th.pattern_matches:
        lines += [f"(The scaling pattern assumes d_ff = 4·d_model; this checkpoint has d_ff "
                  f"{m.config['d_ff']} and d_model {m.config['d_model']}, so the thresholds above are for "
                  "that pattern, not an exact continuation of this model.)", ""]
    return "\n".join(lines + chooser_section(m))


def chooser_section(m: ModelShapes) -> list[str]:
    """The chooser (``tplab.sidelabs.strategy``) on this model and the sizes the phase names: what
    each strategy would move per step on the lab's pair, then the pick on four clusters."""
    models = strategy.survey_models(dc.model_spec(m))
    lab = dc.LAB_CLUSTER
    names = ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3", "FSDP", "TP", "PP"]
    hb = strategy.human_bytes
    out = [CHOOSER, "",
           "`tplab/sidelabs/strategy.py` picks the cheapest strategy whose training state (weights, "
           "gradients, optimizer state; activations not counted) fits, then lets the links decide: "
           "TP stays inside an NVLink node, and across a network pipeline stages send only "
           "activations. MiniGPT-grammar is this checkpoint in its dtype; the others train in mixed "
           "precision (16 bytes per parameter), 8 × 2,048 tokens per GPU.", "",
           f"Bytes each GPU sends per training step on the lab's pair ({lab.describe()}); "
           "*too big* where the state does not fit:", "",
           "| model | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for spec in models:
        opts = strategy.options(spec, lab)
        row = [next((o for k, o in opts.items()
                     if k == n or k.startswith(f"{n}=") and " x " not in k), None) for n in names]
        out.append(f"| {spec.name} | " + " | ".join(
            "-" if o is None else (hb(o.wire_bytes_per_step) if o.fits else "too big")
            + ("" if o.name in names else f" ({o.name})") for o in row) + " |")
    out += ["", "The pick, and why:", "", "| model | cluster | choice | bytes/GPU/step | why |",
            "|---|---|---|---:|---|"]
    for spec in models:
        for cluster in strategy.SURVEY_CLUSTERS:
            ch = strategy.choose(spec, cluster)
            moved = hb(ch.chosen.wire_bytes_per_step) if ch.chosen else "-"
            out.append(f"| {spec.name} | {cluster.describe()} | **{ch.strategy}** | {moved} | "
                       f"{ch.reason[0].upper() + ch.reason[1:]}. |")
    return out + [""]
