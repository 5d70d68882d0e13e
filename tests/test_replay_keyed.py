"""The per-key replay driver (kit.replay.keyed): state, timers and outputs per key, the same
rows however the keys are spread over tasks; and the conversions it uses (kit.arrow)."""

from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as T

from kit.replay.keyed import KeyedOperator, ListState, MapState, Rows, replay, run_key, spread


def counts():
    """A ``Counts`` operator, its class made here: Spark's workers get it by value."""
    class Counts(KeyedOperator):
        """Rows counted per 10 ms window, emitted when the watermark passes the window's end:
        (key, start, count); rows behind the watermark kept aside, counted at the end of input
        (key, None, count)."""
        state = (MapState("windows"), ListState("late"))

        def process_element(self, row, ctx):
            t, = row
            if t < ctx.watermark:
                ctx.state("late").add(t)
                return
            windows, start = ctx.state("windows"), t - t % 10
            windows[start] = windows.get(start, 0) + 1
            ctx.register_event_time_timer(start + 10)

        def on_timer(self, timestamp, ctx):
            ctx.output((ctx.key[0], timestamp - 10, ctx.state("windows").pop(timestamp - 10)))

        def end_of_input(self, ctx):
            if ctx.state("late").get():
                ctx.output((ctx.key[0], None, len(ctx.state("late").get())))
    return Counts()


def test_run_key_fires_timers_as_the_watermark_passes_them():
    rows, marks = [(1,), (5,), (30,), (2,), (33,)], [None, 0, 4, 29, 29]
    assert run_key(counts(), ["a"], rows, watermarks=marks) == [("a", 0, 2), ("a", 30, 2), ("a", None, 1)]


def test_replay_on_spark_is_the_same_over_any_number_of_tasks(spark):
    data = [(k, t, seq, wm) for seq, (k, t, wm) in enumerate(
        [("a", 1, None), ("b", 2, 0), ("a", 5, 1), ("b", 40, 1), ("a", 30, 39), ("a", 3, 39), ("b", 45, 39)])]
    df = spark.createDataFrame(data, "k string, t long, seq long, wm long")
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("start", T.LongType()),
                           T.StructField("n", T.LongType())])
    expected = [("a", 0, 2), ("a", None, 2), ("b", 0, 1), ("b", 40, 2)]
    operator = type(counts())
    for tasks in (1, 3):
        out = replay(spread(df, ["k"], tasks, "seq"), ["k"], lambda key: operator(), schema, ["t"], watermark="wm")
        assert sorted(map(tuple, out.collect()), key=str) == sorted(expected, key=str)


def test_a_tasks_outputs_are_turned_into_arrow_a_chunk_at_a_time(spark, monkeypatch):
    """``output`` sees at most ``OUTPUT_ROWS`` outputs a call (read when ``replay`` is
    called), in order, keys running on across chunks: a task never holds all of its outputs."""
    import pyarrow as pa

    import kit.replay.keyed as keyed

    monkeypatch.setattr(keyed, "OUTPUT_ROWS", 2)
    df = spark.createDataFrame([("a", t, t, 0) for t in (1, 5, 12, 25, 31)] + [("b", 3, 5, 0)],
                               "k string, t long, seq long, wm long")
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("start", T.LongType()),
                           T.StructField("chunk", T.LongType())])

    def output(table, chunk):   # each output tagged with the size of the chunk it came in
        yield pa.RecordBatch.from_pylist([{"k": k, "start": start, "chunk": len(chunk)} for k, start, _ in chunk],
                                         schema=pa.schema([("k", pa.string()), ("start", pa.int64()),
                                                           ("chunk", pa.int64())]))
    operator = type(counts())
    out = replay(spread(df, ["k"], 1, "seq"), ["k"], lambda key: operator(), schema, ["t"], output=output,
                 watermark="wm")
    assert [tuple(r) for r in out.collect()] == [("a", 0, 2), ("a", 10, 2), ("a", 20, 2), ("a", 30, 2),
                                                  ("b", 0, 1)]


def test_run_task_makes_python_values_a_part_of_whole_keys_at_a_time(monkeypatch):
    """The rows of ``CONVERT_ROWS`` or more, whole keys, at a time: the same outputs."""
    import pyarrow as pa

    import kit.replay.keyed as keyed

    assert list(keyed._parts([(0, 3), (3, 1), (4, 1), (5, 5), (10, 1)], 2)) == \
        [[(0, 3)], [(3, 1), (4, 1)], [(5, 5)], [(10, 1)]]
    assert list(keyed._parts([(0, 1), (1, 4), (5, 1), (6, 2), (8, 1)], 3)) == [[(0, 1)], [(1, 4)], [(5, 1), (6, 2)], [(8, 1)]]
    table = pa.table({"k": ["a", "a", "b", "c", "c", "c"], "t": [1, 5, 2, 3, 15, 40], "wm": [0] * 6})
    operator = type(counts())
    everything = list(keyed.run_task(table, ["k"], lambda key: operator(), ["t"], "wm"))
    monkeypatch.setattr(keyed, "CONVERT_ROWS", 1)
    assert list(keyed.run_task(table, ["k"], lambda key: operator(), ["t"], "wm")) == everything
    assert everything == [[("a", 0, 2)], [("b", 0, 1)], [("c", 0, 1), ("c", 10, 1), ("c", 40, 1)]]


