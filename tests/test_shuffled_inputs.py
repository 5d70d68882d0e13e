"""Every operator gives the same rows whatever the input's partitioning: a stream with an
``order=`` column read from a shuffle (repartition, a groupBy's output, a union in another
order) equals the same rows read from a local table, and nothing is lost (each element
once, with its ``seq`` the rank of its arrival)."""

import gc
import random
import time
import warnings

import pytest
from pyspark.sql import functions as F

import kit
from kit import Duration, Time, WatermarkStrategy
from kit.joins import IntervalBounds, interval_join, temporal_join
from kit.stream import StreamWarning
from kit.windows import (Count, CountEvictor, CountTrigger, EventTimeSessionWindows, OutputTag, Sum,
                         SlidingEventTimeWindows, TumblingEventTimeWindows)

WM = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(30))


def _rows(seed: int, n: int = 2000) -> list:
    """``(arr, t, k, v)``: arrivals 0..n-1 in a random order of rows, times disordered by up
    to 400 ms (so some rows are late), 5 keys."""
    rnd = random.Random(seed)
    arrivals = list(range(n))
    rnd.shuffle(arrivals)
    return [(a, a * 10 - rnd.choice([0, 0, 0, 15, 40, 400]), f"k{rnd.randrange(5)}", rnd.randrange(100))
            for a in arrivals]


def _shuffled(df):
    """The same rows as ``df``, read out of shuffles."""
    half = df.filter("arr % 2 = 0")
    return {
        "repartition": df.repartition(7),
        "groupBy output": df.groupBy("arr", "t", "k", "v").count().drop("count"),
        "union": df.subtract(half).union(half.repartition(2)),
    }


def _windows(s):
    """Rows of every window path: fast (with and without lateness), sessions with a count
    trigger and an evictor (general, JVM), late side output and every element's fate."""
    keyed = s.key_by("k")
    tumbling = keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(100))).aggregate(Count())
    late = OutputTag("late")
    sliding = (keyed.window(SlidingEventTimeWindows.of(Time.milliseconds(200), Time.milliseconds(100)))
               .allowed_lateness(Time.milliseconds(50)).side_output_late_data(late).aggregate(Sum("v")))
    session = (keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(25))).trigger(CountTrigger.of(3))
               .evictor(CountEvictor.of(2)).aggregate(Sum("v")))
    return {"tumbling": tumbling.df.collect(), "sliding": sliding.df.collect(),
            "late": sliding.get_side_output(late).collect(), "session": session.df.collect(),
            "elements": session.elements().collect()}


def test_windows_give_the_same_rows_whatever_the_partitioning(spark):
    rows = _rows(1)
    base = spark.createDataFrame(rows, "arr long, t long, k string, v long")
    expected = _windows(kit.stream(base, time="t", watermark=WM, order="arr"))
    n = len(rows)
    assert [(e.seq, e.arr) for e in expected["elements"]] == [(i, i) for i in range(n)]   # conservation
    assert 0 < len(expected["late"]) < n
    for name, df in _shuffled(base).items():
        assert _windows(kit.stream(df, time="t", watermark=WM, order="arr")) == expected, name


