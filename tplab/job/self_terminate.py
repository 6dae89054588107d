"""Terminate this pod from inside it, by every way RunPod offers: used by the watchdog (and the boot guard).

Why several ways: a pod that must end itself (its client is gone, a cap has passed) has only
the pod-scoped API key RunPod gives it, and which calls that key may make can only be known
live; RunPod is also moving APIs (REST v1 retired, GraphQL to be retired in early 2027). So,
in order, each attempt's answer handed to ``log``:

1. REST v2 ``DELETE {api}/v2/pods/{id}`` with ``Authorization: Bearer <pod key>`` — 204 (or 404:
   already gone) is success;
2. GraphQL ``mutation { podTerminate(input: {podId: "<id>"}) }`` on ``{api}/graphql``;
3. ``runpodctl remove pod <id>`` when runpodctl is on PATH (the key in its environment, never
   on its command line).

The pod id and key come from ``/etc/rp_environment`` (``export RUNPOD_POD_ID=...`` lines that the
image's start script writes; ``$TPLAB_RP_ENV_FILE`` names another file, as the mock cloud does),
else from this process's environment. Standard library only: this runs on the pod, before and
beside the job, and must work even if torch is broken. HTTP and the runner are injectable.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

DEFAULT_API_BASE = "https://api.runpod.io"
DEFAULT_ENV_FILE = "/etc/rp_environment"
POD_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
REDACTED = "[redacted]"

#: ``request(method, url, body, headers, timeout_s) -> (http_status, response_text)``; raises
#: OSError when no HTTP answer came back at all (refused, DNS, timeout).
Request = Callable[[str, str, bytes | None, dict[str, str], float], tuple[int, str]]
#: ``run(argv, env, timeout_s) -> (exit_code, output)``; raises OSError when it cannot start.
Run = Callable[[Sequence[str], dict[str, str], float], tuple[int, str]]


@dataclass(frozen=True)
class PodCredentials:
    pod_id: str
    api_key: str = field(repr=False)
    api_base: str = DEFAULT_API_BASE
    source: str = "environment"


@dataclass(frozen=True)
class Attempt:
    """One way of terminating: which, whether RunPod accepted it, and its answer (redacted)."""
    method: str          # "v2 DELETE", "GraphQL podTerminate", "runpodctl remove pod"
    ok: bool
    detail: str


def urllib_request(method: str, url: str, body: bytes | None, headers: dict[str, str],
                   timeout_s: float) -> tuple[int, str]:
    """One HTTP request with urllib; HTTP error statuses are answers, not exceptions."""
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
            return resp.status, resp.read(64 * 1024).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        try:
            text = exc.read(64 * 1024).decode("utf-8", "replace")
        except OSError:
            text = ""
        return exc.code, text


def subprocess_run(argv: Sequence[str], env: dict[str, str], timeout_s: float) -> tuple[int, str]:
    try:
        done = subprocess.run(list(argv), env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:g} s"
    return done.returncode, (done.stdout + done.stderr)


def read_env_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """``export K=V`` (or ``K=V``) lines, shell-quoted values, as a dict; {} when unreadable."""
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("export "):
            line = line[7:].lstrip()
        name, sep, value = line.partition("=")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            continue
        try:
            parts = shlex.split(value)
        except ValueError:
            continue
        out[name] = parts[0] if parts else ""
    return out


def load_credentials(environ: Mapping[str, str] | None = None,
                     env_file: str | None = None) -> PodCredentials | None:
    """The pod id, the pod-scoped key and the API base: from the env file, else the environment
    (None when neither has an id and a key)."""
    env = dict(os.environ if environ is None else environ)
    path = env_file or env.get("TPLAB_RP_ENV_FILE") or DEFAULT_ENV_FILE
    from_file = read_env_file(path)
    for source, values in ((path, from_file), ("environment", env)):
        pod_id, key = values.get("RUNPOD_POD_ID", ""), values.get("RUNPOD_API_KEY", "")
        if pod_id and key:
            base = (values.get("RUNPOD_API_BASE_URL") or env.get("RUNPOD_API_BASE_URL")
                    or DEFAULT_API_BASE)
            return PodCredentials(pod_id, key, base, source)
    return None


class SelfTerminator:
    """Tries every way in order until one is accepted (see the module docstring)."""

    def __init__(self, creds: PodCredentials, *, timeout_s: float = 30.0,
                 request: Request = urllib_request, run: Run = subprocess_run,
                 runpodctl: str | None | bool = True) -> None:
        if not POD_ID.match(creds.pod_id or ""):
            raise ValueError(f"{creds.pod_id!r} is not a RunPod pod id")
        if not creds.api_base.startswith(("http://", "https://")):
            raise ValueError(f"the API base URL {creds.api_base!r} is not http(s)")
        self.creds = creds
        self.timeout_s = timeout_s
        self._request = request
        self._run = run
        self.runpodctl = shutil.which("runpodctl") if runpodctl is True else (runpodctl or None)

    def redact(self, text: str) -> str:
        key = self.creds.api_key
        return text.replace(key, REDACTED) if key else text

    def _snippet(self, text: str) -> str:
        return self.redact(" ".join(text.split())[:200]) or "no body"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.creds.api_key}", "User-Agent": "tplab-pod",
                "Content-Type": "application/json"}

    def v2_delete(self) -> Attempt:
        url = f"{self.creds.api_base.rstrip('/')}/v2/pods/{self.creds.pod_id}"
        method = f"v2 DELETE /v2/pods/{self.creds.pod_id}"
        try:
            status, text = self._request("DELETE", url, None, self._headers(), self.timeout_s)
        except OSError as exc:
            return Attempt(method, False, self.redact(f"no answer ({_reason(exc)})"))
        if status in (200, 202, 204):
            return Attempt(method, True, f"HTTP {status}")
        if status == 404:
            return Attempt(method, True, "HTTP 404: the pod is already gone")
        return Attempt(method, False, f"HTTP {status}: {self._snippet(text)}")

    def graphql_terminate(self) -> Attempt:
        url = f"{self.creds.api_base.rstrip('/')}/graphql"
        method = "GraphQL podTerminate"
        query = f'mutation {{ podTerminate(input: {{podId: "{self.creds.pod_id}"}}) }}'
        body = json.dumps({"query": query}).encode()
        try:
            status, text = self._request("POST", url, body, self._headers(), self.timeout_s)
        except OSError as exc:
            return Attempt(method, False, self.redact(f"no answer ({_reason(exc)})"))
        return Attempt(method, *_graphql_answer(status, self.redact(text)))

    def runpodctl_remove(self) -> Attempt | None:
        if not self.runpodctl:
            return None
        method = "runpodctl remove pod"
        env = {**os.environ, "RUNPOD_API_KEY": self.creds.api_key}
        try:
            code, out = self._run([self.runpodctl, "remove", "pod", self.creds.pod_id], env,
                                  self.timeout_s)
        except OSError as exc:
            return Attempt(method, False, self.redact(f"could not run ({exc})"))
        return Attempt(method, code == 0, f"exit {code}: {self._snippet(out)}")

    def ways(self) -> list[tuple[str, Callable[[], Attempt | None]]]:
        ways: list[tuple[str, Callable[[], Attempt | None]]] = [
            (f"v2 DELETE /v2/pods/{self.creds.pod_id}", self.v2_delete),
            ("GraphQL podTerminate", self.graphql_terminate)]
        if self.runpodctl:
            ways.append(("runpodctl remove pod", self.runpodctl_remove))
        return ways

    def terminate(self, log: Callable[[str], None] = lambda line: None) -> list[Attempt]:
        """Each way in turn until one is accepted. ``log`` gets a line before each attempt (an
        accepted terminate may end this process before it can say more) and one with its
        answer."""
        attempts: list[Attempt] = []
        for method, way in self.ways():
            log(f"trying {method}")
            attempt = way()
            if attempt is None:
                continue
            attempts.append(attempt)
            log(f"{attempt.method}: {'accepted' if attempt.ok else 'failed'} ({attempt.detail})")
            if attempt.ok:
                break
        return attempts


def _graphql_answer(status: int, text: str) -> tuple[bool, str]:
    """RunPod answers HTTP 200 with ``{"data": {"podTerminate": null}}`` on success."""
    snippet = " ".join(text.split())[:200]
    if status != 200:
        return False, f"HTTP {status}: {snippet or 'no body'}"
    try:
        data = json.loads(text)
    except ValueError:
        return False, f"HTTP 200 but not JSON: {snippet or 'no body'}"
    if not isinstance(data, dict):
        return False, f"HTTP 200 but not a GraphQL answer: {snippet}"
    errors = data.get("errors")
    if errors:
        first = errors[0] if isinstance(errors, list) and errors else errors
        message = first.get("message") if isinstance(first, dict) else first
        return False, f"HTTP 200 with GraphQL error: {message}"
    if isinstance(data.get("data"), dict) and "podTerminate" in data["data"]:
        return True, f"HTTP 200: {snippet}"
    return False, f"HTTP 200 without data.podTerminate: {snippet}"


def _reason(exc: OSError) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc) or type(exc).__name__
