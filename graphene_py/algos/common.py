"""Shared harness of the built-in algorithms (GAPBS style): the Result base class, source picking,
trials and timing, peak memory, per-superstep progress lines, and the GPU hook.

    Result(**fields)                     arrays + scalars + supersteps (list of stats dicts) + seconds
        .arrays() / .scalars()           numpy arrays / JSON-able scalars among the fields
        .main_array()                    the array `--output` writes (MAIN, else the first array)
        .to_json(per_superstep=False)    dict: scalars, totals of the superstep stats, [supersteps]
        .save(path)                      .npy: the main array; .npz: every array by name; .csv and
                                         .parquet: a vertex,[name],<array>... table (the vertex
                                         names of a --labels/--relabel dataset in a column);
                                         written atomically
        .named(array=None)               read-only Mapping {vertex name: value} (graphene_py/names.py)
        .summary_lines() / .warnings()   extra lines for `graphene run` (stdout / stderr)
    check_output(path, result_class)     refuses a bad --output before the run (suffix, folder)
    check_options(name, graph, options)  every option's range (CLI and API); the *_MAX constants say why
    pick_source(graph, seed=config.SEED, trial=0) -> int
    peak_rss_mb() -> float
    superstep_line(i, st, label="level") -> str
    superstep_json(i, st) -> dict
"""
from __future__ import annotations

import math
import os
import resource
import sys
import tempfile

import numpy as np

from .. import config
from ..errors import GrapheneError

#: superstep stats summed into a run's totals
SUM_KEYS = ("active_edges", "blocks_marked", "extents", "bytes_useful", "bytes_read", "io_seconds",
            "requests", "compute_seconds", "wait_seconds", "plan_seconds", "bytes_cached")


