"""Vertex names: what users call the vertices of a dataset, beside the IDs 0..n-1 the engine uses.

    names = graph.vertex_names()       # None when the IDs are the names
    names.kind                         # "label" (partitioned with --labels) or "original_id" (--relabel)
    names.id_of("alice") -> 17         # GrapheneError naming the dataset when there is no such vertex
    names.name_of(17) -> "alice"       # (an int for original IDs)
    names.take(ids) -> list            # names of many IDs; a negative ID (no vertex) -> None
    names.chunks(rows)                 # the names of vertices 0.., `rows` at a time (streaming)
    resolve_options(graph, opts)       # `src`/`sources` given as names (strings) -> vertex IDs
    NamedValues(names, values)         # read-only Mapping {name: value} over a numpy result

A --labels dataset keeps its names in labels.txt on disk 0 (line i: the name of vertex i; written
in one pass by graphene_py/partition/labels.py). Its CRC32 is checked the first time the file is
used, so a damaged table is an error, never a wrong name. A name is looked up by a scan of the file
(one `find`, no index in memory); naming many vertices builds the line offsets once (8 bytes per
vertex). A --relabel dataset's names are its original integer IDs (relabel.npy, sorted: a lookup
is a binary search).

Strings are names, integers are IDs: in the API `src=17` is vertex ID 17 and `src="17"` the vertex
named 17 (or, on a --relabel dataset, with original ID 17). On the command line every value is a
string, so `--src` and `--sources` take names whenever the dataset has them.
"""
from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Mapping

import numpy as np

from .errors import DatasetError, GrapheneError

#: name lookups answered by a scan of the label table before an index of it is built
SCANS = 4
#: bytes of the label table looked at at once by a scan
SCAN_BLOCK = 64 << 20


def vertex_names(graph):
    """The VertexNames of a dataset, or None (graph.vertex_names() calls this)."""
    m = getattr(graph, "manifest", None) or {}
    if m.get("labels"):
        return Labels(graph)
    if m.get("relabel"):
        return OriginalIds(graph)
    return None


class VertexNames:
    kind = ""
    #: the column a vertex's name gets in a saved table
    column = ""

    def __init__(self, graph):
        self.graph = graph
        self.n = int(graph.num_vertices)

    def where(self) -> str:
        return f"dataset {self.graph.name}"

    def id_of(self, name) -> int:
        raise NotImplementedError

    def take(self, ids) -> list:
        raise NotImplementedError

    def name_of(self, v: int):
        return self.take([int(v)])[0]

    def chunks(self, rows: int):
        for lo in range(0, self.n, rows):
            yield self.take(np.arange(lo, min(self.n, lo + rows)))

    def __len__(self):
        return self.n

    def __iter__(self):
        """Every vertex's name in ID order (read in pieces: the file is not loaded whole)."""
        for piece in self.chunks(1 << 16):
            yield from piece

    def array(self) -> np.ndarray:
        """Every vertex's name as one numpy array (str or int64), for .npz files."""
        parts = list(self.chunks(1 << 20))
        return np.concatenate([np.asarray(p) for p in parts]) if parts else \
            np.zeros(0, dtype=self.dtype)


