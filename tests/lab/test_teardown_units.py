"""The holes in "no pod left billing" and "no dollar lost", each closed and each able to fail:
verify keeps polling through provider errors (and re-sends terminate), a failed orphan lookup
keeps its record and hold, `tplab terminate` settles a crashed lab's hold at price × life, a
stop during authorize leaks no hold, the cost ticker's failures are warnings, a full disk
never stops the stream or the teardown, and what the pod sends is bounded and validated."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.cloud.base import CostReport, GoneProof, PodInfo, ProviderError, Quote
from tplab.wire.event_tail import MAX_LINE_BYTES, TailState, _accept
from tplab.records.events import EventWriter, LogEvent, StageEvent, WarningEvent
from tplab.lab import instances, leftovers
from tplab.lab.lab_config import LabConfig
from tplab.lab.cost import cost_ticker
from tplab.lab.ending import end_pod_within
from tplab.lab.orchestrator import Lab
from tplab.lab.stream import LabStream
from tests.e2e_fixtures import FullDisk

# One xdist worker runs the suite's waiting tests (deadlines, paced writers, bounds) one after
# another while the other workers keep the cores busy; tests/conftest.py starts them first.
pytestmark = pytest.mark.xdist_group("waits")


@pytest.fixture
def short_waits(monkeypatch):
    """The lab's backoffs (verify's growing poll delay up to 3 s, terminate's retries 1..4 s)
    shortened to 50 ms at most, so a test of how many polls and retries happen takes no
    seconds; the deadlines (``timeout_s``) are untouched."""
    real = asyncio.sleep

    async def short(delay: float, *args, **kwargs):
        return await real(min(delay, 0.05), *args, **kwargs)
    monkeypatch.setattr(asyncio, "sleep", short)


class FakeProvider:
    """A provider whose answers a test scripts: ``status_error`` / ``verify_errors`` raise,
    ``gone_after`` verify polls (counted from the first terminate) the pod is gone."""

    name = "fake"

    def __init__(self, gone_after: int = 1, verify_errors: int = 0,
                 status_error: bool = False, terminate_errors: int = 0) -> None:
        self.gone_after = gone_after
        self.verify_errors = verify_errors
        self.status_error = status_error
        self.terminate_errors = terminate_errors
        self.terminates = 0
        self.verifies = 0
        self.authorize_started = None

    def terminate(self, pod_id: str) -> None:
        if self.terminate_errors:
            self.terminate_errors -= 1
            raise ProviderError("the API said no")
        self.terminates += 1

    def end_once(self, pod_id: str) -> None:
        self.terminate(pod_id)

    def verify_gone(self, pod_id: str) -> GoneProof:
        self.verifies += 1
        if self.verify_errors:
            self.verify_errors -= 1
            raise ProviderError("HTTP 500 while reading the pod")
        gone = self.terminates > 0 and self.verifies >= self.gone_after
        return GoneProof(pod_id, "now", {"pod": None if gone else {"desiredStatus": "RUNNING"}},
                         listed=not gone)

    def status(self, pod_id: str) -> PodInfo:
        if self.status_error:
            raise ProviderError("the pod could not be read (HTTP 503)")
        return PodInfo(id=pod_id, name="tplab-x", state="RUNNING")

    def list_pods(self) -> list[PodInfo]:
        return []

    def actual_cost(self, pod_id, balance_before, started_at, ended_at, usd_per_hr):
        return CostReport(0.0, None, None, None, "no billing record yet")

    def quote(self, gpu_type, gpu_count, image=""):
        return Quote(gpu_type, gpu_count, 0.7, 1.4, True, True)

    def balance(self):
        return None


async def test_verify_polls_through_errors_and_resends_terminate(short_waits):
    prov = FakeProvider(gone_after=12, verify_errors=3)
    report = await end_pod_within(prov, "p1", bound_s=30)
    assert report.gone and prov.verifies >= 12
    assert prov.terminates > 1  # re-sent while the pod stayed listed


async def test_verify_that_never_gets_an_answer_is_not_gone(short_waits):
    prov = FakeProvider(verify_errors=10 ** 6)
    t0 = time.monotonic()
    report = await end_pod_within(prov, "p1", bound_s=1.0)
    assert 1.0 <= time.monotonic() - t0 < 5
    assert not report.gone and "HTTP 500" in report.proof.answer["error"]


def _record(pod_id: str, **kw) -> instances.InstanceRecord:
    kw.setdefault("state", instances.CREATED)
    rec = instances.InstanceRecord(lab_id=f"L-{pod_id}", label="lab02-tp-spinup-rtx4090x2",
                                   pod_name=f"tplab-L-{pod_id}", provider="fake",
                                   gpu_type="NVIDIA GeForce RTX 4090", gpu_count=2, spot=True,
                                   usd_per_hr=0.72, pod_id=pod_id, mock=True, **kw)
    instances.save(rec)
    return rec


def test_a_failed_orphan_lookup_keeps_the_record_and_says_so():
    _record("orphan1", created_at=time.time() - 60)
    found = leftovers.live_pods(FakeProvider(status_error=True), mock=True)
    assert [p.info.id for p in found] == ["orphan1"]
    assert found[0].info.state == leftovers.UNKNOWN and "HTTP 503" in found[0].problem
    assert "could not be asked" in leftovers.describe(found)
    assert [r.pod_id for r in instances.open_records(True)] == ["orphan1"]  # not taken for gone


async def test_terminate_settles_a_crashed_labs_hold_at_price_times_life():
    guard = BudgetGuard.from_config(mock=True)
    auth = guard.authorize("lab02-tp-spinup-rtx4090x2", 3.0)
    _record("crashed1", auth_id=auth, created_at=time.time() - 1800)  # ran for 30 min
    ended = await leftovers.end_pod(FakeProvider(), "crashed1", mock=True, timeout_s=10)
    assert ended.proof.gone and len(ended.settled) == 1
    guard = BudgetGuard(default_ledger_path(mock=True), 5.0)
    assert guard.held == 0.0
    assert guard.total_spent == pytest.approx(0.72 / 2, rel=0.02)  # $0.72/h x 0.5 h, not $0
    rec = instances.load_all(True)[0]
    assert rec.state == instances.GONE and rec.settled
    # a second terminate finds nothing left to settle
    ended = await leftovers.end_pod(FakeProvider(), "crashed1", mock=True, timeout_s=10)
    assert ended.settled == []
    assert BudgetGuard(default_ledger_path(mock=True), 5.0).total_spent == \
        pytest.approx(0.36, rel=0.02)


async def test_terminate_of_a_running_labs_pod_says_the_lab_ends_it_even_once_settled():
    """A lab still running when `tplab terminate` ends its pod settles its own hold, often
    before the pod is verified gone here: the user is told the lab ended as stopped by them
    either way, and the hold is not settled a second time."""
    import socket
    import subprocess
    import sys

    guard = BudgetGuard.from_config(mock=True)
    auth = guard.authorize("lab02-tp-spinup-rtx4090x2", 3.0)
    lab = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _record("running1", auth_id=auth, created_at=time.time() - 60, pid=lab.pid,
                host=socket.gethostname())

        class LabSettlesFirst(FakeProvider):
            def terminate(self, pod_id: str) -> None:
                super().terminate(pod_id)
                rec = instances.load_all(True)[0]  # the running lab sees its pod go, settles
                assert rec.ended_by.startswith("`tplab terminate` (pid")
                rec.settled = True
                instances.save(rec)

        ended = await leftovers.end_pod(LabSettlesFirst(), "running1", mock=True, timeout_s=10)
    finally:
        lab.kill()
        lab.wait(10)
    assert ended.proof.gone
    assert len(ended.settled) == 1 and "was running: it ended as stopped by you and settled " \
        "its own hold" in ended.settled[0], ended.settled
    assert BudgetGuard(default_ledger_path(mock=True), 5.0).held == 3.0  # the lab's to settle


def _lab(tmp_path, provider=None) -> Lab:
    """A lab's owners as its ``Lab`` builds them (config, stream, report, money, pod), not run."""
    return Lab(LabConfig(mock=True, out_dir=tmp_path), provider)


