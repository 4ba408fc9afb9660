"""The driver side of a cluster run: connecting, distributing a dataset over the nodes, the
cluster dataset (ClusterGraph) and the engine-contract backend (ClusterEdgeMap)."""
from __future__ import annotations

import copy
import json
import os
import pickle
import sys
import time

import numpy as np

from .. import config, store
from ..errors import GrapheneError
from ..graph import Graph
from ..iterator.cost import Model, pull_direction
from ..iterator.edgemap import EdgeMap
from .merge import (assign, bounds, combine_stats, merge, merge_queues, nbytes, owner_bounds,
                    unpack)
from .node import NodeEngine

#: Ray restarts a node actor whose process died this many times, re-running its pending call.
RESTARTS = 3
#: State messages up to this size travel inline with each node's call (no object-store copy).
INLINE = 64 << 10
#: ... and up to this size in pieces of INLINE bytes (Ray passes arguments under 100 KB in the
#: call itself; larger ones go through the object store).
INLINE_MAX = 2 << 20
#: Changes of a superstep from this many bytes (all nodes' together) are combined by their
#: owners, node to node, instead of by the driver.
OWNERS_FROM = 1 << 20
#: Bytes per chunk when files travel to a node.
CHUNK = 32 << 20
#: Runtime options a node's engine takes (the rest are the driver's).
NODE_OPTIONS = ("engine", "threads", "queue_depth", "max_gap", "max_io", "buffer_mb", "direct",
                "in_memory", "io_workers", "check", "block_size")


def timeout_s() -> float:
    """How long the driver waits for a node's answer before naming it as gone."""
    return float(os.environ.get("GRAPHENE_CLUSTER_TIMEOUT", "600"))


def _ray():
    try:
        import ray
    except ImportError:
        raise GrapheneError("running on a cluster needs Ray: pip install 'graphene_py[cluster]' "
                            "(or pip install ray)") from None
    return ray


def connect(address="auto"):
    """Join the Ray cluster at `address` ("auto": the one `ray start` made on this machine;
    "local": start a one-node cluster in this process; or host:port / ray://...)."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    try:
        if address in (None, "local"):     # a new instance, never one a stale address file names
            ray.init(address="local", logging_level="ERROR", log_to_driver=False,
                     include_dashboard=False)
        else:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise GrapheneError(f"cannot join the Ray cluster at {address!r} ({e}); start one with "
                            f"`ray start --head`, or use --cluster local") from None
    return ray


def clusters_dir() -> str:
    return os.path.join(config.home_dir(), "clusters")


def manifest_path(name: str) -> str:
    return os.path.join(clusters_dir(), f"{name}.json")


#: the node actors of this process's Ray session, by (job, label): every Cluster object of the
#: process uses the same ones (a process joins one Ray cluster), so a second connection, as a
#: command run in-process makes, finds its engines started and their kernels loaded
_ACTORS = {}


class Cluster:
    """A connection to a Ray cluster and the graphene nodes in it."""

    def __init__(self, address="auto"):
        self.address = address
        self.ray = connect(address)

    def _key(self, label: str) -> tuple:
        return self.ray.get_runtime_context().get_job_id(), label

    def actor(self, label: str):
        """The NodeEngine on node `label` (started on first use in this process's Ray session;
        Ray restarts it when its process dies and runs its pending call again)."""
        a = _ACTORS.get(self._key(label))
        if a is None:
            a = self.ray.remote(NodeEngine).options(
                resources={label: 0.001}, num_cpus=0, max_restarts=RESTARTS,
                max_task_retries=RESTARTS).remote()
            _ACTORS[self._key(label)] = a
        return a

    def forget(self, label: str) -> None:
        a = _ACTORS.pop(self._key(label), None)
        if a is not None:
            try:
                self.ray.kill(a)
            except Exception:
                pass

    def nodes(self) -> dict:
        """label -> Ray node id of every live node (label: its `graphene:*` resource, else
        `node:<ip>`); a label two live nodes share is listed once, with id None."""
        out = {}
        for n in self.ray.nodes():
            if not n.get("Alive"):
                continue
            res = n.get("Resources", {})
            own = sorted(k for k in res if k.startswith("graphene:"))
            label = own[0] if own else f"node:{n['NodeManagerAddress']}"
            out[label] = None if label in out else n["NodeID"]
        return out

    def distribute(self, graph: Graph, disks, name=None, force=False, nodes=None) -> str:
        """Copy `graph` onto the cluster: node k gets the k-th contiguous block of rows (of each
        edge direction) onto `disks` (paths on that node; "{node}" in a path becomes the node's
        label, for several simulated nodes on one machine). Returns the cluster manifest's path."""
        return distribute(self, graph, disks, name=name, force=force, nodes=nodes)

    def open(self, name: str) -> "ClusterGraph":
        return open_graph(name, self)

    def shutdown(self) -> None:
        job = self.ray.get_runtime_context().get_job_id()
        for j, lb in list(_ACTORS):
            if j == job:
                self.forget(lb)
        self.ray.shutdown()


