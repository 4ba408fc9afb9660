"""`graphene partition`, `graphene info`, `graphene list`."""
from __future__ import annotations

import datetime
import json
import os
import sys
import time

import click

from .errors import GrapheneError


class _MultiValueOption(click.Option):
    """An option taking one or more values after one flag (`--disks a b c`, what `--disks /mnt/ssd*`
    expands to); repeating the flag (`--disks a --disks b`) works too. Values are taken until the
    next argument that starts with '-' or names an existing file."""

    def __init__(self, *args, **kwargs):
        kwargs["multiple"] = True
        super().__init__(*args, **kwargs)

    def add_to_parser(self, parser, ctx):
        super().add_to_parser(parser, ctx)
        opt = None
        for name in self.opts:
            opt = parser._long_opt.get(name) or parser._short_opt.get(name)
            if opt is not None:
                break
        if opt is None:  # pragma: no cover - click internals changed
            return
        orig = opt.process

        def process(value, state):
            orig(value, state)
            # stop at the next option, or at an existing plain file: a disk is a folder, so
            # `--disks a b input.el` leaves input.el to the INPUT argument
            while (state.rargs and not state.rargs[0].startswith("-")
                   and not os.path.isfile(state.rargs[0])):
                orig(state.rargs.pop(0), state)

        opt.process = process


#: --rows / --cols: at most 256 each and 4096 partitions in all. Every partition is at least two
#: files per direction (offsets + adjacency; weights add one), a run keeps one open file per
#: non-empty partition (two with weights; both directions for pull algorithms), and the offsets
#: cost C x |V| x 8 bytes of RAM at run time; a larger grid only adds files and per-partition work
#: (64 x 64 took 3 s to partition a 3-edge graph here).
GRID_MAX = 256
PARTITIONS_MAX = 4096


def _rate(g, key, t0):
    """The manifest's stats[key] per second since t0: "9.9 M" (millions, one decimal) from 100,000
    a second, else the whole number ("2,048"), so that a small input does not read "0.0 M"."""
    r = (g.manifest.get('stats') or {}).get(key, 0) / max(time.time() - t0, 1e-9)
    return f"{r / 1e6:.1f} M" if r >= 1e5 else f"{r:,.0f}"


