"""kit.sql on Spark: registered tables, the MATCH_RECOGNIZE rewrite (with a stand-in
matcher), Spark's errors at the user's line and column, and the checks on arguments."""

import datetime
import re
from types import SimpleNamespace

import pandas as pd
import pytest
from goldens import load

import kit
import kit.match_recognize
from kit.match_recognize import MatchResult
from kit.match_recognize import spec as S
from kit.sql import SqlError, sql
from kit.sql.lexer import MAX_NESTING

TICKER = pd.DataFrame({
    "symbol": ["ACME", "ACME", "XYZ"],
    "rowtime": pd.to_datetime(["2011-04-01 10:00:00", "2011-04-01 10:00:01",
                               "2011-04-01 10:00:02"]),
    "price": [12, 17, 10],
})
NAMES = pd.DataFrame({"symbol": ["ACME", "XYZ"], "name": ["Acme Corp", "XYZ Inc"]})


@pytest.fixture
def ticker(spark):
    return spark.createDataFrame(TICKER)


@pytest.fixture
def matcher(monkeypatch):
    """A stand-in for kit.match_recognize.match_recognize: one row per partition with the
    partition's maximum price as ``top``; records its calls."""
    calls = []

    def match_recognize(table, spec, semantics):
        calls.append((spec, semantics))
        from pyspark.sql import functions as F
        rows = table.groupBy(*spec.partition_by).agg(F.max("price").alias("top"))
        return MatchResult(rows, None, spec, semantics, plan=SimpleNamespace(details=lambda: table))

    monkeypatch.setattr(kit.match_recognize, "match_recognize", match_recognize, raising=False)
    return calls


def rows(df):
    return [tuple(r) for r in df.collect()]


def internal_views(spark):
    return [t.name for t in spark.catalog.listTables() if t.name.startswith("__kit_")]


# ------------------------------------------------------------------ plain Spark SQL

def test_spark_and_pandas_tables(ticker):
    df = sql("SELECT t.symbol, SUM(price) AS total, MAX(n.name) AS name\n"
             "FROM Ticker t JOIN Names n ON t.symbol = n.symbol\n"
             "GROUP BY t.symbol ORDER BY t.symbol;", Ticker=ticker, Names=NAMES)
    assert rows(df) == [("ACME", 29, "Acme Corp"), ("XYZ", 10, "XYZ Inc")]


def test_table_names_qualify_columns_and_any_case(ticker):
    df = sql("SELECT Ticker.price FROM ticker WHERE Ticker.price > 12", Ticker=ticker)
    assert rows(df) == [(17,)]


def test_streams_use_their_annotated_rows(ticker):
    clicks = kit.stream(ticker, time="rowtime")
    df = sql("SELECT seq, price FROM clicks ORDER BY seq", clicks=clicks)
    assert rows(df) == [(0, 12), (1, 17), (2, 10)]


def test_flink_types_in_cast(ticker):
    df = sql("SELECT CAST(rowtime AS TIMESTAMP(3)) AS t, CAST(price AS STRING) AS p,\n"
             "  CAST(CAST(price AS VARCHAR) AS BYTES) AS b, CAST(price AS DOUBLE PRECISION) AS d,\n"
             "  CAST(rowtime AS TIMESTAMP(3) WITH LOCAL TIME ZONE) AS ltz, price AS `varchar`\n"
             "FROM Ticker WHERE price = 10", Ticker=ticker)
    assert [f.dataType.simpleString() for f in df.schema] == [
        "timestamp", "string", "binary", "double", "timestamp", "bigint"]
    assert rows(df) == [(datetime.datetime(2011, 4, 1, 10, 0, 2), "10", bytearray(b"10"), 10.0,
                         datetime.datetime(2011, 4, 1, 10, 0, 2), 10)]


def test_errors_after_a_type_rewrite_still_point_into_the_users_text(ticker):
    with pytest.raises(SqlError) as info:
        sql("SELECT CAST(rowtime AS TIMESTAMP(3) WITH LOCAL TIME ZONE), nope FROM Ticker",
            Ticker=ticker)
    assert (info.value.line, info.value.column) == (1, 60)


