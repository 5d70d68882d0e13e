"""Flink SQL window TVFs and legacy group windows in kit.sql: the seed 003 golden, each window
by hand (offsets, gaps, touching sessions), late rows on streams, named arguments, errors.

Times are BIGINT epoch milliseconds unless a test says otherwise, so windows read as numbers.
"""

import datetime as dt
import re

import pandas as pd
import pytest
from goldens import load

import kit
from kit.sql import SqlError
from kit.time import Duration, WatermarkStrategy

MS = "INTERVAL '0.{:03d}' SECOND".format       # MS(5) -> INTERVAL '0.005' SECOND (5 ms)
SQL_DELAY_0 = WatermarkStrategy.for_sql_delay(Duration.of_seconds(0))


def _golden_clicks():
    golden = load("tumble_clicks.json")
    pdf = pd.DataFrame(golden["input"], columns=golden["input_columns"])
    pdf["cTime"] = pd.to_datetime(pdf["cTime"])
    return golden, pdf


def _expected(run):
    assert all(row["kind"] == "+I" for row in run["rows"])
    return [(v[0], v[1].replace(".000", ""), v[2].replace(".000", ""), v[3]) for v in (r["values"] for r in run["rows"])]


def _ints(spark, times, keys=None):
    return spark.createDataFrame(pd.DataFrame({"k": keys or ["a"] * len(times), "t": times}))


def _rows(df):
    return [tuple(r) for r in df.collect()]


def _stream(keys, times, delay_s=0):
    pdf = pd.DataFrame({"k": keys, "t": times})
    return kit.stream(pdf, time="t", watermark=WatermarkStrategy.for_sql_delay(Duration.of_seconds(delay_s)))


# ---- the golden: seed 003's hourly clicks, equal to Flink 2.3 -------------------------------

@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_hourly_clicks_equal_flink(spark, mode):
    golden, pdf = _golden_clicks()
    run = next(r for r in golden["runs"] if r["mode"] == mode)
    table = kit.stream(pdf, time="cTime", watermark=SQL_DELAY_0) if mode == "streaming" else spark.createDataFrame(pdf)
    result = kit.sql(run["query"], clicks=table)
    got = [(r.user, str(r.window_start), str(r.window_end), r.cnt)
           for r in result.orderBy("window_end").collect()]   # (Flink sorts a stream by its time attribute alone)
    expected = _expected(run)
    assert sorted(got) == sorted(expected)
    # Flink emits window by window as the watermark passes their ends; the order of the
    # users inside one window is the order of its timers, which the kit does not promise
    assert [w[1:3] for w in got] == [w[1:3] for w in expected]
    if mode == "streaming":
        assert result.late_rows.count() == 0            # a delay of 0 s and ordered input


# ---- each TVF by hand ----------------------------------------------------------------------

def test_tumble_with_offsets(spark):
    t = _ints(spark, [0, 7, 12, 25])

    def tumble(offset):
        extra = f", {offset}" if offset else ""
        return _rows(kit.sql(f"SELECT t, window_start, window_end FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), "
                             f"{MS(10)}{extra})) ORDER BY t", t=t))

    assert tumble(None) == [(0, 0, 10), (7, 0, 10), (12, 10, 20), (25, 20, 30)]
    assert tumble("INTERVAL '-0.003' SECOND") == [(0, -3, 7), (7, 7, 17), (12, 7, 17), (25, 17, 27)]
    assert tumble(MS(4)) == [(0, -6, 4), (7, 4, 14), (12, 4, 14), (25, 24, 34)]


def test_tumble_on_timestamps_gives_timestamps_and_window_time(spark):
    df = spark.createDataFrame(pd.DataFrame({"ts": pd.to_datetime(["2024-01-01 12:20:00", "2024-01-01 12:40:00"])}))
    rows = kit.sql("SELECT ts, window_start, window_end, window_time FROM TABLE(TUMBLE(TABLE d, DESCRIPTOR(ts), "
                   "INTERVAL '1' HOUR, INTERVAL '30' MINUTE)) ORDER BY ts", d=df).collect()
    t = dt.datetime
    assert [(r.window_start, r.window_end, r.window_time) for r in rows] == [
        (t(2024, 1, 1, 11, 30), t(2024, 1, 1, 12, 30), t(2024, 1, 1, 12, 29, 59, 999000)),
        (t(2024, 1, 1, 12, 30), t(2024, 1, 1, 13, 30), t(2024, 1, 1, 13, 29, 59, 999000))]