def _jsonable(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        v = float(x)
        return v if np.isfinite(v) else str(v)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    if isinstance(x, (list, tuple)):
        return [_jsonable(y) for y in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    return x


#: the suffixes Result.save (and `graphene run --output`) writes
SAVE_SUFFIXES = (".npy", ".npz", ".csv", ".parquet")
#: the table formats (one row per vertex)
TABLE_SUFFIXES = (".csv", ".parquet")


class Result:
    """Result of one algorithm run. Subclasses set MAIN (the array `--output` writes) and
    PER_VERTEX = False when some array is not indexed by vertex (no CSV table then)."""

    MAIN = None
    PER_VERTEX = True
    #: arrays whose values are vertex IDs -> the prefix of their name column in a saved table
    #: (BFS's parent: parent_label)
    VERTEX_ARRAYS = {}

    def __init__(self, **fields):
        self.supersteps = []
        self.seconds = 0.0
        self._names = None
        self.__dict__.update(fields)

    def set_names(self, names) -> None:
        """The dataset's vertex names (graphene_py/names.py; None: IDs are the names): tables
        saved get a name column, the source gets a `src_name` scalar, named() keys by them."""
        self._names = names
        src = getattr(self, "src", None)
        if names is not None and isinstance(src, (int, np.integer)) and src >= 0:
            self.src_name = names.name_of(int(src))
        srcs = getattr(self, "sources", None)
        if names is not None and srcs is not None and np.ndim(srcs) == 1:
            self.source_names = names.take(np.asarray(srcs, dtype=np.int64))

    def vertex_name(self, v):
        """The name of vertex ID v (v itself on a dataset without names)."""
        return int(v) if self._names is None else self._names.name_of(int(v))

    def named(self, array: str = None):
        """Read-only Mapping {vertex name: value} of a per-vertex array (default the main one):
        `r.named()["alice"]`, `dict(r.named("depth"))`."""
        from ..names import NamedValues
        arrs = self.arrays()
        a = self.main_array() if array is None else arrs.get(array)
        if a is None or a.ndim != 1:
            raise GrapheneError(f"{type(self).__name__} has no per-vertex array {array!r} "
                                f"(arrays: {', '.join(arrs)})")
        return NamedValues(self._names, a)

    def arrays(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, np.ndarray)}

    def host_arrays(self) -> dict:
        """The arrays already in host memory (arrays() may first copy one from the GPU)."""
        return self.arrays()

    def scalars(self) -> dict:
        out = {}
        for k, v in self.__dict__.items():
            if k.startswith("_") or k == "supersteps" or isinstance(v, np.ndarray):
                continue
            if isinstance(v, (int, float, str, bool, np.integer, np.floating, np.bool_)) or v is None:
                out[k] = _jsonable(v)
            elif isinstance(v, (list, tuple)) and all(isinstance(y, (int, float, str, np.integer,
                                                                     np.floating)) for y in v):
                out[k] = _jsonable(list(v))
        return out

    def main_name(self):
        """The name of the array `--output NAME.npy` writes: MAIN when the run made it, else
        the first array it did make (k-core's `in_k_core` with --membership-only), or None."""
        arrs = self.arrays()
        if self.MAIN and self.MAIN in arrs:
            return self.MAIN
        return next(iter(arrs), None)

    def main_array(self):
        name = self.main_name()
        return None if name is None else self.arrays()[name]

    def totals(self) -> dict:
        t = {k: 0 for k in SUM_KEYS}
        for st in self.supersteps:
            for k in SUM_KEYS:
                t[k] += st.get(k, 0) or 0
            per = st.get("bytes_read_per_disk")
            if per:
                old = t.get("bytes_read_per_disk") or [0] * len(per)
                t["bytes_read_per_disk"] = [a + b for a, b in zip(old, per)]
        got = t["bytes_read"] + t["bytes_cached"]        # from the disks or from the cache
        t["io_utility"] = t["bytes_useful"] / got if got else 1.0
        t["supersteps"] = len(self.supersteps)
        return t

    def to_json(self, per_superstep: bool = False) -> dict:
        d = {"result": type(self).__name__}
        d.update(self.scalars())
        d["totals"] = _jsonable(self.totals())
        if per_superstep:
            d["supersteps"] = [_jsonable(s) for s in self.supersteps]
        return d

    def summary_lines(self) -> list:
        """Extra summary lines `graphene run` prints on stdout (none by default)."""
        return []

    def warnings(self) -> list:
        """Warnings `graphene run` prints on stderr as `warning: ...` (none by default)."""
        return []

    def save(self, path: str) -> str:
        """Write the result to `path` by its suffix: .npy the main array (np.save), .npz every array
        by name (np.savez), .csv one row per vertex, `vertex,<array>,...` with a header line (every
        array indexed by vertex, else GrapheneError), .parquet the same table (needs pyarrow). On a
        dataset with vertex names (--labels, --relabel) the tables get a `label` (`original_id`)
        column after `vertex` and one after each array of vertex IDs (`parent_label`), and .npz a
        `label` (`original_id`) array. Written to a temporary file in the same folder and renamed
        into place: a failure leaves nothing half-written. Returns the path."""
        path = str(path)
        suffix = check_output(path, type(self))
        arrs = self.arrays()
        if not arrs:
            raise GrapheneError(f"{type(self).__name__} has no array to save")
        if suffix in TABLE_SUFFIXES:
            lens = {k: v.shape for k, v in arrs.items()}
            if any(len(sh) != 1 for sh in lens.values()) or len({sh[0] for sh in lens.values()}) != 1:
                raise GrapheneError(f"{path}: {type(self).__name__} does not fit one vertex table "
                                    f"(arrays {', '.join(f'{k}{list(sh)}' for k, sh in lens.items())});"
                                    f" save it as .npz")

        names = self._names
        vcols = {k: p for k, p in self.VERTEX_ARRAYS.items() if k in arrs}

        def write(f):
            if suffix == ".npy":
                np.save(f, self.main_array())
            elif suffix == ".npz":
                extra = {} if names is None or names.column in arrs else \
                    {names.column: names.array()}
                np.savez(f, **arrs, **extra)
            elif suffix == ".csv":
                _write_csv(f, arrs, names, vcols)
            else:
                _write_parquet(f, arrs, names, vcols)
        _atomic_write(path, write)
        return path

    def __repr__(self):
        s = ", ".join(f"{k}={v}" for k, v in self.scalars().items())
        a = ", ".join(f"{k}[{v.shape[0] if v.ndim else ''}]" for k, v in self.arrays().items())
        return f"{type(self).__name__}({a}; {s})"


def _table_columns(arrs: dict, names, vcols: dict) -> list:
    """The columns of a saved vertex table, in order: (header, kind, source), kind "id" (the
    vertex IDs), "array" (arrs[source]), "names" (every vertex's name) or "vnames" (the names of
    the IDs in arrs[source])."""
    cols = [("vertex", "id", None)]
    if names is not None:
        cols.append((names.column, "names", None))
    for k in arrs:
        cols.append((k, "array", k))
        if names is not None and k in vcols:
            cols.append((f"{vcols[k]}_{names.column}", "vnames", k))
    return cols


def _table_chunks(arrs: dict, names, vcols: dict, rows: int):
    """Per block of `rows` vertices: {header: values} of the table's columns."""
    cols = _table_columns(arrs, names, vcols)
    n = len(next(iter(arrs.values())))
    named = names.chunks(rows) if names is not None else None
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        out = {}
        for head, kind, src in cols:
            if kind == "id":
                out[head] = np.arange(lo, hi, dtype=np.int64)
            elif kind == "names":
                out[head] = next(named)
            elif kind == "array":
                out[head] = np.asarray(arrs[src][lo:hi])
            else:
                out[head] = names.take(arrs[src][lo:hi])
        yield out


def _csv_field(x) -> str:
    if x is None:
        return ""
    s = str(x)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in '",\r\n') else s


