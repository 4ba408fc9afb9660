"""Benchmark the built-in algorithms on a Graph500 Kronecker graph (SSD path vs in-memory vs scipy).

    .venv/bin/python tools/bench_algos.py prepare [--scale 22]      # generate + partition 1x1 and 2x2
    .venv/bin/python tools/bench_algos.py run [--scale 22] [--algos bfs,pagerank,...] [--trials 3]
    .venv/bin/python tools/bench_algos.py memlimit [--scale 22] [--limit-mb N]

Datasets: kron<scale> symmetrized (GAPBS `-g<scale> -k16` shape), partitioned 1x1 and 2x2 over two
disk folders (/tmp/disk0, /tmp/disk1: the same physical disk here). Every measurement runs in a fresh
subprocess: it first compiles its kernels on a tiny graph (JIT warm-up, reported separately as
compile_s), then drops the page cache (`echo 3 > /proc/sys/vm/drop_caches`) and times one run with
2 threads. peak RSS is the subprocess's ru_maxrss. scipy.sparse.csgraph BFS / connected components
run on the same CSR in memory (load time excluded), side by side in the same session.
`memlimit` runs BFS and PageRank inside a cgroup v2 with memory.max set (default: 25% of the
adjacency bytes) and reports whether they finished.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
DISKS = ["/tmp/disk0", "/tmp/disk1"]
SCRATCH = "/tmp/iterator"
GRIDS = {"1x1": (1, 1), "2x2": (2, 2)}
#: extra benchmark names: name -> (algorithm module, options it adds)
ALGO_VARIANTS = {"kcore-k17": ("kcore", {"k": 17, "membership_only": True})}


EDGE_FACTOR = 16     # --edge-factor (GAPBS -k16); other values get their own dataset names


def name_of(scale, grid):
    ef = "" if EDGE_FACTOR == 16 else f"ef{EDGE_FACTOR}"
    return f"bench_kron{scale}{ef}_{grid}"


def path_of(scale, grid):
    return os.path.join(DISKS[0], name_of(scale, grid))


def weighted_path(scale):
    return os.path.join(DISKS[0], f"bench_kron{scale}w_1x1")


def prepare(scale, weighted=True, grids=None):
    from graphene_py import store
    from graphene_py.generate import generate_to_file
    from graphene_py.partition import partition
    os.makedirs(SCRATCH, exist_ok=True)
    for d in DISKS:
        os.makedirs(d, exist_ok=True)
    ef = "" if EDGE_FACTOR == 16 else f"ef{EDGE_FACTOR}"
    src = os.path.join(SCRATCH, f"kron{scale}{ef}.bin32")
    if not os.path.exists(src):
        info = generate_to_file(src, "kron", scale=scale, edge_factor=EDGE_FACTOR)
        print(f"generated {src}: {info['num_edges']:,} edges in {info['seconds']:.1f} s", flush=True)
    for grid, (R, C) in GRIDS.items():
        if grids is not None and grid not in grids:
            continue
        if store.exists(path_of(scale, grid)):
            continue
        t0 = time.time()
        G = partition(src, DISKS, name=name_of(scale, grid), symmetrize=True, rows=R, cols=C,
                      force=True, quiet=True, memory_limit="4G")
        print(f"partitioned {G} in {time.time() - t0:.1f} s", flush=True)
    # SSSP needs weights: the same graph with GAPBS-style integer weights 1..255, 1x1 only.
    if weighted and not store.exists(weighted_path(scale)):
        wsrc = os.path.join(SCRATCH, f"kron{scale}.wbin32")
        if not os.path.exists(wsrc):
            generate_to_file(wsrc, "kron", scale=scale, edge_factor=16, weighted=True)
        t0 = time.time()
        G = partition(wsrc, DISKS, name=os.path.basename(weighted_path(scale)), symmetrize=True,
                      rows=1, cols=1, force=True, quiet=True, memory_limit="4G")
        print(f"partitioned {G} in {time.time() - t0:.1f} s", flush=True)


# -- one measurement (runs in a subprocess) ------------------------------------------------------
def _tiny_graph(tmp, weighted=False):
    """A small symmetrized dataset with the bench graph's id width, for JIT warm-up."""
    import numpy as np
    from graphene_py.partition import partition_arrays
    rng = np.random.default_rng(0)
    n = 3000
    s, d = rng.integers(0, n, 20000), rng.integers(0, n, 20000)
    disks = [os.path.join(tmp, "w0"), os.path.join(tmp, "w1")]
    for x in disks:
        os.makedirs(x, exist_ok=True)
    w = rng.integers(1, 256, 20000).astype(np.float32) if weighted else None
    return partition_arrays(s, d, weights=w, num_vertices=n, disks=disks, name="warm",
                            symmetrize=True, rows=1, cols=1, force=True, register=False)


