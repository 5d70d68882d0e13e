"""Live mode: the same per-key operator on Spark Structured Streaming as on the replay.

Each test drops its micro-batches as files into a folder (one file per batch,
``maxFilesPerTrigger=1``), runs the query until the folder is read (``availableNow``) and
collects what each batch gave; the replay of the recorded arrivals (each with the watermark
it met) must give the same outputs."""

import datetime as dt
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.sql import types as T

import kit
from kit import Duration, WatermarkStrategy
from kit.errors import KitError
from kit.live import LiveRun
from kit.live.memory import land
from kit.live.stream import LiveStream
from kit.replay.keyed import MIN_TIME, KeyedOperator, ValueState, run_key
from kit.time import Time
from kit.widgets import watch
from kit.windows import (Aggregates, ContinuousProcessingTimeTrigger, Count, EventTimeSessionWindows,
                         SlidingEventTimeWindows, SlidingProcessingTimeWindows, Sum, TumblingEventTimeWindows,
                         TumblingProcessingTimeWindows, WindowWarning)


class CountPerKey(KeyedOperator):
    """A count per key, output when the watermark passes ``t + 10`` of each element."""
    state = (ValueState("n"),)

    def process_element(self, row, ctx):
        t, = row
        n = ctx.state("n")
        n.update((n.value() or 0) + 1)
        ctx.register_event_time_timer(t + 10)

    def on_timer(self, timestamp, ctx):
        ctx.output((ctx.key[0], timestamp, ctx.state("n").value()))


cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the workers get this module's operators by value

OUTPUT = T.StructType([T.StructField("k", T.StringType()), T.StructField("timer", T.LongType()),
                       T.StructField("n", T.LongType())])


def write(folder, i, frame):
    """``frame`` as the ``i``-th file of ``folder``: Spark's file source takes files by their
    modification time (in ms), so the i-th is i seconds after the first; it lands whole."""
    land(folder / f"{i:04d}.parquet", frame.to_parquet, 1_700_000_000 + i)