class Labels(VertexNames):
    kind = "label"
    column = "label"
    dtype = np.str_

    def __init__(self, graph):
        super().__init__(graph)
        self.path = os.path.join(graph.dirs[0], graph.manifest["labels"])
        self._mm = None
        self._off = None
        self._index = None
        self._lookups = 0

    def _map(self):
        if self._mm is None:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            crc = 0
            for lo in range(0, size, 64 << 20):
                crc = zlib.crc32(mm[lo:lo + (64 << 20)], crc)
            want = self.graph.manifest.get("labels_crc")
            if want and f"{crc:08x}" != want:
                raise DatasetError(f"{self.graph.name}: the vertex names in {self.path} are "
                                   f"damaged (checksum {crc:08x}, manifest {want}); partition the "
                                   f"input again")
            self._mm = mm
        return self._mm

    def offsets(self) -> np.ndarray:
        """Start of every name in the file, plus the end (n+1 int64)."""
        if self._off is None:
            mm = self._map()
            arr = np.frombuffer(mm, np.uint8) if len(mm) else np.zeros(0, np.uint8)
            ends = [np.flatnonzero(arr[lo:lo + (64 << 20)] == 10) + lo
                    for lo in range(0, len(arr), 64 << 20)]
            ends = np.concatenate(ends) if ends else np.zeros(0, np.int64)
            if len(ends) != self.n:
                raise DatasetError(f"{self.graph.name}: {self.path} names {len(ends)} vertices, "
                                   f"the dataset has {self.n}")
            off = np.empty(self.n + 1, np.int64)
            off[0] = 0
            off[1:] = ends + 1
            self._off = off
        return self._off

    def id_of(self, name) -> int:
        key = str(name).encode()
        if key and not any(c in key for c in b" \t\r\n,"):
            self._lookups += 1
            if self._lookups > SCANS or self._index is not None:
                i = self._indexed(key)
            else:
                i = self._scan(key)
            if i is not None:
                return i
        raise GrapheneError(f"no vertex named {str(name)!r} in {self.where()}")

    def _scan(self, key):
        """One pass over the file (the first few lookups: a --src needs no index)."""
        mm = self._map()
        if mm[:len(key) + 1] == key + b"\n":
            return 0
        pos = mm.find(b"\n" + key + b"\n")
        if pos < 0:
            return None
        return int(np.count_nonzero(np.frombuffer(mm, np.uint8, count=pos + 1) == 10))

    def _indexed(self, key):
        """Binary search among the names' 64-bit hashes (built once: 16 bytes per vertex beside
        the offsets), the name itself compared to rule out a collision."""
        from .namehash import hash_lines, hash_name
        off = self.offsets()
        mm = self._map()
        if self._index is None:
            h = hash_lines(np.frombuffer(mm, np.uint8) if len(mm) else np.zeros(0, np.uint8), off)
            order = np.argsort(h, kind="stable")
            self._index = (h[order], order)
        hs, order = self._index
        h = hash_name(np.frombuffer(key, np.uint8))
        lo = int(np.searchsorted(hs, h))
        while lo < len(hs) and hs[lo] == h:
            i = int(order[lo])
            if mm[off[i]:off[i + 1] - 1] == key:
                return i
            lo += 1
        return None

    def name_of(self, v: int):
        """One name: the first few without the offsets (a pass counting newlines, no memory per
        vertex: a run's src_name on a huge graph), then through them."""
        v = int(v)
        if v < 0:
            return None
        self._lookups += 1
        if self._off is not None or self._lookups > SCANS:
            return self.take([v])[0]
        mm = self._map()
        start, seen, blk = (0 if v == 0 else None), 0, SCAN_BLOCK
        for lo in range(0, len(mm), blk) if v else ():
            nl = np.flatnonzero(np.frombuffer(mm, np.uint8, count=min(blk, len(mm) - lo),
                                              offset=lo) == 10)
            if seen + len(nl) >= v:
                start = lo + int(nl[v - seen - 1]) + 1
                break
            seen += len(nl)
        end = mm.find(b"\n", start) if start is not None else -1
        if end < 0:
            raise DatasetError(f"{self.graph.name}: {self.path} has no line for vertex {v} of "
                               f"{self.n}")
        return mm[start:end].decode("utf-8", "replace")

    def take(self, ids) -> list:
        off = self.offsets()
        mm = self._map()
        out = []
        for i in np.asarray(ids, dtype=np.int64).ravel().tolist():
            out.append(None if i < 0 else mm[off[i]:off[i + 1] - 1].decode("utf-8", "replace"))
        return out

    def chunks(self, rows: int):
        off = self.offsets()
        mm = self._map()
        for lo in range(0, self.n, rows):
            hi = min(self.n, lo + rows)
            yield mm[off[lo]:off[hi] - 1].decode("utf-8", "replace").split("\n")