def test_views_are_private_and_dropped_and_the_result_still_runs(spark, ticker):
    spark.createDataFrame(NAMES).createOrReplaceTempView("Ticker")
    try:
        df = sql("SELECT COUNT(*) FROM Ticker", Ticker=ticker)
        assert internal_views(spark) == []
        assert rows(df) == [(3,)]
        assert rows(df.selectExpr("`count(1)` + 1")) == [(4,)]     # new plans on top still run
        assert rows(spark.sql("SELECT COUNT(*) FROM Ticker")) == [(2,)]   # the user's view
    finally:
        spark.catalog.dropTempView("Ticker")


def test_comma_joins_and_subqueries_in_from(ticker):
    df = sql("SELECT COUNT(*) FROM (SELECT * FROM Names) n, Ticker t JOIN Names m\n"
             "  ON t.symbol = m.symbol, Ticker\nWHERE n.symbol = t.symbol AND t.price IN (10, 12)",
             Ticker=ticker, Names=NAMES)
    assert rows(df) == [(6,)]


def test_concurrent_calls_do_not_share_views(spark):
    from concurrent.futures import ThreadPoolExecutor
    frames = [pd.DataFrame({"x": [i] * (i + 1)}) for i in range(4)]
    with ThreadPoolExecutor(2) as pool:
        counts = list(pool.map(lambda f: rows(sql("SELECT COUNT(*), MAX(x) FROM T", T=f)), frames))
    assert counts == [[(i + 1, i)] for i in range(4)]


def test_unregistered_tables_come_from_the_session(spark, ticker):
    ticker.createOrReplaceTempView("user_ticker")
    try:
        assert rows(sql("SELECT COUNT(*) FROM user_ticker")) == [(3,)]
    finally:
        spark.catalog.dropTempView("user_ticker")


# ------------------------------------------------------------------ Spark's errors

@pytest.mark.parametrize("query, line, column, start", [
    ("SELECT symbol FROM Ticker WHERE )", 1, 33, "[PARSE_SYNTAX_ERROR]"),
    ("SELECT symbol FROM Ticker\nWHERE price >", 2, 14, "[PARSE_SYNTAX_ERROR]"),
    (("-- the ticker\nSELECT CAST(price AS TIMESTAMP(3)) FROM Ticker, Ticker AS t\n"
     "WHERE t.prize > 1"), 3, 7, "[UNRESOLVED_COLUMN"),
    ("SELECT symbol\nFROM Ticker\nWHERE prize > 1", 3, 7, "[UNRESOLVED_COLUMN"),
    ("SELECT * FROM Ticker t JOIN Nope n ON t.x = n.x", 1, 29, "[TABLE_OR_VIEW_NOT_FOUND]"),
    ("SELECT nosuchfn(price)\nFROM Ticker", 1, 8, "[UNRESOLVED_ROUTINE]"),
])
def test_spark_errors_point_into_the_users_text(ticker, query, line, column, start):
    with pytest.raises(SqlError) as info:
        sql(query, Ticker=ticker)
    error = info.value
    assert (error.line, error.column) == (line, column)
    assert error.message.startswith(start)
    assert "__kit_" not in str(error) and "at org.apache" not in str(error)
    assert str(error).splitlines()[1] == "    " + query.split("\n")[line - 1]


def test_analysis_error_naming_an_expression_points_at_it(ticker):
    with pytest.raises(SqlError) as info:
        sql("  SELECT price + 1 FROM Ticker GROUP BY symbol", Ticker=ticker)
    assert (info.value.line, info.value.column) == (1, 10)
    assert info.value.message.startswith("[MISSING_AGGREGATION]")


def test_analysis_error_without_a_place_points_at_the_statement(ticker):
    with pytest.raises(SqlError) as info:
        sql("\n  SELECT 1 FROM Ticker UNION SELECT 1, 2 FROM Ticker", Ticker=ticker)
    assert (info.value.line, info.value.column) == (2, 3)
    assert info.value.message.startswith("[NUM_COLUMNS_MISMATCH]")


def test_views_are_dropped_after_an_error(spark, ticker):
    with pytest.raises(SqlError):
        sql("SELECT nope FROM Ticker", Ticker=ticker)
    assert internal_views(spark) == []


# ------------------------------------------------------------------ MATCH_RECOGNIZE

