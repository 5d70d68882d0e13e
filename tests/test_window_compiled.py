"""The JVM window operator (kit/jvm/WindowOperator.java) gives the Python replay's rows --
firings, late elements, every element's fate -- for every built-in assigner, trigger,
evictor and aggregate; anything else stays in Python."""

import math
import re
from unittest import mock
from decimal import Decimal

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kit
from kit import jvm
from kit.time import Duration, Time
from kit.windows import compiled
from kit.windows.assigners import (EventTimeSessionWindows, GlobalWindows, ProcessingTimeSessionWindows,
                                   SlidingEventTimeWindows, SlidingProcessingTimeWindows, TimeWindow,
                                   TumblingEventTimeWindows, TumblingProcessingTimeWindows)
from kit.windows.evictors import CountEvictor, DeltaEvictor, TimeEvictor
from kit.windows.functions import Aggregates, Avg, Count, Max, Min, Sum
from kit.windows.triggers import (ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountTrigger,
                                  EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger, PurgingTrigger, Trigger)

from streams import stacked

ms = Time.milliseconds   # sizes, gaps and bounds are Times: these tests' are in milliseconds

AGG = Aggregates(Count(alias="n"), Count("v", alias="nv"), Sum("v", alias="total"), Avg("w", alias="mean"),
                 Min("s", alias="low"), Max("w", alias="top"), Min("ts", alias="first"))


@st.composite
def scenarios(draw):
    size = draw(st.integers(2, 12))
    assigner = draw(st.sampled_from([
        TumblingEventTimeWindows.of(ms(size), ms(draw(st.integers(-size + 1, size - 1)))),
        SlidingEventTimeWindows.of(ms(size), ms(draw(st.integers(1, 6)))),
        EventTimeSessionWindows.with_gap(ms(draw(st.integers(1, 8)))),
        TumblingProcessingTimeWindows.of(ms(size)),
        SlidingProcessingTimeWindows.of(ms(size), ms(draw(st.integers(1, 6)))),
        ProcessingTimeSessionWindows.with_gap(ms(draw(st.integers(2, 8)))), GlobalWindows.create()]))
    trigger = draw(st.sampled_from([
        None, EventTimeTrigger.create(), ProcessingTimeTrigger.create(), CountTrigger.of(draw(st.integers(1, 3))),
        ContinuousEventTimeTrigger.of(ms(draw(st.integers(2, 6)))), ContinuousProcessingTimeTrigger.of(
            ms(draw(st.integers(2, 6)))), NeverTrigger()]))
    if isinstance(trigger, ContinuousEventTimeTrigger) and not isinstance(
            assigner, (TumblingEventTimeWindows, SlidingEventTimeWindows, EventTimeSessionWindows)):
        trigger = None   # from event times to a far window end: endless (test_periodic_timers_...)
    if trigger is not None and draw(st.booleans()):
        trigger = PurgingTrigger.of(trigger)
    evictor = draw(st.sampled_from([None, None, CountEvictor.of(draw(st.integers(0, 3)), draw(st.booleans())),
                                    TimeEvictor.of(ms(draw(st.integers(0, 5))), draw(st.booleans()))]))
    rows = stacked(draw, v=st.sampled_from([None, -3, 0, 2, 5]),
                   w=st.sampled_from([None, 1.5, -2.25, 0.0, math.nan]),
                   s=st.sampled_from([None, "a", "b", "\U0001F600", "\uFFFD"]))
    return dict(**rows, assigner=assigner, trigger=trigger, evictor=evictor,
                lateness=draw(st.sampled_from([0, 0, 4])), delay=draw(st.sampled_from([0, 3])),
                step=draw(st.sampled_from([1, 3])))


def _result(case):
    rows = list(zip(case["keys"], case["times"], case["v"], case["w"], case["s"]))
    pdf = kit.spark().createDataFrame(rows, "k string, ts long, v long, w double, s string").coalesce(1)
    clock = kit.Clock("2024-01-01 00:00:00", Duration.of_millis(case["step"]))
    windowed = (kit.stream(pdf, time="ts", watermark=Duration.of_millis(case["delay"]), proctime=clock)
                .key_by("k").window(case["assigner"]).allowed_lateness(case["lateness"]))
    if case["trigger"] is not None:
        windowed = windowed.trigger(case["trigger"])
    if case["evictor"] is not None:
        windowed = windowed.evictor(case["evictor"])
    return windowed.aggregate(AGG)