def test_ties_in_order_go_by_the_rows_values_when_the_input_is_shuffled(spark):
    rows = [(a // 3, a * 10, f"k{a % 4}", a) for a in range(60)]   # three rows per arrival number
    base = spark.createDataFrame(rows, "arr long, t long, k string, v long")
    elements = lambda df: [(e.seq, e.v) for e in kit.stream(df, time="t", order="arr").key_by("k").window(
        TumblingEventTimeWindows.of(Time.milliseconds(100))).aggregate(Count()).elements().collect()]
    first = elements(base.repartition(5))
    assert first == elements(base.repartition(3)) == elements(base.groupBy("arr", "t", "k", "v").count())
    assert sorted(first) == [(i, v) for i, v in enumerate(sorted(range(60)))]


def test_joins_give_the_same_rows_whatever_the_partitioning(spark):
    rnd = random.Random(7)
    orders = spark.createDataFrame([(i, i * 10 + rnd.choice([0, 5, 30]), f"c{rnd.randrange(3)}", f"o{i}")
                                    for i in range(300)], "arr long, t long, k string, id string")
    rates = spark.createDataFrame([(i, i * 25, f"c{i % 3}", float(i)) for i in range(100)],
                                  "arr long, t long, k string, rate double")

    def joined(o, r):
        left = kit.stream(o, time="t", watermark=WM, order="arr")
        versions = kit.stream(r, time="t", watermark=WM, order="arr", primary_key="k")
        temporal = temporal_join(left, versions, on="k", how="left")
        interval = interval_join(left, kit.stream(r, time="t", watermark=WM, order="arr"), "k",
                                 IntervalBounds(Duration.of_millis(-20), Duration.of_millis(20)), "full")
        return temporal.df.collect(), interval.df.collect()

    expected = joined(orders, rates)
    assert len(expected[0]) == 300                         # a left join keeps every order
    assert {r.id for r in expected[0]} == {f"o{i}" for i in range(300)}
    assert expected[1]
    assert joined(orders.repartition(4), rates.repartition(3, "k")) == expected
    assert joined(orders.groupBy("arr", "t", "k", "id").count().drop("count"), rates.repartition(5)) == expected


DYNAMIC = {   # continuous queries (kit.changelog): each changelog, row kinds and arrivals included
    "cascade": "SELECT cnt, COUNT(*) AS freq FROM (SELECT k, COUNT(*) AS cnt FROM s GROUP BY k) GROUP BY cnt",
    "sum_max": "SELECT k, SUM(v) AS sv, MAX(v) AS mv FROM s GROUP BY k",
    "top2": "SELECT * FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM s) WHERE rn <= 2",
    "first_on_event_time": "SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t) AS rn FROM s) "
                           "WHERE rn = 1",
}


def test_continuous_queries_give_the_same_changelog_whatever_the_partitioning(spark):
    base = spark.createDataFrame(_rows(2, 300), "arr long, t long, k string, v long")

    def changelogs(df):
        s = kit.stream(df, time="t", watermark=WM, order="arr")
        return {name: kit.sql(q, s=s).changelog().drop("watermark").collect() for name, q in DYNAMIC.items()}

    expected = changelogs(base)
    assert all(expected.values()) and {r.op for r in expected["cascade"]} == {"+I", "-U", "+U", "-D"}
    assert changelogs(_shuffled(base)["groupBy output"]) == expected


def test_an_input_in_order_already_is_not_sorted_again(spark):
    df = spark.range(0, 1000, numPartitions=4).selectExpr("id AS arr", "id * 10 AS t")
    s = kit.stream(df, time="t", order="arr")
    assert s.source is df                                   # one pass checked it: no sort, no copy
    assert kit.stream(df.orderBy(F.desc("arr")).coalesce(4), time="t", order="arr").source is not df


def test_a_shuffled_input_without_order_is_read_once_and_said_so(spark):
    df = spark.range(400).selectExpr("id AS t", "concat('k', id % 3) AS k").repartition(5)
    with pytest.warns(StreamWarning, match="order=<column"):
        s = kit.stream(df, time="t")
    result = s.key_by("k").window(TumblingEventTimeWindows.of(Time.milliseconds(50))).aggregate(Count())
    seqs = [e.seq for e in result.elements().collect()]
    assert sorted(seqs) == list(range(400))                 # each arrival once
    assert result.df.collect() == result.df.collect()       # the order was fixed once
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kit.stream(spark.range(10).selectExpr("id AS t"), time="t")   # a reproducible input: no warning


def test_the_kept_arrival_order_goes_with_the_last_dataframe_that_reads_it(spark):
    def kept():   # RDDInfo, not the RDDs: a map of them held by Py4J would keep them
        return len(spark.sparkContext._jsc.sc().getRDDStorageInfo())

    df = spark.range(300).selectExpr("id AS arr", "id AS t").repartition(3)
    s = kit.stream(df, time="t", order="arr")
    rows = s.df
    assert rows.count() == 300
    before = kept()
    assert before >= 1
    del s, rows
    gc.collect()
    deadline = time.time() + 30
    while kept() >= before and time.time() < deadline:   # Spark's cleaner, after the JVM's GC
        spark._jvm.System.gc()
        time.sleep(0.5)
    assert kept() < before


VSHAPE = """SELECT * FROM Ticker MATCH_RECOGNIZE (
    PARTITION BY symbol ORDER BY rowtime
    MEASURES FIRST(A.rowtime) AS start_t, LAST(C.rowtime) AS end_t, COUNT(B.price) AS falls
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B+ C)
    DEFINE B AS B.price < A.price, C AS C.price > A.price) MR"""


def test_match_recognize_gives_the_same_rows_whatever_the_partitioning(spark):
    walk = kit.data.ticker_walk(1500, symbols=5, seed=3)
    expected = kit.sql(VSHAPE, Ticker=walk).collect()
    assert len(expected) > 20
    for shuffled in (walk.repartition(7), walk.groupBy(*walk.columns).count().drop("count")):
        assert kit.sql(VSHAPE, Ticker=shuffled).collect() == expected
        stream = kit.stream(shuffled.withColumn("arr", F.unix_millis("rowtime")), time="rowtime", order="arr")
        assert kit.sql(VSHAPE, Ticker=stream).drop("arr").collect() == expected
