"""Keep secrets out of every text tplab shows or writes: errors, logs, events, manifests.

Why a helper: provider errors carry text from elsewhere (an SDK message, an HTTP body, a
request that echoes headers), and one careless f-string is enough to print an API key. Every place
that turns a provider error into text goes through ``redact`` / ``error_text``.

Two layers:
- values registered with ``register_secret`` (the API key in use, pod keys) and those of
  environment variables named like secrets (``*_API_KEY``, ``*TOKEN*``, ``*PASSWORD*``...)
  are replaced wherever they appear;
- patterns catch what was never registered: private key blocks, RunPod-style ``rpa_…`` keys,
  ``Bearer …`` tokens and ``api_key=…`` pairs.
``redact_tree`` does the same to every string of a JSON-like value (the manifest). This is the
client's one redaction; the pod's guard and watchdog carry their own, since only the job's
packages travel there. Thread-safe (the registry is guarded by a lock). Standard library only.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any, Iterable

MASK = "[REDACTED]"
_MIN_SECRET_LEN = 8

#: environment variables whose values are secrets by their name (every cloud's ``*_API_KEY``)
_SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)

_lock = threading.Lock()
_secrets: set[str] = set()

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
                re.S), MASK),
    (re.compile(r"\brpa_[A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"), r"\1" + MASK),
    (re.compile(r"(?i)\b(api[_\-]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&}]{8,}"), r"\1" + MASK),
)


def register_secret(value: str | None) -> None:
    """Remember a secret value so that ``redact`` removes it from any text from now on."""
    if value and len(value) >= _MIN_SECRET_LEN:
        with _lock:
            _secrets.add(value)


def _env_secrets() -> list[str]:
    """The values of environment variables whose names say they are secrets."""
    return [v for k, v in os.environ.items() if _SECRET_ENV_NAME.search(k)]


def redact(text: object, extra: Iterable[str | None] = ()) -> str:
    """``text`` as a string with every known secret and secret-looking token masked."""
    out = str(text)
    with _lock:
        values = set(_secrets)
    values.update(v for v in (*_env_secrets(), *extra) if v and len(v) >= _MIN_SECRET_LEN)
    for value in sorted(values, key=len, reverse=True):
        out = out.replace(value, MASK)
    for pattern, repl in _PATTERNS:
        out = pattern.sub(repl, out)
    return out


def error_text(exc: BaseException, extra: Iterable[str | None] = ()) -> str:
    """One redacted line for an exception: its message, or its type name if it has none."""
    msg = " ".join(str(exc).split()) or type(exc).__name__
    return redact(msg, extra)


def one_line(text: object, limit: int = 500) -> str:
    """``text`` redacted, on one line, at most ``limit`` characters (cut at a word's end, marked
    ``…``): for reasons shown to users."""
    from tplab.util.clip import clip
    return clip(redact(" ".join(str(text).split())), limit)


def redact_tree(value: Any, extra: Iterable[str | None] = ()) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) with ``redact`` applied to every
    string in it, keys kept: for what is written whole, like the manifest."""
    extra = tuple(extra)
    if isinstance(value, str):
        return redact(value, extra)
    if isinstance(value, dict):
        return {k: redact_tree(v, extra) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v, extra) for v in value]
    return value