async def _teardown(lab: Lab, session=None) -> None:
    from tplab.lab import teardown
    await teardown.teardown(lab.config, lab.pod, lab.money, lab.report, lab.stream, session)


async def _collect(stream: LabStream) -> tuple[list, asyncio.Task]:
    seen: list = []
    events = stream.subscribe()

    async def run():
        async for ev in events:
            seen.append(ev)
    return seen, asyncio.create_task(run())


async def test_cost_ticker_failures_are_warnings_and_it_keeps_ticking(tmp_path):
    lab = _lab(tmp_path)
    lab.config.cost_tick_s = 0.01

    class BrokenGuard:
        def summary(self):
            raise OSError("ledger unreadable")

    lab.money.guard = BrokenGuard()
    lab.money.authorized_usd = 3.0
    lab.pod.created_at, lab.pod.usd_per_hr = time.time(), 0.7
    seen, task = await _collect(lab.stream)
    ticker = asyncio.create_task(cost_ticker(lab.config, lab.pod, lab.money, lab.stream,
                                             lambda reason, status: None))
    await asyncio.sleep(0.4)
    ticker.cancel()
    lab.stream.close_subs()
    await task
    warnings = [e for e in seen if isinstance(e, WarningEvent)]
    assert len(warnings) == 1 and "ledger unreadable" in warnings[0].msg
    assert sum(e.type == "cost" for e in seen) > 10  # ticks went on after the failure


