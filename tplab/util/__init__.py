"""The small helpers both sides share: ``jsonfile`` (the one atomic JSON writer: temp file
0600, then rename), ``pids`` (the one "is that process still alive" check, a zombie counting
as gone) and ``process_end`` (a process with torch loaded ended without unloading it).

Why a package of their own: the job, the shared-memory transport, the ledger, the lab's records
and the mock clouds all need them (the pod's processes the last), and neither is part of the pod↔client contract or of the
statistics. Standard library only: they travel to the pod with the job. This ``__init__``
imports nothing.
"""
