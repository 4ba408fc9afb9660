"""The engine contract algorithms are written against (Ligra's edgeMap, in spirit).

An algorithm says *what* a superstep does; the engine decides *how*:

    VISIT = Update(_always, _visit, combine="first")      # push: claim unvisited out-neighbours
    ADOPT = Update(_unvisited, _adopt, combine="first")   # pull: adopt a neighbour in the frontier

    with EdgeMap(graph, pull=True, **runtime) as em:      # opens the edge directions it needs
        st = em.edge_map(state, frontier_ids, push=VISIT, pull=ADOPT, pull_mask=unvisited)

`Update(is_active, compute, combine)`: the numba pair IoIterator runs on every (chunk of an) active
vertex's list — is_active(v, state) and compute(v, nbrs, wts, tid, state) — and how concurrent
updates of one vertex combine: "min", "max", "sum", "or", or "first" (the first writer wins and
later ones leave it). A vertex's list may arrive in several chunks on several threads, and a
backend that splits the work further (devices, machines) merges partial results by this rule; it
is declared so that every backend can, without reading the kernel.

A backend that runs a superstep in pieces on several machines (cluster/) also needs to know which
state slots a kernel writes and how each combines: `Update(..., writes=((2, "first"), (3, "first"),
(0, "or")), queue=(4, 5, 6))` — a slot given as a bare index combines by `combine`; `queue` names
the (ids, tail, cur) slots of a NextQueue the kernel appends to (the pieces' queues are merged and
deduplicated). Slots not listed are read only. An Update without `writes` runs everywhere but on a
cluster.

`edge_map` picks the direction by the shared cost model (iterator/cost.py): the push reads the
out-lists of the frontier; the pull (when the algorithm gives one and the dataset can pull: an
undirected dataset, or in-edge partitions) reads the lists of the vertices in `pull_mask`; the one
that reads fewer bytes runs. Where the caller also estimates each direction's compute (`work`;
BFS does) and the devices are calibrated, the faster runs instead: max(IO at the devices'
bandwidth, compute over the threads). The caller may pass the pull's cost when it keeps it
incrementally (BFS does: it only shrinks), or force a direction ("push"/"pull"). Everything
else — request translation, planning, IO, threads, stealing, integrity checks — is IoIterator's.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from .. import jit as _jit
from ..io import offsets as _co
from .cost import Model, pull_direction
from .memory import track

COMBINES = ("min", "max", "sum", "or", "first")


@dataclass(frozen=True)
class Update:
    is_active: object
    compute: object
    combine: str
    writes: tuple = ()       # state slots the kernel writes: index, (index, combine), or
    #                          (index, combine, (row_lo, row_hi)): those rows of a 2-D slot
    queue: tuple = ()        # (ids, tail, cur) slots of a NextQueue the kernel appends to
    reads: object = None     # a 1-D slot the kernel reads at each neighbour's ID, or (slot, row)
    #                          of a 2-D one: the engine asks for those elements a few dozen
    #                          neighbours ahead (iterator.prefetch)

    def __post_init__(self):
        if self.combine not in COMBINES:
            raise ValueError(f"combine must be one of {', '.join(COMBINES)} (got {self.combine!r})")
        for w in self.writes:
            rule = w[1] if isinstance(w, tuple) else self.combine
            if rule not in COMBINES:
                raise ValueError(f"combine of slot {w[0]} must be one of {', '.join(COMBINES)} "
                                 f"(got {rule!r})")
        if self.queue and len(self.queue) != 3:
            raise ValueError("queue names three state slots: (ids, tail, cur)")
        r = self.reads
        if not (r is None or _slot_index(r) or (isinstance(r, tuple) and len(r) == 2
                                                and all(map(_slot_index, r)))):
            raise ValueError(f"reads names a state slot (an index) or (slot, row) (got {r!r})")

    def __getattribute__(self, name):
        # the kernels as numba made them: an Update built at import holds graphene_py.jit's
        # stand-ins (numba is imported when a kernel is first needed), swapped here on first use
        # once numba is in (before, the engine takes the stand-ins: kernels compiled ahead of
        # time run without numba, aot.py)
        v = object.__getattribute__(self, name)
        if name in ("is_active", "compute") and type(v) is _jit._Lazy and (
                v._real is not None or _jit.materialized()):
            v = _jit.real(v)
            object.__setattr__(self, name, v)
        return v

    def slots(self) -> list:
        """[(slot, combine, rows)] of the state the kernel writes (the queue apart); rows: a
        (lo, hi) range of a 2-D slot's rows, or None for the whole slot."""
        out = []
        for w in self.writes:
            w = w if isinstance(w, tuple) else (int(w), self.combine)
            out.append((w[0], w[1], w[2] if len(w) > 2 else None))
        return out

    def ahead(self, state):
        """The slot to ask for ahead (`reads`), or None: a 1-D array only."""
        if self.reads is None:
            return None
        try:
            a = (state[self.reads[0]][self.reads[1]] if isinstance(self.reads, tuple) else
                 state[self.reads])
        except (IndexError, TypeError):
            raise ValueError(f"reads={self.reads!r} names no slot of this state "
                             f"({len(state)} slots)") from None
        return a if isinstance(a, np.ndarray) and a.ndim == 1 else None

    def part(self, state, slot, rows):
        """The written part of a slot (a view)."""
        a = state[slot]
        return a if rows is None else a[rows[0]:rows[1]]

    def __reduce__(self):
        # Pickled (to a cluster node) by the kernels' import names where they have them: a
        # pickled numba dispatcher comes back as a new object that the iterator's on-disk kernel
        # cache does not recognise, and every process would compile it again (~1 s per kernel).
        return (_rebuild, (_name_of(self.is_active), _name_of(self.compute), self.combine,
                           self.writes, self.queue, self.reads))