async def test_a_full_disk_stops_the_record_not_the_lab(tmp_path):
    stream = LabStream()
    stream.open_record(tmp_path / "stream.jsonl")

    stream._fh = FullDisk()
    seen, task = await _collect(stream)
    stream.stage("terminate", pod_id="p1")      # what the teardown does next: must not raise
    stream.emit("log", level="info", msg="after")
    stream.close_record()
    stream.close_subs()
    await task
    kinds = [(e.type, e.name if isinstance(e, StageEvent) else e.msg[:30])
             for e in seen if isinstance(e, (StageEvent, LogEvent, WarningEvent))]
    assert kinds[0] == ("warning", "stream.jsonl could not be writ")
    assert ("phase", "terminate") in kinds and ("log", "after") in kinds


async def test_a_stop_during_authorize_leaks_no_hold(tmp_path):
    """BudgetGuard.authorize is slow (a locked ledger); the lab is stopped meanwhile: the
    hold it wrote is still released."""
    from tplab.lab import provision
    lab = _lab(tmp_path, FakeProvider())
    from tplab.money.caps import resolve_caps
    lab.money.open(resolve_caps(mock=True))
    slow = lab.money.guard
    real = slow.authorize

    def authorize(label, amount):
        time.sleep(0.5)
        return real(label, amount)

    slow.authorize = authorize
    body = asyncio.create_task(provision.authorize(lab.config, lab.provider, lab.money,
                                                   lab.stream))
    await asyncio.sleep(0.1)
    body.cancel()  # the lab is stopped while the ledger write runs
    with pytest.raises(asyncio.CancelledError):
        await body
    await _teardown(lab)
    assert BudgetGuard(default_ledger_path(mock=True), 5.0).held == 0.0
    kinds = [json.loads(ln)["kind"] for ln in default_ledger_path(mock=True).read_text()
             .splitlines()]
    assert kinds == ["authorize", "release"]


# ------------------------------------------------------------------ untrusted data from the pod

def _job_lines(n: int, start: int = 0) -> bytes:
    w = EventWriter(src="job", start_seq=start)
    return b"".join(w.make("log", level="info", msg=f"m{i}").to_json().encode() + b"\n"
                    for i in range(n))


def test_oversized_bad_and_foreign_lines_are_dropped_and_the_stream_goes_on():
    st = TailState()
    lab_forged = EventWriter(src="lab").make("phase", name="done", status="COMPLETE",
                                             verified_gone=True).to_json().encode() + b"\n"
    nested = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    data = (_job_lines(2)
            + b"x" * (MAX_LINE_BYTES + 10)                     # no newline for > 1 MiB
            + b"still the same line\n"
            + b'{"v":1,"seq":2,"ts":NaN,"src":"job","type":"log","level":"info","msg":"n"}\n'
            + nested
            + b"\xff\xfe not utf-8\n"
            + lab_forged
            + _job_lines(2, start=2))
    got = []
    fed = 0
    for i in range(0, len(data), 65536):  # as the tail reads: chunk by chunk
        chunk = data[i:i + 65536]
        fed += len(chunk)
        got += _accept(st, st.decoder.feed(chunk))
        assert st.decoder.pending <= MAX_LINE_BYTES + 65536  # never holds an endless line
    assert st.read_pos == fed == len(data)  # resume offsets stay exact
    assert [e.msg for e in got if isinstance(e, LogEvent)] == ["m0", "m1", "m0", "m1"]
    assert [e.seq for e in got] == [0, 1, 2, 3]
    assert st.bad_lines == 4 and st.foreign == 1


