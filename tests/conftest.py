import os

import pytest


@pytest.fixture(autouse=True)
def _isolated_registry(tmp_path_factory, monkeypatch):
    """Every test gets its own dataset registry, never the user's ~/.graphene."""
    home = tmp_path_factory.mktemp("graphene_home")
    monkeypatch.setenv("GRAPHENE_HOME", str(home))
    yield


def pytest_collection_modifyitems(config, items):
    # GPU tests skip themselves cleanly when CuPy or a GPU is missing.
    try:
        from graphene_py.gpu import available
        has_gpu = available()
    except Exception:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="no CuPy/NVIDIA GPU on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