def test_hop(spark):
    t = _ints(spark, [0, 7, 12, 25])

    def hop(slide, size, offset=""):
        return _rows(kit.sql(f"SELECT t, window_start, window_end FROM TABLE(HOP(TABLE t, DESCRIPTOR(t), {MS(slide)}, "
                             f"{MS(size)}{offset})) ORDER BY t, window_start", t=t))

    assert hop(5, 10) == [(0, -5, 5), (0, 0, 10), (7, 0, 10), (7, 5, 15), (12, 5, 15), (12, 10, 20),
                          (25, 20, 30), (25, 25, 35)]
    # slide > size: windows [0, 4), [10, 14), [20, 24): 7 and 25 are in none
    assert hop(10, 4) == [(0, 0, 4), (12, 10, 14)]
    # size not a multiple of slide: each row in the windows starting every 4 ms that hold it
    assert hop(4, 10) == [(0, -8, 2), (0, -4, 6), (0, 0, 10), (7, 0, 10), (7, 4, 14), (12, 4, 14), (12, 8, 18),
                          (12, 12, 22), (25, 16, 26), (25, 20, 30), (25, 24, 34)]
    assert hop(5, 10, ", " + MS(2)) == [(0, -8, 2), (0, -3, 7), (7, 2, 12), (7, 7, 17), (12, 7, 17), (12, 12, 22),
                                        (25, 17, 27), (25, 22, 32)]


def test_hop_aggregation(spark):
    rows = _rows(kit.sql(f"SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(HOP(TABLE t, DESCRIPTOR(t), "
                         f"{MS(5)}, {MS(10)})) GROUP BY window_start, window_end ORDER BY window_start",
                         t=_ints(spark, [0, 7, 12])))
    assert rows == [(-5, 5, 1), (0, 10, 2), (5, 15, 2), (10, 20, 1)]


def test_cumulate(spark):
    t = _ints(spark, [0, 7, 12, 25])

    def cumulate(offset=""):
        return _rows(kit.sql(f"SELECT t, window_start, window_end FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(t), "
                             f"{MS(5)}, {MS(15)}{offset})) ORDER BY t, window_end", t=t))

    assert cumulate() == [(0, 0, 5), (0, 0, 10), (0, 0, 15), (7, 0, 10), (7, 0, 15), (12, 0, 15),
                          (25, 15, 30)]
    assert cumulate(", INTERVAL '-0.005' SECOND") == [(0, -5, 5), (0, -5, 10), (7, -5, 10), (12, 10, 15),
                                                      (12, 10, 20), (12, 10, 25), (25, 25, 30), (25, 25, 35),
                                                      (25, 25, 40)]


def test_session_touching_windows_merge_and_partitions_apart(spark):
    query = ("SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE t PARTITION BY k, "
             f"DESCRIPTOR(t), {MS(5)})) GROUP BY k, window_start, window_end ORDER BY k, window_start")
    t = _ints(spark, [0, 5, 12, 30, 33, 1, 9], keys=list("aaaaabb"))
    # a: 0 and 5 touch ([0, 5) and [5, 10) merge), 12 is 7 after 5; b: 1 and 9 are 8 apart
    assert _rows(kit.sql(query, t=t)) == [("a", 0, 10, 2), ("a", 12, 17, 1), ("a", 30, 38, 2),
                                          ("b", 1, 6, 1), ("b", 9, 14, 1)]
    whole = kit.sql(f"SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE t, DESCRIPTOR(t), "
                    f"{MS(5)})) GROUP BY window_start, window_end ORDER BY window_start", t=t)
    assert _rows(whole) == [(0, 17, 5), (30, 38, 2)]    # without PARTITION BY, b's rows bridge a's
    two_keys = kit.sql(f"SELECT k, j, window_start FROM TABLE(SESSION(TABLE t PARTITION BY k, j, DESCRIPTOR(t), "
                       f"{MS(10)})) ORDER BY t", t=t.selectExpr("k", "t", "t % 2 AS j"))
    # gap 10: (a, 0): 0 | 12 | 30; (a, 1): 5 | 33; (b, 1): 1, 9
    assert [r.window_start for r in two_keys.collect()] == [0, 1, 5, 1, 12, 30, 33]