async def test_a_results_json_that_is_not_an_object_is_a_clear_error(tmp_path):
    from tplab.wire import remote
    from tplab.lab.lab_config import LabStop
    from tplab.lab.ssh_session import PodSession
    from tests.wire.sshserver import SandboxServer
    key = remote.generate_client_key()
    root = tmp_path / "pod"
    (root / remote.REMOTE_DIR).mkdir(parents=True)
    (root / remote.REMOTE_DIR / "results.json").write_text("[1, 2, 3]")
    srv = SandboxServer(root, key)
    await srv.start()
    try:
        lab = _lab(tmp_path / "out")
        session = PodSession(lab.config, lab.pod, lab.report, lab.stream, lab._stop,
                             on_result=lambda r: None)
        session.conn = await remote.connect(remote.ConnectOptions(
            host="127.0.0.1", port=srv.port, user="root", pod_id="p",
            known_hosts_dir=tmp_path / "kh"), key)
        with pytest.raises(LabStop, match="results.json is a JSON array, not an object"):
            await session.fetch()
        assert lab.results is None
        session.close()
    finally:
        await srv.stop()


async def test_the_lab_cap_stops_the_lab_the_moment_it_is_reached(tmp_path):
    """The client-side stop at the lab's authorization: $0.72/h for 11 s is past a $0.002 hold
    (the pod's watchdog knows nothing of dollars; only this stop enforces them)."""
    from tplab.lab.cost import _tick
    stops: list[tuple[str, str]] = []
    lab = _lab(tmp_path)
    lab.config.wall_cap_s = 7200.0
    money, pod = lab.money, lab.pod
    money.authorized_usd, pod.usd_per_hr = 0.002, 0.72
    pod.created_at = time.time() - 9.0
    seen, task = await _collect(lab.stream)
    owners = (lab.config, pod, money, lab.stream, lambda *why: stops.append(why))
    await _tick(*owners, 0)  # $0.0018: the 80% alert, no stop yet
    assert stops == []
    pod.created_at = time.time() - 11.0
    await _tick(*owners, 1)
    assert stops == [("the lab cap $0.0020 was reached", "FAILED")]  # the lab's own stop
    lab.stream.close_subs()
    await task
    assert [e.kind for e in seen if isinstance(e, WarningEvent)] == ["budget80"]


async def test_a_pod_that_never_goes_is_not_called_gone(tmp_path, short_waits):
    """The provider keeps listing the pod after terminate: teardown waits its bound, re-sends
    terminate, and says so; the proof says not gone, the record stays open for the next start.
    (Its polls 50 ms apart: the bound, 1 s, is what it waits.)"""
    prov = FakeProvider(gone_after=10 ** 9)
    lab = _lab(tmp_path, prov)
    lab.config.end_bound_s = 1.0
    lab.pod.id = "stuck1"
    lab.pod.record = _record("stuck1")
    seen, task = await _collect(lab.stream)
    t0 = time.monotonic()
    await _teardown(lab)
    assert time.monotonic() - t0 >= 1.0  # it waited for the provider, to the bound
    lab.stream.close_subs()
    await task
    assert lab.pod.verified_gone is False and prov.terminates >= 2
    proof = json.loads((tmp_path / "proof-terminated.json").read_text())
    assert proof["verified_gone"] is False and proof["listed"] is True
    assert any(isinstance(e, WarningEvent) and "NOT proven gone" in e.msg for e in seen)
    assert [r.pod_id for r in instances.open_records(True)] == ["stuck1"]


def test_an_unanswered_create_is_found_by_its_name_or_closed_in_time():
    """An INTENT record (the create never answered: a crash, an ambiguous create) has no pod
    id: its pod is found by name in the provider's list; one that never appears is closed as
    not created after the grace period, and the hold its lab left is released."""
    guard = BudgetGuard.from_config(mock=True)
    held_for_old = guard.authorize("lab02-tp-spinup-rtx4090x2", 1.0)
    fresh = _record("x", state=instances.INTENT)
    fresh.pod_id = None
    fresh.pod_name = "tplab-fresh"
    instances.save(fresh)
    old = _record("y", state=instances.INTENT, auth_id=held_for_old)
    old.pod_id, old.pod_name = None, "tplab-old"
    old.intent_at = time.time() - leftovers.INTENT_GRACE_S - 1
    instances.save(old)

    class Lists(FakeProvider):
        def list_pods(self):
            return [PodInfo(id="p-fresh", name="tplab-fresh", state="RUNNING")]

    found = leftovers.live_pods(Lists(), mock=True)
    assert [(p.info.id, p.record.lab_id) for p in found] == [("p-fresh", "L-x")]
    recs = {r.lab_id: r for r in instances.load_all(True)}
    assert recs["L-x"].pod_id == "p-fresh" and recs["L-x"].state == instances.CREATED
    assert recs["L-y"].state == instances.NOT_CREATED and recs["L-y"].settled
    assert BudgetGuard(default_ledger_path(mock=True), 5.0).held == 0.0


