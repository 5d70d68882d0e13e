"""The per-key replay driver (kit.replay.keyed): state, timers and outputs per key, the same
rows however the keys are spread over tasks."""

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


def test_a_rows_operator_reads_its_keys_rows_at_once(spark):
    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "k string, v long")
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("total", T.LongType())])

    def total(table, key):
        yield key[0], sum(table.column("v").to_pylist())
    out = replay(spread(df, ["k"], 2, "v"), ["k"], lambda key: Rows(total), schema)
    assert sorted(map(tuple, out.collect())) == [("a", 4), ("b", 2)]
