"""Bad stream inputs, drawn at random from a seed: every one fails with the kit's error,
naming what is wrong, never with a Java or a Python-worker traceback."""

import random
from datetime import datetime

import pytest

import kit
from kit import Duration, Time, WatermarkStrategy
from kit.errors import KitError
from kit.windows import (Count, CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows, Sum,
                         TumblingEventTimeWindows)

FOREIGN = ("java.", "at org.apache", "py4j", "Traceback", "PythonException")


def _frame(spark, rnd):
    """A small clicks-like input with a BIGINT time ``t``, a TIMESTAMP ``ts``, and columns a
    stream cannot take as its time (``name`` STRING, ``v`` DOUBLE, ``d`` DATE)."""
    rows = [(f"u{rnd.randrange(3)}", i * 1000 - rnd.choice([0, 0, 3000]), datetime(2024, 1, 1, 12, 0, i % 60),
             float(i), datetime(2024, 1, 1).date()) for i in range(rnd.randrange(3, 12))]
    return spark.createDataFrame(rows, "name string, t long, ts timestamp, v double, d date")


def _bad_stream(spark, rnd):
    """``(build, the words the error must have)``: a call of kit.stream with one thing wrong."""
    df = _frame(spark, rnd)
    cases = [
        (lambda: kit.stream(df, time="nope"), "'nope'"),
        (lambda: kit.stream(df, time=rnd.choice(["name", "v", "d"])), "must be TIMESTAMP or BIGINT"),
        (lambda: kit.stream(df, time="t", watermark=rnd.choice([5, "5 s", 5.0])), "watermark must be"),
        (lambda: kit.stream(df, time="t", order=rnd.choice(["missing", "T1"])), "order column"),
        (lambda: kit.stream(df, time="t", proctime=rnd.choice(["name", "t"])), "proctime column"),
        (lambda: kit.stream(df, time="t", proctime=42), "proctime must be"),
        (lambda: kit.stream(df, time="t", primary_key="id"), "primary key column 'id'"),
        (lambda: kit.stream(rnd.choice([None, [1, 2], {"t": 1}]), time="t"), "takes a Spark or pandas DataFrame"),
        (lambda name=rnd.choice(["seq", "late", "watermark", "proctime"]):
         kit.stream(df.withColumnRenamed("t", name), time=name), "has the name of a column the stream adds"),
        (lambda: kit.stream(df.toDF("name", "t", "ts", "v", "NAME"), time="t"), "'NAME'"),
        (lambda: kit.stream(df.withColumnRenamed("v", "a.b"), time="t"), "'a.b'"),
        (lambda: kit.stream(df, time="t", watermark=WatermarkStrategy.from_column("zz")), "watermark column 'zz'"),
    ]
    return rnd.choice(cases)


def _bad_window(spark, rnd):
    """``(build, the words the error must have)``: a window over a good stream, one part wrong."""
    s = kit.stream(_frame(spark, rnd), time="t", watermark=Duration.of_seconds(1))
    size = rnd.choice([0, -5])
    cases = [
        (lambda: TumblingEventTimeWindows.of(Time.milliseconds(size)), "size"),
        (lambda: SlidingEventTimeWindows.of(Time.seconds(1), Time.seconds(rnd.choice([0, -1]))), "slide"),
        (lambda: TumblingEventTimeWindows.of(Time.seconds(1), Time.seconds(rnd.choice([1, 2, -3]))), "offset"),
        (lambda: EventTimeSessionWindows.with_gap(Time.milliseconds(size)), "gap"),
        (lambda: s.key_by("user"), "'user'"),
        (lambda: s.key_by("name").window(TumblingEventTimeWindows.of(Time.seconds(1))).allowed_lateness(
            Time.seconds(-1)), "lateness"),
        (lambda: s.key_by("name").window(TumblingEventTimeWindows.of(Time.seconds(1))).aggregate(Sum("nope")), "'nope'"),
        (lambda: s.key_by("name").window(TumblingEventTimeWindows.of(Time.seconds(1))).aggregate(Sum("name")), "numeric column"),
    ]
    return rnd.choice(cases)


@pytest.mark.parametrize("draw", [_bad_stream, _bad_window])
def test_bad_inputs_fail_with_the_kits_error_naming_them(spark, draw):
    rnd = random.Random(2026)
    for _ in range(40):
        build, words = draw(spark, rnd)
        with pytest.raises(KitError) as error:
            result = build()
            getattr(result, "df", result)   # a window's rows are planned when first read
        message = str(error.value)
        assert words.lower() in message.lower(), message
        assert not any(f in message for f in FOREIGN), message


@pytest.mark.parametrize("path", ["fast", "general"])
def test_a_null_event_time_fails_the_query_with_the_kits_error(spark, path):
    df = spark.createDataFrame([("a", 1000), ("a", None), ("b", 3000)], "k string, t long")
    windowed = kit.stream(df, time="t").key_by("k").window(TumblingEventTimeWindows.of(Time.seconds(1)))
    if path == "general":
        windowed = windowed.trigger(CountTrigger.of(2))
    with pytest.raises(KitError) as error:
        windowed.aggregate(Count()).df.collect()
    message = str(error.value)
    assert "NULL event time in column 't'" in message and "1" in message, message
    assert not any(f in message for f in FOREIGN), message
