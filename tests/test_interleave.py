"""``kit.replay.interleave``: two inputs merged beside the smaller one (``flinkkit.Merge``:
each row placed by a search among the other input's keys, no sort) give the rows of the
merge by a sort of both (the reference), whatever the interleaving, processing times,
watermarks and partitions."""

from datetime import datetime, timedelta

from hypothesis import example, given, settings, strategies as st

import kit
from kit import jvm
from kit.replay import interleave
from kit.time import Clock, Duration, WatermarkStrategy

SCHEMA = "k string, t long, p timestamp"


@st.composite
def inputs(draw):
    """Two sides of ``(key, time, processing time)`` rows in arrival order (times that go back
    and tie across sides), each with its partitions and watermark delay; the interleaving and
    the processing time (a clock, a column or none; ``proctime`` needs one)."""
    def side():
        steps = draw(st.lists(st.tuples(st.sampled_from("ab"), st.integers(-3, 4), st.integers(0, 3)), max_size=25))
        t, p, rows = 0, datetime(2024, 1, 1), []
        for k, dt, dp in steps:
            t, p = t + dt, p + timedelta(milliseconds=dp)
            rows.append((k, t, p))
        return rows, draw(st.integers(1, 3)), draw(st.integers(0, 4))

    how = draw(st.sampled_from(interleave.INTERLEAVINGS))
    proctime = draw(st.sampled_from(["clock", "column"] + ([] if how == "proctime" else [None])))
    return side(), side(), how, proctime


def _rows(*times):
    return [("a", t, datetime(2024, 1, 1) + timedelta(milliseconds=t)) for t in times]


@settings(max_examples=5, deadline=None)
@given(inputs())
@example(((_rows(1, 3, 5, 4), 2, 0), (_rows(3), 1, 0), "event_time", None))      # ties: the right row first
@example(((_rows(3), 1, 1), (_rows(1, 3, 3, 5), 2, 0), "proctime", "column"))   # the smaller input on the left
def test_the_merge_beside_the_smaller_input_equals_the_sorted_merge(spark, case):
    left, right, how, proctime = case
    assert jvm.available(spark, "Merge")

    def stream(rows, partitions, delay):
        df = spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), SCHEMA)   # rows not known: no one task
        more = {"clock": {"proctime": Clock(datetime(2024, 1, 1), Duration.of_millis(3))},
                "column": {"proctime": "p"}, None: {}}[proctime]
        return kit.stream(df, time="t", watermark=WatermarkStrategy.for_sql_delay(Duration(delay)), **more)

    merged, searched = {}, []

    def counted(*args):
        searched.append(args[1])
        return jvm.merge_counted(*args)

    for small_side in (-1, interleave.SMALL_SIDE):   # -1: every input too large, sorted
        bound, interleave.SMALL_SIDE, interleave.merge_counted = interleave.SMALL_SIDE, small_side, counted
        try:
            out = interleave.interleaved(stream(*left), stream(*right), how, keys=[("k", "k")])
        finally:
            interleave.SMALL_SIDE, interleave.merge_counted = bound, jvm.merge_counted
        assert interleave.tasks(out) > 1
        merged[small_side] = sorted(map(tuple, out.collect()), key=lambda r: r[0])
    assert searched == ["_k"]   # the second merge alone
    assert merged[-1] == merged[interleave.SMALL_SIDE]
    assert [r[0] for r in merged[-1]] == list(range(len(left[0]) + len(right[0])))
