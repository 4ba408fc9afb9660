"""`graphene run ALGO [options]`: run a built-in algorithm on a dataset (GAPBS-style harness).

`run` is a click group whose subcommands are the algorithms of graphene_py/algos/registry.py, each
built on demand from the shared runtime options below plus the algorithm module's CLI_OPTIONS, so
`graphene run bfs --help` shows exactly what applies. Per-superstep lines go to stderr (GAPBS -l
style; --quiet silences them), results to stdout: per-trial and average times, the result's scalars
and peak memory; --json prints one object at the end instead, --nl one JSON object per superstep.
-v verifies every trial (`Verification: PASS`; a failure exits 3), --output saves the result (.npy
main array, .npz every array, .csv/.parquet vertex table). Every option is range-checked (click types, then
common.check_options against the dataset) before any work.
"""
from __future__ import annotations

import inspect
import json
import os
import time

import click

from . import config
from .algos import common, registry
from .errors import GrapheneError, VerificationError

def _max_io(ctx, param, value):
    if value is not None and value % config.BLOCK_SIZE:
        raise click.BadParameter(f"{value} is not a multiple of {config.BLOCK_SIZE} (whole "
                                 f"{config.BLOCK_SIZE}-byte blocks: O_DIRECT alignment)")
    return value


def size_option(parse, words=(), what="a size of at least 1M (e.g. 4G, 512M)"):
    """A click callback: the option's value is one of `words` or a size that `parse` (a function
    of the text, raising GrapheneError) reads as more than 0; anything else is a usage error
    (exit 2) naming the value."""
    def check(ctx, param, value):
        if value is None or str(value).lower() in words:
            return value
        try:
            ok = parse(value) > 0
        except GrapheneError:
            ok = False
        if not ok:
            raise click.BadParameter(f"{value!r} is not {what}")
        return value
    return check


def _parse_size(text):
    from .config import parse_size
    return parse_size(text)


def _parse_gpu_bytes(text):
    from .gpu.device_graph import parse_bytes
    return parse_bytes(text) or 0


#: --memory (auto, none or a size) and --gpu-mem (a size): refused before any work
_memory_size = size_option(_parse_size, ("auto", "none"),
                           "auto, none or a size of at least 1M (e.g. 4G, 512M)")
_gpu_mem = size_option(_parse_gpu_bytes, what="a size above 0 (e.g. 2G, 512M)")


