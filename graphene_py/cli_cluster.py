"""`graphene cluster`: the nodes of a Ray cluster, and putting a dataset onto them."""
from __future__ import annotations

import click

ADDRESS = click.option("--address", default="auto", show_default=True,
                       help="The Ray cluster: auto (the one `ray start` joined), local (a "
                            "one-node cluster started here), or host:port.")


@click.group("cluster", context_settings={"help_option_names": ["-h", "--help"]})
def cluster_cmd():
    """Run on several machines through Ray (pip install 'graphene_py[cluster]')."""


@cluster_cmd.command("nodes")
@ADDRESS
def nodes_cmd(address):
    """The cluster's live nodes, by the label placement uses."""
    from .cluster import Cluster
    for label, node_id in sorted(Cluster(address).nodes().items()):
        click.echo(f"{label}\t{node_id or '(label shared by several nodes: give each a resource)'}")


@cluster_cmd.command("distribute")
@click.argument("graph_name", metavar="DATASET")
@click.option("--disks", "-d", multiple=True, required=True, metavar="DIR",
              help="Disk folders on each node (repeat); {node} in a path becomes the node's "
                   "label (several simulated nodes on one machine).")
@click.option("--name", default=None, help="Name of the cluster dataset (default: the dataset's).")
@click.option("--node", "nodes", multiple=True, metavar="LABEL",
              help="Nodes to use, in order (repeat; default: every live node, sorted).")
@click.option("--force", is_flag=True, help="Replace a cluster dataset of that name.")
@ADDRESS
def distribute_cmd(graph_name, disks, name, nodes, force, address):
    """Copy DATASET's rows onto the cluster's nodes (contiguous row ranges, each node's rows on its
    own disks, committed atomically per node); `graphene run ALGO NAME --cluster ADDRESS` then
    runs on it."""
    from .cluster import Cluster
    from .graph import Graph
    g = Graph.open(graph_name)
    c = Cluster(address)
    path = c.distribute(g, list(disks), name=name, force=force, nodes=list(nodes) or None)
    cg = c.open(name or g.name)
    for pl in cg.placement:
        rows = ", ".join(f"{d} rows {a}..{b - 1}" for d, (a, b) in pl["rows"].items())
        click.echo(f"{pl['node']}: {rows} -> {pl['home']}")
    click.echo(f"cluster dataset {cg.name}: {path}")


@cluster_cmd.command("list")
def list_cmd():
    """The cluster datasets this machine knows (their manifests; no Ray needed)."""
    from .cluster import list_datasets
    rows = list_datasets()
    if not rows:
        click.echo("no cluster datasets yet (graphene cluster distribute, or partition --cluster)",
                   err=True)
        return
    for name, cm, path in rows:
        if cm is None:
            click.echo(f"{name}\t[unreadable: {path}]")
            continue
        m = cm.get("dataset", {})
        nodes = ", ".join(pl["node"] for pl in cm.get("placement", []))
        click.echo(f"{name}\t{int(m.get('num_vertices', 0)):,} vertices\t"
                   f"{int(m.get('num_edges', 0)):,} edges\ton {nodes}")


@cluster_cmd.command("rm")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True,
              help="Delete what the live nodes hold even when some node is gone (its shard "
                   "stays), and forget the dataset.")
@ADDRESS
def rm_cmd(name, yes, force, address):
    """Delete cluster dataset NAME: each node's shard, then its manifest."""
    from .cluster import remove
    if not yes:
        click.confirm(f"delete cluster dataset {name} from every node?", abort=True, err=True)
    for note in remove(name, address, force=force):
        click.echo(f"warning: {note}", err=True)
    click.echo(f"deleted cluster dataset {name}", err=True)


COMMANDS = [cluster_cmd]
