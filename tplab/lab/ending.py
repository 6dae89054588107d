"""The end of a pod: send the end call, ask until the provider shows it gone, within one bound,
saying what it does while it does it.

Why one loop, apart: the lab's teardown, `tplab terminate`, `tplab status` and the dashboard's
leftover sweep all end pods, and the cloud is least cooperative exactly then (500 pages, hung
calls, bursts of 429, a destroy accepted and never done). Each wait here has a ceiling and the
whole end has a bound:

* the end call is made once per try (``Provider.end_once``: no retry inside it); a refusal (a
  429, a 5xx, an answer that says it failed) is counted with the provider's own words, never
  taken for accepted; the next try waits at least what the provider asked (a 429's
  ``retry_after_s``: Vast's pacer's hold, at most 12 s after a burst; RunPod's Retry-After);
* between tries and polls the wait grows from ``POLL_FIRST_S`` by ``POLL_GROWTH`` to at most
  ``POLL_CEILING_S``; once an end call was accepted it is sent again every ``RESEND_EVERY``
  polls while the pod stays (a lost or ignored request);
* every call runs in a thread of its own and is awaited at most until the bound (a hung API
  cannot hold the end past it: the call is left behind, its thread a daemon);
* the whole end is bounded by ``bound_s`` (``END_BOUND_S``, 240 s, unless told: `tplab
  terminate --timeout`, the lab's ``end_bound_s``);
* every ``SAY_EVERY_S`` (5 s) one line says what the end is doing and how long it will still
  try; at the bound, one sentence says what is known (the refused calls and the provider's
  words), the pod's id and the command that tries again (``EndReport.sentence``).

"Gone" is the provider's answer only (``GoneProof.gone``: no record, or one whose state is
gone, and not listed); a refused key ends the loop at once (never gone). The pod's own watchdog
stays the backstop for whatever the end could not do. Sync providers run in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable, TypeVar

from tplab.cloud.base import AuthError, GoneProof, Provider, RateLimitedError
from tplab.keys.redact import one_line

#: the whole end's bound, unless told otherwise
END_BOUND_S = 240.0
#: a line to the user at least this often while an end lasts; with ``announce``, the first
#: (what it will do, for how long) after this, unless the end is over by then
SAY_EVERY_S, ANNOUNCE_AFTER_S = 5.0, 1.0
#: the wait between polls: the first, its growth, its ceiling
POLL_FIRST_S, POLL_GROWTH, POLL_CEILING_S = 0.2, 1.5, 3.0
#: an accepted end call is sent again every this many polls while the pod stays
RESEND_EVERY = 5
#: the provider's words kept per refusal, and how many distinct ones the sentence quotes
WORDS_LIMIT, WORDS_QUOTED = 160, 2

T = TypeVar("T")


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _no_answer(pod_id: str, why: str) -> GoneProof:
    """A proof that says no answer came about the pod (never gone)."""
    return GoneProof(pod_id=pod_id, checked_at=iso(time.time()) or "", answer={"error": why},
                     listed=True)


@dataclass
class EndReport:
    """What one end did and what is known at its close."""

    pod_id: str
    proof: GoneProof
    bound_s: float
    seconds: float = 0.0
    sent: int = 0                     # end calls sent
    accepted: int = 0                 # ... that the provider accepted
    refused: list[str] = field(default_factory=list)   # the provider's words, per refusal
    polls: int = 0
    key_refused: str = ""             # the refused key's sentence, when that ended it

    @property
    def gone(self) -> bool:
        return self.proof.gone

    def known(self, noun: str = "pod", verb: str = "terminate") -> str:
        """What the end saw, as a clause: the calls refused and accepted, in the provider's
        words, and its last answer about the pod."""
        parts = []
        if self.refused:
            distinct = list(dict.fromkeys(self.refused))[-WORDS_QUOTED:]
            parts.append(f"{len(self.refused)} of {self.sent} {verb} call(s) refused ("
                         + "; ".join(distinct) + ")")
        if self.accepted:
            parts.append(f"{self.accepted} accepted, yet the provider still shows the {noun}")
        elif not self.refused and self.sent:
            parts.append(f"{self.sent} {verb} call(s) sent, none answered")
        last = self.proof.answer if isinstance(self.proof.answer, dict) else {}
        if "error" in last:
            parts.append(f"the last look at the {noun} got no answer "
                         f"({one_line(last['error'], WORDS_LIMIT)})")
        elif self.proof.listed:
            parts.append(f"the provider still lists the {noun}")
        return "; ".join(parts) or "no answer came"

    def sentence(self, retry: str, noun: str = "pod", verb: str = "terminate") -> str:
        """The one sentence at the bound: what is known, the pod's id, the command that tries
        again, and the backstop."""
        if self.key_refused:
            return (f"{noun} {self.pod_id} was not ended: {self.key_refused.rstrip('.')}; then "
                    f"run `{retry}`; its watchdog on the {noun} still ends it at the wall cap")
        return (f"{noun} {self.pod_id} is NOT proven gone after {self.seconds:.0f} s (the "
                f"bound {self.bound_s:.0f} s): {self.known(noun, verb)}; it may still be billing: "
                f"run `{retry}` to try again, and check the provider's console; its watchdog on "
                f"the {noun} still ends it at the wall cap, or when this client's heartbeat "
                "stops")


async def _bounded(fn: Callable[..., T], *args: Any, timeout_s: float) -> T:
    """``fn(*args)`` in a daemon thread of its own, awaited at most ``timeout_s``: a call that
    hangs is left behind (``asyncio.TimeoutError``), and never holds up the process's exit."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting side
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="tplab-end-call", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), max(0.0, timeout_s))
    finally:
        if not done.done():
            done.cancel()


