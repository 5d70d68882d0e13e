"""The windows fast path (native Spark) equals the reference operator, row for row."""

import math
from datetime import datetime, timedelta
from unittest import mock

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row

import kit
from kit.errors import KitError
from kit.time import Duration, Time
from kit.windows import fast
from kit.windows.assigners import (MAX_TIME, MIN_TIME, EventTimeSessionWindows, SlidingEventTimeWindows,
                                   TumblingEventTimeWindows)
from kit.windows.functions import Aggregates, Avg, Contents, Count, Max, Min, Sum
from kit.windows.operator import Element, WindowSpec, replay
from kit.windows.triggers import CountTrigger, EventTimeTrigger


ms = Time.milliseconds   # sizes, gaps and bounds are Times: these tests' are in milliseconds
SPAN = 27720 * 100   # a multiple of every window size and slide drawn below


@st.composite
def scenarios(draw):
    """Window parameters, and 12 small streams one after the other in one input (each
    shifted by SPAN, so one Spark job checks them all)."""
    size = draw(st.integers(2, 12))
    if draw(st.booleans()):
        assigner = TumblingEventTimeWindows.of(ms(size), ms(draw(st.integers(-size + 1, size - 1))))
    else:
        slide = draw(st.integers(1, 12))
        assigner = SlidingEventTimeWindows.of(ms(size), ms(slide), ms(draw(st.integers(-slide + 1, slide - 1))))
    keys, times, values, doubles = [], [], [], []
    for case in range(12):
        n = draw(st.integers(1, 12))
        # event times wander forward with disorder, some far behind (late)
        t = draw(st.integers(-20, 20))
        for _ in range(n):
            t += draw(st.integers(0, 6))
            keys.append(f"{case}{draw(st.sampled_from('ab'))}")
            times.append(case * SPAN + t - draw(st.sampled_from([0, 0, 3, 9, 25])))
            values.append(draw(st.one_of(st.none(), st.integers(-5, 5))))
            doubles.append(draw(st.sampled_from([None, -2.0, 0.0, 1.5, 4.25, math.nan])))
    return dict(keys=keys, times=times, values=values, doubles=doubles, assigner=assigner,
                lateness=draw(st.sampled_from([0, 0, 3, 10])), delay=draw(st.sampled_from([0, 2, 5])))


# NaN in MIN and MAX as in Flink SQL: a NaN that comes first stays, a later one replaces nothing
AGG = Aggregates(Count(alias="n"), Sum("v", alias="total"), Max("v", alias="top"), Avg("v", alias="mean"),
                 Min("w", alias="low"), Max("w", alias="high"), Sum("w", alias="wsum"))
OUTPUTS = ("n", "total", "top", "mean", "low", "high", "wsum")


def _nan(value):
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def _reference(case):
    spec = WindowSpec(case["assigner"], EventTimeTrigger.create(), Contents("aggregate", AGG),
                      allowed_lateness=case["lateness"])
    arrivals, watermark = [], MIN_TIME
    for seq, (k, ts, v, w) in enumerate(zip(case["keys"], case["times"], case["values"], case["doubles"])):
        arrivals.append((k, Element(seq, ts, watermark, None, Row(k=k, ts=ts, v=v, w=w))))
        watermark = max(watermark, ts - case["delay"] - 1)
    rows = []
    for key, result in sorted(replay(arrivals, spec, lambda e: e.timestamp - case["delay"] - 1).items()):
        for f in result.firings:
            out = f.outputs[0]
            rows.append((key, f.window.start, f.window.end, *[_nan(out[o]) for o in OUTPUTS], f.kind,
                         f.pane, f.cause, f.timer, None if f.watermark in (MIN_TIME, MAX_TIME) else f.watermark,
                         f.fired_after, len(f.seqs)))
    return rows


def _fast(case, engine):
    rows = list(zip(case["keys"], case["times"], case["values"], case["doubles"]))
    df = kit.spark().createDataFrame(rows, "k string, ts long, v long, w double")
    stream = kit.stream(df, time="ts", watermark=Duration.of_millis(case["delay"]))
    result = (stream.key_by("k").window(case["assigner"]).allowed_lateness(case["lateness"]).aggregate(AGG))
    assert fast.eligible(result.spec)
    with _engine(engine):
        return [tuple(map(_nan, r)) for r in result.df.select(
            "key", "window_start", "window_end", *OUTPUTS, "firing", "pane", "cause", "timer",
            "watermark", "fired_after", "contents").collect()]


def _engine(engine):
    """Without allowed lateness: the JVM's one pass, writing its partials out every two
    (so a task flushes often) or with one window open per key (so a key's next window
    writes out its last), or Spark SQL's two passes."""
    if engine == "jvm":
        return mock.patch.object(fast, "_FLUSH", 2)
    if engine == "jvm-ring":
        return mock.patch.object(fast, "_RING", 1)
    return mock.patch.object(fast, "_scanned", return_value=None)


