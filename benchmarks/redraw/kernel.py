"""A notebook run up to its widget cell in a fresh kernel, which then runs ``probe.kernel_probe``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .settings import MARK, NOTEBOOKS, ROOT


def widget_cell(path: Path) -> int | None:
    """The index of the code cell holding ``kit.widgets.bind(`` (found by content)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and MARK in c.source]
    return found[0] if found else None


def run_kernel(path: Path, folder: Path, changes: int, floor: bool = True) -> dict:
    """Run the notebook up to its widget cell in a fresh kernel, then :func:`kernel_probe`."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    upto = widget_cell(path)
    out = (folder / f"redraw-kernel-{path.stem}.json").resolve()
    out.unlink(missing_ok=True)
    probe = (f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom benchmarks.redraw.probe import kernel_probe\n"
             f"kernel_probe({str(out)!r}, changes={changes}, floor={floor})")
    cells = [c for c in nb.cells[:upto + 1] if c.cell_type == "code"] + [nbformat.v4.new_code_cell(probe)]
    run = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
    client = NotebookClient(run, timeout=3600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    started = time.perf_counter()
    try:
        client.execute()
    except Exception as exc:  # a kernel that died or timed out: reported, the other notebooks still run
        return {"error": f"{type(exc).__name__}: {str(exc).strip()[:300]}", "seconds": time.perf_counter() - started}
    failed = [c for c in run.cells if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    if not out.exists() or failed and failed[-1] is run.cells[-1]:
        return {"error": _cell_error(failed[-1]) if failed else "the probe wrote nothing",
                "seconds": time.perf_counter() - started}
    result = json.loads(out.read_text())
    result["seconds"] = time.perf_counter() - started
    result["cell_errors"] = [_cell_error(c) for c in failed]  # cells before the widget that failed
    return result


def _cell_error(cell) -> str:
    error = next(o for o in cell.outputs if o.get("output_type") == "error")
    first = cell.source.strip().splitlines()[0][:80]
    return f"{error['ename']}: {error['evalue'][:200]} (cell {first!r})"
