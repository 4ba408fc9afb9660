"""Edge lists -> row-column balanced 2D partitioned datasets (Graphene §4.5.1).

Public API: `partition_arrays(src, dst, ...)` (in-memory arrays) and `partition(input, disks, ...)`
(an edge-list file, streamed, externally sorted past the memory limit). Both return a `Graph`.

This package is itself callable: `graphene_py.partition("twitter.el", ["/mnt/ssd0"])` is
`partition(...)` (the attribute `graphene_py.partition` is this package once anything imports it, so
the package forwards calls rather than shadowing a function of the same name).
"""
import sys
import types

from .partitioner import (balanced_bounds, default_grid, parse_size, partition,  # noqa: F401
                          partition_arrays)


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return partition(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