def _human(b: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(b) < 1000 or unit == "TB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1000


def _memory_limit(ctx, param, value):
    """--memory-limit: a size of at least 1M, else a usage error (exit 2), as run's --memory."""
    from .cli_run import _parse_size, size_option
    return size_option(_parse_size)(ctx, param, value)


@click.command("partition")
@click.argument("input", type=click.Path(dir_okay=False))
@click.option("--disks", "-d", cls=_MultiValueOption, required=True, metavar="DIR...",
              help="One or more folders (one per SSD) to hold the dataset.")
@click.option("--name", "-n", default=None, help="Dataset name (default: the input file's stem).")
@click.option("-s", "--symmetrize", is_flag=True, help="Add the reverse of every edge (undirected).")
@click.option("--rows", type=int, default=None,
              help=f"Row partitions R, 1..{GRID_MAX} (default ceil(sqrt(#disks))).")
@click.option("--cols", type=int, default=None,
              help=f"Column partitions C per row, 1..{GRID_MAX} (default = R); R x C at most "
                   f"{PARTITIONS_MAX}.")
@click.option("--weighted/--unweighted", default=None,
              help="Keep a weight column (default: as the input has).")
@click.option("--format", "fmt", default=None,
              type=click.Choice(["el", "wel", "mtx", "bin32", "bin64", "wbin32", "wbin64"]),
              help="Input format (default: from the file name).")
@click.option("--id-width", type=click.Choice(["4", "8"]), default=None,
              help="Bytes per vertex ID on disk (default 4 when every ID fits).")
@click.option("--relabel", is_flag=True,
              help="Compact IDs to 0..n-1 (sorted order); originals kept in relabel.npy.")
@click.option("--labels", is_flag=True,
              help="The vertices are names (alice, URLs; no blanks or commas inside): vertex i is "
                   "the i-th distinct name in file order; the names are kept in labels.txt and "
                   "work in --src, --sources and saved results.")
@click.option("--num-vertices", type=click.IntRange(min=1), default=None, metavar="N",
              help="Vertex count when vertices above the largest ID used exist (isolated, e.g. a "
                   "generator's 2^scale); default: the largest ID + 1. Not with --relabel/--labels.")
@click.option("--in-edges", is_flag=True, help="Also write the transposed graph (pull algorithms).")
@click.option("--memory-limit", default=None, metavar="SIZE", callback=_memory_limit,
              help="Peak memory of the whole run, e.g. 4G, 512M (default 1G, more when the "
                   "vertices need it, up to 25% of RAM); edges that do not fit are sorted in "
                   "runs spilled to the disks.")
@click.option("--work-memory", default=None, metavar="SIZE", hidden=True,
              help="Working memory for the sort itself, instead of --memory-limit (testing).")
@click.option("--force", is_flag=True, help="Replace an existing dataset of the same name.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or summary on stderr.")
@click.option("--keep-self-loops", is_flag=True, help="Keep self-loops (dropped by default).")
@click.option("--keep-duplicates", is_flag=True, help="Keep duplicate edges (dropped by default).")
@click.option("--no-calibrate", is_flag=True,
              help="Do not measure a new disk device (by default a device with no profile yet is "
                   "measured once, a few seconds, when the dataset puts 64 MiB or more on it; "
                   "see `graphene calibrate`).")
@click.option("--cluster", default=None, metavar="ADDRESS",
              help="Put the dataset on a Ray cluster (auto, local or host:port): partitioned here "
                   "into a staging copy, then each node's rows go onto --disks on that node "
                   "({node} in a path: the node's label); the staging copy is deleted. Rows "
                   "default to the number of nodes.")
def partition_cmd(input, disks, name, symmetrize, rows, cols, weighted, fmt, id_width, relabel,
                  labels, num_vertices, in_edges, memory_limit, work_memory, force, quiet,
                  keep_self_loops, keep_duplicates, no_calibrate, cluster):
    """Partition an edge list INPUT into a row-column balanced 2D dataset on the --disks folders.

    INPUT: text edge list (.el/.wel/.txt/.csv/.tsv, `#`/`%` comments), Matrix Market (.mtx),
    binary (.bin32/.bin64/.wbin32/.wbin64); any of them gzipped (.gz)."""
    from .partition.partitioner import partition
    t0 = time.time()
    # the partitioner's kernels load from numba's cache the way a run's do (jit.ready: no
    # refresh of numba's registries, no SciPy BLAS probe): a cold partition of 1.3 M edges
    # took 0.43 s less (BENCHMARKS.md, "Where the user sits", 2026-11-29)
    from . import jit
    jit.ready(blas=False)
    for flag, v in (("--rows", rows), ("--cols", cols)):   # before anything is read or written
        if v is not None and not 1 <= v <= GRID_MAX:       # a usage error, as run's ranges
            raise click.BadParameter(f"{v} is out of range: must be in 1..{GRID_MAX}",
                                     param_hint=f"'{flag}'")
    if (rows is None) != (cols is None):
        if rows is None:
            rows = cols
        else:
            cols = rows
    if rows is not None and rows * cols > PARTITIONS_MAX:
        raise click.UsageError(f"--rows {rows} x --cols {cols} = {rows * cols:,} partitions; at "
                               f"most {PARTITIONS_MAX:,}")
    if labels and relabel:
        raise click.UsageError("give --labels (vertex names) or --relabel (integer IDs), not both")
    if num_vertices is not None and (labels or relabel):
        raise click.UsageError("--num-vertices does not go with --relabel or --labels (their "
                               "vertices are the IDs or names the edges use)")
    if cluster is not None:
        if labels:
            raise click.UsageError("--labels is not available with --cluster yet: partition here, "
                                   "then use the dataset on one machine")
        return _partition_onto_cluster(cluster, input, list(disks), name, rows, cols, force, quiet,
                                       dict(fmt=fmt, symmetrize=symmetrize, weighted=weighted,
                                            id_width=int(id_width) if id_width else None,
                                            relabel=relabel, in_edges=in_edges,
                                            num_vertices=num_vertices,
                                            memory_limit=memory_limit, work_memory=work_memory,
                                            drop_self_loops=not keep_self_loops,
                                            drop_duplicates=not keep_duplicates))
    g = partition(input, list(disks), name=name, fmt=fmt, symmetrize=symmetrize, weighted=weighted,
                  id_width=int(id_width) if id_width else None, relabel=relabel, rows=rows, cols=cols,
                  labels=labels, num_vertices=num_vertices, in_edges=in_edges,
                  memory_limit=memory_limit, work_memory=work_memory,
                  force=force, quiet=quiet,
                  drop_self_loops=not keep_self_loops, drop_duplicates=not keep_duplicates)
    if not quiet:
        s = g.summary()
        st = g.stats
        lines = [
            f"dataset {g.name}: {s['num_vertices']:,} vertices, {s['num_edges']:,} edges kept "
            f"({'undirected' if not g.directed else 'directed'}"
            f"{', weighted' if g.weighted else ''}, {g.id_width}-byte IDs)",
            f"  input edges {st.get('input_edges', 0):,}; self-loops dropped "
            f"{st.get('self_loops_dropped', 0):,}; duplicates dropped {st.get('duplicates_dropped', 0):,}",
            f"  partitions {s['rows']}x{s['cols']}{' (+ in-edges)' if s['in_edges'] else ''}; "
            f"imbalance {s['imbalance']:.3f} (max partition / ideal)",
            "  bytes per disk: " + ", ".join(f"{d}: {_human(b)}" for d, b in
                                             zip(s["disks"], s["bytes_per_disk"])),
            f"  {time.time() - t0:.2f} s ({_rate(g, 'input_edges', t0)} input edges/s, "
            f"{_rate(g, 'edges', t0)} edges written/s)"
            + (f", spilled to {g.manifest['options'].get('spilled_runs')} bucket files"
               if g.manifest["options"].get("spilled_runs") else ""),
        ]
        if g.manifest.get("labels"):
            lines.insert(1, f"  vertex names kept in {g.manifest['labels']} "
                            f"({_human(g.manifest['labels_bytes'])}); --src and --sources take them")
        click.echo("\n".join(lines), err=True)
    if not no_calibrate:
        _calibrate_new_devices(g, quiet)


def _partition_onto_cluster(address, input, disks, name, rows, cols, force, quiet, opts):
    """`graphene partition --cluster`: a staging dataset here (on the first node's --disks), then
    graphene_py.cluster's distribute, then the staging copy deleted (also when distributing
    fails)."""
    import os
    from . import store
    from .cluster import Cluster
    from .cluster.engine import node_disks, manifest_path
    from .partition.partitioner import partition
    c = Cluster(address)
    labels = sorted(c.nodes())
    name = name or os.path.basename(input).split(".")[0]
    if os.path.exists(manifest_path(name)) and not force:
        raise GrapheneError(f"cluster dataset {name!r} exists ({manifest_path(name)}); --force "
                            f"replaces it")
    if rows is None:
        rows = cols = len(labels)
    elif rows < len(labels):
        raise GrapheneError(f"--rows {rows}: the cluster has {len(labels)} nodes, each needs at "
                            f"least one row")
    staging = node_disks(disks, labels[0])
    g = partition(input, staging, name=f"{name}.staging", rows=rows, cols=cols, force=True,
                  quiet=quiet, register=False, **opts)
    try:
        path = c.distribute(g, disks, name=name, force=force)
    finally:
        o = store.Opened(g.manifest, g.dirs, g.path, g.version, g._locks, [])
        g._locks = []
        store.remove_dataset(o)
    if not quiet:
        cg = c.open(name)
        for pl in cg.placement:
            rws = ", ".join(f"{d} rows {a}..{b - 1}" for d, (a, b) in pl["rows"].items())
            click.echo(f"{pl['node']}: {rws} -> {pl['home']}", err=True)
        click.echo(f"cluster dataset {name}: {g.num_vertices:,} vertices, {g.num_edges:,} edges "
                   f"on {len(labels)} nodes ({path})", err=True)


def _calibrate_new_devices(g, quiet):
    """Measure the devices of a new dataset that have no profile yet (io/calibrate.py). A failed
    measurement is a warning: the dataset is committed and runs use the fixed request sizes."""
    from .io.calibrate import calibrate_dataset
    say = None if quiet else (lambda m: click.echo("  " + m, err=True))
    try:
        got = calibrate_dataset(g, only_missing=True, say=say)
    except (OSError, ValueError, GrapheneError) as e:
        click.echo(f"Warning: could not calibrate the disks ({e}); runs use the fixed request "
                   f"sizes (`graphene calibrate` measures again)", err=True)
        return
    if not quiet:
        for key, _, p in got:
            click.echo(f"  {key}: {p.describe()} ({p.seconds:.1f} s; stored for runs; "
                       f"`graphene calibrate` measures again)", err=True)


def _device_line(folders):
    """Which of the disks' devices have a calibrated profile (requests planned for them)."""
    from .io import calibrate as cal
    parts, seen = [], set()
    for d in folders:
        k = cal.profile_key(d)
        if k is None or k in seen:
            continue
        seen.add(k)
        p = cal.lookup(k)
        parts.append(f"{k}: " + (f"calibrated ({p.describe()})" if p is not None else
                                 "not calibrated (fixed request sizes; `graphene calibrate`)"))
    return "; ".join(parts) or "?"


@click.command("info")
@click.argument("graph", required=False)
@click.option("--graph", "-g", "graph_opt", default=None, metavar="NAME|PATH",
              help="The dataset, as `graphene run` names it (instead of GRAPH).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--verify", is_flag=True,
              help="Re-read every file: sizes, CRC32 checksums and every page checksum.")
def info_cmd(graph, graph_opt, as_json, verify):
    """Describe dataset GRAPH (registry name or folder; default: the last partitioned)."""
    from .graph import Graph
    if graph is not None and graph_opt is not None and graph != graph_opt:
        raise click.UsageError(f"two datasets given: {graph!r} and -g {graph_opt!r}")
    graph = graph if graph is not None else graph_opt
    problems = None
    try:
        g = Graph.open(graph, check=not verify)
    except GrapheneError as e:
        if not verify:
            raise
        problems = [str(e)]
        g = None
    if g is not None:
        s = g.summary()
        s["recovered"] = g.recovered
        if verify:
            from .progress import Progress
            bar = Progress(units={"verify": "bytes"})
            problems = g.verify(deep=True, progress=bar if not as_json else None)
            bar.done()
            s["verify"] = {"ok": not problems, "problems": problems}
    if as_json:
        click.echo(json.dumps(s if g is not None else {"verify": {"ok": False, "problems": problems}},
                              indent=1))
    elif g is not None:
        st = s["stats"] or {}
        out = [
            f"name        {s['name']}",
            f"path        {s['path']}",
            f"vertices    {s['num_vertices']:,}",
            f"edges       {s['num_edges']:,} ({'directed' if s['directed'] else 'undirected'}"
            f"{', weighted' if s['weighted'] else ''}, {s['id_width']}-byte IDs)",
            f"partitions  {s['rows']} x {s['cols']}{' + in-edges' if s['in_edges'] else ''}, "
            f"imbalance {s['imbalance']:.3f}",
            "disks       " + ", ".join(f"{d} ({_human(b)})" for d, b in
                                        zip(s["disks"], s["bytes_per_disk"])),
            f"input       {st.get('input_edges', 0):,} edges; self-loops dropped "
            f"{st.get('self_loops_dropped', 0):,}; duplicates dropped {st.get('duplicates_dropped', 0):,}",
            f"created     {s['created']}" + (f" (version {s['version']})" if s.get("version") else ""),
            "checksums   " + ("CRC32 per file, CRC32C per 4 KB page" if s["checksums"] == "pages"
                               else "CRC32 per file (no page checksums: made by an older graphene_py)"),
        ]
        sl = s.get("short_lists")
        if sl:
            files = {}
            for d, e in sl.items():
                files.setdefault(e["file"], (e, []))[1].append(d)
            out.append("short lists " + "; ".join(
                f"degree 1..{e['degree_max']} again in {f} ({_human(e['bytes'])}, "
                f"{' and '.join(ds)}-lists)" for f, (e, ds) in files.items()))
        elif sl is None:
            out.append("short lists none: made before graphene_py wrote them (partition the input "
                       "again for one; k-core membership then reads far less)")
        else:
            out.append("short lists none (no lists of degree 1..32, or too many of them for an "
                       "eighth of the edges)")
        nm = s.get("names")
        if nm:
            out.append("names       " + (
                f"vertex names in {nm['file']} ({_human(nm['bytes'] or 0)}); --src and --sources "
                f"take them" if nm["kind"] == "label" else
                f"original IDs in {nm['file']} (--relabel); --src and --sources take them"))
        out.append("devices     " + _device_line(g.disks))
        # what recovery did (this open, or an earlier command's: recovery.log), newest last
        log = s.get("recovery_log") or []
        for line in log[-5:]:
            # a version replaced by a later partition (--force) is deleted by the same step:
            # routine, not a repair
            from .store import REPLACED
            label = "cleaned up" if line.endswith(f"({REPLACED})") else "recovered"
            out.append(f"{label:<11} {line}")
        click.echo("\n".join(out))
    if verify:
        if problems:
            for p in problems:
                click.echo(f"problem: {p}", err=True)
            click.echo(f"Verify: FAIL ({len(problems)} problem(s))", err=True)
            sys.exit(1)
        click.echo("Verify: OK (sizes, file and page checksums match)", err=True)


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_cmd(as_json):
    """Datasets in the registry ($GRAPHENE_HOME, default ~/.graphene)."""
    from . import registry
    from .graph import Graph
    reg = registry.load()
    rows = []
    for name, e in sorted(reg["datasets"].items()):
        row = {"name": name, "path": e["path"], "num_vertices": None, "num_edges": None,
               "registered": e.get("registered"), "last": name == reg.get("last"), "status": "ok"}
        try:
            g = Graph.open(e["path"], check=False)
            row["num_vertices"], row["num_edges"] = g.num_vertices, g.num_edges
        except GrapheneError as ex:
            row["status"] = f"missing or broken: {str(ex).replace(' (see `graphene list`)', '')}"
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    if not rows:
        click.echo("no datasets yet (run `graphene partition INPUT --disks DIR...`)", err=True)
        return
    w = max(4, max(len(r["name"]) for r in rows))
    click.echo(f"  {'NAME':<{w}}  {'VERTICES':>13}  {'EDGES':>15}  {'REGISTERED':<19}  PATH")
    for r in rows:
        when = (datetime.datetime.fromtimestamp(r["registered"]).strftime("%Y-%m-%d %H:%M:%S")
                if r["registered"] else "?")
        nv = f"{r['num_vertices']:,}" if r["num_vertices"] is not None else "?"
        ne = f"{r['num_edges']:,}" if r["num_edges"] is not None else "?"
        mark = "*" if r["last"] else " "
        extra = "" if r["status"] == "ok" else f"  [{r['status']}]"
        click.echo(f"{mark} {r['name']:<{w}}  {nv:>13}  {ne:>15}  {when:<19}  {r['path']}{extra}")


@click.command("rm")
@click.argument("graph")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--forget", is_flag=True,
              help="Only remove the name from the registry (for a dataset that is already gone).")
