"""tplab's HTTP client for Vast.ai's REST API: a ``requests.Session``, timeouts, one sentence per error.

Why its own client (beside RunPod's): Vast answers errors in its own shape — JSON
``{"success": false, "error": "...", "msg": "..."}``, and 429 as ``{"detail": "API requests too
frequent ..."}`` — so the sentences differ, while the rules are the same ones tplab keeps for
every cloud: every call has a timeout; 429 and 5xx (and a timeout or no connection) are retried
with bounded backoff when the call is safe to repeat; a create is never repeated (Vast may have
made the instance: ``AmbiguousCreateError``, and the caller looks for it by label). 401 and 403
are ``AuthError`` (a refused key); 404 is returned (``found=False``): the caller knows what it
means. The key never appears in an error (tplab.keys.redact). Those shared rules live in
``tplab.cloud.rest_client``; this module holds Vast's error shape, 429 rule and sentences.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from tplab.cloud.base import (AuthError, BalanceError, ProviderError, RateLimitedError,
                              RequestRejectedError)
from tplab.cloud.rest_client import Answer, RestClient

DEFAULT_API_BASE_URL = "https://console.vast.ai"
AUTH_FAILED = ("Vast.ai refused the API key (HTTP {status}); check VAST_API_KEY, or the key in "
               "~/.config/vastai/vast_api_key (`tplab check --provider vast` says which is used).")
USER_AGENT = "tplab (Vast REST)"


def detail(body: Any, text: str = "") -> str:
    """Vast's own words for an error: ``msg``, ``error``, ``detail``."""
    if isinstance(body, dict):
        parts = [str(body[k]) for k in ("error", "msg", "detail") if body.get(k)]
        if parts:
            return ": ".join(parts)[:300]
    return " ".join(text.split())[:300] or "no detail"


class VastApi(RestClient):
    """Vast's REST API at ``<api_base_url>/api/...`` with one key; the call rules are
    ``RestClient``'s, the error sentences Vast's."""

    cloud = "Vast.ai"
    noun = "instance"
    user_agent = USER_AGENT

    def __init__(self, api_key: str, api_base_url: str = DEFAULT_API_BASE_URL, *,
                 timeout_s: float = 30.0, create_timeout_s: float = 60.0,
                 retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
                 rate_limit_delays: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(api_key, api_base_url, timeout_s=timeout_s,
                         create_timeout_s=create_timeout_s, retry_delays=retry_delays, sleep=sleep)
        self.rate_limit_delays = tuple(rate_limit_delays)

    def call(self, what: str, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json: Any = None, create_label: str | None = None) -> Answer:
        """``method path`` (``/api/v0/...``); ``what`` names the call in errors. ``create_label``:
        this call creates an instance of that label (never repeated on 5xx or a timeout)."""
        return self._request(what, method, path, params, json, create_label)

    def _detail(self, body: Any, text: str) -> str:
        return detail(body, text)

    def _rate_limited(self, resp: Any, what: str, limited: int, waited: float) -> float:
        if limited > len(self.rate_limit_delays):
            raise RateLimitedError(
                f"Vast.ai kept answering \"API requests too frequent\" (HTTP 429) while "
                f"{what}, {limited} times with backoff; try again in a minute.")
        return self._retry_after(resp, self.rate_limit_delays[limited - 1])

    @staticmethod
    def _retry_after(resp: Any, default: float) -> float:
        try:
            return min(max(float(resp.headers.get("Retry-After", default)), 0.0), 30.0)
        except ValueError:
            return default

    def _answer(self, what: str, resp: Any) -> Answer:
        status = resp.status_code
        body, text = self._problem(resp)
        if status == 404:
            return Answer(404, None)
        if status < 300:
            if body is None:
                raise self._not_json(what, status)
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
