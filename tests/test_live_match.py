"""MATCH_RECOGNIZE live: ``kit.sql`` over ``kit.live(...)`` on Spark Structured Streaming.

Each test drops micro-batches as files into a folder (one file a batch), runs the query
until the folder is read (``available_now``) or kills it, and compares what the live run
output with the replay of the arrivals it released (each with the watermark it met)."""

import random
import sqlite3
from contextlib import closing
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import kit
from kit import Duration
from kit.errors import KitError
from kit.match_recognize.live import _value

from test_live import drop, killed_at_batch

COLUMNS = "symbol string, t long, price long"
V_SHAPE = """SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY {time}
  MEASURES FIRST(A.t) AS start_t, LAST(B.price) AS bottom, C.price AS top, AVG(B.price) AS mean,
           COUNT(B.price) AS falls{rowtime}
  ONE ROW PER MATCH AFTER MATCH SKIP {skip}
  PATTERN (A B+ C) DEFINE B AS B.price < A.price, C AS C.price > A.price)"""


def generated(seed=11, batches=5, rows=9):
    """Batches of (symbol, t, price): two symbols, times rising with disorder and some rows
    far behind the watermark (late), a NULL time now and then, prices that fall and rise."""
    rng, top, out = random.Random(seed), 0, []
    for _ in range(batches):
        batch = []
        for _ in range(rows):
            top += rng.randint(1, 30)
            t = None if rng.random() < 0.05 else max(0, top - rng.choice([0, 0, 0, 10, 100]))
            batch.append((rng.choice("ab"), t, rng.randint(1, 9)))
        out.append(batch)
    return out


def source(spark, folder):
    return spark.readStream.schema(COLUMNS).option("maxFilesPerTrigger", 1).parquet(str(folder))


def rows(frame) -> list:
    return [tuple(r) for r in frame.collect()]


QUERIES = {
    "v-shape past last row": (V_SHAPE.format(time="t", skip="PAST LAST ROW", rowtime=""), "t"),
    "v-shape to next row, event time a TIMESTAMP": (
        V_SHAPE.format(time="ts", skip="TO NEXT ROW", rowtime=", MATCH_ROWTIME() AS at"), "ts"),
    "no PARTITION BY": ("SELECT * FROM Ticker MATCH_RECOGNIZE (ORDER BY t MEASURES A.t AS a, B.t AS b, "
                        "B.symbol AS s AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) "
                        "DEFINE A AS A.price > 6, B AS B.price < A.price)", "t"),
    "a query around the clause": ("SELECT symbol, top - bottom AS rise FROM Ticker MATCH_RECOGNIZE ("
                                  "PARTITION BY symbol ORDER BY t MEASURES LAST(B.price) AS bottom, C.price AS top "
                                  "PATTERN (A B+ C) DEFINE B AS B.price < A.price, C AS C.price > A.price) "
                                  "WHERE top > 3", "t"),
}


def test_each_live_match_recognize_gives_the_matches_of_its_replay(spark, tmp_path):
    """MATCH_RECOGNIZE live, partitioned or not, with aggregates in MEASURES, MATCH_ROWTIME
    on a TIMESTAMP time, AFTER MATCH variants and a query around the clause, over batches
    with disorder, late rows and NULL times: its rows and late rows equal the replay's of
    the record it released, row for row; the NULL times are bad."""
    batches = generated()
    drop(tmp_path / "in", batches, COLUMNS)
    stream = source(spark, tmp_path / "in").withColumn("ts", F.timestamp_millis("t"))
    runs = {}
    for name, (query, time_column) in QUERIES.items():
        live = kit.live(stream, time=time_column, watermark=Duration.of_millis(15))
        runs[name] = kit.sql(query, Ticker=live).start(str(tmp_path / name.replace(" ", "_").replace(",", "")),
                                                       trigger="available_now")
    nulls = sum(t is None for b in batches for _, t, _ in b)
    for name, run in runs.items():
        run.await_termination()
        replay = run.replay()
        live_rows = rows(run.df)
        assert live_rows and live_rows == rows(replay), name
        late = rows(run.late.drop("batch"))
        assert late and late == rows(replay.late_rows.select(*run.late.drop("batch").columns)), name
        assert run.bad.count() == nulls, name
    # the rows still waiting at the end are in no match yet: the replay reads the released ones
    run = runs["v-shape past last row"]
    assert run.released.count() < run.arrivals.count()