def test_holds_dead_clients_left_are_settled_once_nothing_can_bill(tmp_path):
    """A client SIGKILLed right after authorize leaves a hold and no instance record (no create
    was sent): the next start releases it. A hold whose process still runs is left alone."""
    import subprocess
    import sys
    code = ("from tplab.money.budget import BudgetGuard; "
            "print(BudgetGuard.from_config(mock=True).authorize('lab02-dead', 3.0))")
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()
    alive = BudgetGuard.from_config(mock=True).authorize("lab02-alive", 1.0)  # this process
    notes = leftovers.reconcile_holds(FakeProvider(), mock=True)
    assert len(notes) == 1 and dead in notes[0]
    guard = BudgetGuard(default_ledger_path(mock=True), 5.0)
    assert [a.auth_id for a in guard.summary().open_authorizations] == [alive]
    assert guard.total_spent == 0.0


def test_terminate_all_goes_on_to_the_next_pod_when_one_fails(tmp_path, monkeypatch, capsys,
                                                              short_waits):
    import argparse

    from tplab.commands import terminate

    class OneStuck(FakeProvider):
        def terminate(self, pod_id):
            if pod_id == "stuck":
                raise ProviderError("HTTP 500 from the API")
            self.terminates += 1

        def verify_gone(self, pod_id):
            if pod_id == "stuck":
                return GoneProof(pod_id, "now", {"pod": {"desiredStatus": "RUNNING"}}, True)
            return GoneProof(pod_id, "now", {"pod": None}, False)

    monkeypatch.setattr("tplab.lab.providers.cli_provider", lambda mock, url, name=None: OneStuck())
    args = argparse.Namespace(pod_ids=["stuck", "fine"], all=False, mock=True,
                              api_url="http://127.0.0.1:9", timeout=1.0)
    assert terminate.main(args) == 1
    out = capsys.readouterr()
    assert "fine: gone" in out.out
    assert "Pod stuck is NOT proven gone after" in out.err
    assert "HTTP 500 from the API" in out.err  # the provider's own words
    assert "run `tplab terminate stuck --mock --api-url http://127.0.0.1:9`" in out.err


async def test_a_provider_error_while_reconnecting_is_a_retry(tmp_path):
    from tplab.lab.ssh_session import PodSession
    lab = _lab(tmp_path, FakeProvider(status_error=True))
    lab.pod.id = "p1"
    session = PodSession(lab.config, lab.pod, lab.report, lab.stream, lab._stop,
                         on_result=lambda r: None)
    assert await session._check_pod_alive() is False  # not a LabStop: the loop tries again


def test_terminate_all_settles_a_killed_clients_hold_when_its_watchdog_ended_the_pod(
        tmp_path, monkeypatch, capsys):
    """The client was SIGKILLed, the pod's watchdog terminated the pod: `tplab terminate --all`
    finds no live pod, and still records what the pod cost against the hold the client left."""
    import argparse
    import subprocess
    import sys

    from tplab.commands import terminate

    code = ("from tplab.money.budget import BudgetGuard; "
            "print(BudgetGuard.from_config(mock=True).authorize('lab02-tp-spinup-rtx4090x2', 3.0))")
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()
    _record("killed1", auth_id=dead, created_at=time.time() - 600)

    class WatchdogEndedIt(FakeProvider):
        def status(self, pod_id):
            return PodInfo(id=pod_id, name="tplab-L-killed1", state="TERMINATED")

    monkeypatch.setattr("tplab.lab.providers.cli_provider", lambda mock, url, name=None: WatchdogEndedIt())
    args = argparse.Namespace(pod_ids=[], all=True, mock=True, api_url="http://127.0.0.1:9",
                              timeout=1.0)
    assert terminate.main(args) == 0
    out = capsys.readouterr().out
    assert "No live tplab pods." in out and dead in out
    guard = BudgetGuard(default_ledger_path(mock=True), 5.0)
    assert guard.held == 0.0 and guard.total_spent == pytest.approx(0.72 / 6, rel=0.05)


