"""The in-pod watchdog: the pod terminates itself when its client has gone away.

Why: tplab's orchestrator terminates the pod on every exit path it controls, but a laptop that
crashes, sleeps or loses its network controls nothing, and a forgotten 2-GPU pod burns money all
day. So a small process started beside the job (``setsid nohup python -m tplab.job.watchdog ... &``)
watches two things and, when either trips, terminates *its own* pod with the pod-scoped key its
provider puts in every pod (where, and how to use it: ``--self-end``, the provider's description):

* the client's heartbeat: the orchestrator rewrites a heartbeat file over SSH; its mtime (set by
  the pod's own clock, so laptop clock skew does not matter) is the client's last sign of life.
  Older than ``--stale-after`` (default 10 min) means the client is gone. A missing heartbeat
  counts from the watchdog's start.
* the hard wall-clock cap (default 2 h, the lab sheet's limit), counted on the pod's own clock: from
  the boot guard's start (``--guard-file``, written when the container started) and, whatever
  that says, no later than ``--wall-cap-left`` seconds after the watchdog's own start (the
  client's count of what is left, an elapsed time: no laptop clock is compared with the pod's).

It cannot die quietly: every look and every terminate attempt catches whatever goes wrong, logs
it and carries on; the launch line runs it under a supervisor loop that restarts it when it
exits for any reason but an orderly end (it then writes ``<log>.done``).

Terminating is ``tplab.job.self_terminate``, following the provider's description (each way in
order: an HTTP call with the pod's key, a CLI when present); a round in which every way failed is
retried with capped exponential backoff until one is accepted (the pod, and this process with it,
then goes away). Every decision — heartbeat age, cap, each attempt and its answer — is a line in
``--log``; the key is never written (any echo of it is redacted), and it is read only from the env
file the description names or the environment, never from the command line where ``ps`` would
show it.

Orderly end: when ``--stop-file`` appears the watchdog exits *without* terminating. The
orchestrator terminates (and verifies) the pod itself on every path it controls; the watchdog
exists for the disorderly ones.

Standard library only: this file runs on the pod, where only torch and the stdlib are assumed, and
it must keep working even if torch is broken. Time and HTTP are injectable for tests.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from tplab.job.self_terminate import (POD_ID, REDACTED, PodCredentials, Request, Run, SelfEnd,
                                      SelfEndError, SelfTerminator, load_credentials,
                                      subprocess_run, urllib_request)

DEFAULT_STALE_AFTER_S = 600.0
DEFAULT_WALL_CAP_S = 7200.0
DEFAULT_POLL_S = 5.0
#: how long a watchdog waits for the pod's id and key to appear (--credentials-wait), and how
#: often it looks
CREDENTIALS_WAIT_S, CREDENTIALS_POLL_S = 10.0, 0.25


class WatchdogConfigError(ValueError):
    """The watchdog cannot start (a setting or an environment variable is missing or bad)."""


class MissingCredentialsError(WatchdogConfigError):
    """Neither the env file nor the environment holds the pod's id or key (yet)."""


@dataclass(frozen=True)
class WatchdogConfig:
    heartbeat: Path
    log: Path
    pod_id: str
    api_key: str = field(repr=False)
    api_base: str
    self_end: SelfEnd
    stale_after_s: float = DEFAULT_STALE_AFTER_S
    wall_cap_s: float = DEFAULT_WALL_CAP_S
    poll_s: float = DEFAULT_POLL_S
    stop_file: Path | None = None
    started_at: float | None = None     # epoch seconds (pod clock) the wall cap counts from
    wall_cap_left_s: float | None = None  # and at the latest this long after the watchdog starts
    guard_file: Path | None = None      # the boot guard's record of the container's start
    status_every_s: float = 60.0        # how often a "still fine" line is logged
    max_attempts: int = 0               # terminate rounds (every way once); 0 = until accepted
    backoff_s: float = 2.0              # first retry delay, doubled per failure ...
    backoff_max_s: float = 60.0         # ... up to this
    http_timeout_s: float = 30.0
    key_source: str = "environment"     # where the pod's id and key were read (never the key)

    def __post_init__(self) -> None:
        if not POD_ID.match(self.pod_id or ""):
            raise WatchdogConfigError(
                f"The pod id {self.pod_id!r} is not a {self.self_end.provider} pod id (letters, "
                "digits, - and _).")
        if not self.api_key:
            raise WatchdogConfigError(f"The pod's API key is empty; {self.self_end.provider} "
                                      f"sets {self.self_end.key_var}.")
        if not self.api_base.startswith(("http://", "https://")):
            raise WatchdogConfigError(
                f"The API base URL {self.api_base!r} must start with http:// or https://.")
        for name in ("stale_after_s", "wall_cap_s", "poll_s"):
            if not getattr(self, name) > 0:
                raise WatchdogConfigError(f"{name} must be > 0, not {getattr(self, name)!r}.")

    @property
    def url(self) -> str:
        return self.api_base.rstrip("/")


