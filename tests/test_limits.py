"""The ends of the time range: BIGINT times near Long.MIN_VALUE and Long.MAX_VALUE follow
Flink's long arithmetic on every engine; TIMESTAMP results beyond years 1..9999 fail
naming the firing and the range."""

import datetime as dt
from unittest import mock

import pytest

import kit
from kit.time import Duration, Time
from kit.windows import Count, SlidingEventTimeWindows, TumblingEventTimeWindows, compiled, fast

ms = Time.milliseconds   # sizes, gaps and bounds are Times: these tests' are in milliseconds
L = 2 ** 63 - 1
HOUR = 3_600_000


def _engine(engine):
    """The Python replay, the JVM replay, or the fast path's JVM pass or Spark SQL passes."""
    return {"python": mock.patch.object(compiled, "run", return_value=None),
            "jvm": mock.patch.object(fast, "eligible", return_value=False),
            "fast-jvm": mock.patch.object(fast, "_FLUSH", 2),
            "fast-sql": mock.patch.object(fast, "_scanned", return_value=None)}[engine]


def _windows(rows, schema, assigner, delay=Duration.of_millis(0), lateness=0, **stream):
    df = kit.spark().createDataFrame(rows, schema).coalesce(1)
    return (kit.stream(df, time="ts", watermark=delay, **stream).key_by("k").window(assigner)
            .allowed_lateness(lateness).aggregate(Count(alias="n")))


def _firings(result):
    return [(r.window_start, r.window_end, r.n, r.firing, r.timer, r.watermark, r.fired_after)
            for r in result.df.collect()]


