"""tplab's HTTP client for Vast.ai's REST API: a ``requests.Session``, timeouts, one sentence per error.

Why its own client (beside RunPod's): Vast answers errors in its own shape — JSON
``{"success": false, "error": "...", "msg": "..."}``, and 429 as ``{"detail": "API requests too
frequent ..."}`` — so the sentences differ, while the rules are the same ones tplab keeps for
every cloud: every call has a timeout; 429 and 5xx (and a timeout or no connection) are retried
with bounded backoff when the call is safe to repeat; a create is never repeated (Vast may have
made the instance: ``AmbiguousCreateError``, and the caller looks for it by label).

A refused key is ``AuthError`` on every call, one sentence naming the key's source: Vast answers
a wrong or revoked key 404 ``{"error": "auth_error"}`` (not 401), an expired session 404
"Session expired", a deleted key or an account with 2FA 401, a key without the right 403 with
words about it. Any other 404 is returned (``found=False``, Vast's body kept): the caller knows
what it means. An offer that moved between search and create (404/410 ``no_such_ask``, 400
``invalid_price``) is ``OfferMovedError``. Every call is paced (``pacing``: each endpoint no more
often than Vast allows one key), a 429 (no Retry-After) teaches the pacer and is retried a
bounded number of times. Paths carry the trailing slash every official client writes. The key
never appears in an error (tplab.keys.redact). The shared rules live in
``tplab.cloud.rest_client``; this module holds Vast's error shape, 429 rule and sentences.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlparse

from tplab.cloud.base import (AuthError, BalanceError, ProviderError, RateLimitedError,
                              RequestBugError, RequestRejectedError)
from tplab.cloud.rest_client import Answer, RestClient
from tplab.cloud.vast.pacing import Pacer, endpoint, scale_from_env
from tplab.util.clip import outside_words

DEFAULT_API_BASE_URL = "https://console.vast.ai"
AUTH_FAILED = ("Vast.ai refused the API key from {source} (HTTP {status}: {detail}); put a "
               "valid key there (Vast console, Account > API Keys), or set VAST_API_KEY.")
USER_AGENT = "tplab (Vast REST)"
#: Vast's words that a 404 is about the key, not the thing asked for
AUTH_404 = ("auth_error", "session expired", "log in again")
#: the errors of an offer that moved between search and create
OFFER_MOVED = ("no_such_ask", "invalid_price")
#: the most of Vast's own words an error sentence quotes
DETAIL_LIMIT = 300


class OfferMovedError(RequestRejectedError):
    """Vast would not rent the offer as quoted: taken (404/410 ``no_such_ask``) or its price
    moved (400 ``invalid_price``); nothing was created. ``status`` and ``error`` are Vast's."""

    def __init__(self, message: str, status: int, error: str) -> None:
        super().__init__(message)
        self.status, self.error = status, error


def detail(body: Any, text: str = "") -> str:
    """Vast's own words for an error: ``msg``, ``error``, ``detail``; a page (a proxy's 500)
    as its words, never its HTML; bounded, never cut mid-word."""
    if isinstance(body, dict):
        parts = [str(body[k]) for k in ("error", "msg", "detail") if body.get(k)]
        if parts:
            return outside_words(": ".join(parts), DETAIL_LIMIT)
    return outside_words(text, DETAIL_LIMIT) or "no detail"


def invalid_args(what: str, words: str) -> RequestBugError:
    """Vast's ``invalid_args``: it would not take what tplab sent (an input limit, a field's
    shape), said as that, never as "no capacity"."""
    return RequestBugError(f"Vast.ai refused tplab's request as invalid while {what} "
                           f"(invalid_args: {words}): tplab sent something Vast does not take, "
                           "so no other offer or --on-demand would help; nothing was created "
                           "(please report this sentence)")


