"""Side-by-side timing of whole commands where the user sits: every run a fresh process on a cold
page cache, the commands interleaved A1 B1 A2 B2 ..., medians with min-max, and the disk's fio
ceiling measured at the start and the end (the disk here drifts by 2x within minutes).

    sudo .venv/bin/python tools/ab_runs.py -n 3 --fio /tmp/fio.dat \\
        --run "check=graphene run bfs --graph kron22 --src 0 --check" \\
        --run "nocheck=graphene run bfs --graph kron22 --src 0 --no-check" --json out.json

`--warm` keeps the page cache instead (steady state on disk: start-up costs, small graphs), with
`--warmup N` uncounted rounds first.

Each --run is LABEL=COMMAND (split like a shell, no shell). Per run it records: wall seconds of the
process, the command's own reported time (the first match of --own-re per label, default: graphene's
`Trial 1: X s`, C++ Graphene's `Total time: X`, GAPBS's `Trial Time: X`), peak RSS of the process
process (wait4), and bytes read from the device (/sys/block/DEV/stat sectors x 512,
DEV = the disk holding --data-dir). Before each run: sync, `echo 3 > /proc/sys/vm/drop_caches` (needs
root; reported when it fails), 0.5 s pause.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

OWN_RE = [r"^Trial 1: ([0-9.]+) s", r"Total time: ([0-9.]+)", r"Trial Time:\s+([0-9.]+)"]


def drop_caches() -> bool:
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        return False
    time.sleep(0.5)
    return True


def block_device(path: str) -> str | None:
    """The /sys/block name of the disk holding `path` (partitions map to their disk)."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    major, minor = os.major(dev), os.minor(dev)
    link = f"/sys/dev/block/{major}:{minor}"
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def sectors_read(dev: str | None) -> int:
    if not dev:
        return 0
    try:
        with open(f"/sys/block/{dev}/stat") as f:
            return int(f.read().split()[2])
    except (OSError, IndexError, ValueError):
        return 0


def fio_ceiling(path: str, runtime: int = 10, sizes=("4k", "16k", "128k")) -> dict:
    """Random-read MB/s and IOPS at `sizes` (4k/16k/128k), QD64, O_DIRECT, io_uring (BASELINES.md
    protocol)."""
    out = {}
    if not os.path.exists(path) or os.path.getsize(path) < (4 << 30):
        subprocess.run(["fio", "--name=layout", f"--filename={path}", "--size=4G", "--rw=write",
                        "--bs=1M", "--ioengine=io_uring", "--iodepth=16", "--output-format=json"],
                       check=True, capture_output=True)
    for bs in sizes:
        r = subprocess.run(["fio", f"--name=rr_{bs}", f"--filename={path}", "--size=4G",
                            "--rw=randread", f"--bs={bs}", "--direct=1", "--ioengine=io_uring",
                            "--iodepth=64", f"--runtime={runtime}", "--time_based", "--numjobs=1",
                            "--output-format=json"], check=True, capture_output=True, text=True)
        job = json.loads(r.stdout)["jobs"][0]["read"]
        out[bs] = {"MBps": round(job["bw_bytes"] / 1e6, 1), "iops": round(job["iops"])}
    return out


def _wait4(pid, timeout):
    """os.wait4 with a timeout: (pid, status, rusage of that process alone)."""
    end = time.monotonic() + timeout
    while True:
        got, status, ru = os.wait4(pid, os.WNOHANG)
        if got:
            return got, status, ru
        if time.monotonic() > end:
            raise TimeoutError
        time.sleep(0.005)


def one_run(cmd, own_res, dev, timeout, warm=False):
    dropped = False if warm else drop_caches()
    s0 = sectors_read(dev)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            _, status, ru = _wait4(p.pid, timeout)
        except TimeoutError:
            p.kill()
            _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    s1 = sectors_read(dev)
    own = None
    for rx in own_res:
        m = re.search(rx, text, re.M)
        if m:
            own = float(m.group(1))
            break
    return {"rc": p.returncode, "wall": wall, "own": own, "cpu": ru.ru_utime + ru.ru_stime,
            "maxrss_mb": ru.ru_maxrss / 1024,
            "device_bytes": (s1 - s0) * 512, "cache_dropped": dropped,
            "tail": text.strip()[-300:] if p.returncode else ""}


def summarize(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=COMMAND")
    ap.add_argument("-n", type=int, default=3, help="runs of each command (interleaved)")
    ap.add_argument("--own-re", action="append", default=None, help="regex with one group: own time")
    ap.add_argument("--fio", default=None, metavar="FILE", help="measure fio ceilings on FILE at start and end")
    ap.add_argument("--data-dir", default=".", help="a path on the disk under test (device bytes)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json", default=None, help="write every run and the summary here")
    ap.add_argument("--warm", action="store_true",
                    help="keep the page cache (steady state on disk: start-up, small graphs)")
    ap.add_argument("--warmup", type=int, default=0, help="uncounted runs of each command first")
    a = ap.parse_args(argv)
    runs = []
    for spec in a.run:
        label, _, cmd = spec.partition("=")
        runs.append((label, shlex.split(cmd)))
    own_res = a.own_re or OWN_RE
    dev = block_device(a.data_dir)
    result = {"commands": {lbl: " ".join(c) for lbl, c in runs}, "device": dev,
              "machine": {"cpus": os.cpu_count(), "uname": " ".join(os.uname())}, "runs": []}
    if a.fio:
        result["fio_start"] = fio_ceiling(a.fio)
        print("fio start:", result["fio_start"], flush=True)
    for _ in range(a.warmup):
        for label, cmd in runs:
            one_run(cmd, own_res, dev, a.timeout, a.warm)
    for i in range(a.n):
        for label, cmd in runs:
            r = one_run(cmd, own_res, dev, a.timeout, a.warm)
            r.update(label=label, i=i)
            result["runs"].append(r)
            print(f"{label:>12} #{i + 1}: wall {r['wall']:.3f} s  own {r['own']}  cpu {r['cpu']:.2f} s  rss "
                  f"{r['maxrss_mb']:.0f} MiB  dev {r['device_bytes'] / 1e6:.1f} MB"
                  + (f"  rc {r['rc']}: {r['tail']}" if r["rc"] else ""), flush=True)
    if a.fio:
        result["fio_end"] = fio_ceiling(a.fio)
        print("fio end:", result["fio_end"], flush=True)
    result["summary"] = {}
    for label, _ in runs:
        rows = [r for r in result["runs"] if r["label"] == label and r["rc"] == 0]
        result["summary"][label] = {k: summarize(rows, k) for k in ("wall", "own", "maxrss_mb",
                                                                     "device_bytes", "cpu")}
        s = result["summary"][label]

        def fmt(x, unit="s", scale=1.0):
            if not x:
                return "-"
            return f"{x['median'] * scale:.3f} ({x['min'] * scale:.3f}-{x['max'] * scale:.3f}) {unit}"
        print(f"{label:>12}: own {fmt(s['own'])}  wall {fmt(s['wall'])}  cpu {fmt(s['cpu'])}  "
              f"rss {fmt(s['maxrss_mb'], 'MiB')}  dev {fmt(s['device_bytes'], 'MB', 1e-6)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
