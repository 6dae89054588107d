"""A checkpoint's header and every weight's dtype and shape, read from the file without torch.

Why: before a lab spends a cent it checks the job's inputs with the job's own checks
(``tplab.job.input_check``, run by the client in a subprocess). Reading the checkpoint with
``torch.load`` made that subprocess import torch: about 2.5 s of CPU, and 3 s added to every
lab's preflight. A tplab checkpoint is what ``torch.save`` writes: a zip holding a pickle
(``data.pkl``) that names a few globals (the tensor rebuild function, the storage types,
``OrderedDict``) and one record per storage. ``read_header`` unpickles ``data.pkl`` with those
globals replaced by records (``TensorMeta``), checks that each tensor's bytes are in the zip, and
so knows the file's format, version, config, tokenizer and every weight's shape without loading
a weight. What it does not recognise (not a zip, a global outside that list, a damaged pickle) it
does not judge: it raises ``Unrecognised`` and the caller asks ``torch.load``, whose verdict
(``tplab.model.checkpoint.load_checkpoint``) stays the rule.

The checks on what was read (``check_payload``, ``check_weights``, ``check_divisible``) and their
sentences live here once; ``load_checkpoint`` applies the same ones to real tensors. Standard
library only, and this package's torch-free ``config`` and ``tokenizer``.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tplab.model.config import GPTConfig
from tplab.model.tokenizer import Tokenizer

FORMAT = "tplab-minigpt-grammar"
VERSION = 1


class CheckpointError(Exception):
    """A checkpoint cannot be used; the message says why and what to do."""


class Unrecognised(Exception):
    """The file is not laid out as this reader knows ``torch.save``'s zip; ask ``torch.load``."""


@dataclass(frozen=True)
class TensorMeta:
    """What the lab's checks need of one stored tensor: its dtype and shape (no data)."""

    dtype: str
    shape: tuple[int, ...]
    is_floating_point: bool


@dataclass
class CheckpointHeader:
    """A checkpoint as ``read_header`` found it: everything but the weights' values."""

    config: GPTConfig
    tokenizer: Tokenizer
    shapes: dict[str, TensorMeta]
    meta: dict[str, Any] = field(default_factory=dict)
    path: str = ""


#: torch's storage classes as ``torch.save`` names them in ``data.pkl``: (dtype, bytes per
#: element, floating point)
_STORAGES = {
    "FloatStorage": ("float32", 4, True), "DoubleStorage": ("float64", 8, True),
    "HalfStorage": ("float16", 2, True), "BFloat16Storage": ("bfloat16", 2, True),
    "LongStorage": ("int64", 8, False), "IntStorage": ("int32", 4, False),
    "ShortStorage": ("int16", 2, False), "CharStorage": ("int8", 1, False),
    "ByteStorage": ("uint8", 1, False), "BoolStorage": ("bool", 1, False),
}


@dataclass(frozen=True)
class _StorageType:
    name: str


@dataclass(frozen=True)
class _Storage:
    dtype: str
    floating: bool
    numel: int


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_rest: Any) -> TensorMeta:
    """Stands in for ``torch._utils._rebuild_tensor_v2``: the tensor's record, once its view is
    known to lie inside its storage."""
    if not (isinstance(storage, _Storage) and isinstance(offset, int)
            and isinstance(size, tuple) and isinstance(stride, tuple)
            and len(size) == len(stride) and all(isinstance(n, int) for n in size + stride)):
        raise Unrecognised("a tensor whose storage, size or stride is not laid out as expected")
    if all(n > 0 for n in size):
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if offset < 0 or last >= storage.numel:
            raise Unrecognised("a tensor that reaches past its storage")
    return TensorMeta(storage.dtype, tuple(size), storage.floating)


class _HeaderUnpickler(pickle.Unpickler):
    """``data.pkl`` with torch's globals replaced by records; any other global is Unrecognised."""

    def __init__(self, file: Any, archive: zipfile.ZipFile, prefix: str) -> None:
        super().__init__(file)
        self._archive, self._prefix = archive, prefix

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        raise Unrecognised(f"data.pkl names {module}.{name}")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)
                and isinstance(pid[4], int)):
            raise Unrecognised(f"a storage reference laid out as {type(pid).__name__}")
        dtype, itemsize, floating = _STORAGES[pid[1].name]
        try:
            stored = self._archive.getinfo(f"{self._prefix}/data/{pid[2]}").file_size
        except KeyError:
            raise Unrecognised(f"storage {pid[2]} is not in the archive") from None
        if stored < pid[4] * itemsize:
            raise Unrecognised(f"storage {pid[2]} holds fewer bytes than its tensor")
        return _Storage(dtype, floating, pid[4])


