"""Continuous queries live: ``kit.sql`` over ``kit.live(...)`` on Spark Structured Streaming.

Each test drops micro-batches as files into a folder (one file a batch), runs the queries
until the folder is read (``available_now``), and compares each live changelog with the
replay of the arrivals the run recorded (each with the watermark it met): row for row."""

import random
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

import kit
from kit import Duration
from kit.errors import KitError
from kit.time import Time
from kit.windows import Count, TumblingEventTimeWindows

from test_live import drop, killed_at_batch

COLUMNS = "word string, t long, v long"


def generated(seed=7, batches=4, rows=7):
    """Batches of (word, t, v): few words (keys that update), times out of order with rows
    far behind the watermark, a NULL time now and then, repeated values (ties)."""
    rng, top, out = random.Random(seed), 0, []
    for _ in range(batches):
        batch = []
        for _ in range(rows):
            top += rng.randint(0, 40)
            t = None if rng.random() < 0.06 else max(0, top - rng.choice([0, 0, 5, 30, 120]))
            batch.append((rng.choice("abcd"), t, rng.choice([1, 2, 2, 3, 5, None])))
        out.append(batch)
    return out


def source(spark, folder):
    return spark.readStream.schema(COLUMNS).option("maxFilesPerTrigger", 1).parquet(str(folder))


def changes(frame) -> list:
    return [tuple(r) for r in frame.collect()]


QUERIES = {
    "group aggregate": "SELECT word, COUNT(*) AS n, SUM(v) AS total, MIN(v) AS low, MAX(t) AS last, "
                       "AVG(v) AS mean, COUNT(DISTINCT v) AS kinds FROM s GROUP BY word",
    "cascade": "SELECT n, COUNT(*) AS freq FROM (SELECT word, COUNT(*) AS n FROM s GROUP BY word) GROUP BY n",
    "global aggregate": "SELECT COUNT(*) AS n, MAX(v) AS top FROM s WHERE v IS NOT NULL",
    "top-2 per key": "SELECT word, t, v, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY word "
                     "ORDER BY v DESC, t ASC) AS rn FROM s) WHERE rn <= 2",
    "top-1 over counts": "SELECT word, n FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY n DESC, word ASC) AS rn "
                         "FROM (SELECT word, COUNT(*) AS n FROM s GROUP BY word)) WHERE rn = 1",
    "deduplicate last on event time": "SELECT word, t, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY word "
                                      "ORDER BY t DESC) AS rn FROM s) WHERE rn = 1",
    "over": "SELECT word, v, SUM(t) OVER (PARTITION BY word ORDER BY v ROWS BETWEEN UNBOUNDED PRECEDING "
            "AND CURRENT ROW) AS running FROM s",
    "distinct": "SELECT DISTINCT word, v FROM s",
    "filter": "SELECT word, t + 1 AS next FROM s WHERE v > 1",
}


