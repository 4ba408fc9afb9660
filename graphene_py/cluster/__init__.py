"""Past one machine: the 2D partition served by a Ray cluster (optional extra `[cluster]`).

    c = Cluster("auto")                         # ray.init(address="auto"); "local": a one-node
                                                # cluster on this machine; or a Ray address
    c.distribute(graph, disks=[...])            # each node's rows copied onto its own disks
    g = c.open("kron22")                        # a ClusterGraph: run any algorithm written
    bfs(g, src=0)                               # against the engine contract on it
    gp.bfs("kron22", src=0, cluster="auto")     # the same through the API's cluster= keyword

Placement: each node holds whole rows of the grid (row-column balance gives rows equal edges),
contiguous row ranges, as a *shard*: an ordinary dataset on that node's disks (same files, same
atomic commit, same checks at open) holding only its rows' partitions. A node is named by a Ray
resource: `graphene:<label>` when the node was started with one (`ray start --resources
'{"graphene:ssd1": 1}'`; the test clusters do this), else `node:<ip>`, which Ray gives every node.
The cluster manifest (`$GRAPHENE_HOME/clusters/NAME.json`) records the dataset's layout and which
node holds which rows at which path, under which shard version.

Supersteps (engine.py): one NodeEngine actor per node (node.py) runs the local engine on its rows;
vertex state stays with the driver, which is also the per-superstep checkpoint: the state goes out
once per superstep through the object store (one copy per machine, shared by its workers), each
node sends back only what it changed, and the changes combine by the rule the kernel declares
(merge.py). A killed actor is restarted by Ray and its superstep call is run again; a node that
stays gone is an error naming it.
"""
from __future__ import annotations

from .engine import (Cluster, ClusterEdgeMap, ClusterGraph, connect, list_datasets,  # noqa: F401
                     on_cluster, open_graph, remove)