def _rows(result, engine):
    """Each kind's rows; a firing's number (``_order``) as its rank among its key's (the
    engines take the keys in different orders)."""
    rows = {"firing": [], "late": [], "element": []}
    for r in result._run(result._columns(), engine)[0].collect():
        rows[r._kind].append(tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r))
    at, ranked = len(result._columns()["firing"]) - 1, []   # _order: the firing's last column but _floor
    for r in sorted(rows["firing"], key=lambda r: r[at]):
        ranked.append(r[:at] + (sum(1 for q in ranked if q[1] == r[1]),) + r[at + 1:])
    rows["firing"] = ranked
    return {kind: sorted(kind_rows, key=repr) for kind, kind_rows in rows.items()}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
@example(dict(keys=["0a"] * 4, times=[1, 3, 12, 2], v=[1, None, 2, 3], w=[1.5, math.nan, None, 0.0],
              s=["\U0001F600", "\uFFFD", None, "a"], assigner=EventTimeSessionWindows.with_gap(ms(5)),
              trigger=CountTrigger.of(2), evictor=CountEvictor.of(1), lateness=4, delay=0, step=1))
def test_the_jvm_operator_gives_the_python_replays_rows(spark, case):
    result = _result(case)
    assert jvm.available(spark, "WindowOperator")
    assert compiled.settings(result, result._run(result._columns(), "python")[0].schema.fields) is not None
    try:
        python = _rows(result, "python")
    except Exception as e:   # a timer that fires again at once, without end: both engines refuse it
        assert "fires again at once, without end" in str(e)
        with pytest.raises(Exception, match="fires again at once, without end"):
            _rows(result, "auto")
        return
    assert _rows(result, "auto") == python
    assert sum(len(rows) for rows in python.values()) > 0
    # what users read: each kind replayed on its own in the JVM, the firings placed and sorted
    with mock.patch.object(compiled, "run", return_value=None):
        in_python = _public(_result(case))
    assert _public(_result(case)) == in_python


def test_a_timer_registered_anew_at_its_own_time_is_an_error_not_a_hang(spark):
    """A processing-time trigger on an event-time window that ends behind the clock: the
    trigger's next timer is the window's end, already past, so it fires again at once."""
    df = spark.createDataFrame([("a", 1), ("a", 2), ("a", 12)], "k string, ts long").coalesce(1)
    s = kit.stream(df, time="ts", proctime=kit.Clock("2024-01-01 00:00:00", Duration.of_millis(1)))
    result = (s.key_by("k").window(TumblingEventTimeWindows.of(ms(5)))
              .trigger(ContinuousProcessingTimeTrigger.of(ms(3)))
              .aggregate(Count()))
    for engine in ("python", "auto"):
        with pytest.raises(Exception, match=r"timer at 4 of window TimeWindow\{start=0, end=5\} fires again at "
                                            "once, without end") as failure:
            _rows(result, engine)
        assert "at flinkkit" not in str(failure.value)   # the JVM's error comes without its stack trace


@pytest.mark.parametrize("windows", ["global", "processing-time"])
def test_periodic_timers_up_to_a_far_window_end_are_an_error_not_a_hang(spark, windows):
    """ContinuousEventTimeTrigger on GlobalWindows, or on processing-time windows ending far
    past the event times: when the input ends, the watermark jumps to +inf and the trigger
    fires every interval up to the window's end (Long.MAX_VALUE, or an hour of 2024)."""
    df = spark.createDataFrame([("a", 1), ("a", 2), ("a", 12)], "k string, ts long").coalesce(1)
    s = kit.stream(df, time="ts", proctime=kit.Clock("2024-01-01 00:00:00", Duration.of_millis(1)))
    assigner, name, end = ((GlobalWindows.create(), "GlobalWindow", 2 ** 63 - 1) if windows == "global" else
                           (TumblingProcessingTimeWindows.of(Time.hours(1)),
                            "TimeWindow{start=1704067200000, end=1704070800000}", 1704070799999))
    result = s.key_by("k").window(assigner).trigger(ContinuousEventTimeTrigger.of(ms(5))).aggregate(Count())
    for engine in ("python", "auto"):
        message = (f"window {name} fired 100,000 times at the end of input and ContinuousEventTimeTrigger.of("
                   f"Time.milliseconds(5)) registers its next timer every time, up to the window's end ({end})")
        with pytest.raises(Exception, match=re.escape(message)) as failure:
            _rows(result, engine)
        assert "at flinkkit" not in str(failure.value)