_RUNTIME = [
    click.Option(["--graph", "-g", "graph_name"], default=None, metavar="NAME|PATH",
                 help="Dataset name or folder (default: the most recently partitioned)."),
    click.Option(["-n", "--trials"], type=click.IntRange(min=1), default=1, show_default=True,
                 help="Number of trials (>= 1)."),
    click.Option(["-v", "--verify"], is_flag=True, help="Verify every trial with an independent serial check."),
    click.Option(["--json", "as_json"], is_flag=True, help="Print one JSON object with the results at the end."),
    click.Option(["--nl"], is_flag=True, help="Print one JSON object per superstep on stdout."),
    click.Option(["--output", "-o"], type=click.Path(dir_okay=False), default=None,
                 metavar="FILE.npy|.npz|.csv|.parquet",
                 help="Save the result: .npy the main array, .npz every array by name, .csv a "
                      "vertex,<array>... table (with the vertex names of a --labels/--relabel "
                      "dataset), .parquet the same table (needs pyarrow). The folder must exist; "
                      "written atomically."),
    click.Option(["--threads", "-t"], type=click.IntRange(1, common.THREADS_MAX), default=None,
                 help=f"Compute threads, 1..{common.THREADS_MAX} (default: all cores)."),
    click.Option(["--io-engine"], type=click.Choice(["auto", "uring", "liburing", "pread"]), default="auto",
                 show_default=True, help="IO engine."),
    click.Option(["--queue-depth"], type=click.IntRange(1, common.QUEUE_DEPTH_MAX), default=None,
                 help=f"IOs in flight per disk, 1..{common.QUEUE_DEPTH_MAX} "
                      f"(default {config.QUEUE_DEPTH})."),
    click.Option(["--max-gap"], type=click.IntRange(0, common.MAX_GAP_MAX), default=None,
                 help=f"Merge set blocks across gaps of at most this many blocks, "
                      f"0..{common.MAX_GAP_MAX} (default: chosen per superstep for the device, "
                      f"`graphene calibrate`; {config.MAX_GAP_BLOCKS} without a profile)."),
    click.Option(["--max-io"], type=click.IntRange(common.MAX_IO_MIN, common.MAX_IO_MAX),
                 default=None, callback=_max_io,
                 help=f"Largest IO request in bytes, a multiple of {config.BLOCK_SIZE} in "
                      f"{common.MAX_IO_MIN}..{common.MAX_IO_MAX} (default: chosen per superstep "
                      f"for the device; {config.MAX_IO_BYTES} without a profile)."),
    click.Option(["--buffer-mb"], type=common.real_range(0.0, min_open=True), default=None,
                 help=f"IO buffer pool in MiB, > 0 (default {config.BUFFER_MB}; raised to keep the "
                      f"queue full)."),
    click.Option(["--in-memory"], is_flag=True, help="Load the partitions into RAM (no IO; reference point)."),
    click.Option(["--memory"], default=None, metavar="SIZE|auto|none", callback=_memory_size,
                 help="Memory the run may use (e.g. 2G): what the runtime, the IO buffers and the "
                      "O(|V|) state leave becomes a read-through cache of adjacency data in RAM "
                      "(densest partitions first; blocks read once are then served from RAM). "
                      "auto (the default): half the memory available when the run starts; "
                      "none: no cache."),
    click.Option(["--no-direct"], is_flag=True, help="Read through the page cache (no O_DIRECT)."),
    click.Option(["--check/--no-check"], default=None,
                 help="Verify the CRC32C of every 4 KB page as it is read (default "
                      f"{'on' if config.CHECK_PAGES else 'off'}; neighbour IDs are range-checked "
                      "either way)."),
    click.Option(["--device"], type=click.Choice(["cpu", "gpu", "auto"]), default="cpu", show_default=True,
                 help="Where supersteps run (gpu/auto need graphene_py.gpu and CuPy)."),
    click.Option(["--gpu-mem"], default=None, metavar="SIZE", callback=_gpu_mem,
                 help="GPU memory budget (e.g. 2G; default 90% of free): edge arrays that do not "
                      "fit stay in pinned host memory, read zero-copy."),
    click.Option(["--gpu-tier"], type=click.Choice(["auto", "resident", "stream-host",
                                                    "stream-ssd"]), default="auto",
                 show_default=True,
                 help="Where a GPU run keeps the edge lists (PageRank, WCC and SpMV may "
                      "stream): resident (GPU memory, the rest zero-copy from pinned host "
                      "memory), stream-host (pinned host memory, copied in per pass), "
                      "stream-ssd (read from the dataset's files per pass); auto: the least "
                      "estimated time for the whole run, the dataset's load counted (resident "
                      "when an earlier run left it on the GPU; SpMV always streams)."),
    click.Option(["--cluster"], default=None, metavar="ADDRESS",
                 help="Run on a Ray cluster the dataset was distributed to (`graphene cluster "
                      "distribute`): auto (the cluster `ray start` joined), local, or host:port."),
    click.Option(["--timeline"], type=click.Path(dir_okay=False), default=None,
                 metavar="FILE.png",
                 help="Draw the last trial: read MB/s per disk over time with the superstep "
                      "boundaries, frontier and IO utility (needs matplotlib)."),
    click.Option(["--quiet", "-q"], is_flag=True, help="No per-superstep lines on stderr."),
]
_RUNTIME_NAMES = {o.name for o in _RUNTIME}
_PARTIAL = []      # temporary files of outputs being streamed (removed when a run fails)


def _algorithm_command(name: str) -> click.Command:
    from .algos import registry
    e = registry.entry(name)
    try:
        mod = registry.module(name)
        options = list(getattr(mod, "CLI_OPTIONS", []))
        err = None
    except ImportError as ex:
        mod, options, err = None, [], ex
    doc = e.summary if mod else f"(graphene_py.algos.{e.module} is not built yet)"

    def callback(**kw):
        if err is not None:
            raise GrapheneError(f"algorithm {name!r} is not available: module "
                                f"graphene_py.algos.{e.module} could not be imported ({err})")
        try:
            _run(name, mod, kw)
        finally:     # an output streamed while the run went on: never left half-written
            while _PARTIAL:
                try:
                    os.unlink(_PARTIAL.pop())
                except OSError:
                    pass

    return click.Command(name, params=_RUNTIME + options, callback=callback, help=doc,
                         short_help=doc)


class _RunGroup(click.Group):
    def list_commands(self, ctx):
        from .algos import registry
        return registry.names()

    def get_command(self, ctx, name):
        from .algos import registry
        if name not in registry.ENTRIES:
            return None
        return _algorithm_command(name)

    def resolve_command(self, ctx, args):
        from .algos import registry
        if args and not args[0].startswith("-") and args[0] not in registry.ENTRIES:
            raise click.UsageError(f"unknown algorithm {args[0]!r}; choose from "
                                   f"{', '.join(registry.names())}", ctx)
        return super().resolve_command(ctx, args)


@click.group("run", cls=_RunGroup, context_settings={"help_option_names": ["-h", "--help"]})
def run_cmd():
    """Run ALGO on a dataset: graphene run ALGO [--graph NAME] [options] (see graphene run ALGO -h)."""


def _say(msg, quiet=False):
    if not quiet:
        click.echo(msg, err=True)


def _result_class(mod):
    """The Result subclass an algorithm module returns (for checks made before the run)."""
    # defined in the module, or (a package) in one of its submodules
    found = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, common.Result)
             and v is not common.Result and (v.__module__ + ".").startswith(mod.__name__ + ".")]
    return found[0] if len(found) == 1 else None