def run_live(spark, tmp_path, batches, run, operator, output):
    """``batches`` (lists of (k, t) rows) through ``operator`` live: {batch id: rows}."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i, rows in enumerate(batches):
        write(folder, i, pd.DataFrame(rows, columns=["k", "t"]))
    source = spark.readStream.schema("k string, t long").option("maxFilesPerTrigger", 1).parquet(str(folder))
    seen = {}
    query = (run.process(source, operator, output).writeStream
             .foreachBatch(lambda df, batch: seen.__setitem__(batch, [r.asDict() for r in df.collect()]))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    return seen


def replayed(seen, operator, end):
    """The recorded arrivals, key by key in arrival order with the watermarks they met,
    through ``operator`` on the replay driver, the watermark then at ``end`` (the stream
    still runs: no end of input)."""
    arrivals = sorted(((b, r["_arr"], r["_c0"], r["_ts"], r["_wm"]) for b, rows in seen.items() for r in rows
                       if r["_kind"] == "arrival"), key=lambda a: (a[2], a[0], a[1]))
    out = []
    for key, rows in itertools.groupby(arrivals, key=lambda a: a[2]):
        rows = list(rows)
        run_key(operator, [key], [(r[3],) for r in rows], watermarks=[r[4] for r in rows], out=out, end=end)
    return sorted(out)


BATCHES = [[("a", 1), ("b", 3)], [("a", 12), ("a", 2)], [("b", 30)], [("a", 40)], [("c", 41)]]


def test_a_keyed_operator_live_gives_what_the_replay_of_its_arrivals_gives(spark, tmp_path):
    run = LiveRun("t", WatermarkStrategy.for_monotonous_timestamps(), keys=("k",), columns=("k",), row=("_ts",))
    seen = run_live(spark, tmp_path, BATCHES, run, CountPerKey(), OUTPUT)
    arrivals = [[(r["_c0"], r["_ts"], r["_wm"]) for r in rows if r["_kind"] == "arrival"] for _, rows in sorted(seen.items())]
    # every row of a batch met the watermark after all earlier batches: max t - 1
    assert [a for a in arrivals if a] == [[("a", 1, MIN_TIME), ("b", 3, MIN_TIME)], [("a", 12, 2), ("a", 2, 2)],
                                          [("b", 30, 11)], [("a", 40, 29)], [("c", 41, 39)]]
    outputs = {b: sorted((r["_o0"], r["_o1"], r["_o2"]) for r in rows if r["_kind"] == "output")
               for b, rows in seen.items()}
    # a's timer at 11 fires in batch 2, where the watermark reaches 11 (a has no rows there:
    # a Spark timer wakes it); a's at 12 and 22 and b's at 13 in batch 3 (29); b's at 40
    # once the watermark reaches 40, in the batch Spark runs without rows after the last
    assert {b: o for b, o in outputs.items() if o} == {
        2: [("a", 11, 3)], 3: [("a", 12, 3), ("a", 22, 3), ("b", 13, 2)], 5: [("b", 40, 2)]}
    assert sorted(itertools.chain(*outputs.values())) == replayed(seen, CountPerKey(), end=40)


def test_live_needs_a_watermark_of_the_largest_time():
    with pytest.raises(KitError, match="live mode follows a watermark of the largest event time seen"):
        LiveRun("t", WatermarkStrategy.from_column("w"), keys=("k",), columns=("k",), row=("_ts",))


def killed_at_batch(script: str, path, batch: int) -> None:
    """``script`` run in another Python process, killed (SIGKILL) once its live query under
    ``path`` has written the arrivals of micro-batch ``batch``: the whole driver, its Python
    and its JVM (which would go on writing the checkpoint for a while after its Python died)."""
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        deadline = time.time() + 300
        while not (path / "rows" / "_kind=arrival" / f"batch={batch}").exists():
            assert child.poll() is None and time.time() < deadline, f"the live query did not get to batch {batch}"
            time.sleep(0.05)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        while _alive(child.pid):
            time.sleep(0.05)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def drop(folder, batches, columns="k string, t long, v long", first=0):
    """Each batch of rows as its own Parquet file in ``folder``, in order (from the ``first``-th)."""
    names = [c.split()[0] for c in columns.split(", ")]
    longs = {c.split()[0]: "Int64" for c in columns.split(", ") if c.split()[1] == "long"}
    folder.mkdir(exist_ok=True)
    for i, rows in enumerate(batches, first):
        write(folder, i, pd.DataFrame(rows, columns=names).astype(longs))


WINDOW_BATCHES = [[("a", 1, 1), ("b", 3, 10)], [("a", 12, 2), ("a", 4, None)], [("b", 25, 20), ("a", 2, 4)],
                  [("a", 14, 5), ("b", 8, 30)], [("c", 41, 100)], [("a", 30, 6)]]


@pytest.mark.parametrize("assigner", ["tumbling", "sliding", "session"])
def test_live_windows_fire_as_the_replay_of_what_they_saw(spark, tmp_path, assigner):
    """Firings and late elements of a keyed window live equal those of its recorded
    arrivals replayed (the replay's end-of-input firings aside: the live stream goes on),
    with allowed lateness and late elements; every row of a batch met one watermark. A NULL
    value stays NULL (not a float NaN, as a pandas frame would have it)."""
    drop(tmp_path / "in", WINDOW_BATCHES)
    source = spark.readStream.schema("k string, t long, v long").option("maxFilesPerTrigger", 1).parquet(
        str(tmp_path / "in"))
    live = kit.live(source, time="t", watermark=Duration.of_millis(2))
    assert isinstance(live, LiveStream)
    window = {"tumbling": TumblingEventTimeWindows.of(Time.milliseconds(10)),
              "sliding": SlidingEventTimeWindows.of(Time.milliseconds(10), Time.milliseconds(5)),
              "session": EventTimeSessionWindows.with_gap(Time.milliseconds(5))}[assigner]
    result = (live.key_by("k").window(window).allowed_lateness(Time.milliseconds(3))
              .aggregate(Aggregates(Count(alias="n"), Sum("v", alias="s"))))
    run = result.start(str(tmp_path / "run"), trigger="available_now")
    run.await_termination()
    got = [tuple(r) for r in run.df.drop("batch").collect()]
    replay = run.replay()
    want = [tuple(r) for r in replay.df.where(f"watermark_ms < {2 ** 63 - 1}").select(*run.df.drop("batch").columns)
            .collect()]
    assert got == want and len(got) >= 4
    assert run.late.count() >= 1
    assert [tuple(r) for r in run.late.drop("batch").collect()] == [
        tuple(r) for r in replay.late.select("k", "t", "v", "watermark").collect()]
    # the watermark each arrival met is the one after all earlier batches (max t - 2 - 1)
    met = [(r.batch, r._wm) for r in run.arrivals.collect()]
    assert met == [(0, MIN_TIME), (0, MIN_TIME), (1, 0), (1, 0), (2, 9), (2, 9), (3, 22), (3, 22), (4, 22), (5, 38)]


@pytest.mark.parametrize("assigner", ["tumbling", "sliding", "early firings"])
def test_processing_time_windows_live_fire_as_the_replay_of_what_they_saw(spark, tmp_path, assigner):
    """Processing-time windows live: each row arrives at its micro-batch's time, a window
    fires in the first batch at or after its end, with data or not (Spark runs one at every
    trigger); the replay of the recorded arrivals, its clock run on to the last committed
    batch's time, fires the same windows with the same contents. An event-time window with
    a processing-time trigger fires early on the clock until the watermark ends it (its
    windows end after the clock, as they must: one behind it would fire without end, in
    Flink too: event times from the next minute on)."""
    window = {"tumbling": TumblingProcessingTimeWindows.of(Time.milliseconds(500)),
              "sliding": SlidingProcessingTimeWindows.of(Time.milliseconds(600), Time.milliseconds(300)),
              "early firings": TumblingEventTimeWindows.of(Time.minutes(1))}[assigner]
    minute = 0 if assigner != "early firings" else (time.time_ns() // 60_000_000_000 + 1) * 60_000
    batches = [[("a", minute + 1, 1), ("a", minute + 2, 2), ("b", minute + 3, 3)],
               [("a", minute + 4, 4), ("c", minute + 5, 5)]]
    if assigner == "early firings":
        batches.append([("a", minute + 60_001, 6)])   # the watermark passes the first windows: they go
    drop(tmp_path / "in", batches[:1])
    source = spark.readStream.schema("k string, t long, v long").option("maxFilesPerTrigger", 1).parquet(
        str(tmp_path / "in"))
    windowed = kit.live(source, time="t").key_by("k").window(window)
    if assigner == "early firings":
        windowed = windowed.trigger(ContinuousProcessingTimeTrigger.of(Time.milliseconds(300)))
    run = windowed.aggregate(Count(alias="n")).start(str(tmp_path / "run"), trigger="100 milliseconds")
    try:
        run.process_all_available()
        for i, rows in enumerate(batches[1:], 1):
            drop(tmp_path / "in", [rows], first=i)
            run.process_all_available()
        last = max(r._pt for r in run.arrivals.collect())
        deadline = time.time() + 60
        while run.applied_proctime() < last + 700 and time.time() < deadline:   # every window of them ended
            time.sleep(0.05)
    finally:
        run.stop()
    got = [tuple(r) for r in run.df.drop("batch").collect()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WindowWarning)   # both clocks: the replay runs in one operator
        want = [tuple(r) for r in run.replay().df.select(*run.df.drop("batch").columns).collect()]
    assert got == want
    with_rows = {r.batch for r in run.arrivals.collect()}
    assert {r.batch for r in run.df.collect()} - with_rows   # some fired in a batch without data
    assert run.df.where("cause != 'processing-time timer'").count() == 0
    if assigner == "early firings":   # fired on the clock, the first windows until the watermark passed them
        assert {r.window_start for r in run.df.collect()} == {minute, minute + 60_000}
        ended = min(r.batch for r in run.arrivals.collect() if r.t == minute + 60_001) + 1
        assert max(r.batch for r in run.df.where(f"window_start = {minute}").collect()) <= ended
    else:   # every row fired, in each of its windows
        assert sum(r.n for r in run.df.collect()) == 5 * (1 if assigner == "tumbling" else 2)


def _window_run(spark, folder, path, trigger="available_now"):
    source = spark.readStream.schema("k string, t long, v long").option("maxFilesPerTrigger", 1).parquet(str(folder))
    return (kit.live(source, time="t", watermark=Duration.of_millis(2)).key_by("k")
            .window(TumblingEventTimeWindows.of(Time.milliseconds(10))).allowed_lateness(Time.milliseconds(3))
            .aggregate(Count(alias="n")).start(str(path), trigger=trigger))


def test_a_stopped_live_window_goes_on_from_its_checkpoint(spark, tmp_path):
    """Stopped after three batches and started again on the same path, with more files
    come meanwhile: the firings and late rows are the uninterrupted run's, none twice."""
    drop(tmp_path / "all", WINDOW_BATCHES)
    whole = _window_run(spark, tmp_path / "all", tmp_path / "whole")
    whole.await_termination()
    drop(tmp_path / "some", WINDOW_BATCHES[:3])
    first = _window_run(spark, tmp_path / "some", tmp_path / "run")
    first.await_termination()
    assert first.status["batch"] is not None and not first.status["active"]
    drop(tmp_path / "some", WINDOW_BATCHES[3:], first=3)
    again = _window_run(spark, tmp_path / "some", tmp_path / "run")
    again.await_termination()
    # the batches are numbered apart (the stopped run had one more, with no rows, that fired
    # what its watermark passed): the rest is the same
    assert again.df.drop("batch").collect() == whole.df.drop("batch").collect() and whole.df.count() >= 4
    assert again.late.drop("batch").collect() == whole.late.drop("batch").collect() and whole.late.count() >= 1
    assert again.arrivals.count() == sum(map(len, WINDOW_BATCHES))


def test_a_restart_reads_files_spark_picked_before_a_crash_one_batch_at_a_time(spark, tmp_path):
    """Spark's file source logs the files of its next batch before the batch is planned: a
    run killed in between leaves an entry no batch read (forged here: the next file's). The
    restarted run reads each file in a batch of its own, as the uninterrupted run did (Spark
    would read that file with the next: one batch, one watermark, and a late row on time)."""
    drop(tmp_path / "all", WINDOW_BATCHES)
    whole = _window_run(spark, tmp_path / "all", tmp_path / "whole")
    whole.await_termination()
    drop(tmp_path / "some", WINDOW_BATCHES[:3])
    _window_run(spark, tmp_path / "some", tmp_path / "run").await_termination()
    drop(tmp_path / "some", WINDOW_BATCHES[3:], first=3)
    log = tmp_path / "run" / "_checkpoint" / "sources" / "0"
    last = max(int(p.name) for p in log.glob("[0-9]*"))
    entry = {"path": (tmp_path / "some" / "0003.parquet").as_uri(), "timestamp": 1_700_000_003_000, "batchId": last + 1}
    (log / str(last + 1)).write_text("v1\n" + json.dumps(entry))
    again = _window_run(spark, tmp_path / "some", tmp_path / "run")
    again.await_termination()
    per_batch = [len(list(rows)) for _, rows in itertools.groupby(again.arrivals.collect(), key=lambda r: r.batch)]
    assert per_batch == list(map(len, WINDOW_BATCHES))
    assert again.df.drop("batch").collect() == whole.df.drop("batch").collect()
    assert again.late.drop("batch").collect() == whole.late.drop("batch").collect() and whole.late.count() >= 1


def test_a_memory_stream_makes_a_micro_batch_of_each_add_data(spark, tmp_path):
    """``kit.MemoryStream``: each ``add_data`` is one micro-batch, in order, TIMESTAMP values
    as given (naive: UTC); the windows over it are the replay's of what they saw."""
    stream = kit.MemoryStream("k STRING, t TIMESTAMP, v BIGINT", folder=tmp_path / "memory")
    at = lambda ms: dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=ms)   # noqa: E731
    for rows in WINDOW_BATCHES[:4]:
        stream.add_data([(k, at(t), v) for k, t, v in rows])
    stream.add_data([{"k": "c", "t": at(41), "v": 100}])
    run = (kit.live(stream.df, time="t", watermark=Duration.of_millis(2)).key_by("k")
           .window(TumblingEventTimeWindows.of(Time.milliseconds(10))).aggregate(Count(alias="n"))
           .start(str(tmp_path / "run"), trigger="available_now"))
    run.await_termination()
    batches = itertools.groupby(run.arrivals.collect(), key=lambda r: r.batch)
    got = [[(r.k, r.t, r.v) for r in rows] for _, rows in batches]
    assert got == [[(k, at(t), v) for k, t, v in rows] for rows in WINDOW_BATCHES[:5]]
    want = run.replay().df.where(f"watermark_ms < {2 ** 63 - 1}").select(*run.df.drop("batch").columns)
    assert run.df.drop("batch").collect() == want.collect() and run.df.count() >= 3
    assert repr(stream) == "MemoryStream(struct<k:string,t:timestamp,v:bigint>, 5 batches added)"


