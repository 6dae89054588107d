"""tplab's one HTTP client for RunPod's REST API v2: a ``requests.Session``, timeouts, one sentence per error.

Why one client: every REST call (pods, catalog, billing) goes through ``RestV2.call``, so the
timeout, the Bearer key, the retry rules and the error sentences are decided once. RunPod
answers errors as ``application/problem+json`` (``{title, status, detail, errors[]}``); each
status becomes one exception with one sentence (the key never in it; every text passes through
tplab.keys.redact):

- 400 -> ``NoCapacityError`` when ``detail`` speaks of capacity, else ``RequestRejectedError``
  (a rule; ``detail`` quoted); 401 -> ``AuthError``; 402 -> ``BalanceError``; 403 ->
  ``ForbiddenError``; 422 -> ``RequestBugError`` (tplab's bug: ``detail`` and ``errors`` shown);
- 429 -> wait ``Retry-After`` (at most ``max_retry_after_s`` a time, ``rate_limit_tries`` times),
  then ``RateLimitedError``;
- 5xx, a timeout or no connection -> retried with bounded backoff (``retry_delays``) when the
  call is safe to repeat, then ``TransientError``; for a create (not safe to repeat: RunPod may
  have made the pod) at once ``AmbiguousCreateError``.

404 is returned to the caller (``None`` body, ``found=False``), who knows what it means.
The call loop (timeouts, retries, the create rule) is ``tplab.cloud.rest_client``'s, shared with
Vast's client; this module holds RunPod's routes, error shape and sentences.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from tplab.cloud.base import (
    AuthError,
    BalanceError,
    ForbiddenError,
    NoCapacityError,
    ProviderError,
    RateLimitedError,
    RequestBugError,
    RequestRejectedError,
)
from tplab.util.clip import outside_words
from tplab.cloud.rest_client import Answer, RestClient

DEFAULT_API_BASE_URL = "https://api.runpod.io"
AUTH_FAILED = ("RunPod refused the API key from {source} (HTTP 401); put a valid key there "
               "(RunPod console, Settings > API Keys), or set RUNPOD_API_KEY.")
#: where the key came from, when the caller did not say
UNKNOWN_SOURCE = "RUNPOD_API_KEY or ~/.runpod/config.toml"
CAPACITY_HINTS = ("no longer any instances", "no instances", "not enough", "no available",
                  "out of stock", "insufficient capacity", "could not be placed", "capacity")
USER_AGENT = "tplab (REST v2)"


def _detail(body: Any, text: str) -> str:
    """RunPod's own words for an error (problem+json's detail, its errors); a page as its
    words, never its HTML; bounded, never cut mid-word."""
    if isinstance(body, dict):
        detail = str(body.get("detail") or body.get("title") or body.get("error") or "")
        errors = body.get("errors")
        if isinstance(errors, list) and errors:
            detail += " (" + "; ".join(str(e) for e in errors[:5]) + ")"
        if detail:
            return outside_words(detail, 500)
    return outside_words(text, 300) or "no detail"


class RestV2(RestClient):
    """RunPod's REST v2 at ``<api_base_url>/v2`` with one key; the call rules are
    ``RestClient``'s, the error sentences RunPod's."""

    cloud = "RunPod"
    noun = "pod"
    accept = "application/json, application/problem+json"
    user_agent = USER_AGENT

    def __init__(self, api_key: str, api_base_url: str = DEFAULT_API_BASE_URL, *,
                 timeout_s: float = 30.0, create_timeout_s: float = 60.0,
                 retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
                 rate_limit_tries: int = 4, max_retry_after_s: float = 30.0,
                 key_source: str = "", sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(api_key, api_base_url, timeout_s=timeout_s,
                         create_timeout_s=create_timeout_s, retry_delays=retry_delays, sleep=sleep)
        self.key_source = key_source or UNKNOWN_SOURCE
        self.rate_limit_tries = rate_limit_tries
        self.max_retry_after_s = max_retry_after_s

    def call(self, what: str, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json: Any = None, create_name: str | None = None, once: bool = False) -> Answer:
        """``method path`` under ``/v2``; ``what`` names the call in errors ("reading the pod").
        ``create_name``: this call creates a pod of that name (no retry on 5xx/timeouts);
        ``once``: one try (``RestClient._request``)."""
        return self._request(what, method, path, params, json, create_name, once)

    def _url(self, path: str) -> str:
        return f"{self.base_url}/v2{path}"

    def _detail(self, body: Any, text: str) -> str:
        return _detail(body, text)

    def _rate_limited(self, resp: Any, what: str, limited: int, waited: float,
                      once: bool = False) -> float:
        wait = self._retry_after(resp)
        if once:
            _, detail = self._problem(resp)
            raise RateLimitedError(f"RunPod answered HTTP 429 while {what} ({detail}); it asked "
                                   f"for {wait:.0f} s before the next call.", retry_after_s=wait)
        if limited >= self.rate_limit_tries:
            raise RateLimitedError(
                f"RunPod kept rate-limiting tplab (HTTP 429) while {what}, after "
                f"waiting {waited:.0f} s as its Retry-After asked; try again in a few "
                "minutes.")
        return wait

    def _retry_after(self, resp: Any) -> float:
        try:
            wait = float(resp.headers.get("Retry-After", "1"))
        except ValueError:
            wait = 1.0
        return min(max(wait, 0.0), self.max_retry_after_s)

    def _answer(self, what: str, resp: Any) -> Answer:
        status = resp.status_code
        if status == 204 or (status == 404):
            return Answer(status, None)
        body, detail = self._problem(resp)
        if status < 300:
            if body is None:
                raise self._not_json(what, status)
            return Answer(status, body)
        if status == 401:
            raise AuthError(AUTH_FAILED.format(source=self.key_source))
        if status == 402:
            raise BalanceError(f"RunPod refused {what} for lack of funds (HTTP 402: {detail}); "
                               "add funds in the RunPod console, then try again.")
        if status == 403:
            raise ForbiddenError(f"RunPod refused {what} (HTTP 403: {detail}); this API key may "
                                 "not do that: check its permissions in the RunPod console.")
        if status == 422:
            raise RequestBugError(f"RunPod rejected tplab's request while {what} as malformed "
                                  f"(HTTP 422: {detail}); this is a bug in tplab: please report "
                                  "it with this message.")
        if status == 400 and any(h in detail.lower() for h in CAPACITY_HINTS):
            raise NoCapacityError(f"RunPod has no capacity for {what} right now (HTTP 400: "
                                  f"{detail}).")
        if status == 400:
            raise RequestRejectedError(f"RunPod refused {what} (HTTP 400: {detail}).")
        raise ProviderError(f"RunPod answered HTTP {status} while {what} ({detail}).")
