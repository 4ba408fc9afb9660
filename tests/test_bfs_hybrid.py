"""--device auto for BFS on a machine without a usable GPU: the whole run stays on the SSD path, with
the same result as --device cpu, and the result says why (the GPU side is in tests/test_gpu.py)."""
import numpy as np

from graphene_py.algos import bfs
from graphene_py.algos.registry import gpu_available
from graphene_py.partition import partition_arrays
from tests import graphs as G


def test_auto_without_gpu_is_the_cpu_path(tmp_path, monkeypatch):
    monkeypatch.setattr("graphene_py.algos.registry.gpu_available", lambda: (False, "test: no GPU"))
    tg = G.powerlaw()
    disks = [str(tmp_path / "a"), str(tmp_path / "b")]
    for d in disks:
        (tmp_path / d).mkdir()
    g = partition_arrays(tg.src, tg.dst, num_vertices=tg.n, disks=disks, name="h", symmetrize=True,
                         register=False)
    src = int(np.flatnonzero(g.degrees("out"))[0])
    a = bfs.run(g, src=src, device="cpu")
    b = bfs.run(g, src=src, device="auto")
    np.testing.assert_array_equal(a.depth, b.depth)
    assert b.device_note == "no GPU (test: no GPU)"
    assert all(st["device"] == "cpu" for st in b.supersteps)
    assert not hasattr(a, "device_note") and not hasattr(b, "gpu_supersteps")
    assert bfs.verify(g, b) == []
    assert isinstance(gpu_available(), tuple)