def test_a_live_match_shows_each_match_in_the_batch_whose_watermark_completes_it(spark, tmp_path):
    """A B+ C over four batches (watermark 500 ms behind): the match's rows are released in
    the batch whose watermark passes its last row (time 5000: batch 3, watermark 6499); a row
    at or below the watermark it met is late, with that watermark."""
    batches = [[("A", 1000, 12), ("A", 2000, 17), ("B", 1500, 5)], [("A", 3000, 13), ("A", 4000, 11), ("A", 1200, 3)],
               [("A", 5000, 19), ("A", 6000, 20), ("A", 7000, 12)], [("A", 9000, 25), ("B", 9500, 1)]]
    drop(tmp_path / "in", batches, COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t", watermark=Duration.of_millis(500))
    run = kit.sql(V_SHAPE.format(time="t", skip="PAST LAST ROW", rowtime=""), Ticker=live).start(
        str(tmp_path / "run"), trigger="available_now")
    run.await_termination()
    assert rows(run.matches) == [("A", 2000, 11, 19, 12.0, 2, 3)]
    assert rows(run.late) == [("A", 1200, 3, 1499, 1)]
    assert run.status["watermark"] == 8999


KILLED = """
import sqlite3, sys, time
sys.path.insert(0, {root!r})
import kit
spark = kit.spark()
source = spark.readStream.schema({columns!r}).option("maxFilesPerTrigger", 1).parquet({folder!r})
sink = kit.DbApiSink(lambda: sqlite3.connect({db!r}), "matches")
run = kit.sql({query!r}, Ticker=kit.live(source, time="t")).start({path!r}, sink=sink)
time.sleep(600)   # killed before
"""


def test_a_live_match_killed_mid_stream_restarts_with_nothing_lost_or_doubled(spark, tmp_path):
    """The driver process killed (SIGKILL) while batches run, then the query started again
    on its path: the matches and late rows equal an uninterrupted run's, in the Parquet
    table and in the SQLite table (each batch's rows once)."""
    batches, query = generated(seed=4, batches=6), V_SHAPE.format(time="t", skip="PAST LAST ROW", rowtime="")
    drop(tmp_path / "all", batches, COLUMNS)
    whole = kit.sql(query, Ticker=kit.live(source(spark, tmp_path / "all"), time="t")).start(
        str(tmp_path / "whole"), trigger="available_now")
    drop(tmp_path / "in", batches[:3], COLUMNS)   # the rest comes after the kill: it is mid-stream
    db = str(tmp_path / "out.db")
    script = KILLED.format(root=str(Path(__file__).parents[1]), columns=COLUMNS, folder=str(tmp_path / "in"),
                           query=query, path=str(tmp_path / "run"), db=db)
    killed_at_batch(script, tmp_path / "run", 1)
    drop(tmp_path / "in", batches[3:], COLUMNS, first=3)
    sink = kit.DbApiSink(lambda: sqlite3.connect(db), "matches")
    again = kit.sql(query, Ticker=kit.live(source(spark, tmp_path / "in"), time="t")).start(
        str(tmp_path / "run"), trigger="available_now", sink=sink)
    again.await_termination()
    whole.await_termination()
    expected = rows(whole.matches.drop("batch"))
    assert expected and rows(again.matches.drop("batch")) == expected
    assert rows(again.late.drop("batch")) == rows(whole.late.drop("batch"))
    with closing(sqlite3.connect(db)) as con:
        stored = con.execute("SELECT symbol, start_t, bottom, top, mean, falls FROM matches "
                             "ORDER BY symbol, start_t").fetchall()
    assert stored == sorted(expected)


def test_live_mode_says_which_match_recognize_it_does_not_run(spark, tmp_path):
    drop(tmp_path / "in", [[("a", 1, 1)]], COLUMNS)
    live = kit.live(source(spark, tmp_path / "in"), time="t")
    clause = ("MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY t MEASURES A.price AS p PATTERN (A B) "
              "DEFINE B AS B.price > A.price)")
    cases = [
        (f"SELECT * FROM (SELECT * FROM Ticker WHERE price > 1) {clause}", {}, "reads the live stream itself"),
        (f"SELECT * FROM Ticker {clause} UNION ALL SELECT symbol, price FROM Ticker", {}, "reads nothing else"),
        (f"SELECT * FROM Ticker {clause}", {"semantics": "standard"}, "Flink's semantics"),
        (f"SELECT * FROM Ticker {clause}", {"Other": live}, "one live stream"),
    ]
    for query, extra, why in cases:
        with pytest.raises(KitError, match=why):
            table = kit.sql(query, Ticker=live, **extra)
            table.start(str(tmp_path / "refused"))


def test_a_measure_reaches_the_live_row_as_spark_takes_it():
    """A TIMESTAMP measure as epoch ms (the read converts it back), a DECIMAL rounded half up
    to its scale as the replay's, a numpy scalar as a Python one, NaN as NULL in a DECIMAL."""
    assert _value(np.datetime64(1500, "ms"), T.TimestampType()) == 1500
    assert _value(np.datetime64("NaT"), T.TimestampType()) is None
    assert _value(2.345, T.DecimalType(10, 2)) == Decimal("2.35")
    assert _value(float("nan"), T.DecimalType(10, 2)) is None
    assert _value(np.int64(3), T.LongType()) == 3 and type(_value(np.int64(3), T.LongType())) is int
