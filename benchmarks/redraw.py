"""Widget redraws and the cold start (issue 24, "Speed"): how long a moved control takes.

For each notebook in ``notebooks/`` with a ``kit.widgets.bind(`` cell and each control of
that widget, ten changes as a user makes them: a slider one step up or down (up, up, down,
down, ...), a dropdown's or toggle's next option in turn, a text box's next value from
``TEXT_VALUES`` (notebook 02's PATTERN and DEFINE); the same changes in the same order in
the kernel and in the browser, so that what the kit caches from one redraw for the next
serves both alike (a change is marked ``new`` when its values were not drawn before in that
session: the table splits those from revisits). A change whose redraw fails (``SKIP TO
FIRST A``, an error the notebook shows on purpose) is timed but not counted. A control
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
  ``kit.widgets._output``.
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
shared. Every measurement is in ``build/bench/redraw.json``. Not a test.

``python -m benchmarks redraw`` writes the table into ``build/bench.md``;
``python -m benchmarks.redraw [--changes N] [--notebooks 00 02] [--skip browser floor ...]``
runs parts of it (and writes ``build/bench-redraw.md``).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
MARK = "kit.widgets.bind("
CHANGES = 10
TIMEOUT = 120  # seconds a change may take before it counts as never finished
TEXT_VALUES = {  # by the control's description
    "PATTERN": ["A B", "A+? C", "A+ C"],
    "DEFINE": ["A AS SUM(A.price) < 40", "A AS A.price > 11", "A AS SUM(A.price) < 30"],
}
FLINK_FIRST_RESULT = 7.6
VEGA = "application/vnd.vega.v5+json"


# ---------------------------------------------------------------- the workload


def redraw(folder: Path, rows: int | None = None, changes: int = CHANGES, only: list[str] | None = None,
           skip: tuple[str, ...] = ()) -> str:
    """The markdown section of ``build/bench.md`` (``rows`` is not used: the seed data)."""
    folder.mkdir(parents=True, exist_ok=True)
    notebooks = [p for p in sorted(NOTEBOOKS.glob("*.ipynb")) if _widget_cell(p) is not None
                 and (not only or any(p.name.startswith(o) for o in only))]
    report = {"pressure_before": _pressure(), "loadavg_before": os.getloadavg(), "changes": changes,
              "notebooks": {}, "browser": {}, "cold": None}
    for nb in notebooks:
        if "kernel" in skip:  # the last run's plans, if any (to try the browser part alone)
            last = folder / f"redraw-kernel-{nb.stem}.json"
            report["notebooks"][nb.name] = json.loads(last.read_text()) if last.exists() else {}
        else:
            print(f"redraw: kernel, {nb.name}", flush=True)
            report["notebooks"][nb.name] = _kernel(nb, folder, changes, floor="floor" not in skip)
    if "browser" not in skip:
        plans = {name: r.get("plans") for name, r in report["notebooks"].items() if r.get("plans")}
        print("redraw: browser", flush=True)
        report["browser"] = _browser([nb for nb in notebooks if nb.name in plans], plans, folder)
    if "cold" not in skip:
        print("redraw: cold start", flush=True)
        report["cold"] = _cold_start()
    report["pressure_after"], report["loadavg_after"] = _pressure(), os.getloadavg()
    (folder / "redraw.json").write_text(json.dumps(report, indent=1, default=str))
    return _markdown(report)


# ---------------------------------------------------------------- the notebooks


def _widget_cell(path: Path) -> int | None:
    """The index of the code cell holding ``kit.widgets.bind(`` (found by content)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and MARK in c.source]
    return found[0] if found else None


