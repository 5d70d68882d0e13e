"""The DataStream window API: functions, contexts, custom triggers, errors (the reference
operator directly where Spark adds nothing; Spark where the API is the point)."""

import datetime

import pandas as pd
import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F

import kit
from kit.errors import KitError
from kit.time import Clock, Duration, Time
import kit.windows
from kit.windows import (AggregateFunction, ContinuousProcessingTimeTrigger, Count, CountEvictor, CountTrigger,
                         EventTimeSessionWindows, GlobalWindows, OutputTag, ProcessWindowFunction,
                         ReducingStateDescriptor, SlidingEventTimeWindows, Trigger, TriggerResult,
                         TumblingEventTimeWindows, TumblingProcessingTimeWindows, ValueStateDescriptor,
                         WindowFunction, WindowWarning)
from kit.windows.assigners import MIN_TIME
from kit.windows.functions import Contents
from kit.windows.operator import Element, WindowSpec, replay

ms = Time.milliseconds   # sizes, gaps and bounds are Times: these tests' are in milliseconds


def _replay(spec, items, delay=0):
    """``items``: (key, ts, v[, proctime]) in arrival order -> {key: KeyResult}."""
    arrivals, watermark = [], MIN_TIME
    for seq, item in enumerate(items):
        key, ts, v = item[:3]
        arrivals.append((key, Element(seq, ts, watermark, item[3] if len(item) > 3 else None,
                                      Row(key=key, ts=ts, v=v))))
        watermark = max(watermark, ts - delay - 1)
    return replay(arrivals, spec, lambda e: e.timestamp - delay - 1)


class Average(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return acc[0] + value.v, acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


def test_aggregate_with_merge_on_sessions_and_a_window_function():
    def with_window(key, window, averages):
        return [(key, window.start, next(iter(averages)))]
    sessions = EventTimeSessionWindows.with_gap(ms(5))
    spec = WindowSpec(sessions, sessions.default_trigger(),
                      Contents("aggregate", Average()), ("apply", with_window))
    result = _replay(spec, [("a", 1, 2), ("a", 10, 4), ("a", 5, 6)], delay=10)["a"]
    assert [f.outputs for f in result.firings] == [[("a", 1, 4.0)]]   # 1, 5, 10 merged: (2+4+6)/3


def test_process_window_function_context_and_state():
    class Panes(ProcessWindowFunction):
        def process(self, key, context, elements):
            fired = context.window_state().get_state(ValueStateDescriptor("fired"))
            fired.update((fired.value() or 0) + 1)
            total = context.global_state().get_state(ReducingStateDescriptor("total", lambda a, b: a + b))
            total.add(len(list(elements)))
            yield (key, context.window().start, fired.value(), total.get(), context.current_watermark())
    spec = WindowSpec(TumblingEventTimeWindows.of(ms(10)), CountTrigger.of(1), Contents("list"), ("process", Panes()))
    result = _replay(spec, [("a", 1, 0), ("a", 2, 0), ("a", 12, 0)])["a"]
    assert [f.outputs[0] for f in result.firings] == [("a", 0, 1, 1, MIN_TIME), ("a", 0, 2, 3, 0), ("a", 10, 1, 4, 1)]


def test_a_custom_trigger_with_timers_and_state():
    class EveryOtherOrEnd(Trigger):
        """FIRE on every second element, and FIRE_AND_PURGE at the window's end."""
        seen = ValueStateDescriptor("seen")

        def on_element(self, element, timestamp, window, ctx):
            state = ctx.get_partitioned_state(self.seen)
            state.update((state.value() or 0) + 1)
            ctx.register_event_time_timer(window.max_timestamp())
            return TriggerResult.FIRE if state.value() % 2 == 0 else TriggerResult.CONTINUE

        def on_event_time(self, time, window, ctx):
            return TriggerResult.FIRE_AND_PURGE if time == window.max_timestamp() else TriggerResult.CONTINUE

        def clear(self, window, ctx):
            ctx.get_partitioned_state(self.seen).clear()

    spec = WindowSpec(TumblingEventTimeWindows.of(ms(10)), EveryOtherOrEnd(), Contents("list"))
    result = _replay(spec, [("a", 1, 1), ("a", 2, 2), ("a", 3, 3), ("a", 15, 4)])["a"]
    assert [([r.v for r in f.outputs], f.cause) for f in result.firings] == [
        ([1, 2], "element"), ([1, 2, 3], "event-time timer"), ([4], "event-time timer")]


def test_processing_time_triggers_follow_the_clock():
    spec = WindowSpec(TumblingProcessingTimeWindows.of(ms(100)), ContinuousProcessingTimeTrigger.of(ms(30)),
                      Contents("list"))
    items = [("a", 0, 1, 5), ("a", 0, 2, 40), ("a", 0, 3, 70), ("b", 0, 9, 95)]
    result = _replay(spec, items)["a"]
    assert [([r.v for r in f.outputs], f.proctime) for f in result.firings] == [([1], 30), ([1, 2], 60), ([1, 2, 3], 90)]


def test_parameters_are_checked_with_their_range():
    with pytest.raises(KitError, match="abs\\(offset\\) < size and size > 0; got size=10 ms, offset=10 ms"):
        TumblingEventTimeWindows.of(Time.milliseconds(10), Time.milliseconds(10))
    with pytest.raises(KitError, match="abs\\(offset\\) < slide"):
        SlidingEventTimeWindows.of(ms(10), ms(0))
    with pytest.raises(KitError, match="0 < gap; got gap=0 ms"):
        EventTimeSessionWindows.with_gap(ms(0))
    with pytest.raises(KitError, match="count must be an integer > 0"):
        CountTrigger.of(0)
    with pytest.raises(KitError, match="size must be a Time, Duration or timedelta"):
        TumblingEventTimeWindows.of("5 minutes")
    spec = WindowSpec(EventTimeSessionWindows.with_dynamic_gap(lambda e: 0),
                      EventTimeSessionWindows.with_gap(ms(1)).default_trigger(), Contents("list"))
    with pytest.raises(KitError, match="Dynamic gap can not be negative or zero"):
        _replay(spec, [("a", 1, 1)])


@pytest.fixture(scope="module")
def clicks(spark):
    pdf = pd.DataFrame({"user": ["Mary", "Bob", "Mary", "Mary"], "ts": [1000, 2000, 61000, 500],
                        "url": ["./home", "./cart", "./home", "./prod"]})
    return kit.stream(pdf, time="ts", watermark=Duration.of_seconds(0))


def test_api_errors_say_what_to_fix(clicks):
    keyed = clicks.key_by("user")
    with pytest.raises(KitError, match="key_by: 'name' is not a column"):
        clicks.key_by("name")
    with pytest.raises(KitError, match="Fold cannot be used with a merging WindowAssigner"):
        keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(5))).fold("", lambda acc, v: acc + v.url)
    with pytest.raises(KitError, match="allowed_lateness must be >= 0 ms"):
        keyed.window(TumblingEventTimeWindows.of(Time.seconds(5))).allowed_lateness(-1)
    with pytest.raises(KitError, match="count_window\\(size\\): size must be an integer > 0"):
        keyed.count_window(0)
    with pytest.raises(KitError, match="trigger\\(...\\) needs a Trigger"):
        keyed.window(TumblingEventTimeWindows.of(Time.seconds(5))).trigger("count")
    # an output named like one of the result's own columns: Flink reserves none, the kit renames its own
    named_pane = keyed.window(TumblingEventTimeWindows.of(Time.seconds(5))).aggregate(Count(alias="pane"))
    assert named_pane.kit_columns["pane"] == "kit_pane" and named_pane.kit_columns["firing"] == "firing"
    result = keyed.window(TumblingEventTimeWindows.of(Time.seconds(5))).side_output_late_data(OutputTag("late"))
    with pytest.raises(KitError, match="no side output OutputTag\\('other'\\)"):
        result.aggregate(Count()).get_side_output(OutputTag("other"))


