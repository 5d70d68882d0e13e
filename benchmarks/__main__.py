"""``make bench``: the benchmarks of the issues, side by side with their baselines.

Writes ``build/bench.md`` (and prints it): one row per workload with the kit's time, each
baseline's time measured in the same run, and the ratios. Not a test: run it on a quiet
machine. ``python -m benchmarks [--rows N] [NAME ...]``; names: see ``WORKLOADS``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import cascade, deployments, dynamic, growth, joins, live, match_recognize, redraw, windows

WORKLOADS = {"mr_vshape": match_recognize.vshape, "windows": windows.windows, "temporal_join": joins.temporal_join,
             "dynamic": dynamic.dynamic}
# benchmarks with a table of their own: a markdown section
SECTIONS = {"cascade": cascade.cascade, "growth": growth.growth, "redraw": redraw.redraw, "deployments": deployments.deployments,
            "live": live.live}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", help=f"workloads to run (default: all of {[*WORKLOADS, *SECTIONS]})")
    parser.add_argument("--rows", type=int, default=None, help="override the input size")
    args = parser.parse_args()
    unknown = set(args.names) - set(WORKLOADS) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown workload(s) {sorted(unknown)}; choose from {[*WORKLOADS, *SECTIONS]}")
    out = Path("build")
    out.mkdir(exist_ok=True)
    lines = ["| workload | kit | baseline | baseline time | kit / baseline | same result |",
             "|---|---|---|---|---|---|"]
    sections = []
    for name in args.names or [*WORKLOADS, *SECTIONS]:
        if name in SECTIONS:
            sections.append(SECTIONS[name](out / "bench", rows=args.rows))
            print(sections[-1], flush=True)
            continue
        for row in WORKLOADS[name](out / "bench", rows=args.rows):
            lines.append("| " + " | ".join(map(str, row)) + " |")
            print(lines[-1], flush=True)
    parts = (["\n".join(lines)] if len(lines) > 2 or not sections else []) + [s.rstrip("\n") for s in sections]
    table = "\n\n".join(parts) + "\n"
    (out / "bench.md").write_text(table)
    print(f"\n{table}\nwritten to {out / 'bench.md'}")


main()
