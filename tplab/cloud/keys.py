"""Where the RunPod API key comes from: ``RUNPOD_API_KEY``, else runpod's ``~/.runpod/config.toml``.

The config file is the one ``runpod config`` writes (``[default]`` table, ``api_key = "..."``);
it is read here with tomllib so that finding the key does not import the runpod SDK (1.5 s).
A key found is registered with tplab.redact so it can never be printed.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Mapping

from tplab.redact import register_secret

CONFIG_PATH = Path("~/.runpod/config.toml")
NO_KEY = ("No RunPod API key found: set RUNPOD_API_KEY, or run `runpod config` to store one in "
          "~/.runpod/config.toml.")


def load_api_key(environ: Mapping[str, str] | None = None, config_path: Path | None = None,
                 profile: str = "default") -> str | None:
    """The API key, or None when neither the environment nor the config file has one."""
    env = os.environ if environ is None else environ
    key = (env.get("RUNPOD_API_KEY") or "").strip()
    if not key:
        path = (config_path or CONFIG_PATH).expanduser()
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            data = {}
        section = data.get(profile)
        if isinstance(section, dict) and isinstance(section.get("api_key"), str):
            key = section["api_key"].strip()
    if key:
        register_secret(key)
        return key
    return None
