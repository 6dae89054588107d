"""TERMINATE with no lab running, against a mock cloud whose terminate is accepted but does not
take effect: the leftover sweep waits for the pod to go, and a pod that never goes is never
called gone (the button does not say NO POD ALIVE; the log says to check the console)."""

from __future__ import annotations

import pytest
from textual.widgets import Button

from tplab.wire import remote
from tplab.cloud.base import PodSpec
from tplab.lab.lab_config import LabConfig
from tplab.lab.orchestrator import Lab
from tplab.lab.providers import provider_for
from tplab.mock.handle import start_mock_cloud
from tui.app import TplabApp

from .helpers import wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("lingers", [3, -1])
async def test_the_leftover_sweep_waits_for_a_lingering_pod_and_never_calls_a_stuck_one_gone(
        tmp_path, lingers):
    """It pays for a mock cloud of its own (its faults) and, for the stuck pod, the sweep's
    whole verify deadline."""
    cloud = start_mock_cloud({"terminate_lingers": lingers}, boot_delay_s=0.2,
                             state_dir=tmp_path / "mock-state")
    try:
        prov = provider_for(cloud.api_key, cloud.api_url)
        key = remote.generate_client_key()
        left = prov.create(PodSpec(name="tplab-left-behind", gpu_type="NVIDIA GeForce RTX 4090",
                                   gpu_count=2, public_key=remote.public_key_line(key)))
        # long enough for the fifth read, on which the terminate is sent again (~1.7 s in)
        cfg = LabConfig(mock=True, api_url=cloud.api_url, out_dir=tmp_path / "out",
                        end_bound_s=2.6)
        app = TplabApp(None, sweep_factory=lambda: Lab(cfg, provider=prov))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("ctrl+t")
            await wait_for(pilot, lambda: app.runner.sweep and not app.runner.sweeping, timeout=60,
                           what="the sweep's end")
            await pilot.pause(0.2)
            label = str(app.query_one("#terminate", Button).label)
            log = [line.text for line in app.state.log]
            status = cloud.pods()[0]["desiredStatus"]
            if lingers > 0:
                assert status == "TERMINATED" and app.runner.sweep_done
                assert label == "NO POD ALIVE ✓"
                assert any(left.id in t and "verified gone" in t for t in log)
            else:
                assert status == "RUNNING" and not app.runner.sweep_done
                assert label != "NO POD ALIVE ✓"
                assert any(left.id in t and "NOT verified gone" in t for t in log), log
                assert "NOT verified gone" in app.runner.sweep and "console" in app.runner.sweep
                assert cloud.state()["calls"].get("DELETE /v2/pods/{id}", 0) >= 2  # re-sent
    finally:
        cloud.stop()
