"""The node actor: one per machine, pinned there by a Ray resource, serving the rows of the 2D grid
that live on that machine's disks with the local engine (IoIterator through a local EdgeMap).

It holds no algorithm state between supersteps: each `step` gets the whole state (from the object
store), runs the kernel over its own lists, and returns what it changed (cluster/merge.py). So a
restarted actor (Ray restarts it after its process dies) reopens its shard and the very same call
is simply run again: the superstep is redone from the driver's copy of the state.
"""
from __future__ import annotations

import os
import socket

import numpy as np

from .merge import diff


class NodeEngine:
    """Serves one shard (the partitions of some rows, on this node's disks)."""

    def __init__(self, home: str, uuid: str, runtime: dict):
        self.home = home
        self.runtime = dict(runtime)
        self.error = None
        self.g = None
        self.ems = {}
        self.mbuf = None
        try:
            from ..graph import Graph
            g = Graph.open(home)
            if g.uuid != uuid:
                self.error = (f"{home} holds dataset version {g.uuid}, the cluster manifest "
                              f"expects {uuid} (distribute the dataset again)")
                g.close()
            else:
                self.g = g
        except Exception as e:          # reported by hello(), raised by the driver
            self.error = f"{type(e).__name__}: {e}" if not str(e).startswith(home) else str(e)

    def hello(self) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname(), "error": self.error}

    def _em(self, weights: bool):
        if self.error:
            raise RuntimeError(self.error)
        em = self.ems.get(weights)
        if em is None:
            from ..iterator.edgemap import EdgeMap
            em = EdgeMap(self.g, pull=True, weights=weights, **self.runtime)
            self.ems[weights] = em
        return em

    def degrees(self, direction: str) -> np.ndarray:
        """Degrees of this shard's rows (zero elsewhere), int64 over every vertex."""
        em = self._em(False)
        if direction not in em.its:
            from ..iterator import IoIterator
            em.its[direction] = IoIterator(self.g, direction, weights=False, **self.runtime)
        return em.its[direction].degrees(np.int64)

    def step(self, direction, weights, update, state, queue_dtype, frontier) -> tuple:
        """Run `update` over this shard's lists of `direction`: frontier ("queue", ids),
        ("mask", lo, flags of vertices lo..) or ("all",). Returns (stats, changes, queued)."""
        em = self._em(bool(weights))
        if direction not in em.its:
            raise RuntimeError(f"{self.home}: this shard has no {direction}-edge partitions")
        n = self.g.num_vertices
        st = [np.array(a) if isinstance(a, np.ndarray) else a for a in state]   # writable copies
        if update.queue:
            from ..iterator.queue import NextQueue
            q = NextQueue(n, em.its[direction].threads)
            q.ids = q.ids.astype(queue_dtype, copy=False)
            i, t, c = update.queue
            st[i], st[t], st[c] = q.ids, q.tail, q.cur
        kind = frontier[0]
        if kind == "mask":
            if self.mbuf is None:
                self.mbuf = np.zeros(n, dtype=np.uint8)
            self.mbuf[:] = 0
            lo, part = frontier[1], frontier[2]
            self.mbuf[lo:lo + len(part)] = part
            data = self.mbuf
        else:
            data = frontier[1] if kind == "queue" else None
        stats = em._run(direction, update, tuple(st), kind, data)
        changes = [diff(state[s], st[s], rule) for s, rule in update.slots()]
        queued = None
        if update.queue:
            size = q.close()
            queued = q.ids[:size].copy()
        return stats, changes, queued

    def close(self) -> None:
        for em in self.ems.values():
            em.close()
        self.ems = {}
        if self.g is not None:
            self.g.close()


class ShardWriter:
    """Writes one node's shard onto its disks (the driver streams the files' bytes in chunks);
    `commit(manifest)` publishes it with the dataset store's atomic commit."""

    def __init__(self, disks, name: str, force: bool):
        from ..partition.writer import DatasetWriter
        self.w, self.error = None, None
        try:
            self.w = DatasetWriter(disks, name, force=force, register=False)
        except Exception as e:            # reported by ready()
            self.error = str(e)

    def ready(self):
        return self.error

    def write(self, disk: int, fname: str, chunk, last: bool) -> None:
        path = os.path.join(self.w.tmp[disk], fname)
        with open(path, "ab") as f:
            f.write(memoryview(chunk))
            if last:
                f.flush()
                os.fsync(f.fileno())

    def commit(self, manifest: dict) -> tuple:
        home = self.w.commit(manifest)
        return home, self.w.uuid

    def abort(self) -> None:
        if self.w is not None and not self.w.committed:
            self.w.abort()
