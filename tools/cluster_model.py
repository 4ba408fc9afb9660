"""A model of cluster runs beyond this machine, from the volumes tools/bench_cluster.py measured.

Per run: time = max(IO, compute) spread over the machines + the network time of what travels
through the driver's link + a latency per superstep. The measured inputs, per vertex (so they
scale with |V|): the bytes each node receives (state changes, frontier slice) and the bytes the
nodes send back, over a whole BFS and per PageRank iteration, on kron22. The IO volume is the
single machine's (BENCHMARKS.md, issue 4: BFS reads ~1.1x the adjacency, a PageRank iteration
1x). The rest are stated assumptions (edit them here):

    .venv/bin/python tools/cluster_model.py benchmarks/cluster_kron22.jsonl
"""
from __future__ import annotations

import json
import statistics
import sys

#: per machine: 4 NVMe SSDs at 3 GB/s each (PCIe 4), edges visited per second by 32 cores (kron22
#: in-memory pull PageRank: 147 M edges/s on 2 threads, ~73 M per thread, x32)
SSD_BPS = 4 * 3.0e9
EDGES_PER_S = 32 * 73e6
#: a superstep's fixed cost on a real network (RPC round trips to N actors, the driver's merge)
LATENCY_S = 0.005
LINKS = {"10GbE": 1.25e9, "25GbE": 3.125e9, "100GbE": 12.5e9}
GRAPHS = {   # vertices, directed edges, BFS levels
    "twitter-2010": (41_652_230, 1_468_365_182, 16),
    "Kronecker 30 (ef 16, symmetrized)": (1 << 30, 2 << 34, 8),
}
KRON22_N = 4_194_304


def measured(path):
    rows = [json.loads(line) for line in open(path)]

    def per(algo):
        rs = [r for r in rows if r["engine"] == "cluster" and r["algorithm"] == algo]
        k = max(r["nodes"] for r in rs)
        rs = [r for r in rs if r["nodes"] == k]
        sent = statistics.median(r["sent_mb_total"] for r in rs) * 1e6 / k / KRON22_N
        back = statistics.median(r["back_mb_total"] for r in rs) * 1e6 / KRON22_N
        steps = rs[0]["supersteps"]
        return sent, back, steps, k
    return per("bfs"), per("pagerank-pull")


def main():
    (bs, bb, _, k), (ps, pb, psteps, _) = measured(sys.argv[1])
    pr_sent, pr_back = ps / psteps, pb / psteps        # per iteration
    print(f"measured on kron22 ({k} nodes): BFS {bs:.1f} B/vertex to each node and {bb:.1f} "
          f"B/vertex back per run; PageRank {pr_sent:.1f} B/vertex to each node and "
          f"{pr_back:.1f} back per iteration\n")
    print("| graph | algorithm | machines | IO+compute s | network s at 10 / 25 / 100 GbE | "
          "predicted s at 10 / 25 / 100 GbE | bound at 100 GbE |")
    print("|---|---|---:|---:|---|---|---|")
    for gname, (n, m, levels) in GRAPHS.items():
        adj = 4 * m
        for algo, io_bytes, edges, steps, sent, back in (
                ("BFS", 1.1 * adj, m, levels, bs * n, bb * n),
                ("PageRank, 10 it.", 10 * adj, 10 * m, 10, 10 * pr_sent * n, 10 * pr_back * n)):
            for N in (4, 16, 64):
                work = max(io_bytes / (N * SSD_BPS), edges / (N * EDGES_PER_S))
                net = {ln: (sent * N + back) / bw for ln, bw in LINKS.items()}
                tot = {ln: work + net[ln] + steps * LATENCY_S for ln in LINKS}
                bound = "network" if net["100GbE"] > work else "IO/compute"
                print(f"| {gname} | {algo} | {N} | {work:.2f} | "
                      f"{' / '.join(f'{net[ln]:.2f}' for ln in LINKS)} | "
                      f"{' / '.join(f'{tot[ln]:.2f}' for ln in LINKS)} | {bound} |")


if __name__ == "__main__":
    main()