def _run(name, mod, kw):
    from .graph import Graph

    graph_name = kw.pop("graph_name")
    trials = kw.pop("trials")
    do_verify = kw.pop("verify")
    as_json = kw.pop("as_json")
    nl = kw.pop("nl")
    output = kw.pop("output")
    timeline = kw.pop("timeline")
    quiet = kw.pop("quiet")
    device = kw.pop("device")
    cluster = kw.pop("cluster")
    in_memory = kw.pop("in_memory")
    memory = kw.pop("memory")
    if memory is not None and str(memory).lower() != "none" and in_memory:
        raise click.UsageError("give --memory or --in-memory, not both (--in-memory is --memory "
                               "with room for the whole graph)")
    runtime = {"engine": kw.pop("io_engine"), "threads": kw.pop("threads"),
               "queue_depth": kw.pop("queue_depth"), "max_gap": kw.pop("max_gap"),
               "max_io": kw.pop("max_io"), "buffer_mb": kw.pop("buffer_mb")}
    if kw.pop("no_direct"):
        runtime["direct"] = False
    runtime["check"] = kw.pop("check")
    runtime["gpu_mem"] = kw.pop("gpu_mem")
    if runtime["gpu_mem"] is not None and device == "cpu":
        raise click.UsageError(f"--gpu-mem {runtime['gpu_mem']} is for GPU runs (add --device "
                               f"gpu or auto)")
    tier = kw.pop("gpu_tier")
    if tier != "auto":
        if device == "cpu":
            raise click.UsageError(f"--gpu-tier {tier} is for GPU runs (add --device gpu)")
        runtime["gpu_tier"] = tier
    runtime = {k: v for k, v in runtime.items() if v is not None}
    algo_opts = {k: v for k, v in kw.items() if k not in _RUNTIME_NAMES}
    if algo_opts.get("sources") is not None and algo_opts.get("num_sources") is not None:
        raise click.UsageError("give --sources (the source IDs) or --num-sources (how many "
                               "random ones), not both")
    pick_src = "src" in algo_opts and algo_opts["src"] is None
    # options left at None take the algorithm's own default (run()'s keyword default)
    algo_opts = {k: v for k, v in algo_opts.items() if v is not None}
    label = getattr(mod, "SUPERSTEP_LABEL", "level" if name in ("bfs", "msbfs", "apsp") else "step")

    if name == "kcore" and algo_opts.get("membership_only") and algo_opts.get("k") is None:
        raise click.UsageError("--membership-only needs --k K (which core's members)")
    # every check before any work: the output path, then the dataset and the graph-dependent ranges
    if output:
        try:
            common.check_output(output, _result_class(mod))
        except GrapheneError as e:
            if os.path.splitext(str(output))[1].lower() in common.SAVE_SUFFIXES:
                raise
            # a suffix no output has is a bad option value: usage (exit 2)
            raise click.BadParameter(str(e), param_hint="'-o' / '--output'") from None
    if timeline:
        from . import plot
        folder = os.path.dirname(os.path.abspath(timeline))
        if not os.path.isdir(folder):
            raise GrapheneError(f"--timeline {timeline}: folder {folder} does not exist")
        plot._pyplot()      # matplotlib missing: the error now, not after the run
    if cluster is not None:
        if memory is not None:
            raise click.UsageError("--memory is for one machine (not with --cluster)")
        if do_verify:
            raise click.UsageError("--verify reads the whole graph on this machine; verify the "
                                   "single-machine dataset instead (not with --cluster)")
        from .cluster import open_graph
        graph = open_graph(graph_name, cluster)
    else:
        graph = Graph.open(graph_name)
    from .names import resolve_options
    algo_opts = resolve_options(graph, algo_opts, cli=True)    # --src/--sources by name -> IDs
    common.check_options(name, graph, {**algo_opts, **runtime, "in_memory": in_memory}, cli=True)
    cores = config.default_threads()
    if runtime.get("threads") and int(runtime["threads"]) > 2 * cores and not quiet and \
            cluster is None:
        click.echo(f"warning: --threads {runtime['threads']} is more than twice the {cores} "
                   f"core(s) this process may use: the threads take turns (and each one's IO "
                   f"buffers are memory)", err=True)
    # an algorithm that can write its main array straight to a .npy (MS-BFS's depths: 4 bytes per
    # vertex per source) streams into a temporary file beside the output, renamed at the end
    stream = None
    if output:     # what a killed run writing this output left beside it
        common.remove_stale_partials(output)
    if output and str(output).lower().endswith(".npy") and \
            "output" in inspect.signature(mod.run).parameters:
        stream = os.path.join(os.path.dirname(os.path.abspath(output)),
                              f".{os.path.basename(output)}.{os.getpid()}.partial.npy")
        algo_opts["output"] = stream
        _PARTIAL.append(stream)
    unused = getattr(mod, "UNUSED_MAIN_OPTION", None)
    if unused and not output and not do_verify:
        algo_opts[unused] = False       # nothing reads the main array: not made (MS-BFS's depths)
    run_rt = dict(runtime)
    mem_plan = None
    run_on = registry.choose_device(name, device, graph, {**algo_opts, **run_rt})
    from .algos import small
    precheck = getattr(registry.module(name), "precheck", None)
    if precheck is not None:        # what the algorithm refuses, before any setup line
        precheck(graph, algo_opts)
    small_run = small.eligible(name, graph, run_on, algo_opts)   # in RAM, numpy: no cache
    unused_io = [o for o, given in (
        ("--io-engine", runtime.get("engine") not in (None, "auto")),
        ("--memory", memory is not None), ("--in-memory", in_memory),
        ("--no-direct", runtime.get("direct") is False),
        ("--queue-depth", runtime.get("queue_depth") is not None),
        ("--max-gap", runtime.get("max_gap") is not None),
        ("--max-io", runtime.get("max_io") is not None),
        ("--buffer-mb", runtime.get("buffer_mb") is not None)) if given] if small_run else []
    auto = memory is None or str(memory).lower() == "auto"
    if memory is not None and str(memory).lower() == "none" and \
            registry.entry(name).keep_cache and algo_opts.get("keep_edges") is None:
        algo_opts["keep_edges"] = 0          # kept lists that are cache (BFS's): none either
    if memory is not None and str(memory).lower() in ("auto", "none"):
        memory = None
    fitted = None
    # (--device auto that runs on the CPU, or starts there, gets the CPU's defaults too)
    if auto and not in_memory and cluster is None and run_on in ("cpu", "hybrid") and \
            not small_run:
        fitted = _fit_defaults(name, graph, runtime, algo_opts, output)
        if fitted is not None:          # the defaults do not fit: the picks, and no cache
            if "buffer_mb" in fitted:
                run_rt["buffer_mb"] = fitted["buffer_mb"]
            if "keep_edges" in fitted:
                algo_opts["keep_edges"] = fitted["keep_edges"]
        else:
            mem_plan = _auto_memory(name, graph, runtime, algo_opts, output)
        if mem_plan is not None:
            run_rt["cache"] = mem_plan["cache"]
    elif memory is not None and not small_run:     # (a small graph's run holds it in RAM)
        from .iterator.memory import CacheBudget
        from . import jit
        jit.ready_for_run()        # what a run holds before any graph state, measured here
        mem_plan = registry.memory_plan(
            name, graph, memory, runtime, algo_opts, output,
            runtime_bytes=_runtime_bytes())
        run_rt["cache"] = mem_plan["cache"] = CacheBudget(mem_plan["cache_bytes"])
        from .iterator.memory import memory_available
        have = memory_available()
        if mem_plan["memory_bytes"] > have and not quiet:
            click.echo(f"warning: --memory {memory} is more than the memory available now "
                       f"({have / 2**30:.1f} GiB): the cache may grow until the machine "
                       f"swaps or the run is killed", err=True)
        from .iterator.memory import set_run_budget
        set_run_budget(mem_plan["memory_bytes"])    # e.g. MS-BFS's on-disk depths: written back
        # what the plan picked for the options left out
        if not runtime.get("buffer_mb"):
            run_rt["buffer_mb"] = mem_plan["io_buffer_bytes"] / (1 << 20)
        if "keep_edges" in mem_plan:
            algo_opts["keep_edges"] = mem_plan["keep_edges"]

    quiet_lines = quiet or as_json
    where = (f"on a Ray cluster of {len(graph.placement)} node(s)" if cluster is not None else
             f"on {len(graph.disks)} disk(s)")
    _say(f"graph {graph.name}: {graph.num_vertices:,} vertices, {graph.num_edges:,} edges, "
         f"{graph.num_rows}x{graph.num_cols} partitions {where}", quiet_lines)
    if fitted is not None and (fitted["short"] or not quiet):
        click.echo(f"{'warning' if fitted['short'] else 'note'}: {fitted['why']}", err=True)
    if unused_io and not quiet:     # what the user asked for and this run does not use
        click.echo(f"note: {', '.join(unused_io)} not used: a graph of at most "
                   f"{small.limit():,} edges is read whole into RAM and run with numpy, without "
                   f"the IO engine (GRAPHENE_SMALL_EDGES=0 sends it through the engine)", err=True)
    if mem_plan is not None and mem_plan.get("auto"):
        lists = int(graph.num_edges) * int(getattr(graph, "id_width", 4))     # the out-lists
        of = f" for {lists / 2**20:,.1f} MiB of out-lists"
        _say(f"--memory auto ({mem_plan['memory_bytes'] / 2**30:.1f} GiB, half the memory "
             f"available): adjacency cache of up to {mem_plan['cache_bytes'] / 2**20:,.0f} MiB"
             f"{of}, read through (--memory none: no cache)", quiet_lines)
    elif mem_plan is not None:
        picked = [f"IO buffers {mem_plan['io_buffer_bytes'] / 2**20:g} MiB"]
        if "keep_edges" in mem_plan:
            picked.append(f"{mem_plan['keep_edges']:,} kept neighbour IDs")
        _say(f"--memory {memory}: " + ", ".join(picked) + f", adjacency cache "
             f"{mem_plan['cache_bytes'] / 2**20:,.0f} MiB", quiet_lines)
    trial_rows = []
    res = None
    counter = {"i": 0, "trial": 0}

    def progress(st):
        i = counter["i"]
        counter["i"] += 1
        if nl:
            d = common.superstep_json(i, st)
            d["trial"] = counter["trial"]
            click.echo(json.dumps(d))
        if not quiet_lines:
            click.echo(common.superstep_line(i, st, label), err=True)

    pre_key = _preload_key(name, graph, in_memory, algo_opts, run_rt.get("cache") is not None)
    setup = (_prepare_small(graph) if small_run else
             _prepare(graph, run_on, in_memory, run_rt, pre_key,
                      weights=graph.weighted and getattr(mod, "READS_WEIGHTS", False)))
    if small_run:
        in_memory = True            # what the notices and the summary say about where data was
    kern = (f", {setup['kernels_loaded']} cached kernels loaded alongside"
            if setup.get("kernels_loaded") else "")
    if small_run:
        _say(f"setup {setup['seconds']:.3f} s (a small graph: its lists read whole into RAM, "
             f"{setup['small_bytes'] / 1e6:.1f} MB; numpy, no numba): before the first trial",
             quiet_lines)
    else:
        what = (f"{setup['aot_kernels']} kernels compiled ahead of time, no numba"
                if setup.get("aot_kernels") else f"numba {setup['numba_seconds']:.3f} s")
        _say(f"setup {setup['seconds']:.3f} s ({what}, dataset, offsets and IO engine "
             f"{setup['open_seconds']:.3f} s{kern}): before the first trial, not in its "
             f"time (as the C++ Graphene's setup)", quiet_lines)
    from .iterator import memory as _mem
    verification = None
    proc_peak = 0
    mem_block = None
    for t in range(trials):
        counter["i"] = 0
        counter["trial"] = t
        opts = dict(algo_opts)
        if pick_src:
            opts["src"] = common.pick_source(graph, trial=t)
        res = None              # the last trial's arrays go before this one allocates its own
        proc_peak = max(proc_peak, _mem.peak_bytes())
        _mem.reset_peak()
        rss0 = _mem.rss_bytes()
        with _mem.ledger() as led:
            res = registry.dispatch(name, graph, device=device, in_memory=in_memory,
                                    progress=progress, **opts, **run_rt)
        peak = _mem.peak_bytes()
        proc_peak = max(proc_peak, peak)
        mem_block = common.memory_block(led, graph.num_vertices, rss0, peak, res)
        for w in res.warnings():
            click.echo(f"warning: {w}" + (f" (trial {t + 1})" if trials > 1 else ""), err=True)
        asked = algo_opts.get("num_sources")
        got = getattr(res, "sources", None)
        if asked is not None and got is not None and len(got) < int(asked) and t == 0 and \
                not quiet:
            click.echo(f"note: --num-sources {asked}: only {len(got)} vertices have out-edges; "
                       f"each of them is a source", err=True)
        row = {"trial": t, "seconds": float(res.seconds)}
        row.update(res.scalars())
        row.pop("seconds", None)
        row["seconds"] = float(res.seconds)
        trial_rows.append(row)
        if not as_json:
            extra = "  ".join(f"{k} {_short(v)}" for k, v in res.scalars().items()
                              if k not in ("seconds",) and v is not None and not isinstance(v, list))
            click.echo(f"Trial {t + 1}: {res.seconds:.5f} s  {extra}")
        if do_verify:
            problems = mod.verify(graph, res, **opts)
            if problems:
                msg = "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
                if as_json:
                    click.echo(json.dumps(_summary(name, graph, trial_rows, res, "FAIL", runtime,
                                                   in_memory, setup, mem_block, proc_peak,
                                                   mem_plan)))
                raise VerificationError(f"trial {t + 1}: {msg}")
            verification = "PASS"
            if not as_json:
                click.echo("Verification: PASS")
    from . import jit
    jit.save_preload(pre_key)       # the kernels this run used: loaded in setup next time
    if setup.get("aot_kernels") and jit.materialized():
        _say(f"numba was imported for kernels not compiled ahead of time ({jit.import_seconds():.2f} "
             f"s): `graphene prepare` compiles this run's ones ahead of time too (it adds the "
             f"kernels of earlier runs)", quiet_lines)
    if stream is not None:
        os.replace(stream, output)
        _PARTIAL.remove(stream)
        stream = None
        path = output
        _say(f"wrote {type(res).__name__}'s {res.MAIN} to {path} while it ran", quiet_lines)
    elif output:
        path = res.save(output)
        what = (f"{res.main_name() or 'the main array'}" if path.lower().endswith(".npy") else
                ", ".join(res.arrays()))
        _say(f"saved {type(res).__name__} ({what}) to {path}", quiet_lines)
    if timeline:
        plot.timeline(res.supersteps, timeline,
                      f"graphene run {name} on {graph.name} ({graph.num_rows}x{graph.num_cols}, "
                      f"{len(graph.disks)} disk folder(s))")
        _say(f"drew the timeline to {timeline}", quiet_lines)
    if as_json:
        click.echo(json.dumps(_summary(name, graph, trial_rows, res, verification, runtime,
                                       in_memory, setup, mem_block, proc_peak, mem_plan)))
    else:
        for line in res.summary_lines():
            click.echo(line)
        avg = sum(r["seconds"] for r in trial_rows) / len(trial_rows)
        click.echo(f"Average Time: {avg:.5f} s")
        tot = res.totals()
        click.echo(f"read {tot['bytes_read'] / 1e6:.1f} MB in {tot['supersteps']} supersteps, "
                   f"IO utility {tot['io_utility']:.3f}, engine "
                   f"{_engine_notice(in_memory, mem_plan, graph)}")
        plan = _io_plan(in_memory, graph)
        if plan:
            click.echo(f"requests: {plan}")
        m = mem_block
        huge = sum(m.get("huge_page_bytes", {}).values())
        click.echo(f"peak memory: {max(proc_peak, _mem.peak_bytes()) / 2**20:.1f} MiB RSS; "
                   f"state {m['state_bytes_per_vertex']:.1f} B/vertex "
                   f"({m['state_bytes'] / 2**20:.1f} MiB) + IO buffers "
                   f"{m['io_buffer_bytes'] / 2**20:.1f} MiB" +
                   (f"; in reserved huge pages (not in RSS): {huge / 2**20:.1f} MiB "
                    f"({', '.join(sorted(m['huge_page_bytes']))})" if huge else ""))