MR = """SELECT T.symbol, T.top, n.name
FROM Ticker
    MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES LAST(A.price) AS top
        PATTERN (A+ B)
        DEFINE A AS A.price > 10
    ) AS T
JOIN Names n ON T.symbol = n.symbol
WHERE T.top > 11"""


def test_match_recognize_runs_on_the_matcher_and_spark_does_the_rest(spark, ticker, matcher):
    df = sql(MR, semantics="standard", Ticker=ticker, Names=NAMES)
    assert internal_views(spark) == []
    assert rows(df) == [("ACME", 17, "Acme Corp")]
    ((spec, semantics),) = matcher
    assert semantics == "standard"
    assert spec.pattern == S.Concat((S.Quantified(S.Label("A"), 1, None), S.Label("B")))
    assert spec.pos == (3, 5)


def test_match_recognize_on_a_subquery(ticker, matcher):
    df = sql("SELECT * FROM (SELECT * FROM Ticker WHERE price > 10)\n"
             "  MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime PATTERN (A)) M",
             Ticker=ticker)
    assert rows(df) == [("ACME", 17)]
    assert matcher[0][1] == "flink"


def test_match_recognize_in_a_cte_and_on_a_match_recognize(ticker, matcher):
    df = sql("WITH m AS (SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol\n"
             "  ORDER BY rowtime PATTERN (A)))\n"
             "SELECT m.symbol FROM m JOIN (SELECT * FROM (SELECT symbol, top AS price FROM Ticker\n"
             "  MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime PATTERN (A)))\n"
             "  MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY symbol PATTERN (B))) n\n"
             "ON m.top = n.top ORDER BY 1", Ticker=ticker)
    assert rows(df) == [("ACME",), ("XYZ",)]
    assert [spec.pattern for spec, _ in matcher] == [S.Label("A"), S.Label("A"), S.Label("B")]


def test_match_recognize_on_a_with_query(ticker, matcher):
    """A WITH query's name as the input: the query (and the WITH queries before it) runs."""
    df = sql("WITH cheap (symbol, rowtime, price) AS (SELECT symbol, rowtime, price FROM Ticker),\n"
             "  dear AS (SELECT * FROM cheap WHERE price > 10)\n"
             "SELECT * FROM dear MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime PATTERN (A)) M",
             Ticker=ticker)
    assert rows(df) == [("ACME", 17)]
    assert sql("WITH dear AS (SELECT * FROM Ticker WHERE price > 15) SELECT * FROM Ticker "
               "MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime PATTERN (A)) M ORDER BY 1",
               Ticker=ticker).collect()[1].top == 10     # a table that is not a WITH query: itself


def test_errors_after_the_clause_point_into_the_users_text(ticker, matcher):
    with pytest.raises(SqlError) as info:
        sql(MR.replace("WHERE T.top", "WHERE T.bottom"), Ticker=ticker, Names=NAMES)
    assert (info.value.line, info.value.column) == (11, 7)


def test_errors_inside_the_subquery_point_into_the_users_text(ticker, matcher):
    with pytest.raises(SqlError) as info:
        sql("SELECT * FROM (SELECT * FROM Ticker WHERE prize > 10)\n"
            "  MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime PATTERN (A)) M",
            Ticker=ticker)
    assert (info.value.line, info.value.column) == (1, 43)


def test_parse_errors_in_the_clause_come_first(ticker, matcher):
    with pytest.raises(SqlError) as info:
        sql(MR.replace("PATTERN (A+ B)", "PATTERN (A+ B"), Ticker=ticker, Names=NAMES)
    assert str(info.value).startswith("line 8, column 9: expected ')' but found 'DEFINE'")
    assert matcher == []


def test_matcher_errors_with_a_position_point_into_the_users_text(ticker, monkeypatch):
    from kit.match_recognize.errors import NotSupportedByFlink

    def match_recognize(table, spec, semantics):
        raise NotSupportedByFlink("PATTERN", "alternation '|'", spec.pattern.pos)

    monkeypatch.setattr(kit.match_recognize, "match_recognize", match_recognize, raising=False)
    with pytest.raises(SqlError) as info:
        sql(MR, Ticker=ticker, Names=NAMES)
    assert str(info.value).splitlines() == [
        ("line 7, column 18: PATTERN: alternation '|' is not supported by Flink; use "
        'semantics="standard" for the SQL standard behaviour'),
        "            PATTERN (A+ B)",
        "                     ^"]
    # one message: the matcher's own is kept as the context, not shown again under it
    assert info.value.__suppress_context__ and isinstance(info.value.__context__, NotSupportedByFlink)


