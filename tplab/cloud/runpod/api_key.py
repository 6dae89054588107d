"""Where the RunPod API key comes from, and which source it was (``tplab check`` says).

In order: ``RUNPOD_API_KEY``; else ``~/.runpod/config.toml``, which two RunPod tools write
differently: the runpod SDK's ``runpod config`` writes a ``[default]`` table with ``api_key``,
runpodctl writes a top-level ``apiKey``. Both are read (the SDK's first), with tomllib, so that
finding the key does not import the runpod SDK (1.5 s). A key found is registered with
tplab.keys.redact so it can never be printed.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from tplab.keys.redact import register_secret

CONFIG_PATH = Path("~/.runpod/config.toml")
NO_KEY = ("No RunPod API key found: set RUNPOD_API_KEY, or store one in ~/.runpod/config.toml "
          "(`runpod config`, or runpodctl's `apiKey`).")
ENV_SOURCE = "RUNPOD_API_KEY"
#: this key beside the other clouds', for a user who has none (``registry.no_key_at_all``)
KEY_HINT = ("for RunPod (on-demand pods; its spot is being retired), set RUNPOD_API_KEY or "
            "store one in ~/.runpod/config.toml")


@dataclass(frozen=True)
class FoundKey:
    key: str = field(repr=False)
    source: str                 # e.g. "RUNPOD_API_KEY", "~/.runpod/config.toml [default] api_key"


def find_api_key(environ: Mapping[str, str] | None = None, config_path: Path | None = None,
                 profile: str = "default") -> FoundKey | None:
    """The API key and where it came from, or None when no source has one."""
    env = os.environ if environ is None else environ
    key = (env.get("RUNPOD_API_KEY") or "").strip()
    found: FoundKey | None = FoundKey(key, ENV_SOURCE) if key else None
    if found is None:
        path = config_path or CONFIG_PATH
        try:
            data = tomllib.loads(path.expanduser().read_text())
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            data = {}
        section = data.get(profile)
        if isinstance(section, dict) and isinstance(section.get("api_key"), str) \
                and section["api_key"].strip():
            found = FoundKey(section["api_key"].strip(), f"{path} [{profile}] api_key")
        elif isinstance(data.get("apiKey"), str) and data["apiKey"].strip():
            found = FoundKey(data["apiKey"].strip(), f"{path} apiKey (runpodctl)")
    if found is not None:
        register_secret(found.key)
    return found


def load_api_key(environ: Mapping[str, str] | None = None, config_path: Path | None = None,
                 profile: str = "default") -> str | None:
    """The API key, or None when neither the environment nor the config file has one."""
    found = find_api_key(environ, config_path, profile)
    return found.key if found else None
