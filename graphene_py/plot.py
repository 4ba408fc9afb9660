"""A run's timeline as a picture, in the manner of Graphene's Figure 4.21: read throughput of each
disk folder over time with the superstep boundaries, and below it the frontier size and the IO
utility of every superstep.

Time resolution is one superstep: a superstep's bytes from a disk are spread evenly over its
seconds (the engine reports bytes per superstep, not finer samples). Drawn with matplotlib, an
optional extra (`pip install 'graphene_py[plots]'`); without it a clear error says so.

    graphene run bfs --src 0 --timeline bfs.png          # the last trial of this run
    graphene run pagerank --nl > pr.jsonl; graphene plot pr.jsonl -o pr.png
"""
from __future__ import annotations

import json
import os

from .errors import GrapheneError


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise GrapheneError("drawing needs matplotlib: pip install 'graphene_py[plots]' "
                            "(or pip install matplotlib)") from None
    return plt


def read_jsonl(path) -> list:
    """Superstep records of a `graphene run --nl` output (the last trial's), in order."""
    steps = []
    try:
        with open(path) as f:
            for i, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):    # the run's summary lines between the records
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    raise GrapheneError(f"{path}, line {i}: not JSON (expected the output of "
                                        f"graphene run --nl)") from None
                if isinstance(d, dict) and "superstep" in d and "seconds" in d:
                    steps.append(d)
    except OSError as e:
        raise GrapheneError(f"{path}: {e.strerror or e}") from None
    if not steps:
        raise GrapheneError(f"{path}: no superstep records (expected the output of "
                            f"graphene run --nl)")
    last = max(int(s.get("trial", 0)) for s in steps)
    return [s for s in steps if int(s.get("trial", 0)) == last]


def timeline(steps, path, title="") -> str:
    """Draw `steps` (superstep dicts: seconds, bytes_read, bytes_read_per_disk, frontier,
    io_utility) into the PNG at `path`, written atomically; returns the path."""
    if not steps:
        raise GrapheneError("nothing to draw: the run had no supersteps")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise GrapheneError(f"{path}: folder {folder} does not exist")
    plt = _pyplot()
    t0 = [0.0]
    for s in steps:
        t0.append(t0[-1] + float(s.get("seconds", 0.0)))
    ndisks = max((len(s.get("bytes_read_per_disk") or []) for s in steps), default=0) or 1
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 2]})
    for d in range(ndisks):
        xs, ys = [], []
        for i, s in enumerate(steps):
            per = s.get("bytes_read_per_disk") or [s.get("bytes_read", 0)]
            b = per[d] if d < len(per) else 0
            dt = max(t0[i + 1] - t0[i], 1e-9)
            xs += [t0[i], t0[i + 1]]
            ys += [b / dt / 1e6] * 2
        ax1.plot(xs, ys, label=f"disk {d}" if ndisks > 1 else "read")
    for t in t0[1:-1]:
        ax1.axvline(t, color="0.8", lw=0.6, zorder=0)
        ax2.axvline(t, color="0.8", lw=0.6, zorder=0)
    ax1.set_ylabel("read MB/s")
    ax1.set_ylim(bottom=0)
    ax1.legend(loc="best", fontsize=8)
    ax1.set_title(title or "timeline (one step = one superstep)")
    mids = [(t0[i] + t0[i + 1]) / 2 for i in range(len(steps))]
    widths = [max(t0[i + 1] - t0[i], 1e-9) * 0.9 for i in range(len(steps))]
    ax2.bar(mids, [max(1, int(s.get("frontier", 0))) for s in steps], width=widths,
            color="tab:gray", alpha=0.6, label="frontier (vertices)")
    ax2.set_yscale("log")
    ax2.set_ylabel("frontier")
    ax2.set_xlabel("seconds since the first superstep")
    ax3 = ax2.twinx()
    ax3.plot(mids, [float(s.get("io_utility", 1.0)) for s in steps], "o-", color="tab:red",
             ms=3, label="IO utility")
    ax3.set_ylim(0, 1.05)
    ax3.set_ylabel("IO utility", color="tab:red")
    fig.tight_layout()
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, format="png", dpi=110)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
