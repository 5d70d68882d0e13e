"""Flink SQL window TVFs in kit.sql: the seed 003 golden, each TVF, late rows, errors."""

import pandas as pd
import pytest

import kit
from kit.sql import SqlError
from kit.time import Duration, WatermarkStrategy

from goldens import load


def _golden_clicks(spark):
    golden = load("tumble_clicks.json")
    pdf = pd.DataFrame(golden["input"], columns=golden["input_columns"])
    pdf["cTime"] = pd.to_datetime(pdf["cTime"])
    return golden, pdf


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_hourly_clicks_equal_flink(spark, mode):
    golden, pdf = _golden_clicks(spark)
    run = next(r for r in golden["runs"] if r["mode"] == mode)
    table = (kit.stream(pdf, time="cTime", watermark=WatermarkStrategy.for_sql_delay(Duration.of_seconds(0)))
             if mode == "streaming" else spark.createDataFrame(pdf))
    rows = kit.sql(run["query"], clicks=table).collect()
    got = sorted((r.user, str(r.window_start), str(r.window_end), r.cnt) for r in rows)
    expected = sorted((v[0], v[1].replace(".000", ""), v[2].replace(".000", ""), v[3])
                      for v in (row["values"] for row in run["rows"]))
    assert got == expected and all(row["kind"] == "+I" for row in run["rows"])


def _ints(spark, times, **extra):
    return spark.createDataFrame(pd.DataFrame({"k": ["a"] * len(times), "t": times, **extra}))


def test_each_tvf_on_epoch_milliseconds(spark):
    t = _ints(spark, [0, 7, 12, 25])
    tumble = kit.sql("SELECT t, window_start, window_end FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), "
                     "INTERVAL '0.01' SECOND, INTERVAL '-0.003' SECOND)) ORDER BY t", t=t).collect()
    assert [tuple(r) for r in tumble] == [(0, -3, 7), (7, 7, 17), (12, 7, 17), (25, 17, 27)]
    hop = kit.sql("SELECT t, window_start FROM TABLE(HOP(TABLE t, DESCRIPTOR(t), INTERVAL '0.005' SECOND, "
                  "INTERVAL '0.01' SECOND)) ORDER BY t, window_start", t=t).collect()
    assert [tuple(r) for r in hop] == [(0, -5), (0, 0), (7, 0), (7, 5), (12, 5), (12, 10), (25, 20), (25, 25)]
    cumulate = kit.sql("SELECT t, window_start, window_end FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(t), "
                       "INTERVAL '0.005' SECOND, INTERVAL '0.015' SECOND)) ORDER BY t, window_end", t=t).collect()
    assert [tuple(r) for r in cumulate] == [(0, 0, 5), (0, 0, 10), (0, 0, 15), (7, 0, 10), (7, 0, 15),
                                            (12, 0, 15), (25, 15, 30)]
    session = kit.sql("SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE t PARTITION BY k, "
                      "DESCRIPTOR(t), INTERVAL '0.005' SECOND)) GROUP BY window_start, window_end "
                      "ORDER BY window_start", t=_ints(spark, [0, 5, 12, 30, 33])).collect()
    assert [tuple(r) for r in session] == [(0, 10, 2), (12, 17, 1), (30, 38, 2)]   # 0 and 5 touch


def test_a_window_aggregation_drops_late_rows_and_shows_them(spark):
    pdf = pd.DataFrame({"k": ["a"] * 5, "t": [1000, 12000, 3000, 9000, 21000]})
    stream = kit.stream(pdf, time="t", watermark=WatermarkStrategy.for_sql_delay(Duration.of_seconds(1)))
    query = ("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '10' SECOND)) "
             "GROUP BY window_start, window_end ORDER BY window_start")
    result = kit.sql(query, s=stream)
    assert [tuple(r) for r in result.collect()] == [(0, 1), (10000, 1), (20000, 1)]
    assert sorted((r.t, r.window_start) for r in result.late_rows.collect()) == [(3000, 0), (9000, 0)]
    plain = kit.sql("SELECT t FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '10' SECOND))", s=stream)
    assert plain.count() == 5 and not hasattr(plain, "late_rows")   # the TVF alone drops nothing


@pytest.mark.parametrize("query, message", [
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR))", "column 'ts' is not in table t"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(k), INTERVAL '1' HOUR))", "must be a time attribute"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), INTERVAL '0' HOUR))", "size must be a positive interval"),
    ("SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(t), INTERVAL '2' SECOND, INTERVAL '5' SECOND))",
     "size to be an integral multiple of slide"),
    ("SELECT * FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(t), INTERVAL '2' SECOND, INTERVAL '5' SECOND))",
     "size to be an integral multiple of step"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t PARTITION BY k, DESCRIPTOR(t), INTERVAL '1' HOUR))",
     "PARTITION BY is only allowed in SESSION windows"),
    ("SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY user, DESCRIPTOR(t), INTERVAL '1' HOUR))",
     "column 'user' is not in table t"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), 5))", "expected the size as an INTERVAL"),
])
def test_window_errors_point_at_the_text(spark, query, message):
    with pytest.raises(SqlError, match=message) as error:
        kit.sql(query, t=_ints(spark, [1]))
    assert "^" in str(error.value)


def test_legacy_group_windows(spark):
    golden, pdf = _golden_clicks(spark)
    stream = kit.stream(pdf, time="cTime", watermark=WatermarkStrategy.for_sql_delay(Duration.of_seconds(0)))
    rows = kit.sql("""
        SELECT `user`, TUMBLE_START(cTime, INTERVAL '1' HOUR) AS wstart,
               TUMBLE_END(cTime, INTERVAL '1' HOUR) AS wend, COUNT(url) AS cnt
        FROM clicks GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), `user`""", clicks=stream).collect()
    streaming = next(r for r in golden["runs"] if r["mode"] == "streaming")
    assert sorted((r.user, str(r.wstart), r.cnt) for r in rows) == sorted(
        (v[0], v[1].replace(".000", ""), v[3]) for v in (row["values"] for row in streaming["rows"]))
    hop = kit.sql("SELECT HOP_START(t, INTERVAL '0.005' SECOND, INTERVAL '0.01' SECOND) AS s, COUNT(*) AS n "
                  "FROM t GROUP BY HOP(t, INTERVAL '0.005' SECOND, INTERVAL '0.01' SECOND) ORDER BY s",
                  t=_ints(spark, [0, 7, 12])).collect()
    assert [tuple(r) for r in hop] == [(-5, 1), (0, 2), (5, 2), (10, 1)]
    with pytest.raises(SqlError, match="TUMBLE_START needs the query to GROUP BY its window"):
        kit.sql("SELECT TUMBLE_START(t, INTERVAL '1' HOUR) FROM t", t=_ints(spark, [0]))
