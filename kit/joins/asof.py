"""The fast path of the event-time temporal join: a vectorized as-of join on Spark.

When neither input has a row behind its own watermark, the interleaving cannot change the
result: a left row is emitted once the operator watermark passes its time, and a version
at or before that time arriving later would be late on its own input. Each left row then
joins the latest version at or before its time (the later arrival among equal times).
``versions`` finds it without sorting or moving the left rows: each version is a span to
the next one of its key, cut into time buckets, and a left row meets the span holding its
time by an equi-join on key and bucket (buckets of 10 minutes here; a left row past the
last bucket looks in the last one):

=====  ========================  ===========  ================================================
key    version: span             buckets      left rows that meet it
=====  ========================  ===========  ================================================
EUR    v0: [10:00, 10:15)        10:00 10:10  10:00 (a version at its time counts), 10:12
EUR    v1: [10:15, end of time)  10:10        10:20 (bucket 10:20 is past the last: 10:10)
=====  ========================  ===========  ================================================

``has_late`` checks the precondition in one pass over each input (the inputs' jobs run at
once): every input partition reports its own late rows, its smallest time and its largest
watermark, and the driver carries the watermark across partitions. For a bounded
watermark the JVM scans the time column (``kit.jvm.late_scan``); otherwise, or in a session
without the kit's Java classes, only the time column crosses to Python (and a punctuated
watermark's column), in large Arrow batches.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .. import jvm
from ..arrow import map_in_arrow
from ..stream import Stream, prepared
from ..replay.interleave import MAX_TIME
from .temporal import ACCUMULATE

__all__ = ["Shape", "has_late", "spans_shape", "versions"]

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
    # a bounded watermark is the time minus a constant: the JVM scans the time alone, or
    # only the time crosses to Python
    shift = {"bounded": s.watermark.delay.millis + 1, "sql": s.watermark.delay.millis}.get(s.watermark.kind)
    if shift is not None and jvm.available(s.source.sparkSession, "LateScan"):
        return jvm.late_scan(prepared(s).select("_ts"), shift)
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

    return map_in_arrow(prepared(s).select(*columns), per_task, "_part int, _min long, _max long, _late boolean")


def _carries_late(summaries) -> bool:
    """The partitions' summaries in order, the watermark carried from one to the next."""
    carry = None
    for r in sorted(summaries, key=lambda r: r._part):
        if r._late or (carry is not None and r._min is not None and r._min <= carry):
            return True
        if r._max is not None:
            carry = r._max if carry is None else max(carry, r._max)
    return False


def versions(left: DataFrame, right: DataFrame, keys: list, shape: "Shape | None" = None) -> DataFrame:
    """``left`` (``_ts`` and its columns, among them ``keys``) with ``_v``: the arrival ``_seq``
    of the version each row meets in ``right`` (``_k0..`` matching ``keys``, ``_ts``, ``_seq``,
    ``_op``), NULL for none or a deletion (``-U``/``-D``).

    Each version is valid from its time to the next one of its key (``_spans``); a left row
    meets the span holding its time through an equi-join on the key and a time bucket, so
    the left rows are neither sorted nor, when the spans are at most ``BROADCAST_ROWS``,
    moved. The buckets have one width for all keys unless that crowds a bucket, else each
    key its own (then a left row first looks up its key's width and last version). Versions
    bunched so that a bucket holds more than ``CROWDED`` spans would make that join
    quadratic: then one window over both inputs (``_window``) instead. ``shape``:
    ``spans_shape(right, len(keys))`` when already known."""
    k = [f"_k{i}" for i in range(len(keys))]
    shape = shape or spans_shape(right, len(keys))
    if shape.crowd > CROWDED:
        return _window(left, right, keys)
    hint = F.broadcast if shape.total <= BROADCAST_ROWS else (lambda df: df)
    own = [f"_o{i}" for i in range(len(keys))]
    same = [F.col(c).eqNullSafe(F.col(o)) for c, o in zip(keys, own)]
    spans, last = _spans(right, k, shape.width, shape.top)
    if last is None:   # one width: the bucket is arithmetic, and the last version a span to the end
        rows = left.withColumn("_b", F.least(_bucket(F.col("_ts"), shape.width), F.lit(shape.top)))
    else:
        rows = (left.join(hint(last.toDF(*own, "_width", "_lts", "_lseq")), same, "left").drop(*own)
                .withColumn("_b", _bucket(F.col("_ts"), F.col("_width"))))
    met = rows.join(hint(spans.toDF(*own, "_sts", "_to", "_seq", "_sb")), same + [
        F.col("_b") == F.col("_sb"), F.col("_sts") <= F.col("_ts"), F.col("_ts") < F.col("_to")], "left")
    found = F.col("_seq") if last is None else \
        F.coalesce("_seq", F.when(F.col("_ts") >= F.col("_lts"), F.col("_lseq")))
    return met.select(*left.columns, found.alias("_v"))