def _kernel(path: Path, folder: Path, changes: int, floor: bool = True) -> dict:
    """Run the notebook up to its widget cell in a fresh kernel, then :func:`kernel_probe`."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    upto = _widget_cell(path)
    out = (folder / f"redraw-kernel-{path.stem}.json").resolve()
    out.unlink(missing_ok=True)
    probe = (f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom benchmarks.redraw import kernel_probe\n"
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


# ---------------------------------------------------------------- inside the kernel


def kernel_probe(out: str, changes: int = CHANGES, floor: bool = True) -> None:
    """Run in the notebook's kernel after its widget cell: time ``changes`` redraws per
    control (and their floor), write the measurements to ``out`` as JSON."""
    from IPython import get_ipython
    from pyspark import SparkContext

    import kit.widgets as kw

    ns = get_ipython().user_ns
    view = _find_view(ns, kw.Bound)
    sc = SparkContext._active_spark_context
    format_seconds = [0.0]
    original_output = kw._output

    def timed_output(result, shown, **options):
        t = time.perf_counter()
        try:
            return original_output(result, shown, **options)
        finally:
            format_seconds[0] = time.perf_counter() - t

    kw._output = timed_output
    report = {"first_draw": view.elapsed, "controls": list(view.controls), "plans": {}, "kernel": {},
              "floor": {}, "inputs": []}
    seen = {_key(view.values)}  # the values drawn so far: the kit may cache what they computed
    try:
        for name in view.controls:
            plan = _plan(view, name, changes)
            report["plans"][name] = plan
            if plan.get("skip"):
                continue
            report["kernel"][name] = _run(view, sc, name, plan, format_seconds, seen)
            report.setdefault("profile", {})[name] = _profile(view, name, plan, seen)
        if floor:
            inputs = _inputs_of(view.fn, ns)
            report["inputs"] = sorted(inputs)
            saved = {name: ns[name] for name in inputs}
            try:  # empty inputs (may run fewer jobs: a part that sees no rows may skip its own), then one row
                for key, rows in (("floor", 0), ("floor_one_row", 1)):
                    for name, df in saved.items():
                        ns[name] = _empty(df, rows)
                    report[key] = {}
                    seen = {_key(view.values)}  # new inputs: nothing cached for them yet
                    view.refresh()
                    for name, plan in report["plans"].items():
                        if not plan.get("skip"):
                            report[key][name] = _run(view, sc, name, plan, format_seconds, seen)
            finally:
                ns.update(saved)
                view.refresh()
    finally:
        kw._output = original_output
    Path(out).write_text(json.dumps(report, default=str))


def _profile(view, name: str, plan: dict, seen: set) -> dict:
    """One more redraw under cProfile, to a value not drawn before where there is one (a
    slider's): the functions with the most time of their own (a py4j socket read is the
    driver waiting for the JVM)."""
    import cProfile
    import pstats

    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    before = {k: view.values[k] for k in plan["context"]}
    if before:
        view.set(**plan["context"])
    value = plan["values"][0]
    if plan["kind"] == "slider":
        control = view.controls[name]
        for k in (3, -1, -2, 4, 5):
            v = plan["original"] + k * plan["moves"][0] * control.step
            if control.min <= v <= control.max and _key({**view.values, name: v}) not in seen:
                value = v
                break
    new = _key({**view.values, name: value}) not in seen
    first = _next_job(sc)
    profile = cProfile.Profile()
    profile.enable()
    t = time.perf_counter()
    view.set(**{name: value})
    seconds = time.perf_counter() - t
    profile.disable()
    jobs = _jobs(sc, range(first, _next_job(sc)))
    seen.add(_key(view.values))
    view.set(**{name: plan["original"]})
    if before:
        view.set(**before)
    stats = pstats.Stats(profile).stats

    def where(key):
        file, line, fn = key
        return f"{_short(file)}:{line}({fn})"

    own = sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]
    cumulative = sorted(((k, v) for k, v in stats.items() if "/kit/" in k[0]), key=lambda kv: -kv[1][3])[:20]
    jvm = sum(v[2] for k, v in stats.items() if k[2] in ("<method 'recv_into' of '_socket.socket' objects>",
                                                          "<method 'sendall' of '_socket.socket' objects>"))
    in_jobs = _union([(j["start"], j["end"]) for j in jobs if j["start"] and j["end"]])
    return {"seconds": seconds, "value": value, "new": new, "jobs": len(jobs), "in_jobs": in_jobs,
            "py4j": jvm, "calls": sum(v[1] for v in stats.values()),
            "own": [[where(k), v[1], round(v[2], 4)] for k, v in own],
            "kit_cumulative": [[where(k), v[1], round(v[3], 4)] for k, v in cumulative]}


def _find_view(ns: dict, bound_type):
    """The widget the widget cell displayed: its value (``_``), or the last Bound defined."""
    if isinstance(ns.get("_"), bound_type):
        return ns["_"]
    views = [v for v in ns.values() if isinstance(v, bound_type)]
    if not views:
        raise RuntimeError("no kit.widgets.Bound in the notebook's namespace after its widget cell")
    return views[-1]


def _kind(control) -> str:
    if getattr(control, "_options_labels", None):
        return "options"
    if isinstance(control.value, bool):
        return "toggle"
    if isinstance(control.value, (int, float)) and hasattr(control, "step"):
        return "slider"
    if isinstance(control.value, str):
        return "text"
    return "other"


def _plan(view, name: str, changes: int) -> dict:
    """The values to cycle through for control ``name``, with what must be set first. No
    value is tried out here: that would warm the kit's caches for the kernel's redraws and
    not for the browser's."""
    control = view.controls[name]
    kind = _kind(control)
    widget = type(control).__name__
    plan = {"kind": kind, "widget": widget, "original": control.value, "context": {}}
    values = view.values
    visible = view._visible.get(name) if hasattr(view, "_visible") else None
    if visible is not None and not visible(values):  # hidden: find a choice that shows it
        for other, c in view.controls.items():
            if other == name or _kind(c) != "options":
                continue
            shown = [v for v in c._options_values if visible({**values, other: v})]
            if shown:
                plan["context"] = {other: shown[0]}
                break
        else:
            return {**plan, "skip": "hidden for every single other choice"}
    if kind == "slider":
        step = control.step
        d = 1 if control.value + 2 * step <= control.max else -1
        moves = [(d, d, -d, -d)[i % 4] for i in range(changes)]
        plan["moves"], value, seq = moves, control.value, []
        for m in moves:
            value = round(value + m * step, 10) if isinstance(step, float) else value + m * step
            seq.append(value)
    elif kind in ("options", "text", "toggle"):
        if kind == "options":
            opts = list(zip(control._options_labels, control._options_values))
            i = [v for _, v in opts].index(control.value)
            cycle = [opts[(i + k) % len(opts)][1] for k in range(1, len(opts) + 1)]  # ends at the current one
        elif kind == "toggle":
            cycle = [not control.value, control.value]
        else:
            key = (getattr(control, "description", "") or name).strip()
            cycle = [v for v in TEXT_VALUES.get(key, [control.value + " "]) if v != control.value] + [control.value]
        seq = [cycle[k % len(cycle)] for k in range(changes)]
        if kind == "options":
            labels = dict((v, lab) for lab, v in zip(control._options_labels, control._options_values))
            plan["labels"] = [labels[v] for v in seq]
            plan["original_label"] = labels[plan["original"]]
    else:
        return {**plan, "skip": f"a {widget} (no way to change it)"}
    plan["values"] = seq
    if plan["context"]:  # what the browser selects first, and back after
        def label(other, v):
            c = view.controls[other]
            return dict(zip(c._options_values, c._options_labels))[v]
        plan["context_labels"] = {other: label(other, v) for other, v in plan["context"].items()}
        plan["context_back"] = {other: label(other, values[other]) for other in plan["context"]}
    return plan


