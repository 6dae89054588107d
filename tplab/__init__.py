"""tplab: a tensor-parallel inference lab on rented GPUs under a hard dollar cap.

This package is shipped to the pod too (``tp/``, ``model/``, ``job/``, ``events.py``), so this
file imports nothing: the pod side may only use torch and the standard library, and the client
side must not pay for torch at import time.
"""

__version__ = "0.1.0"
