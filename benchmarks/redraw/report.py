"""The markdown table of the measurements, and where the time goes in the slowest redraws."""

from __future__ import annotations

import os
import statistics

from .settings import FLINK_FIRST_RESULT, ROOT


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


def short_name(name: str) -> str:
    import re

    name = re.sub(r"/tmp/ipykernel_\d+/\d+\.py:(\d+)", r"the widget cell's line \1", name)
    name = re.sub(r"\S*/site-packages/", "", name)
    return name.replace(str(ROOT) + "/", "")


def markdown(report: dict) -> str:
    n = report["changes"]
    load = f", beside {report['load']} busy processes" if report.get("load") else ""
    lines = [f"## Widget redraws (issue 24): {n} changes per control{load}, median / worst", "",
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
            notes = [f"in jobs {_median(good, 'in_jobs')} s, planning (JVM calls outside jobs) "
                     f"{_median(good, 'planning')} s, formatting {_median(good, 'format')} s"]
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
                    seen.setdefault(short_name(job["name"]), []).append(job["end"] - job["start"])
            for k, v in seen.items():
                per_name.setdefault(k, []).append((len(v), sum(v)))
        top = sorted(per_name.items(), key=lambda kv: -sum(s for _, s in kv[1]))[:5]
        parts = [f"`{k}` {sum(c for c, _ in v) / len(runs):.1f} jobs, {sum(s for _, s in v) / len(runs):.2f} s"
                 for k, v in top]
        lines.append(f"- {nb.split('_')[0]} {name} ({_median(runs)} s, {len(runs)} changes, "
                     f"{statistics.median(x['in_jobs'] for x in runs):.2f} s in jobs, "
                     f"{_median(runs, 'planning')} s planning, "
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
                f"({profile['calls']:,} calls), most in " + "; ".join(f"`{short_name(w)}` {t:.2f} s" for w, n, t in own))
    return "\n".join(lines) + "\n"
