"""The node actor: one per machine (per driver process), pinned there by a Ray resource. It
writes shards onto the machine's disks and serves the rows of the 2D grid that live there with
the local engine (IoIterator through a local EdgeMap), for any number of datasets.

Between supersteps it keeps a replica of the driver's state arrays, which each `step` brings up
to date with what changed since the last one (sparse when little did, dense otherwise); it runs
the kernel over its own lists on copies of the slots the kernel writes, and returns what it
changed (cluster/merge.py), cut into one part per node: node j owns part j of every written slot
(its own rows' vertices). When the changes are large, the driver hands each owner the parts of
every node (they travel from node to node through Ray's object store), the owner combines them
(`absorb`) and the driver fetches only its result; a large message to the nodes comes in parts,
each relayed by one node to the others (`relay`). The driver's link then carries each change
once each way, not once per node. The driver's arrays are the truth and the checkpoint. Every
call names its shard (home folder, version, runtime options), opened on first use; a restarted actor (Ray
restarts it after its process dies and runs the pending call again) has no replica, says so, and
the driver sends it the whole state: the superstep is redone from the driver's copy.
"""
from __future__ import annotations

import json
import os
import pickle
import socket

import numpy as np

from .merge import combine_stats, diff, merge, owner_bounds, pack, split


class _Shard:
    def __init__(self, home: str, uuid: str, runtime: dict):
        from ..graph import Graph
        self.runtime = runtime
        self.ems = {}
        self.mbuf = None
        self.replicas = {}      # session -> {"version", "arrays": handle -> the driver's array}
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


def join_message(skel, parts) -> list:
    """The state message engine.split_message cut, from its skeleton and the k relayed parts."""
    out, n = [], 0
    for m in skel:
        if m is None or m[0] in ("value", "zeros"):
            out.append(m)
            continue
        got = [p[n] for p in parts]
        n += 1
        if m[0] == "dense":
            out.append(("dense", m[1], np.concatenate([g[0] for g in got]).astype(
                np.dtype(m[3]), copy=False).reshape(m[2])))
        else:
            out.append(("delta", m[1], np.concatenate([g[0] for g in got]),
                        np.concatenate([g[1] for g in got])))
    return out


