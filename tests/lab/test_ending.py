"""The end of a pod when the cloud does not cooperate (``tplab.lab.ending``), against the mock
Vast cloud: a burst of 429s on destroy is waited out within the bound and each is a refusal,
never an accepted destroy; a hung API ends at the bound with one sentence; a destroy answered
``success: false`` is not accepted; a record that says ``destroyed`` while the machine still
runs is not gone; a 500 page is quoted as words; and the end says what it does every few
seconds. Vast's limits run at a tenth here (the client told so): the same waits, a tenth as
long. What it pays for: one mock Vast cloud for the module, each end waited to its bound."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.mock.conftest import VAST_OFF
from tests.mock.vast_helpers import create
from tplab.cloud.base import GoneProof, ProviderError, RateLimitedError
from tplab.cloud.vast.provider import VastProvider
from tplab.lab.ending import END_BOUND_S, PodEnd, end_pod_within

pytestmark = pytest.mark.xdist_group("waits")


@pytest.fixture(scope="module")
def _vast_cloud(tmp_path_factory):
    """One mock Vast cloud for the module (starting one costs ~1 s)."""
    from tplab.mock.handle import start_mock_vast
    with start_mock_vast(VAST_OFF, boot_delay_s=0.2, state_dir=tmp_path_factory.mktemp("vast"),
                         balance_usd=5.0) as cloud:
        yield cloud


@pytest.fixture
def vast(_vast_cloud):
    """The module's mock Vast cloud, every fault off after each test, and none of its answers
    against Vast's document."""
    yield _vast_cloud
    _vast_cloud.set_faults(**VAST_OFF.to_dict())
    assert _vast_cloud.state()["schemaViolations"] == []

#: Vast's own limits at a tenth, the client told so (as tests/lab/test_lab_vast.py's labs)
SCALE = 0.1
DESTROY = "DELETE /api/v0/instances/{id}"
READS = ("GET /api/v0/instances/{id}", "GET /api/v1/instances")


def _instance(cloud) -> str:
    status, body = create(cloud, "tplab-end-test")
    assert status == 200 and body["success"], body
    return str(body["new_contract"])


def _provider(cloud, **kw) -> VastProvider:
    return VastProvider(cloud.api_key, cloud.api_url, pace_scale=SCALE, retry_delays=(),
                        **kw)


def test_eight_429s_on_destroy_are_waited_out_and_none_is_taken_for_a_destroy(vast,
                                                                               monkeypatch):
    """Eight answers of 429 in a row on destroy: each one a refusal in Vast's words (a 429 is
    never an accepted destroy), the pacer's waits between them held to its ceiling, and the
    instance gone within a twentieth of the 150 s the bar allows at Vast's own limits (the
    end's poll ceiling scaled with them; ``benchmarks/fault_suite.py --rows 'vast end'`` measures
    the real ones)."""
    scale = SCALE / 2   # a twentieth: the waits are what is measured, their sum the figure
    monkeypatch.setattr("tplab.lab.ending.POLL_CEILING_S", 3.0 * scale)
    vast.set_faults(rate_scale=scale, http_429={DESTROY: 8})
    inst = _instance(vast)
    started = time.monotonic()
    p = VastProvider(vast.api_key, vast.api_url, pace_scale=scale, retry_delays=())
    report = asyncio.run(end_pod_within(p, inst, bound_s=60))
    took = time.monotonic() - started
    assert report.gone, report.known("instance", "destroy")
    assert len(report.refused) == 8 and report.accepted == 1, (report.refused, report.accepted)
    assert all("HTTP 429" in words and "API requests too frequent" in words
               for words in report.refused)
    assert took <= 150 * scale + 2, took
    assert vast.state()["calls"][DESTROY] == 9


