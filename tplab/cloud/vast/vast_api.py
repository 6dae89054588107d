"""tplab's HTTP client for Vast.ai's REST API: a ``requests.Session``, timeouts, one sentence per error.

Why its own client (beside RunPod's): Vast answers errors in its own shape — JSON
``{"success": false, "error": "...", "msg": "..."}``, and 429 as ``{"detail": "API requests too
frequent ..."}`` — so the sentences differ, while the rules are the same ones tplab keeps for
every cloud: every call has a timeout; 429 and 5xx (and a timeout or no connection) are retried
with bounded backoff when the call is safe to repeat; a create is never repeated (Vast may have
made the instance: ``AmbiguousCreateError``, and the caller looks for it by label). 401 and 403
are ``AuthError`` (a refused key); 404 is returned (``found=False``): the caller knows what it
means. The key never appears in an error (tplab.home.redact).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from tplab.cloud.base import (AmbiguousCreateError, AuthError, BalanceError, ProviderError,
                              RateLimitedError, RequestRejectedError, TransientError)
from tplab.home.redact import redact, register_secret

DEFAULT_API_BASE_URL = "https://console.vast.ai"
AUTH_FAILED = ("Vast.ai refused the API key (HTTP {status}); check VAST_API_KEY, or the key in "
               "~/.config/vastai/vast_api_key (`tplab check --provider vast` says which is used).")
USER_AGENT = "tplab (Vast REST)"


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any                   # parsed JSON, or None (404)

    @property
    def found(self) -> bool:
        return self.status != 404


def detail(body: Any, text: str = "") -> str:
    """Vast's own words for an error: ``msg``, ``error``, ``detail``."""
    if isinstance(body, dict):
        parts = [str(body[k]) for k in ("error", "msg", "detail") if body.get(k)]
        if parts:
            return ": ".join(parts)[:300]
    return " ".join(text.split())[:300] or "no detail"


class VastApi:
    """Vast's REST API at ``<api_base_url>/api/...`` with one key; thread-safe for tplab's use."""

    def __init__(self, api_key: str, api_base_url: str = DEFAULT_API_BASE_URL, *,
                 timeout_s: float = 30.0, create_timeout_s: float = 60.0,
                 retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
                 rate_limit_delays: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
                 sleep: Callable[[float], None] = time.sleep) -> None:
        import requests

        if not api_key:
            raise AuthError("No Vast.ai API key was given.")
        register_secret(api_key)
        self._key = api_key
        self.base_url = api_base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.create_timeout_s = create_timeout_s
        self.retry_delays = tuple(retry_delays)
        self.rate_limit_delays = tuple(rate_limit_delays)
        self._sleep = sleep
        self._requests = requests
        self.session = requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {api_key}",
                                     "Accept": "application/json", "User-Agent": USER_AGENT})

    def __repr__(self) -> str:  # never the key
        return f"VastApi({self.base_url!r})"

    def call(self, what: str, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json: Any = None, create_label: str | None = None) -> Answer:
        """``method path`` (``/api/v0/...``); ``what`` names the call in errors. ``create_label``:
        this call creates an instance of that label (never repeated on 5xx or a timeout)."""
        url = f"{self.base_url}{path}"
        failures = limited = 0
        while True:
            try:
                resp = self.session.request(
                    method, url, params=params, json=json,
                    timeout=self.create_timeout_s if create_label else self.timeout_s)
            except self._requests.exceptions.RequestException as exc:
                why = ("did not answer in time" if isinstance(exc, self._requests.exceptions.Timeout)
                       else f"could not be reached ({type(exc).__name__})")
                if create_label:
                    raise AmbiguousCreateError(
                        f"Vast.ai's API {why} while {what}; the instance may have been created "
                        "anyway.", create_label, f"Vast.ai's API {why}") from None
                failures += 1
                if failures > len(self.retry_delays):
                    raise TransientError(f"Vast.ai's API at {self.base_url} {why} while {what}, "
                                         f"{failures} times; check the network and try again."
                                         ) from None
                self._sleep(self.retry_delays[failures - 1])
                continue
            status = resp.status_code
            if status == 429:
                limited += 1
                if limited > len(self.rate_limit_delays):
                    raise RateLimitedError(
                        f"Vast.ai kept answering \"API requests too frequent\" (HTTP 429) while "
                        f"{what}, {limited} times with backoff; try again in a minute.")
                self._sleep(self._retry_after(resp, self.rate_limit_delays[limited - 1]))
                continue
            if status >= 500:
                body, text = self._body(resp)
                if create_label:
                    raise AmbiguousCreateError(
                        f"Vast.ai answered HTTP {status} while {what} ({text}); the instance "
                        "may have been created anyway.", create_label, f"HTTP {status}: {text}")
                failures += 1
                if failures > len(self.retry_delays):
                    raise TransientError(f"Vast.ai's API failed while {what} (HTTP {status}: "
                                         f"{text}) {failures} times; try again in a minute.")
                self._sleep(self.retry_delays[failures - 1])
                continue
            return self._answer(what, resp)

    @staticmethod
    def _retry_after(resp: Any, default: float) -> float:
        try:
            return min(max(float(resp.headers.get("Retry-After", default)), 0.0), 30.0)
        except ValueError:
            return default

    def _body(self, resp: Any) -> tuple[Any, str]:
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            body = None
        return body, redact(detail(body, resp.text if body is None else ""), [self._key])

    def _answer(self, what: str, resp: Any) -> Answer:
        status = resp.status_code
        body, text = self._body(resp)
        if status == 404:
            return Answer(404, None)
        if status < 300:
            if body is None:
                raise TransientError(f"Vast.ai's API answered {what} with something that is not "
                                     f"JSON (HTTP {status}); try again.")
            return Answer(status, body)
        if status == 401 or (status == 403 and _is_auth(body)):
            raise AuthError(AUTH_FAILED.format(status=status))
        if status == 402 or "credit" in text.lower() or "balance" in text.lower():
            raise BalanceError(f"Vast.ai refused {what} for lack of credit (HTTP {status}: "
                               f"{text}); add credit in the Vast console, then try again.")
        if status in (400, 403, 410):
            raise RequestRejectedError(f"Vast.ai refused {what} (HTTP {status}: {text}).")
        raise ProviderError(f"Vast.ai answered HTTP {status} while {what} ({text}).")


def _is_auth(body: Any) -> bool:
    """401 always; 403 only when Vast says the key is the problem (not a rule about the ask)."""
    if not isinstance(body, dict):
        return True
    words = " ".join(str(body.get(k) or "") for k in ("error", "msg", "detail")).lower()
    return not body.get("ask_id") and any(w in words for w in ("auth", "key", "login",
                                                               "unauthorized", "permission"))
