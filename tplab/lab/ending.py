"""The two calls every way out of a lab makes: terminate the pod, and verify with the provider
that it is gone.

Why apart: the lab's teardown, `tplab terminate`, and the dashboard's leftover sweep all end
pods, and each must keep going through provider errors (an API error while verifying is one more
poll, not the end; a lost terminate request is sent again). A refused key is the one thing
that does not pass with time: it ends the retries and the polls at once, never read as gone.
Sync providers run in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime, UTC
from typing import Callable

from tplab.cloud.base import AuthError, GoneProof, Provider
from tplab.keys.redact import one_line


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


async def verify_gone(provider: Provider, pod_id: str, timeout_s: float = 60.0,
                      resend_every: int = 5) -> GoneProof:
    """Poll the provider until it shows the pod gone, to the deadline whatever it answers in
    between (an API error is one more poll, not the end); every ``resend_every`` polls the
    terminate is sent again (a lost or ignored request). Returns the last proof; when not one
    answer came back, a proof that says so (``answer["error"]``, not gone)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.2
    polls = 0
    last: GoneProof | None = None
    error = "no answer"
    while True:
        polls += 1
        try:
            last = await asyncio.to_thread(provider.verify_gone, pod_id)
            if last.gone:
                return last
        except AuthError as exc:  # the key cannot see it: no answer is coming, and not gone
            return GoneProof(pod_id=pod_id, checked_at=iso(time.time()) or "",
                             answer={"error": one_line(exc)}, listed=True)
        except Exception as exc:  # noqa: BLE001 - any failure is one more poll
            error = one_line(exc) or type(exc).__name__
        if time.monotonic() > deadline:
            return last or GoneProof(pod_id=pod_id, checked_at=iso(time.time()) or "",
                                     answer={"error": error}, listed=True)
        if polls % resend_every == 0:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(provider.terminate, pod_id)
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, 3.0)


async def terminate_with_retries(provider: Provider, pod_id: str, attempts: int = 5,
                                 on_failure: Callable[[int, BaseException], None] | None = None,
                                 raise_auth: bool = False) -> bool:
    """Send terminate until the provider accepts it (``attempts`` tries, whatever goes wrong);
    False when every try failed (verify still runs: it re-sends). A refused key ends the tries
    at once (False, or the ``AuthError`` itself with ``raise_auth``)."""
    for attempt in range(attempts):
        try:
            await asyncio.to_thread(provider.terminate, pod_id)
            return True
        except AuthError as exc:
            if on_failure is not None:
                on_failure(attempt + 1, exc)
            if raise_auth:
                raise
            return False
        except Exception as exc:  # noqa: BLE001 - keep trying whatever went wrong
            if on_failure is not None:
                on_failure(attempt + 1, exc)
            await asyncio.sleep(min(1 + attempt, 4))
    return False