@pytest.mark.parametrize("schema, rows, message", [
    ("k STRING,, t", [], "schema must be a DDL string"),
    ("k STRING, t BIGINT", [], "add_data needs at least one row"),
    ("k STRING, t BIGINT", [("a",)], r"a row is a tuple of 2 values \(k, t\) or a dict; got \('a',\)"),
    ("k STRING, t BIGINT", [{"k": "a", "x": 1}], r"\['x'\] are not columns; columns are \['k', 't'\]"),
    ("k STRING, t BIGINT", [("a", "soon")], "the rows do not fit the schema struct<k:string,t:bigint>"),
])
def test_a_memory_stream_says_what_is_wrong(spark, tmp_path, schema, rows, message):
    with pytest.raises(KitError, match=message):
        kit.MemoryStream(schema, folder=tmp_path).add_data(rows)


def test_live_mode_says_what_it_does_not_run(spark, tmp_path):
    source = spark.readStream.schema("k string, t long").parquet(str(tmp_path))
    live = kit.live(source, time="t")
    with pytest.raises(KitError, match="trigger='available_now' never stops with processing-time timers"):
        live.key_by("k").window(TumblingProcessingTimeWindows.of(Time.seconds(1))).aggregate(Count()).start(
            str(tmp_path / "run"), trigger="available_now")
    with pytest.raises(KitError, match="pass output_type="):
        live.key_by("k").window(TumblingEventTimeWindows.of(Time.seconds(1))).process(lambda *a: [])
    with pytest.raises(KitError, match=r"output column\(s\) \['window_end'\]"):
        live.key_by("k").window(TumblingEventTimeWindows.of(Time.seconds(1))).aggregate(Count(alias="window_end"))
    with pytest.raises(KitError, match="kit.live\\(\\) takes a streaming DataFrame"):
        kit.live(spark.range(3), time="id")
    with pytest.raises(KitError, match="time column 'x' is not a column"):
        kit.live(source, time="x")


