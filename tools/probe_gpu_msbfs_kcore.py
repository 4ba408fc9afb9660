"""Probe on a GPU machine: multi-source BFS two ways, and k-core with and without its device-side
peel loop, on graphs built on the host and loaded resident (BENCHMARKS.md, "MS-BFS on the GPU: one
BFS per source" and "k-core's small peel queues on the device").

    PYTHONPATH=.:tools python3 tools/probe_gpu_msbfs_kcore.py --msbfs 22 24 --kcore 22 24 --chain 20

msbfs: 32 random sources of non-zero degree; gpu.msbfs(method="bits") against one BfsLevels BFS per
source (method "bfs"), the depths compared, then the depths' copy to host memory and the reached /
depth-sum counts by numpy on the host against CuPy on the GPU. kcore: gpu.kcore(block_loop=True /
False) alternating, twice each after a warm-up, the cores compared; --chain L adds a path of 2^L
vertices. Kronecker graphs: edge factor 16, symmetrized (bench_gpu_tiers.kron_csr).
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def chain_csr(n):
    """A symmetrized path 0-1-...-(n-1) as (ptr, idx)."""
    src = np.concatenate([np.arange(n - 1), np.arange(1, n)])
    dst = np.concatenate([np.arange(1, n), np.arange(n - 1)])
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.add.at(ptr, src + 1, 1)
    return np.cumsum(ptr), dst[order].astype(np.int32)


def probe_msbfs(name, ptr, idx, reps=2):
    import cupy as cp
    from graphene_py.gpu import DeviceGraph
    from graphene_py.gpu import algorithms as A
    dg = DeviceGraph.from_csr(ptr, idx, symmetric=True)
    src = np.random.default_rng(1).choice(np.flatnonzero(np.diff(ptr) > 0), 32, replace=False)

    def sync():
        cp.cuda.Device().synchronize()
    A.msbfs(dg, src[:2], to_host=False, method="bits")
    A.msbfs(dg, src[:2], to_host=False, method="bfs")
    sync()
    for rep in range(reps):
        st = {}
        t = time.perf_counter()
        d1 = A.msbfs(dg, src, to_host=False, stats=st, method="bits")
        sync()
        t_bits = time.perf_counter() - t
        t = time.perf_counter()
        d2 = A.msbfs(dg, src, to_host=False, method="bfs")
        sync()
        t_bfs = time.perf_counter() - t
        t = time.perf_counter()
        h = d1.get()
        t_copy = time.perf_counter() - t
        t = time.perf_counter()
        (h >= 0).sum(axis=1), np.where(h > 0, h, 0).sum(axis=1)
        t_host = time.perf_counter() - t
        t = time.perf_counter()
        (d1 >= 0).sum(axis=1), cp.where(d1 > 0, d1, 0).sum(axis=1, dtype=cp.int64)
        sync()
        t_dev = time.perf_counter() - t
        print(f"{name} msbfs rep {rep}: bits {t_bits:.3f} s (levels {st.get('levels')}), "
              f"32 bfs {t_bfs:.3f} s, equal {bool(cp.array_equal(d1, d2))}; depths to host "
              f"{t_copy:.3f} s, counts on host {t_host:.3f} s, on GPU {t_dev:.4f} s", flush=True)
        del d1, d2
    del dg
    cp.get_default_memory_pool().free_all_blocks()


def probe_kcore(name, ptr, idx):
    import cupy as cp
    from graphene_py.gpu import DeviceGraph
    from graphene_py.gpu import algorithms as A
    dg = DeviceGraph.from_csr(ptr, idx, symmetric=True)
    A.kcore(dg)
    cores = {}
    for loop in (True, False, True, False):
        st = {}
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        c = A.kcore(dg, stats=st, block_loop=loop)
        dt = time.perf_counter() - t
        if loop in cores:
            assert np.array_equal(cores[loop], c)
        cores[loop] = c
        print(f"{name} kcore block_loop {loop}: {dt:.3f} s  rounds {st['rounds']} on device "
              f"{st['device_loop_rounds']} max core {st['max_core']}", flush=True)
    assert np.array_equal(cores[True], cores[False])
    del dg
    cp.get_default_memory_pool().free_all_blocks()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--msbfs", type=int, nargs="*", default=[22, 24], help="Kronecker scales")
    ap.add_argument("--kcore", type=int, nargs="*", default=[22, 24], help="Kronecker scales")
    ap.add_argument("--chain", type=int, default=20, help="k-core on a path of 2^L vertices "
                                                           "(0: none)")
    a = ap.parse_args(argv)
    from bench_gpu_tiers import kron_csr
    if a.chain:
        probe_kcore(f"chain 2^{a.chain}", *chain_csr(1 << a.chain))
    for scale in sorted(set(a.msbfs) | set(a.kcore)):
        ptr, idx = kron_csr(scale, 16)
        if scale in a.msbfs:
            probe_msbfs(f"kron{scale}", ptr, idx)
        if scale in a.kcore:
            probe_kcore(f"kron{scale}", ptr, idx)


if __name__ == "__main__":
    main()