BROADCAST_ROWS = 1_000_000
CROWDED = 64


@dataclass(frozen=True)
class Shape:
    """How ``versions`` cuts the spans: one bucket ``width`` for every key, up to bucket
    ``top`` (None: each key its own width), the most spans in one bucket and the pieces in all."""
    width: int | None
    top: int | None
    crowd: int
    total: int


def spans_shape(right: DataFrame, keys: int, one_width: bool = True) -> Shape:
    """The ``Shape`` of ``right``'s versions (small jobs): one width -- the mean distance
    between versions of a key over the whole time range, which cuts the spans into fewer
    than 3 pieces per version in all -- when it crowds no bucket, else each key's own width."""
    k = [f"_k{i}" for i in range(keys)]
    low, high, n, distinct = right.agg(F.min("_ts"), F.max("_ts"), F.count(F.lit(1)),
                                       F.count_distinct(F.struct(*k))).first()
    if low is None:   # no versions, or none with a time (the replay names the row)
        return Shape(None, None, 0, 0)
    width = max(1, -(-(high - low + 1) * distinct // n))
    top = high // width
    one = _shape(_spans(right, k, width, top)[0], k, width, top)
    if one_width and one.crowd <= CROWDED:
        return one
    return _shape(_spans(right, k)[0], k, None, None)


def _shape(spans: DataFrame, k: list, width, top) -> Shape:
    crowd, total = spans.groupBy(*k, "_b").count().agg(F.max("count"), F.sum("count")).first()
    return Shape(width, top, crowd or 0, total or 0)


def _bucket(t: Column, width) -> Column:
    return F.floor(t / width)


def _spans(right: DataFrame, k: list, width: int | None = None, top: int | None = None):
    """The versions of ``right`` (deletions end a span but open none) as spans: ``_k0..``,
    ``_ts``, ``_to`` (the next row's time), ``_seq`` and bucket ``_b``, once per bucket the
    span overlaps; and ``last``. Among rows of one time the later arrival wins.

    With one ``width``, a key's last version is a span to ``MAX_TIME``, cut at bucket
    ``top`` (left rows past it look there), and ``last`` is None. Without, each key's width
    is its time range over its number of rows (about one span per bucket), and ``last``
    holds per key its ``_width`` and last row, valid from ``_lts`` on (``_lseq``, NULL for
    a deletion)."""
    by_key = Window.partitionBy(*k)
    on = F.col("_op").isin(*ACCUMULATE)
    rows = right.select(*k, "_ts", "_seq", on.alias("_on"),
                        F.lead("_ts").over(by_key.orderBy("_ts", "_seq")).alias("_to"))
    if width is not None:
        spans = rows.where(F.col("_on") & (F.col("_to").isNull() | (F.col("_to") > F.col("_ts")))).select(
            *k, "_ts", F.coalesce("_to", F.lit(MAX_TIME)).alias("_to"), "_seq", F.explode(F.sequence(
                _bucket(F.col("_ts"), F.lit(width)),
                F.when(F.col("_to").isNull(), F.lit(top)).otherwise(_bucket(F.col("_to") - 1, F.lit(width))))).alias("_b"))
        return spans, None
    rows = rows.withColumn("_width", F.ceil((F.max("_ts").over(by_key) - F.min("_ts").over(by_key) + 1)
                                            / F.count("*").over(by_key)))
    last = rows.where(F.col("_to").isNull()).select(*k, "_width", "_ts", F.when(F.col("_on"), F.col("_seq")))
    spans = rows.where(F.col("_on") & (F.col("_to") > F.col("_ts"))).select(
        *k, "_ts", "_to", "_seq", F.explode(F.sequence(_bucket(F.col("_ts"), F.col("_width")),
                                                       _bucket(F.col("_to") - 1, F.col("_width")))).alias("_b"))
    return spans, last


def _window(left: DataFrame, right: DataFrame, keys: list) -> DataFrame:
    """``versions`` by one window over both inputs, which carries one long per row:
    ``2 * _seq + 1`` for a version, ``2 * _seq`` for a deletion, NULL for a left row (which
    sorts after the versions of its time)."""
    kind = F.when(F.col("_op").isin(*ACCUMULATE), 1).otherwise(0)
    both = left.withColumn("_r", F.lit(None).cast("long")).unionByName(
        right.select(*[F.col(f"_k{i}").alias(c) for i, c in enumerate(keys)], "_ts",
                     (F.col("_seq") * 2 + kind).alias("_r")), allowMissingColumns=True)
    upto = (Window.partitionBy(*keys).orderBy("_ts", F.col("_r").asc_nulls_last())
            .rowsBetween(Window.unboundedPreceding, 0))
    out = both.withColumn("_m", F.last("_r", ignorenulls=True).over(upto)).where(F.col("_r").isNull())
    return out.select(*left.columns, F.when(F.col("_m").bitwiseAND(1) == 1, F.shiftright("_m", 1)).alias("_v"))
