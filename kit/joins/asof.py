"""The fast path of the event-time temporal join: a vectorized as-of join on Spark.

When neither input has a row behind its own watermark, the interleaving cannot change the
result: a left row is emitted once the operator watermark passes its time, and a version
at or before that time arriving later would be late on its own input. Each left row then
joins the latest version at or before its time (the later arrival among equal times),
which is one sort by key and time, no pairs:

=====  =====  ====  ==================================================
key    time   side  version in force (``last`` over the sorted rows)
=====  =====  ====  ==================================================
EUR    10:00  R     v0
EUR    10:00  L     v0   (a version at the left row's time counts)
EUR    10:15  R     v1
EUR    10:20  L     v1
=====  =====  ====  ==================================================

``has_late`` checks the precondition in one pass over each input (the inputs' jobs run at
once): every input partition reports its own late rows, its smallest time and its largest
watermark, and the driver carries the watermark across partitions. Only the time column
crosses to Python (and a punctuated watermark's column), in large Arrow batches.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ..stream import Stream, prepared
from .temporal import ACCUMULATE

__all__ = ["has_late", "versions"]

_SUMMARY = pa.schema([("_part", pa.int32()), ("_min", pa.int64()), ("_max", pa.int64()), ("_late", pa.bool_())])
_NONE = np.iinfo(np.int64).min           # no watermark yet
_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def has_late(*streams: Stream) -> bool:
    """Whether some row of one of ``streams`` arrives with ``time <= `` the watermark before
    it (one Spark job per stream, run at once)."""
    jobs = [_late_check(s) for s in streams if s.watermark.kind != "none"]
    if not jobs:
        return False
    spark = jobs[0].sparkSession
    size = spark.conf.get(_BATCH)
    spark.conf.set(_BATCH, "200000")          # larger Arrow batches: fewer Python round trips
    try:
        with ThreadPoolExecutor(len(jobs)) as pool:
            summaries = list(pool.map(lambda job: job.collect(), jobs))
    finally:
        spark.conf.set(_BATCH, size)
    return any(_carries_late(rows) for rows in summaries)


def _late_check(s: Stream) -> DataFrame:
    """One summary row per input partition of ``s``: its smallest time, the watermark after
    it, and whether a row in it is late (against the watermark within the partition)."""
    # a bounded watermark is the time minus a constant: only the time crosses to Python
    shift = {"bounded": s.watermark.delay.millis + 1, "sql": s.watermark.delay.millis}.get(s.watermark.kind)
    columns = ["_ts"] if shift is not None else ["_ts", F.col("_g").cast("long")]

    def per_task(batches):
        part, low, high, late = TaskContext.get().partitionId(), None, _NONE, False
        for b in batches:
            if not b.num_rows or late:        # once late, the answer is known
                continue
            ts = b.column(0)
            if ts.null_count:
                late = True                   # Flink rejects it; the replay says which row
                continue
            ts = ts.to_numpy()
            g = ts - shift if shift is not None else pc.fill_null(b.column(1), _NONE).to_numpy()
            before = np.maximum(np.maximum.accumulate(g), high)     # the watermark after each row
            late = bool(ts[0] <= high) or bool((ts[1:] <= before[:-1]).any())
            low = int(ts.min()) if low is None else min(low, int(ts.min()))
            high = int(before[-1])
        yield pa.RecordBatch.from_pydict({"_part": [part], "_min": [low], "_max": [
            None if high == _NONE else high], "_late": [late]}, schema=_SUMMARY)

    return prepared(s).select(*columns).mapInArrow(per_task, "_part int, _min long, _max long, _late boolean")


def _carries_late(summaries) -> bool:
    """The partitions' summaries in order, the watermark carried from one to the next."""
    carry = None
    for r in sorted(summaries, key=lambda r: r._part):
        if r._late or (carry is not None and r._min is not None and r._min <= carry):
            return True
        if r._max is not None:
            carry = r._max if carry is None else max(carry, r._max)
    return False


def versions(left: DataFrame, right: DataFrame, keys: list) -> DataFrame:
    """``left`` (columns ``_k0..``, ``_ts`` and its values) with ``_v``: the arrival ``_seq`` of
    the version each row meets in ``right`` (``_k0..``, ``_ts``, ``_seq``, ``_op``), NULL for
    none or a deletion (``-U``/``-D``). One window over both inputs carries one long per row:
    ``2 * _seq + 1`` for a version, ``2 * _seq`` for a deletion, NULL for a left row (which
    sorts after the versions of its time)."""
    k = [f"_k{i}" for i in range(len(keys))]
    values = [f for f in left.schema.fields if f.name not in k and f.name != "_ts"]
    kind = F.when(F.col("_op").isin(*ACCUMULATE), 1).otherwise(0)
    both = (left.select(*k, "_ts", F.lit(None).cast("long").alias("_r"), *[f.name for f in values])
            .unionByName(right.select(*k, "_ts", (F.col("_seq") * 2 + kind).alias("_r"),
                                      *[F.lit(None).cast(f.dataType).alias(f.name) for f in values])))
    upto = (Window.partitionBy(*k).orderBy("_ts", F.col("_r").asc_nulls_last())
            .rowsBetween(Window.unboundedPreceding, 0))
    out = both.withColumn("_m", F.last("_r", ignorenulls=True).over(upto)).where(F.col("_r").isNull())
    return out.select(*k, "_ts", *[f.name for f in values],
                      F.when(F.col("_m").bitwiseAND(1) == 1, F.shiftright("_m", 1)).alias("_v"))