def test_a_nan_stays_a_value_in_both_engines(spark):
    """NaN is a DOUBLE value, as in Flink: a sum or average with it is NaN, a maximum that
    met it first stays NaN (no later value compares above it), and the late side output and
    the elements keep it."""
    df = spark.createDataFrame([("a", 1, math.nan), ("a", 2, 1.5), ("a", 12, 2.0), ("a", 3, 4.0)],
                               "k string, ts long, w double").coalesce(1)

    def result():
        return (kit.stream(df, time="ts").key_by("k").window(TumblingEventTimeWindows.of(ms(10)))
                .trigger(CountTrigger.of(1)).aggregate(Aggregates(Sum("w", alias="s"), Avg("w", alias="m"),
                                                                 Max("w", alias="top"), Min("w", alias="low"))))

    def rows(r):
        def show(v):
            return "NaN" if isinstance(v, float) and math.isnan(v) else v
        return ([tuple(map(show, (x.window_start, x.s, x.m, x.top, x.low))) for x in r.df.collect()],
                [tuple(map(show, x)) for x in r.late.collect()], [tuple(map(show, x)) for x in r.elements().collect()])

    expected = ([(0, "NaN", "NaN", "NaN", "NaN"), (0, "NaN", "NaN", "NaN", "NaN"), (10, 2.0, 2.0, 2.0, 2.0)],
                [("a", 3, 4.0, 3, 11)],
                [("a", 1, "NaN", 0, "fired"), ("a", 2, 1.5, 1, "fired"), ("a", 12, 2.0, 2, "fired"),
                 ("a", 3, 4.0, 3, "late")])
    assert rows(result()) == expected
    with mock.patch.object(compiled, "run", return_value=None):
        assert rows(result()) == expected


def test_window_all_counting_rows_reads_no_value_column(spark):
    """The firings' replay reads only the keys and the aggregated columns: here none."""
    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3), ("a", 12), ("c", 25)], "k string, ts long")
    s = kit.stream(df, time="ts")

    def result():
        return (s.window_all(TumblingEventTimeWindows.of(ms(10))).trigger(CountTrigger.of(2))
                .aggregate(Count(alias="n")))

    assert [(r.window_start, r.n, r.fired_after) for r in result().df.collect()] == [(0, 2, 1)]
    with mock.patch.object(compiled, "run", return_value=None):
        assert [(r.window_start, r.n, r.fired_after) for r in result().df.collect()] == [(0, 2, 1)]


