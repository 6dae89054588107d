"""Schemathesis against a running mock cloud, with the provider's published OpenAPI document.

An outside tool generates requests from the document (positive data: what the document allows)
and checks each answer: no server error, the response schema (formats included: schemathesis
validates them by default), the content type. On top, data the document allows must not be
refused (4xx other than 401/404/410/429) unless a rule of tplab/mock/rejections.py explains
the refusal. Bounded: fixed seeds, a capped number of examples per operation, no shrinking, no
example database; every failure is collected (with a curl line to replay it), not only the first.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tplab.mock.rejections import explain

if TYPE_CHECKING:
    import requests

# hypothesis and schemathesis are imported by ``run``, in the child process only: imported by the
# test module they would be collected (and their hundreds of modules assertion-rewritten) in
# every pytest process, seconds each

CHECK_NAMES = ("not_a_server_error", "response_schema_conformance", "content_type_conformance")
#: refusals that depend on state, not on the data's shape: allowed for generated data
STATE_STATUSES = {401, 404, 410, 429}


@dataclass
class Report:
    cases: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    expected: dict[str, int] = field(default_factory=dict)   # rule why -> how often it fired
    per_operation: dict[str, int] = field(default_factory=dict)
    seconds_per_operation: dict[str, float] = field(default_factory=dict)


def _text(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text
    if isinstance(body, dict):
        return " ".join(str(body.get(k, "")) for k in ("error", "msg", "detail", "title"))
    return str(body)


def _bound(check: Any, label: str, key: tuple[str, str]) -> Any:
    """A one-argument test for @given (which refuses functions with defaults)."""
    def test(case: Any) -> None:
        check(case, label, key)
    return test


def run(provider: str, document: dict[str, Any], base_url: str, api_key: str,
        operations: set[tuple[str, str]], *, seeds: tuple[int, ...] = (1, 2),
        examples: int = 25) -> Report:
    """Run the generated cases of ``operations`` ((method, path) pairs, as the document spells
    them) against ``base_url``; return what happened."""
    import hypothesis
    import requests
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis.checks import CHECKS

    schema = schemathesis.openapi.from_dict(copy.deepcopy(document))
    checks = [CHECKS.get_one(name) for name in CHECK_NAMES]
    headers = {"Authorization": f"Bearer {api_key}"}
    report = Report()
    found: set[tuple[str, str]] = set()
    started = time.monotonic()
    session = requests.Session()
    for result in schema.get_all_operations():
        op = result.ok()
        key = (op.method.lower(), op.path)
        if key not in operations:
            continue
        found.add(key)
        label = f"{op.method.upper()} {op.path}"
        strategy = op.as_strategy()

        def check_one(case: Any, label: str, key: tuple[str, str]) -> None:
            report.cases += 1
            report.per_operation[label] = report.per_operation.get(label, 0) + 1
            try:
                response = case.call(base_url=base_url, headers=headers, session=session,
                                     timeout=10)
                case.validate_response(response, checks=checks, headers=headers)
            except Exception as exc:  # a failed check (a failure group), or no answer at all
                report.failures.append(f"{label}: {type(exc).__name__}: {str(exc).strip()[:1500]}"
                                       f"\n  {case.as_curl_command(headers=headers)}")
                return
            status = response.status_code
            if 400 <= status < 500 and status not in STATE_STATUSES:
                rule = explain(provider, key[0], key[1], status, _text(response))
                if rule is None:
                    report.failures.append(
                        f"{label}: refused data the document allows ({status}: "
                        f"{_text(response)[:300]}) and no rule in tplab/mock/rejections.py "
                        f"explains it\n  {case.as_curl_command(headers=headers)}")
                else:
                    report.expected[rule.why] = report.expected.get(rule.why, 0) + 1

        op_started = time.monotonic()
        for s in seeds:
            test = hypothesis.seed(s)(settings(
                max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck), derandomize=False,
            )(given(case=strategy)(_bound(check_one, label, key))))
            test()
        report.seconds_per_operation[label] = round(time.monotonic() - op_started, 2)
    report.seconds = time.monotonic() - started
    missing = operations - found
    if missing:
        report.failures.append(f"operations not in the document: {sorted(missing)}")
    return report


# ---- one process per provider ---------------------------------------------------------------
# The generation is CPU-bound Python: the providers' runs go in processes of their own, side by
# side, so the whole takes about as long as the longer one. The child gets the mock's URL and key
# through its environment (never argv) and prints its Report as one JSON line.
_ENV_URL, _ENV_KEY = "TPLAB_CONTRACT_URL", "TPLAB_CONTRACT_KEY"


def _document(provider: str) -> dict[str, Any]:
    if provider == "vast":
        from tplab.mock.vast_mock.contract import CONTRACT
        return CONTRACT.document
    from tplab.mock.runpod_mock import contract
    return contract.document()


def start(provider: str, base_url: str, api_key: str,
          operations: set[tuple[str, str]]) -> Any:
    """``run`` in a child process (``python -m tests.mock.contract_harness``); ``finish`` it."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, _ENV_URL: base_url, _ENV_KEY: api_key,
           "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    ops = json.dumps(sorted(operations))
    return subprocess.Popen([sys.executable, "-m", "tests.mock.contract_harness", provider, ops],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc: Any, timeout_s: float = 300) -> Report:
    import json
    import subprocess

    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return Report(failures=[f"the contract run did not end within {timeout_s:.0f} s"])
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return Report(failures=[f"the contract run failed ({proc.returncode}): {err[-3000:]}"])
    return Report(**json.loads(lines[-1]))


def _main(argv: list[str]) -> int:
    import dataclasses
    import json
    import os

    provider, ops = argv[0], {tuple(op) for op in json.loads(argv[1])}
    report = run(provider, _document(provider), os.environ[_ENV_URL], os.environ[_ENV_KEY],
                 ops)  # type: ignore[arg-type]
    print(json.dumps(dataclasses.asdict(report)))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
