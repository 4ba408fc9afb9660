"""The k-core decomposition of kron24ef64 (tools/bench_scale.py's dataset) with --keep-edges 0 inside
a memory cgroup: one fresh run on a dropped page cache, checked against the --in-memory result
(computed outside the cap on first use, kept in /work/scale24/kcore_ref.npy).

    sudo .venv/bin/python tools/bench_kcore_cap.py CAP_MIB OUT.json [more graphene run options]
    sudo .venv/bin/python tools/bench_kcore_cap.py 800 benchmarks/scale24_kcore_keep0_cap800.json --buffer-mb 32
"""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_algos import _make_cgroup, _cgroup_report
import bench_scale
import numpy as np

EXE = os.path.join(os.path.dirname(sys.executable), "graphene")
cap = int(sys.argv[1]) << 20
cg, kind = _make_cgroup(cap)
res = "/work/scale24/kcore0.npy"
t = bench_scale.timed([EXE, "run", "kcore", "--graph", "kron24ef64", "--keep-edges", "0", *sys.argv[3:],
                       "--json", "-q", "-o", res], cgroup=cg)
rep = _cgroup_report(cg, kind)
d = json.loads(t["stdout"]) if t["rc"] == 0 else {}
row = {"cap_mib": cap >> 20, "rc": t["rc"], "wall": round(t["wall"], 2), "own": d.get("trials", [{}])[0].get("seconds"),
       "peak_rss_mb": d.get("peak_rss_mb"), "memory": d.get("memory"), "cgroup": rep,
       "device_bytes": t["device_bytes"], "stderr": t["stderr"][-500:]}
if t["rc"] == 0:
    ref = "/work/scale24/kcore_ref.npy"
    if not os.path.exists(ref):
        q = bench_scale.timed([EXE, "run", "kcore", "--graph", "kron24ef64", "--in-memory",
                               "--json", "-q", "-o", ref])
        row["reference_rc"] = q["rc"]
    row["agreement"] = "equal" if np.array_equal(np.load(res), np.load(ref)) else "DIFFERENT"
print(json.dumps(row))
json.dump(row, open(sys.argv[2], "w"), indent=1)
