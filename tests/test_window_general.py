"""The general path on Spark (each key replayed alone, then its timer firings placed on
the whole stream; a small stream in one operator) equals one operator over the whole
stream (``operator.replay``), row for row: random streams with disorder and late elements, sessions and time windows with
non-default triggers, evictors and allowed lateness."""

import gc
import sys
import time
from unittest import mock

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row
from pyspark.sql import functions as F

import kit
from kit.time import Duration, Time
from kit.windows import fast
from kit.windows.assigners import (MAX_TIME, MIN_TIME, EventTimeSessionWindows, ProcessingTimeSessionWindows,
                                   TumblingEventTimeWindows, TumblingProcessingTimeWindows)
from kit.windows.evictors import CountEvictor
from kit.windows.functions import Contents, Count
from kit.windows.operator import Element, WindowSpec, replay
from kit.windows.triggers import ContinuousEventTimeTrigger, CountTrigger, EventTimeTrigger, ProcessingTimeTrigger

from streams import stacked

ms = Time.milliseconds   # sizes, gaps and bounds are Times: these tests' are in milliseconds


@st.composite
def scenarios(draw):
    """A window setup that the fast path does not take, and 8 small streams one after the
    other in one input (keys differ per stream, so one Spark job checks them all). Timers
    of both clocks (a processing-time trigger on event-time windows, or the reverse) make
    the whole stream run in one operator; otherwise each key runs alone."""
    kind = draw(st.sampled_from(["session", "tumbling", "processing-time"]))
    if kind == "session":
        assigner, trigger = EventTimeSessionWindows.with_gap(ms(draw(st.integers(2, 8)))), EventTimeTrigger.create()
    elif kind == "tumbling":
        assigner = TumblingEventTimeWindows.of(ms(draw(st.integers(3, 12))))
        trigger = draw(st.sampled_from([CountTrigger.of(2), ContinuousEventTimeTrigger.of(ms(4)),
                                        ProcessingTimeTrigger.create()]))
    else:
        assigner = draw(st.sampled_from([TumblingProcessingTimeWindows.of(ms(draw(st.integers(3, 12)))),
                                         ProcessingTimeSessionWindows.with_gap(ms(draw(st.integers(2, 8))))]))
        trigger = draw(st.sampled_from([ProcessingTimeTrigger.create(), CountTrigger.of(2),
                                        EventTimeTrigger.create()]))
    evictor = draw(st.sampled_from([None, None, CountEvictor.of(2)]))
    rows = stacked(draw)
    # a processing clock of ms from 1970 on: windows ahead of it and behind it
    needs_clock = isinstance(trigger, ProcessingTimeTrigger) or kind == "processing-time"
    clock = draw(st.sampled_from([1, 20_000] if needs_clock else [None, 1, 20_000]))
    return dict(**rows, assigner=assigner, trigger=trigger, evictor=evictor,
                lateness=draw(st.sampled_from([0, 0, 4])), delay=draw(st.sampled_from([0, 3])), clock=clock)


def _spec(case):
    return WindowSpec(case["assigner"], case["trigger"], Contents("aggregate", Count(alias="n")),
                      evictor=case["evictor"], allowed_lateness=case["lateness"])


def _reference(case):
    arrivals, watermark = [], MIN_TIME
    for seq, (k, ts) in enumerate(zip(case["keys"], case["times"])):
        proctime = None if case["clock"] is None else seq * case["clock"]
        arrivals.append((k, Element(seq, ts, watermark, proctime, Row(k=k, ts=ts))))
        watermark = max(watermark, ts - case["delay"] - 1)
    rows = []
    for key, result in sorted(replay(arrivals, _spec(case), lambda e: e.timestamp - case["delay"] - 1).items()):
        for f in result.firings:
            rows.append((key, f.window.start, f.window.end, f.outputs[0].n, f.kind, f.pane, f.cause, f.timer,
                         None if f.watermark in (MIN_TIME, MAX_TIME) else f.watermark,
                         None if f.watermark == MAX_TIME else f.proctime,   # the end of input: no clock
                         f.fired_after, len(f.seqs)))
    return rows


def _spark(case):
    pdf = pd.DataFrame({"k": case["keys"], "ts": case["times"]})
    clock = None if case["clock"] is None else kit.Clock("1970-01-01 00:00:00", Duration.of_millis(case["clock"]))
    windowed = (kit.stream(pdf, time="ts", watermark=Duration.of_millis(case["delay"]), proctime=clock).key_by("k")
                .window(case["assigner"]).trigger(case["trigger"]).allowed_lateness(case["lateness"]))
    if case["evictor"] is not None:
        windowed = windowed.evictor(case["evictor"])
    result = windowed.aggregate(Count(alias="n"))
    assert not fast.eligible(result.spec)
    return [tuple(r) for r in result.df.select(
        "key", "window_start", "window_end", "n", "firing", "pane", "cause", "timer", "watermark",
        F.unix_millis("proctime"), "fired_after", "contents").collect()]


_BEHIND = dict(   # a timer registered behind the watermark fires at its next rise, not at once
    keys=["6a"] * 5 + ["7a"], times=[600012, 600024, 600025, 600025, 600018, 700000],
    assigner=TumblingEventTimeWindows.of(ms(6)), trigger=ContinuousEventTimeTrigger.of(ms(4)), evictor=None,
    lateness=0, delay=3, clock=None)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
@example(_BEHIND)
@example(dict(_BEHIND, trigger=ProcessingTimeTrigger.create(), clock=20_000))   # behind the clock
@example(dict(   # the clock passes the timer at another key's arrival, before the watermark cleans up
    keys=["0a", "1a"], times=[0, 100000], assigner=TumblingEventTimeWindows.of(ms(3)),
    trigger=ProcessingTimeTrigger.create(), evictor=None, lateness=0, delay=0, clock=20_000))
