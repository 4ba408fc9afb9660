#!/bin/bash
# `graphene ARGS` run from another source tree of graphene_py (a `git worktree` of an older
# commit, with the C extension copied in), for side-by-side timings with tools/ab_runs.py:
#     tools/run_tree.sh TREE run bfs -g kron22
# TREE's package comes first on the path (before the installed one); give each tree its own
# GRAPHENE_KERNEL_CACHE and run `tools/run_tree.sh TREE prepare --aot builtin` from inside TREE
# (prepare's child processes import the package of their working directory).
T=$1; shift
HERE=$(cd "$(dirname "$0")/.." && pwd)
exec "$HERE/.venv/bin/python" -c "import sys; sys.path[0:0] = [sys.argv.pop(1)]; sys.argv[0] = 'graphene'; from graphene_py import cli; getattr(cli, 'run_cli', cli.main)()" "$T" "$@"
