"""MATCH_RECOGNIZE on Spark: partitions, streams and late rows, errors on the driver."""

import re
import warnings

import pandas as pd
from pyspark.sql import functions as F
import pytest

import goldens
import kit
from kit import Duration, KitError, WatermarkStrategy
from kit.match_recognize.errors import MatchRuntimeError
from kit.match_recognize.matcher import run_partition
from kit.match_recognize.operator import MatchRecognizeWarning, match_recognize
from kit.sql.match_recognize import parse_match_recognize

VSHAPE = """MATCH_RECOGNIZE (
    PARTITION BY symbol ORDER BY rowtime
    MEASURES START_ROW.rowtime AS start_tstamp, LAST(PRICE_DOWN.rowtime) AS bottom_tstamp,
             LAST(PRICE_UP.rowtime) AS end_tstamp
    ONE ROW PER MATCH AFTER MATCH SKIP TO LAST PRICE_UP
    PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
    DEFINE PRICE_DOWN AS (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price)
                         OR PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
           PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1))"""


def clause(query: str):
    """The MATCH_RECOGNIZE clause of a golden query, as spec objects."""
    text = query[query.index("MATCH_RECOGNIZE"):query.rindex(")") + 1]
    return parse_match_recognize(text)


def rows_of(df):
    return [[v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if hasattr(v, "strftime") else v for v in r]
            for r in df.collect()]


def test_seed_vshape_on_spark(spark):
    result = match_recognize(kit.data.load("ticker"), parse_match_recognize(VSHAPE))
    assert rows_of(result.rows) == [["ACME", "2011-04-01 10:00:04.000", "2011-04-01 10:00:07.000",
                                     "2011-04-01 10:00:08.000"]]
    assert result.late is None


@pytest.mark.parametrize("name, delay_s", [
    ("mr_p3_vshape_out_of_order_wm0_streaming", 0),
    ("mr_p4_vshape_out_of_order_wm5_streaming", 5),
    ("mr_p5_vshape_two_symbols_same_ts_wm0_streaming", 0),
    ("mr_p6_vshape_two_symbols_same_ts_wm1ms_streaming", 0.001),
])
def test_streams_drop_late_rows_like_flink_and_keep_them(spark, name, delay_s):
    golden = goldens.load(name + ".json")
    delay = re.search(r"INTERVAL '([\d.]+)' SECOND", golden["table_ddl"])
    millis = round(float(delay.group(1)) * 1000)
    assert millis == delay_s * 1000
    pdf = pd.DataFrame(golden["input"], columns=golden["input_columns"]).astype({"rowtime": "datetime64[ns]"})
    ticker = spark.createDataFrame(pdf, "symbol string, rowtime timestamp, price bigint, tax bigint")
    stream = kit.stream(ticker, time="rowtime", watermark=WatermarkStrategy.for_sql_delay(Duration(millis)))
    (query,) = golden["queries"]
    result = match_recognize(stream, clause(query["sql"]))
    assert rows_of(result.rows) == [r["values"] for r in query["rows"]]
    late = stream.df.filter("late").count()
    assert result.late.count() == late  # nothing lost: matched input + late = all rows
    assert result.late.columns[-2:] == ["seq", "watermark"]


def test_partitions_match_independently_whatever_the_spark_partitioning(spark):
    walk = kit.data.ticker_walk(3000, symbols=5, seed=1)
    spec = parse_match_recognize(VSHAPE)
    expected = []
    pdf = walk.toPandas()
    for symbol, group in sorted(pdf.groupby("symbol")):
        group = group.sort_values("rowtime", kind="stable")
        result = run_partition({c: group[c].to_numpy() for c in group.columns}, spec, rowtime=None)
        expected += [[symbol, *map(pd.Timestamp, row)] for row in result.rows]
    assert len(expected) > 20
    for shuffled in (walk, walk.repartition(7), walk.orderBy("price").coalesce(1)):
        got = [[r[0], *map(pd.Timestamp, r[1:])] for r in match_recognize(shuffled, spec).rows.collect()]
        assert got == expected