def _next_job(sc) -> int:
    n = sc._jsc.sc().dagScheduler().nextJobId()
    return n if isinstance(n, int) else n.get()


def _key(values: dict) -> str:
    return json.dumps(sorted(values.items()), default=str)


def _run(view, sc, name: str, plan: dict, format_seconds: list, seen: set) -> list[dict]:
    """Time ``view.set`` for each of the plan's values; the control is put back after.
    Each change says whether its values were drawn before (``seen``) and the CPU pressure
    while it ran."""
    before = {k: view.values[k] for k in plan["context"]}
    if plan["context"]:
        view.set(**plan["context"])
        seen.add(_key(view.values))
    out = []
    for value in plan["values"]:
        new = _key({**view.values, name: value}) not in seen
        first = _next_job(sc)
        wall = time.time()
        stall = _stall()
        t = time.perf_counter()
        data = view.set(**{name: value})
        seconds = time.perf_counter() - t
        pressure = _pressure_since(stall, seconds)
        seen.add(_key(view.values))
        last = _next_job(sc)
        group = view._running_group
        jobs = _jobs(sc, range(first, last))
        error = view.error
        out.append({
            "value": value, "seconds": seconds, "elapsed": view.elapsed, "format": format_seconds[0],
            "jobs": last - first, "in_group": len(sc.statusTracker().getJobIdsForGroup(group)),
            "in_jobs": _union([(j["start"], j["end"]) for j in jobs if j["start"] and j["end"]]),
            "chart": VEGA in data, "error": f"{type(error).__name__}: {error}"[:300] if error else None,
            "new": new, "pressure": pressure, "start": wall, "job_list": jobs})
    view.set(**{name: plan["original"]})
    if before:
        view.set(**before)
    seen.add(_key(view.values))
    return out


def _jobs(sc, ids) -> list[dict]:
    """Name, times and stages of each job (from the status store, once its listener caught up)."""
    ssc = sc._jsc.sc()
    store = ssc.statusStore()
    tracker = sc.statusTracker()
    out = []
    for j in ids:
        data = None
        for _ in range(50):  # the status store is filled by the listener bus, a little later
            try:
                data = store.job(j)
                if data.completionTime().isDefined():
                    break
            except Exception:
                pass
            time.sleep(0.02)
        if data is None:
            out.append({"id": j, "name": "?", "start": None, "end": None, "stages": []})
            continue
        start = data.submissionTime().get().getTime() if data.submissionTime().isDefined() else None
        end = data.completionTime().get().getTime() if data.completionTime().isDefined() else None
        info = tracker.getJobInfo(j)
        stages = []
        for s in (info.stageIds if info else []):
            st = tracker.getStageInfo(s)
            stages.append({"id": s, "name": st.name if st else "?", "tasks": st.numTasks if st else None})
        group = data.jobGroup()
        out.append({"id": j, "name": data.name(), "status": str(data.status()),
                    "group": group.get() if group.isDefined() else None,
                    "start": start / 1000 if start else None, "end": end / 1000 if end else None,
                    "stages": stages})
    return out


def _union(intervals) -> float:
    total, last = 0.0, None
    for a, b in sorted(intervals):
        if last is None or a > last:
            total += b - a
            last = b
        elif b > last:
            total += b - last
            last = b
    return total


