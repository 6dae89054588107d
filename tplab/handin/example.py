"""assets/examples/: one finished mock lab's outputs, so a reader sees what a lab produces.

Why a module (run by ``scripts/example-lab``): the example must come from a real run of the lab on
the local mock cloud, not be drawn by hand, and be easy to make again when the manifest's schema
changes (``tests/lab/test_example_assets.py`` fails until it is). This copies from a finished mock
lab: manifest.json, results.json (what the test rebuilds the manifest from), scaling-curve.png,
proof-terminated.png, trace.json (the profiled pass, for ui.perfetto.dev), the terminal plot as
plain text (the same prediction the PNG draws, ``scaling_plot.render_plotext``), the profiled pass
as `tplab timeline` prints it and `tplab run`'s final screen, and writes a README that says MOCK.
Client side: no torch.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from tplab.viewmodel.past_labs import find_labs

COPIED = ("manifest.json", "results.json", "scaling-curve.png", "proof-terminated.png",
          "trace.json")
PLOT = "terminal-plot.txt"
TIMELINE = "timeline.txt"
TIMELINE_COLS = 100
RUN = "tplab-run.txt"


def terminal_plot(lab_dir: Path) -> str:
    """The lab's scaling curve as `tplab scaling` draws it in a terminal, without colour."""
    from tplab.scaling import chart as scaling_plot
    from tplab.lab.prediction import predict_lab
    results = json.loads((lab_dir / "results.json").read_text(encoding="utf-8"))
    manifest = json.loads((lab_dir / "manifest.json").read_text(encoding="utf-8"))
    gpu = str(manifest.get("instance_type") or "").split(" ", 1)[-1].removesuffix(" spot")
    pred = predict_lab(results, gpu_type=gpu, gpus=int(results.get("world_size") or 2),
                       mock=bool(manifest.get("mock")))
    if pred is None:
        raise SystemExit("example: the lab's prediction could not be made from its results")
    return scaling_plot.render_plotext(pred.profile, pred.world_size, pred.shape, pred.measured,
                                       sweep=pred.sweep, color=False,
                                       measured_crossover=pred.measured_crossover,
                                       band=pred.band)


def timeline_text(lab_dir: Path) -> str:
    """The lab's profiled pass as `tplab timeline LAB_DIR --width 100` prints it (beside the
    lab's figures, its record in manifest.json)."""
    from tplab.faces.timeline_text import timeline_lines
    from tplab.figures.lab_figures import from_manifest
    from tplab.viewmodel.timeline_view import timeline_from
    results = json.loads((lab_dir / "results.json").read_text(encoding="utf-8"))
    manifest = json.loads((lab_dir / "manifest.json").read_text(encoding="utf-8"))
    timeline = timeline_from(results.get("timeline"))
    if timeline is None:
        raise SystemExit("example: the lab ran no profiled pass (its results hold no timeline)")
    return "\n".join(timeline_lines(timeline, width=TIMELINE_COLS, modes=("tp", "single"),
                                     token=None, figures=from_manifest(manifest)))


def readme(manifest: dict) -> str:
    from tplab.figures.lab_figures import from_manifest
    f = from_manifest(manifest)
    speedup = f.speedup.text() if f is not None else "-"
    cost = f.cost.text() if f is not None and f.cost is not None else "-"
    return "\n".join([
        "# Example: one finished lab's outputs (MOCK)", "",
        "**MOCK**: made by `scripts/example-lab`, which runs `tplab run --mock` on the local mock "
        "cloud: the two \"GPUs\" are two processes on a 2-core CPU talking over gloo, the money is "
        "simulated in the mock ledger. The figures show the lab's shape (TP slower than one device "
        "at d_model 64), not a GPU's; the machine was shared, so its timings are noisy.", "",
        f"Lab status {manifest.get('status')}, speedup (single / TP, the timed pass) "
        f"{speedup}, simulated cost {cost}.", "",
        "| file | what it is |", "|---|---|",
        "| `manifest.json` | the lab sheet's manifest (lab 02, block G) and tplab's own fields |",
        "| `results.json` | the job's measurements the manifest was built from |",
        "| `scaling-curve.png` | predicted 1-device and TP latency vs d_model, the measured "
        "points, the crossover |",
        f"| `{PLOT}` | the same curve as the terminal draws it |",
        "| `trace.json` | the profiled pass, each rank's spans (open it in ui.perfetto.dev) |",
        f"| `{TIMELINE}` | the profiled pass as `tplab timeline` prints it: per token, each "
        "rank's lane of compute, on the wire and waiting |",
        "| `proof-terminated.png` | the provider's answer that the pod is gone, and the final "
        "frame |",
        f"| `{RUN}` | `tplab run --mock`'s last screen |", "",
        "Make it again (after a change to the manifest's fields, say) with `scripts/example-lab`; "
        "`tests/lab/test_example_assets.py` checks it against the manifest the code builds now.", ""])


def main(argv: list[str]) -> int:
    """example HOME RUN_OUTPUT DEST: copy HOME's newest finished mock lab into DEST."""
    home, run_output, dest = (Path(a) for a in argv)
    labs = [lab for lab in find_labs([home / "mock" / "labs"]) if lab.manifest]
    if not labs or labs[0].status != "COMPLETE":
        print("example: the mock lab did not complete; see its output above", file=sys.stderr)
        return 1
    lab = labs[0].path
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        shutil.copyfile(lab / name, dest / name)
    (dest / PLOT).write_text(terminal_plot(lab) + "\n", encoding="utf-8")
    (dest / TIMELINE).write_text(timeline_text(lab) + "\n", encoding="utf-8")
    text = run_output.read_text(encoding="utf-8")
    (dest / RUN).write_text(text.replace(str(home), "$TPLAB_HOME"), encoding="utf-8")
    manifest = json.loads((lab / "manifest.json").read_text(encoding="utf-8"))
    (dest / "README.md").write_text(readme(manifest), encoding="utf-8")
    print(f"example: {dest} holds lab {lab.name}'s outputs (MOCK)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
