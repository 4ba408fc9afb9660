"""graphene_py: a Graphene-style (FAST'17) semi-external-memory graph engine."""
from setuptools import Extension, find_packages, setup

uring_ext = Extension(
    "graphene_py._uring",
    sources=["csrc/uring.c", "csrc/crc32c.c", "csrc/warm.c"],
    extra_compile_args=["-O2", "-std=gnu11", "-Wall"],
    libraries=["pthread"],
)

setup(
    name="graphene_py",
    version="0.1.0",
    description="Graph analytics on SSDs with fine-grained io_uring IO (Graphene, FAST'17)",
    packages=find_packages(include=["graphene_py", "graphene_py.*"]),
    ext_modules=[uring_ext],
    python_requires=">=3.10",
    install_requires=["numpy>=1.24", "numba>=0.58", "click>=8.1", "liburing==2024.5.3", "networkx>=3.4"],
    extras_require={
        "gpu": ["cupy-cuda12x"],
        "plots": ["matplotlib>=3.7"],      # --timeline, graphene plot, tools/bench_cache.py
        "cluster": ["ray>=2.9"],           # graphene_py.cluster: --cluster, graphene cluster
        "parquet": ["pyarrow>=12"],        # graphene run -o result.parquet
        "test": ["pytest>=7", "pytest-xdist>=3", "hypothesis>=6", "scipy>=1.10", "networkx>=3", "pytest-timeout", "psutil",
                 "matplotlib>=3.7", "ray>=2.9", "pyarrow>=12"],
    },
    entry_points={
        "console_scripts": ["graphene=graphene_py.cli:run_cli"],
        # NetworkX dispatches its functions to graphene_py (graphene_py/nx_backend.py)
        "networkx.backends": ["graphene = graphene_py.nx_backend:backend"],
        "networkx.backend_info": ["graphene = graphene_py.nx_backend:info"],
    },
)
