"""Synthetic graph generators: Graph500 Kronecker (R-MAT) and uniform random edge lists.

`kronecker(scale, edge_factor)` makes 2^scale vertices and exactly edge_factor * 2^scale directed
edges. Each edge picks one of the four quadrants of the adjacency matrix `scale` times with
probabilities a, b, c and d = 1 - a - b - c (Graph500: 0.57, 0.19, 0.19, 0.05), one bit of src and dst
per level. Vertex IDs are then relabelled by a seeded random permutation, as Graph500 and GAPBS do, so
high-degree vertices are spread over the ID range instead of sitting at the low IDs. Self-loops and
duplicate edges are kept (the partitioner drops them, like GAPBS).

`uniform(n, m)` makes m edges with src and dst uniform in [0, n) (GAPBS `-u`).

Randomness is counter-based: the random bits of edge e are a hash (splitmix64) of (seed, e), one
64-bit hash per two levels (each level compares 32 bits against the cumulative probabilities), so the
output is identical whatever `chunk` is and however many threads generate it. The graph is not
bit-identical to GAPBS's or the Graph500 reference generator's (different random streams), only
equal in distribution. The permutation costs 8 * 2^scale bytes (32 MB at scale 22). Both generators yield
chunks `(src, dst)` of int64 arrays, or `(src, dst, weight)` with float32 integer weights 1..255
(GAPBS's weight range) when `weights=True`; a chunk holds at most `chunk` edges, so scale 24+ needs
no O(|E|) memory. `generate_to_file` streams them into any format of `partition.edgelists`.
"""
from __future__ import annotations

import os
import time
from typing import Iterator

import numba as nb
import numpy as np

from . import config

#: Graph500 initiator probabilities (d = 1 - a - b - c = 0.05).
KRON_A, KRON_B, KRON_C = 0.57, 0.19, 0.19
#: Edges per yielded chunk (4 M edges = 64 MB of int64 src+dst).
DEFAULT_CHUNK = 1 << 22

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(nogil=True, cache=True, inline="always")
def _mix64(z):
    # splitmix64 finalizer: a bijective 64-bit mix with full avalanche
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(nogil=True, cache=True, inline="always")
def _quadrant_bits(r, t_a, t_ab, t_abc, s, d):
    # quadrant a: (0,0), b: (0,1), c: (1,0), d: (1,1); branch-free (the choice is random)
    sb = np.uint64(r >= t_ab)
    db = np.uint64(r >= t_a) ^ sb ^ np.uint64(r >= t_abc)
    return (s << np.uint64(1)) | sb, (d << np.uint64(1)) | db


@nb.njit(nogil=True, cache=True, parallel=True)
def _kron_fill(key, e0, scale, t_a, t_ab, t_abc, src, dst, w, want_w):
    """Fill src/dst (and w) for edges e0 .. e0+len(src)-1. Thresholds are on 32-bit uniforms;
    one 64-bit hash feeds two levels."""
    count = src.shape[0]
    golden = np.uint64(0x9E3779B97F4A7C15)
    lo32 = np.uint64(0xFFFFFFFF)
    for i in nb.prange(count):
        state = _mix64(key ^ (np.uint64(e0 + i) * golden))
        s = np.uint64(0)
        d = np.uint64(0)
        for lvl in range(0, scale, 2):
            state = state + golden
            x = _mix64(state)
            s, d = _quadrant_bits(x & lo32, t_a, t_ab, t_abc, s, d)
            if lvl + 1 < scale:
                s, d = _quadrant_bits(x >> np.uint64(32), t_a, t_ab, t_abc, s, d)
        src[i] = np.int64(s)
        dst[i] = np.int64(d)
        if want_w:
            state = state + golden
            w[i] = np.float32(np.uint64(1) + _mix64(state) % np.uint64(255))


@nb.njit(nogil=True, cache=True, parallel=True)
def _relabel(perm, src, dst):
    # a separate tight loop (and function: a second prange in _kron_fill gets fused into the first
    # and runs 4x slower) so the random reads of perm overlap
    for i in nb.prange(src.shape[0]):
        src[i] = perm[src[i]]
        dst[i] = perm[dst[i]]


@nb.njit(nogil=True, cache=True, parallel=True)
def _uniform_fill(key, e0, n, src, dst, w, want_w):
    count = src.shape[0]
    golden = np.uint64(0x9E3779B97F4A7C15)
    un = np.uint64(n)
    for i in nb.prange(count):
        e = np.uint64(e0 + i)
        state = _mix64(key ^ (e * golden))
        state = state + golden
        src[i] = np.int64(_mix64(state) % un)
        state = state + golden
        dst[i] = np.int64(_mix64(state) % un)
        if want_w:
            state = state + golden
            w[i] = np.float32(1 + _mix64(state) % np.uint64(255))


def _key(seed: int, salt: int) -> np.uint64:
    # distinct streams for kron / uniform / the permutation, from any Python int seed
    ss = np.random.SeedSequence([int(seed) & ((1 << 64) - 1), salt])
    return np.uint64(ss.generate_state(1, dtype=np.uint64)[0])


