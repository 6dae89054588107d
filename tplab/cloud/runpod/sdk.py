"""Calling the runpod SDK's GraphQL with a given key and API URL, and its failures as one sentence.

Why the SDK at all: tplab's pods go through REST v2 (http_api.py), but spot and the account
balance exist only in RunPod's GraphQL, and the SDK's ``run_graphql_query`` (runpod >= 1.8 takes
``api_key``) is RunPod's own client for it. The SDK reads its API URL from
``os.environ["RUNPOD_API_BASE_URL"]`` at call time, so each call sets it (and the module global
``runpod.api_key``), runs, and puts the previous values back, under one process-wide lock: calls
from several threads (the orchestrator uses ``asyncio.to_thread``) are serialized and never see
each other's key or URL. Code elsewhere that reads ``RUNPOD_API_BASE_URL`` while a call is in
flight may briefly see this provider's URL.

``import runpod`` costs about 0.5 s, so it happens on the first call, never at import time. That
import also runs ``logging.basicConfig(level=INFO)`` (runpod/serverless/utils/rp_upload.py), which
would flood stderr (and the dashboard) with every library's INFO lines; ``import_runpod`` undoes it.
And it imports the serverless worker's debugger (runpod/serverless/utils/rp_debugger.py), which
calls ``cpuinfo.get_cpu_info()`` at import: py-cpuinfo starts a second Python interpreter
(``cpuinfo.py --json``, which runs lscpu, dmesg, ...) to name the CPU for a debugger tplab never
uses, about 1.2 s of CPU on every first call. ``import_runpod`` lends that import a stand-in
``cpuinfo`` that names the CPU from ``/proc/cpuinfo`` in-process, then takes it back out of
``sys.modules`` (``_CpuInfoStandIn``).

Error mapping (messages never contain the key; everything passes through tplab.keys.redact):
- HTTP 401 (``runpod.error.AuthenticationError``) -> ``AuthError``
- a GraphQL error (``runpod.error.QueryError``) -> ``ApiError`` with ``api_message``
- a non-JSON answer (an HTTP 5xx page), a timeout or no connection -> ``TransientError``
- GraphQL retired (to go in early 2027): the SDK cannot say so (it reads no status), so after
  an answer that is not GraphQL one plain request asks the URL what it is: 404, 410 or a page
  that is not JSON -> ``GraphqlGoneError`` (spot and the balance went with it: say so, and go
  on through REST v2); a 5xx is still ``TransientError``
"""

from __future__ import annotations

import logging
import os
import platform
import sys
import threading
import time
import types
from typing import Any, Callable, Iterable, TypeVar

from tplab.cloud.base import AuthError, ProviderError, TransientError
from tplab.cloud.runpod.http_api import AUTH_FAILED, DEFAULT_API_BASE_URL, UNKNOWN_SOURCE
from tplab.keys.redact import error_text, redact, register_secret

_LOCK = threading.RLock()
_RUNPOD: Any = None  # the runpod module, once imported
T = TypeVar("T")



class _CpuInfoStandIn:
    """While ``import runpod`` runs, ``sys.modules["cpuinfo"]`` is a module whose
    ``get_cpu_info()`` reads the CPU's name from ``/proc/cpuinfo`` (``platform.processor()``
    elsewhere) instead of starting an interpreter; on exit the stand-in is removed, so anything
    that imports ``cpuinfo`` later gets py-cpuinfo itself. When py-cpuinfo is already imported,
    nothing is lent."""

    def __enter__(self) -> None:
        self._lent = "cpuinfo" not in sys.modules
        if self._lent:
            module = types.ModuleType("cpuinfo", "tplab's stand-in for py-cpuinfo during import runpod")
            module.get_cpu_info = _cpu_brand  # type: ignore[attr-defined]
            sys.modules["cpuinfo"] = module

    def __exit__(self, *exc: object) -> None:
        if self._lent and getattr(sys.modules.get("cpuinfo"), "get_cpu_info", None) is _cpu_brand:
            del sys.modules["cpuinfo"]


def _cpu_brand() -> dict[str, str]:
    """What the SDK's debugger reads of ``cpuinfo.get_cpu_info()``: the CPU's name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return {"brand_raw": line.split(":", 1)[1].strip()}
    except OSError:
        pass
    return {"brand_raw": platform.processor() or "unknown"}


def import_runpod() -> Any:
    """``import runpod`` with the root logger's level and handlers left as they were.

    Under the lock, and only once: two threads importing runpod at the same time would otherwise
    see a half-initialised module (ImportError: partially initialized module)."""
    global _RUNPOD
    if _RUNPOD is not None:
        return _RUNPOD
    with _LOCK:
        if _RUNPOD is None:
            root = logging.getLogger()
            level, handlers = root.level, list(root.handlers)
            with _CpuInfoStandIn():
                import runpod
                import runpod.api.graphql  # noqa: F401 - fully loaded before anyone uses it

            root.setLevel(level)
            for handler in list(root.handlers):
                if handler not in handlers:
                    root.removeHandler(handler)
            _RUNPOD = runpod
        return _RUNPOD


class ApiError(ProviderError):
    """RunPod answered with a GraphQL error; ``api_message`` is its (redacted) message."""

    def __init__(self, message: str, api_message: str) -> None:
        super().__init__(message)
        self.api_message = api_message


class GraphqlGoneError(ProviderError):
    """RunPod's GraphQL API is gone (404, 410, or a page that is not JSON): spot pods and the
    account balance went with it; ``why`` says in a few words what its URL answered."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


