"""The environment a compile lab child process needs, set *before* torch is imported.

Inductor reads ``TORCH_LOGS``, ``TORCH_COMPILE_DEBUG`` and its cache/debug directories when torch is
imported; set afterwards they are silently ignored (lab 03's first pitfall). So the command builds
this environment and starts the lab in a fresh interpreter. Each run gets its own cache and debug
directory inside its output directory, so runs never share ``/tmp/torchinductor_<user>`` state and a
run always compiles (and therefore dumps) from scratch. Only Inductor's CPU feature probes, which are
no kernel of the lab, stay in the shared cache (``inductor_probes``): the folder the user had named
in ``TORCHINDUCTOR_CACHE_DIR`` is passed on for them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: where the cache folder the user had named goes (``inductor_probes`` reads it; torch-free here)
SHARED_CACHE_VAR = "TPLAB_SHARED_INDUCTOR_CACHE_DIR"
#: subdirectories of the lab's output directory
CACHE_SUBDIR = "inductor-cache"
DEBUG_SUBDIR = "inductor-debug"


def inductor_env(out_dir: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) with Inductor's dump and cache pointed into ``out_dir``."""
    env = dict(os.environ if base is None else base)
    out_dir = Path(out_dir).resolve()
    env.pop(SHARED_CACHE_VAR, None)
    if env.get("TORCHINDUCTOR_CACHE_DIR"):
        env[SHARED_CACHE_VAR] = env["TORCHINDUCTOR_CACHE_DIR"]
    env["TORCH_LOGS"] = "output_code"
    env["TORCH_COMPILE_DEBUG"] = "1"
    env["TORCH_COMPILE_DEBUG_DIR"] = str(out_dir / DEBUG_SUBDIR)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(out_dir / CACHE_SUBDIR)
    # a stale FX-graph cache hit would skip code generation and leave nothing to dump
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    return env


def missing_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """Names of the variables above that are not set in ``environ`` (default ``os.environ``)."""
    env = os.environ if environ is None else environ
    return [k for k in ("TORCH_LOGS", "TORCH_COMPILE_DEBUG", "TORCH_COMPILE_DEBUG_DIR",
                        "TORCHINDUCTOR_CACHE_DIR") if not env.get(k)]