def _drop_caches():
    try:
        subprocess.run(["sync"], check=False)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def measure(spec):
    """spec: dict(algo, graph, in_memory, threads, options) -> dict of numbers (printed as JSON)."""
    import tempfile

    from graphene_py.algos import common, registry
    from graphene_py.graph import Graph
    algo = spec["algo"]
    base, extra = ALGO_VARIANTS.get(algo, (algo, {}))
    mod = registry.module(base)
    opts = dict(registry.entry(base).fixed)
    opts.update(extra)
    opts.update(spec.get("options", {}))
    rt = {"threads": spec.get("threads", 2)}
    rt.update(spec.get("runtime", {}))
    G = Graph.open(spec["graph"])
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        W = _tiny_graph(tmp, spec.get("weighted", False))
        wopts = dict(opts)
        if "src" in wopts:
            wopts["src"] = 1
        mod.run(W, in_memory=spec["in_memory"], **wopts, **rt)
    compile_s = time.perf_counter() - t0
    if "src" in opts and opts["src"] is None:
        opts["src"] = common.pick_source(G)
    if spec["in_memory"]:   # graph in RAM before the clock starts (GAPBS excludes loading too)
        from graphene_py.iterator import IoIterator
        t2 = time.perf_counter()
        for d in ("out", "in") if G.in_partitions is not None else ("out",):
            IoIterator(G, d, in_memory=True, weights=bool(spec.get("weighted"))).close()
        load_s = time.perf_counter() - t2
    else:
        load_s = 0.0
    dropped = _drop_caches()
    t1 = time.perf_counter()
    res = mod.run(G, in_memory=spec["in_memory"], **opts, **rt)
    wall = time.perf_counter() - t1
    tot = res.totals()
    out = {"algo": algo, "graph": G.name, "in_memory": spec["in_memory"], "seconds": res.seconds,
           "wall": wall, "compile_s": compile_s, "bytes_read": tot["bytes_read"],
           "io_utility": tot["io_utility"], "supersteps": tot["supersteps"],
           "io_seconds": tot["io_seconds"], "compute_seconds": tot["compute_seconds"],
           "wait_seconds": tot["wait_seconds"], "plan_seconds": tot["plan_seconds"],
           "peak_rss_mb": common.peak_rss_mb(), "cache_dropped": dropped, "load_s": load_s}
    out["result"] = res.scalars()
    if spec.get("verify"):
        out["verify"] = mod.verify(G, res, **opts) or "PASS"
    return out