KILLED = """
import sys, time
sys.path.insert(0, {root!r})
import kit
from kit import Duration
from kit.time import Time
from kit.windows import Count, TumblingEventTimeWindows
spark = kit.spark()
source = spark.readStream.schema("k string, t long, v long").option("maxFilesPerTrigger", 1).parquet({folder!r})
run = (kit.live(source, time="t", watermark=Duration.of_millis(2)).key_by("k")
       .window(TumblingEventTimeWindows.of(Time.milliseconds(10))).allowed_lateness(Time.milliseconds(3))
       .aggregate(Count(alias="n")).start({path!r}))
time.sleep(600)   # killed before
"""


def test_a_live_window_killed_mid_stream_restarts_with_nothing_lost_or_doubled(spark, tmp_path):
    """The driver process killed (SIGKILL) while batches run, then the query started again
    on its path: the firings and late rows equal an uninterrupted run's."""
    drop(tmp_path / "in", WINDOW_BATCHES)
    whole = _window_run(spark, tmp_path / "in", tmp_path / "whole")
    whole.await_termination()
    drop(tmp_path / "killed", WINDOW_BATCHES[:4])   # the last two come after the kill: it is mid-stream
    script = KILLED.format(root=str(Path(__file__).parents[1]), folder=str(tmp_path / "killed"),
                           path=str(tmp_path / "run"))
    killed_at_batch(script, tmp_path / "run", 2)   # mid-stream
    drop(tmp_path / "killed", WINDOW_BATCHES[4:], first=4)
    again = _window_run(spark, tmp_path / "killed", tmp_path / "run")
    again.await_termination()
    assert again.df.drop("batch").collect() == whole.df.drop("batch").collect()
    assert again.late.drop("batch").collect() == whole.late.drop("batch").collect()
    assert again.arrivals.drop("batch", "_pt").collect() == whole.arrivals.drop("batch", "_pt").collect()


