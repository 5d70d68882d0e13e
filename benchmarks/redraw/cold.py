"""The cold start: a fresh Python process from ``import kit`` to notebook 00's first chart."""

from __future__ import annotations

import json
import time

from .settings import NOTEBOOKS, ROOT


COLD = r"""
import json, sys, time
import IPython, nbformat                       # loaded before the clock: a kernel has them
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
nb = nbformat.read(sys.argv[1], as_version=4)
cells = [c.source for c in nb.cells if c.cell_type == "code"]
first = next(i for i, s in enumerate(cells) if "kit.viz." in s)
t0 = time.perf_counter()
import kit
t1 = time.perf_counter()
kit.spark()
t2 = time.perf_counter()
sys.stdout, real = open("/dev/null", "w"), sys.stdout
each = []
for source in cells[:first]:
    t = time.perf_counter()
    r = shell.run_cell(source, store_history=False)
    r.raise_error()
    each.append([source.strip().splitlines()[0][:60], time.perf_counter() - t])
t3 = time.perf_counter()
r = shell.run_cell(cells[first], store_history=False)
r.raise_error()
data, _ = shell.display_formatter.format(r.result)
t4 = time.perf_counter()
sys.stdout = real
print(json.dumps({"import": t1 - t0, "session": t2 - t1, "cells_before": t3 - t2, "chart": t4 - t3,
                  "total": t4 - t0, "each": each, "chart_cell": cells[first], "mimetypes": sorted(data)}))
"""


def cold_start() -> dict:
    import subprocess
    import sys

    nb = next(iter(sorted(NOTEBOOKS.glob("00_*.ipynb"))), None)
    if nb is None:
        return {"error": "no notebook 00"}
    # the class archive make lab builds (kit.tools.archive): written first when missing, not timed
    subprocess.run([sys.executable, "-m", "kit.tools.archive"], cwd=ROOT, capture_output=True, timeout=900)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", COLD, str(nb)], cwd=NOTEBOOKS, capture_output=True, text=True,
                          timeout=600)
    wall = time.perf_counter() - started
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1][:300] if done.stderr.strip() else "failed"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = wall
    return result