def rm_cmd(graph, yes, forget):
    """Delete dataset GRAPH (a registered name or a folder) from every disk, and its name."""
    from . import registry, store
    from .graph import Graph
    if forget:
        if not registry.unregister(graph):
            raise GrapheneError(f"no dataset named {graph!r} in the registry (see `graphene list`)")
        click.echo(f"forgot the name {graph}", err=True)
        return
    try:
        g = Graph.open(graph, check=False)
    except GrapheneError as e:
        if registry.lookup(graph) is None:
            raise
        # a registered name whose dataset is gone or broken: say how to drop the name
        raise GrapheneError(f"{e}; `graphene rm --forget {graph}` removes the name") from None
    where = ", ".join(store.dataset_dir(d, g.name) for d in g.disks)
    try:
        ok = yes or click.confirm(
            f"delete dataset {g.name} ({g.num_vertices:,} vertices, {g.num_edges:,} edges) "
            f"from {len(g.disks)} disk(s): {', '.join(g.disks)}?", err=True)
    except click.Abort:         # no answer (end of input, Ctrl-C)
        ok = False
    if not ok:
        raise GrapheneError(f"{g.name} not deleted (answer y, or pass -y)")
    home = g.path
    o = store.Opened(g.manifest, g.dirs, g.path, g.version, g._locks, [])
    g._locks = []
    store.remove_dataset(o)
    for name in registry.names_at(home):
        registry.unregister(name)
    click.echo(f"deleted {g.name} ({where})", err=True)


COMMANDS = [partition_cmd, info_cmd, list_cmd, rm_cmd]