def test_window_all_fold_and_window_function_on_spark(clicks):
    with pytest.warns(WindowWarning, match="one group on one core"):
        everything = clicks.window_all(TumblingEventTimeWindows.of(Time.minutes(1))).fold(
            "", lambda acc, v: acc + v.url[2], output_type="urls string")
    assert [(r.window_start, r.urls) for r in everything.df.collect()] == [(0, "hc"), (60000, "h")]
    assert [r.seq for r in everything.late.collect()] == [3]

    class CountPerWindow(WindowFunction):
        def apply(self, key, window, inputs):
            yield Row(user=key, end=window.end, clicks=len(list(inputs)))
    per_user = clicks.key_by("user").window(TumblingEventTimeWindows.of(Time.minutes(1))).apply(CountPerWindow())
    assert per_user.df.select("user", "end", "clicks", "firing").collect() == [
        ("Bob", 60000, 1, "on-time"), ("Mary", 60000, 1, "on-time"), ("Mary", 120000, 1, "on-time")]
    assert [(r.seq, r.fate) for r in per_user.elements().collect()] == [(0, "fired"), (1, "fired"), (2, "fired"),
                                                                        (3, "late")]


def test_values_pass_through_the_replay_exactly(spark):
    """A BIGINT with NULLs stays an exact integer (not float64, where 2**53 + 1 rounds), a
    DECIMAL a Decimal, a TIMESTAMP the same instant: in ``reduce``'s output (the reducer sees
    them as Python values), the late side output and ``elements()``."""
    from decimal import Decimal
    big = 2 ** 53 + 1
    df = spark.createDataFrame(
        [("a", 1000, big, Decimal("1.10")), ("a", 1200, None, None), ("a", 9000, None, Decimal("2.25")),
         ("a", 500, 7, None)], "k string, ts bigint, v bigint, d decimal(10, 2)")
    df = df.withColumn("at", F.timestamp_millis("ts"))

    def first_exact(a, b):
        assert a.v == big and b.v is None and a.d == Decimal("1.10") and b.d is None
        assert a.at == datetime.datetime(1970, 1, 1, 0, 0, 1) and a.at.tzinfo is None
        return a
    result = (kit.stream(df, time="ts").key_by("k").window(TumblingEventTimeWindows.of(Time.seconds(5)))
              .reduce(first_exact))
    assert [(r.v, r.d, r.at.second) for r in result.df.collect()] == [(big, Decimal("1.10"), 1),
                                                                     (None, Decimal("2.25"), 9)]
    assert [(r.v, r.d, r.watermark) for r in result.late.collect()] == [(7, None, 8999)]
    assert [(r.v, r.fate) for r in result.elements().collect()] == [
        (big, "fired"), (None, "fired"), (None, "fired"), (7, "late")]


