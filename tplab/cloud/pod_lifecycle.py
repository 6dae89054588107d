"""What every cloud does alike once a pod exists: wait for SSH, give up, end it, prove it gone, settle it.

Why one place: the rules are tplab's, not a cloud's. A pod is ready only after a real SSH
handshake (each probe bounded, any probe failure means "not yet", all within the caller's
timeout); a pod that will not come up is ended before ``NotReadyError`` is raised; an end is
retried over ``terminate_delays`` (an answer that it is already gone ends the loop) and a final
failure is one sentence saying what to do; ``verify_gone`` asks the pod's own record and the
list, never the end call's answer alone; the cost is the cloud's bill cross-checked by
``tplab.cloud.spend``.

Each provider subclasses ``PodLifecycle`` and gives its own words (``Words``: RunPod says "pod"
and "terminate", Vast "instance" and "destroy") and the few things that are its own: the one
end call, why a state never reaches SSH, when and how long to probe, the record of a pod, the
bill. Methods are synchronous, like the providers'.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from tplab.cloud import spend
from tplab.cloud.base import (GONE_STATES, AuthError, CostReport, GoneProof, NotReadyError,
                              PodInfo, ProviderError, SshEndpoint)
from tplab.keys.redact import error_text


@dataclass(frozen=True)
class Words:
    """A cloud's words in the sentences below."""

    noun: str       # "pod" / "instance"
    verb: str       # "terminate" / "destroy"
    gerund: str     # "terminating" / "destroying"
    done: str       # "terminated" / "destroyed"
    still: str      # what a pod that could not be ended may still be doing: "billing"
    by_hand: str    # how to end it by hand; ``{pod_id}`` is filled in
    bill: str       # the bill's name when it cannot be read: "RunPod's billing"
    billed_by: str  # the bill's name in the cost notes: "RunPod's billing record"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class PodLifecycle:
    """See the module docstring. A subclass sets ``words`` and the attributes below and defines
    the methods that raise NotImplementedError here."""

    words: ClassVar[Words]
    poll_interval_s: float
    ssh_probe_timeout_s: float
    client_key: Any
    terminate_delays: tuple[float, ...]
    _sleep: Callable[[float], None]

    # ---- the cloud's own -----------------------------------------------------------------
    def status(self, pod_id: str) -> PodInfo:
        raise NotImplementedError

    def list_pods(self) -> list[PodInfo]:
        raise NotImplementedError

    def balance(self) -> float | None:
        raise NotImplementedError

    def _delete(self, pod_id: str, once: bool = False) -> None:
        """One end call; returns when the cloud took it or says the pod is already gone, raises
        (in the cloud's own words) when it refused it. ``once``: no retry inside the call."""
        raise NotImplementedError

    def _why_dead(self, info: PodInfo) -> str | None:
        """Why ``info``'s state will never reach SSH (None: it still may)."""
        raise NotImplementedError

    def _probe_timeout(self, info: PodInfo, remaining: float) -> float | None:
        """How long to probe ``info``'s SSH now, ``remaining`` s before the deadline (None: not now)."""
        raise NotImplementedError

    def _record(self, pod_id: str) -> dict[str, Any] | None:
        """The pod's own record as the cloud answers it now (None: gone)."""
        raise NotImplementedError

    def _billed_usd(self, pod_id: str, started_at: float, ended_at: float) -> float | None:
        """The cloud's bill for the pod (None: no record of it yet)."""
        raise NotImplementedError

    # ---- readiness -----------------------------------------------------------------------
    def wait_ready(self, pod_id: str, timeout_s: float, client_key: Any = None) -> PodInfo:
        key = client_key if client_key is not None else self.client_key
        noun = self.words.noun
        deadline = time.monotonic() + timeout_s
        last = f"the {noun} was never seen"
        while True:
            try:
                info: PodInfo | None = self.status(pod_id)
            except AuthError:
                raise
            except ProviderError as exc:
                info, last = None, f"the API failed ({error_text(exc)})"
            if info is not None:
                why = self._why_dead(info)
                if why is not None:
                    self._give_up(pod_id, f"it went {info.state} before SSH came up ({why})")
                if info.ssh is None:
                    last = f"the {noun} is {info.state} and 22/tcp has no public port yet"
                else:
                    probe_s = self._probe_timeout(info, deadline - time.monotonic())
                    if probe_s is not None:
                        try:
                            host_key = self._probe(info.ssh, probe_s, key)
                        except Exception as exc:  # noqa: BLE001 - any failure means not yet
                            last = (f"SSH on {info.ssh.host}:{info.ssh.port} did not complete a "
                                    f"handshake ({type(exc).__name__})")
                        else:
                            ssh = SshEndpoint(info.ssh.host, info.ssh.port, info.ssh.user, host_key)
                            return dataclasses.replace(info, ssh=ssh)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._give_up(pod_id, f"it was not reachable over SSH within {timeout_s:.0f} s "
                                      f"({last})")
            self._sleep(min(self.poll_interval_s, max(remaining, 0.05)))

    def _probe(self, ssh: SshEndpoint, timeout_s: float, key: Any) -> str:
        from tplab.cloud.ssh_probe import probe_host_key

        return probe_host_key(ssh.host, ssh.port, timeout_s, client_key=key, username=ssh.user)

    def _give_up(self, pod_id: str, why: str) -> None:
        w = self.words
        try:
            self.terminate(pod_id)
        except ProviderError as exc:
            raise NotReadyError(
                f"{w.noun.capitalize()} {pod_id} was not ready: {why}; {w.gerund} it failed too "
                f"({error_text(exc)}) — {w.by_hand.format(pod_id=pod_id)}.") from None
        raise NotReadyError(f"{w.noun.capitalize()} {pod_id} was not ready: {why}; it has been "
                            f"{w.done}.")

    # ---- terminate -----------------------------------------------------------------------
    def terminate(self, pod_id: str) -> None:
        last: ProviderError | None = None
        for attempt in range(len(self.terminate_delays) + 1):
            try:
                self._delete(pod_id)
                return
            except AuthError:
                raise
            except ProviderError as exc:
                last = exc
                try:
                    if self.status(pod_id).state in GONE_STATES:
                        return
                except AuthError:
                    raise
                except ProviderError:
                    pass
            if attempt < len(self.terminate_delays):
                self._sleep(self.terminate_delays[attempt])
        w = self.words
        raise ProviderError(
            f"Could not {w.verb} {w.noun} {pod_id} after {len(self.terminate_delays) + 1} "
            f"attempts ({error_text(last) if last else 'unknown error'}); it may still be "
            f"{w.still}: {w.by_hand.format(pod_id=pod_id)}.")

    def end_once(self, pod_id: str) -> None:
        """One end call, made once (no retry, no wait for a 429 or a 5xx): returns when the
        cloud accepted it or says the pod is already gone; a refusal (a 429, a 5xx, an answer
        that says it failed) raises ``ProviderError`` in the cloud's words. For the end of a
        pod, which keeps its own schedule and bound (``tplab.lab.ending``)."""
        self._delete(pod_id, once=True)

    def verify_gone(self, pod_id: str) -> GoneProof:
        checked = utc_now()
        answer: dict[str, Any] = {"pod": self._record(pod_id)}
        listed = any(p.id == pod_id and p.state not in GONE_STATES for p in self.list_pods())
        return GoneProof(pod_id=pod_id, checked_at=checked, answer=answer, listed=listed)

    # ---- cost ----------------------------------------------------------------------------
    def actual_cost(self, pod_id: str, balance_before: float | None, started_at: float,
                    ended_at: float, usd_per_hr: float) -> CostReport:
        notes: list[str] = []
        try:
            billed = self._billed_usd(pod_id, started_at, ended_at)
        except AuthError:
            raise
        except ProviderError as exc:
            billed = None
            notes.append(f"{self.words.bill} could not be read ({error_text(exc)})")
        delta: float | None = None
        if balance_before is not None:
            try:
                after = self.balance()
            except ProviderError as exc:
                after = None
                notes.append(f"balance unreadable after the lab ({error_text(exc)})")
            if after is not None:
                delta = round(balance_before - after, 6)
        return spend.settle(pod_id, usd_per_hr, max(0.0, ended_at - started_at), billed, delta,
                            notes, billed_by=self.words.billed_by, unit=self.words.noun)
