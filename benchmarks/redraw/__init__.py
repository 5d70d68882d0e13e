"""Widget redraws and the cold start (issue 24, "Speed"): how long a moved control takes.

For each notebook in ``notebooks/`` with a ``kit.widgets.bind(`` cell and each control of
that widget, ten changes as a user makes them: a slider one step up or down (up, up, down,
down, ...), a dropdown's or toggle's next option in turn, a text box's next value from
``TEXT_VALUES`` (notebook 02's PATTERN and DEFINE); the same changes in the same order in
the kernel and in the browser, so that what the kit caches from one redraw for the next
serves both alike (a change is marked ``new`` when its values were not drawn before in that
session: the table splits those from revisits, which a view draws from the output it
kept). A change whose redraw fails (``SKIP TO FIRST A``, an error the notebook shows on
purpose) is timed but not counted. A control
hidden for the current choice (``visible_when``) is first made visible by the other
controls' first choice that shows it. Each change records the CPU pressure while it ran.
Median and worst of each:

- **kernel**: the notebook's cells up to and including the widget cell run in one Jupyter
  kernel (nbclient, cwd ``notebooks/``); then ``view.set(control=value)`` (synchronous: it
  recomputes and redraws) is timed there. *Spark jobs per redraw*: the DAGScheduler's next
  job id before and after (``sc._jsc.sc().dagScheduler().nextJobId()``), i.e. every job
  submitted meanwhile, by any thread, whatever its job group (the count of jobs in the
  redraw's own group, ``statusTracker().getJobIdsForGroup(view._running_group)``, is kept
  beside it in the JSON). Each job's name (its Python call site), stages and duration come
  from Spark's status store; the time inside jobs is the union of their intervals; the
  time to format the result (altair -> Vega through vl-convert) is timed around
  ``kit.widgets._output``; *planning*: the time in py4j calls to the JVM (py4j's
  ``send_command``, outermost calls) less the time in jobs: plans analysed, optimized and
  planned, DataFrames built.
- **floor**: the same redraws with the DataFrames the widget's function reads (notebook
  globals found in its code and in the notebook functions it calls, e.g. ``clicks``,
  ``network``, ``ticker_after_match``, ``orders_df``/``rates_df``) made empty with their schema
  by a filter Spark cannot fold (``xxhash64(all columns) = constant``), so the plan stays and
  only the rows go (``df.limit(0)`` would let the optimizer drop whole jobs); a pandas frame
  becomes a Spark DataFrame first. Some parts skip their jobs on empty input, and some
  functions refuse it (a join with no arrival), so the same runs once more with each input
  cut to its first row: the same jobs as the real redraw, on one row.
- **browser**: JupyterLab in headless Chromium (as ``tests/browser``) over a copy of the
  notebooks without outputs: open, Run All, then change each control as a user does
  (slider: focus the handle, press an arrow key; dropdown: select the option; toggle: click
  it; text: type the value and press Enter, or leave the box) and time from the input
  event to the new output in the widget's output area (a new Vega SVG drawn, or the
  error line) with the status line ("computing...") gone.
- **cold start**: a fresh Python process (IPython loaded first, as in a kernel), with the
  class archive ``make lab`` builds (``kit.tools.archive``; built first when missing): ``import
  kit``, the Spark session, then notebook 00's cells in order up to its first ``kit.viz``
  chart, that chart formatted to its mimebundle. Real Flink 2.3 needs 7.6 s to its first
  result here.

CPU pressure (``/proc/pressure/cpu``, some avg10) is read before and after: the machine is
shared. ``--load N`` runs everything beside N busy processes (a Python loop each, normal
priority): how redraws degrade on a loaded machine. Every measurement is in
``build/bench/redraw.json``. Not a test.

``python -m benchmarks redraw`` writes the table into ``build/bench.md``;
``python -m benchmarks.redraw [--changes N] [--notebooks 00 02] [--skip browser floor ...]``
runs parts of it (and writes ``build/bench-redraw.md``).

==============  ===========================================================================
module          part
==============  ===========================================================================
``plans``       the changes made to each control (kernel and browser alike)
``kernel``      a notebook run up to its widget cell, in a fresh kernel
``probe``       inside that kernel: the redraws timed (``jobs``: Spark's; ``floor``: emptied inputs)
``browser``     JupyterLab in headless Chromium
``cold``        the cold start
``pressure``    the machine's CPU pressure
``report``      the markdown table
==============  ===========================================================================
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .browser import run_browser
from .cold import cold_start
from .kernel import run_kernel, widget_cell
from .pressure import busy, pressure_now
from .probe import kernel_probe
from .report import markdown
from .settings import CHANGES, NOTEBOOKS

__all__ = ["redraw", "kernel_probe", "main"]


def redraw(folder: Path, rows: int | None = None, changes: int = CHANGES, only: list[str] | None = None,
           skip: tuple[str, ...] = (), load: int = 0) -> str:
    """The markdown section of ``build/bench.md`` (``rows`` is not used: the seed data),
    measured beside ``load`` busy processes."""
    folder.mkdir(parents=True, exist_ok=True)
    with busy(load):
        report = _measured(folder, changes, only, skip)
    report["load"] = load
    (folder / "redraw.json").write_text(json.dumps(report, indent=1, default=str))
    return markdown(report)


def _measured(folder: Path, changes: int, only: list[str] | None, skip: tuple[str, ...]) -> dict:
    notebooks = [p for p in sorted(NOTEBOOKS.glob("*.ipynb")) if widget_cell(p) is not None
                 and (not only or any(p.name.startswith(o) for o in only))]
    report = {"pressure_before": pressure_now(), "loadavg_before": os.getloadavg(), "changes": changes,
              "notebooks": {}, "browser": {}, "cold": None}
    for nb in notebooks:
        if "kernel" in skip:  # the last run's plans, if any (to try the browser part alone)
            last = folder / f"redraw-kernel-{nb.stem}.json"
            report["notebooks"][nb.name] = json.loads(last.read_text()) if last.exists() else {}
        else:
            print(f"redraw: kernel, {nb.name}", flush=True)
            report["notebooks"][nb.name] = run_kernel(nb, folder, changes, floor="floor" not in skip)
    if "browser" not in skip:
        plans = {name: r.get("plans") for name, r in report["notebooks"].items() if r.get("plans")}
        print("redraw: browser", flush=True)
        report["browser"] = run_browser([nb for nb in notebooks if nb.name in plans], plans, folder)
    if "cold" not in skip:
        print("redraw: cold start", flush=True)
        report["cold"] = cold_start()
    report["pressure_after"], report["loadavg_after"] = pressure_now(), os.getloadavg()
    return report


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.redraw")
    parser.add_argument("--changes", type=int, default=CHANGES)
    parser.add_argument("--notebooks", nargs="*", help="name prefixes, e.g. 00 02")
    parser.add_argument("--skip", nargs="*", default=[], choices=["kernel", "floor", "browser", "cold"])
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the measurement")
    args = parser.parse_args()
    out = Path("build")
    out.mkdir(exist_ok=True)
    text = redraw(out / "bench", changes=args.changes, only=args.notebooks, skip=tuple(args.skip), load=args.load)
    (out / "bench-redraw.md").write_text(text)
    print(text)