#: --memory auto: this share of the memory available when the run starts (RAM, or a memory
#: cgroup's room) is the run's budget; what its runtime, IO buffers and O(|V|) state leave is the
#: adjacency cache. The run's own choices (IO buffers, kept lists) stay at their defaults.
AUTO_MEMORY_SHARE = 0.5
#: no cache below this (a few files' worth of nothing)
AUTO_MIN_CACHE = 16 << 20


def _auto_memory(name, graph, runtime, algo_opts, output):
    """The default budget (`--memory auto`): a plan with a CacheBudget, or None when half the
    memory available leaves no room for a cache (or for the run: then it runs as it would have)."""
    from .iterator.memory import CacheBudget, memory_available
    from . import jit
    if not graph.num_edges or not registry.entry(name).auto_cache:
        return None
    jit.ready_for_run()        # what a run holds before any graph state, measured here
    share = int(memory_available() * AUTO_MEMORY_SHARE)
    if share < (1 << 20):
        return None
    try:
        plan = registry.memory_plan(
            name, graph, share, runtime, algo_opts, output,
            runtime_bytes=_runtime_bytes())
    except GrapheneError:
        return None
    # the plan's picks (fewer kept lists, smaller IO buffers) are for a budget the user set:
    # here the run keeps its defaults, and the cache gets what the defaults leave
    cache = plan["cache_bytes"]
    if "keep_edges" in plan and "keep_edges" not in algo_opts:
        e = registry.entry(name)
        cache -= max(0, e.keep[1] * graph.num_vertices - plan["keep_edges"]) * graph.id_width
    default_io = int(float(runtime.get("buffer_mb") or config.BUFFER_MB) * (1 << 20))
    cache -= max(0, default_io - plan["io_buffer_bytes"])
    if cache < AUTO_MIN_CACHE:
        return None
    plan = {k: v for k, v in plan.items() if k not in ("keep_edges",)}
    plan.update(auto=True, cache_bytes=cache, io_buffer_bytes=default_io,
                cache=CacheBudget(cache))
    return plan


