"""The on-disk dataset: manifest, partition descriptors, offsets, open and verify.

Layout (format version 2). A dataset named NAME on disks D0..Dk-1 is the container `Di/NAME/` on
every disk, holding a `CURRENT` pointer and one folder per version (graphene_py/store.py: versioned
folders, one atomic commit point, recovery). A version folder holds a copy of `manifest.json` plus
the partition files assigned to that disk (format 1, still read, kept them in `Di/NAME/` itself):

    out_r{r}_c{c}.adj   neighbour IDs (uint32 or uint64 little-endian), zero-padded to 512 bytes
    out_r{r}_c{c}.off   uint64 offsets, (row_hi - row_lo + 1) entries, in *edges* (not bytes),
                        local to the partition: the neighbours of v are adj[off[v-row_lo]:off[v-row_lo+1]]
    out_r{r}_c{c}.wgt   float32 weights parallel to .adj (weighted datasets), zero-padded to 512 bytes
    in_r{r}_c{c}.*      the same for the transposed graph (in-edges), when made with --in-edges
    *.adj.pcrc, *.wgt.pcrc  one CRC32C (uint32 LE) per 4 KB page of the data file (format 2)
    out.short, in.short the lists of degree 1..D once more, grouped by degree (partition/short.py;
                        the manifest's `short` section says where; older datasets have none)
    relabel.npy         (disk 0 only, with --relabel) original ID of every new vertex ID, int64
    labels.txt          (disk 0 only, with --labels) the name of vertex i on line i (UTF-8, LF)

Row-column balanced 2D partition (Graphene §4.5.1): `rows` has R+1 vertex bounds splitting the
vertices into R ranges of (about) equal edge counts; `cols[r]` has C+1 bounds splitting row r's edges
by destination into C ranges of (about) equal edge counts. Partition (r, c) holds the edges with
src in [rows[r], rows[r+1]) and dst in [cols[r][c], cols[r][c+1]), as CSR sorted by (src, dst).

Manifest (JSON): see `Graph` attributes and `MANIFEST_KEYS`. Every disk holds an identical copy,
sealed by a CRC32 of its canonical JSON (`manifest_crc`). `Graph.open` checks the seal, that the
copies agree (same `uuid`), that every file exists with its recorded size, and that the first page of
every data file matches its page checksum (so swapped or replaced files are caught at open). The
offsets files are checked in full (CRC32, monotone, ending at the partition's edge count) when
loaded; data pages are checked as they arrive (graphene_py/integrity.py); `Graph.verify(deep=True)`
re-reads everything.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from . import store
from .errors import DatasetError
from .store import FORMAT, FORMAT_VERSION, MANIFEST_NAME, dataset_dir  # noqa: F401

MANIFEST_KEYS = (
    "format", "version", "uuid", "name", "num_vertices", "num_edges", "id_width", "directed",
    "weighted", "block_size", "disks", "out", "in", "stats", "options", "input", "relabel", "created",
    "tool", "manifest_crc", "short",
)
#: the label table of a dataset partitioned with --labels (disk 0)
LABELS_FILE = "labels.txt"


def id_dtype(width: int):
    return np.dtype("<u4") if width == 4 else np.dtype("<u8")


def crc32_file(path: str, chunk: int = 8 << 20) -> str:
    crc = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            crc = zlib.crc32(b, crc)
    return f"{crc:08x}"


@dataclass
class Partition:
    """One 2D partition (r, c) of one direction ('out' or 'in')."""

    direction: str
    row: int
    col: int
    row_lo: int          # first source vertex (inclusive)
    row_hi: int          # last source vertex (exclusive)
    col_lo: int          # first destination vertex (inclusive)
    col_hi: int          # last destination vertex (exclusive)
    disk: int            # index into Graph.disks
    adj_path: str
    off_path: str
    wgt_path: Optional[str]
    num_edges: int
    adj_bytes: int       # file size (padded)
    id_width: int
    checksums: dict = field(default_factory=dict)
    pages: dict = field(default_factory=dict)   # kind -> {"file", "crc", "page", "count"} (format 2)
    _off: Optional[np.ndarray] = field(default=None, repr=False)

    @property
    def index(self) -> tuple:
        return (self.row, self.col)

    def offsets(self) -> np.ndarray:
        """Offsets (row_hi - row_lo + 1 entries; uint64 as stored, or int32 once an iterator has
        narrowed them), loaded whole, checked (CRC32, monotone,
        bounded by the edge count) and cached (O(|V|) memory)."""
        if self._off is None:
            from .integrity import check_offsets
            off = np.fromfile(self.off_path, dtype="<u8")
            check_offsets(self, off)
            self._off = off
        return self._off

    def page_table(self, kind: str) -> Optional[np.ndarray]:
        """The CRC32C of every page of the `kind` ("adj"/"wgt") file, checked against its own CRC32;
        None for format-1 datasets."""
        ent = self.pages.get(kind)
        if not ent:
            return None
        from .integrity import load_page_table
        return load_page_table(self, kind, ent)

    def adjacency(self, check: bool = True) -> np.ndarray:
        """Neighbour IDs (num_edges entries), for tests, verification, the GPU and in-memory paths
        (the SSD path reads adjacency through the IO engines). check=True reads the file whole and
        verifies its CRC32 and that every ID lies in this partition's column range."""
        if self.num_edges == 0:
            return np.zeros(0, dtype=id_dtype(self.id_width))
        if not check:
            return np.memmap(self.adj_path, dtype=id_dtype(self.id_width), mode="r",
                             shape=(self.num_edges,))
        from .integrity import read_checked
        return read_checked(self, "adj")

    def weights(self, check: bool = True) -> Optional[np.ndarray]:
        if self.wgt_path is None:
            return None
        if self.num_edges == 0:
            return np.zeros(0, dtype="<f4")
        if not check:
            return np.memmap(self.wgt_path, dtype="<f4", mode="r", shape=(self.num_edges,))
        from .integrity import read_checked
        return read_checked(self, "wgt")

    def files(self):
        yield "adj", self.adj_path
        yield "off", self.off_path
        if self.wgt_path:
            yield "wgt", self.wgt_path
        for kind in ("adj", "wgt"):
            ent = self.pages.get(kind)
            if ent:
                yield kind + ".pcrc", os.path.join(os.path.dirname(self.adj_path), ent["file"])


