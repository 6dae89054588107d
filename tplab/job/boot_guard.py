"""The boot guard: the pod ends itself unless its client shows up in time, from its first second.

Why: the watchdog beside the job (``tplab.job.watchdog``) only starts after boot, connect and
upload; a laptop that crashes, sleeps or loses its terminal before that would leave a pod
billing with nothing on it to end it. So the create call itself starts this guard: the
provider carries ``tplab.lab.guard_payload.boot_step()`` in its create (RunPod: the container command, before it hands
over to the image's start script; Vast: ``onstart``), which unpacks it and starts it in the
background. It

* terminates the pod when the client's first heartbeat (the file the lab's launch writes and
  the client then keeps rewriting) has not appeared within ``--first-heartbeat`` seconds of the
  container's start: the client never showed up;
* enforces the wall-clock cap from the container's start (seconds elapsed on the pod's own
  clock, so the laptop's clock does not matter), and records that start in ``--started-file``
  for the watchdog to count its cap from too;
* once the client has shown up, stays as a second line behind the watchdog: a heartbeat stale
  for ``--stale-after`` plus a margin ends the pod even if the watchdog cannot.

Termination goes through ``tplab.job.self_terminate``, following the provider's description it
is given (``--self-end``: which URLs, which key variable, which id variable), retried with
capped backoff whatever fails; every decision and answer goes to ``--log``; the key never does.

Before the pod has any of tplab's code, this module travels inside the create call: the client's
``tplab.lab.guard_payload`` zips it with ``self_terminate`` and the word's format
(``tplab.records.self_end_word``) and says where to unpack it and how to start it.
What the guard cannot cover: the minutes before the container starts (the cloud pulling the
image); from the container's start its bound is ``--first-heartbeat``.

Standard library only (pod side, before torch or anything else is there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

# the same import in the lab's package and in the zip the create call carries (same layout)
from tplab.job.self_terminate import SelfEnd, SelfEndError, SelfTerminator, load_credentials

#: how much staler than the watchdog's bound the heartbeat must be before the guard steps in
BACKUP_MARGIN_S = 60.0


@dataclass(frozen=True)
class GuardConfig:
    heartbeat: Path
    log: Path
    started_file: Path
    first_heartbeat_s: float
    wall_cap_s: float
    stale_after_s: float
    poll_s: float = 2.0
    backoff_max_s: float = 30.0


class BootGuard:
    """The guard's loop; the clock, the sleep and the terminator are injectable for tests."""

    def __init__(self, config: GuardConfig, *, now: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 terminate: Callable[[Callable[[str], None]], bool] | None = None,
                 self_end: SelfEnd | None = None) -> None:
        self.config = config
        self._now, self._mono, self._sleep = now, mono, sleep
        self._terminate = terminate or (lambda log: _terminate_this_pod(self_end, log))
        self.start_mono = mono()
        self.start_epoch = now()
        self.client_seen = False

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._now()))
        try:
            self.config.log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.config.log, "a", encoding="utf-8") as fh:
                fh.write(f"{stamp} boot-guard[{os.getpid()}]: {message}\n")
        except OSError:
            pass  # a full disk must not stop the guard

    def elapsed(self) -> float:
        return self._mono() - self.start_mono

    def heartbeat_age(self) -> float | None:
        """Seconds since the client's last heartbeat (pod clock), None before the first."""
        try:
            mtime = os.stat(self.config.heartbeat).st_mtime
        except OSError:
            return None
        return max(0.0, self._now() - mtime)

    def decide(self) -> str | None:
        """Why to terminate now, or None to keep watching."""
        cfg = self.config
        elapsed = self.elapsed()
        if elapsed >= cfg.wall_cap_s:
            return (f"wall-clock cap reached: {elapsed:.0f} s since the container started >= "
                    f"{cfg.wall_cap_s:.0f} s")
        age = self.heartbeat_age()
        if age is not None and not self.client_seen:
            self.client_seen = True
            self.log(f"the client showed up after {elapsed:.0f} s; the watchdog takes over, the "
                     f"guard stays behind it (heartbeat stale after "
                     f"{cfg.stale_after_s + BACKUP_MARGIN_S:.0f} s, wall cap {cfg.wall_cap_s:.0f} s)")
        if not self.client_seen:
            if elapsed >= cfg.first_heartbeat_s:
                return (f"the client never showed up: no heartbeat {elapsed:.0f} s after the "
                        f"container started (bound {cfg.first_heartbeat_s:.0f} s)")
            return None
        if age is not None and age >= cfg.stale_after_s + BACKUP_MARGIN_S:
            return (f"the client's heartbeat is {age:.0f} s old and the watchdog has not ended "
                    f"the pod (backup bound {cfg.stale_after_s + BACKUP_MARGIN_S:.0f} s)")
        return None

    def run(self) -> int:
        cfg = self.config
        try:
            cfg.started_file.parent.mkdir(parents=True, exist_ok=True)
            cfg.started_file.write_text(json.dumps({"started_at": self.start_epoch,
                                                    "pid": os.getpid()}) + "\n")
        except OSError as exc:
            self.log(f"could not write {cfg.started_file} ({exc}); the watchdog counts its cap "
                     "from its own start")
        self.log(f"started: first heartbeat within {cfg.first_heartbeat_s:.0f} s, wall cap "
                 f"{cfg.wall_cap_s:.0f} s, heartbeat {cfg.heartbeat}")
        while True:
            try:
                why = self.decide()
            except Exception as exc:  # noqa: BLE001 - the guard must not die quietly
                self.log(f"check failed ({type(exc).__name__}: {exc}); checking again")
                why = None
            if why is not None:
                self.log(f"terminating this pod: {why}")
                delay = 2.0
                while True:
                    try:
                        if self._terminate(self.log):
                            self.log("termination accepted; the pod (and this guard) should stop")
                            return 0
                    except Exception as exc:  # noqa: BLE001 - whatever fails, try again
                        self.log(f"terminate failed ({type(exc).__name__}: {exc})")
                    self.log(f"retrying in {delay:.0f} s")
                    self._sleep(delay)
                    delay = min(cfg.backoff_max_s, delay * 2)
            self._sleep(cfg.poll_s)