def test_named_arguments(spark):
    t = _ints(spark, [0, 7, 12])
    positional = _rows(kit.sql(f"SELECT t, window_start FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), {MS(10)}, {MS(3)})) "
                               "ORDER BY t", t=t))
    for args in (f"DATA => TABLE t, TIMECOL => DESCRIPTOR(t), SIZE => {MS(10)}, OFFSET => {MS(3)}",
                 f"TIMECOL => DESCRIPTOR(t), OFFSET => {MS(3)}, SIZE => {MS(10)}, DATA => TABLE t",
                 f"TABLE t, DESCRIPTOR(t), offset => {MS(3)}, size => {MS(10)}"):
        assert _rows(kit.sql(f"SELECT t, window_start FROM TABLE(TUMBLE({args})) ORDER BY t", t=t)) == positional
    session = kit.sql(f"SELECT k, window_start, window_end FROM TABLE(SESSION(DATA => TABLE t PARTITION BY k, "
                      f"TIMECOL => DESCRIPTOR(t), GAP => {MS(5)})) ORDER BY t", t=t)
    assert _rows(session) == [("a", 0, 5), ("a", 7, 17), ("a", 7, 17)]
    hop = kit.sql(f"SELECT window_start FROM TABLE(HOP(DATA => TABLE t, TIMECOL => DESCRIPTOR(t), SLIDE => {MS(10)}, "
                  f"SIZE => {MS(20)})) ORDER BY t, window_start", t=t)
    assert [r[0] for r in hop.collect()] == [-10, 0, -10, 0, 0, 10]


# ---- late rows on streams ------------------------------------------------------------------

def test_tumble_aggregation_drops_late_rows_and_shows_them(spark):
    stream = _stream(["a"] * 5, [1000, 12000, 3000, 9000, 21000], delay_s=1)
    result = kit.sql("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '10' SECOND)) "
                     "GROUP BY window_start, window_end", s=stream)
    assert sorted(_rows(result)) == [(0, 1), (10000, 1), (20000, 1)]
    # 3000 and 9000 arrive after 12000: watermark 11000 has passed [0, 10000)'s end - 1 = 9999
    late = result.late_rows.collect()
    assert sorted((r.t, r.seq, r.watermark, r.window_start, r.window_end) for r in late) == [
        (3000, 2, 11000, 0, 10000), (9000, 3, 11000, 0, 10000)]
    plain = kit.sql("SELECT t FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '10' SECOND))", s=stream)
    assert plain.count() == 5 and not hasattr(plain, "late_rows")   # the TVF alone drops nothing
    # grouping by window_start alone is a regular aggregation in Flink: it drops nothing either
    regular = kit.sql("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), "
                      "INTERVAL '10' SECOND)) GROUP BY window_start", s=stream)
    assert sorted(_rows(regular)) == [(0, 3), (10000, 1), (20000, 1)] and not hasattr(regular, "late_rows")


def test_the_same_rows_as_a_batch_table_drop_nothing(spark):
    stream = _stream(["a"] * 5, [1000, 12000, 3000, 9000, 21000], delay_s=1)
    result = kit.sql("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '10' SECOND)) "
                     "GROUP BY window_start, window_end ORDER BY window_start", s=stream.source)
    assert _rows(result) == [(0, 3), (10000, 1), (20000, 1)] and not hasattr(result, "late_rows")


def test_hop_judges_each_window_of_a_late_row(spark):
    stream = _stream(["a"] * 4, [1000, 9000, 3000, 21000])
    result = kit.sql("SELECT window_start, COUNT(*) AS n FROM TABLE(HOP(TABLE s, DESCRIPTOR(t), INTERVAL '5' SECOND, "
                     "INTERVAL '10' SECOND)) GROUP BY window_start, window_end", s=stream)
    # 3000 arrives at watermark 9000: [-5000, 5000) has fired, [0, 10000) has not
    assert sorted(_rows(result)) == [(-5000, 1), (0, 3), (5000, 1), (15000, 1), (20000, 1)]
    assert [(r.t, r.window_start, r.window_end) for r in result.late_rows.collect()] == [(3000, -5000, 5000)]