def test_a_tasks_many_keys_send_their_matches_as_one_batch():
    """Each key's matches are a batch; a task hands a chunk of them to Spark as one, in order
    (one IPC batch per key cost more than the matching on keys of a few rows)."""
    import pyarrow as pa
    from kit.match_recognize.operator import _one_batch

    schema = pa.schema([("k", pa.string()), ("m", pa.int64())])
    keys = [pa.record_batch([[k] * n, list(range(n))], schema=schema) for k, n in (("a", 2), ("b", 0), ("c", 3))]
    (one,) = _one_batch(None, keys)
    assert one.to_pydict() == {"k": ["a", "a", "c", "c", "c"], "m": [0, 1, 0, 1, 2]}
    assert _one_batch(None, keys[:1]) == keys[:1]


def test_planning_errors_are_raised_on_the_driver(spark):
    greedy_last = parse_match_recognize(
        "MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime MEASURES A.price AS p PATTERN (A B*) "
        "DEFINE B AS B.price > A.price)")
    with pytest.raises(KitError, match="Greedy quantifiers are not allowed as the last element"):
        match_recognize(kit.data.load("ticker"), greedy_last)


def test_runtime_errors_are_the_kits_own_raised_on_the_driver(spark):
    skip_to_first = parse_match_recognize(
        "MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime MEASURES SUM(A.price) AS s "
        "AFTER MATCH SKIP TO FIRST A PATTERN (A+ C) DEFINE A AS SUM(A.price) < 30)")
    with pytest.raises(MatchRuntimeError, match=r"SKIP TO FIRST A.*partition symbol='XYZ'") as error:
        match_recognize(kit.data.load("ticker_after_match"), skip_to_first)
    assert "Traceback" not in str(error.value) and "java." not in str(error.value)


def test_streams_must_order_by_their_time_first(spark):
    stream = kit.stream(kit.data.load("ticker"), time="rowtime")
    spec = parse_match_recognize(VSHAPE.replace("ORDER BY rowtime", "ORDER BY price, rowtime"))
    with pytest.raises(KitError, match="ORDER BY must start with the stream's time attribute 'rowtime'"):
        match_recognize(stream, spec)


def test_no_partition_by_is_one_partition_and_a_warning(spark):
    spec = parse_match_recognize(VSHAPE.replace("PARTITION BY symbol", ""))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = match_recognize(kit.data.load("ticker"), spec)
    assert [w.category for w in caught] == [MatchRecognizeWarning]
    assert rows_of(result.rows) == [["2011-04-01 10:00:04.000", "2011-04-01 10:00:07.000",
                                     "2011-04-01 10:00:08.000"]]


def test_bad_semantics_and_columns(spark):
    spec = parse_match_recognize(VSHAPE)
    with pytest.raises(KitError, match="semantics must be one of 'flink', 'standard', 'flink-2.3'"):
        match_recognize(kit.data.load("ticker"), spec, semantics="trino")
    with pytest.raises(KitError, match="column 'symbol' of PARTITION BY / ORDER BY is not in the input"):
        match_recognize(kit.data.load("ticker").drop("symbol"), spec)


def test_details_give_each_row_its_match_and_classifier(spark):
    result = match_recognize(kit.data.load("ticker"), parse_match_recognize(VSHAPE))
    got = [(r.price, r.match_number, r.classifier, r.late) for r in result.details().collect()]
    assert got == [(12, None, None, False), (17, None, None, False), (19, None, None, False),
                   (21, None, None, False), (25, 1, "START_ROW", False), (18, 1, "PRICE_DOWN", False),
                   (15, 1, "PRICE_DOWN", False), (14, 1, "PRICE_DOWN", False), (24, 1, "PRICE_UP", False),
                   (25, None, None, False), (19, None, None, False)]


