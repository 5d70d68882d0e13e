"""What a chart costs in Spark jobs (each ~0.05-0.2 s even on ten rows): every kit.viz chart
brings its data to the driver in one collect, every layer drawn from it; the jobs counted
here are those of a widget redraw on small data (the operator's own work included)."""

import itertools
import sys
from datetime import datetime

import pandas as pd
import pytest
from pyspark.sql.classic.dataframe import DataFrame

import kit
from kit import Clock, Duration, Time, WatermarkStrategy
from kit.joins.versioned import temporal_join
from kit.windows import CountTrigger, SlidingEventTimeWindows, TumblingEventTimeWindows

FRESH = itertools.count(1)   # a watermark delay (ms) no other test used: a stream not computed before


@pytest.fixture
def jobs(spark):
    """``jobs(fn)``: the Spark jobs ``fn()`` ran, the collects kit.viz made, and its result."""
    sc = spark.sparkContext

    def count(fn):
        group = "test-viz-jobs"
        collects = []
        originals = {name: getattr(DataFrame, name) for name in ("toPandas", "collect")}

        def counting(name):
            def call(self, *args, **kwargs):
                caller = sys._getframe(1).f_globals.get("__name__", "")
                if caller.startswith("kit.viz") or caller == "kit.sparksql":   # small_pandas: a chart's collect
                    collects.append(name)
                return originals[name](self, *args, **kwargs)
            return call

        sc.setJobGroup(group, "counted")
        try:
            for name in originals:
                setattr(DataFrame, name, counting(name))
            before = set(sc.statusTracker().getJobIdsForGroup(group))
            result = fn()
            return len(set(sc.statusTracker().getJobIdsForGroup(group)) - before), collects, result
        finally:
            for name, original in originals.items():
                setattr(DataFrame, name, original)
            sc.setLocalProperty("spark.jobGroup.id", None)
    return count


def clicks():
    """Notebook 01's clicks: twelve, the last one late."""
    minutes = [0, 0, 2, 3, 55, 61, 90, 119, 120, 150, 165, 20]
    return pd.DataFrame({"user": ["Mary", "Bob", "Mary", "Liz", "Mary", "Bob", "Liz", "Liz", "Mary", "Bob", "Bob",
                                  "Mary"], "url": ["./home"] * 12,
                         "cTime": pd.Timestamp("2024-01-01 12:00") + pd.to_timedelta(minutes, unit="min")})


def test_stream_timeline(jobs):
    seed = kit.data.load("clicks")
    stream = kit.stream(seed, time="cTime", watermark=Duration.of_millis(next(FRESH)))
    n, collects, _ = jobs(lambda: kit.viz.stream_timeline(stream, key="user"))
    assert collects == ["toPandas"] and n <= 2, "a new stream: its arrival summary, then its rows"
    n, collects, _ = jobs(lambda: kit.viz.stream_timeline(stream, key="user", title="again"))
    assert collects == ["toPandas"] and n <= 1


@pytest.mark.parametrize("assigner, trigger, most", [
    (TumblingEventTimeWindows.of(Time.hours(1)), None, 2),
    (SlidingEventTimeWindows.of(Time.hours(1), Time.minutes(30)), None, 2),
    (TumblingEventTimeWindows.of(Time.hours(1)), CountTrigger.of(2), 2),
])
def test_window_timeline(jobs, assigner, trigger, most):
    stream = kit.stream(clicks(), time="cTime", watermark=Duration.of_millis(300_000 + next(FRESH)))
    windowed = stream.key_by("user").window(assigner)
    if trigger is not None:
        windowed = windowed.trigger(trigger)
    result = windowed.process(lambda user, ctx, xs: [(len(list(xs)),)], output_type="clicks bigint")
    n, collects, _ = jobs(lambda: kit.viz.window_timeline(result))
    # a new stream's arrival scan, then the elements, the firings and the watermark panel's
    # arrivals in one collect, in one job (sparksql.small_pandas)
    assert collects == ["toPandas"] and n <= most, n


def test_match_timeline(jobs):
    result = kit.sql("""SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
        MEASURES FIRST(rowtime) AS s ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A+ C) DEFINE A AS SUM(A.price) < 30)""",
                     Ticker=kit.stream(kit.data.load("ticker"), time="rowtime",
                                       watermark=Duration.of_millis(next(FRESH))))
    n, collects, _ = jobs(lambda: kit.viz.match_timeline(result.match_details, value="price", time="rowtime",
                                                         partition="symbol"))
    assert collects == ["toPandas"] and n == 1, "the details kept with the matches, the late rows beside them"


def test_version_timeline(jobs):
    """Notebook 03's state TTL slider: the same streams joined with a new TTL."""
    orders = kit.stream(kit.data.load("orders"), time="order_time",
                        watermark=WatermarkStrategy.for_sql_delay(Duration(next(FRESH))))
    rates = kit.stream(kit.data.load("currency_rates"), time="update_time", primary_key="currency",
                       watermark=WatermarkStrategy.for_sql_delay(Duration(0)))

    def join(ttl):
        return temporal_join(orders, rates, on="currency", how="left", engine="replay",
                             clock=Clock(datetime(2024, 1, 1, 10), Duration.of_minutes(10)),
                             state_ttl=Duration.of_minutes(ttl))

    n, collects, _ = jobs(lambda: kit.viz.version_timeline(join(10)))
    assert collects == ["collect"]
    n, collects, _ = jobs(lambda: kit.viz.version_timeline(join(20), watermark_panel=False))
    assert collects == ["collect"] and n == 1, "the replay, kept as the one collect reads it"