# ------------------------------------------------------------------ with the real matcher

def golden_input(golden):
    frame = pd.DataFrame(golden["input"], columns=golden["input_columns"])
    frame["rowtime"] = pd.to_datetime(frame["rowtime"])
    return frame


def stamp(value):
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if isinstance(value, datetime.datetime) \
        else value


def test_golden_v_shape_through_sql():
    golden = load("mr_a_vshape_batch.json")
    (query,) = golden["queries"]
    outer = f"SELECT MR.* FROM ({query['sql']}) AS MR WHERE MR.symbol = 'ACME'"
    df = sql(outer, semantics="flink-2.3", Ticker=golden_input(golden))
    assert df.columns == query["columns"]
    assert [[stamp(v) for v in r] for r in rows(df)] == [r["values"] for r in query["rows"]]


def test_stream_input_reaches_the_matcher_with_its_watermarks():
    """Out of order with watermark delay 0: late rows are dropped, so the match differs from
    the batch answer (10:00:04 .. 10:00:08); the dropped rows come back as late_rows."""
    golden = load("mr_p3_vshape_out_of_order_wm0_streaming.json")
    query = golden["queries"][0]
    ticker = kit.stream(golden_input(golden), time="rowtime",
                        watermark=kit.WatermarkStrategy.for_sql_delay(kit.Duration.of_millis(0)))
    df = sql(query["sql"], semantics="flink-2.3", Ticker=ticker)
    assert [[stamp(v) for v in r] for r in rows(df)] == [r["values"] for r in query["rows"]]
    late = [(r.price, stamp(r.rowtime), stamp(r.watermark)) for r in df.late_rows.collect()]
    assert late == [(17, "2011-04-01 10:00:01.000", "2011-04-01 10:00:02.000"),
                    (25, "2011-04-01 10:00:04.000", "2011-04-01 10:00:05.000"),
                    (14, "2011-04-01 10:00:07.000", "2011-04-01 10:00:08.000")]
    details = df.match_details.filter("classifier IS NOT NULL OR late").collect()
    assert [(r.price, r.classifier, r.late) for r in details] == [
        (17, None, True), (21, "START_ROW", False), (25, None, True), (18, "PRICE_DOWN", False),
        (15, "PRICE_DOWN", False), (14, None, True), (24, "PRICE_UP", False)]


def test_match_details_are_planned_when_first_read(ticker, monkeypatch):
    """``match_details`` costs no plan until read (most results never read it), then one."""
    calls = []
    details = MatchResult.details
    monkeypatch.setattr(MatchResult, "details", lambda self: calls.append(1) or details(self))
    df = sql("SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime\n"
             "MEASURES A.price AS p PATTERN (A B) DEFINE B AS B.price > A.price)", Ticker=ticker)
    plain = type(kit.spark().range(1))
    assert calls == [] and isinstance(df, plain)
    assert (type(df).__module__, type(df).__qualname__) == (plain.__module__, plain.__qualname__)   # as code checks it
    first = df.match_details
    assert calls == [1] and df.match_details is first and "classifier" in first.columns


def test_batch_input_has_no_late_rows(ticker):
    df = sql("SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime\n"
             "MEASURES A.price AS p PATTERN (A B) DEFINE B AS B.price > A.price)", Ticker=ticker)
    assert not hasattr(df, "late_rows")


def test_user_aggregates_reach_the_parser_and_the_matcher(ticker, monkeypatch):
    seen = {}

    def match_recognize(table, spec, semantics, aggregates):
        seen.update(measure=spec.measures[0].expr, aggregates=aggregates)
        return MatchResult(table, None, spec, semantics, plan=SimpleNamespace(details=lambda: table))

    class Spread:
        """max - min, PyFlink style."""

    monkeypatch.setattr(kit.match_recognize, "match_recognize", match_recognize, raising=False)
    sql("SELECT * FROM Ticker MATCH_RECOGNIZE (ORDER BY rowtime MEASURES spread(A.price) AS s\n"
        "PATTERN (A+ B))", aggregates={"Spread": Spread}, Ticker=ticker)
    assert seen == {"measure": S.Aggregate("SPREAD", S.Column("price", "A")),
                    "aggregates": {"SPREAD": Spread}}


