from __future__ import annotations

import secrets

import pytest

from tplab.mock.runpod_mock.faults import Faults
from tplab.mock.handle import start_mock_cloud, start_mock_vast
from tplab.mock.vast_mock.faults import VastFaults


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    """One mock cloud per test module (starting one costs ~1 s); faults reset after each test."""
    key = "rpa_MOCKTEST" + secrets.token_hex(12)
    with start_mock_cloud(boot_delay_s=0.2, balance_usd=5.0, api_key=key,
                          state_dir=tmp_path_factory.mktemp("mockcloud"), keep_sandboxes=True) as c:
        yield c


#: the Vast mock's unit tests call it faster than Vast lets any client (its limits are on by
#: default): they run with the limits off, and the tests of the limits turn them on
VAST_OFF = VastFaults(rate_scale=0.0)


@pytest.fixture(scope="module")
def vast(tmp_path_factory):
    """One mock Vast cloud per test module, its rate limits off; faults reset after each test."""
    with start_mock_vast(VAST_OFF, boot_delay_s=0.2, balance_usd=5.0, api_key=secrets.token_hex(32),
                         state_dir=tmp_path_factory.mktemp("mockvast"), keep_sandboxes=True) as c:
        yield c


@pytest.fixture(autouse=True)
def _reset_faults(request, monkeypatch):
    """After each test on a shared mock: every fault off again, and no answer of the mock's
    that broke the provider's OpenAPI document (that fails the test that caused it). A test
    on the shared Vast mock (its limits off) tells tplab's client so: it paces by nothing."""
    if "vast" in request.fixturenames:
        from tplab.cloud.vast.pacing import SCALE_VAR
        monkeypatch.setenv(SCALE_VAR, str(VAST_OFF.rate_scale))
    yield
    for name, off in (("cloud", Faults()), ("vast", VAST_OFF)):
        if name not in request.fixturenames:
            continue
        c = request.getfixturevalue(name)
        if c.running:
            c.set_faults(**off.to_dict())
            violations = c.state()["schemaViolations"]
            assert violations == [], violations