@example(dict(   # the arrivals after a key's last one move its clock: its windows fire
    keys=["a", "b", "a", "b", "c", "c", "c"], times=[0, 1, 2, 3, 4, 5, 6],
    assigner=TumblingProcessingTimeWindows.of(ms(3)), trigger=ProcessingTimeTrigger.create(), evictor=None,
    lateness=0, delay=0, clock=1))
@example(dict(   # ... nothing comes after the last arrival: the timer it registered at its own time fires at once
    keys=["0a", "1a"], times=[0, 100000], assigner=TumblingProcessingTimeWindows.of(ms(3)),
    trigger=ProcessingTimeTrigger.create(), evictor=None, lateness=0, delay=0, clock=20_000))
def test_general_path_equals_the_whole_stream_replay(spark, case):
    expected = _reference(case)
    assert _spark(case) == expected, "a small stream: the whole stream in one operator, in one task"
    with mock.patch.object(sys.modules["kit.spark"], "SMALL_TASK_ROWS", 1):
        assert _spark(case) == expected, "spread over tasks: each key alone, its timer firings placed"


@pytest.mark.parametrize("small_task_rows", [None, 1])
def test_a_processing_time_timer_the_clock_already_reached_fires_right_after_its_arrival(spark, small_task_rows):
    """A window whose end the clock has reached when its element arrives fires right after
    that element, under the watermark the element met (live: in the element's micro-batch,
    before the next one moves the watermark), not before the next arrival; a timer ahead of
    the clock waits for it (here: for ever, the input ends)."""
    pdf = pd.DataFrame({"k": ["a", "b", "c", "d"], "ts": [5, 10, 20, 30]})   # processing times 0, 1, 2, 3 ms
    clock = kit.Clock("1970-01-01 00:00:00", Duration.of_millis(1))
    case = dict(keys=list(pdf.k), times=list(pdf.ts), assigner=TumblingProcessingTimeWindows.of(ms(3)),
                trigger=ProcessingTimeTrigger.create(), evictor=None, lateness=0, delay=0, clock=1)
    want = [("a", 0, 3, 1, "on-time", 0, "processing-time timer", 2, 9, 2, 1, 1),   # before c: the clock reaches 2
            ("b", 0, 3, 1, "on-time", 0, "processing-time timer", 2, 9, 2, 1, 1),
            ("c", 0, 3, 1, "on-time", 0, "processing-time timer", 2, 9, 2, 2, 1)]   # c at 2: right after c
    assert _reference(case) == want
    with mock.patch.object(sys.modules["kit.spark"], "SMALL_TASK_ROWS", small_task_rows or sys.modules[
            "kit.spark"].SMALL_TASK_ROWS):
        result = (kit.stream(pdf, time="ts", watermark=Duration.of_millis(0), proctime=clock).key_by("k")
                  .window(TumblingProcessingTimeWindows.of(ms(3))).aggregate(Count(alias="n")))
        assert [tuple(r) for r in result.df.select(
            "key", "window_start", "window_end", "n", "firing", "pane", "cause", "timer", "watermark",
            F.unix_millis("proctime"), "fired_after", "contents").collect()] == want


def test_a_results_frames_keep_what_it_kept_while_they_live(spark):
    """``result.df``, ``late`` and ``elements()`` written after the result itself is dropped
    (``x.window(...).aggregate(...).df``, the usual chain) read what the result kept instead
    of computing it again; once they are gone too, it is released."""
    def persisted():   # the ids of the RDDs persisted in the JVM
        return set(spark.sparkContext._jsc.getPersistentRDDs().keys())

    gc.collect()
    before = persisted()
    df = spark.createDataFrame([("a", i * 1000) for i in range(20)], "k string, ts long").coalesce(1)
    keyed = kit.stream(df, time="ts").key_by("k")
    session = keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(3))).aggregate(Count())
    frames = [keyed.window(TumblingEventTimeWindows.of(Time.seconds(3))).aggregate(Count()).df,
              session.late, session.elements()]
    del session
    expected = sorted(frames[0].collect())
    ours = persisted() - before
    assert ours
    gc.collect()
    time.sleep(1)   # a release would have run by now (it does not block)
    assert ours <= persisted() and sorted(frames[0].collect()) == expected
    del frames
    gc.collect()
    deadline = time.time() + 30
    while ours & persisted() and time.time() < deadline:
        time.sleep(0.2)
    assert not ours & persisted()


def test_what_a_result_keeps_is_released_when_it_is_garbage(spark):
    """Session windows (their firings and elements kept for the timer placement and
    ``late``/``elements()``) and the fast path (its JVM scan kept): deleted and collected,
    the results leave no persisted data in the JVM."""
    def persisted():   # the ids of the RDDs persisted in the JVM (other tests' garbage may go meanwhile)
        return set(spark.sparkContext._jsc.getPersistentRDDs().keys())

    before = persisted()
    df = spark.createDataFrame([("a", i * 1000) for i in range(20)], "k string, ts long").coalesce(1)
    keyed = kit.stream(df, time="ts").key_by("k")
    results = [keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(3))).aggregate(Count())
               for _ in range(3)] + [keyed.window(TumblingEventTimeWindows.of(Time.seconds(3))).aggregate(Count())]
    for r in results:
        r.df.collect(), r.late.collect(), r.elements().collect()
    ours = persisted() - before
    assert ours
    del r, results
    gc.collect()
    deadline = time.time() + 30
    while ours & persisted() and time.time() < deadline:   # unpersist does not block
        time.sleep(0.2)
    assert not ours & persisted()
