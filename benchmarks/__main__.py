"""``make bench``: the benchmarks of the issues, side by side with their baselines.

Writes ``build/bench.md`` (and prints it): one row per workload with the kit's time, each
baseline's time measured in the same run, and the ratios. Not a test: run it on a quiet
machine. ``python -m benchmarks [--rows N] [NAME ...]``; names: see ``WORKLOADS``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import joins, match_recognize, windows

WORKLOADS = {"mr_vshape": match_recognize.vshape, "windows": windows.windows, "temporal_join": joins.temporal_join}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", help=f"workloads to run (default: all of {list(WORKLOADS)})")
    parser.add_argument("--rows", type=int, default=None, help="override the input size")
    args = parser.parse_args()
    unknown = set(args.names) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workload(s) {sorted(unknown)}; choose from {list(WORKLOADS)}")
    out = Path("build")
    out.mkdir(exist_ok=True)
    lines = ["| workload | kit | baseline | baseline time | kit / baseline | same result |",
             "|---|---|---|---|---|---|"]
    for name in args.names or WORKLOADS:
        for row in WORKLOADS[name](out / "bench", rows=args.rows):
            lines.append("| " + " | ".join(map(str, row)) + " |")
            print(lines[-1], flush=True)
    table = "\n".join(lines) + "\n"
    (out / "bench.md").write_text(table)
    print(f"\n{table}\nwritten to {out / 'bench.md'}")


main()
