"""Each ``kit.sql`` call reads its text once (STYLE practice 12, issue 42 item 2).

A profiler counts the calls of the kit's lexer (``kit.sql.lexer.tokenize``), of sqlglot's
tokenizer (``sqlglot.tokens.Tokenizer.tokenize``) and of sqlglot's parser
(``sqlglot.parser.Parser.parse``) during one call, split by the text they read: the user's
text, or another (a spliced text, a subquery's). Per call: one read of the user's text
(sqlglot's tokenizer in the kit's Flink dialect; the kit's tokens are made from its tokens,
``lexer.from_sqlglot``), at most one parse of those tokens into the one tree for every
construct (``kit.sql.dialect``), and no other text read -- the planner replaces nodes of
that tree, it splices no text (module doc of ``kit.sql.statement``). ``explain()`` on a
``DynamicTable`` reads nothing again: it reuses the call's ``Statement``.
"""

import json
import sys
from collections import Counter
from pathlib import Path
from datetime import datetime, timedelta

import pandas as pd
import pytest
import sqlglot.parser
import sqlglot.tokens

import kit
from kit import Duration, KitError, WatermarkStrategy
from kit.sql import lexer, planner

_READERS = {lexer.tokenize.__code__: ("tokenize", "text"), sqlglot.parser.Parser.parse.__code__: ("parse", "sql"),
            sqlglot.tokens.Tokenizer.tokenize.__code__: ("sqlglot tokenize", "sql")}
# the one read (the kit's tokens come from it) and the one tree, parsed from those tokens: the
# finders of window TVFs, group windows, temporal and interval joins read it, a batch query's too
ONCE = {("sqlglot tokenize", "user"): 1, ("parse", "user"): 1}


def reads(call, text: str) -> tuple:
    """(what ``call()`` returned, {(reader, "user" | "other"): calls}) counting the kit lexer's
    and sqlglot's reads during ``call()``; "user" when the text read is ``text``. sqlglot
    tokenizing a bare type name (``DataType.build("float")`` while it types a tree) is no
    read of a query: not counted."""
    seen = Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in _READERS:
            reader, argument = _READERS[frame.f_code]
            read = frame.f_locals.get(argument)
            if reader == "sqlglot tokenize" and isinstance(read, str) and read.isidentifier():
                return                      # a type's name (sqlglot's DataType.build while typing a tree)
            seen[reader, "user" if read == text else "other"] += 1

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, dict(seen)


T0 = datetime(2024, 1, 1, 12)
SQL0 = WatermarkStrategy.for_sql_delay(Duration(0))


@pytest.fixture(scope="module")
def tables(spark):
    at = lambda minutes: T0 + timedelta(minutes=minutes)      # noqa: E731
    clicks = pd.DataFrame({"user": ["Mary", "Bob", "Mary", "Liz"], "url": ["/a", "/b", "/c", "/a"],
                           "cTime": [at(m) for m in (0, 10, 70, 75)]})
    ticker = pd.DataFrame({"symbol": ["A"] * 4, "rowtime": [at(m) for m in range(4)], "price": [10, 12, 11, 13]})
    orders = pd.DataFrame({"order_id": ["o1", "o2"], "currency": ["EUR", "EUR"], "order_time": [at(5), at(20)]})
    rates = pd.DataFrame({"currency": ["EUR", "EUR"], "rate": [1.1, 1.2], "update_time": [at(0), at(15)]})
    ships = pd.DataFrame({"sid": ["s1", "s2"], "order_id": ["o1", "o2"], "ship_time": [at(7), at(60)]})
    return {
        "clicks": kit.stream(clicks, time="cTime", watermark=Duration.of_minutes(5)),
        "clicks_df": spark.createDataFrame(clicks),
        "ticker": spark.createDataFrame(ticker),
        "orders": kit.stream(orders, time="order_time", watermark=SQL0),
        "rates": kit.stream(rates, time="update_time", watermark=SQL0),
        "ships": kit.stream(ships, time="ship_time", watermark=SQL0),
    }


GROUP_BY = "SELECT `user`, COUNT(url) AS cnt FROM clicks GROUP BY `user`"
CASCADE = ("SELECT cnt, COUNT(*) AS freq FROM (SELECT `user`, COUNT(*) AS cnt FROM clicks GROUP BY `user`) "
           "GROUP BY cnt")