def _fit_defaults(name, graph, runtime, algo_opts, output):
    """`--memory auto` where the memory available (RAM, or a memory cgroup's room) cannot hold
    the run's defaults (the algorithm's kept lists, the 64 MiB IO buffers): the options the user
    left out are picked to fit it, as `--memory` picks them, instead of a run the kernel kills
    half-way. None when the defaults fit; else {"buffer_mb", "keep_edges" (the picks), "why",
    "short": True when not even the smallest picks fit the estimate (the run tries them)}."""
    from .iterator.memory import memory_available
    e = registry.entry(name)
    keeps = e.keep is not None and not (name == "kcore" and algo_opts.get("membership_only")) \
        and algo_opts.get("keep_edges") is None
    if not graph.num_edges or (not keeps and runtime.get("buffer_mb")):
        return None
    have = memory_available()       # (the runtime's estimate counts numba while it is not in)
    mib = (lambda b: f"{b / 2**20:,.0f} MiB")
    where = f"the {mib(have)} of memory available (RAM, or a memory cgroup's limit)"
    try:
        plan = registry.memory_plan(name, graph, have, runtime, algo_opts, output,
                                    runtime_bytes=_runtime_bytes())
    except GrapheneError as err:
        out = {"short": True}
        if not runtime.get("buffer_mb"):
            out["buffer_mb"] = 16
        if keeps:
            out["keep_edges"] = 0
        picked = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in out.items() if k != "short")
        need = str(err).split("needs before any adjacency is cached: ", 1)[-1]
        out["why"] = (f"{where} are less than this run is estimated to need ({need}); trying "
                      f"with {picked}")
        return out
    default_io = int(config.BUFFER_MB) << 20
    default_keep = e.keep[1] * graph.num_vertices if keeps else None
    if keeps and name == "kcore" and graph.directed and graph.in_partitions is None:
        default_keep = graph.num_vertices       # the scan's own default (algos/kcore)
    out = {"short": False}
    if not runtime.get("buffer_mb") and plan["io_buffer_bytes"] < default_io:
        out["buffer_mb"] = plan["io_buffer_bytes"] / (1 << 20)
    if keeps and plan.get("keep_edges", default_keep) < default_keep:
        out["keep_edges"] = int(plan["keep_edges"])        # never more than the default
    if len(out) == 1:
        return None
    picked = ", ".join(f"--{k.replace('_', '-')} {v:g}" if isinstance(v, float) else
                       f"--{k.replace('_', '-')} {v}" for k, v in out.items() if k != "short")
    out["why"] = f"{where} do not hold this run's defaults: running with {picked}"
    return out


