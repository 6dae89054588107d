"""Each mock cloud under an outside contract tester: schemathesis generates requests from
the provider's own OpenAPI document and checks every answer — no server error, the response
schema (formats included), the content type — and that data the document allows is refused
only for a rule written in tplab/mock/rejections.py. Seeds 1 and 2, 25 examples per operation.

What it pays for: ~1,050 generated requests, CPU-bound (hypothesis's generation, the mocks'
answers), in two processes side by side. Each seed alone makes every rule of rejections.py fire,
but the rarer ones only two to five times, so both seeds are kept.

The documents are the ones the mocks ship, which tests/mock/test_schema.py and
test_vast_process.py hold equal to the providers' published documents cut to the mocks' routes;
Vast's with its documented disagreements applied (tplab/mock/vast_mock/contract.py ``EXCEPTIONS``).
"""

from __future__ import annotations

import pytest

from tests.mock import contract_harness
from tplab.mock.vast_mock import contract as vast_contract

pytestmark = pytest.mark.slow

#: RunPod: the routes tplab uses, reading and deleting (a generated create would ask for GPU types
#: that do not exist: nothing to learn from 50 refusals)
RUNPOD_OPERATIONS = {("get", "/v2/pods"), ("get", "/v2/pods/{id}"), ("delete", "/v2/pods/{id}"),
                     ("get", "/v2/catalog/gpus"), ("get", "/v2/billing/pods")}
#: Vast: every route the mock serves (the ones a lab uses and their siblings in the document)
VAST_OPERATIONS = {(m, route) for route, methods in vast_contract.ROUTES.items()
                   for m in methods}


def _summary(name: str, report: contract_harness.Report) -> str:
    lines = [f"{name}: {report.cases} cases in {report.seconds:.1f} s, "
             f"{len(report.failures)} failures"]
    lines += [f"  {op}: {s:.1f} s" for op, s in sorted(report.seconds_per_operation.items())]
    lines += [f"  expected rejection x{n}: {why}" for why, n in sorted(report.expected.items())]
    return "\n".join(lines)


def test_each_mock_keeps_its_providers_published_contract(cloud, vast):
    # generated creates must not start instances that run generated onstart scripts here
    vast.set_faults(no_bid_offers=True, no_ondemand_offers=True)
    before = len(vast.pods())
    runs = {"RunPod": (contract_harness.start("runpod", cloud.api_url, cloud.api_key,
                                              RUNPOD_OPERATIONS), RUNPOD_OPERATIONS),
            "Vast": (contract_harness.start("vast", vast.api_url, vast.api_key,
                                            VAST_OPERATIONS), VAST_OPERATIONS)}
    failures = []
    for name, (proc, operations) in runs.items():
        report = contract_harness.finish(proc)
        print(_summary(name, report))
        failures += [f"{name}: {f}" for f in report.failures]
        if not report.failures:
            assert set(report.per_operation) == {f"{m.upper()} {p}" for m, p in operations}
    assert failures == [], "\n\n".join(failures)
    assert len(vast.pods()) == before