def kron_permutation(scale: int, seed: int = config.SEED) -> np.ndarray:
    """The vertex relabelling `kronecker` applies: new ID of raw Kronecker vertex v is perm[v]."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) & ((1 << 64) - 1), 3])))
    return rng.permutation(1 << scale).astype(np.int64)


def _chunks(m: int, chunk: int):
    if chunk <= 0:
        raise ValueError("chunk must be positive")
    for e0 in range(0, m, chunk):
        yield e0, min(chunk, m - e0)


def kronecker(scale: int, edge_factor: int = 16, a: float = KRON_A, b: float = KRON_B,
              c: float = KRON_C, seed: int = config.SEED, chunk: int = DEFAULT_CHUNK,
              weights: bool = False, permute: bool = True) -> Iterator[tuple]:
    """Yield the edges of a Graph500 Kronecker graph in chunks of at most `chunk` edges.

    2^scale vertices, exactly edge_factor * 2^scale edges; deterministic from `seed` (independent of
    `chunk`). Yields `(src, dst)` int64 arrays, or `(src, dst, weight)` with weights=True.
    """
    scale = int(scale)
    if not 0 <= scale <= 62:
        raise ValueError(f"scale must be in 0..62, got {scale}")
    if edge_factor < 0:
        raise ValueError("edge_factor must be >= 0")
    if min(a, b, c) < 0 or a + b + c > 1.0:
        raise ValueError(f"bad Kronecker probabilities a={a} b={b} c={c} (need >= 0, a+b+c <= 1)")
    m = int(edge_factor) << scale
    perm = kron_permutation(scale, seed) if permute else None
    t = lambda p: np.uint64(min(int(round(p * 2.0 ** 32)), 1 << 32))
    t_a, t_ab, t_abc = t(a), t(a + b), t(a + b + c)
    key = _key(seed, 1)
    for e0, k in _chunks(m, chunk):
        src = np.empty(k, np.int64)
        dst = np.empty(k, np.int64)
        w = np.empty(k if weights else 0, np.float32)
        _kron_fill(key, e0, scale, t_a, t_ab, t_abc, src, dst, w, weights)
        if permute:
            _relabel(perm, src, dst)
        yield (src, dst, w) if weights else (src, dst)


def uniform(n: int, m: int, seed: int = config.SEED, chunk: int = DEFAULT_CHUNK,
            weights: bool = False) -> Iterator[tuple]:
    """Yield m edges with src, dst uniform in [0, n), in chunks of at most `chunk` edges."""
    n, m = int(n), int(m)
    if n <= 0 and m > 0:
        raise ValueError("uniform: n must be positive when m > 0")
    if m < 0:
        raise ValueError("uniform: m must be >= 0")
    key = _key(seed, 2)
    for e0, k in _chunks(m, chunk):
        src = np.empty(k, np.int64)
        dst = np.empty(k, np.int64)
        w = np.empty(k if weights else 0, np.float32)
        _uniform_fill(key, e0, n, src, dst, w, weights)
        yield (src, dst, w) if weights else (src, dst)


def generate(kind: str, scale: int | None = None, edge_factor: int = 16, n: int | None = None,
             m: int | None = None, seed: int = config.SEED, chunk: int = DEFAULT_CHUNK,
             weights: bool = False):
    """Return `(num_vertices, num_edges, chunk_iterator)` for kind 'kron' or 'uniform'.

    For 'uniform', give n and m, or scale and edge_factor (n = 2^scale, m = edge_factor * n)."""
    if kind in ("kron", "kronecker", "rmat"):
        if scale is None:
            raise ValueError("kron needs scale")
        nv, ne = 1 << int(scale), int(edge_factor) << int(scale)
        return nv, ne, kronecker(scale, edge_factor, seed=seed, chunk=chunk, weights=weights)
    if kind in ("uniform", "urand", "erdos-renyi"):
        if n is None:
            if scale is None:
                raise ValueError("uniform needs n (or scale)")
            n = 1 << int(scale)
        if m is None:
            m = int(edge_factor) * int(n)
        return int(n), int(m), uniform(n, m, seed=seed, chunk=chunk, weights=weights)
    raise ValueError(f"unknown generator kind {kind!r} (use 'kron' or 'uniform')")


def generate_to_file(path: str, kind: str = "kron", scale: int | None = None, edge_factor: int = 16,
                     n: int | None = None, m: int | None = None, seed: int = config.SEED,
                     fmt: str | None = None, weighted: bool = False,
                     chunk: int = DEFAULT_CHUNK, progress=None) -> dict:
    """Generate a graph straight into `path` (format from the suffix or `fmt`, see partition/edgelists.py).
    progress: called as progress("generate", edges written, edges in all) after every chunk
    (graphene_py/progress.py's Progress draws it).

    Returns a dict: path, fmt, kind, num_vertices, num_edges, bytes (file size), seconds."""
    from .partition.edgelists import EdgeWriter

    t0 = time.perf_counter()
    nv, ne, it = generate(kind, scale=scale, edge_factor=edge_factor, n=n, m=m, seed=seed,
                          chunk=chunk, weights=weighted)
    done = 0
    with EdgeWriter(path, fmt=fmt, weighted=weighted, num_vertices=nv, num_edges=ne) as w:
        for ch in it:
            w.write(*ch)
            done += len(ch[0])
            if progress is not None:
                progress("generate", done, ne)
        fmt_used = w.fmt
    return {"path": path, "fmt": fmt_used, "kind": kind, "num_vertices": nv, "num_edges": ne,
            "bytes": os.path.getsize(path), "seconds": time.perf_counter() - t0}