def test_a_large_keys_outputs_are_handed_on_while_it_runs(monkeypatch):
    """A key of more than ``CONVERT_ROWS`` rows is read a slice at a time and its outputs
    leave ``run_task`` in lists of ``OUTPUT_ROWS`` as it runs (an interval join's hot key
    outputs more than memory holds): the first list comes before its last row is read;
    joined up, the same outputs as in one go."""
    import pyarrow as pa

    import kit.replay.keyed as keyed

    class Echo(KeyedOperator):   # every row out twice; counts the rows it has seen
        seen = 0

        def process_element(self, row, ctx):
            Echo.seen += 1
            ctx.output((ctx.key[0], row[0], ctx.watermark))
            ctx.output((ctx.key[0], -row[0], ctx.watermark))
    table = pa.table({"k": ["a"] * 10 + ["b"], "t": list(range(11)), "wm": list(range(11))})
    everything = [o for out in keyed.run_task(table, ["k"], lambda key: Echo(), ["t"], "wm") for o in out]
    monkeypatch.setattr(keyed, "CONVERT_ROWS", 3)
    monkeypatch.setattr(keyed, "OUTPUT_ROWS", 4)
    Echo.seen = 0
    outputs = keyed.run_task(table, ["k"], lambda key: Echo(), ["t"], "wm")
    first = next(outputs)
    assert (first, Echo.seen) == ([("a", 0, 0), ("a", 0, 0), ("a", 1, 1), ("a", -1, 1)], 2)
    rest = list(outputs)
    assert [len(out) for out in rest] == [4, 4, 4, 4, 0, 2]   # "a" in fours, its rest at its end; then "b"
    assert first + [o for out in rest for o in out] == everything
    assert everything[-2:] == [("b", 10, 10), ("b", -10, 10)]


def test_a_rows_operator_reads_its_keys_rows_at_once(spark):
    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "k string, v long")
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("total", T.LongType())])

    def total(table, key):
        yield key[0], sum(table.column("v").to_pylist())
    out = replay(spread(df, ["k"], 2, "v"), ["k"], lambda key: Rows(total), schema)
    assert sorted(map(tuple, out.collect())) == [("a", 4), ("b", 2)]


def test_the_window_operator_steps_per_element_and_fires_when_the_watermark_passes():
    """The window operator on the driver: each element a step, its windows' timers registered
    with the driver, which wakes it (``on_timer``) at the step where the watermark passes
    them; the same result as the reference (``kit.windows.operator.run_key``)."""
    from kit.time import Time
    from kit.windows.assigners import MAX_TIME, MIN_TIME, TumblingEventTimeWindows
    from kit.windows.functions import Contents
    from kit.windows.operator import Element, WindowOperator, WindowSpec, run_key as window_run_key

    assigner = TumblingEventTimeWindows.of(Time.milliseconds(10))
    spec = WindowSpec(assigner, assigner.default_trigger(), Contents("reduce", lambda a, b: a + b))
    marks = [MIN_TIME, 0, 4, 11]
    elements = [Element(seq, ts, wm, None, v) for seq, (ts, wm, v) in enumerate(zip([1, 5, 12, 25], marks, [1, 2, 4, 8]))]
    steps = []

    class Watched(WindowOperator):
        def process_element(self, e, ctx):
            super().process_element(e, ctx)
            steps.append(("element", e.seq, len(self.operator(ctx).result.firings)))

        def on_timer(self, timestamp, ctx):
            super().on_timer(timestamp, ctx)
            steps.append(("timer", timestamp, ctx.watermark, len(self.operator(ctx).result.firings)))

    result, = run_key(Watched(spec), ["a"], elements, watermarks=marks)
    assert steps == [("element", 0, 0), ("element", 1, 0), ("element", 2, 0),
                     ("timer", 9, 11, 1),   # the watermark 11 passed [0, 10)'s end: it fired before the element
                     ("element", 3, 1), ("timer", 19, MAX_TIME, 1)]   # the end of input: end_of_input fires
    firings = [(f.window.start, f.outputs, f.cause, f.watermark, f.seqs) for f in result.firings]
    assert firings == [(0, [3], "event-time timer", 11, [0, 1]), (10, [4], "event-time timer", MAX_TIME, [2]),
                       (20, [8], "event-time timer", MAX_TIME, [3])]
    reference = window_run_key("a", elements, spec)
    assert [(f.window, f.outputs, f.cause, f.watermark) for f in reference.firings] == \
        [(f.window, f.outputs, f.cause, f.watermark) for f in result.firings]
    assert reference.fates == result.fates


