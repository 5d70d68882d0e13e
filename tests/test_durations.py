"""Times the user gives (window sizes, gaps, offsets, intervals, bounds, delays, TTLs): a
Time, a Duration or a timedelta, never a bare number, as in PyFlink; and the kit's errors
reach the user as one message, without the internal exception they were raised from."""

import math
import traceback
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

import kit
from kit import Clock, Duration, KitError, SqlError, Time, WatermarkStrategy
from kit.errors import KitRuntimeError
from kit.joins.interval import IntervalBounds
from kit.joins.lookup import LookupCache
from kit.joins.temporal import StateRetention
from kit.sql.temporal import join_options
from kit.windows import (ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, EventTimeSessionWindows,
                         ProcessingTimeSessionWindows, SlidingEventTimeWindows, Sum, TimeEvictor,
                         TumblingEventTimeWindows, TumblingProcessingTimeWindows)
from kit.windows.assigners import MIN_TIME
from kit.windows.datastream import WindowedStream
from kit.windows.functions import Contents
from kit.windows.operator import Element, WindowSpec, replay


def _message(make) -> str:
    with pytest.raises(KitError) as error:
        make()
    return str(error.value)


# -- a bare number is no time ----------------------------------------------------------------

def test_an_int_size_is_refused_with_what_to_pass():
    assert _message(lambda: TumblingEventTimeWindows.of(60)) == (
        "TumblingEventTimeWindows.of: size must be a Time, Duration or timedelta, "
        "e.g. Time.seconds(60) or Time.milliseconds(60); not the int 60")


@pytest.mark.parametrize("make, start", [
    (lambda: TumblingProcessingTimeWindows.of(5), "TumblingProcessingTimeWindows.of: size must be"),
    (lambda: TumblingEventTimeWindows.of(Time.hours(1), 5), "TumblingEventTimeWindows.of: offset must be"),
    (lambda: SlidingEventTimeWindows.of(5, Time.seconds(1)), "SlidingEventTimeWindows.of: size must be"),
    (lambda: SlidingEventTimeWindows.of(Time.seconds(10), 5), "SlidingEventTimeWindows.of: slide must be"),
    (lambda: EventTimeSessionWindows.with_gap(5), "EventTimeSessionWindows.with_gap: gap must be"),
    (lambda: ProcessingTimeSessionWindows.with_gap(5), "ProcessingTimeSessionWindows.with_gap: gap must be"),
    (lambda: ContinuousEventTimeTrigger.of(5), "ContinuousEventTimeTrigger.of: interval must be"),
    (lambda: ContinuousProcessingTimeTrigger.of(5), "ContinuousProcessingTimeTrigger.of: interval must be"),
    (lambda: TimeEvictor.of(5), "TimeEvictor.of: window_size must be"),
    (lambda: IntervalBounds(5, Time.seconds(6)), "IntervalBounds: lower must be"),
    (lambda: IntervalBounds(Time.seconds(-5), 0), "IntervalBounds: upper must be"),
])
def test_every_time_parameter_refuses_an_int_and_names_itself(make, start):
    message = _message(make)
    assert message.startswith(start) and "a Time, Duration or timedelta" in message, message
    assert message.endswith("or Time.milliseconds(5); not the int 5") or message.endswith("not the int 0"), message


