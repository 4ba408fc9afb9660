import os

import pytest

# The suite's graphs are small, and small graphs run on numpy by default (algos/small.py): keep
# them on the engine, which is what most tests are about; tests/test_small.py turns the small path
# on and compares the two.
os.environ["GRAPHENE_SMALL_EDGES"] = "0"


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


# On a machine where an IO engine cannot work (io_uring blocked by seccomp, as under Docker's
# default profile; an old kernel), tests that ask for that engine by name skip with the reason
# instead of failing. Only engines that really are unavailable here skip: the verdict is taken once
# at session start, before any test sets GRAPHENE_DISABLE_URING.
_ENGINE_STATUS = {}


def pytest_sessionstart(session):
    from graphene_py.io.engines import engine_status
    _ENGINE_STATUS.update(engine_status())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is None or rep.skipped:
        return
    from graphene_py.io.engines import EngineUnavailable
    exc = call.excinfo.value
    if isinstance(exc, EngineUnavailable) and _ENGINE_STATUS.get(exc.engine):
        rep.outcome = "skipped"
        rep.longrepr = (str(item.path), item.location[1], f"Skipped: {exc}")
