from __future__ import annotations

import argparse
import json

import pytest

from tplab.mock.runpod_mock.faults import Faults, add_fault_arguments, faults_from_args


def _parse(argv):
    p = argparse.ArgumentParser()
    add_fault_arguments(p)
    return faults_from_args(p.parse_args(argv))


def test_flags_and_file_merge(tmp_path):
    f = tmp_path / "faults.json"
    f.write_text(json.dumps({"runtime_null_s": 3, "http_500": {"GET /v2/pods/{id}": 1}}))
    faults = _parse(["--faults", str(f), "--http-500", "podTerminate=2", "--no-spot-capacity",
                     "--terminate-fail-n", "4", "--spot-removed", "--boot-error",
                     "--create-500-after-create", "1", "--http-429", "POST /v2/pods=3",
                     "--retry-after-s", "2", "--pod-key-delete-refused"])
    assert faults.runtime_null_s == 3
    assert faults.http_500 == {"GET /v2/pods/{id}": 1, "podTerminate": 2}
    assert faults.no_spot_capacity and faults.terminate_fail_n == 4
    assert faults.spot_removed and faults.boot_error and faults.pod_key_delete_refused
    assert faults.create_500_after_create == 1
    assert faults.http_429 == {"POST /v2/pods": 3} and faults.retry_after_s == 2
    assert faults.spot_interrupt_after_s is None


def test_unknown_switch_is_refused():
    with pytest.raises(ValueError, match="unknown fault switch"):
        Faults.from_dict({"no_spot": True})
    with pytest.raises(ValueError, match="CALL=N"):
        _parse(["--http-500", "3"])
    with pytest.raises(ValueError, match="CALL=N"):
        _parse(["--http-429", "x"])


def test_counters_are_consumed():
    faults = Faults(http_500={"pod": 2}, terminate_fail_n=1, http_429={"x": 1},
                    create_500_after_create=1)
    assert [faults.take_http_500("pod") for _ in range(3)] == [True, True, False]
    assert not faults.take_http_500("myself")
    assert [faults.take_terminate_failure() for _ in range(2)] == [True, False]
    assert [faults.take_http_429("x") for _ in range(2)] == [True, False]
    assert [faults.take_create_500() for _ in range(2)] == [True, False]