def test_cumulate_judges_each_window_of_a_late_row(spark):
    stream = _stream(["a"] * 4, [1000, 9000, 3000, 21000])
    result = kit.sql("SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(t), "
                     "INTERVAL '5' SECOND, INTERVAL '10' SECOND)) GROUP BY window_start, window_end", s=stream)
    # 3000 arrives at watermark 9000: [0, 5000) has fired, [0, 10000) has not
    assert sorted(_rows(result)) == [(0, 5000, 1), (0, 10000, 3), (20000, 25000, 1), (20000, 30000, 1)]
    assert [(r.t, r.window_start, r.window_end) for r in result.late_rows.collect()] == [(3000, 0, 5000)]


SESSION_QUERY = ("SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE s PARTITION BY k, "
                 "DESCRIPTOR(t), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end")


def test_session_on_a_stream_replays_merging_in_arrival_order(spark):
    # three scenarios, 100 s apart, on keys of their own (the watermark is the stream's)
    stream = _stream(["a", "a", "a", "c", "d", "c", "e", "f", "e"],
                     [0, 30000, 10000, 100000, 109999, 110000, 210000, 215000, 203000])
    result = kit.sql(SESSION_QUERY, s=stream)
    assert sorted(_rows(result)) == [
        # a: [0, 10000) fired at watermark 30000 before 10000 came, whose [10000, 20000) has passed too
        ("a", 0, 10000, 1), ("a", 30000, 40000, 1),
        # c: d's 109999 moves the watermark past c's [100000, 110000) end - 1, so c's 110000
        # opens a new session (a batch would merge 100000 and 110000, which touch)
        ("c", 100000, 110000, 1), ("c", 110000, 120000, 1), ("d", 109999, 119999, 1),
        # e: 203000's own window [203000, 213000) has passed, but it joins the pending [210000, 220000)
        ("e", 203000, 220000, 2), ("f", 215000, 225000, 1)]
    assert [(r.t, r.window_start, r.window_end) for r in result.late_rows.collect()] == [(10000, 10000, 20000)]


# ---- legacy group windows ------------------------------------------------------------------

def test_legacy_tumble_equals_flink(spark):
    golden, pdf = _golden_clicks()
    stream = kit.stream(pdf, time="cTime", watermark=SQL_DELAY_0)
    rows = kit.sql("""
        SELECT `user`, TUMBLE_START(cTime, INTERVAL '1' HOUR) AS wstart,
               TUMBLE_END(cTime, INTERVAL '1' HOUR) AS wend,
               TUMBLE_ROWTIME(cTime, INTERVAL '1' HOUR) AS wtime, COUNT(url) AS cnt
        FROM clicks GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), `user`""", clicks=stream).collect()
    streaming = next(r for r in golden["runs"] if r["mode"] == "streaming")
    assert sorted((r.user, str(r.wstart), str(r.wend), r.cnt) for r in rows) == sorted(_expected(streaming))
    assert all(r.wtime == r.wend - dt.timedelta(milliseconds=1) for r in rows)


def test_legacy_hop_and_session(spark):
    t = _ints(spark, [0, 7, 12])
    hop = kit.sql(f"SELECT HOP_START(t, {MS(5)}, {MS(10)}) AS s, HOP_END(t, {MS(5)}, {MS(10)}) AS e, COUNT(*) AS n "
                  f"FROM t GROUP BY HOP(t, {MS(5)}, {MS(10)}) ORDER BY s", t=t)
    assert _rows(hop) == [(-5, 5, 1), (0, 10, 2), (5, 15, 2), (10, 20, 1)]
    gaps = kit.sql(f"SELECT HOP_START(t, {MS(10)}, {MS(4)}) AS s, COUNT(*) AS n FROM t "
                   f"GROUP BY HOP(t, {MS(10)}, {MS(4)}) ORDER BY s", t=t)
    assert _rows(gaps) == [(0, 1), (10, 1)]             # slide > size: 7 is in no window
    session = kit.sql(f"SELECT k, SESSION_START(t, {MS(5)}) AS s, SESSION_END(t, {MS(5)}) AS e, COUNT(*) AS n "
                      f"FROM t GROUP BY k, SESSION(t, {MS(5)}) ORDER BY s", t=t)
    assert _rows(session) == [("a", 0, 5, 1), ("a", 7, 17, 2)]