def _terminate_this_pod(spec: SelfEnd | None, log: Callable[[str], None]) -> bool:
    if spec is None:
        log("no self-termination data (--self-end) was given: this guard cannot end the pod")
        return False
    creds = load_credentials(spec)
    if creds is None:
        log(f"no pod id and key ({spec.id_var}, {spec.key_var}) in the environment or the "
            "env file yet")
        return False
    attempts = SelfTerminator(creds, spec).terminate(log)
    return any(a.ok for a in attempts)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="boot_guard", description=__doc__.split("\n\n")[0])
    p.add_argument("--first-heartbeat", type=float, required=True, metavar="S")
    p.add_argument("--wall-cap", type=float, required=True, metavar="S")
    p.add_argument("--stale-after", type=float, required=True, metavar="S")
    p.add_argument("--heartbeat", type=Path, default=None,
                   help="default: ~/tplab-run/heartbeat (where the lab's launch writes it)")
    p.add_argument("--log", type=Path, default=None,
                   help="default: ~/tplab-run/guard.log (fetched with the lab's files)")
    p.add_argument("--started-file", type=Path, default=None,
                   help="default: ~/tplab-guard.json (read by the watchdog)")
    p.add_argument("--poll", type=float, default=2.0, metavar="S")
    p.add_argument("--self-end", metavar="B64",
                   help="how this pod ends itself: the provider's description, base64 JSON")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    home = Path(os.environ.get("HOME") or "/root")
    cfg = GuardConfig(heartbeat=args.heartbeat or home / "tplab-run" / "heartbeat",
                      log=args.log or home / "tplab-run" / "guard.log",
                      started_file=args.started_file or home / "tplab-guard.json",
                      first_heartbeat_s=args.first_heartbeat, wall_cap_s=args.wall_cap,
                      stale_after_s=args.stale_after, poll_s=args.poll)
    import signal
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    spec = None
    if args.self_end:
        try:
            spec = SelfEnd.from_arg(args.self_end)
        except SelfEndError as exc:  # still guard: the log says why it cannot end the pod
            print(f"boot_guard: {exc}", file=sys.stderr)
    return BootGuard(cfg, self_end=spec).run()


if __name__ == "__main__":
    sys.exit(main())
