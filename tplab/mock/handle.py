"""Start and stop a mock cloud from Python: ``with start_mock_cloud() as cloud: ...`` (RunPod),
``with start_mock_cloud(provider="vast") as cloud: ...`` or ``start_mock_vast()`` (Vast).

The mock runs as a subprocess (``python -m tplab.mock``) so its pods, SSH servers and billing
clock live outside the caller's event loop, exactly as a remote cloud would. ``start_mock_cloud``
waits for its ready line and returns a ``MockCloud`` with ``provider``, ``api_url``,
``api_key``, ``env()`` (the variables that point that provider's client at it: RunPod's
``RUNPOD_API_BASE_URL``/``RUNPOD_API_KEY``, Vast's ``VAST_API_BASE_URL``/``VAST_API_KEY``),
admin helpers (``pods()``: RunPod pods or Vast instances, ``state()``, ``calls()``,
``set_faults()``) and ``stop()``, which terminates every pod and waits for the process. The subprocess is started with ``--exit-with-parent``, so a crashed caller
does not leave it (or its pods) behind.

Thread-safe: a MockCloud holds no mutable state besides its process handle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tplab.mock.clouds import NAMES, mock_package

PROVIDERS = NAMES


class MockCloudError(RuntimeError):
    """The mock cloud process did not start or answer."""


@dataclass
class MockCloud:
    api_url: str
    api_key: str
    state_dir: Path
    process: subprocess.Popen[bytes]
    _stderr_tail: list[str] = field(default_factory=list, repr=False)
    _threads: list[threading.Thread] = field(default_factory=list, repr=False)
    _record: Path | None = field(default=None, repr=False)  # tplab.home.mock_clouds record
    provider: str = "runpod"

    def __repr__(self) -> str:  # never the key
        return f"MockCloud(provider={self.provider!r}, api_url={self.api_url!r}, " \
               f"pid={self.process.pid})"

    def env(self) -> dict[str, str]:
        """Variables that send this provider's client to this mock (RunPod: the runpod SDK and
        tplab's provider; Vast: ``VAST_API_BASE_URL``, ``VAST_API_KEY``)."""
        pkg = mock_package(self.provider)
        return {pkg.URL_VAR: self.api_url, pkg.KEY_VAR: self.api_key}

    def provider_kwargs(self) -> dict[str, str]:
        """Keyword arguments for the provider class (api_key, api_base_url)."""
        return {"api_key": self.api_key, "api_base_url": self.api_url}

    # ---- admin routes ------------------------------------------------------------------
    def _admin(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.api_url + path, data=data, method="POST" if data is not None else "GET",
            headers={"Authorization": f"Bearer {self.api_key}",
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def pods(self) -> list[dict[str, Any]]:
        """Every pod (Vast: instance) ever created, terminated ones too, with ``alivePids``
        (GET /_mock/pods)."""
        return self._admin("/_mock/pods")

    def state(self) -> dict[str, Any]:
        return self._admin("/_mock/state")

    def calls(self) -> dict[str, int]:
        """Requests so far per route (``POST /v2/pods``, ``graphql myself``,
        ``PUT /api/v0/asks/{id}`` ...)."""
        return self.state()["calls"]

    def set_faults(self, **changes: Any) -> dict[str, Any]:
        """Merge fault switches into the running mock (its package's ``faults_type``)."""
        mock_package(self.provider).faults_type()().merged(changes)  # an unknown one: clear error
        return self._admin("/_mock/faults", changes)

    def outbid(self, instance_id: int | str) -> None:
        """Vast only: a higher bid takes that running bid instance now (``POST /_mock/outbid``),
        for a test that waits for its moment instead of a timer (``outbid_after_s``)."""
        if not mock_package(self.provider).CAN_OUTBID:
            raise ValueError(f"a {self.provider} mock's pods are not bid for, so none is outbid")
        self._admin("/_mock/outbid", {"id": int(instance_id)})

    # ---- lifecycle ---------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM the mock (it terminates every pod first) and wait, SIGKILL if it hangs; then
        kill anything its pods left running (found by the ``TPLAB_MOCK_CLOUD`` marker: only a
        mock that died hard leaves any)."""
        from tplab.mock.procs import CLOUD_MARKER_VAR, kill_marked

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        kill_marked(CLOUD_MARKER_VAR, self.state_dir.name)
        from tplab.home import mock_clouds
        mock_clouds.unregister(self._record)
        for thread in self._threads:
            thread.join(5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode

    def __enter__(self) -> MockCloud:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_mock_vast(faults: Any = None,
                    **kwargs: Any) -> MockCloud:
    """``start_mock_cloud(provider="vast", ...)``: the mock Vast cloud (tplab/mock/vast_mock)."""
    return start_mock_cloud(faults, provider="vast", **kwargs)


def start_mock_cloud(faults: Any = None, *,
                     provider: str = "runpod", boot_delay_s: float = 1.0,
                     balance_usd: float = 10.0, api_key: str | None = None, port: int = 0,
                     state_dir: str | Path | None = None, keep_sandboxes: bool = False,
                     start_timeout_s: float = 30.0, pod_python: str | None = None) -> MockCloud:
    """Start ``python -m tplab.mock --cloud <provider>`` and return once it serves.
    ``api_key=None``: a random key. ``faults``: that provider's switches (its package's
    ``faults_type()``, or a dict of them)."""
    pkg = mock_package(provider)
    if isinstance(faults, dict):
        faults = pkg.faults_type().from_dict(faults)
    argv = [sys.executable, "-m", "tplab.mock", "--cloud", provider, "--port", str(port),
            "--balance", str(balance_usd), "--boot-delay", str(boot_delay_s),
            "--exit-with-parent"]
    if state_dir is not None:
        argv += ["--state-dir", str(state_dir)]
    if keep_sandboxes:
        argv.append("--keep-sandboxes")
    if pod_python:
        argv += ["--pod-python", pod_python]
    faults_file = None
    if faults is not None:
        fd, faults_file = tempfile.mkstemp(prefix="tplab-mock-faults-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(faults.to_dict(), fh)
        argv += [pkg.FAULTS_FLAG, faults_file]
    env = dict(os.environ)
    for other in map(mock_package, PROVIDERS):
        env.pop(other.KEY_VAR, None)  # the mock has its own account key; never pass a real one
        env.pop(other.MOCK_KEY_VAR, None)
    if api_key:
        env[pkg.MOCK_KEY_VAR] = api_key
    from tplab.home.paths import with_source_on_path

    env = with_source_on_path(env)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    tail: list[str] = []
    ready: list[bytes] = []
    got_line = threading.Event()

    def drain_stdout() -> None:  # the ready line, then anything else (so the pipe never fills)
        assert proc.stdout is not None
        for raw in proc.stdout:
            if not ready:
                ready.append(raw)
                got_line.set()
        got_line.set()

    def drain_stderr() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            tail.append(raw.decode(errors="replace").rstrip())
            del tail[:-50]

    threads = [threading.Thread(target=drain_stdout, name="mock-cloud-stdout", daemon=True),
               threading.Thread(target=drain_stderr, name="mock-cloud-stderr", daemon=True)]
    for t in threads:
        t.start()
    got_line.wait(start_timeout_s)
    try:
        if faults_file:
            os.unlink(faults_file)
    except OSError:
        pass
    if not ready:
        proc.kill()
        proc.wait(5)
        for t in threads:
            t.join(2)
        from tplab.keys.redact import redact

        detail = redact(tail[-1], [api_key]) if tail else "no output"
        raise MockCloudError(f"The mock cloud did not start within {start_timeout_s:.0f} s "
                             f"({detail}); see `tplab mock-cloud --help`.")
    info = json.loads(ready[0])
    from tplab.home import mock_clouds  # so `tplab status --mock` elsewhere finds this mock's pods
    record = mock_clouds.register(info["api_url"], info["api_key"], proc.pid, provider)
    return MockCloud(api_url=info["api_url"], api_key=info["api_key"],
                     state_dir=Path(info["state_dir"]), process=proc, _stderr_tail=tail,
                     _threads=threads, _record=record, provider=provider)