def test_terminate_all_mock_with_no_mock_cloud_still_releases_a_dead_clients_hold(capsys):
    """`tplab terminate --all --mock` with no mock cloud running: no pod can be alive, and the
    hold a client killed before it created anything left is released."""
    import argparse
    import subprocess
    import sys

    from tplab.commands import terminate

    code = ("from tplab.money.budget import BudgetGuard; "
            "print(BudgetGuard.from_config(mock=True).authorize('lab02-tp-spinup-rtx4090x2', 3.0))")
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()
    args = argparse.Namespace(pod_ids=[], all=True, mock=True, api_url=None, timeout=1.0)
    assert terminate.main(args) == 0
    out = capsys.readouterr().out
    assert "No live tplab pods (no mock cloud is running" in out and dead in out
    assert BudgetGuard(default_ledger_path(mock=True), 5.0).held == 0.0


def test_terminate_all_mock_settles_the_hold_of_a_pod_that_went_with_its_mock_cloud(capsys):
    """A dashboard forced out (a second SIGTERM) takes its own mock cloud, and the mock pod,
    with it: `tplab terminate --all --mock` then closes the record and settles the hold, not
    the next lab."""
    import argparse
    import subprocess
    import sys

    from tplab.commands import terminate

    code = ("import os; from tplab.money.budget import BudgetGuard; "
            "print(BudgetGuard.from_config(mock=True).authorize('lab02-tp-spinup-rtx4090x2', "
            "3.0), os.getpid())")
    auth, pid = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True, timeout=60).stdout.split()
    _record("gone1", created_at=time.time() - 600, auth_id=auth, pid=int(pid))
    args = argparse.Namespace(pod_ids=[], all=True, mock=True, api_url=None, timeout=1.0)
    assert terminate.main(args) == 0
    out = capsys.readouterr().out
    assert "spent by pod gone1 (price × the pod's life) against its lab's hold" in out
    guard = BudgetGuard(default_ledger_path(mock=True), 5.0)
    assert guard.held == 0.0 and guard.total_spent == pytest.approx(0.72 / 6, rel=0.05)
    assert [r.state for r in instances.load_all(mock=True)] == [instances.GONE]


def test_a_killed_clients_unanswered_create_is_closed_after_the_short_grace():
    """The client that sent the create died on this machine: its intent waits only
    DEAD_CLIENT_INTENT_GRACE_S for the pod to be listed (not the 10 minutes an intent of a live
    or unknown client gets), so the next start is not refused for it for long."""
    import subprocess
    import sys
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    for name, age in (("recent", 5.0), ("old", leftovers.DEAD_CLIENT_INTENT_GRACE_S + 1)):
        rec = _record(name, state=instances.INTENT, pid=int(dead_pid))
        rec.pod_id, rec.pod_name = None, f"tplab-{name}"
        rec.intent_at = time.time() - age
        instances.save(rec)
    alive = _record("alive", state=instances.INTENT)  # this process: the long grace
    alive.pod_id, alive.pod_name = None, "tplab-alive"
    alive.intent_at = time.time() - leftovers.DEAD_CLIENT_INTENT_GRACE_S - 1
    instances.save(alive)
    found = leftovers.live_pods(FakeProvider(), mock=True)
    assert sorted(p.info.id for p in found) == ["tplab-alive", "tplab-recent"]
    recs = {r.lab_id: r for r in instances.load_all(True)}
    assert recs["L-old"].state == instances.NOT_CREATED
    assert recs["L-recent"].state == recs["L-alive"].state == instances.INTENT