def test_rows_without_event_time_go_aside_and_the_query_goes_on(spark, tmp_path):
    batches = [[("a", 1, 1), ("b", None, 2)], [("a", 12, 3)], [("a", None, 4), ("a", 30, 5)]]
    drop(tmp_path / "in", batches)
    run = _window_run(spark, tmp_path / "in", tmp_path / "run")
    run.await_termination()
    assert [tuple(r) for r in run.bad.collect()] == [
        ("b", None, 2, "NULL event time in column 't': Flink rejects the row", 0),
        ("a", None, 4, "NULL event time in column 't': Flink rejects the row", 2)]
    assert [(r.k, r.t) for r in run.arrivals.collect()] == [("a", 1), ("a", 12), ("a", 30)]
    assert [(r.key, r.window_start, r.n) for r in run.df.collect()] == [("a", 0, 1), ("a", 10, 1)]
    assert run.status["watermark"] == 30 - 2 - 1 and run.status["rows"] is not None


def test_a_changed_window_on_an_old_checkpoint_says_what_changed(spark, tmp_path):
    """Its state was made by other operators: the kit refuses to go on from it, naming the
    difference (Spark cannot see it: the state is one pickled value per key)."""
    drop(tmp_path / "in", WINDOW_BATCHES[:2])
    _window_run(spark, tmp_path / "in", tmp_path / "run").await_termination()
    source = spark.readStream.schema("k string, t long, v long").parquet(str(tmp_path / "in"))
    changed = (kit.live(source, time="t", watermark=Duration.of_millis(2)).key_by("k")
               .window(TumblingEventTimeWindows.of(Time.milliseconds(20))).aggregate(Count(alias="n")))
    with pytest.raises(KitError, match=r"holds the checkpoint of another query \(allowed_lateness: 3 -> 0; window: "
                                       r"'TumblingEventTimeWindows.of\(Time.milliseconds\(10\)\)' -> "
                                       r"'TumblingEventTimeWindows.of\(Time.milliseconds\(20\)\)'\)"):
        changed.start(str(tmp_path / "run"))