class RunPodApi:
    """The SDK bound to one key and one API URL. Thread-safe (see module docstring)."""

    def __init__(self, api_key: str, api_base_url: str | None = None,
                 key_source: str = "") -> None:
        if not api_key:
            raise AuthError("No RunPod API key was given.")
        self._key = api_key
        self.key_source = key_source or UNKNOWN_SOURCE
        register_secret(api_key)
        self.api_base_url = (api_base_url or os.environ.get("RUNPOD_API_BASE_URL")
                             or DEFAULT_API_BASE_URL).rstrip("/")

    def __repr__(self) -> str:  # never the key
        return f"RunPodApi({self.api_base_url!r})"

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` (an SDK function) with this key and URL; ``what`` names it in errors."""
        import requests

        runpod = import_runpod()
        from runpod import error as rp_error

        with _LOCK:
            old_url = os.environ.get("RUNPOD_API_BASE_URL")
            old_key = runpod.api_key
            os.environ["RUNPOD_API_BASE_URL"] = self.api_base_url
            runpod.api_key = self._key
            try:
                return fn(*args, **kwargs)
            except rp_error.AuthenticationError:
                raise AuthError(AUTH_FAILED.format(source=self.key_source)) from None
            except rp_error.QueryError as exc:
                msg = error_text(exc, [self._key])
                raise ApiError(f"RunPod returned an error while {what}: {msg}", msg) from None
            except requests.exceptions.JSONDecodeError:
                raise TransientError(
                    f"RunPod's GraphQL API failed while {what} (it answered with an error page, "
                    "not GraphQL); try again in a minute.") from None
            except requests.exceptions.Timeout:
                raise TransientError(
                    f"RunPod's GraphQL API did not answer in time while {what}; try again."
                ) from None
            except requests.exceptions.RequestException as exc:
                raise TransientError(
                    f"Could not reach RunPod's GraphQL API at {self.api_base_url} while {what} "
                    f"({type(exc).__name__}); check the network and try again.") from None
            finally:
                runpod.api_key = old_key
                if old_url is None:
                    os.environ.pop("RUNPOD_API_BASE_URL", None)
                else:
                    os.environ["RUNPOD_API_BASE_URL"] = old_url

    def graphql(self, what: str, query: str) -> dict[str, Any]:
        """Send ``query`` through ``runpod.api.graphql.run_graphql_query``; returns ``data``."""
        import_runpod()
        from runpod.api.graphql import run_graphql_query

        try:
            answer = self.call(what, run_graphql_query, query, api_key=self._key)
        except TransientError as exc:
            if "error page" in str(exc):   # not GraphQL: retired, or a passing 5xx page?
                self._raise_if_gone(what)
            raise
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, dict):
            self._raise_if_gone(what)
            raise TransientError(f"RunPod's API gave an answer without data while {what}; "
                                 "try again.")
        return data

    def _raise_if_gone(self, what: str) -> None:
        """Ask the GraphQL URL once what it answers (``GraphqlGoneError`` when it is gone)."""
        import requests

        url = f"{self.api_base_url}/graphql"
        try:
            resp = requests.post(url, json={"query": "query { __typename }"}, timeout=30,
                                 headers={"Authorization": f"Bearer {self._key}",
                                          "User-Agent": "tplab (GraphQL)"})
        except requests.exceptions.RequestException:
            return
        kind = resp.headers.get("Content-Type", "").split(";")[0].strip() or "no content type"
        if resp.status_code in (404, 410) or (resp.status_code < 300 and "json" not in kind):
            why = f"HTTP {resp.status_code}, {kind}"
            raise GraphqlGoneError(f"RunPod's GraphQL API at {url} is gone ({why}) while "
                                   f"{what}; spot pods and the account balance went with it.",
                                   why)

    def redact(self, text: object) -> str:
        return redact(text, [self._key])


def with_retries(fn: Callable[[], T], delays: Iterable[float]) -> T:
    """Call ``fn``; on TransientError retry after each delay in turn; re-raise the last one."""
    delays = list(delays)
    for i in range(len(delays) + 1):
        try:
            return fn()
        except TransientError:
            if i == len(delays):
                raise
            time.sleep(delays[i])
    raise AssertionError("unreachable")
