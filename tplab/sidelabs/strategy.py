"""Choosing a parallel strategy from a model's size and the cluster's topology (phase 35, objective 3).

Why a module of its own: the phase asks the student to pick among DDP, ZeRO-1/2/3, FSDP, TP and PP
"given a model size and a cluster topology constraint". Memory alone cannot decide it: TP's
per-layer all-reduces sit on the critical path and want NVLink; ZeRO-3/FSDP moves 1.5x DDP's bytes
but overlaps them with compute; PP sends only activations at its cuts, which is what survives a
slow network between nodes. So ``choose`` takes the model (parameters, layers, width, tokens per
step) and the cluster (GPU memory, GPUs per node, nodes, intra-node link) and returns the cheapest
strategy whose training state fits, with the reason in one sentence and, for every strategy, the
bytes per GPU per step it would hold and send.

Memory is the training state only (weights, gradients, optimizer state; activations are not
counted), per ZeRO's accounting: with mixed precision 2 + 2 + 12 bytes per parameter (fp16/bf16
weights and gradients, fp32 master weights and two Adam moments), in fp32 4 + 4 + 8. ZeRO-1
shards the optimizer state over the data-parallel GPUs, ZeRO-2 also the gradients, ZeRO-3 (FSDP in
PyTorch) also the weights, gathering one layer at a time (it needs that layer, and the next one
prefetched, whole). Wire bytes are what one GPU sends in a ring: 2(p-1)/p of an all-reduce's
payload, (p-1)/p of an all-gather's or a reduce-scatter's.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: intra-node links and what one GPU can push over them, GB/s (the lab sheet's NVLink figure; PCIe 4.0
#: x16; a 100 Gb/s network, which is also what connects nodes)
LINKS: dict[str, float] = {"nvlink": 600.0, "pcie": 25.0, "network": 12.5}
GB = 10**9


@dataclass(frozen=True)
class ModelSpec:
    """A transformer to train: its size and what one GPU processes per step."""

    name: str
    params: float
    n_layer: int
    d_model: int
    tokens_per_gpu: int               # sequences x tokens per GPU per step
    weight_bytes: int = 2             # per parameter: 2 with mixed precision, 4 in fp32
    grad_bytes: int = 2
    optim_bytes: int = 12             # fp32 master + two Adam moments (8 in plain fp32 AdamW)
    block_params: float | None = None  # one block's parameters when known (else 12 d^2)
    root_params: float = 0.0          # FSDP's root unit (embeddings, head): gathered once, not twice

    @property
    def state_bytes(self) -> float:
        return self.params * (self.weight_bytes + self.grad_bytes + self.optim_bytes)

    @property
    def layer_params(self) -> float:
        """One transformer block's parameters: as given, else 12 d^2 (QKV, out, MLP up and down
        with d_ff = 4d)."""
        return self.block_params if self.block_params is not None else 12.0 * self.d_model ** 2

    @property
    def activation_bytes(self) -> float:
        """The residual stream of one step's tokens, [tokens, d_model] in the weights' dtype."""
        return float(self.tokens_per_gpu * self.d_model * self.weight_bytes)


@dataclass(frozen=True)
class Cluster:
    gpu_memory_gb: float
    gpus_per_node: int
    nodes: int = 1
    link: str = "nvlink"              # inside a node: nvlink | pcie | network

    def __post_init__(self) -> None:
        if self.link not in LINKS:
            raise ValueError(f"link must be one of {', '.join(LINKS)}, not {self.link!r}")
        if self.gpus_per_node < 1 or self.nodes < 1 or self.gpu_memory_gb <= 0:
            raise ValueError("a cluster needs at least one GPU with some memory")

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def memory(self) -> float:
        return self.gpu_memory_gb * GB

    def describe(self) -> str:
        where = f"{self.nodes} nodes x " if self.nodes > 1 else ""
        link = {"nvlink": "NVLink", "pcie": "PCIe", "network": "network"}[self.link]
        return (f"{where}{self.gpus_per_node} x {self.gpu_memory_gb:g} GB, {link}"
                + (", network between nodes" if self.nodes > 1 else ""))


@dataclass(frozen=True)
class Option:
    """One strategy on one cluster: memory per GPU, bytes each GPU sends per step, the time
    those take at the links they cross (no overlap counted), and whether it fits."""

    name: str
    memory_per_gpu: float
    wire_bytes_per_step: float
    comm_s: float
    fits: bool


@dataclass(frozen=True)
class Choice:
    strategy: str
    reason: str
    options: dict[str, Option] = field(default_factory=dict)

    @property
    def chosen(self) -> Option | None:
        return self.options.get(self.strategy)


def _ring(p: int, all_reduce: bool = True) -> float:
    return (2.0 if all_reduce else 1.0) * (p - 1) / p if p > 1 else 0.0


def options(m: ModelSpec, c: Cluster) -> dict[str, Option]:
    """Every strategy's memory per GPU and wire bytes per GPU per step on this cluster."""
    n, mem = c.gpus, c.memory
    inner = LINKS[c.link] * GB                              # bytes/s inside a node
    across = LINKS["network"] * GB if c.nodes > 1 else inner  # what a group over all GPUs crosses
    w, g, o = (m.params * b for b in (m.weight_bytes, m.grad_bytes, m.optim_bytes))
    state = w + g + o
    layer = m.layer_params * m.weight_bytes
    act = m.activation_bytes
    out: dict[str, Option] = {}

    def add(name: str, memory: float, parts: list[tuple[float, float]], ok: bool = True) -> None:
        wire = sum(b for b, _ in parts)
        out[name] = Option(name, memory, wire, sum(b / bw for b, bw in parts if b), memory <= mem and ok)

    grads = [(_ring(n) * g, across)]                        # all-reduce (or RS + AG) of gradients
    add("DDP", state, grads)
    add("ZeRO-1", w + g + o / n, grads)
    add("ZeRO-2", w + (g + o) / n, grads)
    sharded = state / n + 2 * layer                         # + the gathered layer and the next one
    # gather before the forward and again before the backward (the root unit stays gathered),
    # reduce-scatter the gradients
    gathers = [(_ring(n, all_reduce=False) * (3 * w - m.root_params * m.weight_bytes), across)]
    add("ZeRO-3", sharded, gathers)
    add("FSDP", sharded, gathers)
    t = c.gpus_per_node                                     # TP never leaves a node
    tp_wire = 4 * m.n_layer * _ring(t) * act                # 2 all-reduces fwd + 2 bwd per layer
    add(f"TP={t}", state / t, [(tp_wire, inner)], t > 1)
    s = min(c.nodes if c.nodes > 1 else n, m.n_layer)       # stages: across nodes, else GPUs
    if s > 1:
        add(f"PP={s}", state / s, [(2 * act, across)])
    if c.nodes > 1:
        k = c.gpus_per_node                                 # PP across nodes, FSDP inside each
        add(f"PP={c.nodes} x FSDP={k}", state / c.nodes / k + 2 * layer,
            [(2 * act, across), (3 * _ring(k, False) * w / c.nodes, inner)])
        if k > 1:                                           # TP inside nodes, FSDP across them
            add(f"TP={k} x FSDP={c.nodes}", state / n + 2 * layer / k,
                [(tp_wire, inner), (3 * _ring(c.nodes, False) * w / k, across)])
    return out


