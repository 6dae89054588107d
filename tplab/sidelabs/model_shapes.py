"""The shapes the distributed survey computes its byte figures from, read from a real checkpoint.

``DISTRIBUTED.md`` puts a byte count on every pattern for *this* model, so nothing here is a
constant: the parameter shapes and their dtype come from the checkpoint's state dict, and the list
of tensor-parallel collectives comes from walking the TP build of the model (``MiniGPTTP``, built on
the meta device, so no memory and no process group are needed). Each ``ShardedEmbedding`` and
``RowParallelLinear`` in it all-reduces its output once per forward, each ``ColumnParallelLinear``
with ``gather_output=True`` all-gathers it; that is what ``tplab.tp.layers`` does in its forward.

Importing this module needs no torch; ``read_model_shapes`` imports it (the compile lab's child and
``tplab compile``'s ``main`` call it). The result is plain data, stored in compile-results.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TPCollective:
    """One collective in a tensor-parallel forward: which module issues it and on how wide a tensor.

    ``elems_per_token`` is the width of the full tensor that crosses ranks for each token: the
    all-reduced output for an all-reduce, the gathered (whole) output for an all-gather.
    """

    module: str
    op: str  # "all_reduce" or "all_gather"
    elems_per_token: int


@dataclass(frozen=True)
class ModelShapes:
    """Everything the cost model needs: config, parameter shapes, dtype, TP collectives."""

    checkpoint: str
    config: dict[str, int]
    dtype: str
    bytes_per_elem: int
    params: dict[str, tuple[int, ...]]
    tp_collectives: tuple[TPCollective, ...]

    @property
    def n_params(self) -> int:
        return sum(numel(s) for s in self.params.values())

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "config": dict(self.config), "dtype": self.dtype,
                "bytes_per_elem": self.bytes_per_elem,
                "params": {k: list(v) for k, v in self.params.items()},
                "tp_collectives": [{"module": c.module, "op": c.op, "elems_per_token": c.elems_per_token}
                                   for c in self.tp_collectives]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelShapes:
        return cls(checkpoint=str(data["checkpoint"]), config={k: int(v) for k, v in data["config"].items()},
                   dtype=str(data["dtype"]), bytes_per_elem=int(data["bytes_per_elem"]),
                   params={k: tuple(int(x) for x in v) for k, v in data["params"].items()},
                   tp_collectives=tuple(TPCollective(str(c["module"]), str(c["op"]), int(c["elems_per_token"]))
                                        for c in data["tp_collectives"]))


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def read_config(checkpoint: Path) -> dict[str, int]:
    """The checkpoint's model config (validated by ``load_checkpoint``). Raises CheckpointError."""
    from tplab.model.checkpoint import load_checkpoint

    return load_checkpoint(checkpoint).config.to_dict()


def read_model_shapes(checkpoint: Path) -> ModelShapes:
    """Parameter shapes, dtype and TP collectives of the model in ``checkpoint``. Raises CheckpointError."""

    from tplab.model.checkpoint import CheckpointError, load_checkpoint
    from tplab.model.gpt import MiniGPT, MiniGPTTP
    from tplab.model.meta_build import on_meta
    from tplab.tp import ColumnParallelLinear, RowParallelLinear, ShardedEmbedding

    ckpt = load_checkpoint(checkpoint)
    with on_meta():
        names = [n for n, _ in MiniGPT(ckpt.config).named_parameters()]
        tp_model = MiniGPTTP(ckpt.config)
    tensors = {n: ckpt.state_dict[n] for n in names}
    sizes = {t.element_size() for t in tensors.values()}
    dtypes = {str(t.dtype).removeprefix("torch.") for t in tensors.values()}
    if len(sizes) != 1 or len(dtypes) != 1:
        raise CheckpointError(f"{checkpoint} mixes parameter dtypes ({', '.join(sorted(dtypes))}); "
                              "the survey needs one dtype, re-create it with `tplab train`.")
    collectives: list[TPCollective] = []
    for name, module in tp_model.named_modules():
        if isinstance(module, ShardedEmbedding):
            collectives.append(TPCollective(name, "all_reduce", module.embedding_dim))
        elif isinstance(module, RowParallelLinear):
            collectives.append(TPCollective(name, "all_reduce", module.out_features))
        elif isinstance(module, ColumnParallelLinear) and module.gather_output:
            collectives.append(TPCollective(name, "all_gather", module.out_features))
    return ModelShapes(checkpoint=str(checkpoint), config=ckpt.config.to_dict(), dtype=dtypes.pop(),
                       bytes_per_elem=sizes.pop(), params={n: tuple(t.shape) for n, t in tensors.items()},
                       tp_collectives=tuple(collectives))
