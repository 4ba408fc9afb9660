"""Hashes of vertex names, shared by the label reader (partition/labels.py) and the lookup index
of a label table (names.py): numba kernels, loaded only where names are used."""
from __future__ import annotations

from .jit import njit
import numpy as np


@njit(nogil=True, cache=True, inline="always")
def _mix(h):
    """MurmurHash3's 64-bit finalizer: every bit of h moves the low bits (the table slots)."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(nogil=True, cache=True)
def hash_name(buf):
    """A 64-bit hash of a name (FNV-1a 64, mixed): the index of names.Labels sorts by it."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(buf.shape[0]):
        h = (h ^ np.uint64(buf[i])) * np.uint64(0x100000001B3)
    return _mix(h)


@njit(nogil=True, cache=True)
def hash_lines(buf, off):
    """hash_name of every line buf[off[i]:off[i+1]-1] of a label table."""
    n = off.shape[0] - 1
    out = np.empty(n, np.uint64)
    for i in range(n):
        out[i] = hash_name(buf[off[i]:off[i + 1] - 1])
    return out