def human_bytes(x: float) -> str:
    """Bytes in a unit a person reads (kB, MB, GB, TB: powers of 1000)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= size:
            return f"{x / size:.3g} {unit}"
    return f"{x:.0f} bytes"


_gb = human_bytes


def choose(m: ModelSpec, c: Cluster) -> Choice:
    """The cheapest strategy that fits, topology considered; the reason in one sentence."""
    opts = options(m, c)
    n, gb = c.gpus, c.gpu_memory_gb
    state = _gb(m.state_bytes)
    if n == 1:
        fits = opts["DDP"].fits
        return Choice("one GPU" if fits else "does not fit",
                      f"with one GPU there is nothing to distribute; its {state} of training state "
                      + ("fits" if fits else f"does not fit {gb:g} GB: add GPUs"), opts)
    replicated = {
        "DDP": f"the whole {state} training state fits one {gb:g} GB GPU, so each replica pays only "
               f"a {_gb(opts['DDP'].wire_bytes_per_step)} gradient all-reduce per step, overlapped "
               "with the backward",
        "ZeRO-1": f"{state} of state does not fit one {gb:g} GB GPU, but sharding the optimizer "
                  f"state over {n} GPUs brings it to {_gb(opts['ZeRO-1'].memory_per_gpu)} per GPU "
                  "at DDP's traffic",
        "ZeRO-2": f"sharding the optimizer state alone leaves {_gb(opts['ZeRO-1'].memory_per_gpu)} "
                  f"per GPU; sharding the gradients too brings it to "
                  f"{_gb(opts['ZeRO-2'].memory_per_gpu)} at DDP's traffic"}
    for name, why in replicated.items():
        if opts[name].fits:
            return Choice(name, why, opts)
    fsdp = opts["FSDP"]
    tp = opts[f"TP={c.gpus_per_node}"]
    layer = _gb(m.layer_params * m.weight_bytes)
    # multi-node: the network between nodes decides what may cross it
    cands = [o for o in (fsdp, opts.get(f"PP={c.nodes} x FSDP={c.gpus_per_node}"),
                         opts.get(f"TP={c.gpus_per_node} x FSDP={c.nodes}"))
             if o is not None and o.fits and (c.nodes > 1 or o is fsdp)]
    if c.nodes > 1 and c.link != "nvlink":
        cands = [o for o in cands if not o.name.startswith("TP")]
    if cands:
        best = min(cands, key=lambda o: o.comm_s)
        if best is fsdp:
            return Choice("FSDP", f"only sharding the weights too (ZeRO-3) fits: "
                                  f"{_gb(fsdp.memory_per_gpu)} per GPU with one {layer} layer "
                                  f"gathered at a time, its {_gb(fsdp.wire_bytes_per_step)} per step "
                                  "overlapped with compute", opts)
        if best.name.startswith("PP"):
            return Choice(best.name, f"sharding over all {n} GPUs would push "
                                     f"{_gb(fsdp.wire_bytes_per_step)} per GPU per step over the "
                                     "network, while pipeline stages across nodes send only "
                                     f"{_gb(2 * m.activation_bytes)} of activations and FSDP shards "
                                     "each stage inside its node", opts)
        return Choice(best.name, f"a {layer} layer gathered whole does not fit one GPU beside its "
                                 "shard, so TP splits the layers inside each node over NVLink and "
                                 "FSDP shards across nodes", opts)
    pp = opts.get(f"PP={min(n, m.n_layer)}") if c.nodes == 1 else None
    if tp.fits and c.link == "nvlink":
        return Choice(tp.name, f"even a fully sharded state does not fit "
                               f"({_gb(fsdp.memory_per_gpu)} per GPU with a {layer} layer gathered "
                               f"whole), so the layers are split over the node's {c.gpus_per_node} "
                               "GPUs, whose NVLink carries TP's per-layer all-reduces", opts)
    if pp is not None and pp.fits:
        return Choice(pp.name, f"the state needs splitting ({_gb(fsdp.memory_per_gpu)} per GPU "
                               f"even fully sharded), and over {c.link} a pipeline sends only "
                               f"{_gb(pp.wire_bytes_per_step)} of activations per step where TP "
                               f"would all-reduce {_gb(tp.wire_bytes_per_step)}", opts)
    if tp.fits:
        return Choice(tp.name, f"only splitting the layers fits ({_gb(tp.memory_per_gpu)} per GPU), "
                               f"though over {c.link} its per-layer all-reduces will dominate", opts)
    return Choice("does not fit", f"{state} of training state does not fit {n} x {gb:g} GB in any "
                                  "of these layouts: add GPUs or memory", opts)


# ------------------------------------------------------------------ the survey's sizes
def survey_models(minigpt: ModelSpec) -> list[ModelSpec]:
    """MiniGPT-grammar and the sizes the phase names: ~1B (where the reading lab on Megatron-LM and FSDP puts FSDP's turn), 7B,
    and the 70B+ models lab 03 names for TP (Llama-2-like shapes, 8 x 2048 tokens per GPU)."""
    return [minigpt,
            ModelSpec("1B", 1.2e9, 24, 2048, 8 * 2048),
            ModelSpec("7B", 6.7e9, 32, 4096, 8 * 2048),
            ModelSpec("70B", 70e9, 80, 8192, 8 * 2048)]


#: the clusters the survey's table shows: the lab's pair of GPUs, a PCIe consumer pair, an
#: 8-GPU NVLink node, and four such nodes on a network
SURVEY_CLUSTERS = (Cluster(80, 2, 1, "nvlink"), Cluster(24, 2, 1, "pcie"),
                   Cluster(80, 8, 1, "nvlink"), Cluster(80, 8, 4, "nvlink"))