def test_count_window_on_a_stream_with_a_clock(spark):
    pdf = pd.DataFrame({"user": ["a"] * 5, "ts": [1, 2, 3, 4, 5]})
    stream = kit.stream(pdf, time="ts", proctime=Clock("2024-01-01T00:00:00", Duration.of_seconds(1)))
    result = stream.key_by("user").count_window(2).reduce(lambda a, b: Row(user=a.user, ts=a.ts + b.ts))
    rows = result.df.select("key", "ts", "pane", "fired_after", "proctime").collect()
    assert [(r.ts, r.pane, r.fired_after, str(r.proctime)) for r in rows] == [
        (3, 0, 1, "2024-01-01 00:00:01"), (7, 1, 3, "2024-01-01 00:00:03")]
    assert [r.fate for r in result.elements().collect()] == ["fired"] * 4 + ["pending"]
    assert GlobalWindows.create().assign_windows(None, 1, None)[0].max_timestamp() == 2 ** 63 - 1


def test_configuring_a_windowed_stream_returns_a_copy_and_leaves_the_original(clicks):
    hourly = clicks.key_by("user").window(TumblingEventTimeWindows.of(Time.hours(1)))
    tag = OutputTag("late")
    configured = (hourly.trigger(CountTrigger.of(2)).evictor(CountEvictor.of(1)).allowed_lateness(Time.minutes(1))
                  .side_output_late_data(tag))
    assert configured is not hourly
    assert (hourly._trigger, hourly._evictor, hourly._lateness, hourly._late_tag) == (None, None, 0, None)
    assert (repr(configured._trigger), repr(configured._evictor), configured._lateness, configured._late_tag) == (
        "CountTrigger.of(2)", "CountEvictor.of(1)", 60000, tag)
    assert repr(hourly.aggregate(Count()).spec.trigger) == "EventTimeTrigger.create()"
    with pytest.raises(KitError, match="no side output"):
        hourly.aggregate(Count()).get_side_output(tag)


REPRS = ["TumblingEventTimeWindows.of(Time.minutes(1))",
         "TumblingProcessingTimeWindows.of(Time.days(1), Time.hours(-8))",
         "SlidingEventTimeWindows.of(Time.minutes(10), Time.minutes(1))",
         "SlidingProcessingTimeWindows.of(Time.days(2), Time.days(1), Time.hours(-8))",
         "EventTimeSessionWindows.with_gap(Time.seconds(30))",
         "ProcessingTimeSessionWindows.with_gap(Time.milliseconds(1500))",
         "GlobalWindows.create()",
         "CountEvictor.of(3)", "CountEvictor.of(3, do_evict_after=True)", "TimeEvictor.of(Time.seconds(5))",
         "DeltaEvictor.of(2.5, abs)",
         "EventTimeTrigger.create()", "ProcessingTimeTrigger.create()", "CountTrigger.of(5)",
         "PurgingTrigger.of(CountTrigger.of(5))", "ContinuousEventTimeTrigger.of(Time.seconds(10))",
         "ContinuousProcessingTimeTrigger.of(Time.hours(1))"]


@pytest.mark.parametrize("text", REPRS)
def test_reprs_are_the_constructor_call(text):
    namespace = {**vars(kit.windows), "Time": Time}
    assert repr(eval(text, namespace)) == text


def test_reprs_pick_the_largest_unit_that_divides():
    assert repr(TumblingEventTimeWindows.of(Time.seconds(90))) == "TumblingEventTimeWindows.of(Time.seconds(90))"
    assert repr(TumblingEventTimeWindows.of(Time.minutes(60))) == "TumblingEventTimeWindows.of(Time.hours(1))"
    assert repr(EventTimeSessionWindows.with_dynamic_gap(len)) == "EventTimeSessionWindows.with_dynamic_gap(len)"