def _slot_index(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0


def _name_of(fn):
    """("import", module, name) of a module-level function importable by that name, else fn."""
    # a kernel's stand-in (jit._Lazy) names its function without importing numba
    py = fn.__wrapped__ if isinstance(fn, _jit._Lazy) else getattr(fn, "py_func", None)
    mod = sys.modules.get(getattr(py, "__module__", None) or "")
    name = getattr(py, "__qualname__", "")
    if mod is not None and getattr(mod, name, None) is fn:
        return ("import", py.__module__, name)
    return fn


def _rebuild(is_active, compute, combine, writes, queue, reads=None):
    import importlib

    def fn(x):
        if isinstance(x, tuple) and len(x) == 3 and x[0] == "import":
            return getattr(importlib.import_module(x[1]), x[2])
        return x
    return Update(fn(is_active), fn(compute), combine, writes, queue, reads)


class EdgeMap:
    """The directions of one dataset an algorithm reads, their degrees and cost models.

    pull: open the pull direction too (when the dataset has one); out=False: open only the pull
    direction (a pull-only algorithm on a directed dataset); weights: read weights with the
    lists. Runtime options (engine, threads, in_memory, ...) go to every IoIterator."""

    #: the lists pass through this process (an algorithm may keep some in RAM); False on a cluster
    local = True

    def __new__(cls, graph, *args, **kwargs):
        # a dataset served by a cluster brings its own backend (graphene_py.cluster)
        # (a subclass of EdgeMap; Python then runs its __init__)
        backend = getattr(graph, "edge_map_backend", None)
        return super().__new__(backend if backend is not None and cls is EdgeMap else cls)

    def __init__(self, graph, *, pull: bool = False, weights: bool = False, in_memory=False,
                 degree_dtype=None, out: bool = True, **runtime):
        pkg = sys.modules[__package__]   # graphene_py.iterator: its IoIterator (tests swap in a
        self._pkg = pkg                  # stand-in that cuts lists into many chunks)
        IoIterator = pkg.IoIterator
        self.graph = graph
        self.n = graph.num_vertices
        self.its = {}
        self.pull_dir = pull_direction(graph, pull)
        wide = graph.num_edges >= (1 << 31)
        self.ddt = degree_dtype or (np.int64 if wide else np.int32)
        try:
            if out or self.pull_dir != "in":
                self.its["out"] = IoIterator(graph, "out", in_memory=in_memory, weights=weights,
                                             **runtime)
            if self.pull_dir == "in":
                self.its["in"] = IoIterator(graph, "in", in_memory=in_memory, weights=weights,
                                            **runtime)
        except BaseException:
            self.close()
            raise
        self.models = {d: Model(graph, d) for d in self.its}
        self.deg = {}            # degrees of each direction, computed when first needed
        self.kept = {}           # direction -> ShortLists (keep_lists)
        self.open_seconds = sum(getattr(it, "open_seconds", 0.0) for it in self.its.values())

    @property
    def threads(self) -> int:
        return next(iter(self.its.values())).threads

    def on_threads(self, job) -> None:
        """job(tid) for every tid in range(self.threads), for passes over vertex ranges between
        supersteps: tid 0 on this thread, the others on the iterator's helper threads (one after
        the other here when it has none: a cluster's, a stand-in's). Returns when every call
        has; re-raises the first error."""
        it = next(iter(self.its.values()), None)       # (a cluster's has none here)
        h = getattr(it, "_helpers", None)
        if h is not None and h.count + 1 == self.threads:
            h.run(job)
        else:
            for t in range(self.threads):
                job(t)

    def on_ranges(self, n: int, job, align: int = 64) -> None:
        """job(t, lo, hi) for thread t's share [lo, hi) of 0..n, on the compute threads
        (on_threads): bounds at multiples of `align` (64: no two threads write one 64-bit word
        of a vertex bitmap, nor one cache line of a byte row)."""
        T = max(1, self.threads)
        b = [min(n, (n * t // T) // align * align) for t in range(T)] + [n]
        self.on_threads(lambda t: job(t, b[t], b[t + 1]))

    def degree(self, direction: str = "out") -> np.ndarray:
        """Degree of every vertex in `direction` (from the offsets in RAM; cached)."""
        if direction not in self.deg:
            it = self.its.get(direction)
            self.deg[direction] = (it.degrees(self.ddt) if hasattr(it, "degrees") else
                                   self.graph.degrees(direction).astype(self.ddt))
            track(f"degrees ({direction})", self.deg[direction])
        return self.deg[direction]

    def add_degree(self, direction: str, out: np.ndarray) -> None:
        """out += the degree of every vertex in `direction`: from the offsets in RAM without a
        degree array where the iterator holds them."""
        it = self.its.get(direction)
        if direction not in self.deg and hasattr(it, "add_degrees"):
            offs, dd = self.degree_view(direction)
            if isinstance(offs, tuple) and dd is not None:
                # the compact offsets' block walk, split over the compute threads
                from .kernels import add_degrees_range
                self.on_ranges(len(out), lambda t, lo, hi: add_degrees_range(offs, dd, lo, hi,
                                                                            out))
            else:
                it.add_degrees(out)
        else:
            out += self.degree(direction)

    def max_degree_bound(self, direction: str = "out") -> int:
        """An upper bound of the largest degree in `direction` (exact where a degree array is
        made anyway), without a degree array where the iterator holds the offsets."""
        it = self.its.get(direction)
        if direction not in self.deg and hasattr(it, "max_degree_bound"):
            return int(it.max_degree_bound())
        d = self.degree(direction)
        return int(d.max()) if len(d) else 0

    def keep_lists(self, direction: str = "out", budget: int = None, cache: bool = False):
        """Keep the short lists of `direction` in RAM once read (iterator/shortlists.py), within
        `budget` stored entries (default n); later masked supersteps serve them from RAM. Returns
        the ShortLists, or None where lists do not pass through this process (a cluster).
        cache: reported as part of the adjacency cache, not of the run's state (ShortLists)."""
        if not self.local or direction not in self.its:
            return None
        if direction not in self.kept:
            from .shortlists import ShortLists
            deg, diff = self.degree_view(direction)     # 1x1: the offsets, no degree array
            self.kept[direction] = ShortLists(deg, self.n if budget is None else int(budget),
                                              self.graph.id_width, direction, diff=diff,
                                              n=self.n, cache=cache)
        return self.kept[direction]

    def short_lists(self, direction: str = "out", upto: int = None):
        """Read `direction`'s short-list file (its lists of degree 1..upto, default all it holds:
        iterator/shortfile.py) into RAM; the masked supersteps that follow serve the flagged
        vertices whose lists are there from it. Returns the ShortFile, or None where it cannot
        be used: the dataset has none, the lists are in RAM already or do not pass through this
        process, weights are read, or the run's cache budget (`--memory`) has no room for it."""
        short = self.__dict__.setdefault("short", {})
        if direction in short:
            return short[direction]
        it = self.its.get(direction)
        got = self.graph.short_lists(direction) if it is not None and self.local else None
        budget = getattr(it, "cache_budget", None)
        if (got is None or budget is None or getattr(it, "in_memory", True)
                or getattr(it, "weights", True)):       # (a stand-in iterator: neither)
            return None
        from ..partition.short import group_bytes
        ent = got[0]
        D = len(ent["counts"]) if upto is None else max(0, min(int(upto), len(ent["counts"])))
        nbytes = group_bytes(ent, D)
        if D == 0 or not budget.take(nbytes):
            return None
        from .shortfile import ShortFile
        try:
            sf = ShortFile(self.graph, direction, D)
        except BaseException:
            budget.give(nbytes)
            raise
        sf.budget = budget
        short[direction] = sf
        return sf

    def degree_view(self, direction: str = "out"):
        """(O, dd): every vertex's degree in `direction` as io/offsets.py's deg_at(O, dd, v)
        reads it, for the kernels of the cost model, BFS, WCC and PageRank: the compact offsets
        the iterator holds and their grid (no degree array); where there are none (a cluster's
        EdgeMap), compact prefix sums of the degrees."""
        views = self.__dict__.setdefault("_dview", {})
        if direction not in views:
            it = self.its.get(direction)
            dd = None
            parts = getattr(it, "parts", None)
            if parts is not None and isinstance(getattr(it, "offs", None), tuple):
                dd = _co.grid(it.part_base, [p.row_lo for p in parts],
                              [p.row_hi for p in parts], self.n)
            if dd is not None:
                views[direction] = (it.offs, dd)
            else:
                views[direction] = _co.of_degrees(self.degree(direction))
                track(f"degrees ({direction}, compact)", *_co.arrays(views[direction][0]))
        return views[direction]

    def push_cost(self, ids) -> int:
        deg, diff = self.degree_view("out")
        return self.models["out"].lists(deg, ids, diff=diff)

    def pull_cost(self, mask) -> int:
        d = self.pull_dir
        deg, diff = self.degree_view(d)
        return self.models[d].where(mask, deg, diff=diff)

    def io_seconds(self, direction: str, nbytes) -> float:
        """Predicted seconds to read nbytes of a direction's lists at the best bandwidth its
        devices' calibrated profiles measured (io/calibrate.py; IO workers on distinct devices
        add up); None where the requests are not planned from profiles (fixed settings, lists in
        RAM, a cluster)."""
        it = self.its.get(direction)
        profs = getattr(it, "profiles", None)
        if not profs or getattr(it, "in_memory", False):
            return None
        return float(nbytes) / sum(p.bandwidth for p in profs)

    def _pull_wins(self, push_cost, pull_cost, work):
        """Direction choice from bytes (work None, or no device profile), else from time: each
        direction takes max(its IO at the devices' bandwidth, its compute over the threads),
        since the IO of a superstep overlaps its compute. work: (push, pull) compute seconds of
        one thread (the caller's estimate)."""
        if work is not None:
            tp = self.io_seconds("out", push_cost)
            tl = self.io_seconds(self.pull_dir, pull_cost)
            if tp is not None and tl is not None:
                t = max(1, self.threads)
                return max(tl, work[1] / t) < max(tp, work[0] / t)
        return pull_cost < push_cost

    def edge_map(self, state, frontier_ids, push: Update, pull: Update = None, pull_mask=None,
                 pull_cost=None, force=None, push_cost=None, work=None) -> dict:
        """One superstep. frontier_ids: int32 or int64 vertex IDs (the push frontier); pull_mask: uint8 per
        vertex, the vertices whose lists a pull reads, or a callable making it (called only when
        the pull runs: building it costs a pass over the vertices); pull_cost / push_cost: the
        pull's / push's bytes (uncapped) when the caller has them (else computed from the mask /
        the frontier); work: (push, pull) estimated compute seconds of one thread, to choose by
        time where the devices are calibrated (`_pull_wins`). Returns the superstep's stats, with
        "direction" ("top-down": push, "bottom-up": pull)."""
        use_pull = False
        if pull is not None and self.pull_dir is not None and pull_mask is not None:
            if force == "pull":
                use_pull = True
            elif force != "push":
                if pull_cost is None:
                    pull_mask = pull_mask() if callable(pull_mask) else pull_mask
                    pull_cost = self.pull_cost(pull_mask)
                push_cost = (self.push_cost(frontier_ids) if push_cost is None else
                             min(int(push_cost), self.models["out"].cap))
                use_pull = self._pull_wins(push_cost, min(int(pull_cost),
                                                          self.models[self.pull_dir].cap), work)
        if use_pull:
            mask = pull_mask() if callable(pull_mask) else pull_mask
            st = self._run(self.pull_dir, pull, state, "mask", mask)
            st["direction"] = "bottom-up"
        else:
            st = self._run("out", push, state, "queue", frontier_ids)
            st["direction"] = "top-down"
        return st

    def dense(self, state, update: Update, direction: str = "out", again: bool = False) -> dict:
        """One superstep over every list of a direction (PageRank, SpMV, label propagation).
        again: another pass over every list follows (an iterative algorithm that has not
        converged yet): the read-through cache copies the lists in on this read."""
        return self._run(direction, update, state, "all", again)

    def masked(self, state, update: Update, mask, direction: str = "out",
               again: bool = False) -> dict:
        """One superstep over the lists of one direction of the vertices flagged in `mask`.
        again: a later superstep will read most of these lists again (the read-through cache
        copies them in on this first read; Frontier.from_mask)."""
        return self._run(direction, update, state, "mask", mask, again)

    def queued(self, state, update: Update, ids, direction: str = "out") -> dict:
        """One superstep over the lists of one direction of the vertices in `ids`."""
        return self._run(direction, update, state, "queue", ids)

    def across(self, state, update: Update, dirs, *, mask=None, ids=None) -> list:
        """The lists of every direction in `dirs` of the vertices flagged in `mask` (or listed in
        `ids`): one superstep per direction, in order, here; their stats, one dict each. For an
        update whose result does not depend on the order the directions run in (its writes
        combine by min, max, or or sum; no queue): a cluster runs them all in one round trip to
        its nodes and returns one dict (each node runs its directions in turn)."""
        kind, data = ("mask", mask) if ids is None else ("queue", ids)
        return [self._run(d, update, state, kind, data) for d in dirs]

    def _run(self, direction, update, state, kind, data, again=False) -> dict:
        """Run `update` over the lists of one direction: kind "queue" (data: vertex IDs), "mask"
        (data: a flag per vertex; again: Frontier.from_mask's) or "all" (data: whether another
        pass follows, Frontier.all's again). The backend's part; a cluster overrides it."""
        F = self._pkg.Frontier
        sf = self.__dict__.get("short", {}).get(direction)
        if sf is not None and kind == "mask":
            return self._run_short(sf, direction, update, state, data, again)
        kept = self.kept.get(direction)
        if kept is not None and kind == "mask":
            return kept.run_masked(self.its[direction], update.is_active, update.compute, state,
                                   data, F, self.threads, again=again)
        fr = (F.from_queue(data, self.n) if kind == "queue" else
              F.from_mask(data, again=again) if kind == "mask" else
              F.all(self.n, again=True) if data else F.all(self.n))
        return self.its[direction].run(update.is_active, update.compute, state, fr,
                                       ahead=update.ahead(state))

    def drop_short_lists(self, direction: str = "out") -> None:
        """Free `direction`'s short-list file (short_lists): later supersteps read from the
        disks again."""
        sf = self.__dict__.get("short", {}).pop(direction, None)
        if sf is not None:
            sf.budget.give(sf.bytes)

    def _run_short(self, sf, direction, update, state, mask, again) -> dict:
        """A masked superstep with a short-list file in RAM: its flagged vertices from RAM on
        every compute thread, then one superstep over the rest from the disks (if any)."""
        t0 = time.perf_counter()
        rest = mask.astype(np.uint8, copy=True)
        edges = sf.serve(self, update.is_active, update.compute, state, mask, rest)
        t1 = time.perf_counter()
        served = int(np.count_nonzero(mask)) - int(np.count_nonzero(rest))
        del self.short[direction]             # (the rest's superstep: the usual way)
        try:
            st = (self._run(direction, update, state, "mask", rest, again) if rest.any()
                  else {"mode": "short lists", "frontier": 0, "active_edges": 0, "bytes_read": 0,
                        "bytes_useful": 0, "requests": 0, "extents": 0, "blocks_marked": 0})
        finally:
            self.short[direction] = sf
        st = dict(st)
        st["short_lists"] = served
        st["active_edges"] = int(st.get("active_edges", 0)) + edges
        st["compute_seconds"] = float(st.get("compute_seconds", 0.0)) + (t1 - t0)
        st["seconds"] = float(st.get("seconds", 0.0)) + (t1 - t0)
        st["bytes_useful"] = int(st.get("bytes_useful", 0)) + edges * self.graph.id_width
        if not sf.counted:      # the file's read belongs to the first superstep it serves
            sf.counted = True
            st["bytes_read"] = int(st.get("bytes_read", 0)) + sf.bytes
            st["io_seconds"] = float(st.get("io_seconds", 0.0)) + sf.read_seconds
            st["seconds"] += sf.seconds
        return st

    def close(self):
        for d in list(self.__dict__.get("short", {})):
            self.drop_short_lists(d)
        for it in self.its.values():
            it.close()
        self.its = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