def test_a_window_on_spark_rate_source_fires_as_the_replay_of_what_it_saw(spark, tmp_path):
    """Spark's rate source (deterministic rows per micro-batch), stopped wherever it is: the
    replay of the record ends at the watermark of the last committed batch (one without
    data, where Spark fired the timers its watermark passed, included), so it fires what the
    live run fired, no more."""
    source = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 4).option("startTimestamp", 0)
              .option("advanceMillisPerBatch", 500).load().selectExpr("timestamp", "CAST(value % 3 AS STRING) AS k"))
    run = (kit.live(source, time="timestamp", watermark=Duration.of_millis(100)).key_by("k")
           .window(TumblingEventTimeWindows.of(Time.seconds(1))).aggregate(Count(alias="n"))
           .start(str(tmp_path / "run"), trigger="500 milliseconds"))
    deadline = time.time() + 120
    while (run.status["batch"] or 0) < 4:
        assert time.time() < deadline, "the rate source's query did not get to batch 4"
        time.sleep(0.2)
    run.stop()
    got = [tuple(r) for r in run.df.drop("batch").collect()]
    want = run.replay().df.where(f"watermark_ms < {2 ** 63 - 1}").select(*run.df.drop("batch").columns)
    assert got == [tuple(r) for r in want.collect()] and len(got) >= 3