def test_legacy_window_over_a_join_windows_the_first_table(spark):
    users = pd.DataFrame({"k": ["a", "b"], "name": ["A", "B"]})
    rows = kit.sql(f"SELECT u.name, TUMBLE_START(t, {MS(10)}) AS s, COUNT(*) AS n FROM t JOIN u ON t.k = u.k "
                   f"GROUP BY u.name, TUMBLE(t, {MS(10)}) ORDER BY s, name",
                   t=_ints(spark, [0, 7, 12], keys=["a", "a", "b"]), u=users)
    assert _rows(rows) == [("A", 0, 2), ("B", 10, 1)]


def test_legacy_window_on_a_stream_drops_late_rows(spark):
    result = kit.sql("SELECT TUMBLE_START(t, INTERVAL '10' SECOND) AS s, COUNT(*) AS n FROM s "
                     "GROUP BY TUMBLE(t, INTERVAL '10' SECOND)",
                     s=_stream(["a"] * 5, [1000, 12000, 3000, 9000, 21000], delay_s=1))
    assert sorted(_rows(result)) == [(0, 1), (10000, 1), (20000, 1)]
    assert sorted(r.t for r in result.late_rows.collect()) == [3000, 9000]


# ---- errors --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_row(spark):
    return _ints(spark, [1])


@pytest.mark.parametrize("query, message, column", [
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR))", "column 'ts' is not in table t", 48),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(k), INTERVAL '1' HOUR))", "must be a time attribute", 48),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), INTERVAL '0' HOUR))", "size must be a positive interval",
     52),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), INTERVAL -'1' HOUR))", "size must be a positive", 52),
    ("SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(t), INTERVAL '0' SECOND, INTERVAL '5' SECOND))",
     "slide must be a positive interval", 49),
    ("SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(t), INTERVAL '1' SECOND, INTERVAL '-5' SECOND))",
     "size must be a positive interval", 70),
    ("SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(t), INTERVAL '1' SECOND))", "HOP needs its SIZE argument", 21),
    (("SELECT window_start, COUNT(*) FROM TABLE(HOP(TABLE t, DESCRIPTOR(t), INTERVAL '2' SECOND, "
      "INTERVAL '5' SECOND)) GROUP BY window_start, window_end"), "size to be an integral multiple of slide", 42),
    ("SELECT * FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(t), INTERVAL '2' SECOND, INTERVAL '5' SECOND))",
     "size to be an integral multiple of step", 21),
    ("SELECT * FROM TABLE(SESSION(TABLE t, DESCRIPTOR(t), INTERVAL '0' SECOND))", "gap must be a positive", 53),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t PARTITION BY k, DESCRIPTOR(t), INTERVAL '1' HOUR))",
     "PARTITION BY is only allowed in SESSION windows", 36),
    ("SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY user, DESCRIPTOR(t), INTERVAL '1' HOUR))",
     "column 'user' is not in table t", 50),
    ("SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY k, j, DESCRIPTOR(t), INTERVAL '1' HOUR))",
     "column 'j' is not in table t", 53),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), 5))", "expected the size as an INTERVAL", 52),
    ("SELECT * FROM TABLE(TUMBLE(TABLE nope, DESCRIPTOR(t), INTERVAL '1' HOUR))", "unknown table nope", 34),
    ("SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(t), WIDTH => INTERVAL '1' HOUR))",
     "TUMBLE has no parameter WIDTH", 71),
    ("SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, DATA => TABLE t, SIZE => INTERVAL '1' HOUR))",
     "parameter DATA is given twice", 45),
    ("SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, DESCRIPTOR(t), SIZE => INTERVAL '1' HOUR))",
     "a positional argument cannot follow a named one", 45),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), INTERVAL '1' HOUR, INTERVAL '1' HOUR, INTERVAL '1' HOUR))",
     "TUMBLE takes at most 4 arguments", 90),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t, k), INTERVAL '1' HOUR))", "names one time column", 49),
    ("SELECT TUMBLE_START(t, INTERVAL '1' HOUR) FROM t", "TUMBLE_START needs the query to GROUP BY its window", 8),
    ("SELECT TUMBLE_END(t, INTERVAL '2' HOUR) FROM t GROUP BY TUMBLE(t, INTERVAL '1' HOUR)",
     "TUMBLE_END(...) must name the window the query groups by", 8),
    ("SELECT HOP_START(t, INTERVAL '1' HOUR, INTERVAL '2' HOUR) FROM t GROUP BY TUMBLE(t, INTERVAL '1' HOUR)",
     "HOP_START(...) must name the window", 8),
    ("SELECT COUNT(*) FROM t GROUP BY SESSION(t, INTERVAL '-1' SECOND)", "gap must be a positive interval", 44),
    ("SELECT COUNT(*) FROM t GROUP BY TUMBLE(t, INTERVAL '1' HOUR), HOP(t, INTERVAL '1' HOUR, INTERVAL '2' HOUR)",
     "a query can group by one window only", 63),
    # a text sqlglot cannot read: its place, not Spark's in a construct Spark lacks (TABLE( at 15)
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t) INTERVAL '1' HOUR))", "cannot read the query: Expecting )",
     51),
    # nor a registered table Spark does not know: the query is incomplete
    ("SELECT k FROM t WHERE", "an incomplete WHERE", 17),
])
def test_window_errors_point_at_the_text(one_row, query, message, column):
    with pytest.raises(SqlError, match=re.escape(message)) as error:
        kit.sql(query, t=one_row)
    assert (error.value.line, error.value.column) == (1, column), str(error.value)
    assert "^" in str(error.value) and "at org.apache" not in str(error.value)