@pytest.mark.parametrize("engine", ["jvm", "jvm-ring", "sql"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_fast_path_equals_the_reference(spark, engine, case):
    expected, got = _reference(case), _fast(case, engine)
    assert [r[:6] + r[7:] for r in got] == [r[:6] + r[7:] for r in expected]   # all but the mean
    assert [r[6] for r in got] == pytest.approx([r[6] for r in expected], nan_ok=True)


def test_the_fast_path_is_taken_only_for_the_common_case(spark):
    pdf = pd.DataFrame({"k": ["a"], "ts": [1], "v": [1]})
    keyed = kit.stream(pdf, time="ts").key_by("k")
    assert fast.eligible(keyed.window(TumblingEventTimeWindows.of(ms(10))).aggregate(Count()).spec)
    assert not fast.eligible(keyed.window(TumblingEventTimeWindows.of(ms(10))).trigger(CountTrigger.of(2))
                             .aggregate(Count()).spec)
    assert not fast.eligible(keyed.window(EventTimeSessionWindows.with_gap(ms(10))).aggregate(Count()).spec)
    assert not fast.eligible(keyed.window(TumblingEventTimeWindows.of(ms(10))).reduce(lambda a, b: a).spec)
    with pytest.raises(KitError, match="Sum\\('price'\\): no such column"):
        keyed.window(TumblingEventTimeWindows.of(ms(10))).aggregate(Sum("price"))


@pytest.mark.parametrize("engine", ["jvm", "sql"])
@pytest.mark.parametrize("lookup", ["array", "join"])
def test_fast_path_equals_the_reference_on_timestamps_and_a_clock(spark, monkeypatch, lookup, engine):
    """Sliding windows over TIMESTAMP event time, without keys (``window_all``), with a
    processing-time clock: the fast path's rows (watermark, proctime, fired_after included)
    equal the replay's, with each window's firing arrival looked up in arrays or, for a
    grid of window maxima too long for them, joined. (The property test above covers keys
    and BIGINT times.)"""
    if lookup == "join":
        monkeypatch.setattr(fast, "_LOOKUP", 0)
    if engine == "sql":
        monkeypatch.setattr(fast, "_scanned", lambda *args: None)
    times = [5, 12, 3, 31, 30, 44, 8, 61, 59, 75, 20, 90]
    pdf = pd.DataFrame({"v": range(12), "ts": pd.to_datetime("2024-01-01") + pd.to_timedelta(times, unit="s")})
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(4),
                        proctime=kit.Clock("2024-01-01 12:00:00", Duration.of_seconds(1)))
    with pytest.warns(UserWarning, match="one group"):
        result = (stream.window_all(SlidingEventTimeWindows.of(Duration.of_seconds(20), Duration.of_seconds(15)))
                  .aggregate(Aggregates(Count(alias="n"), Sum("v", alias="total"))))
    assert fast.eligible(result.spec)
    fast_rows = result._firings("fast").collect()
    assert [tuple(r) for r in fast_rows] == [tuple(r) for r in result._firings("reference").collect()]
    clock = pd.Timestamp("2024-01-01 12:00:00")
    assert [(r.fired_after, r.proctime) for r in fast_rows] == [   # arrival i at 12:00:00 + i s
        (i, clock + pd.Timedelta(seconds=i)) for i in (3, 5, 7, 9, 11)] + [(None, None)] * 2


def test_a_null_event_time_fails_the_fast_path_naming_the_row(spark):
    df = spark.createDataFrame([("a", 1), ("a", 2), ("a", None)], "k string, ts long").coalesce(1)
    windows = kit.stream(df, time="ts").key_by("k").window(TumblingEventTimeWindows.of(ms(10))).aggregate(Count())
    assert fast.eligible(windows.spec)
    with pytest.raises(Exception, match="row 2 of input partition 0 has NULL event time in column 'ts'"):
        windows.df.collect()


@pytest.mark.parametrize("keys", [["n"], ["s", "n"], ["b"]])
def test_the_jvm_pass_keeps_keys_of_every_kind(spark, keys):
    """One key of an atomic type goes to the JVM as its own column (NULL included), several
    keys or a binary one as a struct: the rows equal Spark SQL's passes either way."""
    rows = [(i % 3 if i % 5 else None, "xy"[i % 2], bytes([i % 2]), (i * 7) % 50 - i // 9, i) for i in range(40)]
    df = spark.createDataFrame(rows, "n int, s string, b binary, ts long, v long").coalesce(2)
    result = (kit.stream(df, time="ts", watermark=Duration.of_millis(3)).key_by(*keys)
              .window(SlidingEventTimeWindows.of(ms(10), ms(5)))
              .aggregate(Aggregates(Count(alias="c"), Sum("v", alias="t"))))
    assert fast.eligible(result.spec)
    with _engine("jvm-ring"):
        jvm = result._firings("fast").collect()
    with _engine("sql"):
        sql = result._firings("fast").collect()
    assert len(jvm) > 10 and [tuple(r) for r in jvm] == [tuple(r) for r in sql]


def test_the_jvm_pass_reads_a_file_scans_batches_in_place(spark, tmp_path):
    """A Parquet source's columns go to the JVM pass as the scan's column batches (no row
    written first): the rows equal Spark SQL's passes, over two input partitions, and a
    NULL event time fails naming the row."""
    rows = [("u%d" % (i % 3), datetime(2024, 1, 1) + timedelta(seconds=(i * 7) % 50 - i // 9), i) for i in range(40)]
    path = str(tmp_path / "clicks")
    spark.createDataFrame(rows, "user string, cTime timestamp, v long").repartition(2).write.parquet(path)
    source = spark.read.parquet(path)
    assert source.rdd.getNumPartitions() == 2
    result = (kit.stream(source, time="cTime", watermark=Duration.of_seconds(3)).key_by("user")
              .window(SlidingEventTimeWindows.of(Duration.of_seconds(10), Duration.of_seconds(5)))
              .aggregate(Aggregates(Count(alias="c"), Sum("v", alias="t"))))
    with _engine("jvm"):
        jvm = result._firings("fast").collect()
    with _engine("sql"):
        sql = result._firings("fast").collect()
    assert len(jvm) > 10 and [tuple(r) for r in jvm] == [tuple(r) for r in sql]

    spark.createDataFrame([("a", 1), ("a", None)], "k string, ts long").coalesce(1).write.parquet(path + "_null")
    windows = (kit.stream(spark.read.parquet(path + "_null"), time="ts").key_by("k")
               .window(TumblingEventTimeWindows.of(ms(10))).aggregate(Count()))
    with pytest.raises(Exception, match="row 1 of input partition 0 has NULL event time in column 'ts'") as failure:
        windows.df.collect()
    assert "at flinkkit" not in str(failure.value)


@pytest.mark.parametrize("name", ["key", "window_start", "window_end", "watermark_ms"])
def test_a_key_named_like_a_firings_column_takes_the_fast_path(spark, name):
    """The fast path's working columns are not these names: a key column called ``key`` (the
    usual name) gets the fast path, with the reference replay's rows."""
    pdf = pd.DataFrame({name: ["a", "b", "a", "a", "b"], "ts": [1, 3, 12, 4, 25], "v": [1, 2, 3, 4, 5]})

    def result():
        return (kit.stream(pdf, time="ts", watermark=Duration.of_millis(2)).key_by(name)
                .window(TumblingEventTimeWindows.of(ms(10))).aggregate(Aggregates(Count(alias="n"), Sum("v"))))

    with mock.patch.object(fast, "firings", wraps=fast.firings) as taken:
        got = result().df.collect()
    assert taken.call_count == 1
    assert got == result()._firings(engine="reference").collect()
    assert [tuple(r)[:4] for r in got] == [("a", 0, 10, 1), ("a", 10, 20, 1), ("b", 0, 10, 1), ("b", 20, 30, 1)]


@pytest.mark.parametrize("name", ["_max", "_seq", "_after", "_at", "_ts", "_wm", "_own", "_g"])
@pytest.mark.parametrize("role", ["key", "value"])
def test_columns_named_like_working_columns_give_the_right_rows(spark, name, role):
    """The operators name their working columns with a ``_`` first (``_at``, ``_ts``...):
    an input column named like one (as key or as value) keeps its own values, and a window
    over it the rows it should have (before: wrong keys, or Spark's AMBIGUOUS_REFERENCE)."""
    columns = {"k": ["a", "b", "a", "a", "b"], "ts": [1, 3, 12, 4, 25], "v": [1, 2, 3, 4, 5]}
    columns[name] = columns.pop("k" if role == "key" else "v")
    key, value = (name, "v") if role == "key" else ("k", name)
    stream = kit.stream(pd.DataFrame(columns), time="ts", watermark=Duration.of_millis(2))
    result = stream.key_by(key).window(TumblingEventTimeWindows.of(ms(10))).aggregate(
        Aggregates(Count(alias="n"), Sum(value, alias="s")))
    assert [tuple(r)[:5] for r in result.df.collect()] == [
        ("a", 0, 10, 1, 1), ("a", 10, 20, 1, 3), ("b", 0, 10, 1, 2), ("b", 20, 30, 1, 5)]
    assert [tuple(r) for r in result.late.collect()] == [tuple(columns[c][3] for c in stream.source.columns) + (3, 9)]
    assert stream.df.columns == [*stream.source.columns, "seq", "watermark", "late"]
