"""The slice of the orchestrator's API the dashboard calls, and how it builds a Lab.

The dashboard holds no lab logic: it subscribes to the Lab's events, awaits ``run()``, and asks
for termination. Typing against this Protocol (not ``tplab.lab.Lab``) keeps ``tplab.lab`` and
everything it imports (asyncssh, the provider, maybe runpod) off the first-paint path: the real
Lab is imported inside a worker, after the first frame is on screen.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable, Protocol, runtime_checkable

from tplab.events import Event


@runtime_checkable
class LabPort(Protocol):
    def subscribe(self) -> AsyncIterator[Event]:
        """Every event from this call on, until the lab ends."""

    async def run(self) -> Any:
        """Run the lab to its end; returns a LabOutcome (status, reason, out_dir, pod_id,
        verified_gone, exit_code)."""

    def request_terminate(self, reason: str = "user") -> None:
        """Ask the lab to terminate its pod now (idempotent)."""


LabFactory = Callable[[], LabPort]


def real_lab_factory(config: Any) -> LabFactory:
    """A factory that builds ``tplab.lab.Lab(config)`` when called (in a worker thread)."""

    def preload() -> None:
        import tplab.lab  # noqa: F401 - run in a thread: the import is the slow part

    def build() -> LabPort:
        from tplab.lab import Lab  # deferred: not on the first-paint path

        return Lab(config)

    build.preload = preload  # type: ignore[attr-defined]
    return build
