"""Do the tests that guard money fail when the code is wrong? One deliberate bug at a time.

Each mutant is one small edit to a copy of this checkout (the working tree as it is, tracked
and untracked files, never the checkout itself) that breaks a promise tplab makes about money
or pods: "verified gone" without asking, a verify that gives up after one look, a reconnect
that re-reads the event file from byte 0, a lab-cap stop that never fires, wrong manifest
values, a ledger without its lock, ``--provider auto`` picking over the lab cap, a 429 on
destroy taken for a destroy, the hold released before the pod is proven gone, ... For each, the
tests named beside it run against the
mutated copy; the mutant must make at least one of them fail. Prints one row per mutant and
exits 1 if any mutant survived.

    .venv/bin/python benchmarks/money_mutants.py            # all of them (a few minutes)
    .venv/bin/python benchmarks/money_mutants.py --only lock  # the ones whose name matches
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str           # file to edit, relative to the repo
    old: str            # text that must occur exactly once
    new: str
    tests: tuple[str, ...]


UNITS = "tests/lab/test_teardown_units.py"
ENDING = "tests/lab/test_ending.py"
E2E = "tests/lab/test_lab_e2e.py"

MUTANTS: tuple[Mutant, ...] = (
    Mutant("verified_gone forced to true", "tplab/lab/pod.py",
           "self.verified_gone = report.gone", "self.verified_gone = True",
           (f"{UNITS}::test_a_pod_that_never_goes_is_not_called_gone",)),
    Mutant("the end gives up after its first look", "tplab/lab/ending.py",
           "                if proof.gone:\n                    break",
           "                break",
           (f"{UNITS}::test_verify_polls_through_errors_and_resends_terminate",
            f"{UNITS}::test_a_pod_that_never_goes_is_not_called_gone")),
    Mutant("every reconnect re-reads the event file from byte 0", "tplab/lab/ssh_session.py",
           "                self.conn = None\n                stream.emit(\"ssh\", "
           "state=\"dropped\"",
           "                self.conn = None\n                self.tail.decoder = "
           "event_tail.FastDecoder()\n                stream.emit(\"ssh\", state=\"dropped\"",
           (f"{E2E}::test_ssh_dropped_twice_every_event_exactly_once",)),
    Mutant("the tail restarts at byte 0 on every call", "tplab/wire/event_tail.py",
           "    fh = None\n", "    fh = None\n    state.decoder.offset = 0\n",
           ("tests/wire/test_remote.py::test_tail_resumes_after_drops_exactly_once",)),
    Mutant("the client-side lab-cap stop is dead code", "tplab/money/lab_money.py",
           "        return alert, bool(cap) and self.accrued_usd >= cap",
           "        return alert, False",
           (f"{UNITS}::test_the_lab_cap_stops_the_lab_the_moment_it_is_reached",)),
    Mutant("manifest instance_type is the GPU name alone", "tplab/lab/artifacts.py",
           "\"instance_type\": config.instance_type(),", "\"instance_type\": config.gpu_type,",
           (f"{E2E}::test_full_lab_completes_with_every_artifact",)),
    Mutant("manifest end_ts is the start", "tplab/lab/artifacts.py",
           "end_ts=pod.gone_at", "end_ts=pod.created_at",
           (f"{E2E}::test_full_lab_completes_with_every_artifact",)),
    Mutant("the ledger lock removed", "tplab/money/ledger.py",
           "fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)", "pass",
           ("tests/money/test_concurrency.py",)),
    Mutant("a stop during authorize forgets the hold", "tplab/lab/teardown.py",
           "    await money.adopt_pending()\n", "",
           (f"{UNITS}::test_a_stop_during_authorize_leaks_no_hold",)),
    Mutant("a failed orphan look-up counts as gone", "tplab/lab/leftovers.py",
           "        except ProviderError as exc:  # unknown is not gone",
           "        except ProviderError as exc:\n            continue\n        except "
           "ZeroDivisionError as exc:  # unknown is not gone",
           (f"{UNITS}::test_a_failed_orphan_lookup_keeps_the_record_and_says_so",)),
    Mutant("--provider auto ignores the lab cap in its pick", "tplab/lab/auto_pick.py",
           "if (p := a.spot_price()) is not None and caps.worst_case(p).fits]",
           "if (p := a.spot_price()) is not None]",
           ("tests/money/test_caps.py::test_provider_auto_never_picks_an_offer_over_the_lab_cap",)),
    Mutant("a 429 on destroy counted as accepted", "tplab/lab/ending.py",
           "        except Exception as exc:  # noqa: BLE001 - a refusal, in the provider's words",
           "        except RateLimitedError:\n            r.accepted += 1\n            return 0.0\n"
           "        except Exception as exc:  # noqa: BLE001 - a refusal, in the provider's words",
           (f"{ENDING}::test_eight_429s_on_destroy_are_waited_out_and_none_is_taken_for_a_destroy",)),
    Mutant("the hold released without the proof", "tplab/lab/teardown.py",
           "        elif not pod.verified_gone:", "        elif False:",
           (f"{UNITS}::test_the_hold_follows_the_proof_that_the_pod_is_gone",)),
    Mutant("a record intended destroyed read as gone", "tplab/cloud/vast/shapes.py",
           "    if actual in _GONE:\n", "    if actual in _GONE or intended in _GONE:\n",
           (f"{ENDING}::test_a_record_that_says_destroyed_while_it_runs_is_not_gone",)),
    Mutant("tplab terminate settles nothing", "tplab/lab/leftovers.py",
           "        elif rec.auth_id and not rec.settled:\n"
           "            notes.append(settle_record(provider, rec, mock))",
           "        elif rec.auth_id and not rec.settled:\n            pass",
           (f"{UNITS}::test_terminate_settles_a_crashed_labs_hold_at_price_times_life",)),
)


def _copy_checkout(dest: Path) -> None:
    """The working tree's tracked and untracked (not ignored) files, as they are now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True, check=True)
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def run_mutant(m: Mutant, python: str) -> tuple[bool, float, str]:
    """(killed, seconds, how): killed when at least one named test failed on the mutant."""
    with tempfile.TemporaryDirectory(prefix="tplab-mutant-") as tmp:
        root = Path(tmp)
        _copy_checkout(root)
        target = root / m.path
        text = target.read_text()
        if text.count(m.old) != 1:
            return False, 0.0, f"the edit does not apply ({text.count(m.old)} matches)"
        target.write_text(text.replace(m.old, m.new))
        env = {**os.environ, "PYTHONPATH": str(root)}
        t0 = time.monotonic()
        out = subprocess.run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                              "-n", "0", *m.tests], cwd=root, env=env, capture_output=True, text=True)
        took = time.monotonic() - t0
        last = (out.stdout.strip().splitlines() or ["no output"])[-1]
        return out.returncode != 0, took, last


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="run the mutants whose name contains this")
    args = p.parse_args(argv)
    chosen = [m for m in MUTANTS if args.only.lower() in m.name.lower()]
    print(f"{'mutant':<52} {'result':<9} {'s':>5}  tests' last line")
    survived = 0
    for m in chosen:
        killed, took, last = run_mutant(m, sys.executable)
        survived += not killed
        print(f"{m.name:<52} {'killed' if killed else 'SURVIVED':<9} {took:5.0f}  {last[:70]}",
              flush=True)
    print(f"\n{len(chosen) - survived} of {len(chosen)} mutants killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