def _split(count: int, k: int) -> list:
    """k contiguous, near-equal ranges of range(count): [(lo, hi), ...]."""
    b = np.linspace(0, count, k + 1).round().astype(int)
    return [(int(b[i]), int(b[i + 1])) for i in range(k)]


def node_disks(disks, label: str) -> list:
    tag = label.split(":", 1)[-1]
    return [d.replace("{node}", tag) for d in disks]


def distribute(cluster: Cluster, graph: Graph, disks, name=None, force=False, nodes=None) -> str:
    ray = cluster.ray
    name = name or graph.name
    live = cluster.nodes()
    labels = list(nodes) if nodes else sorted(live)
    for lb in labels:
        if lb not in live:
            raise GrapheneError(f"node {lb!r} is not in the Ray cluster (live: {', '.join(sorted(live))})")
        if live[lb] is None:
            raise GrapheneError(f"two live nodes are both {lb!r}; give each a resource "
                                f"(ray start --resources '{{\"graphene:NAME\": 1}}')")
    k = len(labels)
    dirs = [d for d in ("out", "in") if graph.manifest.get(d)]
    for d in dirs:
        rows = len(graph.manifest[d]["rows"]) - 1
        if rows < k:
            raise GrapheneError(f"{graph.name} has {rows} row(s) of {d}-partitions; spreading it "
                                f"over {k} nodes needs at least {k} (re-partition with --rows {k})")
    disks = list(disks)
    if not disks:
        raise GrapheneError("give at least one disk folder for each node (--disks)")
    os.makedirs(clusters_dir(), exist_ok=True)
    path = manifest_path(name)
    old = None
    if os.path.exists(path):
        if not force:
            raise GrapheneError(f"cluster dataset {name!r} exists ({path}); --force replaces it")
        try:
            with open(path) as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = None
    # shards of each distribution have a name of their own: the dataset being replaced keeps its
    # shards, whole and usable, until the new manifest has replaced the old one (the commit point)
    import uuid as _uuid
    shard_name = f"{name}.{_uuid.uuid4().hex[:8]}.shard"
    placement, writers = [], []
    names = {}
    try:
        names = _copy_names(graph, name, shard_name)
        for i, lb in enumerate(labels):
            nd = node_disks(disks, lb)
            w = cluster.actor(lb)
            writers.append(w)
            err = ray.get(w.begin.remote(nd, shard_name, False))
            if err:
                raise GrapheneError(f"node {lb}: {err}")
            m = copy.deepcopy(graph.manifest)
            for key in ("format", "version", "uuid", "name", "disks", "created", "manifest_crc",
                        "relabel", "labels", "labels_crc", "labels_bytes", "short"):
                m.pop(key, None)
            rows, load, calls = {}, [0] * len(nd), []
            for d in dirs:
                lo, hi = _split(len(graph.manifest[d]["rows"]) - 1, k)[i]
                rows[d] = [lo, hi]
                keep = []
                for pe, p in zip(graph.manifest[d]["partitions"], graph.parts(d)):
                    if not lo <= p.row < hi:
                        continue
                    j = int(np.argmin(load))          # the least-filled disk of this node
                    load[j] += sum(os.path.getsize(f) for _, f in p.files())
                    keep.append(dict(pe, disk=j))
                    for _, f in p.files():
                        calls.append((j, f))
                m[d]["partitions"] = keep
            m["shard"] = {"of": graph.uuid, "dataset": name, "node": lb, "rows": rows}
            for j, f in calls:
                size = os.path.getsize(f)
                with open(f, "rb") as fh:
                    off = 0
                    while True:
                        chunk = fh.read(CHUNK)
                        off += len(chunk)
                        ray.get(w.write.remote(j, os.path.basename(f), chunk, off >= size))
                        if off >= size:
                            break
            placement.append({"node": lb, "disks": nd, "rows": rows, "manifest": m})
        for pl, w in zip(placement, writers):
            pl["home"], pl["uuid"] = ray.get(w.commit.remote(pl.pop("manifest")))
    except BaseException:
        # nothing of this distribution stays: builds aborted, shards already committed deleted
        _remove_names(names.values())
        for pl, w in zip(placement + [None] * len(writers), writers):
            try:
                if pl is not None and "uuid" in pl:
                    ray.get(w.remove.remote(pl["home"], pl["uuid"]))
                else:
                    ray.get(w.abort.remote())
            except Exception:
                pass
        raise
    dataset = copy.deepcopy(graph.manifest)
    dataset.update(names)       # the names' copies beside the manifest (absolute paths)
    cm = {"format": "graphene_py-cluster", "version": 1, "name": name, "dataset": dataset,
          "placement": placement,
          "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    store.write_atomic(path, json.dumps(cm, indent=1))       # ---- the commit point ----
    _remove_names(_names_of(old, keep=names.values()))       # the replaced dataset's names
    for pl in (old or {}).get("placement", []):                # the replaced dataset's shards
        if pl.get("node") in live:
            try:
                ray.get(cluster.actor(pl["node"]).remove.remote(pl["home"], pl["uuid"]))
            except Exception:
                pass
    return path


def list_datasets() -> list:
    """The cluster manifests under $GRAPHENE_HOME/clusters: [(name, manifest or None, path)]."""
    out = []
    d = clusters_dir()
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.endswith(".json"):
            path = os.path.join(d, f)
            try:
                with open(path) as fh:
                    cm = json.load(fh)
            except (OSError, ValueError):
                cm = None
            out.append((f[:-5], cm, path))
    return out


def remove(name: str, cluster, force: bool = False) -> list:
    """Delete cluster dataset `name`: every node's shard, then the manifest. A node not in the
    cluster is an error before anything is deleted, unless force (its shard then stays, and the
    returned notes say where). Returns those notes."""
    path = manifest_path(name)
    try:
        with open(path) as f:
            cm = json.load(f)
    except FileNotFoundError:
        raise GrapheneError(f"no cluster dataset {name!r} ({path} not found)") from None
    except (OSError, ValueError) as e:
        raise GrapheneError(f"{path}: unreadable cluster manifest ({e})") from None
    if not isinstance(cluster, Cluster):
        cluster = Cluster(cluster)
    live = cluster.nodes()
    gone = [pl for pl in cm.get("placement", []) if pl["node"] not in live]
    notes = [f"node {pl['node']} is not in the cluster: its shard at {pl['home']} stays"
             for pl in gone]
    if gone and not force:
        raise GrapheneError(f"{name}: " + "; ".join(notes) + " (nothing deleted; --force deletes "
                            f"the rest and forgets the dataset)")
    ray = cluster.ray
    for pl in cm.get("placement", []):
        if pl in gone:
            continue
        err = ray.get(cluster.actor(pl["node"]).remove.remote(pl["home"], pl["uuid"]))
        if err:
            raise GrapheneError(f"{name}: node {pl['node']}: {err}")
    os.unlink(path)
    _remove_names(_names_of(cm))
    return notes


def _copy_names(graph, name, tag) -> dict:
    """The vertex names of `graph` (labels.txt of --labels, relabel.npy of --relabel) copied
    beside the cluster manifest on this machine: {manifest key: absolute path}. The driver turns
    names into IDs and back; the nodes run by ID and never read them."""
    out = {}
    for key in ("labels", "relabel"):
        rel = graph.manifest.get(key)
        if not rel:
            continue
        src = os.path.join(graph.dirs[0], rel)
        dst = os.path.join(clusters_dir(), f"{tag}.{os.path.basename(rel)}")
        os.makedirs(clusters_dir(), exist_ok=True)
        out[key] = dst
        with open(src, "rb") as fi, open(dst + ".tmp", "wb") as fo:
            while True:
                chunk = fi.read(CHUNK)
                if not chunk:
                    break
                fo.write(chunk)
            fo.flush()
            os.fsync(fo.fileno())
        os.replace(dst + ".tmp", dst)
    return out


def _names_of(cm, keep=()) -> list:
    """The names' copies a cluster manifest refers to (those under clusters_dir() only)."""
    d = os.path.realpath(clusters_dir())
    keep = {os.path.realpath(k) for k in keep}
    out = []
    for key in ("labels", "relabel"):
        p = ((cm or {}).get("dataset") or {}).get(key)
        if p and os.path.isabs(p) and os.path.dirname(os.path.realpath(p)) == d and \
                os.path.realpath(p) not in keep:
            out.append(p)
    return out


def _remove_names(paths) -> None:
    for p in paths:
        for q in (p, p + ".tmp"):
            try:
                os.unlink(q)
            except OSError:
                pass


_CONNECTIONS = {}      # address -> Cluster, so that repeated API calls reuse the node actors
_OPENED = {}           # (address, name) -> ClusterGraph


def on_cluster(graph, cluster) -> "ClusterGraph":
    """The cluster dataset for an API call's `cluster=` (an address or a Cluster): `graph` is a
    ClusterGraph (kept), a Graph or a name (its cluster dataset, opened once per address)."""
    if isinstance(graph, ClusterGraph):
        return graph
    if not isinstance(cluster, Cluster):
        cluster = _CONNECTIONS.get(cluster) or _CONNECTIONS.setdefault(cluster, Cluster(cluster))
    name = graph if isinstance(graph, str) else graph.name
    key = (id(cluster), name)
    cg = _OPENED.get(key)
    if cg is None:
        cg = _OPENED[key] = cluster.open(name)
    return cg


def open_graph(name: str, cluster) -> "ClusterGraph":
    """The cluster dataset `name` (or a cluster manifest's path) on `cluster`: a Cluster, or an
    address to connect to once the manifest has been read (a missing dataset is an error before
    any Ray start-up)."""
    path = name if name.endswith(".json") and os.path.exists(name) else manifest_path(name)
    try:
        with open(path) as f:
            cm = json.load(f)
    except FileNotFoundError:
        raise GrapheneError(f"no cluster dataset {name!r} ({path} not found); put one on the "
                            f"cluster with `graphene cluster distribute`") from None
    except (OSError, json.JSONDecodeError) as e:
        raise GrapheneError(f"{path}: unreadable cluster manifest ({e})") from None
    if cm.get("format") != "graphene_py-cluster":
        raise GrapheneError(f"{path}: not a graphene_py cluster manifest")
    if not isinstance(cluster, Cluster):
        cluster = Cluster(cluster)
    g = ClusterGraph(cm, cluster, path)
    live = cluster.nodes()
    for pl in g.placement:
        if pl["node"] not in live:
            rows = ", ".join(f"{d} rows {a}..{b - 1}" for d, (a, b) in pl["rows"].items())
            raise GrapheneError(f"{g.name}: node {pl['node']} ({rows}, at {pl['home']}) is not in "
                                f"the Ray cluster; start it (ray start --address ... --resources "
                                f"'{{\"{pl['node']}\": 1}}') or distribute the dataset again")
    return g


class ClusterGraph(Graph):
    """A dataset whose partitions live on the nodes of a Ray cluster. Shape, layout and cost model
    as a Graph; degrees come from the nodes; EdgeMap on it is a ClusterEdgeMap."""

    def __init__(self, cm: dict, cluster: Cluster, path: str):
        m = cm["dataset"]
        super().__init__(m, dirs=[""] * len(m["disks"]), home=path)
        self.cluster = cluster
        self.placement = cm["placement"]
        self._engines, self._key, self._specs, self._deg = None, None, None, {}
        self.timeout = timeout_s()

    @property
    def labels(self) -> list:
        return [pl["node"] for pl in self.placement]

    def vertex_range(self, i: int, direction: str) -> tuple:
        """The vertices whose `direction` lists node i holds: [lo, hi)."""
        lo, hi = self.placement[i]["rows"][direction]
        rows = self.manifest[direction]["rows"]
        return int(rows[lo]), int(rows[hi])

    def engines(self, runtime: dict) -> list:
        """The node actors, with this dataset's shards opened under these runtime options."""
        key = json.dumps(runtime, sort_keys=True, default=str)
        if self._engines is not None and key == self._key:
            return self._engines
        self._stop()
        self._specs = [(pl["home"], pl["uuid"], key) for pl in self.placement]
        self._engines = [self.cluster.actor(pl["node"]) for pl in self.placement]
        self._key = key
        errs = self.gather([a.open.remote(sp) for a, sp in zip(self._engines, self._specs)],
                           "opening its shard")
        for pl, err in zip(self.placement, errs):
            if err:
                self._stop()
                raise GrapheneError(f"{self.name}: node {pl['node']}: {err}")
        return self._engines

    def pids(self) -> list:
        return [h["pid"] for h in self.gather([a.hello.remote() for a in self._engines], "hello")]

    def gather(self, refs, what: str) -> list:
        """ray.get of one call per node, with errors naming the node."""
        ray = self.cluster.ray
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=self.timeout)
        if pending:
            late = [self.placement[refs.index(r)] for r in pending]
            try:                 # name a node that has left the cluster first, if one has
                live = self.cluster.nodes()
                late.sort(key=lambda pl: pl["node"] in live)
            except Exception:
                pass
            pl = late[0]
            raise GrapheneError(f"{self.name}: node {pl['node']} did not finish {what} within "
                                f"{self.timeout:.0f} s (is it up? `ray status`)")
        out = []
        for r, pl in zip(refs, self.placement):
            try:
                out.append(ray.get(r))
            except ray.exceptions.RayActorError:
                raise GrapheneError(f"{self.name}: node {pl['node']} ({pl['home']}) is gone: its "
                                    f"actor died and could not be restarted") from None
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None) or e
                raise GrapheneError(f"{self.name}: node {pl['node']}: {cause}") from None
        return out

    def degrees(self, direction: str = "out") -> np.ndarray:
        if direction not in self._deg:
            self.parts(direction)      # a clear error when the dataset has no such direction
            eng = self._engines or self.engines({})
            parts = self.gather([a.degrees.remote(sp, direction)
                                 for a, sp in zip(eng, self._specs)], "degrees")
            self._deg[direction] = np.sum(parts, axis=0) if parts else np.zeros(self.num_vertices, np.int64)
        return self._deg[direction].copy()      # the caller's own array, as Graph.degrees gives

    def to_csr(self, direction: str = "out"):
        raise GrapheneError(f"{self.name} is served by a cluster: its edges are not readable "
                            f"from the driver (verify against the single-machine dataset)")

    def check_files(self):
        pass

    def _stop(self):
        """Close this dataset's shards on the nodes (the node actors stay for other datasets)."""
        if self._engines and self.cluster.ray.is_initialized():   # (never start a Ray here)
            for a, sp in zip(self._engines, self._specs):
                try:
                    a.release.remote(sp)
                except Exception:
                    pass
        self._engines = None

    def close(self) -> None:
        try:
            self._stop()
        except Exception:
            pass
        super().close()


