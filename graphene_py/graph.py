"""The on-disk dataset: manifest, partition descriptors, offsets, open and verify.

Layout (format version 1). A dataset named NAME on disks D0..Dk-1 is the folder `Di/NAME/` on every
disk. Each folder holds a copy of `manifest.json` plus the partition files assigned to that disk:

    out_r{r}_c{c}.adj   neighbour IDs (uint32 or uint64 little-endian), zero-padded to 512 bytes
    out_r{r}_c{c}.off   uint64 offsets, (row_hi - row_lo + 1) entries, in *edges* (not bytes),
                        local to the partition: the neighbours of v are adj[off[v-row_lo]:off[v-row_lo+1]]
    out_r{r}_c{c}.wgt   float32 weights parallel to .adj (weighted datasets), zero-padded to 512 bytes
    in_r{r}_c{c}.*      the same for the transposed graph (in-edges), when made with --in-edges
    relabel.npy         (disk 0 only, with --relabel) original ID of every new vertex ID, int64

Row-column balanced 2D partition (Graphene §4.5.1): `rows` has R+1 vertex bounds splitting the
vertices into R ranges of (about) equal edge counts; `cols[r]` has C+1 bounds splitting row r's edges
by destination into C ranges of (about) equal edge counts. Partition (r, c) holds the edges with
src in [rows[r], rows[r+1]) and dst in [cols[r][c], cols[r][c+1]), as CSR sorted by (src, dst).

Manifest (JSON): see `Graph` attributes and `MANIFEST_KEYS`. Every disk holds an identical copy;
`Graph.open` checks that the copies agree (same `uuid`) and that every file exists with its recorded
size; `Graph.verify(deep=True)` also checks CRC32 checksums.
"""
from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .errors import DatasetError

FORMAT = "graphene_py"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
MANIFEST_KEYS = (
    "format", "version", "uuid", "name", "num_vertices", "num_edges", "id_width", "directed",
    "weighted", "block_size", "disks", "out", "in", "stats", "options", "input", "relabel", "created",
    "tool",
)


def dataset_dir(disk: str, name: str) -> str:
    return os.path.join(os.path.abspath(disk), name)


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
    _off: Optional[np.ndarray] = field(default=None, repr=False)

    @property
    def index(self) -> tuple:
        return (self.row, self.col)

    def offsets(self) -> np.ndarray:
        """uint64 offsets (row_hi - row_lo + 1 entries), loaded whole and cached (O(|V|) memory)."""
        if self._off is None:
            self._off = np.fromfile(self.off_path, dtype="<u8")
        return self._off

    def adjacency(self) -> np.ndarray:
        """Neighbour IDs as a read-only memmap (num_edges entries). For tests and in-memory mode only:
        the SSD path reads adjacency through the IO engines."""
        if self.num_edges == 0:
            return np.zeros(0, dtype=id_dtype(self.id_width))
        return np.memmap(self.adj_path, dtype=id_dtype(self.id_width), mode="r", shape=(self.num_edges,))

    def weights(self) -> Optional[np.ndarray]:
        if self.wgt_path is None:
            return None
        if self.num_edges == 0:
            return np.zeros(0, dtype="<f4")
        return np.memmap(self.wgt_path, dtype="<f4", mode="r", shape=(self.num_edges,))

    def files(self):
        yield "adj", self.adj_path
        yield "off", self.off_path
        if self.wgt_path:
            yield "wgt", self.wgt_path