@dataclass(frozen=True)
class Decision:
    """What one look at the heartbeat and the clock concluded."""

    action: str              # "watch" | "terminate" | "stop"
    reason: str
    heartbeat_age_s: float
    elapsed_s: float


class Watchdog:
    """Polls the heartbeat and the clock; terminates the pod once, then exits."""

    def __init__(self, config: WatchdogConfig, *, now: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, request: Request = urllib_request,
                 run: Run = subprocess_run,
                 which: Callable[[str], str | None] | None = None) -> None:
        self.config = config
        self._now = now
        self._sleep = sleep
        self.terminator = SelfTerminator(
            PodCredentials(config.pod_id, config.api_key, config.api_base), config.self_end,
            timeout_s=config.http_timeout_s, request=request, run=run,
            **({"which": which} if which is not None else {}))
        self.started = now()
        self.cap_start = config.started_at if config.started_at is not None else self.started
        guard_start = _guard_started_at(config.guard_file)
        if guard_start is not None:
            self.cap_start = min(self.cap_start, guard_start)
        if config.wall_cap_left_s is not None:  # an elapsed count from the client: no clock skew
            self.cap_start = min(self.cap_start,
                                 self.started - (config.wall_cap_s - config.wall_cap_left_s))
        self._last_beat: float | None = None   # last heartbeat mtime seen
        self._beat_missing_logged = False

    # -- logging -----------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        key = self.config.api_key
        return text.replace(key, REDACTED) if key else text

    def _log_round(self, rnd: int, line: str) -> None:
        self.log(f"terminate round {rnd}: {line}")

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._now()))
        line = f"{stamp} watchdog[{os.getpid()}] pod={self.config.pod_id}: {self.redact(message)}\n"
        try:
            self.config.log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.config.log, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
        except OSError:
            pass  # a full disk must not stop the watchdog: it still terminates

    def mark_done(self) -> None:
        """An orderly end (terminated, or the stop file): the supervisor must not restart it."""
        try:
            Path(f"{self.config.log}.done").write_text(f"{self._now():.3f}\n")
        except OSError:
            pass

    # -- deciding ----------------------------------------------------------------------------
    def heartbeat_age(self, now: float) -> float:
        try:
            mtime = os.stat(self.config.heartbeat).st_mtime
        except FileNotFoundError:
            if not self._beat_missing_logged:
                self._beat_missing_logged = True
                self.log(f"heartbeat file {self.config.heartbeat} is missing; its age counts from "
                         f"{'the last one seen' if self._last_beat else 'the watchdog start'}")
            mtime = self._last_beat if self._last_beat is not None else self.started
        else:
            if self._beat_missing_logged:
                self._beat_missing_logged = False
                self.log(f"heartbeat file {self.config.heartbeat} is back")
            self._last_beat = mtime if self._last_beat is None else max(mtime, self._last_beat)
            mtime = self._last_beat
        return max(0.0, now - mtime)

    def decide(self) -> Decision:
        cfg = self.config
        now = self._now()
        elapsed = max(0.0, now - self.cap_start)
        if cfg.stop_file is not None and cfg.stop_file.exists():
            return Decision("stop", f"stop file {cfg.stop_file} appeared (orderly end)", 0.0, elapsed)
        age = self.heartbeat_age(now)
        if elapsed >= cfg.wall_cap_s:
            return Decision("terminate", f"wall-clock cap reached: running {elapsed:.0f}s >= cap "
                            f"{cfg.wall_cap_s:.0f}s (heartbeat age {age:.0f}s)", age, elapsed)
        if age >= cfg.stale_after_s:
            return Decision("terminate", f"client heartbeat stale: age {age:.0f}s >= "
                            f"{cfg.stale_after_s:.0f}s (running {elapsed:.0f}s of cap "
                            f"{cfg.wall_cap_s:.0f}s)", age, elapsed)
        return Decision("watch", f"heartbeat age {age:.0f}s (stale after {cfg.stale_after_s:.0f}s), "
                        f"running {elapsed:.0f}s of cap {cfg.wall_cap_s:.0f}s", age, elapsed)

    # -- terminating -------------------------------------------------------------------------
    def terminate(self) -> bool:
        """Every way of the provider's description per round until one is
        accepted (or max_attempts rounds); logs every attempt and its answer."""
        cfg = self.config
        rnd = 0
        while True:
            rnd += 1

            attempts = self.terminator.terminate(functools.partial(self._log_round, rnd))
            if any(a.ok for a in attempts):
                return True
            if cfg.max_attempts and rnd >= cfg.max_attempts:
                self.log(f"terminate round {rnd}: every way failed; giving up after {rnd} rounds "
                         f"— terminate pod {cfg.pod_id} by hand")
                return False
            delay = min(cfg.backoff_max_s, cfg.backoff_s * 2 ** (rnd - 1))
            self.log(f"terminate round {rnd}: every way failed; retrying in {delay:g}s")
            self._sleep(delay)

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> int:
        """Watch until a trip (terminate; 0 if the API accepted, 1 if it gave up) or a stop file
        (0). Whatever fails inside a look or a terminate round is logged and the loop goes on."""
        cfg = self.config
        self.log(f"started: heartbeat {cfg.heartbeat}, stale after {cfg.stale_after_s:g}s, "
                 f"wall cap {cfg.wall_cap_s:g}s from {_iso(self.cap_start)}, poll {cfg.poll_s:g}s, "
                 f"api {cfg.url}, pod key from {cfg.key_source}"
                 + (f", stop file {cfg.stop_file}" if cfg.stop_file else ""))
        last_status = None
        while True:
            try:
                decision = self.decide()
            except Exception as exc:  # noqa: BLE001 - never die quietly: log, look again
                self.log(f"a look failed ({type(exc).__name__}: {exc}); looking again")
                self._sleep(cfg.poll_s)
                continue
            if decision.action == "stop":
                self.log(f"{decision.reason}; exiting without terminating")
                self.mark_done()
                return 0
            if decision.action == "terminate":
                self.log(f"terminating pod {cfg.pod_id}: {decision.reason}")
                try:
                    ok = self.terminate()
                except Exception as exc:  # noqa: BLE001 - a bug in a round: try again
                    self.log(f"a terminate round failed ({type(exc).__name__}: {exc}); "
                             "trying again")
                    self._sleep(cfg.backoff_s)
                    continue
                if ok:
                    self.log("termination requested; the pod (and this watchdog) should now stop")
                    self.mark_done()
                return 0 if ok else 1
            now = self._now()
            if last_status is None or now - last_status >= cfg.status_every_s:
                self.log(f"ok: {decision.reason}")
                last_status = now
            self._sleep(cfg.poll_s)


