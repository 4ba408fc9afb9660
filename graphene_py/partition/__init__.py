"""Edge lists -> row-column balanced 2D partitioned datasets (Graphene §4.5.1).

Public API: `partition_arrays(src, dst, ...)` (in-memory arrays) and `partition(input, disks, ...)`
(an edge-list file, streamed, externally sorted past the memory limit). Both return a `Graph`.
"""
from .partitioner import (balanced_bounds, default_grid, parse_size, partition,  # noqa: F401
                          partition_arrays)
