"""DeviceGraph: a graph's CSR (out-edges, and in-edges when needed) for the GPU kernels.

Vertex IDs are int32 on the device (|V| < 2^31), offsets int64, weights float32. Loading checks the
bytes against a budget (`gpu_mem`, e.g. the CLI's `--gpu-mem`, default: 90% of the device's free
memory). Tiers: the O(|V|) offsets and working state must fit the budget (else `GpuMemoryError`
naming both numbers); the O(|E|) arrays (out-lists, in-lists, weights, in that order) are resident
in GPU memory while they fit what is left, and the rest stay in pinned host memory that the kernels
read directly over the bus (zero-copy: unified addressing makes a pinned host pointer a device
pointer; EMOGI's approach, FAST'20 / VLDB'20). The same kernels run on either; `placement` says
where each array is. What the budget still holds then keeps the first edges of every list of a
zero-copy array in GPU memory (`head`): the BFS, WCC, k-core and MS-BFS kernels read them there. Extra edge-sized layouts (renumbered pull CSR, hub tiles) are built only when
every array is resident.

In-edges: given explicitly (`in_indptr/in_indices`, or a dataset's in-partitions), taken to equal the
out-edges for undirected (symmetric) graphs, or built on the device on first use (`in_csr()`) by a
cuSPARSE CSR->CSC transpose, checked against the same budget.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import GrapheneError
from . import _module

#: Working state the algorithms allocate per vertex on top of the CSR (queues, bins, bitmaps, depth,
#: parent, scores): counted in the budget so a graph that loads can also run.
STATE_BYTES_PER_VERTEX = 48
#: at most this many edges of every list kept in GPU memory as its head while its edge array is
#: read zero-copy (the budget left over decides how many: `heads`)
HEAD_MAX = 32


class GpuMemoryError(GrapheneError):
    """The graph does not fit the GPU memory budget."""


def parse_bytes(x) -> Optional[int]:
    """'4G', '512M', '1.5GiB', 1234 -> bytes; None stays None."""
    if x is None:
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    s = str(x).strip().upper().replace("IB", "").replace("B", "")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    try:
        if s and s[-1] in mult:
            return int(float(s[:-1]) * mult[s[-1]])
        return int(float(s))
    except ValueError:
        raise GrapheneError(f"cannot read GPU memory size {x!r} (use e.g. 4G or 512M)") from None


def _gib(b: int) -> str:
    return f"{b / (1 << 30):.2f} GiB"


def csr_bytes(n: int, m: int, weighted: bool = False) -> int:
    return (n + 1) * 8 + m * 4 + (m * 4 if weighted else 0)


class DeviceGraph:
    """CSR arrays on the GPU. Build with `from_csr` or `from_graph`."""

    def __init__(self, n, ptr, idx, w, in_ptr, in_idx, symmetric, budget):
        self.placement = {"out": "gpu"}       # where each edge array lives: "gpu" or "host"
        self.num_vertices = int(n)
        self.num_edges = int(idx.size)
        self.ptr, self.idx, self.weights = ptr, idx, w
        self._in_ptr, self._in_idx = in_ptr, in_idx
        self.symmetric = bool(symmetric)
        self.budget = budget
        self._bins = {}
        self.heads = {}                       # "out"/"in" -> (the lists' heads, H): see head()
        self._released_heads = {}             # "out"/"in" -> H of heads freed (release_heads)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_csr(cls, indptr, indices, weights=None, in_indptr=None, in_indices=None,
                 symmetric: bool = False, gpu_mem=None, heads=None) -> "DeviceGraph":
        """Upload a CSR. `symmetric=True` declares that in-edges == out-edges (undirected graph).
        An out- or in-edge array left in pinned host memory gets heads in GPU memory (head()): the
        first H edges of every list, H as many as the budget left over holds (at most HEAD_MAX);
        `heads` = H forces a number (0: none), still within the budget."""
        cp = _module.cupy()
        _module.settle()
        indptr = _as_host_or_dev(indptr)
        n = int(indptr.shape[0]) - 1
        if n < 0:
            raise GrapheneError("indptr must have at least one entry")
        if n >= 2 ** 31 - 1:
            raise GrapheneError(f"{n} vertices: the GPU path supports fewer than 2^31 vertices")
        m = int(indices.shape[0])
        has_in = in_indptr is not None
        budget = _budget(gpu_mem)
        vertex_bytes = (n + 1) * 8 * (2 if has_in else 1) + STATE_BYTES_PER_VERTEX * n
        if vertex_bytes > budget:
            raise GpuMemoryError(
                f"graph needs {_gib(vertex_bytes)} of GPU memory for its offsets and per-vertex "
                f"state alone (|V|={n}: {STATE_BYTES_PER_VERTEX} B/vertex of state); the budget is "
                f"{_gib(budget)} (--gpu-mem, or 90% of free device memory)")
        left = budget - vertex_bytes
        placement = {}

        def place(name, nbytes):
            nonlocal left
            if nbytes <= left:
                left -= nbytes
                placement[name] = "gpu"
            else:
                placement[name] = "host"
            return placement[name]

        ptr_d = _upload(indptr, cp.int64)
        idx_d = _upload(indices, cp.int32, check_ids=n, where=place("out", m * 4))
        _check_csr(ptr_d, idx_d, n, "out")
        in_ptr_d = in_idx_d = None
        if has_in:
            in_ptr_d = _upload(in_indptr, cp.int64)
            in_idx_d = _upload(in_indices, cp.int32, check_ids=n,
                               where=place("in", int(in_indices.shape[0]) * 4))
            _check_csr(in_ptr_d, in_idx_d, n, "in")
            if in_idx_d.size != m:
                raise GrapheneError(f"in-edges ({in_idx_d.size}) and out-edges ({m}) differ in count")
        w_d = None
        if weights is not None:
            w_d = _upload(weights, cp.float32, where=place("weights", m * 4))
            if w_d.size != m:
                raise GrapheneError(f"weights has {w_d.size} entries, indices {m}")
        g = cls(n, ptr_d, idx_d, w_d, in_ptr_d, in_idx_d, symmetric, budget)
        g.placement = placement
        hosted = [(k, p, i) for k, p, i in (("out", ptr_d, idx_d), ("in", in_ptr_d, in_idx_d))
                  if placement.get(k) == "host"]
        h = head_edges(left, n, len(hosted), heads)
        if h > 0:
            for k, p, i in hosted:
                g.heads[k] = (_heads(p, i, n, h), h)
        return g

    @classmethod
    def from_graph(cls, graph, gpu_mem=None, check=None) -> "DeviceGraph":
        """Load an opened graphene_py.graph.Graph (all partitions) into GPU memory. check: called
        between the stages (out-lists, in-lists, the copy), may raise to stop the load."""
        check = check or (lambda: None)
        _module.warm_cupyx()          # (while the load waits on the disk; settled below)
        try:
            return cls._from_graph(graph, gpu_mem, check)
        finally:
            _module.settle()

    @classmethod
    def _from_graph(cls, graph, gpu_mem, check) -> "DeviceGraph":
        n = graph.num_vertices
        need = (n + 1) * 8 * (2 if graph.in_partitions is not None else 1) + \
            STATE_BYTES_PER_VERTEX * n
        budget = _budget(gpu_mem)
        if need > budget:  # check before reading the whole dataset from disk
            raise GpuMemoryError(f"{graph.name}: its offsets and per-vertex state need "
                                 f"{_gib(need)} of GPU memory, the budget is {_gib(budget)} "
                                 f"(--gpu-mem)")
        from . import lists
        if n < 2 ** 31 - 1 and lists.resident_loadable(graph):
            dirs = ["out"] + (["in"] if graph.in_partitions is not None else [])
            held = need + sum(graph.num_edges * 4 for _ in dirs) + max(
                lists.load_resident_bytes(graph, d) for d in dirs) + (
                graph.num_edges * 4 if graph.weighted else 0)
            if held <= budget:       # every array resident: straight from the files
                return cls._from_files(graph, dirs, budget, check)
        # 4-byte IDs on the host too while they fit (the device keeps int32 indices): half the
        # bytes to assemble and copy
        idt = np.int32 if n < (1 << 31) else np.int64
        indptr, indices, weights = graph.to_csr("out", index_dtype=idt)
        in_ptr = in_idx = None
        if graph.in_partitions is not None:
            check()
            in_ptr, in_idx, _ = graph.to_csr("in", index_dtype=idt)
        check()
        return cls.from_csr(indptr, indices, weights, in_ptr, in_idx,
                            symmetric=not graph.directed, gpu_mem=budget)

    @classmethod
    def _from_files(cls, graph, dirs, budget, check) -> "DeviceGraph":
        """from_graph when every array is resident and the lists have page tables: each
        direction's lists (and a weighted dataset's out-weights) read in chunks straight into
        its device array (lists.load_resident) instead of a CSR assembled on the host and
        copied."""
        from .lists import load_resident
        arrays = {}
        for d in dirs:
            arrays[d] = load_resident(graph, d, check)      # (both in GPU memory)
            check()
        weights = None
        if graph.weighted:
            _, weights = load_resident(graph, "out", check, kind="wgt")
            check()
        in_ptr, in_idx = arrays.get("in", (None, None))
        if in_idx is not None and in_idx.size != arrays["out"][1].size:
            raise GrapheneError(f"{graph.name}: in-edges ({in_idx.size}) and out-edges "
                                f"({arrays['out'][1].size}) differ in count")
        g = cls(graph.num_vertices, *arrays["out"], weights, in_ptr, in_idx,
                not graph.directed, budget)
        g.placement = {d: "gpu" for d in dirs}
        if weights is not None:
            g.placement["weights"] = "gpu"
        return g

    # -- access ---------------------------------------------------------------------------------
    @property
    def tiered(self) -> bool:
        """Whether some edge array stays in pinned host memory (read zero-copy)."""
        return "host" in self.placement.values()

    def tier(self) -> str:
        """'gpu' (all resident), 'host' (every edge array zero-copy) or 'mixed'."""
        v = set(self.placement.values())
        return "gpu" if v == {"gpu"} else "host" if v == {"host"} else "mixed"

    @property
    def has_in_edges(self) -> bool:
        return self.symmetric or self._in_ptr is not None

    def in_csr(self):
        """(in_ptr, in_idx) on the device; built by a transpose on first use when not given."""
        if self.symmetric:
            return self.ptr, self.idx
        if self._in_ptr is None:
            cp = _module.cupy()
            n, m = self.num_vertices, self.num_edges
            if m == 0:
                self._in_ptr = cp.zeros(n + 1, dtype=cp.int64)
                self._in_idx = cp.zeros(0, dtype=cp.int32)
            else:
                free = cp.cuda.runtime.memGetInfo()[0]
                need = csr_bytes(n, m) + 3 * m * 4  # result + cuSPARSE temporaries (ones, copy)
                if need > free or need + self.bytes() > self.budget + STATE_BYTES_PER_VERTEX * n:
                    raise GpuMemoryError(
                        f"building in-edges on the GPU needs {_gib(need)} more; budget "
                        f"{_gib(self.budget)}, free {_gib(free)} (partition with --in-edges, or "
                        f"raise --gpu-mem)")
                self._in_ptr, self._in_idx = _transpose(self.ptr, self.idx, n)
        return self._in_ptr, self._in_idx

    def head(self, which: str = "out"):
        """(heads, H) of the out- or in-lists: heads[u * H + k] is the k-th edge of u's list (-1 past
        its end), resident in GPU memory while the list itself is read zero-copy; (the edge array,
        0) when there are none (the kernels then read every edge from the array)."""
        if which == "in" and self.symmetric:
            which = "out"
        got = self.heads.get(which)
        if got is None and which in self._released_heads:       # built again when asked for
            h = self._released_heads[which]
            p, i = (self.ptr, self.idx) if which == "out" else self.in_csr()
            got = self.heads[which] = (_heads(p, i, self.num_vertices, h), h)
            del self._released_heads[which]
        if got is not None:
            return got
        return (self.idx if which == "out" else self.in_csr()[1]), 0

    def release_heads(self) -> None:
        """Free the lists' heads for a run that reads none (SSSP: its memory holds staged chunks
        instead, gpu/chunks.py); head() builds them again when a later run asks for them."""
        for k, (_a, h) in self.heads.items():
            self._released_heads[k] = h
        self.heads = {}

    def out_degree(self):
        return self.ptr[1:] - self.ptr[:-1]

    def bins(self, direction: str, bounds=(4, 32, 1024)):
        """Static degree bins [(W, list int32, length)] for whole-graph passes: degree < b0 -> one
        thread, < b1 -> 8-thread group, < b2 -> warp, else a block per vertex."""
        if self.symmetric:
            direction = "out"
        key = (direction, tuple(bounds))
        if key not in self._bins:
            cp = _module.cupy()
            ptr = self.ptr if direction == "out" else self.in_csr()[0]
            deg = ptr[1:] - ptr[:-1]
            out = []
            lo = 0
            for W, hi in zip((1, 8, 32, 0), tuple(bounds) + (None,)):
                mask = deg >= lo if hi is None else (deg >= lo) & (deg < hi)
                lst = cp.flatnonzero(mask).astype(cp.int32)
                out.append((W, lst, int(lst.size)))
                lo = hi
            self._bins[key] = out
        return self._bins[key]

    def gather_layout(self):
        """A renumbered copy of the in-edges for pull kernels, or None when GPU memory is short.

        Vertices are renumbered by descending out-degree (how often each one is gathered), rows are
        stored in the new order and every row's neighbours are sorted by new ID. On power-law graphs
        the hubs' values then share cache lines and stay in L2, and the consecutive neighbours a warp
        reads often fall in one 32-byte sector. Returns (order, inv, ptr_p, idx_p, optr_p):
        new ID i is old vertex order[i], inv[old] = new; ptr_p/idx_p the renumbered in-CSR;
        optr_p offsets whose differences are the out-degrees in the new order. Built once, cached."""
        if "gather" not in self._bins:
            cp = _module.cupy()
            n, m = self.num_vertices, self.num_edges
            free = cp.cuda.runtime.memGetInfo()[0]
            if self.tiered or m * 28 + n * 32 > 0.9 * free:
                self._bins["gather"] = None
            else:
                iptr, iidx = self.in_csr()
                deg = self.ptr[1:] - self.ptr[:-1]
                order = cp.argsort(-deg).astype(cp.int32)
                inv = cp.empty(n, dtype=cp.int32)
                inv[order] = cp.arange(n, dtype=cp.int32)
                optr_p = cp.zeros(n + 1, dtype=cp.int64)
                cp.cumsum(deg[order], out=optr_p[1:])
                del deg
                row = cp.searchsorted(iptr, cp.arange(m, dtype=cp.int64), side="right") - 1
                key = inv[row].astype(cp.uint64) << cp.uint64(32)
                del row
                key |= inv[iidx].astype(cp.uint64)
                key.sort()
                idx_p = (key & cp.uint64(0xFFFFFFFF)).astype(cp.int32)
                rows_p = (key >> cp.uint64(32)).astype(cp.int32)
                del key
                ptr_p = cp.zeros(n + 1, dtype=cp.int64)
                cp.cumsum(cp.bincount(rows_p, minlength=n), out=ptr_p[1:])
                del rows_p
                self._bins["gather"] = (order, inv, ptr_p, idx_p, optr_p)
        return self._bins["gather"]

    def bins_for(self, key, ptr, bounds=(4, 32, 1024)):
        """Degree bins (see bins()) of an arbitrary CSR offsets array, cached under key."""
        k = ("custom", key, tuple(bounds))
        if k not in self._bins:
            cp = _module.cupy()
            deg = ptr[1:] - ptr[:-1]
            out, lo = [], 0
            for W, hi in zip((1, 8, 32, 0), tuple(bounds) + (None,)):
                mask = deg >= lo if hi is None else (deg >= lo) & (deg < hi)
                lst = cp.flatnonzero(mask).astype(cp.int32)
                out.append((W, lst, int(lst.size)))
                lo = hi
            self._bins[k] = out
        return self._bins[k]

    def hub_tiles(self, key, iptr, iidx, hubs, gbits: int, sbits: int, chunk_edges: int,
                  dense_min: int = 0, order: str = "source"):
        """Tile-major copy of the in-edges of the rows `hubs` (int32 device array) for pr_tile, or
        None when GPU memory is short. Cached under (key, gbits, sbits, chunk_edges, len(hubs)).

        Hub h (its index in `hubs`) is in group h >> gbits; source u in segment u >> sbits; tile =
        group * nseg + segment. Edges are sorted by (tile, word), word = (u & (S-1)) << gbits |
        (h & (G-1)) (uint32), so within a tile equal sources are adjacent. Each group's edges are cut
        into chunks of about chunk_edges (one block each; a chunk never spans two groups). Returns a
        dict: words, tile_ptr (int64, ntiles+1), chunk_lo (int64, nchunks+1), chunk_tile (int32:
        the tile of each chunk's first edge), nchunks, nseg, ngroups, hub_edges.
        Tiles with fewer than dense_min edges are left out of the tiles: their edges form a CSR per
        hub instead (rest_ptr int64 nhubs+1, rest_idx int32 source IDs sorted), gathered directly:
        a sparse tile would cost more to stage and walk than its edges save. tiled_edges, rest_edges.
        order "hub": within a tile the words are sorted by hub, then source (pr_tile's RUNS
        variant sums runs of equal hubs); the words keep their encoding."""
        if order not in ("source", "hub"):
            raise ValueError(f"tile order must be 'source' or 'hub', got {order!r}")
        k = ("tiles", key, int(gbits), int(sbits), int(chunk_edges), int(hubs.size), int(dense_min),
             order)
        if k in self._bins:
            return self._bins[k]
        if not (1 <= gbits <= 16 and 1 <= sbits <= 16 and gbits + sbits <= 32):
            raise GrapheneError(f"tile bits out of range: gbits={gbits}, sbits={sbits}")
        cp = _module.cupy()
        n = self.num_vertices
        nh = int(hubs.size)
        hubs64 = hubs.astype(cp.int64)
        hb = iptr[hubs64]
        deg = iptr[hubs64 + 1] - hb
        hptr = cp.zeros(nh + 1, dtype=cp.int64)
        cp.cumsum(deg, out=hptr[1:])
        del deg, hubs64
        eh = int(hptr[-1])
        free = cp.cuda.runtime.memGetInfo()[0]
        if self.tiered or eh * 48 > 0.9 * free:
            self._bins[k] = None
            return None
        G, S = 1 << gbits, 1 << sbits
        nseg = (n + S - 1) >> sbits
        ngroups = (nh + G - 1) >> gbits
        ar = cp.arange(eh, dtype=cp.int64)
        h = cp.searchsorted(hptr, ar, side="right") - 1
        src = iidx[hb[h] + (ar - hptr[h])].astype(cp.int64)
        del ar, hb, hptr
        if order == "hub":       # sorted by hub within the tile; re-encoded after the sort
            word = ((h & (G - 1)) << sbits) | (src & (S - 1))
        else:
            word = ((src & (S - 1)) << gbits) | (h & (G - 1))
        keys = (((h >> gbits) * nseg + (src >> sbits)).astype(cp.uint64) << cp.uint64(32)) | \
            word.astype(cp.uint64)
        del h, src, word
        keys.sort()
        if order == "hub":
            low = keys & cp.uint64(0xFFFFFFFF)
            keys = (keys & ~cp.uint64(0xFFFFFFFF)) | ((low & cp.uint64(S - 1)) << cp.uint64(gbits)) \
                | (low >> cp.uint64(sbits))
            del low
        ntiles = ngroups * nseg
        tiles = (keys >> cp.uint64(32)).astype(cp.int64)
        if dense_min > 0:
            tsize = cp.bincount(tiles, minlength=ntiles)
            dense = (tsize >= dense_min)[tiles]
            del tsize
            rk = keys[~dense]
            keys = keys[dense]
            tiles = tiles[dense]
            del dense
            rt = (rk >> cp.uint64(32)).astype(cp.int64)
            rw = (rk & cp.uint64(0xFFFFFFFF)).astype(cp.int64)
            del rk
            rh = ((rt // nseg) << gbits) | (rw & (G - 1))
            rs = ((rt % nseg) << sbits) | (rw >> gbits)
            del rt, rw
            rkey = (rh.astype(cp.uint64) << cp.uint64(32)) | rs.astype(cp.uint64)
            del rh, rs
            rkey.sort()
            rest_idx = (rkey & cp.uint64(0xFFFFFFFF)).astype(cp.int32)
            rest_ptr = cp.zeros(nh + 1, dtype=cp.int64)
            if rkey.size:
                rh = (rkey >> cp.uint64(32)).astype(cp.int64)
                cp.cumsum(cp.bincount(rh, minlength=nh), out=rest_ptr[1:])
                del rh
            del rkey
        else:
            rest_idx = cp.zeros(0, dtype=cp.int32)
            rest_ptr = cp.zeros(nh + 1, dtype=cp.int64)
        words = (keys & cp.uint64(0xFFFFFFFF)).astype(cp.uint32)
        del keys
        tile_ptr = cp.searchsorted(tiles, cp.arange(ntiles + 1, dtype=cp.int64), side="left")
        del tiles
        et = int(words.size)
        tp = cp.asnumpy(tile_ptr)
        gptr = tp[::nseg]
        lo = []
        for g in range(ngroups):
            a, b = int(gptr[g]), int(gptr[g + 1])
            if b > a:
                c = -(-(b - a) // max(1, int(chunk_edges)))
                lo.extend(a + (b - a) * j // c for j in range(c))
        lo = np.asarray(lo + [et], dtype=np.int64)
        ctile = (np.searchsorted(tp, lo[:-1], side="right") - 1).astype(np.int32)
        self._bins[k] = dict(words=words, tile_ptr=tile_ptr, chunk_lo=cp.asarray(lo),
                             chunk_tile=cp.asarray(ctile), nchunks=int(lo.size - 1), nseg=int(nseg),
                             ngroups=int(ngroups), hub_edges=eh, tiled_edges=et,
                             rest_edges=int(rest_idx.size), rest_ptr=rest_ptr, rest_idx=rest_idx)
        return self._bins[k]

    def drop_tiles(self):
        """Free every cached hub_tiles layout."""
        for k in [k for k in self._bins if isinstance(k, tuple) and k and k[0] == "tiles"]:
            del self._bins[k]

    def _arrays(self):
        yield "ptr", self.ptr
        yield "out", self.idx
        yield "weights", self.weights
        yield "in_ptr", self._in_ptr
        yield "in", self._in_idx
        for k, (a, _h) in self.heads.items():
            yield "heads_" + k, a

    def bytes(self) -> int:
        """Bytes of the graph in GPU memory (pinned host arrays not counted)."""
        return sum(a.nbytes for k, a in self._arrays()
                   if a is not None and self.placement.get(k, "gpu") == "gpu")

    def host_bytes(self) -> int:
        """Bytes of the graph read zero-copy from pinned host memory."""
        return sum(a.nbytes for k, a in self._arrays()
                   if a is not None and self.placement.get(k) == "host")

    def __repr__(self):
        heads = "".join(f", {k} heads of {h}" for k, (_a, h) in self.heads.items())
        return (f"DeviceGraph(|V|={self.num_vertices}, |E|={self.num_edges}, "
                f"{'symmetric, ' if self.symmetric else ''}{_gib(self.bytes())} on GPU, "
                f"{_gib(self.host_bytes())} in pinned host memory{heads})")


def _budget(gpu_mem) -> int:
    b = parse_bytes(gpu_mem)
    if b is None:
        cp = _module.cupy()
        free, _total = cp.cuda.runtime.memGetInfo()
        b = int(free * 0.9)
    return b


def _as_host_or_dev(a):
    return a if hasattr(a, "__cuda_array_interface__") else np.asarray(a)


def _upload(a, dtype, check_ids=None, where="gpu"):
    cp = _module.cupy()
    if hasattr(a, "__cuda_array_interface__"):
        src = cp.asarray(a)
    else:
        src = np.asarray(a)
    if check_ids is not None and src.size:
        lo, hi = int(src.min()), int(src.max())
        if lo < 0 or hi >= check_ids:
            raise GrapheneError(f"neighbour ID out of range [0, {check_ids}): min {lo}, max {hi}")
    if where == "host":
        return _mapped(cp.asnumpy(src) if not isinstance(src, np.ndarray) else src, dtype)
    if isinstance(src, np.ndarray):
        src = np.ascontiguousarray(src, dtype=np.dtype(dtype))
        return cp.asarray(src)
    return cp.ascontiguousarray(src.astype(dtype, copy=False))


def _mapped(a, dtype):
    """A cupy array over pinned host memory holding `a`: the kernels read it over the bus
    (zero-copy). The pinned buffer lives as long as the array."""
    cp = _module.cupy()
    a = np.ascontiguousarray(a, dtype=np.dtype(dtype))
    nbytes = max(a.nbytes, np.dtype(dtype).itemsize)
    pinned = cp.cuda.alloc_pinned_memory(nbytes)
    host = np.frombuffer(pinned, dtype=np.dtype(dtype), count=a.size)
    host[...] = a.ravel()
    mem = cp.cuda.UnownedMemory(pinned.ptr, nbytes, owner=pinned,
                                device_id=cp.cuda.Device().id)
    return cp.ndarray(a.shape, dtype=np.dtype(dtype), memptr=cp.cuda.MemoryPointer(mem, 0))


def head_edges(left: int, n: int, arrays: int, heads=None) -> int:
    """H, the edges of every list kept as its head for `arrays` zero-copy edge arrays of n lists,
    with `left` bytes of the budget free: as many 4-byte IDs per list as fit, at most HEAD_MAX
    (`heads`: at most that many instead); 0 for none."""
    if arrays <= 0 or n <= 0 or left <= 0:
        return 0
    fit = left // (4 * n * arrays)
    return max(0, min(HEAD_MAX if heads is None else int(heads), fit))


def _heads(ptr, idx, n, h):
    """The first h edges of every list (kernels.cu edge_heads), in GPU memory."""
    cp = _module.cupy()
    head = cp.empty(n * h, dtype=cp.int32)
    k = _module.module().get_function("edge_heads")
    k((min(max(1, (n * h + 255) // 256), 1 << 16),), (256,), (ptr, idx, np.int64(n), np.int32(h), head))
    return head


def _check_csr(ptr, idx, n, what):
    cp = _module.cupy()
    if int(ptr[0]) != 0 or int(ptr[-1]) != idx.size:
        raise GrapheneError(f"{what}-CSR: indptr must start at 0 and end at len(indices)={idx.size}")
    if n > 0 and bool(cp.any(ptr[1:] < ptr[:-1])):
        raise GrapheneError(f"{what}-CSR: indptr is not non-decreasing")


def _transpose(ptr, idx, n):
    """CSR -> CSR of the transpose, lists sorted (cuSPARSE csr2csc through cupyx)."""
    cp = _module.cupy()
    import cupyx.scipy.sparse as sp
    ones = cp.ones(idx.size, dtype=cp.float32)
    a = sp.csr_matrix((ones, idx, ptr.astype(cp.int32) if ptr[-1] < 2 ** 31 else ptr), shape=(n, n))
    c = a.tocsc()
    del ones, a
    return c.indptr.astype(cp.int64), c.indices.astype(cp.int32)