def _runtime_bytes() -> int:
    """What a run holds besides its graph state: this process now, a margin, and numba's import
    while it is not in (jit.numba_margin: a kernel not compiled ahead of time brings it in)."""
    from . import jit
    return config.vm_bytes("VmRSS") + registry.RUNTIME_MARGIN + jit.numba_margin()


def _preload_key(name, graph, in_memory, algo_opts, cache=False):
    """Which stored kernel list a run loads in setup (iterator/preload.py): the algorithm, its
    flags that are on (--membership-only, --closeness...), whether an adjacency cache reads
    through, and what about the dataset changes which kernels it specializes."""
    kind = (("w" if graph.weighted else "") + ("d" if graph.directed else "u")
            + ("i" if getattr(graph, "in_partitions", None) is not None else ""))
    where = "cluster" if getattr(graph, "cluster", None) is not None else (
        "mem" if in_memory else "ssd")
    flags = "".join(f"+{k}" for k in sorted(algo_opts) if algo_opts[k] is True)
    flags += "+cache" if cache else ""
    return f"{name}{flags}-{kind}-id{graph.id_width}-{where}"


def _short(v):
    """A trial line's value: floats to 6 significant digits (--json keeps them whole)."""
    return f"{v:.6g}" if isinstance(v, float) else v