class OriginalIds(VertexNames):
    kind = "original_id"
    column = "original_id"
    dtype = np.int64

    def __init__(self, graph):
        super().__init__(graph)
        self._rel = None

    def rel(self):
        if self._rel is None:
            self._rel = np.asarray(self.graph.relabel_map())
        return self._rel

    def id_of(self, name) -> int:
        try:
            x = int(str(name).strip())
        except ValueError:
            raise GrapheneError(f"{str(name)!r} is not a vertex ID (the vertices of "
                                f"{self.where()} are integers)") from None
        rel = self.rel()
        i = int(np.searchsorted(rel, x))
        if i < len(rel) and int(rel[i]) == x:
            return i
        raise GrapheneError(f"no vertex with original ID {x} in {self.where()} (partitioned with "
                            f"--relabel: the IDs of its input file)")

    def take(self, ids) -> list:
        ids = np.asarray(ids, dtype=np.int64).ravel()
        rel = self.rel()
        return [None if i < 0 else int(rel[i]) for i in ids.tolist()]

    def chunks(self, rows: int):
        rel = self.rel()
        for lo in range(0, self.n, rows):
            yield rel[lo:lo + rows].tolist()


def _flag(key, cli):
    return "--" + key.replace("_", "-") if cli else key


def _resolve_one(graph, names, value, key, cli):
    if not isinstance(value, str):
        return value
    if names is not None:
        try:
            return names.id_of(value)
        except GrapheneError as e:
            raise GrapheneError(f"{_flag(key, cli)} {value}: {e}") from None
    try:
        return int(value.strip())
    except ValueError:
        raise GrapheneError(f"{_flag(key, cli)} {value!r} is not a vertex ID (the vertices of "
                            f"dataset {graph.name} have no names: partition with --labels to "
                            f"use names)") from None


def resolve_options(graph, opts: dict, cli: bool = False) -> dict:
    """opts with `src` and `sources` given as strings (names; a comma-separated string of them
    for `sources`) replaced by vertex IDs; integers pass unchanged."""
    if not any(isinstance(opts.get(k), str) or
               (k == "sources" and isinstance(opts.get(k), (list, tuple)) and
                any(isinstance(x, str) for x in opts[k])) for k in ("src", "sources")):
        return opts
    names = vertex_names(graph)
    out = dict(opts)
    if isinstance(out.get("src"), str):
        out["src"] = _resolve_one(graph, names, out["src"], "src", cli)
    s = out.get("sources")
    if s is not None and not isinstance(s, np.ndarray):
        items = [x for x in s.split(",") if x.strip()] if isinstance(s, str) else list(s)
        out["sources"] = [_resolve_one(graph, names, x.strip() if isinstance(x, str) else x,
                                       "sources", cli) for x in items]
    return out


class NamedValues(Mapping):
    """A read-only mapping {vertex name: value} over a per-vertex numpy array (no Python object
    per vertex until one is asked for); names are IDs when the dataset has none."""

    def __init__(self, names, values):
        self._names, self._v = names, np.asarray(values)

    def __getitem__(self, name):
        if self._names is None:
            if isinstance(name, (int, np.integer)) and 0 <= int(name) < len(self._v):
                return self._v[int(name)].item()
            raise KeyError(name)
        try:
            return self._v[self._names.id_of(name)].item()
        except GrapheneError:
            raise KeyError(name) from None

    def __iter__(self):
        if self._names is None:
            yield from range(len(self._v))
            return
        for part in self._names.chunks(1 << 16):
            yield from part

    def __len__(self):
        return len(self._v)

    def __repr__(self):
        return f"NamedValues({len(self)} vertices)"
