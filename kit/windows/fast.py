"""The fast path: the common window query as native Spark operations, equal to the operator.

Taken when the windows are event-time tumbling or sliding, the trigger is the default
``EventTimeTrigger``, there is no evictor and the function is a built-in aggregate
(``Count``, ``Sum``, ``Min``, ``Max``, ``Avg``, ``Aggregates``); any allowed lateness.
Then Flink's operator reduces to arithmetic on each element and its watermark:

- an element goes to window ``w`` unless ``max_timestamp(w) + lateness <= watermark``;
- the window's on-time firing happens after the first arrival whose watermark reaches
  ``max_timestamp(w)`` (``placement.first_at_least``; none: the end of input), with the
  elements that arrived up to it;
- every element accepted after that is a late firing with everything accepted so far
  (a running aggregate by arrival), only possible with allowed lateness.

    window [0, 10), lateness 5:  a@2 (seq 0), a@12 (seq 1: watermark 11 passes 9),
                                 a@5 (seq 2)
    -> on-time, pane 0, after seq 1: count 1;  late, pane 1, after seq 2: count 2

Property tests (tests/test_window_fast.py) check it against the reference replay.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .assigners import MAX_TIME, MIN_TIME, SlidingEventTimeWindows, TumblingEventTimeWindows
from .functions import SqlAggregate
from .placement import first_at_least
from .triggers import EventTimeTrigger

__all__ = ["eligible", "firings"]


def eligible(spec) -> bool:
    """Whether ``spec`` can run as native Spark operations."""
    return (type(spec.assigner) in (TumblingEventTimeWindows, SlidingEventTimeWindows)
            and type(spec.trigger) is EventTimeTrigger and spec.evictor is None
            and spec.function is None and spec.contents.kind == "aggregate"
            and isinstance(spec.contents._agg, SqlAggregate))


def _own_watermark(stream):
    wm, ts = stream.watermark, stream.millis(stream.time)
    if wm.kind == "bounded":
        return ts - F.lit(wm.delay.millis + 1)
    if wm.kind == "sql":
        return ts - F.lit(wm.delay.millis)
    if wm.kind == "column":
        return stream.millis(wm.column)
    return F.lit(None).cast("long")


def firings(result) -> DataFrame:
    """The firings of ``result`` (a ``WindowResult``), times in ms, with a sort key ``_order``."""
    s, spec, keys = result.stream, result.spec, list(result.keys)
    a = spec.assigner
    size = a.size
    slide = getattr(a, "slide", size)
    lateness = spec.allowed_lateness
    aggs = spec.contents._agg.to_spark()   # [(alias, column)]
    inputs = sorted({p.column for p in spec.contents._agg.parts if p.column is not None})
    has_clock = "proctime" in s.df.columns
    pt = F.unix_millis("proctime") if has_clock else F.lit(None).cast("long")
    rows = s.df.select(*keys, *[c for c in inputs if c not in keys], "seq",
                       s.millis(s.time).alias("_ts"),
                       F.coalesce(s.millis("watermark"), F.lit(MIN_TIME)).alias("_wmb"),
                       pt.alias("_pt"), _own_watermark(s).alias("_own"))
    # the windows of each element: starts last_start, last_start - slide, ... > ts - size
    last_start = F.col("_ts") - F.pmod(F.col("_ts") - F.lit(a.offset), F.lit(slide))
    per_element = -(-size // slide)
    rows = (rows.withColumn("_k", F.explode(F.sequence(F.lit(0), F.lit(per_element - 1))))
                .withColumn("_start", last_start - F.col("_k") * F.lit(slide))
                .filter(F.col("_start") > F.col("_ts") - F.lit(size))
                .withColumn("_max", F.col("_start") + F.lit(size - 1)))
    cleanup = F.when(F.col("_max") > F.lit(MAX_TIME - lateness), F.lit(MAX_TIME)).otherwise(
        F.col("_max") + F.lit(lateness))
    accepted = rows.filter(cleanup > F.col("_wmb"))

    # when did the watermark pass each window's end?
    arrivals = s.df.select(F.lit("event-time timer").alias("kind"), "seq", _own_watermark(s).alias("v"),
                           F.greatest(F.coalesce(s.millis("watermark"), F.lit(MIN_TIME)),
                                      _own_watermark(s)).alias("after"), pt.alias("pt"))
    thresholds = accepted.select(F.lit("event-time timer").alias("kind"), F.col("_max").alias("t")).distinct()
    passed = first_at_least(arrivals, thresholds).select(
        F.col("t").alias("_max"), F.col("hit.seq").alias("_j"), F.col("hit.after").alias("_jwm"),
        F.col("hit.pt").alias("_jpt"))
    accepted = accepted.join(passed, "_max", "left").withColumn(
        "_on_time", F.col("_j").isNull() | (F.col("seq") <= F.col("_j")))

    window_cols = [*keys, "_start"]
    on_time = (accepted.filter("_on_time").groupBy(*window_cols)
               .agg(*[c.alias(n) for n, c in aggs], F.count(F.lit(1)).alias("contents"), F.first("_max").alias("_max"),
                    F.first("_j").alias("fired_after"), F.first("_jwm").alias("watermark"),
                    F.first("_jpt").alias("proctime"))
               .select(*window_cols, *[c.alias for c in spec.contents._agg.parts], "contents",
                       F.lit("on-time").alias("firing"), F.lit(0).cast("long").alias("pane"),
                       F.lit("event-time timer").alias("cause"), F.col("_max").alias("timer"),
                       "watermark", "proctime", "fired_after",
                       F.struct(F.coalesce("fired_after", F.lit(MAX_TIME)).alias("a"), F.lit(1).alias("phase"),
                                F.col("_max").alias("t"), (-F.col("_start")).alias("s")).alias("_order")))
    out = on_time
    if lateness > 0:
        by_arrival = Window.partitionBy(*window_cols).orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
        running = [c.over(by_arrival).alias(n) for n, c in aggs]
        late_rank = Window.partitionBy(*window_cols, "_on_time").orderBy("seq")
        late = (accepted
                .withColumn("_has_on_time", F.max(F.col("_on_time").cast("int")).over(Window.partitionBy(*window_cols)))
                .select(*window_cols, *running, F.count(F.lit(1)).over(by_arrival).alias("contents"),
                        "_on_time", "_has_on_time", "seq", "_wmb", "_pt",
                        F.row_number().over(late_rank).alias("_rank"))
                .filter(~F.col("_on_time"))
                .select(*window_cols, *[c.alias for c in spec.contents._agg.parts], "contents",
                        F.lit("late").alias("firing"),
                        (F.col("_rank") - 1 + F.col("_has_on_time")).cast("long").alias("pane"),
                        F.lit("element").alias("cause"), F.lit(None).cast("long").alias("timer"),
                        F.when(F.col("_wmb") == MIN_TIME, None).otherwise(F.col("_wmb")).alias("watermark"),
                        F.col("_pt").alias("proctime"), F.col("seq").alias("fired_after"),
                        F.struct(F.col("seq").alias("a"), F.lit(0).alias("phase"), F.lit(None).cast("long").alias("t"),
                                 (-F.col("_start")).alias("s")).alias("_order")))
        out = out.unionByName(late)
    key = ([F.col(keys[0]).alias("key")] if len(keys) == 1
           else [F.struct(*keys).alias("key")] if keys else [])
    return out.select(*key, F.col("_start").alias("window_start"), (F.col("_start") + F.lit(size)).alias("window_end"),
                      *[c.alias for c in spec.contents._agg.parts], "firing", "pane", "cause", "timer",
                      "watermark", "proctime", "fired_after", "contents", "_order")