def test_descriptor_of_a_stream_must_be_its_event_time(spark):
    pdf = pd.DataFrame({"t": [1], "u": pd.to_datetime(["2024-01-01"])})
    s = kit.stream(pdf, time="t")
    with pytest.raises(SqlError, match="stream s has event time 't'"):
        kit.sql("SELECT * FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(u), INTERVAL '1' HOUR))", s=s)


def test_window_aggregates_answer_at_flinks_types(spark):
    """A window's SUM and AVG keep Flink's types (kit.aggregate_types) over a DataFrame too:
    TUMBLE and legacy windows, DISTINCT, expressions and qualified columns, HAVING, a WITH
    query, a join; under semantics="standard" they stay Spark's."""
    t = spark.createDataFrame(pd.DataFrame({"k": ["a", "a", "a", "b"], "t": [0, 1, 2, 3],
                                            "v": pd.array([2147483647, 1, 1, -7], dtype="int32")}))
    u = pd.DataFrame({"k": ["a", "b"], "name": ["A", "B"]})
    tvf = kit.sql(f"SELECT k, SUM(v) AS s, AVG(v) AS a, SUM(DISTINCT v) AS sd, AVG(w.v - 1) AS a2 FROM "
                  f"TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), {MS(10)})) w GROUP BY k, window_start, window_end "
                  f"HAVING SUM(v) < 0 ORDER BY k", t=t)
    assert dict(tvf.dtypes) == {"k": "string", "s": "int", "a": "int", "sd": "int", "a2": "int"}
    assert _rows(tvf) == [("a", -2147483647, 715827883, -2147483648, 715827882), ("b", -7, -7, -7, -8)]
    legacy = kit.sql(f"WITH x AS (SELECT * FROM t WHERE v > 0) SELECT TUMBLE_START(t, {MS(10)}) AS s, SUM(v) AS total, "
                     f"AVG(v) AS a FROM x GROUP BY TUMBLE(t, {MS(10)})", t=t)
    assert dict(legacy.dtypes)["total"] == "int" and _rows(legacy) == [(0, -2147483647, 715827883)]
    joined = kit.sql(f"SELECT u.name, SUM(v) AS total FROM t JOIN u ON t.k = u.k GROUP BY u.name, TUMBLE(t, {MS(10)}) "
                     "ORDER BY name", t=t, u=u)
    assert _rows(joined) == [("A", -2147483647), ("B", -7)]
    standard = kit.sql(f"SELECT SUM(v) AS s, AVG(v) AS a FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(t), {MS(10)})) "
                       "GROUP BY window_start, window_end", semantics="standard", t=t)
    assert dict(standard.dtypes) == {"s": "bigint", "a": "double"}
