"""The lab's SSH session with its pod, against a sandbox SSH server holding a pod's files: a job
that fails on the pod gives the lab's FAILED line its own sentence, and what the pod finished
comes back before the teardown whenever the connection is still there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tplab.lab.lab_config import FAILED, LabConfig, LabStop
from tplab.lab.orchestrator import Lab
from tplab.lab.ssh_session import PodSession
from tplab.records.events import EventWriter
from tplab.wire import remote
from tests.wire.sshserver import SandboxServer


def _lab(out: Path, provider=None) -> Lab:
    """A lab's owners as its ``Lab`` builds them, not run."""
    return Lab(LabConfig(mock=True, out_dir=out), provider)


def _events(*made: tuple[str, dict]) -> bytes:
    w = EventWriter(src="job")
    return b"".join(w.make(kind, **fields).to_json().encode() + b"\n" for kind, fields in made)


class Pod:
    """A sandbox SSH server whose root holds the pod's run folder; ``session()`` connects."""

    def __init__(self, tmp_path: Path, files: dict[str, bytes]) -> None:
        self.root = tmp_path / "pod"
        run = self.root / remote.REMOTE_DIR
        run.mkdir(parents=True)
        for name, data in files.items():
            (run / name).write_bytes(data)
        self.key = remote.generate_client_key()
        self.server = SandboxServer(self.root, self.key)
        self.tmp_path = tmp_path

    async def __aenter__(self) -> Pod:
        await self.server.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.server.stop()

    async def session(self, lab: Lab) -> PodSession:
        session = PodSession(lab.config, lab.pod, lab.report, lab.stream, lab._stop,
                             on_result=lambda r: None)
        session.conn = await remote.connect(remote.ConnectOptions(
            host="127.0.0.1", port=self.server.port, user="root", pod_id="p",
            known_hosts_dir=self.tmp_path / "kh"), self.key)
        return session


async def test_a_job_that_fails_on_the_pod_ends_the_lab_with_the_jobs_own_sentence(tmp_path):
    why = "tensor parallelism needs at least 2 ranks; got WORLD_SIZE=1 (use --nproc-per-node=2)."
    files = {"events.jsonl": _events(("phase", {"name": "setup"}),
                                     ("error", {"msg": why, "fatal": True})),
             "exit_code": b"1\n", "job.log": b"Traceback (most recent call last): ...\n"}
    async with Pod(tmp_path, files) as pod:
        lab = _lab(tmp_path / "out")
        session = await pod.session(lab)
        try:
            await session._stream_job()
            await session.fetch()
            with pytest.raises(LabStop) as stop:
                session.check_exit()
        finally:
            session.close()
    assert stop.value.status == FAILED
    assert stop.value.reason == (
        "the job failed on the pod: tensor parallelism needs at least 2 ranks; got "
        f"WORLD_SIZE=1 (use --nproc-per-node=2); see {tmp_path / 'out' / 'job.log'} (exit "
        "code 1)")
    assert json.loads((tmp_path / "out" / "events.jsonl").read_text().splitlines()[-1])[
        "msg"] == why


class GoneProvider:
    """Terminate is accepted and the pod is gone at the first look."""

    name = "fake"

    def terminate(self, pod_id):
        self.terminated = pod_id

    def end_once(self, pod_id):
        self.terminate(pod_id)

    def verify_gone(self, pod_id):
        from tplab.cloud.base import GoneProof
        return GoneProof(pod_id, "now", {"pod": None}, listed=False)


async def test_a_stopped_lab_fetches_what_the_pod_finished_before_the_teardown(tmp_path):
    """A user's stop mid-run: events.jsonl comes back (results.json too once written) before the
    pod is terminated; a lab's own stop (FAILED: a cap) does not spend pod seconds on it."""
    from tplab.lab import teardown
    from tplab.lab.lab_config import STOPPED
    events = _events(("phase", {"name": "setup"}), ("log", {"level": "info", "msg": "m"}))
    for status, fetched in ((STOPPED, True), (FAILED, False)):
        async with Pod(tmp_path / status, {"events.jsonl": events}) as pod:
            lab = _lab(tmp_path / status / "out", GoneProvider())
            lab.pod.id = "p1"
            lab.report.end(status, "stopped")
            session = await pod.session(lab)
            await teardown.teardown(lab.config, lab.pod, lab.money, lab.report, lab.stream,
                                    session)
        out = tmp_path / status / "out"
        assert ((out / "events.jsonl").is_file() and
                (out / "events.jsonl").read_bytes() == events) is fetched, status
        assert ("events.jsonl" in lab.artifacts) is fetched
        assert lab.verified_gone and lab.provider.terminated == "p1"
