"""Inside the notebook's kernel: each control's redraws timed, with their Spark jobs and floor."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .floor import emptied, inputs_of
from .jobs import job_details, next_job, union_seconds
from .plans import control_plan, values_key
from .pressure import pressure_since, stall_seconds
from .report import short_name
from .settings import CHANGES, VEGA


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
    seen = {values_key(view.values)}  # the values drawn so far: the kit may cache what they computed
    try:
        for name in view.controls:
            plan = control_plan(view, name, changes)
            report["plans"][name] = plan
            if plan.get("skip"):
                continue
            report["kernel"][name] = _run(view, sc, name, plan, format_seconds, seen)
            report.setdefault("profile", {})[name] = _profile(view, name, plan, seen)
        if floor:
            inputs = inputs_of(view.fn, ns)
            report["inputs"] = sorted(inputs)
            saved = {name: ns[name] for name in inputs}
            try:  # empty inputs (may run fewer jobs: a part that sees no rows may skip its own), then one row
                for key, rows in (("floor", 0), ("floor_one_row", 1)):
                    for name, df in saved.items():
                        ns[name] = emptied(df, rows)
                    report[key] = {}
                    seen = {values_key(view.values)}  # new inputs: nothing cached for them yet
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
    slider's), computed (what the view kept is forgotten first): the functions with the most
    time of their own (a py4j socket read is the driver waiting for the JVM)."""
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
            if control.min <= v <= control.max and values_key({**view.values, name: v}) not in seen:
                value = v
                break
    new = values_key({**view.values, name: value}) not in seen
    view.forget()   # a computation profiled, not an output the view kept from before
    first = next_job(sc)
    profile = cProfile.Profile()
    profile.enable()
    t = time.perf_counter()
    view.set(**{name: value})
    seconds = time.perf_counter() - t
    profile.disable()
    jobs = job_details(sc, range(first, next_job(sc)))
    seen.add(values_key(view.values))
    view.set(**{name: plan["original"]})
    if before:
        view.set(**before)
    stats = pstats.Stats(profile).stats

    def where(key):
        file, line, fn = key
        return f"{short_name(file)}:{line}({fn})"

    own = sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]
    cumulative = sorted(((k, v) for k, v in stats.items() if "/kit/" in k[0]), key=lambda kv: -kv[1][3])[:20]
    jvm = sum(v[2] for k, v in stats.items() if k[2] in ("<method 'recv_into' of '_socket.socket' objects>",
                                                          "<method 'sendall' of '_socket.socket' objects>"))
    in_jobs = union_seconds([(j["start"], j["end"]) for j in jobs if j["start"] and j["end"]])
    return {"seconds": seconds, "value": value, "new": new, "jobs": len(jobs), "in_jobs": in_jobs,
            "py4j": jvm, "calls": sum(v[1] for v in stats.values()),
            "own": [[where(k), v[1], round(v[2], 4)] for k, v in own],
            "kit_cumulative": [[where(k), v[1], round(v[3], 4)] for k, v in cumulative]}


class _Py4jTimer:
    """Seconds the driver spends in py4j calls to the JVM (outermost calls only), from the
    moment ``on`` is called until ``off``: with the time in Spark jobs subtracted, what
    planning costs (plans analysed, optimized and planned; DataFrames built)."""

    def __init__(self):
        from py4j import clientserver, java_gateway

        self.seconds, self._depth, self._saved = 0.0, 0, []
        self._classes = (clientserver.ClientServerConnection, java_gateway.GatewayConnection)

    def on(self) -> None:
        for cls in self._classes:
            original = cls.send_command
            self._saved.append((cls, original))

            def timed(connection, command, *args, _original=original, **kwargs):
                self._depth += 1
                t = time.perf_counter()
                try:
                    return _original(connection, command, *args, **kwargs)
                finally:
                    self._depth -= 1
                    if not self._depth:
                        self.seconds += time.perf_counter() - t

            cls.send_command = timed

    def off(self) -> None:
        for cls, original in self._saved:
            cls.send_command = original
        self._saved = []


def _find_view(ns: dict, bound_type):
    """The widget the widget cell displayed: its value (``_``), or the last Bound defined."""
    if isinstance(ns.get("_"), bound_type):
        return ns["_"]
    views = [v for v in ns.values() if isinstance(v, bound_type)]
    if not views:
        raise RuntimeError("no kit.widgets.Bound in the notebook's namespace after its widget cell")
    return views[-1]


def _run(view, sc, name: str, plan: dict, format_seconds: list, seen: set) -> list[dict]:
    """Time ``view.set`` for each of the plan's values; the control is put back after.
    Each change says whether its values were drawn before (``seen``) and the CPU pressure
    while it ran."""
    before = {k: view.values[k] for k in plan["context"]}
    if plan["context"]:
        view.set(**plan["context"])
        seen.add(values_key(view.values))
    out = []
    py4j = _Py4jTimer()
    for value in plan["values"]:
        new = values_key({**view.values, name: value}) not in seen
        first = next_job(sc)
        wall = time.time()
        stall = stall_seconds()
        py4j.seconds = 0.0
        py4j.on()
        t = time.perf_counter()
        try:
            data = view.set(**{name: value})
        finally:
            seconds = time.perf_counter() - t
            py4j.off()
        pressure = pressure_since(stall, seconds)
        seen.add(values_key(view.values))
        last = next_job(sc)
        group = view._running_group
        jobs = job_details(sc, range(first, last))
        in_jobs = union_seconds([(j["start"], j["end"]) for j in jobs if j["start"] and j["end"]])
        error = view.error
        out.append({
            "value": value, "seconds": seconds, "elapsed": view.elapsed, "format": format_seconds[0],
            "jobs": last - first, "in_group": len(sc.statusTracker().getJobIdsForGroup(group)),
            "in_jobs": in_jobs, "py4j": py4j.seconds, "planning": max(0.0, py4j.seconds - in_jobs),
            "chart": VEGA in data, "error": f"{type(error).__name__}: {error}"[:300] if error else None,
            "new": new, "pressure": pressure, "start": wall, "job_list": jobs})
    view.set(**{name: plan["original"]})
    if before:
        view.set(**before)
    seen.add(values_key(view.values))
    return out
