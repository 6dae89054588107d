"""Build a model on the meta device without running its random init: shapes only, at no cost.

Why: a module's constructor draws its weights (``normal_``, ``uniform_``, ``nn.init.*``). On meta
tensors ``normal_`` has no kernel of its own and runs through torch's Python references, whose
first call imports ``torch._dynamo``: ~1.6 s of CPU in every process that builds a model on meta
(every rank at the d_model sweep's first size, the compile command's survey of a checkpoint). A
meta tensor holds no values, so skipping its init changes nothing but that second and a half.
Torch and the standard library only (pod side).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

#: the in-place random draws a constructor makes (``nn.init``'s call ``Tensor`` methods below them)
_INIT_DRAWS = {torch.Tensor.normal_, torch.Tensor.uniform_, torch.nn.init.normal_,
               torch.nn.init.uniform_, torch.nn.init.kaiming_uniform_, torch.nn.init.trunc_normal_}


class _SkipMetaDraws(TorchFunctionMode):
    """Returns a meta tensor as it is instead of drawing random values into it."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")  # nn.init passes it by keyword
        if func in _INIT_DRAWS and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **kwargs)


@contextmanager
def on_meta() -> Iterator[None]:
    """``with on_meta(): model = MiniGPT(config)``: parameters on the meta device, no init run."""
    with torch.device("meta"), _SkipMetaDraws():
        yield