def _guard_started_at(path: Path | None) -> float | None:
    """The container's start (pod clock) as the boot guard recorded it, if it did."""
    if path is None:
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("started_at")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


# ------------------------------------------------------------------------------------------ CLI

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tplab.job.watchdog",
        description="Terminate this pod through the provider's API when the client's heartbeat "
                    "is stale or the wall-clock cap has passed. Reads the pod's id and key from "
                    "the env file or the variables the provider's description (--self-end) "
                    "names.")
    p.add_argument("--heartbeat", required=True, type=Path, help="file the client keeps touching")
    p.add_argument("--log", required=True, type=Path, help="where decisions are logged")
    p.add_argument("--stale-after", type=float, default=DEFAULT_STALE_AFTER_S, metavar="S",
                   help="heartbeat older than this terminates the pod (default 600)")
    p.add_argument("--wall-cap", type=float, default=DEFAULT_WALL_CAP_S, metavar="S",
                   help="terminate after this many seconds in any case (default 7200)")
    p.add_argument("--started-at", type=float, metavar="EPOCH",
                   help="count the wall cap from this time on the pod's clock (default: now)")
    p.add_argument("--wall-cap-left", type=float, metavar="S",
                   help="terminate at the latest this many seconds after starting (the client's "
                        "count of what is left of the wall cap)")
    p.add_argument("--guard-file", type=Path, metavar="PATH",
                   help="the boot guard's record of the container's start (the wall cap counts "
                        "from it when it exists)")
    p.add_argument("--poll", type=float, default=DEFAULT_POLL_S, metavar="S",
                   help="seconds between looks (default 5)")
    p.add_argument("--stop-file", type=Path, metavar="PATH",
                   help="exit without terminating when this file appears (orderly end)")
    p.add_argument("--pid-file", type=Path, metavar="PATH", help="write this process's pid here")
    p.add_argument("--self-end", metavar="B64",
                   help="how this pod ends itself: the provider's description, base64 JSON "
                        "(required)")
    p.add_argument("--pod-id", help="default: the id variable the description names")
    p.add_argument("--max-attempts", type=int, default=0, metavar="N",
                   help="terminate rounds (every way once) before giving up (default 0: until "
                        "one works)")
    p.add_argument("--credentials-wait", type=float, default=CREDENTIALS_WAIT_S, metavar="S",
                   help="how long to wait for the pod's id and key to appear in the env file or "
                        f"the environment before giving up (default {CREDENTIALS_WAIT_S:g})")
    p.add_argument("--backoff", type=float, default=2.0, metavar="S",
                   help="first retry delay, doubled per failure up to 60 s (default 2)")
    return p


