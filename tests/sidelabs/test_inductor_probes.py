"""Inductor's CPU probes stay in the shared cache while the compile lab's kernels go to its own,
and the report says where the probes came from (no torch here: the lab's test runs them)."""

from __future__ import annotations

from pathlib import Path

from tplab.sidelabs import inductor_probes
from tplab.sidelabs.inductor_env import CACHE_SUBDIR, SHARED_CACHE_VAR, inductor_env


def test_the_cache_the_user_named_is_kept_for_the_probes(tmp_path: Path) -> None:
    env = inductor_env(tmp_path, {"TORCHINDUCTOR_CACHE_DIR": "/mine", "PATH": "/bin"})
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path.resolve() / CACHE_SUBDIR)
    assert env[SHARED_CACHE_VAR] == "/mine" and env["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "0"
    # none named: the probes use Inductor's default folder, and a stale value never leaks in
    assert SHARED_CACHE_VAR not in inductor_env(tmp_path, {"PATH": "/bin", SHARED_CACHE_VAR: "/old"})


def test_probe_libraries_are_told_from_kernels_by_their_source(tmp_path: Path) -> None:
    (tmp_path / "ab").mkdir()
    for name, src in (("probe", 'extern "C" void __avx_chk_kernel() {}'),
                      ("kernel", 'extern "C" void kernel(const float* in_ptr0) {}')):
        (tmp_path / "ab" / f"{name}.cpp").write_text(src)
        (tmp_path / "ab" / f"{name}.so").write_bytes(b"\x7fELF")
    (tmp_path / "ab" / "orphan.so").write_bytes(b"\x7fELF")  # no source beside it: not a probe
    assert inductor_probes.probe_libraries(tmp_path) == {tmp_path / "ab" / "probe.so"}


def test_the_report_says_whether_the_probes_were_built_or_found() -> None:
    found = inductor_probes.ProbeRecord("/tmp/cache", ["avx512", "avx2"], 0, 0.4).to_dict()
    text = inductor_probes.describe(found)
    assert found["reused"] is True
    assert "were all found in Inductor's shared cache `/tmp/cache`" in text and "avx512, avx2" in text
    assert "compiled from scratch in `inductor-cache/`" in text and "0.4 s" in text
    built = inductor_probes.describe(inductor_probes.ProbeRecord("/tmp/cache", ["avx2"], 10, 8.2).to_dict())
    assert "were built now (10 libraries) and kept in Inductor's shared cache" in built
    assert "8.2 s" in built
    assert "ran inside the first compile" in inductor_probes.describe(None)
    apart = inductor_probes.ProbeRecord(None, note="this torch has no separate probe step").to_dict()
    assert "no separate probe step" in inductor_probes.describe(apart)


def test_the_time_table_says_how_the_probes_came() -> None:
    from tplab.sidelabs.compile_stretch_report import time_lines

    def table(record: inductor_probes.ProbeRecord) -> str:
        return "\n".join(time_lines({"started_at": 0.0, "finished_at": 20.0,
                                     "seconds": {"inductor_probes": record.seconds, "substitute": 4.0},
                                     "inductor_probes": record.to_dict()}))

    assert "| Inductor's CPU feature probes (built now) | 8.2 |" in table(
        inductor_probes.ProbeRecord("/c", ["avx2"], 10, 8.2))
    assert "| Inductor's CPU feature probes (found in the shared cache) | 0.4 |" in table(
        inductor_probes.ProbeRecord("/c", ["avx2"], 0, 0.4))
    assert "(not run apart) | 0.0 |" in table(inductor_probes.ProbeRecord(None, note="old torch"))