class Graph:
    """An opened dataset. `Graph.open(name_or_path)`; attributes mirror the manifest. NetworkX
    functions called on it dispatch to graphene_py.nx_backend (`__networkx_backend__`)."""

    __networkx_backend__ = "graphene"

    def __init__(self, manifest: dict, dirs: list, home: Optional[str] = None, version=None,
                 locks=(), recovered=()):
        self.manifest = manifest
        self.dirs = dirs                       # the folder holding this version's files, per disk
        self.path = home or (dirs[0] if dirs else None)   # home container: what users open
        self.version = version                 # version folder name (None: format 1)
        self.recovered = list(recovered)       # what opening repaired (store.recover_containers)
        self._locks = list(locks)              # shared flocks on the version folders
        m = manifest
        self.name = m["name"]
        self.uuid = m["uuid"]
        self.num_vertices = int(m["num_vertices"])
        self.num_edges = int(m["num_edges"])
        self.id_width = int(m["id_width"])
        self.directed = bool(m["directed"])
        self.weighted = bool(m["weighted"])
        self.block_size = int(m.get("block_size", 512))
        self.disks = list(m["disks"])
        self.stats = m.get("stats", {})
        self.partitions = self._parts("out")
        self.in_partitions = self._parts("in") if m.get("in") else None

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def open(cls, name_or_path: str, check: bool = True) -> "Graph":
        """Open by registry name, dataset folder (any disk's), or manifest path. Recovers what an
        interrupted partition run left (see store.py; `g.recovered` says what), checks the manifest
        seal and that every disk's copy agrees, and (check=True) that every file exists with its
        recorded size and every data file's first page matches its checksum."""
        path = resolve(name_or_path)
        o = store.open_dataset(path)
        try:
            g = cls(o.manifest, o.dirs, o.home, o.version, o.locks, o.recovered)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            store.unlock(o.locks)
            raise DatasetError(f"{path}: corrupt manifest ({type(e).__name__}: {e})") from None
        if check:
            try:
                g.check_files()
                from .integrity import check_heads
                check_heads(g)
            except BaseException:
                g.close()
                raise
        return g

    def close(self) -> None:
        """Release the shared locks on the version folders (also on garbage collection)."""
        store.unlock(self._locks)
        self._locks = []

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _parts(self, direction: str) -> list:
        sec = self.manifest[direction]
        rows = sec["rows"]
        cols = sec["cols"]
        out = []
        for p in sec["partitions"]:
            r, c, d = int(p["row"]), int(p["col"]), int(p["disk"])
            base = self.dirs[d]
            out.append(Partition(
                direction=direction, row=r, col=c, row_lo=int(rows[r]), row_hi=int(rows[r + 1]),
                col_lo=int(cols[r][c]), col_hi=int(cols[r][c + 1]), disk=d,
                adj_path=os.path.join(base, p["adj"]), off_path=os.path.join(base, p["off"]),
                wgt_path=os.path.join(base, p["wgt"]) if p.get("wgt") else None,
                num_edges=int(p["num_edges"]), adj_bytes=int(p["adj_bytes"]), id_width=self.id_width,
                checksums=dict(p.get("checksum", {})), pages=dict(p.get("pages") or {}),
            ))
        return out

    # -- shape ----------------------------------------------------------------------------------
    def is_directed(self) -> bool:
        return self.directed

    def is_multigraph(self) -> bool:
        return False

    @property
    def rows(self) -> list:
        return self.manifest["out"]["rows"]

    @property
    def cols(self) -> list:
        return self.manifest["out"]["cols"]

    @property
    def num_rows(self) -> int:
        return len(self.rows) - 1

    @property
    def num_cols(self) -> int:
        return len(self.cols[0]) - 1 if self.cols else 0

    def parts(self, direction: str = "out") -> list:
        if direction == "out":
            return self.partitions
        if self.in_partitions is None:
            raise DatasetError(f"{self.name}: dataset has no in-edge partitions "
                               f"(re-partition with --in-edges)")
        return self.in_partitions

    def degrees(self, direction: str = "out") -> np.ndarray:
        """Out- (or in-) degree of every vertex, from the offsets only (no adjacency IO)."""
        deg = np.zeros(self.num_vertices, dtype=np.int64)
        for p in self.parts(direction):
            off = p.offsets()
            deg[p.row_lo:p.row_hi] += np.diff(off).astype(np.int64)
        return deg

    # -- whole-graph access, for tests, verification and in-memory mode -------------------------
    def to_csr(self, direction: str = "out", index_dtype=np.int64):
        """(indptr int64[n+1], indices index_dtype[m], weights float32[m] | None), sorted by (src,
        dst); every file read whole and checked (CRC32, ID ranges). index_dtype int32 only for
        fewer than 2^31 vertices."""
        if np.dtype(index_dtype).itemsize < 8 and self.num_vertices > (1 << 31):
            raise ValueError(f"{self.num_vertices} vertices do not fit {np.dtype(index_dtype)} IDs")
        from .csrfill import fill_rows
        n = self.num_vertices
        parts = self.parts(direction)
        deg = self.degrees(direction)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(deg, out=indptr[1:])
        del deg
        m = int(indptr[-1])
        indices = np.empty(m, dtype=index_dtype)
        weights = np.empty(m, dtype=np.float32) if self.weighted else None
        # Columns of a row are disjoint and increasing, so appending partitions in column order keeps
        # every adjacency list sorted.
        fill = indptr[:-1].copy()
        for p in sorted(parts, key=lambda q: (q.row, q.col)):
            if p.num_edges == 0:
                continue
            off = p.offsets()
            rows = fill[p.row_lo:p.row_hi]          # a view: advanced in place
            if weights is not None:                 # the same slots as the IDs
                fill_rows(weights, rows.copy(), off, p.weights())
            fill_rows(indices, rows, off, p.adjacency())
        return indptr, indices, weights

    def edges(self, direction: str = "out"):
        """(src int64[m], dst int64[m]) of the stored edges, sorted by (src, dst)."""
        indptr, indices, _ = self.to_csr(direction)
        src = np.repeat(np.arange(self.num_vertices, dtype=np.int64), np.diff(indptr))
        return src, indices

    def vertex_names(self):
        """The names users know the vertices by (graphene_py/names.py: VertexNames): the labels of
        a --labels dataset, the original IDs of a --relabel one; None when IDs are the names."""
        from .names import vertex_names
        return vertex_names(self)

    def relabel_map(self) -> Optional[np.ndarray]:
        """original ID of every vertex (when made with --relabel), else None."""
        rel = self.manifest.get("relabel")
        if not rel:
            return None
        return np.load(os.path.join(self.dirs[0], rel), mmap_mode="r")

    def short_lists(self, direction: str = "out"):
        """(entry, path) of `direction`'s short-list file (partition/short.py), or None."""
        ent = (self.manifest.get("short") or {}).get(direction)
        if not ent:
            return None
        return ent, os.path.join(self.dirs[int(ent["disk"])], ent["file"])

    def _short_files(self):
        seen = set()
        for d in ("out", "in"):
            got = self.short_lists(d)
            if got is not None and got[1] not in seen:
                seen.add(got[1])
                yield got

    # -- checks ---------------------------------------------------------------------------------
    def all_files(self):
        for d in ("out", "in"):
            if self.manifest.get(d):
                for p in self.parts(d):
                    for kind, path in p.files():
                        yield p, kind, path

    def check_files(self):
        for p, kind, path in self.all_files():
            if not os.path.exists(path):
                raise DatasetError(f"{self.name}: missing file {path} (disk {self.disks[p.disk]})")
            size = os.path.getsize(path)
            if kind == "off":
                want = (p.row_hi - p.row_lo + 1) * 8
            elif kind == "adj":
                want = p.adj_bytes
            elif kind.endswith(".pcrc"):
                want = int(p.pages[kind[:-5]]["count"]) * 4
            else:
                want = _padded(p.num_edges * 4)
            if size != want:
                raise DatasetError(f"{self.name}: {path} has {size} bytes, manifest says {want} "
                                   f"(truncated or replaced?)")
        for ent, path in self._short_files():
            if not os.path.exists(path):
                raise DatasetError(f"{self.name}: missing file {path} (the short lists)")
            if os.path.getsize(path) != int(ent["bytes"]):
                raise DatasetError(f"{self.name}: {path} has {os.path.getsize(path)} bytes, "
                                   f"manifest says {int(ent['bytes'])} (truncated or replaced?)")
        lab = self.manifest.get("labels")
        if lab:
            path = os.path.join(self.dirs[0], lab)
            if not os.path.exists(path):
                raise DatasetError(f"{self.name}: missing file {path} (the vertex names)")
            if os.path.getsize(path) != self.manifest.get("labels_bytes"):
                raise DatasetError(f"{self.name}: {path} has {os.path.getsize(path)} bytes, "
                                   f"manifest says {self.manifest.get('labels_bytes')} "
                                   f"(truncated or replaced?)")

    def verify(self, deep: bool = True, progress=None) -> list:
        """Check files (and CRC32 checksums when deep). Returns a list of problems (empty if fine).
        progress(phase, bytes done, total bytes) follows the deep check."""
        problems = []
        try:
            self.check_files()
        except DatasetError as e:
            problems.append(str(e))
            return problems
        if deep:
            from .integrity import verify_pages
            files = list(self.all_files())
            # a data file with page checksums is read twice: CRC32, then its pages
            total = sum(os.path.getsize(path) * (2 if kind in p.pages else 1)
                        for p, kind, path in files)
            done = 0
            for p, kind, path in files:
                if progress is not None:
                    progress("verify", done, total)
                done += os.path.getsize(path) * (2 if kind in p.pages else 1)
                want = (p.pages[kind[:-5]]["crc"] if kind.endswith(".pcrc")
                        else p.checksums.get(kind))
                if want is not None:
                    got = crc32_file(path)
                    if got != want:
                        problems.append(f"{path}: checksum {got} != manifest {want}")
                if kind in p.pages:
                    problems += verify_pages(p, kind)
            if progress is not None:
                progress("verify", total, total)
            for ent, path in self._short_files():
                got = crc32_file(path)
                if got != ent["checksum"]:
                    problems.append(f"{path}: checksum {got} != manifest {ent['checksum']}")
            for key in ("relabel", "labels"):
                rel = self.manifest.get(key)
                want = self.manifest.get(key + "_crc")
                if rel and want:
                    got = crc32_file(os.path.join(self.dirs[0], rel))
                    if got != want:
                        problems.append(f"{os.path.join(self.dirs[0], rel)}: checksum {got} != "
                                        f"manifest {want}")
        return problems

    def summary(self) -> dict:
        """Facts for `graphene info`: sizes, partitions, balance, bytes per disk."""
        parts = self.partitions
        counts = np.array([p.num_edges for p in parts], dtype=np.float64)
        ideal = self.num_edges / max(1, len(parts))
        per_disk = [0] * len(self.disks)
        seen = set()           # an undirected dataset's in-files are its out-files, linked
        for p, kind, path in self.all_files():
            try:
                st = os.stat(path)
            except FileNotFoundError:      # (`info --verify` names it: check_files)
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                per_disk[p.disk] += st.st_size
        short = {}
        for ent, path in self._short_files():
            per_disk[int(ent["disk"])] += int(ent["bytes"])
        for d in ("out", "in"):
            got = self.short_lists(d)
            if got is not None:
                short[d] = {"degree_max": len(got[0]["counts"]), "bytes": int(got[0]["bytes"]),
                            "file": got[0]["file"]}
        return {
            "name": self.name, "path": self.path, "version": self.version, "num_vertices": self.num_vertices,
            "num_edges": self.num_edges, "directed": self.directed, "weighted": self.weighted,
            "id_width": self.id_width, "rows": self.num_rows, "cols": self.num_cols,
            "in_edges": self.in_partitions is not None,
            "partition_edges": [int(x) for x in counts],
            "imbalance": float(counts.max() / ideal) if ideal > 0 else 1.0,
            "disks": self.disks, "bytes_per_disk": per_disk, "stats": self.stats,
            "created": self.manifest.get("created"),
            "checksums": "pages" if any(p.pages for p in parts) else "files",
            "recovery_log": store.read_log(self.path) if self.path else [],
            "names": self._names_summary(),
            "short_lists": short if "short" in self.manifest else None,
        }

    def _names_summary(self):
        """What the vertices are called besides their IDs (graphene_py/names.py), or None."""
        m = self.manifest
        if m.get("labels"):
            return {"kind": "label", "file": m["labels"], "bytes": m.get("labels_bytes")}
        if m.get("relabel"):
            return {"kind": "original_id", "file": m["relabel"]}
        return None

    def __repr__(self):
        return (f"Graph({self.name!r}, |V|={self.num_vertices}, |E|={self.num_edges}, "
                f"{self.num_rows}x{self.num_cols} partitions on {len(self.disks)} disk(s))")


def _padded(nbytes: int, align: int = 512) -> int:
    return (nbytes + align - 1) // align * align


def resolve(name_or_path: Optional[str]) -> str:
    """Registry name, dataset folder or manifest path -> dataset folder (or manifest) path.
    None means the most recently partitioned dataset."""
    from . import registry
    if name_or_path is None:
        last = registry.last()
        if last is None:
            if registry.entries():     # the latest was removed: others remain
                raise DatasetError("no dataset given, and the most recently partitioned one was "
                                   "removed: pass --graph NAME (`graphene list` shows them)")
            raise DatasetError("no dataset given and none partitioned yet "
                               "(run `graphene partition INPUT --disks DIR...` or pass --graph)")
        return last
    if os.path.exists(name_or_path):
        return os.path.abspath(name_or_path)
    path = registry.lookup(name_or_path)
    if path is None:
        raise DatasetError(f"no dataset named or at {name_or_path!r} (see `graphene list`)")
    return path
