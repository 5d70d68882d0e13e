"""Spark's jobs from its status store: how many a redraw submitted, their names, stages and times."""

from __future__ import annotations

import time


def next_job(sc) -> int:
    n = sc._jsc.sc().dagScheduler().nextJobId()
    return n if isinstance(n, int) else n.get()


def job_details(sc, ids) -> list[dict]:
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


def union_seconds(intervals) -> float:
    total, last = 0.0, None
    for a, b in sorted(intervals):
        if last is None or a > last:
            total += b - a
            last = b
        elif b > last:
            total += b - last
            last = b
    return total