@pytest.mark.parametrize("make, message", [
    (lambda: WatermarkStrategy.for_bounded_out_of_orderness(5),
     "WatermarkStrategy.for_bounded_out_of_orderness: max_out_of_orderness must be a Time, Duration or "
     "timedelta, e.g. Duration.of_seconds(5) or Duration.of_millis(5); not the int 5"),
    (lambda: WatermarkStrategy.for_sql_delay(0),
     "WatermarkStrategy.for_sql_delay: delay must be a Time, Duration or timedelta, e.g. Duration.of_seconds(0) "
     "or Duration.of_millis(0); not the int 0"),
    (lambda: Clock(datetime(2024, 1, 1), 1000),
     "Clock: step must be a Time, Duration or timedelta, e.g. Duration.of_seconds(1000) or "
     "Duration.of_millis(1000); not the int 1000"),
    (lambda: LookupCache(expire_after_write=10),
     "LookupCache: expire_after_write must be a Time, Duration or timedelta, e.g. Duration.of_seconds(10) or "
     "Duration.of_millis(10); not the int 10"),
    (lambda: StateRetention(3600),
     "StateRetention: ttl must be a Time, Duration or timedelta, e.g. Duration.of_seconds(3600) or "
     "Duration.of_millis(3600); not the int 3600"),
])
def test_the_duration_parameters_suggest_a_duration(make, message):
    assert _message(make) == message


@pytest.mark.parametrize("value, end", [
    (1.5, "e.g. Time.seconds(1.5); not the float 1.5"),
    ("5 minutes", "e.g. Time.seconds(5); not the str '5 minutes'"),
    (True, "e.g. Time.seconds(5); not the bool True"),
    (None, "e.g. Time.seconds(5); not None"),
    (np.int64(60), "e.g. Time.seconds(60) or Time.milliseconds(60); not the int64 60"),
])
def test_what_is_not_a_time_is_named_with_its_type(value, end):
    message = _message(lambda: TumblingEventTimeWindows.of(value))
    assert message.startswith("TumblingEventTimeWindows.of: size must be a Time, Duration or timedelta"), message
    assert message.endswith(end), message


def test_allowed_lateness_takes_an_int_of_milliseconds_as_pyflink_does():
    # PyFlink: WindowedStream.allowed_lateness(time_ms: int); Java: allowedLateness(Time / Duration)
    windowed = WindowedStream(None, ("k",), TumblingEventTimeWindows.of(Time.seconds(10)))
    assert windowed.allowed_lateness(5)._lateness == 5
    assert windowed.allowed_lateness(Time.seconds(5))._lateness == 5000
    assert windowed.allowed_lateness(timedelta(seconds=5))._lateness == 5000
    assert _message(lambda: windowed.allowed_lateness(1.5)) == (
        "allowed_lateness: lateness must be a Time, Duration, timedelta or an int of milliseconds, "
        "e.g. Time.seconds(1.5); not the float 1.5")
    assert "allowed_lateness must be >= 0 ms" in _message(lambda: windowed.allowed_lateness(-1))


def test_a_dynamic_gap_is_milliseconds_as_flinks_extractor_returns_a_long():
    def replayed(extract):
        assigner = EventTimeSessionWindows.with_dynamic_gap(extract)
        spec = WindowSpec(assigner, assigner.default_trigger(), Contents("list"))
        elements = [("a", Element(0, 10, MIN_TIME, None, "x")), ("a", Element(1, 14, MIN_TIME, None, "y"))]
        return [(f.window.start, f.window.end) for f in replay(elements, spec, lambda e: None)["a"].firings]

    assert replayed(lambda e: 5) == replayed(lambda e: Time.milliseconds(5)) == [(10, 19)]
    assert replayed(lambda e: timedelta(milliseconds=5)) == [(10, 19)]
    message = _message(lambda: replayed(lambda e: 1.5))
    assert message.startswith("EventTimeSessionWindows.with_dynamic_gap: the gap returned for 'x' must be an int "
                              "(milliseconds), a Duration or a timedelta"), message


def test_the_sql_ttl_option_reads_milliseconds_as_flink_options_do():
    # a Flink option without a unit is milliseconds ('table.exec.state.ttl' = '7200000')
    assert join_options({"table.exec.state.ttl": 7_200_000})["retention"].ttl == Duration.of_hours(2)
    assert join_options({"table.exec.state.ttl": timedelta(hours=2)})["retention"].ttl == Duration.of_hours(2)
    assert join_options({"table.exec.state.ttl": "2 h"})["retention"].ttl == Duration.of_hours(2)
    assert "not the float 1.5" in _message(lambda: join_options({"table.exec.state.ttl": 1.5}))


