"""Inductor's CPU feature probes, built once per machine, compiler and torch instead of once per lab.

Before Inductor compiles anything for the CPU it asks which vector instructions the C++ compiler may
use here (AVX2, AVX-512, VNNI, AMX, bf16): it builds and loads a tiny library per candidate, about
ten compiler runs, ~8 s on a 2-core machine. Inductor keys each probe by the compiler's version, the
flags and the torch release, and skips the build when its cache already holds the library. The
compile lab points Inductor's cache at a folder of its own, so that the lab's kernels are generated
and compiled from scratch (and dumped); without this module every lab would rebuild the probes in
that empty folder too, and the first compile's seconds would be mostly probes.

So the lab runs the probes first, in Inductor's shared cache (the folder the user's own
``TORCHINDUCTOR_CACHE_DIR`` named before the lab replaced it, else Inductor's default), and only
then turns to its own folder: the process keeps the answers, the lab's kernels are still built from
scratch. ``ProbeRecord`` says which probes were built now and which were found, and the report and
manifest carry it. ``python -m tplab.sidelabs.inductor_probes`` runs them ahead (``scripts/setup
--tests`` does, in the background). Torch is imported inside the functions only.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tplab.sidelabs.inductor_env import SHARED_CACHE_VAR

#: every probe's source names its kernel ``__<isa>_chk_kernel``; no lab kernel does
PROBE_MARK = "_chk_kernel"


@dataclass
class ProbeRecord:
    """What the probes cost this run, and where their libraries are kept."""

    cache_dir: str | None  # the shared cache the probes live in (None: could not be run apart)
    isas: list[str] = field(default_factory=list)  # the instruction sets Inductor may use, best first
    built: int | None = None  # probe libraries compiled by this run (0: every one was there)
    seconds: float = 0.0
    note: str = ""  # why the probes ran inside the first compile instead, when they did

    @property
    def reused(self) -> bool:
        return self.built == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reused": self.reused}


def probe_libraries(cache: Path) -> set[Path]:
    """The probe libraries in an Inductor cache folder (each beside the source it was built from)."""
    found: set[Path] = set()
    for lib in cache.glob("*/*.so"):
        src = lib.with_suffix(".cpp")
        try:
            if PROBE_MARK in src.read_text(errors="replace"):
                found.add(lib)
        except OSError:
            continue
    return found


def _valid_isas() -> Any:
    try:
        from torch._inductor.cpu_vec_isa import valid_vec_isa_list
    except ImportError:  # torch before 2.5 keeps it in codecache
        from torch._inductor.codecache import valid_vec_isa_list  # type: ignore[attr-defined,no-redef]
    return valid_vec_isa_list()


def run_probes() -> ProbeRecord:
    """Run Inductor's CPU probes in the shared cache, then give ``TORCHINDUCTOR_CACHE_DIR`` back.

    Call it before anything is compiled: this process keeps the answers, so no later compile
    probes again (nor writes a probe into the lab's own cache).
    """
    own = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    shared = os.environ.get(SHARED_CACHE_VAR)
    t0 = time.perf_counter()
    try:
        from torch._inductor.codecache import cache_dir

        if shared:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = shared
        else:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)  # Inductor's default folder
        folder = Path(cache_dir())
        before = probe_libraries(folder)
        isas = [str(isa).split()[-1] for isa in _valid_isas()]  # "avx512 avx512_vnni" -> "avx512_vnni"
        built = len(probe_libraries(folder) - before)
        return ProbeRecord(str(folder), isas, built, time.perf_counter() - t0)
    except (ImportError, AttributeError) as exc:  # a torch whose Inductor is laid out otherwise
        return ProbeRecord(None, seconds=time.perf_counter() - t0,
                           note=f"this torch has no separate probe step ({exc}); the probes ran "
                                "inside the first compile")
    finally:
        if own is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = own


def describe(p: dict[str, Any] | None) -> str:
    """One sentence for REPORT.md (no torch): where the probes came from and what they cost."""
    if not p:
        return ("Inductor's CPU feature probes ran inside the first compile (this run's results do "
                "not say otherwise), so its seconds include them.")
    if p.get("cache_dir") is None:
        return f"Inductor's CPU feature probes: {p.get('note') or 'not run apart'}."
    isas = ", ".join(p.get("isas") or []) or "none"
    where = f"Inductor's shared cache `{p['cache_dir']}`"
    how = (f"were all found in {where}, built by an earlier compile on this machine with the same "
           "compiler and torch" if p.get("reused") else
           f"were built now ({p['built']} librar{'y' if p['built'] == 1 else 'ies'}) and kept in "
           f"{where} for later labs")
    return (f"Inductor's CPU feature probes (which vector instructions the C++ compiler may use "
            f"here; usable: {isas}) {how} ({p['seconds']:.1f} s, before any compile, so no compile time in this report includes "
            "them). The lab's own kernels were generated and compiled from "
            "scratch in `inductor-cache/`.")


def main() -> int:
    """Run the probes ahead (what ``scripts/setup --tests`` does) and say where they are."""
    r = run_probes()
    if r.cache_dir is None:
        print(f"inductor probes: {r.note}", file=sys.stderr)
        return 1
    state = "all found" if r.reused else f"{r.built} built"
    print(f"inductor probes: {state} in {r.cache_dir} ({r.seconds:.1f} s; usable: "
          f"{', '.join(r.isas) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
