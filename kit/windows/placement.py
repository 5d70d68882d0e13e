"""When did a timer fire? Placing a key's timer firings on the whole stream's arrivals.

A key is replayed alone, so it sees the watermark only at its own arrivals; the watermark
that fired its event-time timer at time ``t`` was emitted after another key's arrival:
the first arrival whose own watermark (``ts - delay - 1``, or its watermark column) reaches
``t`` -- the watermark only grows, so that is the first arrival where it passed ``t``.
The firing happened right after it, under the watermark that arrival left. A
processing-time timer fired when the clock reached ``t``: just before the first arrival
with ``proctime >= t``, under the watermark that arrival met.

    timer 9, delay 0:   seq  ts  own watermark      -> fired after seq 3, watermark 11
                        2    5   4
                        3    12  11

Each lookup ("the smallest ``seq`` whose value is >= t") runs without a global sort:
thresholds and arrivals are put in buckets of the thresholds' range (about one threshold
per bucket); the answer is the first arrival in the threshold's bucket at or above it,
else the first arrival of any later bucket (a suffix minimum over the few buckets).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

__all__ = ["place_timers", "first_at_least"]


def first_at_least(arrivals: DataFrame, thresholds: DataFrame) -> DataFrame:
    """For each ``(kind, t)`` of ``thresholds``, the arrival of that ``kind`` with the smallest
    ``seq`` whose ``v >= t``, as columns ``kind, t, hit`` (``hit`` a struct of the arrival's
    columns, NULL when none). One pass over ``arrivals``; everything else is per threshold."""
    stats = thresholds.groupBy("kind").agg(F.min("t").alias("_lo"), F.max("t").alias("_hi"),
                                           F.count("t").alias("_n"))
    width = F.greatest(F.lit(1), ((F.col("_hi") - F.col("_lo")) / F.col("_n")).cast("long") + 1)
    last = ((F.col("_hi") - F.col("_lo")) / width).cast("long") + 1

    def bucket(col):
        return F.least(F.floor((F.col(col) - F.col("_lo")) / width), last).cast("long")

    hit = F.struct(*[F.col(c) for c in arrivals.columns if c != "kind"])
    t = thresholds.join(F.broadcast(stats), "kind").withColumn("_b", bucket("t"))
    # one pass: every arrival at or above its kind's lowest threshold, with the thresholds of
    # its bucket; per (bucket, threshold): the first arrival at or above the threshold, and
    # the first arrival of the bucket
    a = (arrivals.join(F.broadcast(stats), "kind").filter(F.col("v") >= F.col("_lo"))
         .withColumn("_b", bucket("v")).withColumn("_hit", hit)
         .join(F.broadcast(t.select("kind", "_b", "t")), ["kind", "_b"], "left")
         .groupBy("kind", "_b", "t")
         .agg(F.min(F.when(F.col("v") >= F.col("t"), F.col("_hit"))).alias("_same"),
              F.min("_hit").alias("_first")))
    # every bucket's first arrival, then the first arrival of any later bucket
    buckets = (a.groupBy("kind", "_b").agg(F.min("_first").alias("_first"))
               .unionByName(t.select("kind", "_b").withColumn("_first", F.lit(None).cast(a.schema["_first"].dataType)))
               .groupBy("kind", "_b").agg(F.min("_first").alias("_first"))
               .withColumn("_after", F.min("_first").over(
                   Window.partitionBy("kind").orderBy(F.col("_b").desc())
                         .rowsBetween(Window.unboundedPreceding, -1))))
    same = a.filter(F.col("t").isNotNull()).select("kind", "t", "_same")
    return (t.select("kind", "t", "_b").join(same, ["kind", "t"], "left")
            .join(buckets.select("kind", "_b", "_after"), ["kind", "_b"], "left")
            .select("kind", "t", F.least(F.col("_same"), F.col("_after")).alias("hit")))


def place_timers(firings: DataFrame, stream) -> DataFrame:
    """Fill ``fired_after``, ``watermark`` and ``proctime`` of timer firings (columns in ms)."""
    s = stream
    wm = s.watermark
    ts = s.millis(s.time)
    if wm.kind == "bounded":
        own = ts - F.lit(wm.delay.millis + 1)
    elif wm.kind == "sql":
        own = ts - F.lit(wm.delay.millis)
    elif wm.kind == "column":
        own = s.millis(wm.column)
    else:
        own = F.lit(None).cast("long")
    has_clock = s.proctime is not None
    before = s.millis("watermark")
    arrivals = s.unordered().select(
        F.col("seq"),
        own.alias("own"),
        before.alias("before"),
        (F.unix_millis("proctime") if has_clock else F.lit(None).cast("long")).alias("pt"))

    kinds = ["event-time timer"] + (["processing-time timer"] if has_clock else [])
    thresholds = (firings.filter(F.col("cause").isin(kinds))
                  .select(F.col("cause").alias("kind"), F.col("timer").alias("t")).distinct())
    payload = [F.greatest("before", "own").alias("after"), F.col("before"), F.col("pt")]
    # each arrival once per kind of timer, in one scan of the stream
    per_kind = F.explode(F.array(*[F.struct(F.lit(k).alias("kind"), F.col("own" if k == kinds[0] else "pt").alias("v"))
                                   for k in kinds]))
    found = first_at_least(arrivals.select("seq", per_kind.alias("_k"), *payload)
                           .select("_k.kind", "seq", "_k.v", "after", "before", "pt"), thresholds)
    # an event-time timer fired right after the arrival that passed it, under the watermark
    # that arrival left; a processing-time timer just before it, under the one it met
    is_event = F.col("kind") == "event-time timer"
    found = found.select(
        F.col("kind").alias("_kind"), F.col("t").alias("_t"),
        F.when(is_event, F.col("hit.seq")).otherwise(F.col("hit.seq") - 1).alias("_seq"),
        F.when(is_event, F.col("hit.after")).otherwise(F.col("hit.before")).alias("_wm"),
        F.when(is_event, F.col("hit.pt")).otherwise(F.col("t")).alias("_pt"))
    timer = F.col("cause").isin(kinds)
    out = firings.join(found, (F.col("cause") == F.col("_kind")) & (F.col("timer") == F.col("_t")), "left")
    for column, value in (("fired_after", "_seq"), ("watermark", "_wm"), ("proctime", "_pt")):
        out = out.withColumn(column, F.when(timer, F.col(value)).otherwise(F.col(column)))
    return out.select(*firings.columns)