def sub_measure(spec, cgroup=None, timeout=900):
    cmd = [sys.executable, os.path.abspath(__file__), "_measure", json.dumps(spec)]
    pre = None
    if cgroup:
        def pre():
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=pre)
    if p.returncode != 0:
        return {"algo": spec["algo"], "failure": f"exit {p.returncode}: {p.stderr.strip()[-400:]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def scipy_side(graph_path):
    import numpy as np
    import scipy.sparse as sp
    from scipy.sparse import csgraph

    from graphene_py.algos import common
    from graphene_py.graph import Graph
    G = Graph.open(graph_path)
    indptr, indices, _ = G.to_csr()
    A = sp.csr_matrix((np.ones(len(indices), dtype=np.int8), indices.astype(np.int32), indptr),
                      shape=(G.num_vertices,) * 2)
    del indices
    src = common.pick_source(G)
    t0 = time.perf_counter()
    order = csgraph.breadth_first_order(A, src, directed=True, return_predecessors=False)
    t_bfs = time.perf_counter() - t0
    t0 = time.perf_counter()
    ncc, _ = csgraph.connected_components(A, directed=False)
    t_cc = time.perf_counter() - t0
    out = {"scipy_bfs_s": t_bfs, "scipy_bfs_reached": int(len(order)), "scipy_cc_s": t_cc,
           "scipy_cc_n": int(ncc), "src": src}
    # PageRank peers in memory: a scipy power iteration with graphene's definition and stop rule
    # (alpha 0.85, dangling mass spread uniformly, L1 change < 1e-4), and igraph's PRPACK solver
    # when igraph is installed (pip install igraph; not a project dependency)
    n = G.num_vertices
    outdeg = np.asarray(A.sum(axis=1)).ravel().astype(np.float64)
    dang = outdeg == 0
    inv = np.where(dang, 0.0, 1.0 / np.where(dang, 1.0, outdeg))
    AT = A.T.tocsr().astype(np.float64)
    t0 = time.perf_counter()
    p = np.full(n, 1.0 / n)
    it = 0
    while it < 20:
        new = 0.15 / n + 0.85 * (AT @ (p * inv) + p[dang].sum() / n)
        err = float(np.abs(new - p).sum())
        p = new
        it += 1
        if err < 1e-4:
            break
    out.update(scipy_pr_s=time.perf_counter() - t0, scipy_pr_iterations=it)
    del AT
    try:
        import igraph
        ig = igraph.Graph(n=n, edges=np.column_stack(A.nonzero()).astype(np.int64), directed=True)
        t0 = time.perf_counter()
        ig.pagerank(damping=0.85, implementation="prpack")
        out["igraph_pr_s"] = time.perf_counter() - t0
        del ig
    except ImportError:
        out["igraph_pr_s"] = None
    return out


def available_algos():
    from graphene_py.algos import registry
    out = []
    for a in registry.names():
        if a == "apsp":
            continue   # same module as msbfs
        try:
            registry.module(a)
            out.append(a)
        except ImportError:
            pass
    out += [v for v, (base, _) in ALGO_VARIANTS.items() if base in out]
    return out


def fio_ceiling(graph_path, seconds=5.0):
    """fio's random-read ceiling on the dataset's biggest adjacency file, measured in this session:
    16 KB requests (our max_io) at QD64, and 4 KB at QD64. None when fio is unavailable."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_io

    from graphene_py.graph import Graph
    if not bench_io.ensure_fio():
        return None
    G = Graph.open(graph_path)
    path = max((p.adj_path for p in G.parts("out")), key=os.path.getsize)
    out = {"file": path}
    for bs in (16384, 4096):
        r = bench_io.run_fio(path, bs, 64, seconds)
        out[f"mbs_{bs // 1024}k"] = r["mbs"]
        out[f"iops_{bs // 1024}k"] = r["iops"]
    return out


def run(scale, algos, trials, grids):
    rows = []
    side = scipy_side(path_of(scale, "1x1"))
    print(json.dumps({"scipy": side}), flush=True)
    fio = fio_ceiling(path_of(scale, "1x1"))
    print(json.dumps({"fio": fio}), flush=True)
    for grid in grids:
        for algo in algos:
            opts = {"src": None} if algo in ("bfs", "sssp") else {}
            gpath = path_of(scale, grid)
            if algo == "sssp":
                if grid != "1x1" or not os.path.exists(weighted_path(scale)):
                    continue
                gpath = weighted_path(scale)
            for in_memory in (False, True):
                spec = {"algo": algo, "graph": gpath, "in_memory": in_memory,
                        "threads": 2, "options": opts, "weighted": algo == "sssp"}
                best, times = None, []
                for _ in range(trials if not in_memory else 1):
                    r = sub_measure(spec)
                    if "failure" in r:
                        best = r
                        break
                    times.append(r["seconds"])
                    if best is None or r["seconds"] < best["seconds"]:
                        best = r
                best["grid"] = grid
                best["trial_seconds"] = times
                rows.append(best)
                print(json.dumps(best), flush=True)
    print()
    print(f"seconds = the fastest of {trials} trials (SSD; each a fresh process, page cache dropped); "
          f"median = their median; in-memory: one trial")
    print(f"{'algo':<14}{'grid':<6}{'mode':<8}{'seconds':>9}{'median':>8}{'MB read':>10}{'util':>7}"
          f"{'MB/s':>7}{'%fio':>6}{'io_s':>8}{'comp_s':>8}{'wait_s':>8}{'RSS MB':>8}{'JIT s':>7}"
          f"{'load s':>8}")
    for r in rows:
        if "failure" in r:
            print(f"{r['algo']:<14}{r.get('grid', ''):<6}FAILED {r['failure'][-160:]}")
            continue
        mbs = r["bytes_read"] / 1e6 / max(r["seconds"], 1e-9)
        med = float(np.median(r["trial_seconds"])) if r.get("trial_seconds") else r["seconds"]
        pct = f"{100 * mbs / fio['mbs_16k']:.0f}" if fio and not r["in_memory"] else "-"
        print(f"{r['algo']:<14}{r['grid']:<6}{'memory' if r['in_memory'] else 'ssd':<8}"
              f"{r['seconds']:>9.3f}{med:>8.3f}{r['bytes_read'] / 1e6:>10.1f}{r['io_utility']:>7.3f}"
              f"{mbs:>7.0f}{pct:>6}"
              f"{r['io_seconds']:>8.2f}{r['compute_seconds']:>8.2f}{r['wait_seconds']:>8.2f}"
              f"{r['peak_rss_mb']:>8.0f}{r['compile_s']:>7.1f}{r.get('load_s', 0.0):>8.1f}")
    print(f"scipy.sparse.csgraph (in memory, 1 thread): BFS {side['scipy_bfs_s']:.3f} s "
          f"({side['scipy_bfs_reached']:,} reached), CC {side['scipy_cc_s']:.3f} s "
          f"({side['scipy_cc_n']:,} components); PageRank power iteration to 1e-4 "
          f"{side['scipy_pr_s']:.3f} s ({side['scipy_pr_iterations']} iterations)")
    if side.get("igraph_pr_s") is not None:
        print(f"igraph PageRank (PRPACK, in memory): {side['igraph_pr_s']:.3f} s")
    if fio:
        print(f"fio ceiling on {fio['file']} (random reads, QD64, O_DIRECT): 16 KB "
              f"{fio['mbs_16k']:.0f} MB/s, 4 KB {fio['iops_4k'] / 1e3:.1f}k IOPS; MB/s column = "
              f"bytes read / run seconds (whole run, compute included), %fio = that / fio 16 KB")
    return rows


def _make_cgroup(limit_bytes):
    """A memory cgroup with the limit: cgroup v2 (memory.max) or v1 (memory.limit_in_bytes), nested
    under this process's own memory cgroup. Returns (path, kind)."""
    name = f"graphene_bench_{os.getpid()}"
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        cg = os.path.join("/sys/fs/cgroup", name)
        os.makedirs(cg, exist_ok=True)
        with open(os.path.join(cg, "memory.max"), "w") as f:
            f.write(str(limit_bytes))
        try:
            with open(os.path.join(cg, "memory.swap.max"), "w") as f:
                f.write("0")
        except OSError:
            pass
        return cg, "v2"
    base = "/sys/fs/cgroup/memory"
    mine = "/"
    with open("/proc/self/cgroup") as f:
        for line in f:
            parts = line.strip().split(":", 2)
            if len(parts) == 3 and "memory" in parts[1].split(","):
                mine = parts[2]
    cg = os.path.join(base + mine, name)
    os.makedirs(cg, exist_ok=True)
    with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit_bytes))
    try:
        with open(os.path.join(cg, "memory.memsw.limit_in_bytes"), "w") as f:
            f.write(str(limit_bytes))
    except OSError:
        pass
    return cg, "v1"


