"""A file from outside is read only when it is a regular file, and never past its bound: a path
that leads to /dev/full (endless zeros) is refused without reading it."""

from __future__ import annotations

import resource

import pytest

from tplab.util.bounded_read import TooLargeError, iter_chunks, read_bounded


def test_a_file_within_its_bound_is_read_whole(tmp_path):
    path = tmp_path / "results.json"
    path.write_bytes(b"{}" * 100)
    assert read_bounded(path, 200) == b"{}" * 100


def test_a_file_past_its_bound_is_refused_and_a_stream_stops_at_it(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"x" * 10_000)
    with pytest.raises(TooLargeError, match="over 100 bytes"):
        read_bounded(path, 100, "events file")
    assert sum(len(c) for c in iter_chunks(path, 4096)) == 4096


def test_a_device_behind_a_symlink_is_not_read():
    """The quick fault suite's disk-full row points stream.jsonl at /dev/full: reading it
    whole took 23.5 GB; here it is refused at once and takes nothing."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TooLargeError, match="is a device, not a regular file"):
        read_bounded("/dev/full", 1 << 30)
    with pytest.raises(TooLargeError):
        list(iter_chunks("/dev/zero", 1 << 30))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # kB