def config_from_args(args: argparse.Namespace, env: dict[str, str] | None = None) -> WatchdogConfig:
    env = dict(os.environ if env is None else env)
    if not args.self_end:
        raise WatchdogConfigError("--self-end is missing: the watchdog needs the provider's "
                                  "description of how this pod ends itself.")
    try:
        spec = SelfEnd.from_arg(args.self_end)
    except SelfEndError as exc:
        raise WatchdogConfigError(f"{exc}.") from None
    creds = load_credentials(spec, env)
    pod_id = args.pod_id or (creds.pod_id if creds else env.get(spec.id_var, ""))
    where = f" or {spec.env_file}" if spec.env_file else ""
    if not pod_id:
        raise MissingCredentialsError(f"{spec.id_var} is not set (in the environment{where}); "
                                      f"run the watchdog on the pod ({spec.provider} sets it) "
                                      "or pass --pod-id.")
    key = creds.api_key if creds else env.get(spec.key_var, "")
    if not key:
        raise MissingCredentialsError(f"{spec.key_var} is not set (in the environment{where}); "
                                      f"run the watchdog on the pod, where {spec.provider} sets "
                                      "a pod-scoped key.")
    base = creds.api_base if creds else ((env.get(spec.base_var) if spec.base_var else None)
                                         or spec.api_base)
    return WatchdogConfig(
        heartbeat=args.heartbeat, log=args.log, pod_id=pod_id, api_key=key, api_base=base,
        self_end=spec,
        stale_after_s=args.stale_after, wall_cap_s=args.wall_cap, poll_s=args.poll,
        stop_file=args.stop_file, started_at=args.started_at,
        wall_cap_left_s=args.wall_cap_left, guard_file=args.guard_file,
        max_attempts=max(0, args.max_attempts), backoff_s=max(0.0, args.backoff),
        key_source=creds.source if creds else "environment")


def _config_when_ready(args: argparse.Namespace) -> WatchdogConfig:
    """The configuration, once the pod's id and key can be read: a watchdog started over SSH
    may come before the pod's start script has written them to the env file the description
    names (an SSH session has none of the container's variables), so it waits for them, up to
    ``--credentials-wait``."""
    deadline = time.monotonic() + max(0.0, args.credentials_wait)
    while True:
        try:
            return config_from_args(args)
        except MissingCredentialsError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(CREDENTIALS_POLL_S)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)   # outlive the SSH session that started it
    try:
        config = _config_when_ready(args)
    except WatchdogConfigError as exc:
        print(f"watchdog: {exc}", file=sys.stderr)
        try:
            args.log.parent.mkdir(parents=True, exist_ok=True)
            with open(args.log, "a", encoding="utf-8") as fh:
                fh.write(f"{_iso(time.time())} watchdog[{os.getpid()}]: not started: {exc}\n")
        except OSError:
            pass
        return 2
    dog = Watchdog(config)

    def _on_term(signum: int, _frame: object) -> None:
        dog.log(f"stopped by signal {signal.Signals(signum).name} without terminating the pod")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _on_term)
    if args.pid_file:
        args.pid_file.write_text(f"{os.getpid()}\n")
    return dog.run()


if __name__ == "__main__":
    sys.exit(main())
