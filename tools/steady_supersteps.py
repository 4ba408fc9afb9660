#!/usr/bin/env python3
"""The median seconds of a run's supersteps after the first, over all its trials: steady state
(lists in memory, kernels ready), from `--nl`'s one JSON object per superstep.

    python3 tools/steady_supersteps.py .venv/bin/graphene run pagerank-pull --max-iter 10 \\
        --tol 0 -g kron22 -t 2 -n 3

Runs the command with `--nl -q` added and prints how many supersteps counted, their median and
mean seconds.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys


def main():
    cmd = sys.argv[1:]
    if not cmd:
        sys.exit(__doc__)
    out = subprocess.run(cmd + ["--nl", "-q"], capture_output=True, text=True, check=True).stdout
    xs = []
    for line in out.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and d.get("superstep", 0) >= 1 and "seconds" in d:
            xs.append(d["seconds"])
    if not xs:
        sys.exit("no superstep after the first in the output")
    print(f"n {len(xs)} median {statistics.median(xs):.4f} mean {statistics.mean(xs):.4f}")


if __name__ == "__main__":
    main()
