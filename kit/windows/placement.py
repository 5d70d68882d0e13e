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
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import sparksql
from ..arrow import map_in_arrow
from ..stream import Arrivals
from .triggers import CountTrigger, NeverTrigger, PurgingTrigger

__all__ = ["place_timers", "fires_on_timers", "first_at_least", "first_at_least_columns"]

PLACED = pa.schema([("_kind", pa.string()), ("_t", pa.int64()), ("_f", pa.int64()), ("_seq", pa.int64()),
                    ("_wm", pa.int64()), ("_pt", pa.int64())])   # a timer firing's place (place_timers)


def first_at_least(arrivals, thresholds: dict) -> dict:
    """For each ``column: [t, ...]`` of ``thresholds`` and each ``t``, the arrival (a Row of
    ``arrivals``' columns, ``seq`` first) with the smallest ``seq`` whose ``column >= t``;
    None when there is none. ``{(column, t): Row or None}``; one pass over ``arrivals``:
    a DataFrame, or the stream's JVM scan (``kit.stream.Arrivals``, columns ``seq``,
    ``own``, ``before``, ``pt``; thresholds of ``own``, ``pt`` and ``seq``). For many
    thresholds, ``first_at_least_columns`` gives the same as columns."""
    out = {}
    for column, (grid, hits) in first_at_least_columns(arrivals, thresholds).items():
        Hit, found = Row(*hits.column_names), hits.column("seq").is_valid().to_numpy(zero_copy_only=False)
        for t, row, ok in zip(grid.tolist(), hits.to_pylist(), found):
            out[(column, t)] = Hit(*row.values()) if ok else None
    return out


def first_at_least_columns(arrivals, thresholds: dict) -> dict:
    """``first_at_least``'s answer as columns: ``{column: (grid, hits)}``, ``grid`` the
    distinct thresholds (sorted, int64), ``hits`` an Arrow table of the arrivals' columns
    (``seq`` first), a row per threshold of ``grid``, all NULL where no arrival reaches it."""
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
                first = _first_per(i[keep], seq[keep])
                yield pa.RecordBatch.from_arrays(
                    [pa.array(np.full(len(first), k, np.int32)), pa.array(i[keep][first])]
                    + [b.column(p).take(pa.array(keep[first])) for p in payload], schema=pa.schema(
                        [("_c", pa.int32()), ("_i", pa.int64())] + [b.schema.field(p) for p in payload]))

    return _earliest(map_in_arrow(arrivals, per_task, schema), payload, names, grids)


def _first_per(index: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Positions of the row of smallest ``seq`` for each value of ``index``, by ``index``."""
    order = np.lexsort((seq, index))
    return order[np.r_[True, index[order][1:] != index[order][:-1]]] if len(order) else order


def _earliest(firsts: DataFrame, payload: list, names: list, grids: dict) -> dict:
    """From each task's first arrival per threshold (rows ``_c``, ``_i``, ``payload``), the
    answer of ``first_at_least_columns``: collected as Arrow, in one job (the rows are at
    most tasks times thresholds); per threshold, the earliest of the firsts at it or above."""
    table = firsts.select("_c", "_i", *payload).toArrow()
    c, i = (table.column(n).to_numpy(zero_copy_only=False) for n in ("_c", "_i"))
    seq = table.column("seq").to_numpy(zero_copy_only=False)
    values = table.select(payload)
    out, none = {}, np.iinfo(np.int64).max
    for k, name in enumerate(names):
        rows = np.flatnonzero(c == k)
        first = rows[_first_per(i[rows], seq[rows])]   # the earliest row at each threshold reached
        at = np.full(len(grids[name]), -1)
        at[i[first]] = first
        # from the highest threshold down: the earliest row at it or above (suffix minimum of seq)
        key = np.full(len(at), none)
        key[at >= 0] = seq[at[at >= 0]]
        key = key[::-1]
        least = np.minimum.accumulate(key)
        where = np.maximum.accumulate(np.where(key == least, np.arange(len(key)), 0))
        best = at[::-1][where][::-1]
        out[name] = (grids[name], values.take(pa.array(best, mask=(least == none)[::-1])))
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
    it, under the watermark that arrival met (one the clock had reached when an arrival
    registered it: right after that arrival, under the watermark it met; live, in its
    micro-batch). ``scan``: the stream's JVM arrival scan."""
    s = stream
    kinds = {"event-time timer": "own"}
    if s.proctime is not None:
        kinds["processing-time timer"] = "pt"
    timer = f"cause IN ({', '.join(map(sparksql.string, kinds))})"
    wanted = firings.where(timer).selectExpr("cause", "timer", "_floor").distinct().toArrow()   # as Arrow: many
    if not wanted.num_rows:
        return firings
    arrivals = scan if scan is not None else s.unordered().select(
        "seq", s.own_watermark().alias("own"), s.millis("watermark").alias("before"),
        (F.unix_millis("proctime") if s.proctime is not None else F.lit(None).cast("long")).alias("pt"))
    event = pc.equal(wanted.column("cause"), "event-time timer").to_numpy(zero_copy_only=False)
    t = wanted.column("timer").to_numpy(zero_copy_only=False).astype(np.int64)
    floors = wanted.column("_floor").fill_null(np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)
    reach = np.where(event, np.maximum(t, floors), floors)   # event time: max(timer, floor); the clock: seq floor
    last = np.where(floors > np.iinfo(np.int64).min, floors - 1, floors)   # the arrival before the floor
    hits = first_at_least_columns(arrivals, {"own": reach[event], "pt": t[~event], "seq": last[~event]})
    parts = []
    if event.any():   # right after the first arrival whose own watermark reaches it, under the one it left
        hit = _lookup(hits["own"], reach[event])
        parts.append((wanted.filter(event), hit["seq"],
                      pc.max_element_wise(hit["before"], hit["own"], skip_nulls=True), hit["pt"]))
    if not event.all():   # just before the first arrival from the floor on whose clock reaches it
        rows, by_clock, before = wanted.filter(~event), _lookup(hits["pt"], t[~event]), _lookup(hits["seq"], last[~event])
        # the clock reached it before the floor (due when registered): right after the arrival
        # that registered it, under the watermark that arrival met (live: in its micro-batch)
        due = pc.fill_null(pc.less(by_clock["seq"], pa.array(reach[~event])), False)
        parts.append((rows, pc.if_else(due, before["seq"], pc.subtract(by_clock["seq"], 1)),
                      pc.if_else(due, before["before"], by_clock["before"]), rows.column("timer")))
    found = pa.concat_tables([pa.table([rows.column("cause"), rows.column("timer"), rows.column("_floor"), seq, wm, pt],
                                       schema=PLACED) for rows, seq, wm, pt in parts])
    found = sparksql.local_rows(s.source.sparkSession, found)
    out = firings.join(found, F.expr("cause = _kind AND timer = _t AND _floor <=> _f"), "left")
    filled = {"fired_after": "_seq", "watermark": "_wm", "proctime": "_pt"}
    return out.selectExpr(*[f"CASE WHEN {timer} THEN {filled[c]} ELSE {c} END AS {c}" if c in filled
                            else sparksql.name(c) for c in firings.columns])


def _lookup(column: tuple, thresholds: np.ndarray) -> pa.Table:
    """``first_at_least_columns``' hits at each of ``thresholds`` (all in its grid), a row
    each (NULL: none reached it)."""
    grid, hits = column
    return hits.take(pa.array(np.searchsorted(grid, thresholds)))
