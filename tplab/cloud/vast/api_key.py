"""Where the Vast.ai API key comes from, and which source it was (``tplab check`` says).

In order, as the Vast CLI keeps it: ``VAST_API_KEY``; else ``$XDG_CONFIG_HOME/vastai/vast_api_key``
(``~/.config/vastai/vast_api_key`` when XDG_CONFIG_HOME is unset); else ``~/.vast_api_key``, where
older CLIs wrote it. A key found is registered with tplab.keys.redact so it can never be printed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from tplab.keys.redact import register_secret

ENV_SOURCE = "VAST_API_KEY"
#: this key beside the other clouds', for a user who has none (``registry.no_key_at_all``)
KEY_HINT = ("for Vast.ai, which rents interruptible GPUs (what the default spot lab needs), "
            "set VAST_API_KEY or store one with `vastai set api-key`")
NO_KEY = ("No Vast.ai API key found: set VAST_API_KEY, or store one with `vastai set api-key` "
          "(~/.config/vastai/vast_api_key).")


@dataclass(frozen=True)
class FoundKey:
    key: str = field(repr=False)
    source: str                 # "VAST_API_KEY", "~/.config/vastai/vast_api_key"


def key_files(environ: Mapping[str, str]) -> list[Path]:
    """The files the Vast CLI keeps its key in, newest convention first."""
    xdg = (environ.get("XDG_CONFIG_HOME") or "").strip()
    config = Path(xdg) if xdg else Path("~/.config").expanduser()
    return [config / "vastai" / "vast_api_key", Path("~/.vast_api_key").expanduser()]


def find_api_key(environ: Mapping[str, str] | None = None) -> FoundKey | None:
    """The API key and where it came from, or None when no source has one."""
    env = os.environ if environ is None else environ
    key = (env.get(ENV_SOURCE) or "").strip()
    found: FoundKey | None = FoundKey(key, ENV_SOURCE) if key else None
    if found is None:
        for path in key_files(env):
            try:
                text = path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                continue
            if text:
                found = FoundKey(text.split()[0], str(path))
                break
    if found is not None:
        register_secret(found.key)
    return found