@pytest.mark.parametrize("engine", ["python", "jvm", "fast-jvm", "fast-sql"])
def test_times_near_long_max_overflow_the_window_end_as_in_flink(spark, engine):
    """Flink's TimeWindow(start, start + size) overflows: the hour's window ends at a
    negative time, its timer fires at the first rise of the watermark, and the next
    element of that window finds it over: not late, in no window (Flink drops it)."""
    start = (L // HOUR) * HOUR
    end = start + HOUR - 2 ** 64
    result = _windows([("a", L - 10), ("a", L - 5)], "k string, ts long", TumblingEventTimeWindows.of(Time.hours(1)))
    with _engine(engine):
        assert _firings(result) == [(start, end, 1, "on-time", end - 1, L - 11, 0)]
        assert [r.fate for r in result.elements().collect()] == ["fired", "no window"]


@pytest.mark.parametrize("engine", ["python", "jvm", "fast-jvm", "fast-sql"])
def test_times_near_long_min_wrap_the_window_start_and_keep_the_watermark_at_long_min(spark, engine):
    """A bounded delay below Long.MIN_VALUE stays there (Flink's watermark generator starts
    its maximum at Long.MIN_VALUE + delay + 1); the window start overflows to a large time."""
    start = (-L // HOUR) * HOUR + 2 ** 64   # -L - floorMod(-L, HOUR), wrapped
    result = _windows([("a", -L), ("a", -L + 5), ("a", 0)], "k string, ts long",
                      TumblingEventTimeWindows.of(Time.hours(1)), delay=Duration.of_seconds(5))
    with _engine(engine):
        assert _firings(result) == [(start, start + HOUR - 2 ** 64, 2, "on-time", start + HOUR - 2 ** 64 - 1,
                                     -5001, 2), (0, HOUR, 1, "on-time", HOUR - 1, None, None)]
        assert result.stream.df.select("watermark").collect()[1][0] is None   # Long.MIN_VALUE


@pytest.mark.parametrize("engine", ["python", "jvm"])
def test_a_sliding_window_below_long_min_plus_size_has_no_window_as_in_flink(spark, engine):
    """Flink's loop ``start > timestamp - size`` meets an overflowed bound: no window."""
    result = _windows([("a", -L + 2)], "k string, ts long", SlidingEventTimeWindows.of(ms(10), ms(5)))
    with _engine(engine):
        assert _firings(result) == []
        assert [r.fate for r in result.elements().collect()] == ["no window"]


@pytest.mark.parametrize("engine", ["fast-jvm", "fast-sql"])
def test_the_fast_path_takes_times_within_its_limit_and_leaves_the_rest_to_the_replay(spark, engine):
    inside = _windows([("a", fast.TIME_LIMIT - 1)], "k string, ts long", TumblingEventTimeWindows.of(ms(10)))
    beyond = _windows([("a", fast.TIME_LIMIT + 1)], "k string, ts long", TumblingEventTimeWindows.of(ms(10)))
    late = _windows([("a", L - 10), ("a", L - 20)], "k string, ts long", TumblingEventTimeWindows.of(ms(10)),
                    lateness=20)
    with _engine(engine):
        assert fast.firings(inside) is not None
        assert fast.firings(beyond) is None and fast.firings(late) is None
        assert [r.fate for r in late.elements().collect()] == ["fired", "fired"]
        with mock.patch.object(compiled, "run", return_value=None):
            assert _firings(late) == _firings(_windows([("a", L - 10), ("a", L - 20)], "k string, ts long",
                                                       TumblingEventTimeWindows.of(ms(10)), lateness=20))


def test_the_fast_path_with_a_processing_time_column_names_a_time_beyond_its_limit(spark):
    """No first pass there to leave the window to the replay: the query fails, naming the row."""
    rows = [("a", L - 10, dt.datetime(2024, 1, 1))]
    result = _windows(rows, "k string, ts long, pt timestamp", TumblingEventTimeWindows.of(ms(10)), proctime="pt")
    with pytest.raises(Exception, match=r"row seq=0 has event time or watermark beyond ±2305843009213693952 ms"):
        result.df.collect()


@pytest.mark.parametrize("engine", ["python", "jvm", "fast-jvm", "fast-sql"])
def test_timestamp_results_beyond_year_9999_or_before_year_1_name_the_firing_and_the_range(spark, engine):
    """The hour from 9999-12-31 23:00 ends in year 10000, and with an offset of 30 minutes
    the window of 0001-01-02 00:10 starts on 0001-01-01: neither is a TIMESTAMP PySpark gives
    back (Spark's range ends in 9999; Python's datetime.fromtimestamp fails on 0001-01-01)."""
    schema = "k string, ts timestamp"
    late = _windows([("a", dt.datetime(9999, 12, 31, 23, 30))], schema, TumblingEventTimeWindows.of(Time.hours(1)))
    early = _windows([("a", dt.datetime(1, 1, 2, 0, 10))], schema,
                     TumblingEventTimeWindows.of(Time.hours(1), Time.minutes(30)))
    fine = _windows([("a", dt.datetime(1, 1, 2, 0, 10)), ("a", dt.datetime(9999, 12, 31, 22, 30))], schema,
                    TumblingEventTimeWindows.of(Time.hours(1)))
    with _engine(engine):
        with pytest.raises(Exception, match=r"window_end 253402300800000 ms of the firing of key a, window "
                                            r"\[253402297200000, 253402300800000\) ms is beyond the TIMESTAMP "
                                            r"range 0001-01-02 00:00:00 .. 9999-12-31 23:59:59.999 .*BIGINT"):
            late.df.collect()
        with pytest.raises(Exception, match=r"window_start -62135512200000 ms of the firing of key a"):
            early.df.collect()
        assert [(r.window_start, r.window_end) for r in fine.df.collect()] == [
            (dt.datetime(1, 1, 2), dt.datetime(1, 1, 2, 1)),
            (dt.datetime(9999, 12, 31, 22), dt.datetime(9999, 12, 31, 23))]
        assert [(e.ts, e.fate) for e in fine.elements().collect()] == [   # the replay's rows: no pandas range
            (dt.datetime(1, 1, 2, 0, 10), "fired"), (dt.datetime(9999, 12, 31, 22, 30), "fired")]


def test_a_bounded_watermark_below_long_min_is_none_on_the_driver_too():
    """``WatermarkStrategy.watermark`` (the joins' replay) agrees with ``stream._candidate``."""
    from kit.time import WatermarkStrategy
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
    assert bounded.watermark(-L - 1 + 5000) is None
    assert bounded.watermark(-L + 5000) == -L - 1
    assert WatermarkStrategy.for_sql_delay(Duration(0)).watermark(-L - 1) == -L - 1