# -- the factories ------------------------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: Duration.of_minutes("5"),
     "Duration.of_minutes: minutes must be a number, e.g. Duration.of_minutes(5); not the str '5'"),
    (lambda: Time.minutes("5"), "Time.minutes: minutes must be a number, e.g. Time.minutes(5); not the str '5'"),
    (lambda: Time.seconds(None), "Time.seconds: seconds must be a number, e.g. Time.seconds(5); not None"),
    (lambda: Duration.of_hours(True), "Duration.of_hours: hours must be a number, e.g. Duration.of_hours(5); "
                                      "not the bool True"),
    (lambda: Duration.of_millis(1.5),
     "Duration.of_millis(1.5) is 1.5 ms, not a whole number of milliseconds (Flink's times have millisecond "
     "precision)"),
    (lambda: Time.seconds(0.0005),
     "Time.seconds(0.0005) is 0.5 ms, not a whole number of milliseconds (Flink's times have millisecond "
     "precision)"),
    (lambda: Duration.of_days(math.inf), "Duration.of_days: days must be a finite number; got inf"),
    (lambda: Time.hours(math.nan), "Time.hours: hours must be a finite number; got nan"),
    (lambda: Duration("5"), "Duration(millis): millis must be an int number of milliseconds (or use "
                            "Duration.of_seconds(...), Time.minutes(...)); not the str '5'"),
])
def test_a_factory_names_itself_its_parameter_and_the_value(make, message):
    assert _message(make) == message


def test_a_factory_takes_a_number_that_makes_whole_milliseconds():
    assert Duration.of_seconds(1.5) == Duration.of_millis(1500) == Time.milliseconds(1500)
    assert Time.seconds(1.1).millis == 1100            # as written, not 1100.0000000000002
    assert Time.minutes(np.int64(2)) == Duration.of_minutes(2) == Time.seconds(120)
    assert Time.hours(-8).millis == -8 * 3_600_000       # offsets may be negative
    assert Duration.of_millis(3.0) == Duration(3)
    # the range checks are the callers' and stay as they were
    assert "size > 0" in _message(lambda: TumblingEventTimeWindows.of(Time.seconds(-1)))
    assert "0 < gap" in _message(lambda: EventTimeSessionWindows.with_gap(Duration(0)))
    assert ">= 0 ms" in _message(lambda: WatermarkStrategy.for_bounded_out_of_orderness(Time.seconds(-1)))


# -- timedelta --------------------------------------------------------------------------------

def test_a_timedelta_is_the_duration_it_spans():
    assert TumblingEventTimeWindows.of(timedelta(minutes=5)).size == Time.minutes(5).millis
    sliding = SlidingEventTimeWindows.of(timedelta(hours=1), timedelta(minutes=15), timedelta(minutes=-5))
    assert repr(sliding) == repr(SlidingEventTimeWindows.of(Time.hours(1), Time.minutes(15), Time.minutes(-5)))
    assert EventTimeSessionWindows.with_gap(timedelta(seconds=3)).gap == 3000
    assert ContinuousEventTimeTrigger.of(timedelta(seconds=2)).interval == 2000
    assert TimeEvictor.of(pd.Timedelta(seconds=2)).window_size == 2000
    assert IntervalBounds(timedelta(hours=-4), timedelta(0)) == IntervalBounds(Time.hours(-4), Time.hours(0))
    assert WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5)) == \
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
    assert WatermarkStrategy.for_sql_delay(timedelta(milliseconds=250)).delay == Duration.of_millis(250)
    assert Clock(datetime(2024, 1, 1), timedelta(minutes=10)).step == Duration.of_minutes(10)
    assert StateRetention(timedelta(hours=1)) == StateRetention(Duration.of_hours(1))
    assert LookupCache(expire_after_access=timedelta(seconds=10)) == LookupCache(
        expire_after_access=Duration.of_seconds(10))
    assert TumblingEventTimeWindows.of(timedelta(days=-1, hours=25)).size == 3_600_000


