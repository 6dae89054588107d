"""Side labs that tplab serves besides the TP lab: torch.compile + Inductor dump (lab 03) and DDP on
the CPU (the phase overview's first experiment).

Modules here may import torch at module top, except ``inductor_dump`` and ``inductor_env`` which the
command side uses before any torch import. Nothing in this package is imported by ``tplab --help``.
"""