def _prepare(graph, device, in_memory, runtime, preload_key=None, weights=False):
    """What every trial would pay once per process, paid before the first one and reported apart
    (the C++ Graphene's `Total time` leaves out the same: loading beg_pos, buffers, IO setup):
    numba's target (ready to load cached kernels), the kernels the last run of this kind used
    (loaded from numba's cache on a thread while the rest goes on), the offsets of each edge
    direction in RAM, the IO buffer pool and a first engine (`--in-memory`: the partitions
    loaded, as GAPBS loads its graph before timing)."""
    from . import aot, jit
    t0 = time.perf_counter()
    aot_s = jit.ready_for_run()
    numba_s = jit.seconds()        # also when --memory's plan made it ready before
    t1 = time.perf_counter()
    pre = None
    if (preload_key and device in ("cpu", "hybrid") and graph.num_vertices
            and getattr(graph, "cluster", None) is None):
        from .iterator.preload import preload
        pre = preload(preload_key)
    if device in ("cpu", "hybrid") and graph.num_vertices and getattr(graph, "cluster", None):
        from .iterator.edgemap import EdgeMap     # the node actors, started and their shards opened
        io = {k: v for k, v in runtime.items() if k not in ("gpu_mem", "gpu_tier", "cache")}
        EdgeMap(graph, in_memory=in_memory, **io).close()
    elif device in ("cpu", "hybrid") and graph.num_vertices:
        from .iterator import IoIterator
        io = {k: v for k, v in runtime.items() if k in ("engine", "threads", "queue_depth",
                                                        "max_gap", "max_io", "buffer_mb",
                                                        "direct", "check", "cache")}
        dirs = ["out"] + (["in"] if graph.directed and graph.in_partitions is not None else [])
        for d in dirs:           # (weights: an algorithm that reads them, as its run opens it)
            IoIterator(graph, d, in_memory=in_memory, weights=weights, **io).close()
    if pre is not None:
        pre.wait()
    t2 = time.perf_counter()
    out = {"seconds": t2 - t0, "numba_seconds": numba_s, "open_seconds": t2 - t1}
    if aot.active() and not jit.materialized():
        out.update(aot_kernels=aot.count(), aot_seconds=round(aot_s, 4))
    if pre is not None:
        out.update(kernels_loaded=pre.loaded, kernels_skipped=pre.skipped,
                   kernels_seconds=round(pre.seconds, 4))
    return out