def test_the_window_operators_state_pickles_between_elements():
    """A live driver keeps the key's state between batches: the ``WindowOperator``'s one value
    (user functions in it) survives cloudpickle mid-stream, and the key goes on the same."""
    from pyspark import cloudpickle

    from kit.replay.keyed import MAX_TIME, Context
    from kit.time import Time
    from kit.windows.assigners import EventTimeSessionWindows
    from kit.windows.functions import Contents
    from kit.windows.operator import Element, WindowOperator, WindowSpec, run_key as window_run_key

    assigner = EventTimeSessionWindows.with_gap(Time.milliseconds(5))
    spec = WindowSpec(assigner, assigner.default_trigger(), Contents("list"),
                      ("process", lambda key, ctx, values: [(key, ctx.window().start, sum(values))]))
    elements = [Element(seq, ts, wm, None, ts) for seq, (ts, wm) in enumerate([(1, 0), (3, 0), (20, 2), (9, 19), (22, 19)])]
    op, out = WindowOperator(spec), []
    ctx = Context(["a"], op.state, out)
    for i, e in enumerate(elements):
        if i == 2:
            state = ctx.state("operator")
            state.update(cloudpickle.loads(cloudpickle.dumps(state.value())))
        op.process_element(e, ctx)
    ctx.advance(op, MAX_TIME)
    op.end_of_input(ctx)
    reference = window_run_key("a", elements, spec)
    assert [f.outputs for f in out[0].firings] == [f.outputs for f in reference.firings] == [
        [("a", 1, 4)], [("a", 20, 42)]]
    assert out[0].fates == reference.fates


@given(st.lists(st.one_of(st.none(), st.integers(-62_135_596_800_000, 253_402_300_799_999)), max_size=30),
       st.sampled_from(["ms", "us"]))
def test_numpy_timestamps_become_arrow_at_once_as_one_at_a_time(millis, unit):
    """``kit.arrow.column``'s fast path (every value a numpy datetime64 or None, as the
    matcher's measures are live) gives the column the per-value path gives, years 1 to 9999."""
    import numpy as np
    import pyarrow as pa

    from kit.arrow import _datetime, column

    values = [None if v is None else np.datetime64(v, "ms").astype(f"datetime64[{unit}]") for v in millis]
    arrow = pa.timestamp("us", tz="UTC")
    assert column(values, T.TimestampType(), arrow).equals(pa.array([_datetime(v) for v in values], type=arrow))


@given(st.lists(st.one_of(st.none(), st.integers(-62_135_596_800_000, 253_402_300_799_999)), max_size=30))
def test_epoch_milliseconds_become_arrow_at_once_as_one_at_a_time(millis):
    """``kit.arrow.column``'s fast path for epoch milliseconds (every value an int or None, as
    the matcher's TIMESTAMP measures are in a query: ``run_partition(epoch_ms=True)``) gives
    the column the per-value path gives, years 1 to 9999."""
    import pyarrow as pa

    from kit.arrow import _datetime, column

    arrow = pa.timestamp("us", tz="UTC")
    assert column(millis, T.TimestampType(), arrow).equals(pa.array([_datetime(v) for v in millis], type=arrow))




@given(st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1.0, 2.0, float("nan"), None])),
                max_size=30), st.sampled_from([["k"], ["x"], ["k", "x"], []]))
def test_runs_of_equal_keys_are_found_as_group_by_finds_them(rows, keys):
    """``kit.arrow.groups``: each run of rows with equal keys, NULL equal to NULL and NaN to
    NaN (as Spark's GROUP BY), a number beside a NULL or a NaN not; a DOUBLE key with NULLs too."""
    import math

    import pyarrow as pa

    from kit.arrow import groups

    table = pa.table({"k": pa.array([r[0] for r in rows], pa.string()),
                      "x": pa.array([r[1] for r in rows], pa.float64())})

    def same(a, b):
        if a is None or b is None:
            return a is None and b is None
        return a == b or isinstance(a, float) and math.isnan(a) and math.isnan(b)

    runs = []
    for i, row in enumerate(rows):
        if runs and all(same(row[c], rows[i - 1][c]) for c in [["k", "x"].index(k) for k in keys]):
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    assert groups(table, keys) == [tuple(r) for r in runs]