def _write_csv(f, arrs: dict, names=None, vcols=None, rows_per_chunk: int = 1 << 16):
    """`vertex,[name],<array>,...` header, then one row per vertex: integers and booleans (0/1) as
    integers, floats with 17 significant digits (exact round trip; inf/nan as numpy prints them),
    names as they are (quoted as RFC 4180 says where they hold a quote); no name: empty."""
    heads = [h for h, _, _ in _table_columns(arrs, names, vcols or {})]
    f.write((",".join(heads) + "\n").encode())
    for block in _table_chunks(arrs, names, vcols or {}, rows_per_chunk):
        cols = []
        for h in heads:
            c = block[h]
            if isinstance(c, list):
                cols.append([_csv_field(x) for x in c])
            elif c.dtype == np.bool_:
                cols.append(c.astype(np.int8).tolist())
            elif c.dtype.kind in "iu":
                cols.append(c.tolist())
            else:
                cols.append(["%.17g" % x for x in c])
        f.write("".join(",".join(map(str, row)) + "\n" for row in zip(*cols)).encode())


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
        return pyarrow
    except ImportError:
        raise GrapheneError("writing .parquet needs pyarrow (pip install 'graphene_py[parquet]'"
                            " or pip install pyarrow); .csv and .npz need nothing") from None