class Graph:
    """An opened dataset. `Graph.open(name_or_path)`; attributes mirror the manifest."""

    def __init__(self, manifest: dict, dirs: list):
        self.manifest = manifest
        self.dirs = dirs                       # dataset folder on each disk
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
        """Open by registry name, dataset folder, or manifest path. Checks that every disk's manifest
        copy agrees and every file exists with its recorded size (`check=False` skips the files)."""
        path = resolve(name_or_path)
        mpath = path if path.endswith(".json") else os.path.join(path, MANIFEST_NAME)
        manifest = _read_manifest(mpath)
        dirs = [dataset_dir(d, manifest["name"]) for d in manifest["disks"]]
        for d in dirs:
            other = os.path.join(d, MANIFEST_NAME)
            if not os.path.exists(other):
                raise DatasetError(f"{manifest['name']}: disk folder {d} is missing its manifest "
                                   f"(disk missing or not mounted?)")
            mo = _read_manifest(other)
            if mo.get("uuid") != manifest["uuid"]:
                raise DatasetError(f"{manifest['name']}: manifest on {d} belongs to another dataset "
                                   f"(uuid {mo.get('uuid')} != {manifest['uuid']}): disks swapped or "
                                   f"an interrupted --force run")
        g = cls(manifest, dirs)
        if check:
            g.check_files()
        return g

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
                checksums=dict(p.get("checksum", {})),
            ))
        return out

    # -- shape ----------------------------------------------------------------------------------
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
    def to_csr(self, direction: str = "out"):
        """(indptr int64[n+1], indices int64[m], weights float32[m] | None), sorted by (src, dst)."""
        n = self.num_vertices
        parts = self.parts(direction)
        deg = self.degrees(direction)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(deg, out=indptr[1:])
        m = int(indptr[-1])
        indices = np.empty(m, dtype=np.int64)
        weights = np.empty(m, dtype=np.float32) if self.weighted else None
        fill = indptr[:-1].copy()
        # Columns of a row are disjoint and increasing, so appending partitions in column order keeps
        # every adjacency list sorted.
        for p in sorted(parts, key=lambda q: (q.row, q.col)):
            off = p.offsets().astype(np.int64)
            lens = np.diff(off)
            if p.num_edges == 0:
                continue
            adj = np.asarray(p.adjacency(), dtype=np.int64)
            w = p.weights()
            vs = np.arange(p.row_lo, p.row_hi)
            dst_start = np.repeat(fill[p.row_lo:p.row_hi] - off[:-1], lens)
            pos = np.arange(p.num_edges, dtype=np.int64) + dst_start
            indices[pos] = adj
            if weights is not None:
                weights[pos] = w
            fill[vs] += lens
        return indptr, indices, weights

    def edges(self, direction: str = "out"):
        """(src int64[m], dst int64[m]) of the stored edges, sorted by (src, dst)."""
        indptr, indices, _ = self.to_csr(direction)
        src = np.repeat(np.arange(self.num_vertices, dtype=np.int64), np.diff(indptr))
        return src, indices

    def relabel_map(self) -> Optional[np.ndarray]:
        """original ID of every vertex (when made with --relabel), else None."""
        rel = self.manifest.get("relabel")
        if not rel:
            return None
        return np.load(os.path.join(self.dirs[0], rel), mmap_mode="r")

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
            else:
                want = _padded(p.num_edges * 4)
            if size != want:
                raise DatasetError(f"{self.name}: {path} has {size} bytes, manifest says {want} "
                                   f"(truncated or replaced?)")

    def verify(self, deep: bool = True) -> list:
        """Check files (and CRC32 checksums when deep). Returns a list of problems (empty if fine)."""
        problems = []
        try:
            self.check_files()
        except DatasetError as e:
            problems.append(str(e))
            return problems
        if deep:
            for p, kind, path in self.all_files():
                want = p.checksums.get(kind)
                if want is not None:
                    got = crc32_file(path)
                    if got != want:
                        problems.append(f"{path}: checksum {got} != manifest {want}")
        return problems

    def summary(self) -> dict:
        """Facts for `graphene info`: sizes, partitions, balance, bytes per disk."""
        parts = self.partitions
        counts = np.array([p.num_edges for p in parts], dtype=np.float64)
        ideal = self.num_edges / max(1, len(parts))
        per_disk = [0] * len(self.disks)
        for p, kind, path in self.all_files():
            per_disk[p.disk] += os.path.getsize(path)
        return {
            "name": self.name, "path": self.dirs[0], "num_vertices": self.num_vertices,
            "num_edges": self.num_edges, "directed": self.directed, "weighted": self.weighted,
            "id_width": self.id_width, "rows": self.num_rows, "cols": self.num_cols,
            "in_edges": self.in_partitions is not None,
            "partition_edges": [int(x) for x in counts],
            "imbalance": float(counts.max() / ideal) if ideal > 0 else 1.0,
            "disks": self.disks, "bytes_per_disk": per_disk, "stats": self.stats,
            "created": self.manifest.get("created"),
        }

    def __repr__(self):
        return (f"Graph({self.name!r}, |V|={self.num_vertices}, |E|={self.num_edges}, "
                f"{self.num_rows}x{self.num_cols} partitions on {len(self.disks)} disk(s))")


def _padded(nbytes: int, align: int = 512) -> int:
    return (nbytes + align - 1) // align * align


def _read_manifest(path: str) -> dict:
    try:
        with open(path) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise DatasetError(f"no dataset at {os.path.dirname(path) or path} ({MANIFEST_NAME} not found)")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: corrupt manifest ({e})")
    if m.get("format") != FORMAT:
        raise DatasetError(f"{path}: not a graphene_py manifest")
    if int(m.get("version", -1)) > FORMAT_VERSION:
        raise DatasetError(f"{path}: format version {m.get('version')} is newer than this graphene_py "
                           f"understands ({FORMAT_VERSION}); upgrade graphene_py")
    return m


def resolve(name_or_path: Optional[str]) -> str:
    """Registry name, dataset folder or manifest path -> dataset folder (or manifest) path.
    None means the most recently partitioned dataset."""
    from . import registry
    if name_or_path is None:
        last = registry.last()
        if last is None:
            raise DatasetError("no dataset given and none partitioned yet "
                               "(run `graphene partition INPUT --disks DIR...` or pass --graph)")
        return last
    if os.path.exists(name_or_path):
        return os.path.abspath(name_or_path)
    path = registry.lookup(name_or_path)
    if path is None:
        raise DatasetError(f"no dataset named or at {name_or_path!r} (see `graphene list`)")
    return path