class ClusterEdgeMap(EdgeMap):
    """The engine contract on a cluster: direction choice as on one machine (the same cost model,
    degrees gathered from the nodes); each superstep runs on every node over its own rows, and
    the nodes' changes combine by the kernel's declared rules (Update.writes / Update.queue)."""

    local = False
    #: the nodes' changes of a superstep combine at their owners (node to node) from this many
    #: bytes in all; smaller ones travel to the driver, which merges them (one round trip less)
    owners_from = OWNERS_FROM

    def __init__(self, graph, *, pull: bool = False, weights: bool = False, in_memory=False,
                 degree_dtype=None, **runtime):
        t0 = time.perf_counter()
        self._pkg = sys.modules["graphene_py.iterator"]
        self.graph = graph
        self.n = graph.num_vertices
        self.its = {}
        self.weights = bool(weights)
        self.pull_dir = pull_direction(graph, pull)
        wide = graph.num_edges >= (1 << 31)
        self.ddt = degree_dtype or (np.int64 if wide else np.int32)
        opts = {k: v for k, v in runtime.items() if k in NODE_OPTIONS and v is not None}
        if in_memory:
            opts["in_memory"] = True
        self._threads = int(opts.get("threads") or config.default_threads())
        self.nodes = graph.engines(opts)
        dirs = ["out"] + (["in"] if self.pull_dir == "in" else [])
        self.models = {d: Model(graph, d) for d in dirs}
        self.deg = {}
        self.sender = ReplicaSender()
        self._cut = False      # whether the next superstep's changes are cut for their owners
        self._back = 0         # bytes of the largest node's changes in the last superstep
        self.open_seconds = time.perf_counter() - t0
        self.exchanged = 0

    @property
    def threads(self) -> int:
        return self._threads

    def across(self, state, update, dirs, *, mask=None, ids=None) -> list:
        """Every direction of `dirs` in one round trip (EdgeMap.across): each node runs them in
        turn on its replica, and its changes of all of them come back together."""
        dirs = tuple(dirs)
        if len(dirs) < 2 or update.queue or any(r not in ("min", "max", "or", "sum")
                                                 for _, r, _ in update.slots()):
            return super().across(state, update, dirs, mask=mask, ids=ids)
        kind, data = ("mask", mask) if ids is None else ("queue", ids)
        return [self._run(dirs, update, state, kind, data)]

    def _run(self, direction, update, state, kind, data, again=False) -> dict:
        """One superstep on the nodes over the lists of `direction`, or of each direction of a
        tuple of them (across). (`again`, the read-through cache's hint of a masked superstep,
        stays here: the nodes' caches keep their own rule.)"""
        if not update.writes and not update.queue:
            raise GrapheneError(f"kernel {getattr(update.compute, '__name__', update.compute)} "
                                f"does not declare the state it writes (Update.writes); it cannot "
                                f"run on a cluster")
        t0 = time.perf_counter()
        g = self.graph
        ray = g.cluster.ray
        from ray import cloudpickle
        skip = set(update.queue)
        base, msg, nb = self.sender.message(state, skip)
        k = len(self.nodes)
        relayed, between = [], 0
        if k > 1 and nb >= self.owners_from:
            # a large message: node j takes part j from the driver and serves it to the others
            # (the driver's link carries it once; an allgather among the nodes does the rest)
            skel, parts, sizes = split_message(msg, k)
            relayed = [self.nodes[j].relay.remote(ray.put(p)) for j, p in enumerate(parts)]
            ref = ("split", skel)
            sent = sum(sizes)
            between += sum(sizes) * (k - 1)
        elif nb <= INLINE:
            ref = msg                 # inline with each node's call
            sent = nb * k
        elif nb <= INLINE_MAX:
            # in pieces under Ray's inline size, each an argument of every node's call: they go
            # straight to the node's process; a put object would first be copied from store to
            # store (a 560 KB message: 24-32 ms to three simulated nodes here, 9-12 ms inline)
            skel, relayed, _ = split_message(msg, -(-nb // INLINE))
            ref = ("split", skel)
            sent = nb * k
        else:
            ref = ray.put(msg)        # one copy in the object store for every node
            sent = nb * k             # every node fetches the message (one copy per machine)
        qdt = state[update.queue[0]].dtype.str if update.queue else None
        dirs = direction if isinstance(direction, tuple) else (direction,)

        def frontier(i, d):
            lo, hi = g.vertex_range(i, d)
            if kind == "queue":
                ids = np.asarray(data)
                return ("queue", ids[(ids >= lo) & (ids < hi)])
            if kind == "mask":
                return ("mask", lo, np.ascontiguousarray(data[lo:hi]))
            return ("all",)
        frontiers = []
        for i in range(len(self.nodes)):
            frs = [frontier(i, d) for d in dirs]
            sent += sum(x.nbytes for fr in frs for x in fr if isinstance(x, np.ndarray))
            frontiers.append(frs[0] if len(dirs) == 1 else ("dirs", frs))

        vb = [0] + [g.vertex_range(i, dirs[0])[1] for i in range(k - 1)] + [self.n]

        # this superstep's changes cut for their owners: after a large superstep, or where its
        # frontier's edges could make 1 MiB of changes (a BFS's first dense level follows small
        # ones); small supersteps return their changes whole, one object per node
        cut = k > 1 and (self._cut or 4 * sum(self._frontier_edges(d, kind, data) for d in dirs)
                         >= self.owners_from)

        heads_of = {}
        # changes not cut for their owners come back in pieces under Ray's inline size, as many
        # as the largest node's changes of the last superstep needed (a piece too large still
        # arrives, through the object store)
        pieces = 1 if cut else min(-(-self._back // INLINE), INLINE_MAX // INLINE) or 1

        def call(i, r, b, parts=()):
            # the arguments every node shares, pickled once per superstep: Ray serializes each
            # argument of each call on its own (~1.7 ms a call with them apart); by Ray's own
            # cloudpickle, as Ray would have
            h = heads_of.get(b)
            if h is None:
                h = heads_of[b] = cloudpickle.dumps((self.sender.session, b, self.sender.version,
                                                     direction, self.weights, update, qdt,
                                                     vb if cut else None, pieces), protocol=5)
            args = (g._specs[i], h, r, frontiers[i], *parts)
            step = self.nodes[i].step
            fb = sum(x.nbytes for fr in (frontiers[i][1] if frontiers[i][0] == "dirs" else
                                         (frontiers[i],))
                     for x in fr if isinstance(x, np.ndarray))
            if r is msg and not parts and nb + fb + len(h) <= INLINE:
                # a small superstep, nothing for Ray to resolve: one byte string instead of five
                # arguments (a larger one would go through the store; its size is checked before
                # anything is pickled for it)
                packed = pickle.dumps(args, protocol=5)
                if len(packed) <= INLINE:
                    args = (packed,)
                    step = self.nodes[i].step_packed
            if not cut and pieces > 1:
                return step.options(num_returns=1 + pieces).remote(*args)
            if not cut:
                return [step.remote(*args)]
            return step.options(num_returns=1 + k).remote(*args)
        t1 = time.perf_counter()
        refs = [call(i, ref, base, relayed) for i in range(k)]
        heads = g.gather([r[0] for r in refs], f"a superstep ({'+'.join(dirs)}-lists)")
        stale = [i for i, h in enumerate(heads) if h[0] == "stale"]
        if stale:            # a restarted node (or one that missed a step): the whole state
            full, nb = self.sender.full(state, skip)
            fref = ray.put(full)
            for i in stale:
                refs[i] = call(i, fref, -1)
            again = g.gather([refs[i][0] for i in stale], "a superstep, resent")
            for i, h in zip(stale, again):
                heads[i] = h
            sent += nb * len(stale)
        t2 = time.perf_counter()
        back, between2, via = self._combine_changes(update, state, refs, heads, vb)
        between += between2
        if update.queue:
            i, t, c = update.queue
            got = [h[2] for h in heads]
            back += sum(x.nbytes for x in got)
            merge_queues(state[i], state[t], state[c], got)
        st = combine_stats([h[1] for h in heads])
        st["frontier"] = (len(data) if kind == "queue" else
                          int(np.count_nonzero(data)) if kind == "mask" else self.n)
        st["seconds"] = time.perf_counter() - t0
        st["node_seconds"] = [float(h[1]["seconds"]) for h in heads]
        st["exchange_bytes"] = int(sent + back + between)
        st["bytes_sent"], st["bytes_back"] = int(sent), int(back)      # the driver's link
        st["bytes_between"] = int(between)          # from node to node
        st["combined_by"] = via
        if len(dirs) > 1:
            st["directions"] = list(dirs)        # across: every direction in this round trip
        # driver time around the nodes' work: shipping, waiting beyond the slowest node, merging
        st["coordination_seconds"] = max(0.0, st["seconds"] - max(st["node_seconds"]))
        st["merge_seconds"] = time.perf_counter() - t2
        st["ship_seconds"] = t1 - t0
        if stale:
            st["resent_to"] = [g.placement[i]["node"] for i in stale]
        self.exchanged += st["exchange_bytes"]
        return st

    def _frontier_edges(self, direction, kind, data) -> int:
        """How many edges this superstep's frontier has: a queue's lists' lengths summed; a
        mask's flagged vertices at the average degree (one pass over the flags, no n-sized
        temporary: a k-core peels through hundreds of masked supersteps)."""
        if kind == "queue":
            return int(self.degree(direction)[np.asarray(data)].sum()) if len(data) else 0
        if kind == "mask":
            return int(np.count_nonzero(data) * self.graph.num_edges // max(self.n, 1))
        return int(self.graph.num_edges)

    def _combine_changes(self, update, state, refs, heads, vb) -> tuple:
        """Merge the nodes' changes into `state`: the driver fetches every part and merges
        (small changes), or each owner merges every node's parts of its range and the driver
        fetches only the owners' results (the nodes' replicas get what is still new with the
        next message). Returns (bytes to the driver, bytes between nodes, "driver"/"owners")."""
        ray = self.graph.cluster.ray
        k = len(self.nodes)
        slots = update.slots()
        flats = [update.part(state, s, rows).reshape(-1) for s, _, rows in slots]
        bnd = [owner_bounds(f.size, self.n, vb) for f in flats]
        sizes = [h[3] for h in heads]          # sizes[i][j]: node i's part for owner j
        total = sum(map(sum, sizes))
        back = between = 0
        self._back = max(map(sum, sizes))
        if len(heads[0]) > 4:                  # not cut: every node's changes, whole
            packed = [i for i, h in enumerate(heads) if isinstance(h[4], tuple)]   # ("packed", ..)
            blobs = ray.get([r for i in packed for r in refs[i][1:]])
            changes = [h[4] for h in heads]
            for i in packed:
                p = len(refs[i]) - 1
                changes[i], blobs = unpack(heads[i][4][1], blobs[:p]), blobs[p:]
            for q, (_, rule, _) in enumerate(slots):
                merge(flats[q], rule, [c[q] for c in changes])
            # the next superstep is cut where this one's changes were large
            self._cut = total >= self.owners_from
            return total, 0, "driver"
        self._cut = total >= self.owners_from / 4        # (and stays cut while still sizeable)
        owners = [j for j in range(k) if total >= self.owners_from]
        results = {}
        if owners:
            calls = {}
            for j in owners:
                desc = [(id(state[s]), rows, rule, bnd[q][j], bnd[q][j + 1])
                        for q, (s, rule, rows) in enumerate(slots)]
                calls[j] = self.nodes[j].absorb.remote(
                    self.graph._specs[j], self.sender.session, self.sender.version, desc,
                    *[refs[i][1 + j] for i in range(k)])
                between += sum(sizes[i][j] for i in range(k) if i != j)
            for j, out in zip(calls, self.graph.gather(list(calls.values()), "combining")):
                if out[0] == "ok":
                    results[j] = out[1]
        for j in range(k):
            if j in results:                 # the owner's result, into the state
                for (h, rows, lo, hi, change), f in zip(results[j], flats):
                    assign(f[lo:hi], change)
                    back += nbytes(change)
            else:                            # the driver merges this range's parts itself
                parts = ray.get([refs[i][1 + j] for i in range(k)])
                back += sum(sizes[i][j] for i in range(k))
                for q, (_, rule, _) in enumerate(slots):
                    merge(flats[q][bnd[q][j]:bnd[q][j + 1]], rule, [p[q] for p in parts])
        return back, between, "owners" if results else "driver"

    def close(self):
        self.its = {}      # the node actors stay with the dataset for the next EdgeMap
        if getattr(self, "sender", None) is not None and self.graph._engines and \
                self.graph.cluster.ray.is_initialized():
            for a, sp in zip(self.graph._engines, self.graph._specs):
                try:
                    a.end.remote(sp, self.sender.session)
                except Exception:
                    pass
            self.sender = None


class ReplicaSender:
    """What the nodes' replicas of the driver's state arrays lack, per superstep: for each array
    slot, nothing new is never assumed; it is sent dense the first time, as ("zeros") when all
    zero, else as the positions and values that differ from what was sent last (when that is
    under half the array's bytes), else dense. The driver keeps a shadow copy of what it sent."""

    def __init__(self):
        import uuid
        self.session = uuid.uuid4().hex
        self.version = 0
        self.known = {}          # id(array) -> (array: a strong reference, shadow copy)

    def _one(self, a, h, force_dense=False):
        ent = self.known.get(h)
        if not a.any():
            if ent is not None and ent[1].shape == a.shape and ent[1].dtype == a.dtype:
                ent[1][...] = 0
            else:
                self.known[h] = (a, np.zeros_like(a))
            return ("zeros", h, a.shape, a.dtype.str), 0
        if ent is None or ent[1].shape != a.shape or ent[1].dtype != a.dtype:
            self.known[h] = (a, a.copy())
            return ("dense", h, a), a.nbytes
        shadow = ent[1]
        if not force_dense:
            flat, sh = a.reshape(-1), shadow.reshape(-1)
            idx = np.flatnonzero(flat != sh)
            if len(flat) < (1 << 31):
                idx = idx.astype(np.int32)
            if idx.size * (idx.itemsize + a.itemsize) * 2 < a.nbytes:
                vals = flat[idx]
                sh[idx] = vals
                return ("delta", h, idx, vals), idx.nbytes + vals.nbytes
        shadow[...] = a
        return ("dense", h, a), a.nbytes

    def _encode(self, state, skip, force_dense=False) -> tuple:
        """(message, bytes, ids of the arrays in it)."""
        msg, nb, live = [], 0, set()
        for i, a in enumerate(state):
            if i in skip:
                msg.append(None)
            elif not isinstance(a, np.ndarray):
                msg.append(("value", a))
            else:
                live.add(id(a))
                m, b = self._one(a, id(a), force_dense)
                msg.append(m)
                nb += b
        return msg, nb, live

    def message(self, state, skip) -> tuple:
        """(base version, message, bytes) for this superstep's state."""
        msg, nb, live = self._encode(state, skip)
        for h in [h for h in self.known if h not in live]:     # arrays this state no longer has
            del self.known[h]
        base = self.version
        self.version += 1
        return base, msg, nb

    def full(self, state, skip) -> tuple:
        """The whole state (for a replica that is gone), at the current version."""
        msg, nb, _ = self._encode(state, skip, force_dense=True)
        return msg, nb


def split_message(msg, k) -> tuple:
    """A ReplicaSender message cut for k relaying nodes: (skeleton: the message without its
    arrays' data, parts: k lists of the data, one entry per dense or delta array in skeleton
    order, sizes: bytes of each part). node.join_message puts it back together."""
    skel, parts, sizes = [], [[] for _ in range(k)], [0] * k
    for m in msg:
        if m is None or m[0] in ("value", "zeros"):
            skel.append(m)
            continue
        if m[0] == "dense":
            flat = np.ascontiguousarray(m[2]).reshape(-1)
            skel.append(("dense", m[1], m[2].shape, m[2].dtype.str))
            b = bounds(flat.size, k)
            cut = [(flat[b[j]:b[j + 1]],) for j in range(k)]
        else:                                         # ("delta", handle, positions, values)
            skel.append(("delta", m[1]))
            b = bounds(len(m[2]), k)
            cut = [(m[2][b[j]:b[j + 1]], m[3][b[j]:b[j + 1]]) for j in range(k)]
        for j, c in enumerate(cut):
            parts[j].append(c)
            sizes[j] += sum(x.nbytes for x in c)
    return skel, parts, sizes


ClusterGraph.edge_map_backend = ClusterEdgeMap