def _write_parquet(f, arrs: dict, names=None, vcols=None, rows_per_chunk: int = 1 << 20):
    """The .csv table as Parquet: one row group per `rows_per_chunk` vertices (streamed: never
    the whole table in memory), columns in their own types (names: string or int64)."""
    pa = _pyarrow()
    writer = None
    for block in _table_chunks(arrs, names, vcols or {}, rows_per_chunk):
        cols = {}
        for h, c in block.items():
            if isinstance(c, list):
                kind = pa.string() if names is not None and names.kind == "label" else pa.int64()
                cols[h] = pa.array(c, type=kind)
            else:
                cols[h] = pa.array(c)
        table = pa.table(cols)
        if writer is None:
            writer = pa.parquet.ParquetWriter(f, table.schema)
        writer.write_table(table)
    if writer is None:      # no vertices: the empty table with its columns
        heads = _table_columns(arrs, names, vcols or {})
        table = pa.table({h: pa.array([], type=pa.int64()) for h, _, _ in heads})
        writer = pa.parquet.ParquetWriter(f, table.schema)
    writer.close()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_stale_partials(path: str) -> list:
    """Delete the temporary files beside `path` that a run writing it left when it was killed
    (`.NAME.PID.*.tmp` of _atomic_write, `.NAME.PID.partial.npy` of a streamed output) and whose
    process is gone; returns their paths. A live process's (PID in use) are left alone."""
    from ..store import _pid_alive
    folder, base = os.path.split(os.path.abspath(str(path)))
    pre = "." + base + "."
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    gone = []
    for e in names:
        if not e.startswith(pre) or not e.endswith((".tmp", ".partial.npy")):
            continue
        pid = e[len(pre):].split(".", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            try:
                os.unlink(os.path.join(folder, e))
                gone.append(os.path.join(folder, e))
            except OSError:
                pass
    return gone


def _atomic_write(path: str, write):
    """write(binary file) into a temporary file beside `path` (named with this process's ID, so
    that the next writer of `path` can delete it after a kill: remove_stale_partials), fsync,
    rename over `path`; the temporary file is removed if anything fails (including Ctrl-C)."""
    folder = os.path.dirname(os.path.abspath(path))
    remove_stale_partials(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{os.getpid()}.", suffix=".tmp",
                               dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())     # a user's file, as open() makes it (mkstemp: 0600)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_output(path: str, result_class=None) -> str:
    """Refuse an output path before any work: the suffix must be one of SAVE_SUFFIXES (.csv only for
    results whose arrays are all per vertex), the folder must exist and take a new file, and the
    path must not be a folder. Returns the (lower-case) suffix."""
    path = str(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SAVE_SUFFIXES:
        raise GrapheneError(f"{path}: unknown output suffix {suffix or '(none)'!r}; use "
                            f"{', '.join(SAVE_SUFFIXES)} (.npy: the main array, .npz: every array "
                            f"by name, .csv/.parquet: a vertex table)")
    if suffix == ".parquet":
        _pyarrow()
    if suffix in TABLE_SUFFIXES and result_class is not None and not result_class.PER_VERTEX:
        raise GrapheneError(f"{path}: {result_class.__name__} does not fit a vertex,value table "
                            f"(its arrays are not all indexed by vertex); use .npz or .npy")
    if os.path.isdir(path):
        raise GrapheneError(f"{path}: is a folder")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise GrapheneError(f"{path}: output folder {folder} does not exist")
    try:   # the real test (os.access says yes to root on a read-only file system)
        fd, probe = tempfile.mkstemp(prefix=".graphene-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise GrapheneError(f"{path}: cannot write to the output folder {folder} "
                            f"({e.strerror or e})") from None
    return suffix


# ---------------------------------------------------------------------------------------------
# option ranges, shared by `graphene run` (click types) and the Python API (check_options)
#: compute threads: at least one; at most 1024 (each thread adds per-thread state, e.g. PageRank's
#: T x |V| accumulators, and threads beyond the cores only cost memory)
THREADS_MAX = 1024
#: IOs in flight per IO worker: csrc/uring.c refuses queue_depth outside 1..4096 (io_uring itself
#: allows 32768 entries), and the buffer pool keeps 2 x queue_depth slots per worker, so 4096 at
#: 16 KB already pins 128 MiB per disk
QUEUE_DEPTH_MAX = 4096
#: largest IO: a whole number of 512-byte blocks (O_DIRECT alignment, the planning granularity);
#: at most 16 MiB: every pool slot holds one IO and the pool keeps at least 2 x queue_depth slots
#: per worker plus 32 per compute thread, so 16 MiB IOs already mean GiBs of pool (csrc/uring.c's
#: own slot cap is 1 GiB); Graphene found IOs above 1 MB only cost submission time
MAX_IO_MIN, MAX_IO_MAX = 512, 16 << 20
#: gap (in 512-byte blocks) merged across: 0..MAX_IO_MAX/512; a gap longer than the largest IO
#: can never be merged anyway
MAX_GAP_MAX = MAX_IO_MAX // 512


def real_range(min=None, max=None, min_open=False, max_open=False):
    """click.FloatRange that also refuses nan and inf (FloatRange lets nan through: every
    comparison with nan is False)."""
    import click

    class _Real(click.FloatRange):
        name = "number"          # "'x' is not a valid number.", not "... float range."

        def convert(self, value, param, ctx):
            x = click.FloatRange.convert(self, value, param, ctx)
            if not math.isfinite(x):
                self.fail(f"{value!r} is not a finite number.", param, ctx)
            return x

    return _Real(min=min, max=max, min_open=min_open, max_open=max_open)


def _physical_mb():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (ValueError, OSError, AttributeError):
        return None


def _flag(key, cli):
    return "--" + key.replace("_", "-") if cli else key


def _vertex_error(flag, v, n):
    have = (f"the graph has {n} vertices: 0..{n - 1}" if n > 1 else
            "the graph has 1 vertex: 0" if n == 1 else "the graph has no vertices")
    return GrapheneError(f"{flag} {v} is not a vertex ({have})")


def _as_int(flag, v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise GrapheneError(f"{flag} must be an integer (got {v!r})") from None
        if not f.is_integer():
            raise GrapheneError(f"{flag} must be an integer (got {v!r})")
        return int(f)
    return int(v)


def _int_in(options, key, lo, hi, cli, why=""):
    v = options.get(key)
    if v is None:
        return
    flag = _flag(key, cli)
    x = _as_int(flag, v)
    if x < lo or (hi is not None and x > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise GrapheneError(f"{flag} {v} is out of range: must be {rng}{why}")


def _real_in(options, key, lo, hi, cli, lo_open=False, hi_open=False, why=""):
    v = options.get(key)
    if v is None:
        return
    flag = _flag(key, cli)
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise GrapheneError(f"{flag} must be a number (got {v!r})") from None
    bad = not math.isfinite(x)
    if lo is not None:
        bad = bad or (x <= lo if lo_open else x < lo)
    if hi is not None:
        bad = bad or (x >= hi if hi_open else x > hi)
    if bad:
        parts = []
        if lo is not None:
            parts.append(f"{'>' if lo_open else '>='} {lo:g}")
        if hi is not None:
            parts.append(f"{'<' if hi_open else '<='} {hi:g}")
        raise GrapheneError(f"{flag} {v} is out of range: must be a finite number "
                            f"{' and '.join(parts)}{why}")


def parse_sources(value):
    """A list of vertex IDs from `0,5,17` (str) or any sequence of integers."""
    if isinstance(value, str):
        items = value.replace(" ", "").split(",")
        if items and items[-1] == "":          # (a trailing comma)
            items.pop()
        try:
            return [int(x) for x in items]
        except ValueError:
            raise GrapheneError(f"sources: expected comma-separated vertex IDs, got {value!r}"
                                + (" (an empty item)" if "" in items else "")) from None
    return [int(x) for x in np.asarray(value).ravel()]


def check_options(name: str, graph, options: dict, cli: bool = False) -> None:
    """Raise GrapheneError naming the option and its value for any runtime or algorithm option
    out of range (see the *_MAX constants for the reasons), before any work. `cli`: name them as
    flags (--max-io) instead of keywords (max_io). Options not given (None, absent) pass."""
    o = options
    _int_in(o, "threads", 1, THREADS_MAX, cli)
    _int_in(o, "queue_depth", 1, QUEUE_DEPTH_MAX, cli, " (csrc/uring.c's limit)")
    _int_in(o, "max_gap", 0, MAX_GAP_MAX, cli)
    _int_in(o, "max_io", MAX_IO_MIN, MAX_IO_MAX, cli)
    if o.get("max_io") is not None:
        bs = int(getattr(graph, "block_size", None) or config.BLOCK_SIZE)
        if int(o["max_io"]) % bs:
            raise GrapheneError(f"{_flag('max_io', cli)} {o['max_io']} is not a multiple of the "
                                f"{bs}-byte block")
    _real_in(o, "buffer_mb", 0, None, cli, lo_open=True)
    if o.get("gpu_mem") is not None:
        from ..gpu.device_graph import parse_bytes
        try:
            ok = parse_bytes(o["gpu_mem"]) > 0
        except GrapheneError:
            ok = False
        if not ok:
            raise GrapheneError(f"{_flag('gpu_mem', cli)} {o['gpu_mem']!r} is not a memory size "
                                f"(e.g. 2G, 512M)")
    phys = _physical_mb()
    if o.get("buffer_mb") is not None:
        if phys and float(o["buffer_mb"]) > phys:
            raise GrapheneError(f"{_flag('buffer_mb', cli)} {float(o['buffer_mb']):,.15g} is more than this "
                                f"machine's memory ({phys:,.0f} MiB)")
    if phys and not o.get("in_memory") and (o.get("queue_depth") or o.get("max_io")):
        # the smallest pool IoIterator builds (iterator/core.py _open_engine): 2 x queue depth
        # slots per IO worker (at least one) + 2 x 16 per compute thread + 16, each holding one IO
        qd = int(o.get("queue_depth") or config.QUEUE_DEPTH)
        mx = int(o.get("max_io") or config.MAX_IO_BYTES)
        threads = int(o.get("threads") or config.default_threads())
        need_mb = (2 * qd + 32 * threads + 16) * (-(-mx // 4096) * 4096) / (1 << 20)
        if need_mb > phys:
            raise GrapheneError(f"{_flag('queue_depth', cli)} {qd} with {_flag('max_io', cli)} {mx} "
                                f"and {threads} thread(s) needs an IO buffer pool of at least "
                                f"{need_mb:,.0f} MiB (2 x queue depth + 32 per thread + 16 slots "
                                f"of max-io bytes), more than this machine's memory "
                                f"({phys:,.0f} MiB)")
    n = int(graph.num_vertices)
    if o.get("src") is not None:
        src = _as_int(_flag("src", cli), o["src"])
        if not 0 <= src < n:
            raise _vertex_error(_flag("src", cli), o["src"], n)
    if o.get("sources") is not None:
        srcs = parse_sources(o["sources"])
        if not srcs:
            raise GrapheneError(f"{_flag('sources', cli)}: no vertex IDs given")
        for v in srcs:
            if not 0 <= v < n:
                raise _vertex_error(_flag("sources", cli), v, n)
    _int_in(o, "num_sources", 1, None, cli)
    if name == "bc" and o.get("k") is not None and not o.get("exact") and \
            o.get("sources") is None and int(o["k"]) > n:
        # (NetworkX refuses a sample larger than the population too)
        raise GrapheneError(f"k = {int(o['k']):,} sampled sources (--num-sources) is more than "
                            f"the {n:,} vertices of {graph.name} (exact=True / --exact: every "
                            f"vertex)")
    _int_in(o, "trials", 1, None, cli)
    _real_in(o, "alpha", 0.0, 1.0, cli, lo_open=True, hi_open=True)
    _real_in(o, "tolerance", 0.0, None, cli)
    _int_in(o, "max_iter", 1, None, cli)
    _real_in(o, "threshold", 0.0, 1.0, cli, hi_open=True,
             why=" (at 1 or more no residual need be pushed and delta PageRank may never converge)")
    _int_in(o, "k", 0, None, cli)
    if o.get("membership_only") and o.get("k") is None:
        raise GrapheneError(f"{_flag('membership_only', cli)} needs {_flag('k', cli)} K (which core "
                            f"to compute)")
    _int_in(o, "keep_edges", 0, None, cli)
    _real_in(o, "delta", 0.0, None, cli, lo_open=True)


def checked_source(graph, src, algo: str) -> int:
    """The source vertex ID a run starts from (default: pick_source); a clear error when the graph
    is empty or src is out of range. Shared by BFS and SSSP, on the engine and the numpy path."""
    n = graph.num_vertices
    if n == 0:
        raise GrapheneError(f"{graph.name}: {algo} needs at least one vertex (graph is empty)")
    src = pick_source(graph) if src is None else int(src)
    if not 0 <= src < n:
        raise GrapheneError(f"source vertex {src} is out of range [0, {n})")
    return src


def pick_source(graph, seed: int = config.SEED, trial: int = 0) -> int:
    """A random vertex with non-zero out-degree (GAPBS habit): the trial-th draw of a generator
    seeded with `seed`, so runs are reproducible and trials use different sources."""
    deg = graph.degrees("out")
    cand = np.flatnonzero(deg > 0)
    if len(cand) == 0:
        if graph.num_vertices == 0:
            raise GrapheneError(f"{graph.name}: graph has no vertices")
        return 0
    rng = np.random.default_rng(seed)
    n = graph.num_vertices
    src = 0
    for _ in range(trial + 1):
        while True:  # uniform over vertex IDs, re-drawn until one has out-edges (GAPBS SourcePicker)
            v = int(rng.integers(0, n))
            if deg[v] > 0:
                src = v
                break
    return src


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB: VmHWM from /proc/self/status (reset at exec,
    unlike ru_maxrss, which Linux carries over from the parent of a fork+exec), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024.0 if sys.platform != "darwin" else r / (1 << 20)


def vertex_dtype(n):
    """Vertex IDs in per-vertex arrays (parents, queues): int32 while every ID fits, else int64."""
    return np.int32 if n < (1 << 31) else np.int64


def memory_block(led, n, rss_before, peak, result=None) -> dict:
    """`graphene run --json`'s `memory` block for one trial: the bytes of every array the ledger
    saw (iterator.memory.track; result arrays it did not see are added under their own names),
    per vertex, and what the process held: RSS before the trial, its peak during it (VmHWM reset at
    the trial's start) and the growth between. State = everything but IO buffers and partitions
    loaded into RAM; the ledger counts allocated bytes, RSS only touched pages, so the growth stays
    at or under the state allocated during the trial plus the JIT's and allocator's slack."""
    arrays = dict(led.arrays)
    if result is not None:
        for k, a in result.host_arrays().items():
            if k not in arrays and not isinstance(a, np.memmap) and not led.holds(a):
                arrays[k] = int(a.nbytes)
    per = (lambda b: round(b / n, 2) if n else 0.0)
    state = sum(b for k, b in arrays.items() if not k.startswith(led.NOT_STATE))
    mib = (lambda b: round(b / 2**20, 1))
    return {
        "arrays": {k: {"bytes": b, "bytes_per_vertex": per(b)}
                   for k, b in sorted(arrays.items(), key=lambda kv: -kv[1])},
        "state_bytes": state, "state_bytes_per_vertex": per(state),
        "io_buffer_bytes": sum(b for k, b in arrays.items() if k.startswith("io buffers")),
        # held in reserved 2 MB pages (vm.nr_hugepages): not in RSS
        "huge_page_bytes": dict(getattr(led, "huge", {})),
        "rss_before_trial_mib": mib(rss_before), "trial_peak_rss_mib": mib(peak),
        "trial_growth_mib": mib(max(0, peak - rss_before)),
        "trial_growth_bytes_per_vertex": per(max(0, peak - rss_before)),
    }


def _mb(x):
    return f"{x / 1e6:.1f} MB" if x >= 1e5 else f"{x / 1e3:.1f} kB"


def superstep_line(i: int, st: dict, label: str = "level") -> str:
    """One GAPBS -l style progress line for a superstep."""
    extra = ""
    for k in ("error", "active", "phase", "changed"):
        if k in st:
            v = st[k]
            extra += f"  {k} {v:.3g}" if isinstance(v, float) else f"  {k} {v}"
    if st.get("kept_lists"):       # lists served from RAM (keep_lists): not in `frontier`
        extra += f"  kept lists {st['kept_lists']:,} (from RAM)"
    if st.get("short_lists"):      # lists served from the short-list file in RAM
        extra += f"  short lists {st['short_lists']:,} (from RAM)"
    if "bytes_moved" in st:        # a streamed GPU superstep: lists copied in, lists kept there
        extra += f"  to GPU {_mb(st['bytes_moved'])}"
        if st.get("kept_bytes"):
            extra += f"  kept on GPU {_mb(st['kept_bytes'])}"
    if st.get("handoff"):          # --device auto in mid-run: the GPU's load, the move and why
        extra += f"  gpu: {st['handoff']}"
    if "exchange_bytes" in st:     # a cluster superstep: what crossed the network, and the wait
        extra += (f"  exchanged {_mb(st['exchange_bytes'])}  coordination "
                  f"{st.get('coordination_seconds', 0.0):.3f}s")
    return (f"{label} {i:>4}  frontier {st.get('frontier', 0):>10,}  edges {st.get('active_edges', 0):>12,}"
            f"  read {_mb(st.get('bytes_read', 0)):>10}  util {st.get('io_utility', 1.0):5.2f}"
            f"  io {st.get('io_seconds', 0.0):.3f}s  compute {st.get('compute_seconds', 0.0):.3f}s"
            f"  wait {st.get('wait_seconds', 0.0):.3f}s  plan {st.get('plan_seconds', 0.0):.3f}s"
            f"  {st.get('seconds', 0.0):.3f}s  [{where(st)}]" + extra)


def where(st: dict) -> str:
    """Where a superstep ran, for its progress line: its mode on the CPU (queue, scan, all...);
    elsewhere the device too, unless the mode names it (gpu-stream-host, gpu-td...)."""
    mode = str(st.get("mode", "-"))
    dev = str(st.get("device", "cpu"))
    if dev == "cpu" or mode.startswith(dev):
        return mode
    return dev if mode == "-" else f"{dev} {mode}"


def superstep_json(i: int, st: dict) -> dict:
    d = {"superstep": i}
    d.update(_jsonable(dict(st)))
    return d

