"""``python -m tplab.job`` — the lab job; launch it under ``torchrun --nproc-per-node=N``."""

from __future__ import annotations

import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main())
