"""Timers at one time across keys replayed apart (kit/windows/timer_order.py): one heap over
the keys' logged heap changes gives each key's firings the order of the stream run as one
operator, which is Flink's (tests/test_window_flink_goldens.py holds that one to Flink)."""

from unittest import mock

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row

import kit
from kit.time import Duration, Time
from kit.windows.assigners import MIN_TIME, SlidingEventTimeWindows, TumblingEventTimeWindows
from kit.windows.functions import Contents, Sum
from kit.windows.operator import Element, WindowSpec, replay, run_key
from kit.windows.timer_order import heap_ranks, may_tie
from kit.windows.triggers import ContinuousEventTimeTrigger, CountTrigger, EventTimeTrigger, PurgingTrigger


def _collector():
    """A process function giving key, window and values (made in a function: Spark's
    workers get it by value, not by this module's name)."""
    def collect(key, ctx, elements):
        w = ctx.window()
        return [(key, w.start, w.end, sorted(e.v for e in elements))]
    return collect


_collect = _collector()


def _arrivals(rows, delay):
    """(key, Element) in arrival order and each arrival's own watermark."""
    value, watermark, top, own, out = Row("k", "ts", "v"), MIN_TIME, None, {}, []
    for seq, (k, ts) in enumerate(rows):
        out.append((k, Element(seq, ts, watermark, None, value(k, ts, seq))))
        top = ts if top is None else max(top, ts)
        own[seq] = top - delay - 1
        watermark = max(watermark, own[seq])
    return out, own


def _placed(own):
    """A fired event-time timer's batch and watermark: the first arrival whose own watermark
    reaches ``max(time, floor)`` (placement.place_timers, on a list)."""
    def placed(time, floor):
        for seq in sorted(own):
            if own[seq] >= max(time, floor):
                return seq, max(own[s] for s in own if s <= seq)
        return None, 2 ** 63 - 1
    return placed


def _seen(firing):
    return (firing.window, firing.cause, firing.timer, firing.kind, firing.pane, firing.outputs)


windows = st.sampled_from([TumblingEventTimeWindows.of(Time.milliseconds(10)),
                           SlidingEventTimeWindows.of(Time.milliseconds(20), Time.milliseconds(5)),
                           SlidingEventTimeWindows.of(Time.milliseconds(10), Time.milliseconds(5))])
streams = st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 70)), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(streams, st.integers(0, 6), windows, st.sampled_from([3, 5, 10]), st.booleans(), st.sampled_from([0, 7]))
def test_one_heap_over_the_keys_logs_orders_each_key_as_one_operator(rows, delay, assigner, interval, purging,
                                                                     lateness):
    """Each key alone with its heap logged, then ``heap_ranks``: sorted by (batch, element
    before timers, heap rank), every key's firings are the one operator's, in its order."""
    trigger = ContinuousEventTimeTrigger.of(Time.milliseconds(interval))
    spec = WindowSpec(assigner, PurgingTrigger.of(trigger) if purging else trigger, Contents("list"),
                      ("process", _collect), allowed_lateness=lateness)
    arrivals, own = _arrivals(rows, delay)
    whole = replay(arrivals, spec, lambda e: own[e.seq])
    placed = _placed(own)
    logs, alone = {}, {}
    for key in whole:
        logs[key] = []
        alone[key] = run_key(key, [e for k, e in arrivals if k == key], spec, log=logs[key]).firings
    ranks = heap_ranks(logs, placed)
    for key, firings in alone.items():
        def flink(indexed):
            i, f = indexed
            if f.cause == "element":
                return (f.fired_after, 0, i)
            batch = placed(f.timer, f.floor)[0]
            return (2 ** 63 if batch is None else batch, 1, ranks[(key, batch, f.timer, f.window)])
        ordered = [f for _, f in sorted(enumerate(firings), key=flink)]
        assert [_seen(f) for f in ordered] == [_seen(f) for f in whole[key].firings]


def test_only_triggers_with_timers_off_the_windows_end_can_tie():
    tumbling = TumblingEventTimeWindows.of(Time.milliseconds(10))
    spec = lambda trigger: WindowSpec(tumbling, trigger, Contents("list"))  # noqa: E731
    assert not may_tie(spec(EventTimeTrigger.create())) and not may_tie(spec(PurgingTrigger.of(CountTrigger.of(2))))
    assert may_tie(spec(PurgingTrigger.of(ContinuousEventTimeTrigger.of(Time.milliseconds(3)))))


def _windowed(spark, rows, delay, assigner, interval):
    df = spark.createDataFrame([(k, ts, i) for i, (k, ts) in enumerate(rows)], "k string, ts long, v long")
    return (kit.stream(df.coalesce(1), time="ts", watermark=Duration.of_millis(delay)).key_by("k").window(assigner)
            .trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(interval))))


@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.generate],   # a shrink of Spark runs takes minutes
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 50)), min_size=2, max_size=20), st.integers(0, 4),
       windows, st.sampled_from([3, 5]))
def test_keys_replayed_apart_give_the_one_operators_rows_in_its_order(spark, rows, delay, assigner, interval):
    """The same window run as one operator, per key in Python and per key in the JVM: the
    same rows in the same order."""
    windowed = _windowed(spark, rows, delay, assigner, interval)
    one = windowed.process(_collect, output_type="k string, s long, e long, vs array<long>")
    assert one._one_operator
    expected = one.df.collect()
    apart = windowed.process(_collect, output_type="k string, s long, e long, vs array<long>")
    apart.__dict__["_one_operator"] = False
    assert apart.df.collect() == expected
    summed = windowed.aggregate(Sum("v"))
    with mock.patch("kit.windows.fast.eligible", return_value=False):
        jvm = summed.df.collect()
    assert not summed._one_operator
    assert [(r.key, r.window_start, r.window_end, *r[3:]) for r in jvm] == [
        (r.k, r.window_start, r.window_end, sum(r.vs), *r[7:]) for r in expected]