def test_details_of_a_stream_include_the_late_rows(spark):
    golden = goldens.load("mr_p3_vshape_out_of_order_wm0_streaming.json")
    pdf = pd.DataFrame(golden["input"], columns=golden["input_columns"]).astype({"rowtime": "datetime64[ns]"})
    stream = kit.stream(spark.createDataFrame(pdf), time="rowtime",
                        watermark=WatermarkStrategy.for_sql_delay(Duration(0)))
    details = match_recognize(stream, clause(golden["queries"][0]["sql"])).details().collect()
    assert [(r.price, r.classifier, r.late) for r in details] == [
        (12, None, False), (17, None, True), (19, None, False), (21, "START_ROW", False),
        (25, None, True), (18, "PRICE_DOWN", False), (15, "PRICE_DOWN", False), (14, None, True),
        (24, "PRICE_UP", False), (25, None, False), (19, None, False)]


def test_rows_in_several_matches_appear_once_per_match(spark):
    spec = parse_match_recognize(
        "MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime MEASURES SUM(A.price) AS s "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN (A+ C) DEFINE A AS SUM(A.price) < 30)")
    details = match_recognize(kit.data.load("ticker_after_match"), spec).details()
    counts = {r.t: r.n for r in details.groupBy(F.col("rowtime").alias("t"))
              .count().withColumnRenamed("count", "n").collect()}
    assert sorted(counts.values(), reverse=True)[0] == 4  # 10:00:04 is in four matches (#1..#4)


def test_nullable_integers_stay_integers(spark):
    """A BIGINT column with NULLs reaches the matcher as integers and None (not float64 NaN):
    CAST prints 5, not 5.0, and the NULL row is found by IS NULL."""
    df = spark.createDataFrame([("A", 1, 5), ("A", 2, None), ("A", 3, 7)], "symbol string, t int, qty bigint")
    rows = kit.sql("SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY t "
                   "MEASURES CAST(A.qty AS STRING) AS a, B.qty AS b, C.qty / 2 AS c "
                   "PATTERN (A B C) DEFINE B AS B.qty IS NULL)", T=df).collect()
    assert [tuple(r) for r in rows] == [("A", "5", None, 3)]


@pytest.mark.parametrize("rows_per_match, semantics", [("ONE ROW PER MATCH", "flink"),
                                                       ("ALL ROWS PER MATCH", "standard")])
@pytest.mark.parametrize("partition", ["PARTITION BY symbol", ""])
def test_a_small_input_in_one_task_gives_what_a_spread_one_gives(spark, monkeypatch, rows_per_match, semantics,
                                                                   partition):
    """A small input runs as one task with no shuffle, its details kept with its matches (reading
    them runs no matcher); unknown sizes are spread over tasks. The same rows and details."""
    from kit.match_recognize import operator

    spec = parse_match_recognize(
        f"MATCH_RECOGNIZE ({partition} ORDER BY rowtime MEASURES SUM(A.price) AS s, COUNT(*) AS n "
        f"{rows_per_match} AFTER MATCH SKIP TO NEXT ROW PATTERN (A+ C) DEFINE A AS SUM(A.price) < 30)")
    walk = kit.data.ticker_walk(300, symbols=3, seed=2).union(kit.data.load("ticker_after_match"))
    golden = goldens.load("mr_p3_vshape_out_of_order_wm0_streaming.json")
    late = kit.stream(spark.createDataFrame(pd.DataFrame(golden["input"], columns=golden["input_columns"])
                                            .astype({"rowtime": "datetime64[ns]"})),
                      time="rowtime", watermark=WatermarkStrategy.for_sql_delay(Duration(0)))

    def run(table, rows):
        monkeypatch.setattr(operator, "_known_rows", lambda table, df: rows)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MatchRecognizeWarning)
            result = match_recognize(table, spec, semantics)
        details = result.details()
        plans = [d._jdf.queryExecution().executedPlan().toString() for d in (result.rows, details)]
        return result.rows.collect(), details.collect(), plans

    for table in (walk, late):
        small, small_details, plans = run(table, 10)
        assert not any("Exchange" in p for p in plans) and "MapInArrow" not in plans[1]
        spread, spread_details, plans = run(table, None)
        assert small == spread and len(small) > 0
        assert small_details == spread_details


