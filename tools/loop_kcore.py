"""Loop the k-core tests that run the full decomposition on directed 3x2 datasets (the path that
raises "k-core: vertex V: S neighbours read, its degree says D"), in one process, re-partitioning
the datasets every iteration (fresh folders, fresh partitioner run), and count failures.

    .venv/bin/python tools/loop_kcore.py --iters 250 [--tag A] [--max-io 512]

Each iteration calls, exactly as pytest does, test_kcore.test_full_decomposition_budgets(g, "in",
(3, 2)) for every graph but the slow out-only chain, and test_kcore.test_thread_counts(1 and 3);
then (unless --no-extra) extra runs of the same datasets with 2..4 compute threads, the SSD and
in-memory paths, max_io 512 B (lists split over many extents) and several budgets. Every failure is
printed with its traceback's last line; the summary line is "iters N failures F seconds S".
Run it niced and twice at once (or beside a CPU hog) to run it under load.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

GNAMES = ["powerlaw", "uniform", "star", "grid", "duplicates", "disconnected", "isolated_ends",
          "empty", "one_vertex"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--tag", default="")
    ap.add_argument("--max-io", type=int, default=512)
    ap.add_argument("--no-extra", action="store_true")
    ap.add_argument("--stress", action="store_true",
                    help="also test_full_decomposition_directed_3x2_stress every iteration")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: no limit)")
    ap.add_argument("--graphs", default=",".join(GNAMES),
                    help="comma-separated test graphs for test_full_decomposition_budgets")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="kloop_home")
    os.environ["GRAPHENE_HOME"] = home
    from graphene_py.algos import kcore
    from tests import test_kcore as T

    fails = 0
    runs = 0
    t0 = time.time()
    done = 0
    for it in range(a.iters):
        if a.minutes and time.time() - t0 > 60 * a.minutes:
            break
        done = it + 1
        root = tempfile.mkdtemp(prefix="kloop")
        T._DATASETS.clear()
        T._CASES.clear()
        jobs = [(f"budgets[{g}-in-3x2]", (lambda g=g: T.test_full_decomposition_budgets(
            g, "in", (3, 2), root))) for g in a.graphs.split(",") if g]
        jobs += [(f"thread_counts[{t}]", (lambda t=t: T.test_thread_counts(t, root)))
                 for t in (1, 3)]
        if a.stress:
            def stress():
                import pytest
                with pytest.MonkeyPatch.context() as mp:
                    T.test_full_decomposition_directed_3x2_stress(root, mp)
            jobs.append(("directed_3x2_stress", stress))
        if not a.no_extra:
            def extra():
                for g in ("powerlaw", "uniform", "star"):
                    c = T.case_of(g, "in")
                    ds = T.make_dataset(root, c.tg, "in", (3, 2))
                    ref = T.naive_core(c)
                    for threads in (2, 3, 4):
                        for keep in (None, 0, 50, 500):
                            for mem in (False, True):
                                kw = dict(threads=threads, keep_edges=keep)
                                if mem:
                                    kw["in_memory"] = True
                                else:
                                    kw.update(engine="uring", buffer_mb=2, max_io=a.max_io)
                                r = kcore.run(ds, **kw)
                                assert np.array_equal(r.core_number, ref), (g, kw)
            jobs.append(("extra", extra))
        for name, fn in jobs:
            runs += 1
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                fails += 1
                last = traceback.format_exception_only(type(e), e)[-1].strip()
                print(f"FAIL iter {it} {name}: {last}", flush=True)
        shutil.rmtree(root, ignore_errors=True)
        if (it + 1) % 10 == 0:
            print(f"{a.tag} iter {it + 1} test_calls {runs} failures {fails} "
                  f"{time.time() - t0:.0f}s", flush=True)
    print(f"{a.tag} iters {done} test_calls {runs} failures {fails} "
          f"seconds {time.time() - t0:.0f}", flush=True)
    shutil.rmtree(home, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