async def test_the_hold_follows_the_proof_that_the_pod_is_gone(tmp_path, short_waits, capsys):
    """A pod its lab could not prove gone keeps the lab's whole authorization held: nothing is
    recorded as spent, `tplab budget` shows the money held for that pod (never the cap free),
    the next start is refused for it, the lab's last sentence says what is left; once a later
    look (here `tplab status`'s listing) finds it gone, the hold is settled at what it billed."""
    import argparse

    from tplab.commands import budget
    from tplab.faces.startcheck import refusal
    from tplab.money.caps import resolve_caps
    prov = FakeProvider(gone_after=10 ** 9)
    lab = _lab(tmp_path, prov)
    lab.config.end_bound_s = 1.0
    money = lab.money
    money.open(resolve_caps(mock=True))
    await money.authorize(lab.config.ledger_label())
    assert money.authorized_usd == 3.0
    pod = lab.pod
    pod.id, pod.usd_per_hr, pod.created_at = "stuck2", 0.72, time.time() - 600
    pod.record = _record("stuck2", auth_id=money.auth_id, created_at=pod.created_at)
    lab.report.end("STOPPED", "stopped by the user (TERMINATE)")
    await _teardown(lab)
    guard = BudgetGuard(default_ledger_path(mock=True), 5.0)
    assert guard.held == 3.0 and guard.total_spent == 0.0
    assert lab.report.reason.startswith("stopped by the user (TERMINATE); pod stuck2 is NOT "
                                        "proven gone after 1 s")
    assert "run `tplab terminate stuck2 --mock` to try again" in lab.report.reason
    assert money.cost().what == "estimate" and money.held_for_pod == "stuck2"
    [rec] = instances.load_all(True)
    assert rec.lab_ended and rec.open and not rec.settled
    parser = argparse.ArgumentParser()
    budget.add_arguments(parser)
    budget.main(parser.parse_args(["--mock"]))
    out = capsys.readouterr().out
    assert "Held       $3.00" in out and "Remaining  $2.00" in out and "Pre-flight NOT OK" in out
    assert "$3.00 for pod stuck2, not yet proven gone" in out
    assert "`tplab terminate stuck2 --provider fake --mock` settles it" in out
    said = refusal(LabConfig(mock=True))
    assert said and "$3.00 for pod stuck2, not yet proven gone" in said
    from tplab.faces.cloud_check import gather_check
    report = gather_check(mock=True, provider=prov, gpu_type="NVIDIA GeForce RTX 4090")
    held = [x for x in report.lines if x.name == "held"]
    assert held and "$3.00 for pod stuck2, not yet proven gone" in held[0].text

    class NowGone(FakeProvider):
        def status(self, pod_id: str) -> PodInfo:
            return PodInfo(id=pod_id, name="", state="GONE")

    notes: list[str] = []
    assert leftovers.live_pods(NowGone(), True, settled=notes) == []
    assert len(notes) == 1 and "spent by pod stuck2" in notes[0], notes
    guard = BudgetGuard(default_ledger_path(mock=True), 5.0)
    assert guard.held == 0.0 and guard.total_spent >= 0.72 / 6  # price x its life, at least
    [rec] = instances.load_all(True)
    assert rec.settled and rec.state == instances.GONE


async def test_a_failed_bid_that_leaves_an_instance_ends_with_the_truth_about_it(tmp_path,
                                                                                 short_waits):
    """Vast's failed bid still made an instance: the lab adopts it, and its last sentence says
    what is left (here, an end never done: NOT proven gone), never "nothing is left running"."""
    from tplab.cloud.base import LeftBehindError
    from tplab.lab import provision
    from tplab.lab.lab_config import STUB, LabStop
    from tplab.money.caps import resolve_caps

    class FailedBid(FakeProvider):
        def create(self, spec):
            raise LeftBehindError(
                "Vast.ai did not rent offer 9 at $0.370/h (bid_failed) and left instance 77 "
                "behind, stopped and billing its storage; it is destroyed now",
                PodInfo(id="77", name=spec.name, state="INTERRUPTED", usd_per_hr=0.37))

        def self_end(self):
            return {}

    prov = FailedBid(gone_after=10 ** 9)
    lab = _lab(tmp_path, prov)
    lab.config.end_bound_s, lab.config.boot_guard = 1.0, False
    lab.money.open(resolve_caps(mock=True))
    with pytest.raises(LabStop) as stop:
        await provision.create(lab.config, lab.pod, lab.money, lab.stream,
                               "ssh-ed25519 AAAA test")
    assert stop.value.status == STUB and "left instance 77 behind" in stop.value.reason
    assert lab.pod_id == "77"  # adopted: the teardown proves its end
    lab.report.end(stop.value.status, stop.value.reason)
    await _teardown(lab)
    reason = lab.report.reason
    assert "nothing" not in reason and "pod 77 is NOT proven gone" in reason, reason
    assert [r.pod_id for r in instances.open_records(True)] == ["77"]
