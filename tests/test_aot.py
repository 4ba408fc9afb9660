"""Kernels compiled ahead of time (graphene_py/aot.py): a call takes a compiled function only when
its argument types are exactly those it was compiled for (the functions convert their arguments
unchecked), a run whose kernels are all compiled never imports numba and answers as numba's
kernels do, and a module is only used by the sources, numba, Python and CPU that built it."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from graphene_py import aot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _values():
    a = np.arange(12, dtype=np.int64)
    ro = np.arange(5, dtype=np.uint32)
    ro.flags.writeable = False
    out = [True, False, 0, 7, -3, (1 << 62), 1.5, None, np.int32(3), np.uint64(9),
           np.float32(2.5), np.bool_(True), np.uint8(1), np.complex128(1j)]
    for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
               np.uint64, np.float32, np.float64, np.bool_):
        out.append(np.zeros(4, dtype=dt))
    out += [a, a[::2], a.reshape(3, 4), a.reshape(3, 4).T, a.reshape(3, 4)[:, 1:], ro,
            np.zeros((2, 0)), np.zeros(0, np.int32), a[:1], a[3:]]
    out += [(a, 3, np.zeros(2, np.uint8)), (1, 2), (a, (ro, 1.0)), ()]
    return out


class _Sub(np.ndarray):
    """An ndarray subclass of a user's: numba's type for it is not assumed."""


def test_argument_keys_are_numbas_types(tmp_path):
    """key_of_value(v) is key_of_type(numba.typeof(v)) for every value it gives a key; values it
    cannot key (so no compiled function is ever called with them) are None."""
    import numba
    mm = np.memmap(tmp_path / "m", dtype=np.uint32, mode="w+", shape=(6,))
    for v in _values() + [mm, mm[1:4], (mm, 2)]:
        k = aot.key_of_value(v)
        assert k is not None, v
        assert k == aot.key_of_type(numba.typeof(v)), (v, k, numba.typeof(v))
    # a key mismatch is enough to refuse: types that differ only in layout, mutability, width
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    ro = a.copy()
    ro.flags.writeable = False
    keys = {aot.key_of_value(x) for x in (a, a.T, a[:, 1:], ro, a.astype(np.int32))}
    assert len(keys) == 5
    rec = np.zeros(3, dtype=[("a", np.int32), ("b", np.float64)])
    swapped = np.zeros(3, dtype=">i4")
    for v in (rec, swapped, [1, 2], {"a": 1}, "s", object(), 1 << 64, -(1 << 63),
              np.ma.masked_array([1, 2]), np.zeros(2).view(_Sub), (a, [1])):
        assert aot.key_of_value(v) is None, v


def test_build_key_follows_the_sources(tmp_path):
    """Another source file, an edit (size or time) or another root: another key."""
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    k1 = aot.build_key(str(tmp_path))
    assert aot.build_key(str(tmp_path)) == k1
    os.utime(tmp_path / "sub" / "b.py", ns=(1, 1))
    k2 = aot.build_key(str(tmp_path))
    (tmp_path / "c.py").write_text("")
    k3 = aot.build_key(str(tmp_path))
    assert len({k1, k2, k3}) == 3
    (tmp_path / "notes.txt").write_text("not a source")
    assert aot.build_key(str(tmp_path)) == k3


CALLS = r"""
import sys, json
import numpy as np
from graphene_py import aot, jit
from graphene_py.io import bitmap
calls = []
def fake(*args):
    calls.append(len(args))
    return -5
key = aot.key_of_value((np.zeros(4, np.uint64), 0))
rec = ("graphene_py.io.bitmap", "widen", "(sig)", "b64")
aot._STATE["table"] = {("graphene_py.io.bitmap", "widen"): {key: (fake, rec)}}
got = bitmap.widen(np.zeros(4, np.uint64), 0)            # the types it was "compiled" for
before = "numba" in sys.modules
other = bitmap.widen(np.zeros(4, np.uint64), np.int32(0))  # int32: no compiled function fits
print(json.dumps({"got": int(got) if np.ndim(got) == 0 else None, "calls": calls,
                  "numba_before": before, "numba_after": "numba" in sys.modules,
                  "other_is_fake": isinstance(other, int) and other == -5,
                  "used": [list(k) for k in jit._USED]}))
