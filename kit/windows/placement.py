"""When did a timer fire? Placing a key's timer firings on the whole stream's arrivals.

A key is replayed alone, so it sees the watermark only at its own arrivals; the watermark
that fired its event-time timer at time ``t`` was emitted after another key's arrival:
the first arrival whose own watermark (``ts - delay - 1``, or its watermark column) reaches
``t`` -- the watermark only grows, so that is the first arrival where it passed ``t``.
The firing happened right after it, under the watermark that arrival left. A
processing-time timer fired when the clock reached ``t``: just before the first arrival
with ``proctime >= t``, under the watermark that arrival met. A timer registered behind
its clock fires later: at the next rise of the watermark, before the next arrival; the
replay gives each timer firing a floor for that (``_Operator.floors``).

    timer 9, delay 0:   seq  ts  own watermark      -> fired after seq 3, watermark 11
                        2    5   4
                        3    12  11

Each lookup ("the smallest ``seq`` whose value is >= t") takes one pass over the stream
and no sort: the thresholds (the distinct timer times, brought to the driver) go to every
task as a sorted array; each arrival finds the greatest threshold at or below its value
(a binary search) and each task keeps, per threshold, its first such arrival; on the
driver, a suffix minimum over the thresholds gives the answer for each. With the stream's
JVM scan (``kit.stream.Arrivals``), the pass runs in Java over the source's own rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import sparksql
from ..arrow import map_in_arrow
from ..stream import Arrivals
from .triggers import CountTrigger, NeverTrigger, PurgingTrigger

__all__ = ["place_timers", "fires_on_timers", "first_at_least"]


def first_at_least(arrivals, thresholds: dict) -> dict:
    """For each ``column: [t, ...]`` of ``thresholds`` and each ``t``, the arrival (a Row of
    ``arrivals``' columns, ``seq`` first) with the smallest ``seq`` whose ``column >= t``;
    None when there is none. ``{(column, t): Row or None}``; one pass over ``arrivals``:
    a DataFrame, or the stream's JVM scan (``kit.stream.Arrivals``, columns ``seq``,
    ``own``, ``before``, ``pt``; thresholds of ``own``, ``pt`` and ``seq``)."""
    grids = {c: np.unique(np.asarray(ts, dtype=np.int64)) for c, ts in thresholds.items() if len(ts)}
    if not grids:
        return {}
    names = list(grids)
    if isinstance(arrivals, Arrivals):
        return _earliest(arrivals.first({c: grid.tolist() for c, grid in grids.items()}),
                         ["seq", "own", "before", "pt"], names, grids)
    payload = ["seq"] + [c for c in arrivals.columns if c != "seq"]
    arrivals = arrivals.select(*payload)
    schema = T.StructType([T.StructField("_c", T.IntegerType()), T.StructField("_i", T.LongType())]
                          + list(arrivals.schema.fields))

    def per_task(batches):
        for b in batches:
            seq = b.column("seq").to_numpy(zero_copy_only=False)
            for k, c in enumerate(names):
                col = b.column(c)
                i = np.searchsorted(grids[c], col.fill_null(np.iinfo(np.int64).min).to_numpy(), side="right") - 1
                keep = np.flatnonzero(i >= 0)   # NULL: below every threshold
                if not len(keep):
                    continue
                order = keep[np.lexsort((seq[keep], i[keep]))]   # per threshold index, by arrival
                first = order[np.r_[True, i[order][1:] != i[order][:-1]]]
                yield pa.RecordBatch.from_arrays(
                    [pa.array(np.full(len(first), k, np.int32)), pa.array(i[first])]
                    + [b.column(p).take(pa.array(first)) for p in payload], schema=pa.schema(
                        [("_c", pa.int32()), ("_i", pa.int64())] + [b.schema.field(p) for p in payload]))

    return _earliest(map_in_arrow(arrivals, per_task, schema), payload, names, grids)


def _earliest(firsts: DataFrame, payload: list, names: list, grids: dict) -> dict:
    """From each task's first arrival per threshold (rows ``_c``, ``_i``, ``payload``), the
    answer of ``first_at_least``. The rows are few (tasks times thresholds, and the
    thresholds are on the driver already): collected as they are, in one job."""
    found, Hit = {}, Row(*payload)
    for r in firsts.collect():
        hit = Hit(*(r[c] for c in payload))
        old = found.get((r._c, r._i))
        if old is None or hit.seq < old.seq:
            found[(r._c, r._i)] = hit
    out = {}
    for k, c in enumerate(names):
        hit = None
        for i in range(len(grids[c]) - 1, -1, -1):   # the first arrival at or above grids[c][i]
            h = found.get((k, i))
            if h is not None and (hit is None or h.seq < hit.seq):
                hit = h
            out[(c, int(grids[c][i]))] = hit
    return out


def fires_on_timers(trigger) -> bool:
    """Whether ``trigger`` may fire on a timer, so that its firings need placing: all but
    the built-in ``CountTrigger`` and ``NeverTrigger`` (and ``PurgingTrigger`` of them),
    whose firings all come from an element, placed by the replay itself."""
    if type(trigger) is PurgingTrigger:
        return fires_on_timers(trigger.nested)
    return type(trigger) not in (CountTrigger, NeverTrigger)


def place_timers(firings: DataFrame, stream, scan: Arrivals | None = None) -> DataFrame:
    """Fill ``fired_after``, ``watermark`` and ``proctime`` of timer firings (columns in ms)
    from their ``timer`` and ``_floor`` (``kit.windows.operator._Operator.floors``): an
    event-time timer fired right after the first arrival whose own watermark reaches
    ``max(timer, floor)``, under the watermark that arrival left; a processing-time timer
    just before the first arrival at or after ``seq`` floor whose processing time reaches
    it, under the watermark that arrival met. ``scan``: the stream's JVM arrival scan."""
    s = stream
    kinds = {"event-time timer": "own"}
    if s.proctime is not None:
        kinds["processing-time timer"] = "pt"
    timer = f"cause IN ({', '.join(map(sparksql.string, kinds))})"
    wanted = firings.where(timer).selectExpr("cause", "timer", "_floor").distinct().collect()
    if not wanted:
        return firings
    arrivals = scan if scan is not None else s.unordered().select(
        "seq", s.own_watermark().alias("own"), s.millis("watermark").alias("before"),
        (F.unix_millis("proctime") if s.proctime is not None else F.lit(None).cast("long")).alias("pt"))
    event = {r: max(r.timer, r._floor) for r in wanted if r.cause == "event-time timer"}
    processing = [r for r in wanted if r.cause == "processing-time timer"]
    hits = first_at_least(arrivals, {"own": list(event.values()), "pt": [r.timer for r in processing],
                                     "seq": [r._floor for r in processing]})
    placed = []
    for r, threshold in event.items():
        hit = hits[("own", threshold)]
        placed.append((r.cause, r.timer, r._floor) + ((None, None, None) if hit is None else (
            hit.seq, max(v for v in (hit.before, hit.own) if v is not None), hit.pt)))
    for r in processing:
        by_clock, by_seq = hits[("pt", r.timer)], hits[("seq", r._floor)]
        hit = None if by_clock is None or by_seq is None else max(by_clock, by_seq, key=lambda h: h.seq)
        placed.append((r.cause, r.timer, r._floor) + ((None, None, r.timer) if hit is None else (
            hit.seq - 1, hit.before, r.timer)))
    found = sparksql.local_rows(s.source.sparkSession, placed,
                                "_kind string, _t long, _f long, _seq long, _wm long, _pt long").hint("broadcast")
    out = firings.join(found, F.expr("cause = _kind AND timer = _t AND _floor <=> _f"), "left")
    filled = {"fired_after": "_seq", "watermark": "_wm", "proctime": "_pt"}
    return out.selectExpr(*[f"CASE WHEN {timer} THEN {filled[c]} ELSE {c} END AS {c}" if c in filled
                            else sparksql.name(c) for c in firings.columns])