def read_payload(path: str | os.PathLike) -> Any:
    """The object ``torch.save`` wrote to ``path``, each tensor a ``TensorMeta``. Raises
    Unrecognised for anything but the zip layout of ``torch.save`` with the globals above."""
    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
            if len(pickles) != 1 or pickles[0].count("/") != 1:
                raise Unrecognised("not one data.pkl at the archive's top level")
            prefix = pickles[0].split("/", 1)[0]
            with archive.open(pickles[0]) as fh:
                return _HeaderUnpickler(fh, archive, prefix).load()
    except Unrecognised:
        raise
    except (OSError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError,
            TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
        raise Unrecognised(f"{type(exc).__name__}: {exc}") from exc


def check_payload(data: Any, path: str) -> tuple[GPTConfig, Tokenizer, dict[str, Any],
                                                    dict[str, Any]]:
    """(config, tokenizer, state_dict, meta) of a loaded checkpoint object, or CheckpointError
    with the sentence for the first thing wrong with it: the format, the version, the config,
    the tokenizer against the vocabulary, the state dict's presence."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path} is a torch file but not a tplab MiniGPT-grammar checkpoint; "
                              "pass a file written by `tplab train`.")
    if data.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {data.get('version')!r}, this tplab reads "
                              f"version {VERSION}; re-create it with `tplab train`.")
    try:
        config = GPTConfig.from_dict(data["config"])
        tokenizer = Tokenizer.from_dict(data["tokenizer"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path} has a damaged config or tokenizer ({exc}); re-create it with `tplab train`.") from exc
    if len(tokenizer) > config.vocab_size:
        raise CheckpointError(f"{path}: the tokenizer has {len(tokenizer)} words but the model only "
                              f"{config.vocab_size}; re-create it with `tplab train`.")
    state_dict = data.get("state_dict")
    if not isinstance(state_dict, dict):
        raise CheckpointError(f"{path} has no state_dict; re-create it with `tplab train`.")
    meta = data["meta"] if isinstance(data.get("meta"), dict) else {}
    return config, tokenizer, state_dict, meta


def check_weights(found: Mapping[str, tuple[tuple[int, ...], bool] | None],
                  expected: Mapping[str, tuple[int, ...]], where: str) -> None:
    """CheckpointError unless ``found`` (weight name -> (shape, floating point), or None for
    what is not a tensor) has exactly the names and shapes of ``expected``."""
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing:
        raise CheckpointError(f"{where} is missing {len(missing)} weight(s) ({', '.join(missing[:3])}"
                              f"{', ...' if len(missing) > 3 else ''}); re-create it with `tplab train`.")
    if extra:
        raise CheckpointError(f"{where} has {len(extra)} unexpected weight(s) ({', '.join(extra[:3])}"
                              f"{', ...' if len(extra) > 3 else ''}); it was not written for this model, "
                              "re-create it with `tplab train`.")
    for key, shape in expected.items():
        value = found[key]
        if value is None or not value[1]:
            raise CheckpointError(f"{where}: weight {key} is not a floating-point tensor; re-create it with `tplab train`.")
        if value[0] != shape:
            raise CheckpointError(f"{where}: weight {key} has shape {value[0]} but the config needs "
                                  f"{shape}; re-create it with `tplab train`.")


def check_divisible(config: GPTConfig, world_size: int) -> None:
    """Raise CheckpointError naming the first dimension that ``world_size`` does not divide."""
    for dim in ("n_head", "d_ff", "vocab_size"):
        size = getattr(config, dim)
        if size % world_size:
            raise CheckpointError(f"the model cannot be split over {world_size} ranks: {dim}={size} is not "
                                  f"divisible by {world_size}; use a world size that divides {dim}.")


def param_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Weight name -> shape of the single-device MiniGPT for ``config``, written out without
    torch (``tplab.model.gpt``'s layout; a test holds it equal to the model's own state dict)."""
    d = config.d_model
    out: dict[str, tuple[int, ...]] = {}
    out["tok_emb.weight"] = (config.vocab_size, d)
    out["pos_emb.weight"] = (config.block_size, d)
    for i in range(config.n_layer):
        b = f"blocks.{i}."
        out.update({b + "ln_1.weight": (d,), b + "ln_1.bias": (d,),
                    b + "attn.qkv.weight": (3 * d, d), b + "attn.qkv.bias": (3 * d,),
                    b + "attn.proj.weight": (d, d), b + "attn.proj.bias": (d,),
                    b + "ln_2.weight": (d,), b + "ln_2.bias": (d,),
                    b + "mlp.up.weight": (config.d_ff, d), b + "mlp.up.bias": (config.d_ff,),
                    b + "mlp.down.weight": (d, config.d_ff), b + "mlp.down.bias": (d,)})
    out["ln_f.weight"] = (d,)
    out["ln_f.bias"] = (d,)
    out["lm_head.weight"] = (config.vocab_size, d)
    return out


def missing_file_error(path: Path) -> CheckpointError:
    """The sentence for a checkpoint path with no file behind it."""
    return CheckpointError(f"checkpoint {path} does not exist; pass --checkpoint PATH or run `tplab train`.")


def read_header(path: str | os.PathLike) -> CheckpointHeader:
    """The checkpoint at ``path`` checked as ``load_checkpoint`` checks it (format, version,
    config, tokenizer, every weight's name, dtype and shape), without torch. Raises
    CheckpointError with the same sentences, or Unrecognised (ask ``torch.load``)."""
    path = Path(path)
    if not path.is_file():
        raise missing_file_error(path)
    config, tokenizer, state_dict, meta = check_payload(read_payload(path), str(path))
    found = {k: (v.shape, v.is_floating_point) if isinstance(v, TensorMeta) else None
             for k, v in state_dict.items()}
    check_weights(found, param_shapes(config), str(path))
    return CheckpointHeader(config=config, tokenizer=tokenizer,
                            shapes={k: v for k, v in state_dict.items()
                                    if isinstance(v, TensorMeta)},
                            meta=meta, path=str(path))