def test_a_hung_api_ends_at_the_bound_with_one_sentence(vast):
    """Every destroy and every look hangs (the mock holds its answer longer than the bound):
    the end gives up at its bound, not after the client's timeouts and retries, with one
    sentence: what is
    known, the instance's id, the command that tries again, the watchdog still the backstop."""
    inst = _instance(vast)
    vast.set_faults(http_delay={DESTROY: 50, **{r: 50 for r in READS}}, delay_s=8.0)
    said: list[str] = []
    started = time.monotonic()
    report = asyncio.run(PodEnd(_provider(vast), inst, bound_s=3.0, say=said.append,
                                say_every_s=1.0, noun="instance", verb="destroy").run())
    took = time.monotonic() - started
    assert not report.gone and 3.0 <= took < 4.5, took
    sentence = report.sentence(f"tplab terminate {inst} --provider vast", "instance", "destroy")
    assert sentence.startswith(f"instance {inst} is NOT proven gone after 3 s")
    assert "no answer before the bound" in sentence
    assert f"run `tplab terminate {inst} --provider vast` to try again" in sentence
    assert "its watchdog on the instance still ends it at the wall cap" in sentence
    assert len(said) >= 2 and all("s more" in line for line in said)
    vast.set_faults(http_delay={})
    asyncio.run(end_pod_within(_provider(vast), inst, bound_s=30))  # nothing left running


def test_a_destroy_answered_success_false_is_not_accepted(vast):
    vast.set_faults(destroy_refused_n=2)
    inst = _instance(vast)
    p = _provider(vast)
    with pytest.raises(ProviderError, match="destroy_failed"):
        p.end_once(inst)
    report = asyncio.run(end_pod_within(p, inst, bound_s=30))
    assert report.gone and report.accepted == 1
    assert len(report.refused) == 1 and "destroy_failed" in report.refused[0]


def test_a_record_that_says_destroyed_while_it_runs_is_not_gone(vast):
    """A destroy taken and not done: the record says intended_status destroyed while
    actual_status is running. What the machine is decides: RUNNING, listed, never gone."""
    vast.set_faults(destroy_lingers=-1, destroy_intent_shown=True)
    inst = _instance(vast)
    p = _provider(vast)
    report = asyncio.run(end_pod_within(p, inst, bound_s=2.0))
    assert not report.gone and report.accepted >= 1
    assert report.proof.answer["pod"]["intended_status"] == "destroyed"
    assert report.proof.answer["pod"]["status"] == "RUNNING" and report.proof.listed
    info = p.status(inst)
    assert info.state == "RUNNING" and "asked to destroy it" in info.note
    assert "the provider still lists the instance" in report.known("instance", "destroy")
    vast.set_faults(destroy_lingers=0)
    p.end_once(inst)  # it goes now: nothing left running for the next test


def test_a_proxys_500_page_is_quoted_as_words(vast):
    vast.set_faults(http_500={DESTROY: 2}, error_page=True)
    inst = _instance(vast)
    report = asyncio.run(end_pod_within(_provider(vast), inst, bound_s=30))
    assert report.gone and len(report.refused) == 2
    for words in report.refused:
        assert "500 Internal Server Error" in words and "<" not in words
        assert "script" not in words and "window" not in words


def test_a_429_raised_once_carries_the_wait_the_cloud_asked_for(vast):
    vast.set_faults(rate_scale=SCALE, http_429={DESTROY: 1})
    inst = _instance(vast)
    p = _provider(vast)
    with pytest.raises(RateLimitedError) as limited:
        p.end_once(inst)
    assert 0 < limited.value.retry_after_s <= 12 * SCALE + 1
    p.end_once(inst)  # the pacer holds the next one for that long, and it goes through


class _Stays:
    """A pod that never goes: every end call accepted, every look shows it listed."""

    def __init__(self) -> None:
        self.sent = 0

    def end_once(self, pod_id: str) -> None:
        self.sent += 1

    def verify_gone(self, pod_id: str) -> GoneProof:
        return GoneProof(pod_id, "now", {"pod": {"status": "RUNNING"}}, listed=True)


def test_the_end_says_what_it_does_every_few_seconds_and_resends():
    said: list[str] = []
    prov = _Stays()
    report = asyncio.run(PodEnd(prov, "p9", bound_s=3.0, say=said.append,
                                say_every_s=0.5).run())
    assert not report.gone and report.seconds >= 3.0
    assert len(said) >= 4, said
    assert all(line.startswith("ending pod p9: ") and "s more" in line for line in said)
    assert prov.sent >= 2  # sent again while the pod stayed
    assert report.sentence("tplab terminate p9").startswith(
        f"pod p9 is NOT proven gone after 3 s (the bound 3 s): {prov.sent} accepted, yet the "
        "provider still shows the pod; the provider still lists the pod; it may still be "
        "billing: run `tplab terminate p9` to try again")
    assert END_BOUND_S <= 300  # the bar: a hung API ends within 300 s with a sentence
