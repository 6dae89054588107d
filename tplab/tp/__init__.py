"""TP primitives: collectives as conjugate autograd Functions (over the process group or the
shared-memory transport), comm timing, the collectives' names for a profiler (``labels``), and
the Megatron-style layers.

Pod-side: imports only torch and the standard library.
"""

from __future__ import annotations

from .collectives import (
    copy_to_region,
    gather_from_region,
    get_rank,
    get_world_size,
    reduce_from_region,
    scatter_to_region,
    set_transport,
    transport_name,
    use_transport,
    without_autograd,
)
from .layers import ColumnParallelLinear, RowParallelLinear, ShardedEmbedding, shard_size
from .shm import ShmComm, ShmError, ShmPeerError, ShmTimeoutError
from .timing import CommTiming, comm_timing

__all__ = [
    "ColumnParallelLinear",
    "CommTiming",
    "RowParallelLinear",
    "ShardedEmbedding",
    "ShmComm",
    "ShmError",
    "ShmPeerError",
    "ShmTimeoutError",
    "comm_timing",
    "copy_to_region",
    "gather_from_region",
    "get_rank",
    "get_world_size",
    "reduce_from_region",
    "scatter_to_region",
    "set_transport",
    "shard_size",
    "transport_name",
    "use_transport",
    "without_autograd",
]