"""


def test_a_call_takes_a_compiled_function_only_for_its_exact_types():
    """Through the kernels' stand-ins (jit._Lazy) in a fresh process: the call whose types are
    in the table runs the compiled function without importing numba, and is recorded as used
    (its run's preload list keeps it); one with another integer width goes to numba."""
    out = subprocess.run([sys.executable, "-c", CALLS], cwd=ROOT, capture_output=True,
                         text=True, env=dict(os.environ, GRAPHENE_AOT="1"), timeout=300)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["got"] == -5 and r["calls"] == [2]
    assert r["numba_before"] is False and r["numba_after"] is True
    assert r["other_is_fake"] is False
    assert ["graphene_py.io.bitmap", "widen", "(sig)"] in r["used"]


RUN = r"""
import sys, json
import numpy as np
from graphene_py import aot
from graphene_py.cli import main
try:
    main.main(sys.argv[1:], standalone_mode=False)
except SystemExit as e:
    assert e.code in (None, 0), e.code
print(json.dumps({"numba": "numba" in sys.modules, "llvmlite": "llvmlite" in sys.modules,
                  "hits": aot.hits(),
                  "generated": [m for m in sys.modules if m.startswith(aot.GENERATED_PREFIX)]}))
"""


def _graphene(env, *args):
    out = subprocess.run([sys.executable, "-c", RUN, *args], cwd=ROOT, capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_a_run_of_compiled_kernels_imports_no_numba_and_answers_the_same(tmp_path):
    """BFS and WCC from SSD in fresh processes: a run with numba saves its kernels' list, the
    lists are compiled ahead of time (into this test's own kernel folder), and the next runs take
    only compiled kernels: neither numba nor llvmlite imported, nor the generated kernels' modules
    (a hit needs only their names), the setup line says so, and the depths and labels equal
    numba's."""
    from tests import graphs
    g = graphs.powerlaw()
    el = tmp_path / "g.el"
    np.savetxt(el, np.stack([g.src, g.dst], 1), fmt="%d")
    (tmp_path / "d").mkdir()
    env = dict(os.environ, GRAPHENE_KERNEL_CACHE=str(tmp_path / "cache" / "kernels"),
               GRAPHENE_HOME=str(tmp_path / "home"), GRAPHENE_SMALL_EDGES="0",
               GRAPHENE_AOT="0")
    _graphene(env, "partition", str(el), "--disks", str(tmp_path / "d"), "--name", "g", "-s",
              "-q")
    runs = {"bfs": ["run", "bfs", "-g", "g", "--src", "0", "-q"],
            "wcc": ["run", "wcc", "-g", "g", "-q"]}
    for name, args in runs.items():
        r, _ = _graphene(env, *args, "-o", str(tmp_path / f"{name}.numba.npz"))
        assert r["numba"] and r["hits"] == 0 and r["generated"]
    # a list saved by an older version of a kernel (one argument fewer than it takes now): its
    # entry is left to numba, the others are compiled
    import base64
    import pickle
    lists = sorted((tmp_path / "cache" / "preload").glob("*.json"))
    mod, qual, b64 = json.loads(lists[0].read_text())[0][:3]
    sig = pickle.loads(base64.b64decode(b64))
    old = base64.b64encode(pickle.dumps(tuple(sig)[:-1] or (sig[0], sig[0]))).decode()
    (lists[0].parent / "old.json").write_text(json.dumps([[mod, qual, old]]))
    code = ("from graphene_py import cli_prepare; import json; "
            "print(json.dumps(cli_prepare.build_aot(cli_prepare._preload_lists(), jobs=2)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    built = json.loads(out.stdout.strip().splitlines()[-1])
    assert built["kernels"] > 10 and built["failed"] == 0 and built["skipped"] >= 1
    env["GRAPHENE_AOT"] = "1"
    for name, args in runs.items():             # (without -q: the setup line is wanted)
        r, err = _graphene(env, *args[:-1], "-o", str(tmp_path / f"{name}.aot.npz"))
        assert not r["numba"] and not r["llvmlite"] and r["hits"] > 0, err
        assert r["generated"] == [], r["generated"]
        assert "compiled ahead of time, no numba" in err
    a, b = np.load(tmp_path / "bfs.numba.npz"), np.load(tmp_path / "bfs.aot.npz")
    assert np.array_equal(a["depth"], b["depth"])
    a, b = np.load(tmp_path / "wcc.numba.npz"), np.load(tmp_path / "wcc.aot.npz")
    assert np.array_equal(a["labels"], b["labels"])
    # a run that needs kernels not compiled (SpMV's) imports numba for them and says how to
    # compile them too
    r, err = _graphene(env, "run", "spmv", "-g", "g")
    assert r["numba"] and r["hits"] > 0 and "`graphene prepare` compiles" in err
    # another build key (an edited package) finds no module: numba again, the same answer
    env["GRAPHENE_AOT"] = "0"
    r, _ = _graphene(env, *runs["bfs"])
    assert r["numba"]


MARGIN = r"""
import json, sys
from graphene_py import jit
before = jit.numba_margin()
jit.materialize()
print(json.dumps({"before": before, "after": jit.numba_margin()}))
"""


def test_a_run_keeps_room_for_numba_until_it_is_in():
    """--memory's plan (cli_run._runtime_bytes): while numba is not imported (kernels compiled
    ahead of time), a run keeps room for importing it; once it is in, none."""
    out = subprocess.run([sys.executable, "-c", MARGIN], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    from graphene_py.jit import NUMBA_IMPORT_BYTES
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"before": NUMBA_IMPORT_BYTES,
                                                               "after": 0}