def _prepare_small(graph):
    """Setup of a small graph's run (algos/small.py): its out-lists read whole into a CSR."""
    from .algos import small
    t0 = time.perf_counter()
    _, nbytes = small.load(graph)
    t = time.perf_counter() - t0
    return {"seconds": t, "numba_seconds": 0.0, "open_seconds": t, "small_bytes": nbytes}


def _engine_notice(in_memory, mem_plan=None, graph=None):
    if getattr(graph, "_small_csr", None) is not None:
        return "memory (a small graph: read whole, numpy, no IO engine)"
    if getattr(graph, "cluster", None) is not None:
        return f"Ray cluster ({len(graph.placement)} node(s), each its local engine)"
    if in_memory:
        return "memory"
    if mem_plan is not None:
        return mem_plan["cache"].describe(_engine_notice(False))
    try:
        from .io.engines import last_notice
        s = last_notice()
        return s.replace("io engine: ", "") if s else "?"
    except ImportError:
        return "?"


def _io_plan(in_memory, graph):
    """How requests were planned: "device model (KEY)" or "fixed (why)"; None without disk reads."""
    if in_memory or getattr(graph, "cluster", None) is not None:
        return None
    from .iterator.session import last_io_plan
    return last_io_plan() or None


def placement(steps) -> list:
    """Where each superstep of a run ran, run-length encoded in order: one entry per stretch of
    supersteps on the same device in the same mode (a GPU tier shows in its mode:
    gpu-stream-host, gpu-stream-ssd; a CPU superstep's mode is its frontier's: queue, mask,
    dense...), with their count, seconds and the bytes they moved to the GPU."""
    out = []
    for st in steps or []:
        key = (str(st.get("device", "cpu")), str(st.get("mode", st.get("direction", "?"))))
        if not out or (out[-1]["device"], out[-1]["mode"]) != key:
            out.append({"device": key[0], "mode": key[1], "supersteps": 0, "seconds": 0.0,
                        "bytes_to_gpu": 0})
        e = out[-1]
        e["supersteps"] += 1
        e["seconds"] = round(e["seconds"] + float(st.get("seconds", 0.0) or 0.0), 6)
        e["bytes_to_gpu"] += int(st.get("bytes_moved", 0) or 0)
    return out


def _summary(name, graph, trial_rows, res, verification, runtime, in_memory, setup=None,
             mem_block=None, proc_peak=0, mem_plan=None):
    secs = [r["seconds"] for r in trial_rows]
    extra = {}
    if getattr(graph, "cluster", None) is not None:
        st = list(getattr(res, "supersteps", None) or [])
        extra["cluster"] = {
            "nodes": [{"node": p["node"], "rows": p["rows"], "home": p["home"]}
                      for p in graph.placement],
            "exchange_bytes": int(sum(s.get("exchange_bytes", 0) for s in st)),
            "coordination_seconds": round(sum(s.get("coordination_seconds", 0.0) for s in st), 4)}
    where = placement(getattr(res, "supersteps", None))
    devices = sorted({e["device"] for e in where if e.get("device")})
    return {
        **extra,
        "algorithm": name, "graph": graph.name, "num_vertices": graph.num_vertices,
        "num_edges": graph.num_edges, "partitions": [graph.num_rows, graph.num_cols],
        "engine": _engine_notice(in_memory, mem_plan, graph), "in_memory": bool(in_memory),
        "runtime": {k: v for k, v in runtime.items()},
        "io_plan": _io_plan(in_memory, graph),
        "setup": {k: round(v, 4) for k, v in (setup or {}).items()},
        "trials": trial_rows, "average_seconds": sum(secs) / len(secs), "min_seconds": min(secs),
        # where the run went and why (--device auto's plan), and the last trial's supersteps: on
        # which device, in which mode or GPU tier
        "device": getattr(res, "device", None) or "+".join(devices) or "cpu",
        "device_reason": getattr(res, "device_reason", None),
        "placement": where,
        "verification": verification,
        "peak_rss_mb": round(max(proc_peak / 2**20, common.peak_rss_mb()), 1),
        "memory": (dict(mem_block, plan={k: v for k, v in mem_plan.items() if k != "cache"},
                        cached_bytes=mem_plan["cache"].used_max) if mem_plan else mem_block),
        "result": res.to_json(),
    }


@click.command("plot")
@click.argument("jsonl", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), metavar="FILE.png",
              help="The PNG to write.")
@click.option("--title", default="", help="Title above the picture.")
def plot_cmd(jsonl, output, title):
    """Draw a run's timeline from the output of `graphene run ... --nl` (its last trial)."""
    from . import plot
    plot._pyplot()
    steps = plot.read_jsonl(jsonl)
    plot.timeline(steps, output, title or os.path.basename(jsonl))
    click.echo(f"drew {len(steps)} supersteps to {output}", err=True)


COMMANDS = [run_cmd, plot_cmd]
