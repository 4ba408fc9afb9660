"""The node actor: one per machine (per Cluster connection), pinned there by a Ray resource. It
writes shards onto the machine's disks and serves the rows of the 2D grid that live there with
the local engine (IoIterator through a local EdgeMap), for any number of datasets.

It holds no algorithm state between supersteps: each `step` gets the whole state (from the object
store), runs the kernel over its own lists, and returns what it changed (cluster/merge.py). Every
call names its shard (home folder, version, runtime options), and a shard is opened on first use.
So a restarted actor (Ray restarts it after its process dies, and runs the pending call again)
reopens the shard and the superstep is simply redone from the driver's copy of the state.
"""
from __future__ import annotations

import json
import os
import socket

import numpy as np

from .merge import diff


class _Shard:
    def __init__(self, home: str, uuid: str, runtime: dict):
        from ..graph import Graph
        self.runtime = runtime
        self.ems = {}
        self.mbuf = None
        self.g = Graph.open(home)
        if self.g.uuid != uuid:
            self.g.close()
            raise RuntimeError(f"{home} holds dataset version {self.g.uuid}, the cluster manifest "
                               f"expects {uuid} (distribute the dataset again)")

    def em(self, weights: bool):
        em = self.ems.get(weights)
        if em is None:
            from ..iterator.edgemap import EdgeMap
            em = EdgeMap(self.g, pull=True, weights=weights, **self.runtime)
            self.ems[weights] = em
        return em

    def close(self):
        for em in self.ems.values():
            em.close()
        self.ems = {}
        self.g.close()


class NodeEngine:
    """This machine's part of every cluster dataset it holds."""

    def __init__(self):
        self.shards = {}
        self.writer = None

    def hello(self) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname()}

    # -- serving ------------------------------------------------------------------------------
    def _shard(self, spec) -> _Shard:
        """spec: (home, uuid, runtime as JSON): the shard, opened on first use."""
        sh = self.shards.get(spec)
        if sh is None:
            home, uuid, rt = spec
            sh = _Shard(home, uuid, json.loads(rt))
            self.shards[spec] = sh
        return sh

    def open(self, spec):
        """Open a shard; returns None, or why it cannot be opened."""
        try:
            self._shard(tuple(spec))
        except Exception as e:
            return str(e)
        return None

    def release(self, spec) -> None:
        sh = self.shards.pop(tuple(spec), None)
        if sh is not None:
            sh.close()

    def degrees(self, spec, direction: str) -> np.ndarray:
        """Degrees of this shard's rows (zero elsewhere), int64 over every vertex."""
        sh = self._shard(tuple(spec))
        em = sh.em(False)
        if direction not in em.its:
            from ..iterator import IoIterator
            em.its[direction] = IoIterator(sh.g, direction, weights=False, **sh.runtime)
        return em.its[direction].degrees(np.int64)

    def step(self, spec, direction, weights, update, state, queue_dtype, frontier) -> tuple:
        """Run `update` over this shard's lists of `direction`: frontier ("queue", ids),
        ("mask", lo, flags of vertices lo..) or ("all",). Returns (stats, changes, queued)."""
        sh = self._shard(tuple(spec))
        em = sh.em(bool(weights))
        if direction not in em.its:
            raise RuntimeError(f"{sh.g.path}: this shard has no {direction}-edge partitions")
        n = sh.g.num_vertices
        st = [np.array(a) if isinstance(a, np.ndarray) else a for a in state]   # writable copies
        q = None
        if update.queue:
            from ..iterator.queue import NextQueue
            q = NextQueue(n, em.its[direction].threads)
            q.ids = q.ids.astype(queue_dtype, copy=False)
            i, t, c = update.queue
            st[i], st[t], st[c] = q.ids, q.tail, q.cur
        kind = frontier[0]
        if kind == "mask":
            if sh.mbuf is None:
                sh.mbuf = np.zeros(n, dtype=np.uint8)
            sh.mbuf[:] = 0
            lo, part = frontier[1], frontier[2]
            sh.mbuf[lo:lo + len(part)] = part
            data = sh.mbuf
        else:
            data = frontier[1] if kind == "queue" else None
        stats = em._run(direction, update, tuple(st), kind, data)
        changes = [diff(state[s], st[s], rule) for s, rule in update.slots()]
        queued = None
        if q is not None:
            size = q.close()
            queued = q.ids[:size].copy()
        return stats, changes, queued

    # -- writing a shard ----------------------------------------------------------------------
    def begin(self, disks, name: str, force: bool):
        """Start a new shard version on this node's disks; returns None or why not."""
        from ..partition.writer import DatasetWriter
        self.abort()
        try:
            self.writer = DatasetWriter(disks, name, force=force, register=False)
        except Exception as e:
            return str(e)
        return None

    def write(self, disk: int, fname: str, chunk, last: bool) -> None:
        path = os.path.join(self.writer.tmp[disk], fname)
        with open(path, "ab") as f:
            f.write(memoryview(chunk))
            if last:
                f.flush()
                os.fsync(f.fileno())

    def commit(self, manifest: dict) -> tuple:
        home = self.writer.commit(manifest)
        uuid = self.writer.uuid
        self.writer = None
        return home, uuid

    def abort(self) -> None:
        if self.writer is not None and not self.writer.committed:
            self.writer.abort()
        self.writer = None