def test_the_jvm_operator_keeps_every_column_type_of_the_python_replay(spark):
    """Spark's internal forms (timestamps in microseconds, dates in days, strings as bytes,
    binary keys, two keys as a struct) pass through the JVM operator as Python gives them."""
    import datetime as dt

    day, at = dt.date(2024, 1, 1), dt.datetime(2024, 1, 1)
    rows = [(1, "x", bytearray(b"k1"), at + dt.timedelta(seconds=s), day + dt.timedelta(days=d), flag, n, txt)
            for s, d, flag, n, txt in [(1, 3, True, 2, "b"), (2, 1, False, None, "\U0001F600"),
                                       (12, 2, None, 7, "\uFFFD"), (3, 0, True, -1, "a"), (30, 5, False, 4, None)]]
    rows += [(2, "y", bytearray(b"k2"), at + dt.timedelta(seconds=4), day, False, 1, "z")]
    df = spark.createDataFrame(rows, "i int, s string, b binary, ts timestamp, d date, f boolean, n int, t string")
    agg = Aggregates(Count(alias="c"), Sum("n", alias="total"), Avg("n", alias="mean"), Min("d", alias="d0"),
                     Max("ts", alias="t1"), Min("f", alias="f0"), Max("t", alias="top"), Min("t", alias="low"))
    stream = kit.stream(df.coalesce(1), time="ts", watermark=Duration.of_seconds(1))
    for keys in (["i", "s"], ["b"]):
        def result():
            return (stream.key_by(*keys).window(TumblingEventTimeWindows.of(Time.seconds(10))).allowed_lateness(0)
                    .trigger(CountTrigger.of(2)).aggregate(agg))

        assert _rows(result(), "auto") == _rows(result(), "python")
        with mock.patch.object(compiled, "run", return_value=None):
            in_python = _public(result())
        assert _public(result()) == in_python
        assert [len(kind) for kind in in_python] == [1, 2, 6]   # 1 s and 2 s fire; 3 s and 4 s come late


def _public(result):
    return [[tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r) for r in df.collect()]
            for df in (result.df, result.late, result.elements())]


def test_window_hashes_are_flinks():
    """TimeWindow.hashCode() (MathUtils.longToIntWithBitMixing(start + end)) orders Flink's
    merge sets; the values below are Flink's."""
    assert [TimeWindow(0, 10).java_hash(), TimeWindow(-5, 3).java_hash(), TimeWindow(2**62, 2**62).java_hash()] == [
        -1456339591, -1552742142, 2043586954]


def test_the_jvm_hash_equals_the_python_one(spark):
    mix = spark._jvm.flinkkit.WindowOperator.mix
    for start, end in [(0, 10), (-5, 3), (1_700_000_000_000, 1_700_000_060_000), (2**62, 2**62 + 7)]:
        assert mix(start + end if start + end < 2**63 else start + end - 2**64) == TimeWindow(start, end).java_hash()


class _MyTrigger(Trigger):
    pass


@pytest.mark.parametrize("change", [
    lambda w: w.trigger(_MyTrigger()),
    lambda w: w.evictor(DeltaEvictor.of(1.0, lambda a, b: 0.0)),
    lambda w: w.trigger(ProcessingTimeTrigger.create()),          # no processing clock: Python names it
])
def test_windows_with_parts_that_are_not_built_in_stay_in_python(spark, change):
    pdf = pd.DataFrame({"k": ["a", "a"], "ts": [1, 12]})
    windowed = change(kit.stream(pdf, time="ts").key_by("k").window(TumblingEventTimeWindows.of(ms(10))))
    result = windowed.aggregate(Count())
    assert compiled.settings(result, result._run(result._columns(), "python")[0].schema.fields) is None


def test_functions_that_are_not_built_in_stay_in_python(spark):
    df = spark.createDataFrame([("a", 1, Decimal("1.50")), ("a", 12, Decimal("2.25"))],
                               "k string, ts long, d decimal(10, 2)")
    keyed = kit.stream(df, time="ts").key_by("k")
    for result in (keyed.window(TumblingEventTimeWindows.of(ms(10))).reduce(lambda a, b: a),
                   keyed.window(EventTimeSessionWindows.with_dynamic_gap(lambda e: 5)).aggregate(Count()),
                   keyed.window(TumblingEventTimeWindows.of(ms(10))).aggregate(Sum("d"))):
        assert compiled.settings(result, result._run(result._columns(), "python")[0].schema.fields) is None


def test_a_null_event_time_fails_naming_the_row(spark):
    df = spark.createDataFrame([("a", 1), ("a", 2), ("a", None)], "k string, ts long").coalesce(1)
    windowed = (kit.stream(df, time="ts").key_by("k").window(EventTimeSessionWindows.with_gap(ms(10)))
                .aggregate(Count()))
    with pytest.raises(Exception, match="row seq=2 has NULL event time in column 'ts'") as failure:
        windowed.df.collect()
    assert "at flinkkit" not in str(failure.value)   # no Java stack trace