def _inputs_of(fn, ns: dict) -> set[str]:
    """Names of the notebook's DataFrames (Spark or pandas) that ``fn`` reads, directly or
    through the notebook's own functions it calls."""
    import types

    seen, found, todo = set(), set(), [fn]
    while todo:
        f = todo.pop()
        codes = [getattr(f, "__code__", None)]
        while codes:
            code = codes.pop()
            if code is None or id(code) in seen:
                continue
            seen.add(id(code))
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            for name in code.co_names:
                value = ns.get(name)
                if value is None:
                    continue
                if _is_frame(value):
                    found.add(name)
                elif callable(value) and getattr(value, "__module__", None) == "__main__" \
                        and hasattr(value, "__code__"):
                    todo.append(value)
    return found


def _is_frame(value) -> bool:
    module = type(value).__module__
    return (module.startswith("pyspark.sql") and hasattr(value, "toPandas")) or \
        (module.startswith("pandas") and type(value).__name__ == "DataFrame")


def _empty(df, rows: int = 0):
    """``df`` with no rows (or its first row only), its schema and plan kept (see the
    module's doc); a pandas frame becomes a Spark DataFrame first (Spark cannot infer the
    schema of an empty pandas frame)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    if type(df).__module__.startswith("pandas"):
        df = SparkSession.getActiveSession().createDataFrame(df)
    row = F.xxhash64(*[F.col(f"`{c}`") for c in df.columns])
    if rows:
        first = df.select(row.alias("h")).first()
        kept = df.where(row == F.lit(first.h))
    else:
        kept = df.where(row == F.lit(0x5EED_0F_F100D))
    n = kept.count()
    if (rows == 0 and n) or (rows and not n):
        raise RuntimeError(f"the floor's filter kept {n} rows")
    return kept


# ---------------------------------------------------------------- the browser

WIDGET_JS = """(cell) => {
  const output = [...cell.querySelectorAll('.widget-output')].find(o => o.parentElement.children.length === 3);
  return output ? output.parentElement : null;
}"""
FIND_JS = f"""() => {{  // the widget of the cell holding {MARK} (its input may be collapsed: then the first widget)
  const find = {WIDGET_JS};
  const cells = [...document.querySelectorAll('.jp-CodeCell')];
  const text = (c) => (c.querySelector('.jp-InputArea') || {{textContent: ''}}).textContent;
  const marked = cells.filter(c => text(c).includes('{MARK}'));
  for (const c of [...marked, ...cells]) {{ const r = find(c); if (r) return r; }}
  return null;
}}"""
ARM_JS = """(root) => {
  if (!window.__benchListening) {
    window.__benchListening = true;
    for (const kind of ['keydown', 'input', 'change', 'pointerdown', 'mousedown']) {
      document.addEventListener(kind, () => {
        if (window.__benchArmed) { window.__benchArmed = false; window.__benchStart = performance.now(); }
      }, {capture: true});
    }
  }
  window.__benchBefore = root.lastElementChild.querySelector('.jp-OutputArea-output');
  window.__benchStart = window.__benchBusyAt = window.__benchOutputAt = null;
  window.__benchArmed = true;
}"""
DONE_JS = """(root) => {
  const now = performance.now();
  if (window.__benchStart === null) return false;
  if (root.querySelector('.kit-computing')) {
    if (window.__benchBusyAt === null) window.__benchBusyAt = now;
    return false;
  }
  const out = root.lastElementChild.querySelector('.jp-OutputArea-output');
  if (!out || out === window.__benchBefore) return false;
  if (window.__benchOutputAt === null) window.__benchOutputAt = now;
  const embed = out.querySelector('.vega-embed');
  if (embed) {
    const svg = embed.querySelector('svg.marks');
    if (!svg || svg.childElementCount === 0) return false;
  }
  const typed = out.querySelector('[data-mime-type]');
  const since = (t) => t === null ? null : (t - window.__benchStart) / 1000;
  return {seconds: since(now), computing_shown: since(window.__benchBusyAt), output: since(window.__benchOutputAt),
          chart: !!embed, mime: (typed && typed.getAttribute('data-mime-type')) || '',
          text: embed ? '' : out.textContent.trim().slice(0, 300)};
}"""
IDLE_JS = """(root) => !root.querySelector('.kit-computing') &&
  !!root.lastElementChild.querySelector('.jp-OutputArea-output')"""
PROMPTS = "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim())"
# from the notebook's model, not its DOM: a collapsed check cell's error is not drawn
ERRORS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .flatMap(c => c.model.type === 'code' ? c.model.outputs.toJSON() : [])
  .filter(o => o.output_type === 'error').map(o => `${o.ename}: ${o.evalue}`.slice(0, 300))"""