VERSIONED = """WITH versioned_rates AS (
  SELECT currency, rate, update_time FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY update_time DESC) AS rownum
    FROM rates)
  WHERE rownum = 1)
SELECT o.order_id, r.rate FROM orders AS o
LEFT JOIN versioned_rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"""

# name: (query, tables, expected reads). Each call tokenizes the user's text once and parses
# those tokens once: the tree the finders, the continuous planner and the test whether a query
# over streams updates all read.
CASES = {
    "continuous GROUP BY": (GROUP_BY, {"clicks": "clicks"}, ONCE),
    "word-frequency cascade": (CASCADE, {"clicks": "clicks"}, ONCE),
    "plain SELECT over a stream": ("SELECT `user`, url FROM clicks WHERE `user` = 'Bob'", {"clicks": "clicks"},
                                   ONCE),
    "window TVF": ("SELECT window_start, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(cTime), "
                   "INTERVAL '1' HOUR)) GROUP BY window_start, window_end", {"clicks": "clicks"},
                   ONCE),
    "MATCH_RECOGNIZE over a DataFrame": (
        "SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime MEASURES A.price AS p "
        "PATTERN (A B) DEFINE B AS B.price > A.price) MR", {"Ticker": "ticker"}, ONCE),
    "temporal join (versioned view)": (VERSIONED, {"orders": "orders", "rates": "rates"},
                                       ONCE),
    "interval join (LEFT)": (
        "SELECT o.order_id, s.sid FROM orders o LEFT JOIN ships s ON o.order_id = s.order_id "
        "AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '30' MINUTE",
        {"orders": "orders", "ships": "ships"}, ONCE),
    "batch query": ("SELECT `user`, COUNT(*) AS c FROM clicks GROUP BY `user`", {"clicks": "clicks_df"},
                    ONCE),
    "HOP by position": ("SELECT window_start, COUNT(*) AS c FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(cTime), "
                        "INTERVAL '30' MINUTE, INTERVAL '1' HOUR)) GROUP BY window_start, window_end",
                        {"clicks": "clicks"}, ONCE),
    "SESSION by name, PARTITION BY": (
        "SELECT `user`, window_start, COUNT(*) AS c FROM TABLE(SESSION(DATA => TABLE clicks PARTITION BY `user`, "
        "TIMECOL => DESCRIPTOR(cTime), GAP => INTERVAL '10' MINUTE)) GROUP BY `user`, window_start, window_end",
        {"clicks": "clicks"}, ONCE),
    "CUMULATE": ("SELECT window_end, COUNT(*) AS c FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(cTime), "
                 "INTERVAL '30' MINUTE, INTERVAL '1' HOUR)) GROUP BY window_start, window_end",
                 {"clicks": "clicks"}, ONCE),
    "group window": ("SELECT `user`, TUMBLE_START(cTime, INTERVAL '1' HOUR) AS s, COUNT(*) AS c FROM clicks "
                     "GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), `user`", {"clicks": "clicks"}, ONCE),
    "MATCH_RECOGNIZE over a stream, WITHIN": (
        "SELECT * FROM clicks MATCH_RECOGNIZE (PARTITION BY `user` ORDER BY cTime MEASURES FIRST(A.url) AS first_url, "
        "LAST(B.url) AS last_url ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) "
        "WITHIN INTERVAL '2' HOUR DEFINE B AS B.url <> A.url, C AS C.url = A.url) MR", {"clicks": "clicks"}, ONCE),
    "MATCH_RECOGNIZE over a subquery": (
        "SELECT * FROM (SELECT * FROM Ticker WHERE price > 0) MATCH_RECOGNIZE (ORDER BY rowtime "
        "MEASURES A.price AS p PATTERN (A B) DEFINE B AS B.price > A.price) AS MR", {"Ticker": "ticker"}, ONCE),
    "interval join (WHERE)": (
        "SELECT o.order_id, s.sid FROM orders o, ships s WHERE o.order_id = s.order_id "
        "AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '30' MINUTE",
        {"orders": "orders", "ships": "ships"}, ONCE),
}


@pytest.mark.parametrize("case", list(CASES))
def test_kit_sql_reads_its_text_once(tables, case):
    query, names, expected = CASES[case]
    given = {name: tables[key] for name, key in names.items()}
    result, seen = reads(lambda: kit.sql(query, **given), query)
    assert seen == expected, seen
    assert result.columns                                    # it ran


