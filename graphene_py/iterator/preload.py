"""Kernels the last run used, loaded before the first trial (see graphene_py/jit.py).

`graphene run` saves which kernels a run called (jit.save_preload: module, name and numba
signature, per algorithm, its flags, its cache and kind of dataset); `preload(key)` in the next
process imports the modules they live in on the calling thread, then loads them from numba's
on-disk cache on a thread of its own while the caller opens the dataset (jit.prepare: the
dispatcher takes a loaded kernel when the run first calls it, which is when it counts as used;
a kernel of the list the run never calls is not saved again). An entry whose kernel is not in
numba's cache (stale, never compiled with that signature) is skipped, never compiled there: the
trial then loads or compiles it as it always did.
"""
from __future__ import annotations

import base64
import importlib
import pickle
import sys
import threading
import time

from .. import jit
from .specialize import generated_kernel


def _dispatcher(mod, qual):
    """The dispatcher an entry names, if its module is imported already (Preload imports them on
    the main thread first: the preload thread takes no import lock against it)."""
    if mod.startswith(jit.GENERATED_PREFIX):   # a specialized superstep kernel, by what it is for
        active, _, compute = qual.partition("|")
        d = generated_kernel(mod[len(jit.GENERATED_PREFIX):], active, compute)
    else:
        m = sys.modules.get(mod)
        d = getattr(m, qual, None) if m is not None else None
    return d if hasattr(d, "_cache") and hasattr(d, "overloads") else None


def _import_modules(entries):
    """Import, on the calling (main) thread, the graphene_py modules the entries name that are not
    imported yet (a run imports some only when a superstep first needs them, e.g. the kept
    lists'), so the preload thread finds every dispatcher without importing anything itself."""
    names = set()
    for mod, qual, *_ in entries:
        if mod.startswith(jit.GENERATED_PREFIX):
            names.update(q.rpartition(".")[0] for q in qual.split("|"))
        else:
            names.add(mod)
    for name in sorted(names):
        if name.startswith("graphene_py.") and name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:      # noqa: BLE001 - a stale entry: skipped on the thread
                pass


class Preload:
    """The kernels stored under a key, being loaded on a thread of their own (see the module):
    .loaded and .skipped count them, .seconds is the thread's time; wait() joins it."""

    def __init__(self, key: str):
        self.loaded = self.skipped = 0
        self.seconds = 0.0
        self.entries = jit.read_preload(jit.preload_path(key)) if jit.installed() else []
        self._t = None
        _import_modules(self.entries)
        if self.entries:
            self._t = threading.Thread(target=self._run, name="graphene-preload", daemon=True)
            self._t.start()

    def _run(self):
        t0 = time.perf_counter()
        for mod, qual, sig, *_ in self.entries:
            try:
                disp = _dispatcher(mod, qual)
                ok = disp is not None and jit.prepare(disp, pickle.loads(base64.b64decode(sig)))
            except Exception:      # noqa: BLE001 - stale entry: the trial loads what it needs
                ok = False
            if ok:
                self.loaded += 1
            else:
                self.skipped += 1
        self.seconds = time.perf_counter() - t0

    def wait(self) -> "Preload":
        if self._t is not None:
            self._t.join()
        return self


def preload(key: str) -> Preload:
    """Start loading the kernels stored under `key` (Preload.wait() to finish)."""
    return Preload(key)
