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
    """For each ``t`` of ``thresholds``, the arrival with the smallest ``seq`` whose ``v >= t``,
    as columns ``t, hit`` (``hit`` a struct of ``arrivals``' columns, NULL when none)."""
    stats = thresholds.agg(F.min("t").alias("_lo"), F.max("t").alias("_hi"), F.count("t").alias("_n"))
    width = F.greatest(F.lit(1), ((F.col("_hi") - F.col("_lo")) / F.col("_n")).cast("long") + 1)
    last = ((F.col("_hi") - F.col("_lo")) / width).cast("long") + 1

    def bucket(col):
        return F.least(F.floor((F.col(col) - F.col("_lo")) / width), last).cast("long")

    hit = F.struct(*[F.col(c) for c in arrivals.columns])
    a = (arrivals.crossJoin(F.broadcast(stats)).filter(F.col("v") >= F.col("_lo"))
         .withColumn("_b", bucket("v")).withColumn("_hit", hit))
    t = thresholds.crossJoin(F.broadcast(stats)).withColumn("_b", bucket("t"))
    # the first arrival of every bucket (thresholds' buckets included, maybe empty), then
    # the first arrival of any bucket after each
    per_bucket = (a.groupBy("_b").agg(F.min("_hit").alias("_first"))
                  .unionByName(t.select("_b").distinct().withColumn("_first", F.lit(None).cast(a.schema["_hit"].dataType)))
                  .groupBy("_b").agg(F.min("_first").alias("_first")))
    later = per_bucket.withColumn(
        "_after", F.min("_first").over(Window.orderBy(F.col("_b").desc())
                                       .rowsBetween(Window.unboundedPreceding, -1)))
    same = (a.join(F.broadcast(t.select("t", "_b")), "_b").filter(F.col("v") >= F.col("t"))
            .groupBy("t").agg(F.min("_hit").alias("_same")))
    return (t.select("t", "_b").join(same, "t", "left").join(later.select("_b", "_after"), "_b", "left")
            .select("t", F.least(F.col("_same"), F.col("_after")).alias("hit")))


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
    has_clock = "proctime" in s.df.columns
    before = s.millis("watermark")
    arrivals = s.df.select(
        F.col("seq"),
        own.alias("own"),
        before.alias("before"),
        (F.unix_millis("proctime") if has_clock else F.lit(None).cast("long")).alias("pt"))

    out = firings
    event = firings.filter(F.col("cause") == "event-time timer").select(F.col("timer").alias("t")).distinct()
    ev = first_at_least(arrivals.select("seq", F.col("own").alias("v"),
                                        F.greatest("before", "own").alias("after"), "pt"), event)
    ev = ev.select(F.col("t").alias("_et"), F.col("hit.seq").alias("_e_seq"),
                   F.col("hit.after").alias("_e_wm"), F.col("hit.pt").alias("_e_pt"))
    out = out.join(ev, (F.col("cause") == "event-time timer") & (F.col("timer") == F.col("_et")), "left")
    if has_clock:
        proc = firings.filter(F.col("cause") == "processing-time timer").select(F.col("timer").alias("t")).distinct()
        pr = first_at_least(arrivals.select("seq", F.col("pt").alias("v"), "before"), proc)
        pr = pr.select(F.col("t").alias("_pt"), (F.col("hit.seq") - 1).alias("_p_seq"),
                       F.col("hit.before").alias("_p_wm"))
        out = out.join(pr, (F.col("cause") == "processing-time timer") & (F.col("timer") == F.col("_pt")),
                       "left")
    else:
        out = out.withColumn("_p_seq", F.lit(None).cast("long")).withColumn("_p_wm", F.lit(None).cast("long"))
    cause = F.col("cause")
    out = out.withColumn("fired_after", F.when(cause == "event-time timer", F.col("_e_seq"))
                         .when(cause == "processing-time timer", F.col("_p_seq")).otherwise(F.col("fired_after")))
    out = out.withColumn("watermark", F.when(cause == "event-time timer", F.col("_e_wm"))
                         .when(cause == "processing-time timer", F.col("_p_wm")).otherwise(F.col("watermark")))
    out = out.withColumn("proctime", F.when(cause == "event-time timer", F.col("_e_pt"))
                         .when(cause == "processing-time timer", F.col("timer")).otherwise(F.col("proctime")))
    return out.select(*firings.columns)
