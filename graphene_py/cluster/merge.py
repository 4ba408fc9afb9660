"""How a superstep run in pieces (one per node) becomes one superstep: every piece starts from the
same state, reports what it changed in each slot the kernel writes, and the driver combines the
changes by the slot's declared rule (iterator/edgemap.py `Update.writes`).

    change = diff(orig, new, rule)        # in a node: ("sparse", idx, values) or ("dense", array)
    merge(target, rule, [change, ...])    # in the driver: target (the state before) updated in place
    merge_queues(ids, tail, cur, [ids...])  # the pieces' next-frontier queues, deduplicated

Rules: "min", "max", "or" (bitwise; flags and bitmaps), "sum" (the pieces send increments) and
"first" (per element, the first piece in node order that changed it wins; every "first" slot of
one kernel picks the same piece, since a piece that claims a vertex writes all of its slots).
A change goes dense when the sparse form would be at least half the slot's bytes: never one
Python object per vertex.

Combining through owners (engine.py): each piece's change is cut by `split` into one part per
owner (`owner_bounds`: the owner's own rows of a per-vertex slot, else an equal range of the
slot's flat elements); owner j merges every piece's part j against its replica of the slot with
the same rules, and the driver assigns (`assign`) its result (positions and new values,
`diff(..., "set")`).
"""
from __future__ import annotations

import numpy as np


def diff(orig: np.ndarray, new: np.ndarray, rule: str):
    """What one piece changed in a slot (orig: the slot as shipped; new: after the piece ran)."""
    orig, new = orig.reshape(-1), new.reshape(-1)      # rows of per-thread sums: flat views
    if rule == "sum":        # increments ("set": the new values, for `assign`)
        d = new - orig
        idx = np.flatnonzero(d)
        full = d
    else:
        idx = np.flatnonzero(new != orig)
        full = new
    if idx.size == 0:
        return ("none",)
    if len(orig) < (1 << 31):
        idx = idx.astype(np.int32)
    if idx.size * (idx.itemsize + full.itemsize) * 2 >= full.nbytes:
        return ("dense", full)
    return ("sparse", idx, full[idx])


def bounds(length: int, k: int) -> list:
    """Owner j's range of a slot's `length` flat elements is [b[j], b[j + 1])."""
    return [int(x) for x in np.linspace(0, length, k + 1).round()]


def owner_bounds(length: int, n: int, vertex_bounds) -> list:
    """The owners' ranges of a slot of `length` flat elements: the vertex bounds of the nodes'
    rows when the slot holds one entry per vertex (a node's pull changes are then its own),
    else equal shares."""
    k = max(len(vertex_bounds) - 1, 1)
    return [int(x) for x in vertex_bounds] if length == n and k > 1 else bounds(length, k)


def split(change, bounds) -> list:
    """A change cut at the flat offsets `bounds` (k + 1 of them, from 0 to the slot's length):
    k changes, each relative to its own range (positions from its start)."""
    k = len(bounds) - 1
    if change[0] == "none":
        return [change] * k
    if change[0] == "dense":
        return [("dense", change[1][bounds[j]:bounds[j + 1]]) for j in range(k)]
    idx, vals = change[1], change[2]
    cut = np.searchsorted(idx, bounds)
    out = []
    for j in range(k):
        a, b = int(cut[j]), int(cut[j + 1])
        out.append(("sparse", idx[a:b] - idx.dtype.type(bounds[j]), vals[a:b]) if b > a
                   else ("none",))
    return out


def assign(target: np.ndarray, change) -> None:
    """Put a merged result (new values, not increments) into target (a flat view)."""
    if change[0] == "dense":
        target[...] = change[1]
    elif change[0] == "sparse":
        target[change[1]] = change[2]


def nbytes(change) -> int:
    return sum(a.nbytes for a in change[1:])


def merge(target: np.ndarray, rule: str, changes) -> None:
    """Apply the pieces' changes (node order) to target, the slot before the superstep."""
    changes = [c for c in changes if c[0] != "none"]
    if not changes:
        return
    target = target.reshape(-1)                  # a view: the state is C-contiguous
    if rule == "first":
        # positions against the unmodified target first, then the first claim of each wins
        sparse = [(np.flatnonzero(c[1] != target), None) if c[0] == "dense" else (c[1], c[2])
                  for c in changes]
        taken = np.zeros(len(target), dtype=np.bool_)
        for c, (idx, vals) in zip(changes, sparse):
            if vals is None:
                vals = c[1][idx]
            fresh = ~taken[idx]
            target[idx[fresh]] = vals[fresh]
            taken[idx] = True
        return
    ufunc = {"min": np.minimum, "max": np.maximum, "or": np.bitwise_or, "sum": np.add}[rule]
    for c in changes:
        if c[0] == "dense":
            ufunc(target, c[1], out=target)
        else:
            ufunc.at(target, c[1], c[2])


def pack(changes, p: int) -> tuple:
    """A list of changes cut into p byte strings of about equal size (each array padded to 8
    bytes): (skeleton, parts). unpack(skeleton, parts) gives the list back."""
    skel, blobs = [], []
    for c in changes:
        skel.append((c[0],) + tuple((a.shape, a.dtype.str) for a in c[1:]))
        for a in c[1:]:
            b = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            blobs.append(b)
            if b.size % 8:
                blobs.append(np.zeros(8 - b.size % 8, np.uint8))
    blob = np.concatenate(blobs) if blobs else np.zeros(0, np.uint8)
    b = bounds(blob.size, p)
    return skel, [blob[b[j]:b[j + 1]] for j in range(p)]


def unpack(skel, parts) -> list:
    blob = np.concatenate(parts)      # a fresh, aligned copy (an inline part may not be)
    out, o = [], 0
    for kind, *arrays in skel:
        got = [kind]
        for shape, dt in arrays:
            size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            got.append(blob[o:o + size].view(dt).reshape(shape))
            o += -(-size // 8) * 8
        out.append(tuple(got))
    return out


def merge_queues(ids: np.ndarray, tail: np.ndarray, cur: np.ndarray, pieces) -> int:
    """Put the union of the pieces' queued vertices (sorted, each once: two nodes may both claim
    a vertex) into a NextQueue's slots from tail[0] on (0, or where a queue that holds every
    level starts this one: queue.squeeze_from), so that its squeeze returns their count."""
    from ..partition.partitioner import sorted_unique
    got = [p for p in pieces if len(p)]
    u = sorted_unique(np.concatenate(got).astype(np.int64)) if got else np.zeros(0, np.int64)
    t0 = int(tail[0])
    ids[t0:t0 + len(u)] = u
    tail[0] = t0 + len(u)
    cur[:] = 0
    return len(u)


def combine_stats(stats: list) -> dict:
    """One superstep's stats from several (the nodes', or one node's directions): counts add up,
    lists join, ratios are recomputed."""
    out = {}
    for s in stats:
        for k, v in s.items():
            if k in ("mode", "direction"):
                out.setdefault(k, v)
            elif isinstance(v, list):
                out[k] = out.get(k, []) + list(v)
            elif isinstance(v, (int, float, np.integer, np.floating)) and k != "io_utility":
                out[k] = out.get(k, 0) + v
    got = out.get("bytes_read", 0) + out.get("bytes_cached", 0)
    out["io_utility"] = out.get("bytes_useful", 0) / got if got else 1.0
    return out