# ---------------------------------------------------------------- MATCH_ROWTIME() on a batch table

ROWTIME_MR = """SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
    MEASURES MATCH_ROWTIME() AS mt, A.price AS p PATTERN (A) DEFINE A AS price > 20) MR"""


@pytest.mark.parametrize("time_type", ["timestamp", "timestamp_ntz"])
def test_match_rowtime_of_a_batch_table_feeds_windows(spark, time_type):
    # a table with no declared row time: MATCH_ROWTIME() is the ORDER BY time column of the
    # match's last row. The Ticker's prices above 20 are 21 (10:00:03), 25 (:04), 24 (:08) and
    # 25 (:09): one-row matches, so 5-second windows over mt hold 21+25 and 24+25.
    ticker = kit.data.load("ticker")
    ticker = ticker.withColumn("rowtime", F.col("rowtime").cast(time_type))
    matched = kit.sql(ROWTIME_MR, Ticker=ticker)
    assert [(r.mt.strftime("%H:%M:%S"), r.p) for r in matched.collect()] == [
        ("10:00:03", 21), ("10:00:04", 25), ("10:00:08", 24), ("10:00:09", 25)]
    tvf = kit.sql(f"""WITH M AS ({ROWTIME_MR}) SELECT window_start, COUNT(*) AS n, SUM(p) AS s
        FROM TABLE(TUMBLE(TABLE M, DESCRIPTOR(mt), INTERVAL '5' SECOND))
        GROUP BY window_start, window_end""", Ticker=ticker)
    assert [(r.window_start.strftime("%H:%M:%S"), r.n, r.s) for r in tvf.orderBy("window_start").collect()] == [
        ("10:00:00", 2, 46), ("10:00:05", 2, 49)]
    group = kit.sql(f"""WITH M AS ({ROWTIME_MR}) SELECT TUMBLE_START(mt, INTERVAL '5' SECOND) AS ws,
        SUM(p) AS s FROM M GROUP BY TUMBLE(mt, INTERVAL '5' SECOND)""", Ticker=ticker)
    assert [(r.ws.strftime("%H:%M:%S"), r.s) for r in group.orderBy("ws").collect()] == [
        ("10:00:00", 46), ("10:00:05", 49)]


def test_order_by_the_processing_time_matches_in_arrival_order(spark):
    """ORDER BY a stream's processing time (Flink's ``ORDER BY proctime``): rows are matched as
    they arrive, whatever their event time; none is late; MATCH_PROCTIME() is the match's last
    row's processing time. Descending or followed by another field it is refused with why."""
    df = spark.createDataFrame(pd.DataFrame({"user": ["Mary", "Bob", "Mary", "Mary"], "v": [1, 2, -3, 4], "ts": pd.to_datetime(
        ["2024-01-01 00:00:05", "2024-01-01 00:00:02", "2024-01-01 00:00:01", "2024-01-01 00:00:09"])}))
    clock = kit.Clock("2024-01-01 00:00:00", kit.Duration.of_seconds(1))
    query = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY `user` ORDER BY {order} MEASURES FIRST(A.v) AS a, "
             "MATCH_PROCTIME() AS mp ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.v > 0, B AS B.v < 0)")
    by_arrival = kit.sql(query.format(order="proctime"), t=kit.stream(df, time="ts", proctime=clock))
    assert [(r.user, r.a, r.mp.strftime("%H:%M:%S")) for r in by_arrival.collect()] == [("Mary", 1, "00:00:02")]
    assert kit.sql(query.format(order="ts"), t=kit.stream(df, time="ts", proctime=clock)).count() == 0   # -3 came first
    assert kit.sql(query.format(order="proctime"), t=kit.stream(df.drop("ts"), proctime=clock)).count() == 1
    for order, said in (("proctime DESC", "'proctime' (the processing time) DESC"),
                        ("proctime, v", "'proctime' (the processing time) then 'v'")):
        with pytest.raises(KitError, match=re.escape(said)):
            kit.sql(query.format(order=order), t=kit.stream(df, time="ts", proctime=clock))