def _flat(a, rows):
    """The written part of a replica's array, flat (a view: the arrays are C-contiguous)."""
    return (a if rows is None else a[rows[0]:rows[1]]).reshape(-1)


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

    def relay(self, part):
        """Part of a large state message: fetched from the driver, kept in this node's object
        store for the other nodes' next step (engine.split_message)."""
        return part

    def step_packed(self, payload: bytes) -> tuple:
        """step() with its arguments pickled into one byte string by the driver (small
        supersteps: Ray serializes each argument of a call on its own, ~0.3 ms apiece here)."""
        return self.step(*pickle.loads(payload))

    def step(self, spec, head, msg, frontier, *parts) -> tuple:
        """head: (session, base, version, direction, weights, update, queue_dtype, owners),
        pickled once by the driver for every node. Run `update` over this shard's lists of
        `direction`. `msg`: the state, slot by slot, as changes to this node's replica of the
        driver's arrays (ReplicaSender in engine.py), valid
        when the replica is at version `base`; a large message comes as ("split", skeleton), its
        parts relayed by the nodes (`parts`). A replica that is not at `base` (a restarted
        actor, a new session) answers ("stale",) and the driver sends everything. frontier:
        ("queue", ids), ("mask", lo, flags of vertices lo..) or ("all",). owners: the k + 1
        vertex bounds of the k nodes' rows: owner j takes vertices [owners[j], owners[j + 1]) of a
        slot of one entry per vertex, an equal share of any other slot's elements. Returns 1 + k
        values: ("ok", stats, queued, bytes of each part), then the changes cut into k parts
        (a list per written slot each; merge.split); without owners one value, ("ok", stats,
        queued, [bytes], the changes: a list per written slot), or, when the driver asks for
        `pieces` > 1, ("ok", stats, queued, [bytes], ("packed", skeleton)) and the changes in
        that many byte strings (merge.pack)."""
        session, base, version, direction, weights, update, queue_dtype, owners, pieces = \
            pickle.loads(head)
        whole = owners is None
        owners = [0, 0] if whole else owners
        k = len(owners) - 1
        if isinstance(msg, tuple) and msg[0] == "split":
            msg = join_message(msg[1], parts)
        sh = self._shard(tuple(spec))
        rep = sh.replicas.get(session)
        full = all(m is None or m[0] != "delta" for m in msg)
        if rep is None or (rep["version"] != base and not full):
            if not full:
                if whole and pieces <= 1:
                    return ("stale",)
                return (("stale",),) + (None,) * (pieces if whole else k)   # as many as asked
            sh.replicas.clear()                       # one live session per shard
            rep = sh.replicas[session] = {"version": base, "arrays": {}}
        arrays = rep["arrays"]
        state = []
        for m in msg:
            if m is None or m[0] == "value":
                state.append(None if m is None else m[1])
                continue
            kind, h = m[0], m[1]
            if kind == "dense":
                arrays[h] = np.array(m[2])             # writable (the store's copy is read only)
            elif kind == "zeros":
                a = arrays.get(h)
                if a is None or a.shape != tuple(m[2]) or a.dtype != np.dtype(m[3]):
                    arrays[h] = np.zeros(m[2], dtype=m[3])
                else:
                    a[...] = 0
            elif kind == "delta":
                arrays[h].reshape(-1)[m[2]] = m[3]
            state.append(arrays[h])
        live = {m[1] for m in msg if m is not None and m[0] != "value"}
        rep["arrays"] = {h: a for h, a in arrays.items() if h in live}   # as the driver prunes
        rep["version"] = version
        em = sh.em(bool(weights))
        dirs = direction if isinstance(direction, tuple) else (direction,)
        for d in dirs:
            if d not in em.its:
                raise RuntimeError(f"{sh.g.path}: this shard has no {d}-edge partitions")
        n = sh.g.num_vertices
        written = sorted({s for s, _, _ in update.slots()})
        st = list(state)
        for s in written:                              # the kernel works on copies; the replica
            st[s] = state[s].copy()                    # stays as the driver sent it
        q = None
        if update.queue:
            from ..iterator.queue import NextQueue
            q = NextQueue(n, em.its[direction].threads)
            q.ids = q.ids.astype(queue_dtype, copy=False)
            i, t, c = update.queue
            st[i], st[t], st[c] = q.ids, q.tail, q.cur
        # one frontier per direction (EdgeMap.across: the directions in turn, on these copies)
        frs = frontier[1] if frontier[0] == "dirs" else [frontier]
        runs = []
        for d, fr in zip(dirs, frs):
            kind = fr[0]
            if kind == "mask":
                if sh.mbuf is None:
                    sh.mbuf = np.zeros(n, dtype=np.uint8)
                sh.mbuf[:] = 0
                lo, part = fr[1], fr[2]
                sh.mbuf[lo:lo + len(part)] = part
                data = sh.mbuf
            else:
                data = fr[1] if kind == "queue" else None
            runs.append(em._run(d, update, tuple(st), kind, data))
        stats = runs[0] if len(runs) == 1 else combine_stats(runs)
        cut = [[] for _ in range(k)]
        for s, rule, rows in update.slots():
            orig = update.part(state, s, rows)
            ch = diff(orig, update.part(st, s, rows), rule)
            if whole:                                  # one part: the change as it is
                cut[0].append(ch)
                continue
            for j, c in enumerate(split(ch, owner_bounds(orig.size, n, owners))):
                cut[j].append(c)
        queued = None
        if q is not None:
            size = q.close()
            queued = q.ids[:size].copy()
        sizes = [sum(sum(a.nbytes for a in c[1:]) for c in p) for p in cut]
        if whole and pieces > 1:      # in pieces the driver asked for, each inline in Ray
            skel, blobs = pack(cut[0], pieces)
            return (("ok", stats, queued, sizes, ("packed", skel)),) + tuple(blobs)
        if whole:
            return ("ok", stats, queued, sizes, cut[0])
        return (("ok", stats, queued, sizes),) + tuple(cut)

    def absorb(self, spec, session, version, slots, *parts) -> tuple:
        """Combine every node's part of this owner's ranges: slots, one per written slot:
        (array handle, rows, rule, lo, hi); parts: each node's list of changes, in node order.
        Returns ("ok", [(handle, rows, lo, hi, change of the new values)]), the replica left as
        it is (the driver's next message brings what is still new then), or ("stale",) when
        this actor has no replica at `version` (restarted): the driver combines those itself."""
        sh = self._shard(tuple(spec))
        rep = sh.replicas.get(session)
        if rep is None or rep["version"] != version:
            return ("stale",)
        out = []
        for k, (h, rows, rule, lo, hi) in enumerate(slots):
            a = rep["arrays"].get(h)
            if a is None:
                return ("stale",)
            orig = _flat(a, rows)[lo:hi]
            new = orig.copy()
            merge(new, rule, [p[k] for p in parts])
            out.append((h, rows, lo, hi, diff(orig, new, "set")))
        return ("ok", out)

    def end(self, spec, session) -> None:
        sh = self.shards.get(tuple(spec))
        if sh is not None:
            sh.replicas.pop(session, None)

    def remove(self, home: str, uuid: str):
        """Delete the shard at `home` if it is version `uuid` (gone already: nothing to do).
        Returns None or why not."""
        from .. import store
        for spec in [sp for sp in self.shards if sp[0] == home]:
            self.release(spec)
        try:
            o = store.open_dataset(home, recover_files=False)
        except Exception as e:
            return None if "no dataset" in str(e) else str(e)
        if o.manifest.get("uuid") != uuid:
            store.unlock(o.locks)
            return (f"{home} holds dataset version {o.manifest.get('uuid')}, not {uuid}: left "
                    f"alone")
        try:
            store.remove_dataset(o)
        except Exception as e:
            return str(e)
        return None

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