@pytest.mark.parametrize("value", [timedelta(microseconds=1500), pd.Timedelta(nanoseconds=1_000_001)])
def test_a_timedelta_finer_than_a_millisecond_is_refused_naming_it(value):
    assert _message(lambda: TumblingEventTimeWindows.of(value)) == (
        f"TumblingEventTimeWindows.of: size {value!r} is not a whole number of milliseconds (Flink's times have "
        "millisecond precision)")


def test_a_stream_takes_a_timedelta_watermark(spark):
    df = spark.createDataFrame([("a", 1000)], "k string, t long")
    assert kit.stream(df, time="t", watermark=timedelta(seconds=5)).watermark == \
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))


# -- one message, not a chain ------------------------------------------------------------------

def _shown(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def _alone(error: BaseException) -> bool:
    """Whether the traceback shows the error alone: no cause, no context shown."""
    shown = _shown(error)
    return (error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
            and "During handling" not in shown and "direct cause" not in shown
            and "Py4JJavaError" not in shown and "at org.apache" not in shown)


@pytest.fixture(scope="module")
def clicks(spark):
    pdf = pd.DataFrame({"user": ["Mary", "Bob"], "t": [1000, 2000], "v": [1, 2]})
    return kit.stream(spark.createDataFrame(pdf), time="t")


def test_a_sql_query_with_an_unknown_column_is_one_message(clicks):
    with pytest.raises(SqlError) as error:
        kit.sql("SELECT nope FROM clicks", clicks=clicks)
    assert "`nope` cannot be resolved" in str(error.value) and _alone(error.value), _shown(error.value)


def test_a_match_recognize_error_placed_on_the_query_is_one_message(clicks):
    query = ("SELECT * FROM clicks MATCH_RECOGNIZE (PARTITION BY user ORDER BY t MEASURES A.v AS x "
             "PATTERN (A) DEFINE A AS A.nope > 1)")
    with pytest.raises(SqlError) as error:
        kit.sql(query, clicks=clicks)
    assert "DEFINE: unknown column 'nope'" in str(error.value) and _alone(error.value), _shown(error.value)
    assert _shown(error.value).count("unknown column 'nope'") == 1


@pytest.mark.parametrize("make", [
    lambda s: kit.stream(s.source, time="nope"),
    lambda s: s.key_by("nope"),
    lambda s: s.key_by("user").window(TumblingEventTimeWindows.of(Time.seconds(5))).aggregate(Sum("nope")),
])
def test_a_bad_stream_column_is_one_message(clicks, make):
    with pytest.raises(KitError) as error:
        make(clicks)
    assert "'nope'" in str(error.value) and _alone(error.value), _shown(error.value)


def test_a_kit_error_on_a_worker_is_the_kits_message_alone(clicks):
    windowed = clicks.key_by("user").window(TumblingEventTimeWindows.of(Time.seconds(5)))
    with pytest.raises(KitRuntimeError) as error:
        windowed.process(lambda key, ctx, elements: [(1, 2)], output_type="a bigint").df.collect()
    assert str(error.value) == "a window function returned (1, 2) (2 fields) but the output has 1 columns: ['a']"
    assert _alone(error.value) and "Traceback" not in str(error.value), _shown(error.value)


def test_the_users_own_function_failing_keeps_its_traceback(clicks):
    def boom(key, ctx, elements):
        raise ValueError("the user's own bug")

    windowed = clicks.key_by("user").window(TumblingEventTimeWindows.of(Time.seconds(5)))
    with pytest.raises(Exception) as error:
        windowed.process(boom, output_type="a bigint").df.collect()
    assert not isinstance(error.value, KitError)
    assert "the user's own bug" in str(error.value) and "in boom" in str(error.value)
