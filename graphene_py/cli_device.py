"""`graphene calibrate`: measure the disks' random-read speed by request size, once per device.
`graphene prepare`: compile the built-in kernels once (graphene_py/cli_prepare.py)."""
from __future__ import annotations

import datetime
import json
import os

import click

from .cli_dataset import _MultiValueOption
from .errors import GrapheneError


def profile_lines(key, prof):
    when = datetime.datetime.fromtimestamp(prof.measured_at).strftime("%Y-%m-%d %H:%M:%S")
    head = (f"{key}: {prof.engine or '?'} engine{'' if prof.direct else ' (no O_DIRECT)'}, "
            f"queue depth {prof.queue_depth}, random reads over {prof.bytes_over / 2**20:,.0f} MiB, "
            f"measured {when} in {prof.seconds:.1f} s")
    lines = [head, f"  {'size':>6} {'IOPS':>10} {'MB/s':>9}"]
    for s, i, m in zip(prof.sizes, prof.iops, prof.mbps):
        lines.append(f"  {s >> 10:>5}K {i:>10,.0f} {m:>9.1f}")
    lines.append(f"  large requests: {prof.slot_bytes() >> 10} KiB (90% of the best MB/s)")
    return lines


@click.command("calibrate")
@click.argument("graph", required=False)
@click.option("--disks", "-d", cls=_MultiValueOption, metavar="DIR...",
              help="Measure the devices under these folders (default: the dataset's disks).")
@click.option("--seconds", type=click.FloatRange(0.05, 10.0), default=None,
              help="Reads per request size last this long (default 0.3).")
@click.option("--io-engine", "engine", type=click.Choice(["auto", "uring", "liburing", "pread"]),
              default="auto", show_default=True, help="IO engine to measure with.")
@click.option("--queue-depth", type=click.IntRange(1, 4096), default=None,
              help="IOs in flight (default 64, as runs use).")
@click.option("--show", is_flag=True, help="Print the stored profiles; measure nothing.")
@click.option("--forget", is_flag=True,
              help="Delete the stored profiles of these devices (every profile with no GRAPH and "
                   "no --disks): runs then plan with the fixed request sizes.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--graph", "-g", "graph_opt", default=None, metavar="NAME|PATH",
              help="The dataset, as `graphene run -g` takes it (the same as GRAPH).")
def calibrate_cmd(graph, disks, seconds, engine, queue_depth, show, forget, as_json, graph_opt):
    """Measure how fast the disks of dataset GRAPH (default: the last partitioned) serve random
    reads of 4 KB .. 512 KB, and keep the result ($GRAPHENE_HOME/devices.json, one profile per
    device and block-IO cgroup). `graphene run` then picks each superstep's merge gap and request
    size for that device. `graphene partition` measures a new device by itself."""
    from .io import calibrate as cal
    if graph_opt is not None:
        if graph is not None and graph != graph_opt:
            raise click.UsageError("give GRAPH or --graph, not both")
        graph = graph_opt
    if show and forget:
        raise click.UsageError("give --show or --forget, not both")
    if disks and graph:
        raise click.UsageError("give GRAPH or --disks, not both")
    folders, files = None, {}
    if disks:
        for d in disks:
            if not os.path.isdir(d):
                raise GrapheneError(f"--disks {d}: not a folder")
        folders = list(disks)
    elif graph is not None or not (show or forget):
        from .graph import Graph
        g = Graph.open(graph)
        folders, files = list(g.disks), cal.dataset_files(g)
    keys = None
    if folders is not None:
        keys = []
        for d in folders:
            k = cal.profile_key(d)
            if k is None:
                raise GrapheneError(f"{d}: cannot name the device under this folder")
            if k not in keys:
                keys.append(k)
    if forget:
        gone = cal.forget(keys)
        if as_json:
            click.echo(json.dumps({"forgotten": gone}))
        else:
            click.echo(f"forgot {len(gone)} device profile(s)" + (": " + ", ".join(gone) if gone else ""))
        return
    if show:
        stored = cal.load_all()
        sel = {k: cal.Profile.from_dict(v) for k, v in stored.items() if keys is None or k in keys}
        sel = {k: p for k, p in sel.items() if p is not None}
        if as_json:
            click.echo(json.dumps({k: p.to_dict() for k, p in sel.items()}, indent=1))
            return
        if not sel:
            click.echo("no device profiles" + (" for " + ", ".join(keys) if keys else "")
                       + ": runs plan with the fixed request sizes (`graphene calibrate` measures)")
        for k, p in sel.items():
            click.echo("\n".join(profile_lines(k, p)))
        return
    quiet = as_json
    try:
        got = cal.calibrate_folders(folders, files, seconds=seconds, engine=engine,
                                    queue_depth=queue_depth,
                                    progress=None if quiet else (lambda m: click.echo(m, err=True)))
    except OSError as e:
        raise GrapheneError(f"calibration failed: {e}") from e
    if as_json:
        click.echo(json.dumps({k: dict(p.to_dict(), folders=d) for k, d, p in got}, indent=1))
        return
    for k, d, p in got:
        click.echo("\n".join(profile_lines(k, p)))
    click.echo(f"stored in {os.path.join(os.path.dirname(cal._store_path()), cal.STORE)}; runs on "
               f"{'this device' if len(got) == 1 else 'these devices'} now choose merge gap and "
               f"request size per superstep from it", err=True)


@click.command("prepare")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Processes compiling at once.")
@click.option("--aot", type=click.Choice(["all", "builtin", "none"]), default="all",
              show_default=True,
              help="Also compile kernels ahead of time into extension modules, so that a run "
                   "whose kernels are all there never imports numba (0.3-0.9 s of a fresh "
                   "process): those of prepare's own runs and of your earlier runs (all), of "
                   "prepare's runs only (builtin: `make install`), or none.")
@click.pass_context
def prepare_cmd(ctx, jobs, aot):
    """Compile graphene_py's modules to bytecode and cache the kernels of every built-in
    command, ahead of the first run (`make install` does this; run it again after upgrading
    numba, after editing graphene_py, or after runs of your own to compile their kernels ahead
    of time too)."""
    from .cli_prepare import prepare
    secs = prepare(ctx.find_root().command, jobs, say=lambda m: click.echo(m, err=True), aot=aot)
    click.echo(f"kernels ready in {secs:.1f} s", err=True)


COMMANDS = [calibrate_cmd, prepare_cmd]