class PodEnd:
    """Ends one pod within ``bound_s`` (see the module docstring). ``say`` gets the lines for
    the user (at least every ``say_every_s`` while it lasts); ``noun``/``verb`` are the cloud's
    words ("instance"/"destroy" on Vast)."""

    def __init__(self, provider: Provider, pod_id: str, *, bound_s: float = END_BOUND_S,
                 say: Callable[[str], None] | None = None, say_every_s: float = SAY_EVERY_S,
                 noun: str = "pod", verb: str = "terminate",
                 on_accepted: Callable[[], None] | None = None, announce: bool = False) -> None:
        self.provider, self.pod_id = provider, pod_id
        self.on_accepted = on_accepted
        self.announce = announce  # say at once what it will do and for how long
        self.bound_s = bound_s
        self.say = say or (lambda line: None)
        self.say_every_s = say_every_s
        self.noun, self.verb = noun, verb
        self.doing = f"sending the {verb}"
        self._deadline = 0.0
        self.report = EndReport(pod_id, _no_answer(pod_id, "not asked yet"), bound_s)

    def left(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    async def _speak(self) -> None:
        if self.announce:  # what it will do and for how long, unless it is over within a second
            await asyncio.sleep(min(ANNOUNCE_AFTER_S, self.say_every_s))
            self.say(f"ending {self.noun} {self.pod_id}: {self.verb} calls and looks until the "
                     f"provider shows it gone, for {self.bound_s:.0f} s at most (a line every "
                     f"{self.say_every_s:.0f} s while it lasts)")
        while True:
            await asyncio.sleep(self.say_every_s)
            self.say(f"ending {self.noun} {self.pod_id}: {self.doing}; "
                     f"{self._tally()}trying {self.left():.0f} s more")

    def _tally(self) -> str:
        r = self.report
        if not r.sent:
            return ""
        said = f"{r.sent} {self.verb} call(s), {len(r.refused)} refused"
        if r.refused:
            said += f" (last: {r.refused[-1]})"
        return said + "; "

    async def _send(self) -> float:
        """One end call; the seconds the provider asked to wait before the next one."""
        r = self.report
        r.sent += 1
        self.doing = f"waiting for the answer to {self.verb} call {r.sent}"
        try:
            await _bounded(self.provider.end_once, self.pod_id, timeout_s=self.left())
        except AuthError:
            raise
        except TimeoutError:
            r.refused.append("no answer before the bound")
            return 0.0
        except Exception as exc:  # noqa: BLE001 - a refusal, in the provider's words
            r.refused.append(one_line(exc, WORDS_LIMIT) or type(exc).__name__)
            return exc.retry_after_s if isinstance(exc, RateLimitedError) else 0.0
        r.accepted += 1
        if r.accepted == 1 and self.on_accepted is not None:
            self.on_accepted()
        return 0.0

    async def _look(self) -> GoneProof:
        r = self.report
        r.polls += 1
        self.doing = (f"asking whether the provider shows it gone (look {r.polls}"
                      + (f", after {r.accepted} accepted {self.verb} call(s))" if r.accepted
                         else ")"))
        try:
            return await _bounded(self.provider.verify_gone, self.pod_id,
                                  timeout_s=self.left())
        except AuthError:
            raise
        except TimeoutError:
            return _no_answer(self.pod_id, "no answer before the bound")
        except Exception as exc:  # noqa: BLE001 - one more look, not the end
            return _no_answer(self.pod_id, one_line(exc, WORDS_LIMIT) or type(exc).__name__)

    async def run(self) -> EndReport:
        r = self.report
        started = time.monotonic()
        self._deadline = started + self.bound_s
        speaker = asyncio.create_task(self._speak())
        delay, not_before, polls_since = POLL_FIRST_S, started, RESEND_EVERY
        try:
            while True:
                now = time.monotonic()
                due = not r.accepted or polls_since >= RESEND_EVERY
                if due and now >= not_before:
                    polls_since = 0
                    not_before = now + await self._send()
                if self.left() <= 0:
                    break
                proof = await self._look()
                if "error" not in proof.answer or r.proof.answer.get("error"):
                    r.proof = proof  # keep the last real answer over a later failed look
                polls_since += 1
                if proof.gone:
                    break
                if self.left() <= 0:
                    break
                self.doing = (f"waiting {delay:.1f} s before the next look"
                              + (f" (the provider asked for {not_before - time.monotonic():.0f}"
                                 " s before the next call)"
                                 if not_before > time.monotonic() + delay else ""))
                await asyncio.sleep(min(delay, self.left()))
                delay = min(delay * POLL_GROWTH, POLL_CEILING_S)
        except AuthError as exc:  # the key cannot see it: no answer is coming, and not gone
            r.key_refused = one_line(exc)
            r.proof = _no_answer(self.pod_id, r.key_refused)
        finally:
            speaker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await speaker
            r.seconds = time.monotonic() - started
        return r


def cloud_words(provider: Provider) -> tuple[str, str]:
    """The cloud's noun and verb for an end ("instance", "destroy" on Vast)."""
    words = getattr(provider, "words", None)
    return getattr(words, "noun", "pod"), getattr(words, "verb", "terminate")


async def end_pod_within(provider: Provider, pod_id: str, bound_s: float = END_BOUND_S,
                         say: Callable[[str], None] | None = None,
                         say_every_s: float = SAY_EVERY_S,
                         on_accepted: Callable[[], None] | None = None,
                         announce: bool = False) -> EndReport:
    """End ``pod_id`` on ``provider`` within ``bound_s`` (``PodEnd``), in the cloud's words."""
    noun, verb = cloud_words(provider)
    return await PodEnd(provider, pod_id, bound_s=bound_s, say=say, say_every_s=say_every_s,
                        noun=noun, verb=verb, on_accepted=on_accepted,
                        announce=announce).run()
