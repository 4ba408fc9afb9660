"""A model of cluster runs beyond this machine, from the volumes tools/bench_cluster.py measured.

Per run: time = max(IO, compute) spread over the machines + the network time + a latency per
superstep. The measured inputs, per vertex (so they scale with |V|), over a whole BFS and per
PageRank iteration, on kron22: what the driver sends (sent), what comes back to it (back) and
what travels from node to node (between).

Two designs, as measured:
- driver-centred (before 2026-11-27 evening; no `between_mb_total` in the file): every node gets
  its own copy of every change from the driver, so the driver's link carries sent x N + back;
- owners and relays (since): large changes are combined by their owners and large messages
  relayed by the nodes, so the driver's link carries sent + back whatever N is, and each node's
  link its share of an allgather, between / (k - 1) x (N - 1) / N for a measurement on k nodes.
  The network time is the busier of the two links. (Supersteps under 1 MiB of changes still go
  through the driver; at these graphs' sizes those are the few sparse levels.) The IO volume is the
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
        relay = "between_mb_total" in rs[0]
        # driver-centred: what each node got; owners and relays: what the driver sent in all
        sent = statistics.median(r["sent_mb_total"] for r in rs) * 1e6 / KRON22_N / (
            1 if relay else k)
        back = statistics.median(r["back_mb_total"] for r in rs) * 1e6 / KRON22_N
        between = statistics.median(r.get("between_mb_total", 0) for r in rs) * 1e6 / KRON22_N
        steps = rs[0]["supersteps"]
        return sent, back, between, steps, k, relay
    return per("bfs"), per("pagerank-pull")


def network_bytes(sent, back, between, N, k, relay):
    """Bytes on the busiest link for N machines."""
    if not relay:
        return sent * N + back
    return max(sent + back, between / (k - 1) * (N - 1) / N if k > 1 else 0.0)


def main():
    (bs, bb, bw, _, k, relay), (ps, pb, pw, psteps, _, _) = measured(sys.argv[1])
    pr_sent, pr_back, pr_between = ps / psteps, pb / psteps, pw / psteps     # per iteration
    print(f"measured on kron22 ({k} nodes, {'owners and relays' if relay else 'driver-centred'}): "
          f"BFS {bs:.1f} B/vertex sent, {bb:.1f} back, {bw:.1f} between nodes per run; PageRank "
          f"{pr_sent:.1f} sent, {pr_back:.1f} back, {pr_between:.1f} between per iteration"
          f"{'' if relay else ' (sent: to each node)'}\n")
    print("| graph | algorithm | machines | IO+compute s | network s at 10 / 25 / 100 GbE | "
          "predicted s at 10 / 25 / 100 GbE | bound at 100 GbE |")
    print("|---|---|---:|---:|---|---|---|")
    for gname, (n, m, levels) in GRAPHS.items():
        adj = 4 * m
        for algo, io_bytes, edges, steps, sent, back, between in (
                ("BFS", 1.1 * adj, m, levels, bs * n, bb * n, bw * n),
                ("PageRank, 10 it.", 10 * adj, 10 * m, 10, 10 * pr_sent * n, 10 * pr_back * n,
                 10 * pr_between * n)):
            for N in (4, 16, 64):
                work = max(io_bytes / (N * SSD_BPS), edges / (N * EDGES_PER_S))
                nb = network_bytes(sent, back, between, N, k, relay)
                net = {ln: nb / rate for ln, rate in LINKS.items()}
                tot = {ln: work + net[ln] + steps * LATENCY_S for ln in LINKS}
                bound = "network" if net["100GbE"] > work else "IO/compute"
                print(f"| {gname} | {algo} | {N} | {work:.2f} | "
                      f"{' / '.join(f'{net[ln]:.2f}' for ln in LINKS)} | "
                      f"{' / '.join(f'{tot[ln]:.2f}' for ln in LINKS)} | {bound} |")


if __name__ == "__main__":
    main()
