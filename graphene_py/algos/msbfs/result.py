"""What a multi-source BFS returns (MSBFSResult: depths, sources, reached, closeness) and the
options of `graphene run apsp` / `msbfs`."""
from __future__ import annotations

import click
import numpy as np

from ..common import Result

DEFAULT_SOURCES = 32


class MSBFSResult(Result):
    """depths int32[S, n]. A GPU run leaves them in GPU memory (`depths_on_gpu`) until they are
    first asked for (`depths`, arrays(), save()): reached and closeness are counted there, and at
    Kronecker scale 24 the copy of 32 rows to host memory took 0.5-0.8 s of the run's 1.0 s
    (H200 machine), for a command that prints only the counts."""
    MAIN = "depths"
    PER_VERTEX = False      # depths is [sources, n]; sources, reached, closeness are per source

    @property
    def depths(self):
        d = self.__dict__.get("depths")
        if d is None:
            dev = self.__dict__.pop("_depths_gpu", None)
            if dev is not None:
                d = self.__dict__["depths"] = dev.get()
        return d

    @depths.setter
    def depths(self, value):
        self.__dict__.pop("_depths_gpu", None)
        self.__dict__["depths"] = value

    @property
    def depths_on_gpu(self) -> bool:
        return self.__dict__.get("_depths_gpu") is not None

    def arrays(self) -> dict:
        if self.depths_on_gpu:
            self.depths                 # (copied to host memory now, in the result's order)
        return super().arrays()

    def host_arrays(self) -> dict:
        return super().arrays()

    @property
    def depths_kept(self) -> bool:
        """Whether the run kept its depths (run(keep_depths=False) counts only)."""
        return self.depths_on_gpu or self.__dict__.get("depths") is not None

    def save(self, path: str) -> str:
        from ...errors import GrapheneError
        if not self.depths_kept:
            raise GrapheneError(f"{path}: this run kept no depths (keep_depths=False): run it "
                                f"with output= (-o) or keep_depths=True to save them")
        return super().save(path)

    def scalars(self) -> dict:
        d = super().scalars()
        d.pop("depths", None)           # (None where the run kept none)
        clo = getattr(self, "closeness", None)
        if clo is not None and len(clo):
            d["closeness_mean"] = float(np.mean(clo))
        return d

    def to_json(self, per_superstep: bool = False) -> dict:
        d = super().to_json(per_superstep)
        d["sources"] = [int(x) for x in np.asarray(self.sources)]
        d["reached"] = [int(x) for x in np.asarray(self.reached)]
        clo = getattr(self, "closeness", None)
        if clo is not None:
            d["closeness"] = [float(x) for x in np.asarray(clo)]
        return d

    def summary_lines(self, top: int = 10) -> list:
        clo = getattr(self, "closeness", None)
        if clo is None or not len(clo):
            return []
        clo = np.asarray(clo)
        src = np.asarray(self.sources)
        order = np.argsort(-clo, kind="stable")[:top]
        best = ", ".join(f"{self.vertex_name(src[i])} {clo[i]:.6g}" for i in order)
        return [f"closeness over {len(clo)} source(s): mean {float(clo.mean()):.6g}, "
                f"min {float(clo.min()):.6g}, max {float(clo.max()):.6g}",
                f"top {len(order)} (vertex closeness): {best}"]


def closeness_of(reached, sums, n):
    """Wasserman-Faust closeness of each source (NetworkX's definition): reached vertices (itself
    included) and the sum of their distances, over n vertices."""
    clo = np.zeros(len(reached))
    ok = sums > 0
    if n > 1:
        clo[ok] = ((reached[ok] - 1) / (n - 1)) * ((reached[ok] - 1) / sums[ok])
    return clo


def _sources_option(ctx, param, value):
    """The comma-separated sources as strings: IDs, or names on a dataset that has them
    (graphene_py/names.py resolves them once the dataset is open)."""
    if value is None:
        return None
    out = [x.strip() for x in value.split(",")]
    if out and not out[-1]:             # (a trailing comma)
        out.pop()
    if not out:
        raise click.BadParameter(f"expected at least one vertex, got {value!r}")
    if "" in out:
        raise click.BadParameter(f"an empty item in {value!r}")
    return out


CLI_OPTIONS = [
    click.Option(["--sources"], type=str, default=None, callback=_sources_option, metavar="ID,ID,...",
                 help="The source vertices themselves, by ID (or by name on a dataset with names), "
                      "comma-separated: --sources 0,5,17. "
                      "--sources 32 is the one vertex 32; for 32 random sources use --num-sources "
                      "32."),
    click.Option(["--num-sources"], type=click.IntRange(min=1), default=None, metavar="COUNT",
                 help=f"How many random sources (distinct, non-zero out-degree, fixed seed; all "
                      f"such vertices when fewer exist) [default: {DEFAULT_SOURCES}]. Not with "
                      f"--sources."),
    click.Option(["--closeness"], is_flag=True,
                 help="Also compute each source's closeness (Wasserman-Faust): a summary on "
                      "stdout, per-source values in --json and in -o .npz."),
    click.Option(["--top-down", "bottom_up"], flag_value=False, default=True,
                 help="Top-down levels only (no bottom-up levels)."),
    click.Option(["--keep-edges", "keep_edges"], type=click.IntRange(min=0), default=None,
                 help="RAM budget for short in-lists kept once read, in neighbour IDs (default 1 "
                      "per vertex; 0: keep none, read them again each bottom-up level)."),
]
