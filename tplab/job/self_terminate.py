"""End this pod from inside it, by the ways its provider offers, described as data: used by the
watchdog and the boot guard.

Why data and not code: which URL to call, with which method and body, which header carries
which key, which variables hold the pod's id and key and which file the image writes them to
all differ per cloud, and the pod must not carry any cloud's code. So the client hands the pod
a ``SelfEnd`` (built from the provider's own description in ``tplab/cloud/<provider>/``; JSON,
base64 on the command line, no secret in it) and this module follows it. Several ways, in
order, because a pod-scoped key's permissions can only be known live and clouds move APIs;
each way is either

* ``http``: ``method url`` (``{base}`` and ``{id}`` filled in) with ``Authorization: Bearer
  <pod key>`` and an optional JSON body template; an ``ok`` status is success, and with
  ``ok_field`` its JSON must also say ``<ok_field>: true`` (Vast answers 200 ``{"success":
  false}`` for a destroy it did not do); with ``answer_key`` an HTTP 200 must carry
  ``data.<answer_key>`` and no ``errors`` (a GraphQL answer);
* ``command``: an executable found on PATH, run with the key in the environment variable the
  way names (never on its command line); exit 0 is success, and with ``ok_output`` its output
  must also match that regex (a CLI that exits 0 after an error says so only in its output).

Only a success ends the self-termination. From inside a pod the pod exists, so an answer of
404, 401 or 403 to its own end means the key cannot see it (Vast answers a key it does not know
404 ``auth_error``; RunPod's 404 is "not found or not accessible to the caller"), never that it
is already gone: the attempt fails, saying so, and the next way is tried.

The pod id and key come from the env file the spec names (``env_file_var`` may name another,
as the mock clouds do), else from this process's environment. Standard library only: this runs
on the pod, before and beside the job, and must work even if torch is broken. HTTP and the
runner are injectable.
"""

from __future__ import annotations

import functools
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
from typing import Any, Callable, Mapping, Sequence

from tplab.records.self_end_word import decode

POD_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: answers to a pod's own end that mean its key cannot see it (never "already gone")
KEY_CANNOT_SEE = (401, 403, 404)
REDACTED = "[redacted]"

#: ``request(method, url, body, headers, timeout_s) -> (http_status, response_text)``; raises
#: OSError when no HTTP answer came back at all (refused, DNS, timeout).
Request = Callable[[str, str, bytes | None, dict[str, str], float], tuple[int, str]]
#: ``run(argv, env, timeout_s) -> (exit_code, output)``; raises OSError when it cannot start.
Run = Callable[[Sequence[str], dict[str, str], float], tuple[int, str]]


class SelfEndError(ValueError):
    """The self-termination data is missing or malformed."""


@dataclass(frozen=True)
class Way:
    """One way of ending the pod (see the module docstring)."""
    label: str
    kind: str = "http"                  # "http" | "command"
    method: str = "DELETE"
    url: str = ""                       # "{base}/<the provider's path>/{id}"
    body: str = ""                      # a JSON template; {id} is filled in JSON-escaped
    ok: tuple[int, ...] = (200, 202, 204)
    ok_field: str = ""                  # http: a JSON answer must say <ok_field>: true
    answer_key: str = ""                # http: HTTP 200 must carry data.<answer_key>
    argv: tuple[str, ...] = ()          # command: argv[0] looked up on PATH; {id} filled in
    key_env: str = ""                   # command: the variable that carries the key
    ok_output: str = ""                 # command: a regex its output must match (when its
    #                                     exit status says nothing: a CLI that exits 0 on errors)


@dataclass(frozen=True)
class SelfEnd:
    """How a pod of one provider ends itself: the provider's name, its API, where the pod's
    id and key are, and the ways, in order. No secret: the key stays on the pod."""
    provider: str
    api_base: str
    id_var: str
    key_var: str
    ways: tuple[Way, ...]
    base_var: str = ""                  # a variable that, when set, overrides api_base
    env_file: str = ""                  # ``export K=V`` lines holding the id and key
    env_file_var: str = ""              # a variable naming another env file

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SelfEnd:
        try:
            # the fields come from JSON, checked by Way's own construction (a wrong name is a
            # TypeError, reported below): mypy cannot type a JSON object's values per field
            ways = tuple(Way(**{str(k): (tuple(v) if isinstance(v, list) else v)  # type: ignore[arg-type]
                                for k, v in w.items()}) for w in data["ways"])
            fields = {k: v for k, v in data.items() if k != "ways"}
            spec = cls(ways=ways, **fields)
        except (KeyError, TypeError, AttributeError) as exc:
            raise SelfEndError(f"the self-termination data is malformed ({exc})") from None
        if not spec.ways or not spec.id_var or not spec.key_var:
            raise SelfEndError("the self-termination data names no way, id or key variable")
        return spec

    @classmethod
    def from_arg(cls, text: str) -> SelfEnd:
        """From ``tplab.records.self_end_word.encode``'s word, as the command line carries it."""
        try:
            data = decode(text)
        except ValueError as exc:
            raise SelfEndError(f"the self-termination data is not base64 JSON ({exc})") from None
        if not isinstance(data, dict):
            raise SelfEndError("the self-termination data is not a JSON object")
        return cls.from_dict(data)


@dataclass(frozen=True)
class PodCredentials:
    pod_id: str
    api_key: str = field(repr=False)
    api_base: str = ""
    source: str = "environment"


