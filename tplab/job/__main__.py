"""``python -m tplab.job`` — the lab job; launch it under ``torchrun --nproc-per-node=N``.

The rank's process ends as soon as the job has returned (its exit handlers run, its output is
flushed): torchrun's exit status, which the lab waits for before it terminates the pod, comes
without the half second each rank's interpreter would spend unloading torch.
"""

from __future__ import annotations

from .run import main
from tplab.util.process_end import end_now

if __name__ == "__main__":
    end_now(main())