def test_a_window_on_a_socket_source_fires_as_the_replay_of_what_it_saw(spark, tmp_path):
    """Spark's socket source (text lines, parsed by the user's select): lines sent in two
    bursts, each read by the query as it comes; the firings are the replay's of the record,
    and a line whose time does not parse is bad, with the query going on."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    sent = threading.Event()
    bursts = [["a,1", "b,3", "a,12"], ["a,4", "b,25", "x,oops", "a,30"]]

    def serve():
        conn, _ = server.accept()
        with conn:
            for lines in bursts:
                conn.sendall(("\n".join(lines) + "\n").encode())
                sent.wait(60)   # the next burst once the first went through
                sent.clear()
            sent.wait(60)       # open until the test is done

    threading.Thread(target=serve, daemon=True).start()
    lines = (spark.readStream.format("socket").option("host", "127.0.0.1").option("port", port).load()
             .selectExpr("split(value, ',')[0] AS k", "TRY_CAST(split(value, ',')[1] AS BIGINT) AS t"))
    run = (kit.live(lines, time="t", watermark=Duration.of_millis(2)).key_by("k")
           .window(TumblingEventTimeWindows.of(Time.milliseconds(10))).aggregate(Count(alias="n"))
           .start(str(tmp_path / "run")))
    try:
        for lines_so_far in itertools.accumulate(len(b) for b in bursts):
            deadline = time.time() + 120
            while run.arrivals.count() + run.bad.count() < lines_so_far:
                assert time.time() < deadline, "the socket's lines did not reach the query"
                time.sleep(0.2)
            sent.set()
        run.process_all_available()
    finally:
        run.stop()
        sent.set()
        server.close()
    got = [tuple(r) for r in run.df.drop("batch").collect()]
    want = run.replay().df.where(f"watermark_ms < {2 ** 63 - 1}").select(*run.df.drop("batch").columns)
    assert got and got == [tuple(r) for r in want.collect()]
    assert [tuple(r) for r in run.bad.select("k", "t").collect()] == [("x", None)]


def test_a_watched_live_query_is_redrawn_in_place_as_batches_commit(spark, tmp_path):
    """``kit.widgets.watch``: the output drawn when the view is made, redrawn as batches
    commit, and after ``wait()`` it shows what the stopped query's last batch left."""
    drop(tmp_path / "in", WINDOW_BATCHES)
    source = spark.readStream.schema("k string, t long, v long").option("maxFilesPerTrigger", 1).parquet(
        str(tmp_path / "in"))
    run = (kit.live(source, time="t", watermark=Duration.of_millis(2)).key_by("k")
           .window(TumblingEventTimeWindows.of(Time.milliseconds(10))).aggregate(Count(alias="n"))
           .start(str(tmp_path / "run"), trigger="available_now"))
    view = watch(run, lambda run: f"{run.df.count()} firings")
    view.wait()
    assert view.data["text/plain"] == f"'{run.df.count()} firings'" and run.df.count() > 0
    assert view.redraws >= 2 and not run.query.isActive


def test_a_malformed_parquet_file_stops_the_query_with_a_line_or_goes_to_bad(spark, tmp_path):
    """A file in the folder that is no Parquet file: read as it is, the query stops and says
    which file and how to go on (no Java trace); read with ``ignoreCorruptFiles``, the query
    goes on past it, and ``bad`` lists it with the batch that met it."""
    drop(tmp_path / "in", [[("a", 1, 1)], [("a", 12, 2)]])
    land(tmp_path / "in" / "0002.parquet", lambda aside: aside.write_bytes(b"PAR1 half a file"), 1_700_000_002)
    drop(tmp_path / "in", [[("b", 30, 3)]], first=3)

    def hourly(path, **options):
        source = spark.readStream.schema("k string, t long, v long").option("maxFilesPerTrigger", 1).options(
            **options).parquet(str(tmp_path / "in"))
        return (kit.live(source, time="t", watermark=Duration.of_millis(2)).key_by("k")
                .window(TumblingEventTimeWindows.of(Time.milliseconds(10))).aggregate(Count(alias="n"))
                .start(str(tmp_path / path), trigger="available_now"))

    with pytest.raises(KitError, match=r"^the live query stopped: Spark could not read \S+/0002.parquet \(.*is not a "
                                       r"Parquet file.*\)\. Read the folder with \.option\('ignoreCorruptFiles', "
                                       r"'true'\)[^\n]*$"):
        hourly("stops").await_termination()
    run = hourly("goes_on", ignoreCorruptFiles="true")
    run.await_termination()
    assert [(r.key, r.window_start, r.n) for r in run.df.collect()] == [("a", 0, 1), ("a", 10, 1)]
    ((reason, batch),) = [(r.reason, r.batch) for r in run.bad.collect()]
    assert batch == 2 and reason.startswith("malformed file (Spark could not read it: ") and reason.endswith(
        "/0002.parquet")
    assert run.arrivals.count() == 3
