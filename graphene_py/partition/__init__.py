"""Edge lists -> row-column balanced 2D partitioned datasets (Graphene §4.5.1).

Public API: `partition_arrays(src, dst, ...)` (in-memory arrays) and `partition(input, disks, ...)`
(an edge-list file, streamed, externally sorted past the memory limit). Both return a `Graph`.

This package is itself callable: `graphene_py.partition("twitter.el", ["/mnt/ssd0"])` is
`partition(...)` (the attribute `graphene_py.partition` is this package once anything imports it, so
the package forwards calls rather than shadowing a function of the same name).
"""
import sys
import types

#: the partitioner's names, imported on first use: the partitioner imports numba for its
#: kernels, and a cluster node that only writes the files it is sent (partition/writer.py)
#: should not pay that import
_LAZY = ("balanced_bounds", "default_grid", "parse_size", "partition", "partition_arrays")


def __getattr__(name):
    if name in _LAZY:
        from . import partitioner
        return getattr(partitioner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from .partitioner import partition
        return partition(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