def _cgroup_report(cg, kind):
    out = {}
    names = ("memory.events", "memory.peak") if kind == "v2" else \
        ("memory.max_usage_in_bytes", "memory.failcnt", "memory.oom_control")
    for nm in names:
        try:
            with open(os.path.join(cg, nm)) as f:
                out[nm] = f.read().split()
        except OSError:
            pass
    if kind == "v1":   # reset the high-water mark for the next run
        for nm in ("memory.max_usage_in_bytes", "memory.failcnt"):
            try:
                with open(os.path.join(cg, nm), "w") as f:
                    f.write("0")
            except OSError:
                pass
    return out


def memlimit(scale, limit_mb, grid="1x1"):
    from graphene_py.graph import Graph
    G = Graph.open(path_of(scale, grid))
    adj = sum(p.adj_bytes for p in G.partitions)
    if limit_mb is None:
        limit_mb = adj / 4 / (1 << 20)
    cg, kind = _make_cgroup(int(limit_mb * (1 << 20)))
    try:
        print(f"adjacency {adj / 1e6:.0f} MB; cgroup {kind} {cg} memory limit {limit_mb:.0f} MiB "
              f"({limit_mb * (1 << 20) / adj:.0%} of adjacency)", flush=True)
        # BFS and PageRank from SSD, then in-memory BFS as the control that must not fit.
        for algo, in_memory in (("bfs", False), ("pagerank", False), ("bfs", True)):
            spec = {"algo": algo, "graph": path_of(scale, grid), "in_memory": in_memory,
                    "threads": 2, "options": {"src": None} if algo == "bfs" else {},
                    "runtime": {"buffer_mb": 16}}
            r = sub_measure(spec, cgroup=cg)
            r["in_memory"] = in_memory
            r["cgroup"] = _cgroup_report(cg, kind)
            print(json.dumps(r), flush=True)
    finally:
        try:
            os.rmdir(cg)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["prepare", "run", "memlimit", "_measure"])
    ap.add_argument("spec", nargs="?")
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--algos", default=None)
    ap.add_argument("--grids", default="1x1,2x2")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--limit-mb", type=float, default=None)
    ap.add_argument("--edge-factor", type=int, default=16,
                    help="Kronecker edge factor (memlimit: a denser graph, whose adjacency is large "
                         "next to the O(|V|) state, shows the semi-external model)")
    ap.add_argument("--no-weighted", action="store_true", help="prepare: skip the weighted copy")
    a = ap.parse_args()
    global EDGE_FACTOR
    EDGE_FACTOR = a.edge_factor
    if a.cmd == "_measure":
        print(json.dumps(measure(json.loads(a.spec))))
    elif a.cmd == "prepare":
        prepare(a.scale, weighted=not a.no_weighted, grids=a.grids.split(","))
    elif a.cmd == "run":
        algos = a.algos.split(",") if a.algos else available_algos()
        run(a.scale, algos, a.trials, a.grids.split(","))
    else:
        memlimit(a.scale, a.limit_mb)


if __name__ == "__main__":
    main()
