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

``has_late`` checks the precondition in one pass over each input: every input partition
reports its own late rows, its smallest time and its largest watermark, and the driver
carries the watermark across partitions.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ..stream import Stream, prepared
from .replay import LEFT, RIGHT

__all__ = ["has_late", "versions"]

_SUMMARY = pa.schema([("_part", pa.int32()), ("_min", pa.int64()), ("_max", pa.int64()), ("_late", pa.bool_())])


def has_late(s: Stream) -> bool:
    """Whether some row of ``s`` arrives with ``time <= `` the watermark before it."""
    if s.watermark.kind == "none":
        return False
    # a bounded watermark is the time minus a constant: only the time crosses to Python
    shift = {"bounded": s.watermark.delay.millis + 1, "sql": s.watermark.delay.millis}.get(s.watermark.kind)
    g = F.lit(None).cast("long") if shift is not None else F.col("_g").cast("long")
    df = prepared(s).select(F.spark_partition_id().alias("_part"), "_ts", g.alias("_g"))
    schema = "_part int, _min long, _max long, _late boolean"

    def per_task(batches):
        part, low, high, late = None, None, None, False
        for b in batches:
            if not b.num_rows:
                continue
            part = b.column(0)[0].as_py()
            ts, g = b.column(1), b.column(2)
            if ts.null_count:
                late = True                       # Flink rejects it; the replay says which row
            ts = ts.to_numpy(zero_copy_only=False).astype(np.float64)
            if shift is not None:
                g = ts - shift
            else:
                g = g.to_numpy(zero_copy_only=False).astype(np.float64)  # NULL -> NaN
                g = np.where(np.isnan(g), -np.inf, g)
            before = np.maximum.accumulate(np.concatenate([[-np.inf if high is None else high], g]))[:-1]
            late = late or bool((ts <= before).any())
            known = ts[~np.isnan(ts)]
            if known.size:
                low = float(known.min()) if low is None else min(low, float(known.min()))
            high = float(max(before[-1], g[-1]))
        if part is not None:
            yield pa.RecordBatch.from_pydict({"_part": [part], "_min": [None if low is None else int(low)], "_max": [
                None if high == -np.inf else int(high)], "_late": [late]}, schema=_SUMMARY)

    carry = None
    for r in sorted(df.mapInArrow(per_task, schema).collect(), key=lambda r: r._part):
        if r._late or (carry is not None and r._min is not None and r._min <= carry):
            return True
        if r._max is not None:
            carry = r._max if carry is None else max(carry, r._max)
    return False


def versions(left: DataFrame, right: DataFrame, keys: list) -> DataFrame:
    """``left`` (columns ``_k0..``, ``_ts``, ``_vl``) with ``_v``: the arrival ``_seq`` of the
    version each row meets in ``right`` (``_k0..``, ``_ts``, ``_seq``, ``_op``), NULL for
    none or a deletion (``-U``/``-D``)."""
    k = [f"_k{i}" for i in range(len(keys))]
    both = (left.select(*k, "_ts", F.lit(LEFT).alias("_side"), F.lit(None).cast("long").alias("_seq"),
                        F.lit(None).cast("string").alias("_op"), "_vl")
            .unionByName(right.select(*k, "_ts", F.lit(RIGHT).alias("_side"), "_seq", "_op",
                                      F.lit(None).cast(left.schema["_vl"].dataType).alias("_vl"))))
    upto = (Window.partitionBy(*k).orderBy("_ts", F.col("_side").desc(), "_seq")
            .rowsBetween(Window.unboundedPreceding, 0))
    met = F.last(F.when(F.col("_side") == RIGHT, F.struct("_seq", "_op")), ignorenulls=True).over(upto)
    out = both.withColumn("_met", met).where(F.col("_side") == LEFT)
    known = F.lit(True)
    for c in k:
        known = known & F.col(c).isNotNull()
    return out.select(*k, "_ts", "_vl", F.when(known & F.col("_met._op").isin("+I", "+U"),
                                               F.col("_met._seq")).alias("_v"))
