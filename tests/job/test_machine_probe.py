"""The machine probe times a fixed workload and summarizes it as a figure."""

from tplab.job.machine_probe import BEST_OF, REPS, MachineProbe


def test_the_probe_times_its_fixed_workload_and_summarizes_the_samples():
    probe = MachineProbe()
    assert probe.section() is None  # nothing timed, nothing claimed
    for _ in range(4):
        probe.sample()
    sec = probe.section()
    assert sec is not None and sec["ms"]["n"] == 4 and len(sec["samples_ms"]) == 4
    assert all(x > 0 for x in sec["samples_ms"]) and sec["ms"]["median"] > 0
    assert f"{REPS} times, best of {BEST_OF}" in sec["reference"]
