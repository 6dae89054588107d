"""The rules every cloud's REST client keeps: a ``requests.Session``, a timeout per call, bounded retries.

Why one place: the rules are tplab's, the same for every cloud. Every call has a timeout (a
longer one for a create); a timeout, no connection or a 5xx is retried over ``retry_delays``
when the call is safe to repeat, then ``TransientError``; a create is never repeated (the cloud
may have made the pod: ``AmbiguousCreateError`` at once, and the caller looks for it by name);
a 429 waits as the subclass says (``_rate_limited``), then ``RateLimitedError``. The key goes
into the session's header, is registered with ``tplab.keys.redact`` and never reaches an error.

Each cloud subclasses ``RestClient`` with its own words (``cloud``, ``noun``), its URL layout,
its error shape (``_detail``), its 429 rule and what each other status means (``_answer``).
``requests`` is imported when the first client is built (not at module import).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence

from tplab.cloud.base import AmbiguousCreateError, AuthError, TransientError
from tplab.keys.redact import redact, register_secret


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any                   # parsed JSON, or None (204, 404)

    @property
    def found(self) -> bool:
        return self.status != 404


class RestClient:
    """See the module docstring. Thread-safe for tplab's use (requests' Session is shared by
    the worker threads that call the provider)."""

    cloud: ClassVar[str]        # "RunPod", "Vast.ai"
    noun: ClassVar[str]         # what a create makes: "pod", "instance"
    accept: ClassVar[str] = "application/json"
    user_agent: ClassVar[str]

    def __init__(self, api_key: str, api_base_url: str, *, timeout_s: float,
                 create_timeout_s: float, retry_delays: Sequence[float],
                 sleep: Callable[[float], None] = time.sleep) -> None:
        import requests

        if not api_key:
            raise AuthError(f"No {self.cloud} API key was given.")
        register_secret(api_key)
        self._key = api_key
        self.base_url = api_base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.create_timeout_s = create_timeout_s
        self.retry_delays = tuple(retry_delays)
        self._sleep = sleep
        self._requests = requests
        self.session = requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {api_key}",
                                     "Accept": self.accept, "User-Agent": self.user_agent})

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.base_url!r})"

    def redact(self, text: object) -> str:
        return redact(text, [self._key])

    # ---- the cloud's own -----------------------------------------------------------------
    def _url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _detail(self, body: Any, text: str) -> str:
        """The cloud's own words for an error answer (``body`` parsed JSON, else ``text``)."""
        raise NotImplementedError

    def _rate_limited(self, resp: Any, what: str, limited: int, waited: float,
                      once: bool = False) -> float:
        """The wait before the next try after the ``limited``-th 429 of this call (``waited`` s
        waited so far); raises ``RateLimitedError`` when it is time to stop (at the first with
        ``once``, carrying the wait the cloud asked for in ``retry_after_s``)."""
        raise NotImplementedError

    def _answer(self, what: str, resp: Any) -> Answer:
        """Any answer that is neither a 429 nor a 5xx: the Answer, or the error it means."""
        raise NotImplementedError

    def _before_send(self, method: str, path: str) -> None:
        """Called before every request goes out, retries included (a cloud that paces its
        calls waits here); nothing by default."""

    # ---- one call ------------------------------------------------------------------------
    def _request(self, what: str, method: str, path: str, params: Mapping[str, Any] | None,
                 json: Any, create: str | None, once: bool = False) -> Answer:
        """``method path``; ``what`` names the call in errors; ``create``: this call creates a
        pod of that name (never repeated on a 5xx or a timeout). ``once``: one try, whatever
        comes back (a 429, a 5xx, no answer: the error at once), for a caller that keeps its
        own schedule and its own bound (the end of a pod: ``tplab.lab.ending``)."""
        url = self._url(path)
        failures = limited = 0
        waited = 0.0
        while True:
            self._before_send(method, path)
            try:
                resp = self.session.request(
                    method, url, params=params, json=json,
                    timeout=self.create_timeout_s if create else self.timeout_s)
            except self._requests.exceptions.RequestException as exc:
                why = ("did not answer in time" if isinstance(exc, self._requests.exceptions.Timeout)
                       else f"could not be reached ({type(exc).__name__})")
                if create:
                    raise AmbiguousCreateError(
                        f"{self.cloud}'s API {why} while {what}; the {self.noun} may have been "
                        "created anyway.", create, f"{self.cloud}'s API {why}") from None
                failures += 1
                if once or failures > len(self.retry_delays):
                    times = "once" if failures == 1 else f"{failures} times"
                    raise TransientError(f"{self.cloud}'s API at {self.base_url} {why} while "
                                         f"{what}, {times}; check the network and try "
                                         "again.") from None
                self._sleep(self.retry_delays[failures - 1])
                continue
            status = resp.status_code
            if status == 429:
                limited += 1
                wait = self._rate_limited(resp, what, limited, waited, once)
                waited += wait
                if wait > 0:
                    self._sleep(wait)
                continue
            if status >= 500:
                _, detail = self._problem(resp)
                if create:
                    raise AmbiguousCreateError(
                        f"{self.cloud} answered HTTP {status} while {what} ({detail}); the "
                        f"{self.noun} may have been created anyway.", create,
                        f"HTTP {status}: {detail}")
                failures += 1
                if once:
                    raise TransientError(f"{self.cloud} answered HTTP {status} while {what} "
                                         f"({detail}).")
                if failures > len(self.retry_delays):
                    raise TransientError(
                        f"{self.cloud}'s API failed while {what} (HTTP {status}: {detail}) "
                        f"{failures} times; try again in a minute.")
                self._sleep(self.retry_delays[failures - 1])
                continue
            return self._answer(what, resp)

    def _problem(self, resp: Any) -> tuple[Any, str]:
        """The answer's JSON body (None when it has none) and its detail, redacted."""
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            body = None
        return body, self.redact(self._detail(body, resp.text if body is None else ""))

    def _not_json(self, what: str, status: int) -> TransientError:
        return TransientError(f"{self.cloud}'s API answered {what} with something that is not "
                              f"JSON (HTTP {status}); try again.")
