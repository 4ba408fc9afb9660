"""Edge lists -> row-column balanced 2D partitioned datasets (Graphene §4.5.1).

Public API: `partition_arrays(src, dst, ...)` (in-memory arrays) and `partition(input, disks, ...)`
(an edge-list file, streamed, externally sorted past the memory limit). Both return a `Graph`.
"""
from .partitioner import balanced_bounds, default_grid, partition_arrays  # noqa: F401

try:  # the streaming entry point (needs readers.py from the formats engineer)
    from .partitioner import partition  # noqa: F401
except ImportError:  # pragma: no cover
    pass