def _browser(notebooks: list[Path], plans: dict, folder: Path) -> dict:
    """Each notebook in JupyterLab in headless Chromium: Run All, then the plans' changes."""
    import shutil
    import sys
    import tempfile

    import nbformat

    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from browsing import chromium_path, serve   # JupyterLab as the browser tests start it

    chromium = chromium_path()
    if chromium is None:
        return {"error": "no chromium (sh tests/browser/ensure-chromium.sh)"}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"error": "the playwright Python package is not installed"}
    results = {}
    with tempfile.TemporaryDirectory(prefix="kit-redraw-") as tmp:
        tmp = Path(tmp)
        # the checkout's layout, for the notebooks' relative paths: ../tests/golden (the kit's
        # goldens) and ../../shared/golden (real Flink's, beside the checkout)
        (tmp / "shared").symlink_to(ROOT.parent / "shared")
        tmp = tmp / "checkout"
        shutil.copytree(NOTEBOOKS, tmp / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        (tmp / "tests").symlink_to(ROOT / "tests")
        for nb in notebooks:  # no stored outputs: every chart seen is drawn now
            path = tmp / "notebooks" / nb.name
            book = nbformat.read(path, as_version=4)
            for cell in book.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            nbformat.write(book, path)
        with serve(tmp) as (base, token), sync_playwright() as p:
            browser = p.chromium.launch_persistent_context(
                str(tmp / "chromium-profile"), executable_path=chromium, headless=True,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
                viewport={"width": 1400, "height": 1000})
            try:
                for nb in notebooks:
                    print(f"redraw: browser, {nb.name}", flush=True)
                    page = browser.new_page()
                    try:
                        results[nb.name] = _browse(page, base, token, nb.name, plans[nb.name])
                    except Exception as exc:
                        results[nb.name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
                        page.screenshot(path=str(folder / f"redraw-browser-{nb.stem}.png"))
                    finally:
                        page.close()
                        _shutdown_kernels(base, token)
            finally:
                browser.close()
    return results


def _browse(page, base: str, token: str, name: str, plans: dict) -> dict:
    import re

    messages = []
    page.on("console", lambda m: m.type == "error" and messages.append(f"console: {m.text[:300]}"))
    page.on("pageerror", lambda e: messages.append(f"page: {str(e)[:300]}"))
    page.set_default_timeout(60_000)
    workspace = re.sub(r"\W", "-", name)
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{name}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell")
    page.wait_for_function("() => /\\| Idle/.test(document.body.innerText)", timeout=120_000)
    started = time.perf_counter()
    result = {"errors": _run_all(page), "controls": {}}
    result["run_all"] = time.perf_counter() - started
    root = page.wait_for_function(FIND_JS, timeout=TIMEOUT * 1000).as_element()
    root.scroll_into_view_if_needed()
    page.wait_for_function(IDLE_JS, arg=root, timeout=TIMEOUT * 1000)
    controls = root.evaluate_handle("(r) => r.firstElementChild")
    values = {name: plan["original"] for name, plan in plans.items()}
    seen = {_key(values)}
    for i, (cname, plan) in enumerate(plans.items()):
        if plan.get("skip"):
            continue
        ctrl = controls.evaluate_handle("(box, i) => box.children[i]", i).as_element()
        for other, label in plan.get("context_labels", {}).items():
            _change(page, root, controls, list(plans).index(other), plans[other], label)
            values[other] = plan["context"][other]
            seen.add(_key(values))
        times = []
        for k, value in enumerate(plan["values"]):
            target = plan["labels"][k] if plan["kind"] == "options" else value
            new = _key({**values, cname: value}) not in seen
            stall, t = _stall(), time.perf_counter()
            times.append(_change(page, root, ctrl, None, plan, target, move=plan.get("moves", [None] * 99)[k]))
            times[-1].update(new=new, pressure=_pressure_since(stall, time.perf_counter() - t))
            values[cname] = value
            seen.add(_key(values))
        if plan["values"][-1] != plan["original"]:
            _change(page, root, ctrl, None, plan, plan.get("original_label", plan["original"]), move=None)
            values[cname] = plan["original"]
        for other, label in plan.get("context_back", {}).items():
            _change(page, root, controls, list(plans).index(other), plans[other], label)
            values[other] = plans[other]["original"]
        seen.add(_key(values))
        result["controls"][cname] = times
        print(f"redraw: browser, {cname}: " + ", ".join("never" if t.get("seconds") is None else f"{t['seconds']:.2f}"
                                                         for t in times), flush=True)
    page.wait_for_timeout(1000)
    result["busy_after"] = page.evaluate("(r) => !!r.querySelector('.kit-computing')", root)
    result["kernel_idle_after"] = page.evaluate("() => /\\| Idle/.test(document.body.innerText)")
    result["messages"] = messages
    return result


def _menu(page, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


RUN_STATE = f"""(n) => {{
  if (({ERRORS})().length > n) return 'error';
  const prompts = ({PROMPTS})();
  const idle = /\\| Idle/.test(document.body.innerText);
  if (idle && prompts.some(p => /^\\[\\d+\\]:$/.test(p)) && !prompts.some(p => p === '[*]:' || p === '[ ]:'))
    return 'done';
  return false;
}}"""


CONTINUE_JS = """() => {  // select the cell after the last failed one, run it and all below
  const app = window.jupyterapp;
  const cells = app.shell.currentWidget.content.widgets;
  const failed = cells.map((c, i) => c.model.type === 'code' && c.model.outputs.toJSON()
    .some(o => o.output_type === 'error') ? i : -1).filter(i => i >= 0).pop();
  if (failed === undefined || failed + 1 >= cells.length) return false;
  app.shell.currentWidget.content.activeCellIndex = failed + 1;
  app.commands.execute('notebook:run-all-below');
  return true;
}"""


def _run_all(page) -> list[str]:
    """Run All; a cell that fails stops it, so run on from the cell after it, as a user
    would (Run Selected Cell and All Below, through window.jupyterapp). Done when no cell
    waits or runs and the kernel is idle, twice 3 s apart (a collapsed cell shows no
    prompt). The cells' errors."""
    _menu(page, "Run All Cells")
    seen = 0
    while True:
        state = page.wait_for_function(RUN_STATE, arg=seen, timeout=1_800_000, polling=1000).json_value()
        if state == "done":
            page.wait_for_timeout(3000)
            if page.evaluate(RUN_STATE, seen) == "done":
                return page.evaluate(ERRORS)
            continue
        errors = page.evaluate(ERRORS)
        seen = len(errors)
        print(f"redraw: a cell failed, running on past it: {errors[-1][:200]!r}", flush=True)
        page.wait_for_function("() => /\\| Idle/.test(document.body.innerText)", timeout=120_000)
        if not page.evaluate(CONTINUE_JS):
            return errors


def _change(page, root, box, index, plan: dict, target, move=None) -> dict:
    """Change one control as a user would and wait for the new output: {seconds, ...}."""
    ctrl = box if index is None else box.evaluate_handle("(b, i) => b.children[i]", index).as_element()
    kind = plan["kind"]
    page.wait_for_function(IDLE_JS, arg=root, timeout=TIMEOUT * 1000)
    page.evaluate(ARM_JS, root)
    if kind == "slider":
        handle = ctrl.query_selector(".noUi-handle")
        handle.focus()
        if move is None:  # back to ``target``: one step at a time
            now = float(handle.get_attribute("aria-valuenow"))
            step = 1 if float(target) > now else -1
            handle.press("ArrowRight" if step > 0 else "ArrowLeft")
        else:
            handle.press("ArrowRight" if move > 0 else "ArrowLeft")
    elif kind == "options":
        select = ctrl.query_selector("select")
        if select is not None:
            select.select_option(label=str(target))
        else:
            buttons = [b for b in ctrl.query_selector_all("button") if b.inner_text().strip() == str(target)]
            buttons[0].click()
    elif kind == "toggle":
        ctrl.query_selector("input, button").click()
    elif kind == "text":
        box_ = ctrl.query_selector("input, textarea")
        box_.fill(str(target))
        if box_.evaluate("e => e.tagName") == "INPUT":
            box_.press("Enter")
        else:
            box_.evaluate("e => e.blur()")
    try:
        done = page.wait_for_function(DONE_JS, arg=root, timeout=TIMEOUT * 1000, polling="raf").json_value()
    except Exception:
        done = {"seconds": None, "timeout": True}
    if kind == "slider":
        done["readout"] = ctrl.query_selector(".widget-readout").inner_text()
        if move is None and done.get("seconds") is not None and float(done["readout"]) != float(target):
            return _change(page, root, box, index, plan, target, move=None)
    done["target"] = target
    return done


def _shutdown_kernels(base: str, token: str) -> None:
    from browsing import request

    for session in json.loads(request(f"{base}/api/sessions", token, timeout=30)):
        request(f"{base}/api/sessions/{session['id']}", token, method="DELETE", timeout=30)
    time.sleep(2)


# ---------------------------------------------------------------- the cold start

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


def _cold_start() -> dict:
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


# ---------------------------------------------------------------- the report


def _stall() -> float | None:
    """Seconds all tasks have stalled for CPU so far (/proc/pressure/cpu, some total)."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return int(line.split("total=")[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return None


def _pressure_since(stall: float | None, seconds: float) -> float | None:
    """The CPU pressure (% of the time some task waited for a CPU) since ``stall``."""
    now = _stall()
    return None if stall is None or now is None or seconds <= 0 else round(100 * (now - stall) / seconds, 1)


def _pressure() -> str:
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return line.split()[1].split("=")[1] + " %"
    except (OSError, IndexError):
        return "n/a"


def _stats(changes: list, ok) -> str:
    """``median / worst`` of the changes ``ok`` accepts (a failed redraw is not counted)."""
    done = [x["seconds"] for x in changes if x.get("seconds") is not None and ok(x)]
    never = sum(x.get("seconds") is None for x in changes)
    text = f"{statistics.median(done):.2f} / {max(done):.2f}" if done else "-"
    if never:
        text += f" ({never} never finished)"
    return text


def _median(changes: list, field: str = "seconds", ok=lambda x: True, digits: int = 2) -> str:
    done = [x[field] for x in changes if x.get(field) is not None and ok(x)]
    return f"{statistics.median(done):.{digits}f}" if done else "-"


def _jobs_text(runs: list) -> str:
    counts = [r["jobs"] for r in runs]
    if not counts:
        return "-"
    lo, hi, mid = min(counts), max(counts), statistics.median(counts)
    return f"{mid:g}" if lo == hi else f"{mid:g} ({lo}-{hi})"


def _short(name: str) -> str:
    import re

    name = re.sub(r"/tmp/ipykernel_\d+/\d+\.py:(\d+)", r"the widget cell's line \1", name)
    name = re.sub(r"\S*/site-packages/", "", name)
    return name.replace(str(ROOT) + "/", "")


def _markdown(report: dict) -> str:
    n = report["changes"]
    lines = [f"## Widget redraws (issue 24): {n} changes per control, median / worst", "",
             "| notebook | control | kernel median / worst (s) | browser median / worst (s) | Spark jobs per redraw "
             "| floor median (s) | notes |",
             "|---|---|---|---|---|---|---|"]
    slow = []
    for nb, r in report["notebooks"].items():
        if r.get("error"):
            lines.append(f"| {nb} | (all) | {r['error']} | | | | |")
            continue
        browser = report["browser"].get(nb, {}) if isinstance(report["browser"], dict) else {}
        for name, plan in r.get("plans", {}).items():
            if plan.get("skip"):
                lines.append(f"| {nb} | {name} | skipped: {plan['skip']} | | | | |")
                continue
            runs = r["kernel"][name]
            good = [x for x in runs if not x["error"]]
            kernel = _stats(runs, lambda x: not x["error"])
            b = browser.get("controls", {}).get(name) or []
            shown = _stats(b, lambda x: x.get("chart")) if b else (
                browser.get("error") or "; ".join(browser.get("errors", [])) or "-")
            floor, one = r["floor"].get(name), r.get("floor_one_row", {}).get(name)
            if floor and all(x["error"] for x in floor) and one:  # empty inputs refused: one row
                floor_text = f"{_median(one, ok=lambda x: not x['error'])} (one row)"
            else:
                floor_text = _median(floor or [], ok=lambda x: not x["error"])
            notes = [f"in jobs {_median(good, 'in_jobs')} s, formatting {_median(good, 'format')} s"]
            new, old = [x for x in good if x["new"]], [x for x in good if not x["new"]]
            b_new = [x for x in b if x.get("chart") and x.get("new")]
            b_old = [x for x in b if x.get("chart") and not x.get("new")]
            if new and old:
                notes.append(f"values new / drawn before: kernel {_median(new)} s ({len(new)}) / {_median(old)} s "
                             f"({len(old)}), browser {_median(b_new)} / {_median(b_old)} s, jobs "
                             f"{_jobs_text(new)} / {_jobs_text(old)}")
            failed = [x["error"] for x in runs if x["error"]]
            if failed:
                notes.append(f"{len(failed)} kernel redraws failed, not counted ({failed[0][:100]})")
            other = [x for x in b if x.get("seconds") is not None and not x.get("chart")]
            if other:
                notes.append(f"{len(other)} browser outputs not a chart, not counted "
                             f"({other[0].get('text', '')[:80]!r})")
            if floor:
                failed = [x["error"] for x in floor if x["error"]]
                notes.append(f"floor {_jobs_text(floor)} jobs" +
                             (f", {len(failed)} failed ({failed[0][:80]})" if failed else ""))
            if one:
                notes.append(f"floor on one row per input {_median(one, ok=lambda x: not x['error'])} s, "
                             f"{_jobs_text(one)} jobs" + (f", {sum(bool(x['error']) for x in one)} failed"
                                                          if any(x["error"] for x in one) else ""))
            if any(x["jobs"] != x["in_group"] for x in runs):
                notes.append("jobs outside the redraw's group")
            drawn = [x for x in b if x.get("seconds") is not None and x.get("output") is not None]
            if drawn and statistics.median(x["seconds"] - x["output"] for x in drawn) > 0.05:
                notes.append(f"browser: output replaced at {_median(drawn, 'output')} s, drawn at {_median(drawn)} s")
            notes.append(f"CPU pressure while measured: kernel {_median(runs, 'pressure', digits=0)} %, "
                         f"browser {_median(b, 'pressure', digits=0)} %, floor "
                         f"{_median((floor or []) + (one or []), 'pressure', digits=0)} %")
            if plan["context"]:
                notes.append("with " + ", ".join(f"{k} = {v}" for k, v in plan["context"].items()))
            lines.append(f"| {nb.split('_')[0]} | {name} | {kernel} | {shown} | {_jobs_text(runs)} | {floor_text} "
                         f"| {'; '.join(notes)} |")
            key = [x for x in good if x["new"]] or good or runs
            slow.append((statistics.median(x["seconds"] for x in key), nb, name, runs))
    lines.append("")
    cold = report.get("cold")
    if cold and not cold.get("error"):
        lines.append(f"Cold start (fresh Python process, notebook 00): **{cold['total']:.1f} s** from `import kit` "
                     f"to its first chart's mimebundle ({'under' if cold['total'] < 8 else 'NOT under'} 8 s; real "
                     f"Flink: {FLINK_FIRST_RESULT} s to its first result): import kit {cold['import']:.1f} s, Spark "
                     f"session {cold['session']:.1f} s, the {len(cold['each'])} cells before the chart "
                     f"{cold['cells_before']:.1f} s (" + ", ".join(f"cell {i} `{c}`… {t:.1f} s"
                                                              for i, (c, t) in enumerate(cold["each"], 1)) +
                     f"), the first chart (`{cold['chart_cell'].strip().splitlines()[0][:60]}`) {cold['chart']:.1f} s.")
    elif cold:
        lines.append(f"Cold start: failed: {cold['error']}")
    lines.append("")
    lines.append(f"CPU pressure (/proc/pressure/cpu some avg10): {report['pressure_before']} before, "
                 f"{report.get('pressure_after', '?')} after; load average "
                 f"{report['loadavg_before'][0]:.1f} before, {report.get('loadavg_after', [0])[0]:.1f} after "
                 f"({os.cpu_count()} cores).")
    for nb, r in report["notebooks"].items():
        if r.get("cell_errors"):
            lines.append(f"\nKernel, {nb}: cells before the widget failed (run on past them): "
                         + "; ".join(r["cell_errors"]))
    for nb, b in (report["browser"].items() if isinstance(report["browser"], dict) else []):
        if not isinstance(b, dict):
            continue
        odd = []
        if b.get("busy_after"):
            odd.append("the status line still says computing after the last change")
        if b.get("kernel_idle_after") is False:
            odd.append("the kernel is still busy after the last change")
        if b.get("messages"):
            odd.append(f"{len(b['messages'])} browser console errors, first: {b['messages'][0]}")
        if b.get("errors"):
            odd.append("cell errors (run on past them): " + "; ".join(e.replace("\n", " ")[:200] for e in b["errors"]))
        if odd:
            lines.append(f"\nBrowser, {nb}: " + "; ".join(odd))
    slow.sort(reverse=True)
    if slow:
        lines.append("\nWhere the time goes in the slowest redraws (kernel; per redraw, over the changes to values "
                     "not drawn before; job names are their Python call sites):")
    for median, nb, name, runs in slow[:3]:
        runs = [x for x in runs if x["new"] and not x["error"]] or runs  # what a value not drawn before costs
        per_name: dict[str, list] = {}
        for run in runs:
            seen: dict[str, list] = {}
            for job in run["job_list"]:
                if job["start"] and job["end"]:
                    seen.setdefault(_short(job["name"]), []).append(job["end"] - job["start"])
            for k, v in seen.items():
                per_name.setdefault(k, []).append((len(v), sum(v)))
        top = sorted(per_name.items(), key=lambda kv: -sum(s for _, s in kv[1]))[:5]
        parts = [f"`{k}` {sum(c for c, _ in v) / len(runs):.1f} jobs, {sum(s for _, s in v) / len(runs):.2f} s"
                 for k, v in top]
        lines.append(f"- {nb.split('_')[0]} {name} ({_median(runs)} s, {len(runs)} changes, "
                     f"{statistics.median(x['in_jobs'] for x in runs):.2f} s in jobs, "
                     f"{statistics.median(x['format'] for x in runs):.2f} s formatting): " + "; ".join(parts))
        profile = report["notebooks"][nb].get("profile", {}).get(name)
        if profile:
            own = [(w, n, t) for w, n, t in profile["own"] if "_socket.socket" not in w][:4]
            lines.append(
                f"  - one redraw under cProfile ({name} = {profile.get('value')!r}, "
                f"{'not drawn before' if profile.get('new') else 'drawn before'}: {profile['seconds']:.2f} s, "
                f"{profile['jobs']} jobs): waiting on the "
                f"JVM (py4j) {profile['py4j']:.2f} s, of which in Spark jobs {profile['in_jobs']:.2f} s, so "
                f"{max(0.0, profile['py4j'] - profile['in_jobs']):.2f} s of JVM calls outside jobs (plans analysed, "
                f"optimized and planned; DataFrames built); Python's own time "
                f"{profile['seconds'] - profile['py4j']:.2f} s "
                f"({profile['calls']:,} calls), most in " + "; ".join(f"`{_short(w)}` {t:.2f} s" for w, n, t in own))
    return "\n".join(lines) + "\n"


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.redraw")
    parser.add_argument("--changes", type=int, default=CHANGES)
    parser.add_argument("--notebooks", nargs="*", help="name prefixes, e.g. 00 02")
    parser.add_argument("--skip", nargs="*", default=[], choices=["kernel", "floor", "browser", "cold"])
    args = parser.parse_args()
    out = Path("build")
    out.mkdir(exist_ok=True)
    text = redraw(out / "bench", changes=args.changes, only=args.notebooks, skip=tuple(args.skip))
    (out / "bench-redraw.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
