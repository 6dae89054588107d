"""The slice of the orchestrator's API the dashboard calls, and how it builds a Lab.

The dashboard holds no lab logic: it subscribes to the Lab's events, awaits ``run()``, and asks
for termination. Typing against this Protocol (not ``tplab.lab.orchestrator.Lab``) keeps the orchestrator and
everything it imports (asyncssh, the provider, maybe its SDK) off the first-paint path: the real
Lab is imported inside a worker, after the first frame is on screen.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable, Protocol, runtime_checkable

from tplab.records.events import Event


@runtime_checkable
class LabPort(Protocol):
    def subscribe(self) -> AsyncIterator[Event]:
        """Every event from this call on, until the lab ends."""

    async def run(self) -> Any:
        """Run the lab to its end; returns a LabOutcome (status, reason, out_dir, pod_id,
        verified_gone, exit_code)."""

    def request_terminate(self, reason: str = "user") -> None:
        """Ask the lab to terminate its pod now (idempotent)."""

    # Optional, called when present (getattr): ``detach()`` — leave the pod running and stop
    # the client side (quit's "leave it running"); ``add_artifact(name)`` — list a file saved
    # in the out dir after the lab ended (proof-terminated.svg) in manifest.json; ``now()`` —
    # the lab's own clock (a replay's); ``speed`` — a replay's speed (0: as fast as it draws).
    # A LabFactory may carry ``preload()`` and ``refusal() -> str | None`` (run in a thread
    # before the lab is built; a refusal means nothing is built and nothing is created).


LabFactory = Callable[[], LabPort]


class LazyConfig:
    """``config_from_args(args)`` made on first use: building a LabConfig imports ``tplab.lab``
    (asyncssh and friends), which the first paint must not wait for."""

    def __init__(self, args: Any) -> None:
        self.args = args
        self._config: Any = None

    def get(self) -> Any:
        if self._config is None:
            from tplab.lab.options import config_from_args

            self._config = config_from_args(self.args)
        return self._config


class RealLab:
    """A factory that builds ``tplab.lab.orchestrator.Lab(config)`` when called; ``config`` may
    be a ``LazyConfig``. ``preload`` (run in a worker thread first) does the slow imports;
    ``refusal`` says why the lab cannot start (no key, a missing file, the budget) before
    anything is created, or None when it may."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def resolve(self) -> Any:
        return self.config.get() if isinstance(self.config, LazyConfig) else self.config

    def preload(self) -> None:
        import tplab.lab.orchestrator  # noqa: F401 - in a thread: the import is the slow part

        self.resolve()

    def refusal(self) -> str | None:
        from tplab.faces.startcheck import refusal as check

        return check(self.resolve())

    def __call__(self) -> LabPort:
        from tplab.lab.orchestrator import Lab  # deferred: not on the first-paint path

        return Lab(self.resolve())


def real_lab_factory(config: Any) -> LabFactory:
    """The factory ``tplab-tui`` starts its lab with (see ``RealLab``)."""
    return RealLab(config)


def real_sweep_factory(config: Any) -> Callable[[], Any]:
    """A factory for the Lab that TERMINATE uses when no lab is running: one with the
    provider ``tplab status``/``terminate`` use, so ``find_leftover_pods`` sees this account's
    tplab pods. None as provider in ``--mock`` without a running mock (its pods died with it).
    Called in a worker thread (the provider may import its SDK)."""

    def build() -> Any:
        from tplab.lab.orchestrator import Lab
        from tplab.lab.providers import cli_provider

        cfg = config.get() if isinstance(config, LazyConfig) else config
        return Lab(cfg, provider=cli_provider(bool(getattr(cfg, "mock", False)),
                                              getattr(cfg, "api_url", None),
                                              getattr(cfg, "provider", None)))

    return build