def test_each_continuous_query_live_gives_the_changelog_of_its_replay(spark, tmp_path):
    """Every family live (group aggregates with retractions, the cascade, a global
    aggregate, Top-N over rows and over updates, deduplication, OVER, DISTINCT, a filter)
    over batches with disorder, late rows and NULL times: the changelog equals the
    replay's of the recorded arrivals, row for row, with the watermark each arrival met."""
    batches = generated()
    drop(tmp_path / "in", batches, COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t", watermark=Duration.of_millis(20))
    runs = {name: kit.sql(q, s=live).start(str(tmp_path / name.replace(" ", "_")), trigger="available_now")
            for name, q in QUERIES.items()}
    nulls = sum(t is None for b in batches for _, t, _ in b)
    for name, run in runs.items():
        run.await_termination()
        live_rows = changes(run.changelog().drop("batch"))
        assert live_rows, name
        assert live_rows == changes(run.replay().changelog()), name
        assert run.bad.count() == nulls and run.arrivals.count() == sum(map(len, batches)) - nulls, name
    # the record: every arrival with the watermark it met, the one after the batches before
    arrivals = runs["filter"].arrivals.collect()
    for a in arrivals:
        before = [b.t for b in arrivals if b.batch < a.batch]
        assert a._wm == (max(before) - 20 - 1 if before else None)


def test_a_live_streams_proctime_column_is_its_micro_batchs_processing_time(spark, tmp_path):
    """``kit.live(..., proctime="pt")`` adds each row's processing time, its micro-batch's (as
    Flink's ``pt AS PROCTIME()`` adds one): a query reads it, the replay of the record gives
    it back; a name the source has already, or no name, is refused."""
    batches = generated(batches=3)
    drop(tmp_path / "in", batches, COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t", proctime="pt")
    run = kit.sql("SELECT word, pt FROM s WHERE v > 1", s=live).start(str(tmp_path / "run"), trigger="available_now")
    run.await_termination()
    rows = run.changelog().selectExpr("batch", "unix_millis(pt) AS pt").collect()
    assert len(rows) >= 5
    assert {(r.batch, r.pt) for r in rows} <= {(a.batch, a._pt) for a in run.arrivals.collect()}
    assert len({r.pt for r in rows}) == len({r.batch for r in rows}) > 1   # one time a batch, batches apart
    assert changes(run.changelog().drop("batch")) == changes(run.replay().changelog())
    with pytest.raises(KitError, match="proctime column 'v' is a column of the source already"):
        kit.live(source(spark, tmp_path / "in"), time="t", proctime="v")
    with pytest.raises(KitError, match="proctime names the column kit.live adds"):
        kit.live(source(spark, tmp_path / "in"), time="t", proctime=True)


FIRST = ("SELECT word, t, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY word, v ORDER BY t ASC) AS rn "
         "FROM s) WHERE rn = 1")


@pytest.mark.parametrize("query", [FIRST, f"SELECT v, COUNT(*) AS n FROM ({FIRST}) GROUP BY v"],
                         ids=["keep first", "counted"])
def test_keeping_the_first_row_on_event_time_live_gives_the_changelog_of_its_replay(spark, tmp_path, query):
    """Keep first on event time waits for the watermark (Spark's event-time timers live): each
    key's row is emitted when the watermark rises to its time, numbered by the last arrival
    before that rise, late rows dropped, as in the replay of the recorded arrivals; the
    replay's end of input emits the rows whose time the live watermark has not reached."""
    batches = generated(seed=11, batches=5, rows=8)
    drop(tmp_path / "in", batches, COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t", watermark=Duration.of_millis(20))
    run = kit.sql(query, s=live).start(str(tmp_path / "run"), trigger="available_now")
    run.await_termination()
    live_rows = changes(run.changelog().drop("batch"))
    replayed = changes(run.replay().changelog())
    applied = run.applied()
    if "COUNT" not in query:   # the end of input's emissions: times the live watermark did not reach
        replayed = [r for r in replayed if r[3] <= applied]
    else:
        replayed = replayed[:len(live_rows)]
    assert len(live_rows) >= 5 and live_rows == replayed
    assert all(r[1] == "+I" for r in live_rows) or "COUNT" in query
    late = [(r.seq, r.time, r.watermark, r.batch) for r in run.late_rows().collect()]
    assert late and late == [(a.seq, a.t, a._wm, a.batch) for a in run.arrivals.collect()
                             if a._wm is not None and a._ts < a._wm]


def test_a_state_ttl_live_expires_state_on_the_micro_batches_processing_time(spark, tmp_path):
    """``table.exec.state.ttl`` live: a key's state expires on processing time, an arrival's
    being its micro-batch's. With 1 ms, a key's state from an earlier batch is always gone
    (the batches are more than 1 ms apart), never within one: each key starts afresh (+I)
    in each batch it is in, and the changelogs (with ``proctime`` and ``after_expiry``)
    equal the replay's of the record, which runs on the recorded processing times."""
    batches = generated(seed=5, batches=4, rows=6)
    drop(tmp_path / "in", batches, COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t", watermark=Duration.of_millis(20))
    ttl = {"table.exec.state.ttl": "1 ms"}
    queries = [QUERIES["group aggregate"], QUERIES["cascade"], QUERIES["deduplicate last on event time"]]
    runs = [kit.sql(q, s=live, config=ttl).start(str(tmp_path / f"q{i}"), trigger="available_now")
            for i, q in enumerate(queries)]
    for run in runs:
        run.await_termination()
        assert changes(run.changelog().drop("batch")) == changes(run.replay().changelog())
    rows = runs[0].changelog().collect()
    firsts = {}
    for r in rows:
        firsts.setdefault((r.batch, r.word), r)
    assert all(r.op == "+I" for r in firsts.values())
    assert {r.batch for r in firsts.values() if r.after_expiry} == {1, 2, 3}
    assert len({r.proctime for r in rows}) == 4
    expired = runs[0].expired_state().collect()
    assert {(r.seq, r.batch) for r in expired} == {(r.seq, r.batch) for r in rows if r.after_expiry}


JOINS = {
    "inner": "SELECT o.word, o.v, r.v AS rv FROM s o JOIN r ON o.word = r.word",
    "left": "SELECT o.word, o.v, r.v AS rv FROM s o LEFT JOIN r ON o.word = r.word",
    "full, with a condition": "SELECT o.word, r.word AS rw, o.v, r.v AS rv FROM s o FULL JOIN r "
                              "ON o.word = r.word AND o.t < r.t",
    "of counts, counted": "SELECT c.n, COUNT(*) AS pairs FROM (SELECT word, COUNT(*) AS n FROM s GROUP BY word) c "
                          "RIGHT JOIN r ON c.word = r.word GROUP BY c.n",
    "self": "SELECT a.word, a.v, b.v AS bv FROM s a JOIN s b ON a.word = b.word",
    "union": "SELECT word, v FROM s UNION ALL SELECT word, v FROM r",
}


def test_joins_of_live_streams_give_the_changelog_of_their_replay(spark, tmp_path):
    """Regular joins live (inner, outer, with a condition, of an updating input, a self-join)
    and a union of two streams: the operators take a micro-batch's rows of the last stream
    FROM reads first, each stream's in read order; the changelog equals the replay's of the
    record (the streams interleaved by the batches' processing times), row for row. A row
    without a time goes aside with its stream's name; ``status`` counts a batch's rows once."""
    batches, others = generated(seed=3, batches=4, rows=5), generated(seed=4, batches=4, rows=4)
    drop(tmp_path / "s", batches, COLUMNS)
    drop(tmp_path / "r", others, COLUMNS)
    s = kit.live(source(spark, tmp_path / "s"), time="t")
    r = kit.live(source(spark, tmp_path / "r"), time="t")
    runs = {name: kit.sql(q, s=s, r=r).start(str(tmp_path / name.replace(" ", "_").replace(",", "")),
                                              trigger="available_now")
            for name, q in JOINS.items()}
    for name, run in runs.items():
        run.await_termination()
        live_rows = changes(run.changelog().drop("batch"))
        assert len(live_rows) >= 8, name
        assert live_rows == changes(run.replay().changelog()), name
    record = runs["inner"].arrivals.collect()
    assert [(a.stream, a.batch, a._arr) for a in record] == sorted(
        [(a.stream, a.batch, a._arr) for a in record], key=lambda a: (a[1], a[0] != "r", a[2]))
    assert [tuple(a.s or a.r) for a in record] == [
        row for b in range(4) for rows in (others[b], batches[b]) for row in rows if row[1] is not None]
    bad = runs["inner"].bad.collect()
    assert sorted((b.stream, tuple(b.s or b.r)) for b in bad) == sorted(
        [("s", row) for b in batches for row in b if row[1] is None]
        + [("r", row) for b in others for row in b if row[1] is None])
    assert runs["inner"].status["rows"] == len(batches[-1]) + len(others[-1])


def test_a_state_ttl_live_expires_joined_rows_on_the_micro_batches_processing_time(spark, tmp_path):
    """A join's state TTL live: each side's rows expire on the micro-batches' processing
    times (1 ms: a row of an earlier batch is gone, one of the same batch is not), as in the
    replay of the record."""
    drop(tmp_path / "s", [[("a", 1, 1)], [("a", 2, 2), ("b", 3, 3)], [("a", 4, 4)]], COLUMNS)
    drop(tmp_path / "r", [[("a", 1, 10)], [("b", 2, 20)], [("a", 3, 30), ("b", 4, 40)]], COLUMNS)
    s, r = (kit.live(source(spark, tmp_path / f), time="t") for f in "sr")
    run = kit.sql(JOINS["left"], s=s, r=r, config={"table.exec.state.ttl": "1 ms"}).start(
        str(tmp_path / "run"), trigger="available_now")
    run.await_termination()
    rows = changes(run.changelog().drop("batch"))
    assert rows == changes(run.replay().changelog())
    # batch 0: r (a,10), then s (a,1) joins it; batch 1: (b,20), then (a,2) alone (a's rows expired),
    # (b,3) joins (b,20); batch 2: (a,30) finds (a,2) expired, (b,40) too, (a,4) joins (a,30)
    assert [(r[1], r[2], r[3], r[4]) for r in rows] == [
        ("+I", "a", 1, 10), ("+I", "a", 2, None), ("+I", "b", 3, 20), ("+I", "a", 4, 30)]


TVFS = {
    "tumble": "SELECT word, window_start, window_end, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top "
              "FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '0.05' SECOND)) GROUP BY word, window_start, window_end",
    "hop": "SELECT window_end, w.word, AVG(v) AS mean, COUNT(v) AS c, window_time FROM TABLE(HOP(TABLE s, "
           "DESCRIPTOR(t), INTERVAL '0.025' SECOND, INTERVAL '0.05' SECOND)) AS w "
           "GROUP BY window_start, window_end, w.word, window_time",
}


def test_window_tvf_aggregations_live_give_the_rows_of_their_replay(spark, tmp_path):
    """A TUMBLE or HOP aggregation live runs as the DataStream window it is: a window's row
    comes when the watermark passes its end, late rows are dropped (``late``), and the rows
    equal those of the same query over ``kit.stream`` of the record, for the windows whose
    end the last batch's watermark passed (the replay's end of input fires the rest). A
    shape live mode does not run says which it runs."""
    batches = generated(seed=12, batches=5, rows=6)   # 4 rows late for their tumbling window
    drop(tmp_path / "in", batches, COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t", watermark=Duration.of_millis(20))
    runs = {name: kit.sql(q, s=live).start(str(tmp_path / name), trigger="available_now") for name, q in TVFS.items()}
    for name, run in runs.items():
        run.await_termination()
        applied, rows = run.applied(), changes(run.df)
        replayed = run.replay()
        fired = replayed.where(replayed.window_end - 1 <= applied).orderBy(*replayed.columns)
        assert len(rows) >= 4 and rows == changes(fired), name
        assert run.df.columns == replayed.columns == kit.sql(TVFS[name], s=kit.stream(
            spark.createDataFrame([], COLUMNS), time="t")).columns, name
    late = runs["tumble"].late.collect()
    assert late and all(r.t < r.watermark + 1 for r in late)
    for query in (TVFS["tumble"] + " ORDER BY n LIMIT 3",
                  "SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '1' SECOND)) "
                  "GROUP BY window_start, window_end"):
        with pytest.raises(KitError, match="live mode runs a window TVF aggregation of this shape"):
            kit.sql(query, s=live)


def test_the_changelog_of_a_live_group_aggregate(spark, tmp_path):
    """Flink's row kinds, arrival by arrival, across micro-batches; a NULL time goes aside."""
    drop(tmp_path / "in", [[("a", 1, 1), ("b", 2, 1), ("a", 3, 1)], [("b", None, 1), ("a", 0, 1), ("c", 9, 1)]],
         COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t")
    run = kit.sql("SELECT word, COUNT(*) AS n FROM s GROUP BY word", s=live).start(str(tmp_path / "run"),
                                                                                   trigger="available_now")
    run.await_termination()
    assert changes(run.changelog()) == [
        (0, "+I", "a", 1, None, 0), (1, "+I", "b", 1, None, 0), (2, "-U", "a", 1, None, 0), (2, "+U", "a", 2, None, 0),
        (3, "-U", "a", 2, 2, 1), (3, "+U", "a", 3, 2, 1), (4, "+I", "c", 1, 2, 1)]
    assert changes(run.bad) == [("b", None, 1, "NULL event time in column 't': Flink rejects the row", 1)]
    upsert = kit.sql("SELECT word, COUNT(*) AS n FROM s GROUP BY word", s=live, sink="upsert")
    run = upsert.start(str(tmp_path / "upsert"), trigger="available_now")
    run.await_termination()
    assert [r.op for r in run.changelog().collect()] == ["+I", "+I", "+U", "+U", "+I"]


def test_a_live_cascade_stopped_and_started_again_goes_on_from_its_checkpoint(spark, tmp_path):
    """Stopped after three batches, more files come, started again on its path: the
    changelog is the uninterrupted run's, nothing lost, nothing doubled."""
    batches = generated(seed=3)
    query = QUERIES["cascade"]
    drop(tmp_path / "all", batches, COLUMNS)
    whole = kit.sql(query, s=kit.live(source(spark, tmp_path / "all"), time="t")).start(
        str(tmp_path / "whole"), trigger="available_now")
    drop(tmp_path / "part", batches[:3], COLUMNS)
    first = kit.sql(query, s=kit.live(source(spark, tmp_path / "part"), time="t")).start(
        str(tmp_path / "run"), trigger="available_now")
    first.await_termination()
    drop(tmp_path / "part", batches[3:], COLUMNS, first=3)
    again = kit.sql(query, s=kit.live(source(spark, tmp_path / "part"), time="t")).start(
        str(tmp_path / "run"), trigger="available_now")
    again.await_termination()
    whole.await_termination()
    assert changes(again.changelog()) == changes(whole.changelog())


KILLED = """
import sqlite3, sys, time
sys.path.insert(0, {root!r})
import kit
spark = kit.spark()
source = spark.readStream.schema({columns!r}).option("maxFilesPerTrigger", 1).parquet({folder!r})
sink = kit.DbApiSink(lambda: sqlite3.connect({db!r}), "freq")
run = kit.sql({query!r}, s=kit.live(source, time="t")).start({path!r}, sink=sink)
time.sleep(600)   # killed before
"""


def stored(db) -> list:
    with closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT batch, change, op, n, freq FROM freq ORDER BY batch, change").fetchall()


def test_a_live_cascade_killed_mid_stream_restarts_with_nothing_lost_or_doubled(spark, tmp_path):
    """The driver process killed (SIGKILL) while batches run, then the query started again
    on its path: the changelog equals an uninterrupted run's."""
    batches, query = generated(seed=5), QUERIES["cascade"]
    drop(tmp_path / "all", batches, COLUMNS)
    whole = kit.sql(query, s=kit.live(source(spark, tmp_path / "all"), time="t")).start(
        str(tmp_path / "whole"), trigger="available_now")
    drop(tmp_path / "in", batches[:3], COLUMNS)   # the rest comes after the kill: it is mid-stream
    db = str(tmp_path / "out.db")
    script = KILLED.format(root=str(Path(__file__).parents[1]), columns=COLUMNS, folder=str(tmp_path / "in"),
                           query=query, path=str(tmp_path / "run"), db=db)
    killed_at_batch(script, tmp_path / "run", 1)
    drop(tmp_path / "in", batches[3:], COLUMNS, first=3)
    sink = kit.DbApiSink(lambda: sqlite3.connect(db), "freq")
    again = kit.sql(query, s=kit.live(source(spark, tmp_path / "in"), time="t")).start(
        str(tmp_path / "run"), trigger="available_now", sink=sink)
    again.await_termination()
    whole.await_termination()
    assert changes(again.changelog().drop("batch")) == changes(whole.changelog().drop("batch"))
    assert again.arrivals.count() == whole.arrivals.count()
    # the database holds each change once, in Flink's order, by the batch that made it
    assert [r[2:] for r in stored(db)] == [(r.op, r.n, r.freq) for r in whole.changelog().collect()]
    assert {r[0] for r in stored(db)} == {r.batch for r in whole.changelog().collect()}


def test_records_spark_could_not_read_go_aside_with_their_text(spark, tmp_path):
    """A JSON source with Spark's column of malformed records: a line that is no JSON and one
    whose time is no time go to ``bad`` with their text, in a window and in SQL; the other rows
    run as without them, and the column is none of the query's."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    lines = ['{"word": "a", "t": 1}', 'not json at all', '{"word": "b", "t": "soon"}', '{"word": "a", "t": 2}']
    (inbox / "0.json").write_text("\n".join(lines) + "\n")
    raw = spark.readStream.schema("word STRING, t BIGINT, _corrupt_record STRING").json(str(inbox))
    live = kit.live(raw, time="t")
    assert live.source.columns == ["word", "t"]
    why = "malformed record (Spark could not read it): "
    run = kit.sql("SELECT word, COUNT(*) AS n FROM s GROUP BY word", s=live).start(str(tmp_path / "sql"),
                                                                                   trigger="available_now")
    run.await_termination()
    assert changes(run.bad) == [(None, None, why + lines[1], 0), ("b", None, why + lines[2], 0)]
    assert [(r.op, r.word, r.n) for r in run.changelog().collect()] == [("+I", "a", 1), ("-U", "a", 1), ("+U", "a", 2)]
    assert changes(run.changelog().drop("batch")) == changes(run.replay().changelog())
    windows = (live.key_by("word").window(TumblingEventTimeWindows.of(Time.milliseconds(2))).aggregate(Count(alias="n"))
               .start(str(tmp_path / "windows"), trigger="available_now"))
    windows.await_termination()
    assert [r.reason for r in windows.bad.collect()] == [why + lines[1], why + lines[2]]
    assert [(r.word, r.t) for r in windows.arrivals.collect()] == [("a", 1), ("a", 2)]


def test_a_database_sink_gets_each_batch_once_however_often_it_runs(spark, tmp_path):
    """A DB-API table (sqlite3) written per batch: a batch written again (as after a restart
    before Spark committed it) replaces its own rows; a window's firings go the same way."""
    drop(tmp_path / "in", [[("a", 1, 1), ("b", 2, 1)], [("a", 3, 1)]], COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t")
    db = str(tmp_path / "out.db")
    run = kit.sql("SELECT word, COUNT(*) AS n FROM s GROUP BY word", s=live).start(
        str(tmp_path / "run"), trigger="available_now", sink=kit.DbApiSink(lambda: sqlite3.connect(db), "counts"))
    run.await_termination()
    rows = [(0, 0, "+I", "a", 1), (0, 1, "+I", "b", 1), (1, 0, "-U", "a", 1), (1, 1, "+U", "a", 2)]
    query = "SELECT batch, change, op, word, n FROM counts ORDER BY batch, change"
    with closing(sqlite3.connect(db)) as con:
        assert con.execute(query).fetchall() == rows
    run.sink.write(run.batch_rows(1), 1)
    with closing(sqlite3.connect(db)) as con:
        assert con.execute(query).fetchall() == rows
    windows = (live.key_by("word").window(TumblingEventTimeWindows.of(Time.milliseconds(2))).aggregate(Count(alias="n"))
               .start(str(tmp_path / "windows"), trigger="available_now",
                      sink=kit.DbApiSink(lambda: sqlite3.connect(db), "windows")))
    windows.await_termination()
    with closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT key, window_start, window_end, n, batch FROM windows").fetchall() == [
            ("a", 0, 2, 1, 1)]
    with pytest.raises(KitError, match="table must be a plain SQL name"):
        kit.DbApiSink(lambda: sqlite3.connect(db), "counts; DROP TABLE x")


def test_live_mode_says_which_queries_it_does_not_run(spark, tmp_path):
    drop(tmp_path / "in", [[("a", 1, 1)]], COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t")
    group = "SELECT word, COUNT(*) AS n FROM s GROUP BY word"
    cases = [
        (group, {"table.exec.mini-batch.enabled": True, "table.exec.mini-batch.allow-latency": "1 s",
                 "table.exec.mini-batch.size": 10}, "a mini-batch"),
        ("SELECT a.word, b.v FROM s a JOIN s2 b ON a.word = b.word", {"kit.join.interleave": "left_first"},
         "an interleaving of its own"),
        (f"SELECT a.word, b.t FROM ({FIRST}) a JOIN s2 b ON a.word = b.word", None,
         "keeping the first row on event time in a query over several streams"),
        ("SELECT word, COUNT(*) AS n FROM s GROUP BY word, TUMBLE(t, INTERVAL '1' SECOND)", None,
         "group windows"),
        ("SELECT word, COUNT(DISTINCT v) AS n FROM s GROUP BY word", {"table.optimizer.distinct-agg.split.enabled": True},
         "the split of distinct aggregates"),
    ]
    other = kit.live(source(spark, tmp_path / "in"), time="t")
    for query, config, why in cases:
        with pytest.raises(KitError, match=why):
            kit.sql(query, s=live, s2=other, config=config)
    stamped = [kit.live(spark.readStream.schema("word string, ts timestamp").parquet(str(tmp_path / "in")), time="ts")
               for _ in range(2)]
    with pytest.raises(KitError, match="an interval join .* is the replay's"):
        kit.sql("SELECT a.word FROM a JOIN b ON a.word = b.word AND a.ts BETWEEN b.ts - INTERVAL '1' SECOND AND b.ts",
                a=stamped[0], b=stamped[1])
    first = kit.sql("SELECT word, t FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY word ORDER BY t ASC) AS rn "
                    "FROM s) WHERE rn = 1", s=live, config={"table.exec.state.ttl": "10 s"})
    with pytest.raises(KitError, match="keeping the first row on event time live needs .* no state TTL"):
        first.start(str(tmp_path / "first"))
    with pytest.raises(KitError, match="reads live streams only"):
        kit.sql("SELECT word, COUNT(*) AS n FROM s GROUP BY word", s=live,
                d=kit.stream(spark.createDataFrame([("a", 1)], "word string, t long"), time="t"))
    kit.sql(group, s=live).start(str(tmp_path / "run"), trigger="available_now").await_termination()
    with pytest.raises(KitError, match=r"holds the checkpoint of another query \(query: "):
        kit.sql("SELECT word, MAX(v) AS n FROM s GROUP BY word", s=live).start(str(tmp_path / "run"))