# ------------------------------------------------------------------ arguments

def test_semantics_must_be_known(ticker):
    with pytest.raises(kit.KitError, match="'flink', 'standard', 'flink-2.3'"):
        sql("SELECT 1", semantics="trino", Ticker=ticker)


def test_tables_must_be_dataframes_or_streams():
    with pytest.raises(kit.KitError, match="table Ticker: expected a Spark or pandas DataFrame"):
        sql("SELECT 1", Ticker=[1, 2])


def test_query_must_be_a_string(ticker):
    with pytest.raises(kit.KitError, match=r"takes the query as a string of Flink SQL; got None \(NoneType\)"):
        sql(None, Ticker=ticker)


@pytest.mark.parametrize("columns, message", [
    (["symbol", "symbol", "price"], "table Ticker: two columns are named 'symbol'; rename one of them"),
    (["symbol", "Symbol", "price"], "table Ticker: columns 'symbol' and 'Symbol' differ only in case"),
    (["symbol", "a.b", "price"], "table Ticker: column 'a.b' has a '.', which Spark SQL reads as a field of a "
                                 "struct; rename it, e.g. to 'a_b'"),
])
def test_table_columns_must_be_unique_and_without_dots(spark, columns, message):
    frame = TICKER.set_axis(columns, axis=1)
    with pytest.raises(kit.KitError, match=re.escape(message)):
        sql("SELECT * FROM Ticker", Ticker=frame)
    with pytest.raises(kit.KitError, match=re.escape(message)):
        sql("SELECT * FROM Ticker", Ticker=spark.createDataFrame(TICKER).toDF(*columns))


def test_nesting_deeper_than_the_parsers_take_is_an_error_at_its_place(ticker):
    at_limit = "(" * MAX_NESTING + "price" + ")" * MAX_NESTING
    assert rows(sql(f"SELECT {at_limit} FROM Ticker WHERE symbol = 'XYZ'", Ticker=ticker)) == [(10,)]
    case = "CASE WHEN TRUE THEN "
    for level, deep in (("(", "(" * 300 + "price" + ")" * 300), ("NOT ", "NOT " * 3000 + "TRUE"),
                        ("- ", "- " * 3000 + "1"), (case, case * 300 + "1" + " END" * 300)):
        with pytest.raises(SqlError, match=f"nests more than {MAX_NESTING} levels deep here") as info:
            sql(f"SELECT symbol,\n  {deep} FROM Ticker", Ticker=ticker)
        assert (info.value.line, info.value.column) == (2, 3 + MAX_NESTING * len(level))   # the level too many
    define = "A AS " + "(" * 200 + "A.price > 10" + ")" * 200
    with pytest.raises(SqlError, match="nests more than"):
        sql("SELECT * FROM Ticker MATCH_RECOGNIZE (ORDER BY rowtime MEASURES A.price AS p PATTERN (A) "
            f"DEFINE {define})", Ticker=ticker)


def test_constants_spark_rejects_are_sql_errors(ticker):
    with pytest.raises(SqlError, match=r"line 1, column \d+: \[DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION\]"):
        sql("SELECT CAST(price AS DECIMAL(99, 2)) FROM Ticker", Ticker=ticker)
    with pytest.raises(SqlError, match=r"line 1, column \d+: \[INVALID_INTERVAL_FORMAT"):
        sql("SELECT rowtime + INTERVAL '-' SECOND FROM Ticker", Ticker=ticker)


def test_spark_suggests_no_internal_column(spark):
    orders = kit.stream(pd.DataFrame({"t": pd.to_datetime(["2024-01-01 10:00"]), "cur": ["EUR"]}), time="t")
    rates = kit.stream(pd.DataFrame({"t": pd.to_datetime(["2024-01-01 09:00"]), "cur": ["EUR"], "rate": [1.1]}),
                       time="t", primary_key="cur")
    with pytest.raises(SqlError, match="rrate") as info:
        sql("SELECT o.cur, rrate FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.t AS r ON o.cur = r.cur",
            orders=orders, rates=rates)
    assert "`r`.`rate`" in str(info.value) and "__kit_" not in str(info.value)