class VastApi(RestClient):
    """Vast's REST API at ``<api_base_url>/api/...`` with one key; the call rules are
    ``RestClient``'s, the error sentences Vast's."""

    cloud = "Vast.ai"
    noun = "instance"
    user_agent = USER_AGENT

    def __init__(self, api_key: str, api_base_url: str = DEFAULT_API_BASE_URL, *,
                 timeout_s: float = 30.0, create_timeout_s: float = 60.0,
                 retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
                 rate_limit_tries: int = 6, key_source: str = "",
                 pace_scale: float | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(api_key, api_base_url, timeout_s=timeout_s,
                         create_timeout_s=create_timeout_s, retry_delays=retry_delays, sleep=sleep)
        self.rate_limit_tries = rate_limit_tries
        self.key_source = key_source or "the key tplab was given"
        self.pacer = Pacer(scale_from_env() if pace_scale is None else pace_scale, sleep=sleep)
        self.rate_limited = 0          # 429s met, in all (a figure the fault suite reports)
        self._base_path = urlparse(self.base_url).path.rstrip("/")

    def call(self, what: str, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json: Any = None, create_label: str | None = None, once: bool = False) -> Answer:
        """``method path`` (``/api/v0/...``); ``what`` names the call in errors. ``create_label``:
        this call creates an instance of that label (never repeated on 5xx or a timeout);
        ``once``: one try (``RestClient._request``)."""
        return self._request(what, method, path, params, json, create_label, once)

    def _url(self, path: str) -> str:
        return f"{self.base_url}{path.rstrip('/')}/"

    def _detail(self, body: Any, text: str) -> str:
        return detail(body, text)

    def _before_send(self, method: str, path: str) -> None:
        self.pacer.wait(endpoint(method, path))

    def _rate_limited(self, resp: Any, what: str, limited: int, waited: float,
                      once: bool = False) -> float:
        """Vast sends no Retry-After: the pacer learns the endpoint's interval from the answer
        and holds its next call (``_before_send`` waits); a bounded number of tries (one with
        ``once``: the error at once, its ``retry_after_s`` the pacer's hold)."""
        self.rate_limited += 1
        request = getattr(resp, "request", None)
        path = urlparse(getattr(request, "url", "") or "").path
        name = endpoint(getattr(request, "method", "") or "GET",
                        path[len(self._base_path):] if path.startswith(self._base_path) else path)
        _, text = self._problem(resp)
        if limited >= self.rate_limit_tries:
            raise RateLimitedError(
                f"Vast.ai kept answering \"API requests too frequent\" (HTTP 429) while "
                f"{what}, {limited} times though tplab paced its calls; try again in a minute.")
        self.pacer.limited(name, text)
        if once:
            raise RateLimitedError(f"Vast.ai answered HTTP 429 while {what} ({text}).",
                                   retry_after_s=self.pacer.hold_left(name))
        return 0.0

    def _answer(self, what: str, resp: Any) -> Answer:
        status = resp.status_code
        body, text = self._problem(resp)
        error = str(body.get("error") or "") if isinstance(body, dict) else ""
        if status in (401, 403, 404) and _is_auth(status, body, text):
            raise AuthError(AUTH_FAILED.format(source=self.key_source, status=status,
                                               detail=text))
        if error in OFFER_MOVED and status in (400, 404, 410):
            raise OfferMovedError(f"Vast.ai would not rent the offer while {what} (HTTP "
                                  f"{status}: {text}).", status, error)
        if status == 404:
            return Answer(404, body)
        if status < 300:
            if body is None:
                raise self._not_json(what, status)
            return Answer(status, body)
        if error == "invalid_args":
            raise invalid_args(what, outside_words(str(body.get("msg") or text), DETAIL_LIMIT)
                               if isinstance(body, dict) else text)
        if status == 402 or "credit" in text.lower() or "balance" in text.lower():
            raise BalanceError(f"Vast.ai refused {what} for lack of credit (HTTP {status}: "
                               f"{text}); add credit in the Vast console, then try again.")
        if status in (400, 403, 410):
            raise RequestRejectedError(f"Vast.ai refused {what} (HTTP {status}: {text}).")
        raise ProviderError(f"Vast.ai answered HTTP {status} while {what} ({text}).")


def _is_auth(status: int, body: Any, text: str) -> bool:
    """Whether a 401, 403 or 404 is about the key: 401 always; 404 only when Vast says so
    (``auth_error``, an expired session); 403 when Vast's words are about the key (not a rule
    about the offer)."""
    if status == 401:
        return True
    words = text.lower()
    if isinstance(body, dict):
        words = " ".join(str(body.get(k) or "") for k in ("error", "msg", "detail")).lower()
    if status == 404:
        return any(w in words for w in AUTH_404)
    if not isinstance(body, dict):
        return True
    return not body.get("ask_id") and any(w in words for w in ("auth", "key", "login",
                                                               "unauthorized", "permission"))