@dataclass(frozen=True)
class Attempt:
    """One way of terminating: which, whether the provider accepted it, its answer (redacted)."""
    method: str
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


def load_credentials(spec: SelfEnd, environ: Mapping[str, str] | None = None,
                     env_file: str | None = None) -> PodCredentials | None:
    """The pod id, the pod-scoped key and the API base: from the env file, else the environment
    (None when neither has an id and a key)."""
    env = dict(os.environ if environ is None else environ)
    path = (env_file or (env.get(spec.env_file_var) if spec.env_file_var else None)
            or spec.env_file)
    sources: list[tuple[str, Mapping[str, str]]] = []
    if path:
        path = os.path.expanduser(os.path.expandvars(path))
        sources.append((path, read_env_file(path)))
    sources.append(("environment", env))
    for source, values in sources:
        pod_id, key = values.get(spec.id_var, ""), values.get(spec.key_var, "")
        if pod_id and key:
            base = ((values.get(spec.base_var) or env.get(spec.base_var)) if spec.base_var
                    else None) or spec.api_base
            return PodCredentials(pod_id, key, base, source)
    return None


class SelfTerminator:
    """Tries every way in order until one is accepted (see the module docstring)."""

    def __init__(self, creds: PodCredentials, spec: SelfEnd, *, timeout_s: float = 30.0,
                 request: Request = urllib_request, run: Run = subprocess_run,
                 which: Callable[[str], str | None] = shutil.which) -> None:
        if not POD_ID.match(creds.pod_id or ""):
            raise ValueError(f"{creds.pod_id!r} is not a {spec.provider} pod id")
        if not creds.api_base.startswith(("http://", "https://")):
            raise ValueError(f"the API base URL {creds.api_base!r} is not http(s)")
        self.creds = creds
        self.spec = spec
        self.timeout_s = timeout_s
        self._request = request
        self._run = run
        self._which = which

    def redact(self, text: str) -> str:
        key = self.creds.api_key
        return text.replace(key, REDACTED) if key else text

    def _snippet(self, text: str) -> str:
        return self.redact(" ".join(text.split())[:200]) or "no body"

    def _fill(self, template: str, quote_json: bool = False) -> str:
        pod_id = json.dumps(self.creds.pod_id)[1:-1] if quote_json else self.creds.pod_id
        return (template.replace("{base}", self.creds.api_base.rstrip("/"))
                .replace("{id}", pod_id))

    def label(self, way: Way) -> str:
        return self._fill(way.label)

    def http(self, way: Way) -> Attempt:
        method = self.label(way)
        headers = {"Authorization": f"Bearer {self.creds.api_key}", "User-Agent": "tplab-pod",
                   "Content-Type": "application/json"}
        body = self._fill(way.body, quote_json=True).encode() if way.body else None
        try:
            status, text = self._request(way.method, self._fill(way.url), body, headers,
                                         self.timeout_s)
        except OSError as exc:
            return Attempt(method, False, self.redact(f"no answer ({_reason(exc)})"))
        if way.answer_key:
            return Attempt(method, *_data_answer(status, self.redact(text), way.answer_key))
        if status in way.ok and way.ok_field and not _says_true(text, way.ok_field):
            return Attempt(method, False, f"HTTP {status} without {way.ok_field}: true: "
                                          f"{self._snippet(text)}")
        if status in way.ok:
            return Attempt(method, True, f"HTTP {status}")
        if status in KEY_CANNOT_SEE:
            return Attempt(method, False, f"HTTP {status}: this pod's key cannot see it (from "
                                          f"inside, the pod exists): {self._snippet(text)}")
        return Attempt(method, False, f"HTTP {status}: {self._snippet(text)}")

    def command(self, way: Way) -> Attempt | None:
        exe = self._which(way.argv[0]) if way.argv else None
        if not exe:
            return None
        method = self.label(way)
        env = {**os.environ, way.key_env: self.creds.api_key} if way.key_env else dict(os.environ)
        argv = [exe] + [self._fill(a) for a in way.argv[1:]]
        try:
            code, out = self._run(argv, env, self.timeout_s)
        except OSError as exc:
            return Attempt(method, False, self.redact(f"could not run ({exc})"))
        ok = code == 0 and (not way.ok_output or re.search(way.ok_output, out) is not None)
        return Attempt(method, ok, f"exit {code}: {self._snippet(out)}")

    def ways(self) -> list[tuple[str, Callable[[], Attempt | None]]]:
        out: list[tuple[str, Callable[[], Attempt | None]]] = []
        for way in self.spec.ways:
            if way.kind == "command":
                if way.argv and self._which(way.argv[0]):
                    out.append((self.label(way), functools.partial(self.command, way)))
            else:
                out.append((self.label(way), functools.partial(self.http, way)))
        return out

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


def _says_true(text: str, name: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get(name) is True


def _data_answer(status: int, text: str, key: str) -> tuple[bool, str]:
    """A GraphQL-style answer: HTTP 200 with ``{"data": {key: ...}}`` and no ``errors``."""
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
    if isinstance(data.get("data"), dict) and key in data["data"]:
        return True, f"HTTP 200: {snippet}"
    return False, f"HTTP 200 without data.{key}: {snippet}"


def _reason(exc: OSError) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc) or type(exc).__name__
