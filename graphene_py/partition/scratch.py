"""Arrays reused from one batch (or block) to the next, and reads straight into them.

Fresh memory is zeroed by the kernel page by page as it is first touched. On the 2-vCPU KVM
machine, a kron22 partition spent 15% of its CPU time there (perf: clear_page_erms) on arrays
that the batch before had just let go: every batch's parse, sort and merge arrays are now the
same pages each time.
"""
from __future__ import annotations

import os

import numpy as np


def scratch_array(scratch, name, shape, dtype, zero=False):
    """An array of `shape` for a temporary that every batch (or merge block) needs again: a view
    of the one kept in dict `scratch` under `name`, grown when too small (np.empty / np.zeros when
    scratch is None). A dtype or a larger size replaces it (freed first)."""
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    size = int(np.prod(shape, dtype=np.int64))
    if scratch is None:
        return np.zeros(shape, dtype) if zero else np.empty(shape, dtype)
    a = scratch.get(name)
    if a is None or a.dtype != dtype or a.size < size:
        scratch.pop(name, None)
        a = None                    # the old one freed before its successor is allocated
        a = np.empty(size, dtype)
        scratch[name] = a
    v = a[:size].reshape(shape)
    if zero:
        v.fill(0)
    return v


def read_into(f, buf, offset: int):
    """buf (a contiguous array) filled from open file f at byte offset; returns buf."""
    mv = memoryview(buf).cast("B")
    got = 0
    while got < len(mv):        # pread may return less (a signal, or a file cut short)
        k = os.preadv(f.fileno(), [mv[got:]], offset + got)
        if k <= 0:
            raise OSError(f"{f.name}: {len(mv) - got} bytes missing at offset {offset + got}")
        got += k
    return buf
