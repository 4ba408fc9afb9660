"""One algorithm on kron24ef64 (tools/bench_scale.py's dataset) inside a memory cgroup: a fresh run
on a dropped page cache, its saved result checked against the --in-memory result (computed outside
the cap on first use and kept in /work/scale24/ALGO_ref.npy; MS-BFS depths compared row by row).

    sudo .venv/bin/python tools/bench_cap.py ALGO CAP_MIB OUT.json [more graphene run options]
    sudo .venv/bin/python tools/bench_cap.py kcore 800 benchmarks/scale24_kcore_keep0_cap800.json --keep-edges 0 --buffer-mb 32
    sudo .venv/bin/python tools/bench_cap.py msbfs 800 benchmarks/scale24_msbfs_cap800.json
    sudo .venv/bin/python tools/bench_cap.py pagerank 800 benchmarks/scale24_pr_cap800.json

PageRank scores are compared by L1 distance (both runs stop at an error of 1e-4, each in its own
sweep order), pull PageRank and SpMV by relative difference, the rest exactly.
"""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_algos import _make_cgroup, _cgroup_report
import bench_scale
import numpy as np

EXE = os.path.join(os.path.dirname(sys.executable), "graphene")
WORK = "/work/scale24"


#: run options that change only how a run uses memory and IO (with their values)
RESOURCE = {"--memory", "--keep-edges", "--buffer-mb", "--threads", "--engine"}


def _result_options(extra):
    out, skip = [], False
    for i, a in enumerate(extra):
        if skip:
            skip = False
            continue
        if a.split("=")[0] in RESOURCE:
            skip = "=" not in a
            continue
        out.append(a)
    return out


def main():
    algo, cap, out, extra = sys.argv[1], int(sys.argv[2]) << 20, sys.argv[3], sys.argv[4:]
    cg, kind = _make_cgroup(cap)
    res = os.path.join(WORK, f"{algo}_capped.npy")
    t = bench_scale.timed([EXE, "run", algo, "--graph", "kron24ef64", *extra, "--json", "-q",
                           "-o", res], cgroup=cg)
    rep = _cgroup_report(cg, kind)
    d = json.loads(t["stdout"]) if t["rc"] == 0 else {}
    row = {"algorithm": algo, "options": extra, "cap_mib": cap >> 20, "rc": t["rc"],
           "wall": round(t["wall"], 2), "own": d.get("trials", [{}])[0].get("seconds"),
           "peak_rss_mb": d.get("peak_rss_mb"), "memory": d.get("memory"), "cgroup": rep,
           "device_bytes": t["device_bytes"], "stderr": t["stderr"][-500:]}
    if t["rc"] == 0:
        # the reference runs with the options that change the answer (not those that only
        # change how the run uses memory)
        same = _result_options(extra)
        tag = "".join(c if c.isalnum() else "_" for c in "_".join(same))
        ref = os.path.join(WORK, f"{algo}{'_' + tag if tag else ''}_ref.npy")
        if not os.path.exists(ref):
            q = bench_scale.timed([EXE, "run", algo, "--graph", "kron24ef64", "--in-memory",
                                   *same, "--json", "-q", "-o", ref])
            row["reference_rc"] = q["rc"]
        a, b = np.load(res, mmap_mode="r"), np.load(ref, mmap_mode="r")
        kind = {"pagerank": "pr", "pagerank-pull": "close", "spmv": "close"}.get(algo, "exact")
        row["agreement"] = (bench_scale.compare_rows(a, b) if a.ndim == 2
                            else bench_scale.compare(kind, np.asarray(a), np.asarray(b)))
    print(json.dumps(row))
    with open(out, "w") as f:
        json.dump(row, f, indent=1)


if __name__ == "__main__":
    main()