@pytest.mark.parametrize("case", CASES)
def test_the_kits_lexer_does_not_run(tables, case):
    """Every reader gets the one tree and sqlglot's tokens: the kit's lexer (``lexer.tokenize``),
    which only says where a text sqlglot's tokenizer refuses goes wrong, does not run."""
    query, names, _ = CASES[case]
    watched = {lexer.tokenize.__code__: "tokenize"}
    ran = Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in watched:
            ran[watched[frame.f_code]] += 1

    sys.setprofile(profile)
    try:
        kit.sql(query, **{name: tables[key] for name, key in names.items()})
    finally:
        sys.setprofile(None)
    assert not ran, dict(ran)


def test_explain_reads_nothing_again(tables):
    table, _ = reads(lambda: kit.sql(CASCADE, clicks=tables["clicks"]), CASCADE)
    plan, seen = reads(table.explain, CASCADE)
    assert seen == {}, seen
    assert "GroupAggregate" in plan


def test_the_planner_replaces_nodes_and_parses_nothing_again(tables):
    """A window TVF becomes a placeholder table before the logical planner reads the query: in
    the tree, which sqlglot (the kit's Flink dialect) read once; no text is spliced and read
    again (module doc of kit.sql.statement)."""
    query = CASES["window TVF"][0]
    plan, seen = reads(lambda: planner.physical_plan(query, "retract", clicks=tables["clicks"]), query)
    assert seen == ONCE, seen
    assert "WindowAggregate" in plan.tree()


GOLDEN = json.loads((Path(__file__).parent / "golden" / "flink-2.3" / "changelog_mode.json").read_text())
CORPUS = {q["name"]: q for q in GOLDEN["queries"] + GOLDEN["errors"]}


@pytest.fixture(scope="module")
def golden_streams(spark):
    """A one-row kit.Stream per table of Flink's corpus (tests/test_changelog_mode.py)."""
    streams = {}
    for name, spec in GOLDEN["tables"].items():
        row = {c: [pd.Timestamp("2024-01-01")] if k.startswith("TIMESTAMP") else [1] if k == "INT" else ["a"]
               for c, k in spec["columns"]}
        if spec.get("proctime"):
            row[spec["proctime"]] = [pd.Timestamp("2024-01-01")]
        streams[name] = kit.stream(pd.DataFrame(row), time=spec["rowtime"], watermark=SQL0,
                                   proctime=spec.get("proctime"), primary_key=spec.get("primary_key"))
    return streams


@pytest.mark.parametrize("name", list(CORPUS))
def test_the_planner_reads_each_query_of_flinks_corpus_once(golden_streams, name):
    """Window TVFs (over a stream, over a WITH query: an error), MATCH_RECOGNIZE (over a table,
    over a subquery), temporal and interval joins, OVER, Top-N...: the continuous planner reads
    the one tree -- placeholders replace nodes, a subquery is a node of it -- and reads no
    other text, refusals included."""
    q = CORPUS[name]
    query = q["query"]
    tables = {t: golden_streams[t] for t in q["tables"]} if "tables" in q else \
        {t: s for t, s in golden_streams.items() if t in query}

    def plan():
        try:
            return planner.physical_plan(query, "retract", **tables)
        except KitError as error:
            return error
    _, seen = reads(plan, query)
    assert seen == ONCE, seen


def test_a_subquery_in_define_is_part_of_the_statement(spark):
    """semantics="standard": an uncorrelated subquery in DEFINE or MEASURES runs on its own, as a
    part of the call's statement -- its tokens are the user's, nothing is read again."""
    t = spark.createDataFrame(pd.DataFrame({"id": [1, 2, 3], "value": [50, 60, 40]}))
    limits = spark.createDataFrame(pd.DataFrame({"k": ["low"], "v": [55]}))
    query = ("SELECT * FROM T MATCH_RECOGNIZE (ORDER BY id MEASURES (SELECT MAX(v) FROM Limits) AS top, "
             "FIRST(A.id) AS first_id PATTERN (A) DEFINE A AS value > (SELECT v FROM Limits WHERE k = 'low'))")
    result, seen = reads(lambda: kit.sql(query, semantics="standard", T=t, Limits=limits), query)
    assert seen == ONCE, seen
    assert [tuple(r) for r in result.collect()] == [(55, 2)]
