"""A/B of the k-core decomposition of kron24ef64 (tools/bench_scale.py's dataset) in an 1800 MiB
memory cgroup: an older tree against this one, interleaved, 2 rounds, each a fresh process on a
dropped page cache (BENCHMARKS.md, "k-core decomposition in 4-byte rows"). The older tree is a
`git archive REV` unpacked in OLD_TREE with a `graphene` wrapper script there that runs it.

    sudo .venv/bin/python tools/bench_kcore_ab.py /tmp/s_old/graphene benchmarks/scale24_kcore_full_ab.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_algos import _cgroup_report, _make_cgroup  # noqa: E402
import bench_scale  # noqa: E402

EXE = os.path.join(os.path.dirname(sys.executable), "graphene")
cg, kind = _make_cgroup(1800 << 20)
cmds = {"old": [sys.argv[1], "run", "kcore", "--graph", "kron24ef64", "--json", "-q"],
        "new": [EXE, "run", "kcore", "--graph", "kron24ef64", "--json", "-q"]}
rows = []
for r in range(2):
    for label, cmd in cmds.items():
        t = bench_scale.timed(cmd, cgroup=cg)
        rep = _cgroup_report(cg, kind)
        d = json.loads(t["stdout"]) if t["rc"] == 0 else {}
        row = {"label": label, "round": r, "rc": t["rc"], "wall": round(t["wall"], 2),
               "own": d.get("trials", [{}])[0].get("seconds"), "peak_rss_mb": d.get("peak_rss_mb"),
               "growth_B_per_vertex": d.get("memory", {}).get("trial_growth_bytes_per_vertex"),
               "cgroup_max": rep.get("memory.max_usage_in_bytes"), "device_bytes": t["device_bytes"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
json.dump(rows, open(sys.argv[2], "w"), indent=1)
