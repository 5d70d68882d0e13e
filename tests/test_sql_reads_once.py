"""Each ``kit.sql`` call reads its text once (STYLE practice 12, issue 42 item 2).

A profiler counts the calls of the kit's lexer (``kit.sql.lexer.tokenize``) and of sqlglot's
parser (``sqlglot.parser.Parser.parse``) during one call, split by the text they read: the
user's text, or another (the planner's spliced text, a subquery's). Per call: one tokenize
of the user's text, at most one sqlglot parse of it, and no other text read unless the
planner splices placeholders into it (module doc of ``kit.sql.statement``). ``explain()`` on
a ``DynamicTable`` reads nothing again: it reuses the call's ``Statement``.
"""

import sys
from collections import Counter
from datetime import datetime, timedelta

import pandas as pd
import pytest
import sqlglot.parser

import kit
from kit import Duration, WatermarkStrategy
from kit.sql import lexer, planner

_READERS = {lexer.tokenize.__code__: ("tokenize", "text"), sqlglot.parser.Parser.parse.__code__: ("parse", "sql")}


def reads(call, text: str) -> tuple:
    """(what ``call()`` returned, {(reader, "user" | "other"): calls}) counting the lexer's and
    sqlglot's reads during ``call()``; "user" when the text read is ``text``."""
    seen = Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in _READERS:
            reader, argument = _READERS[frame.f_code]
            seen[reader, "user" if frame.f_locals.get(argument) == text else "other"] += 1

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

# name: (query, tables, expected reads). Each call tokenizes the user's text once; the sqlglot
# parse is the continuous planner's (and the test whether a query over streams updates).
CASES = {
    "continuous GROUP BY": (GROUP_BY, {"clicks": "clicks"}, {("tokenize", "user"): 1, ("parse", "user"): 1}),
    "word-frequency cascade": (CASCADE, {"clicks": "clicks"}, {("tokenize", "user"): 1, ("parse", "user"): 1}),
    "plain SELECT over a stream": ("SELECT `user`, url FROM clicks WHERE `user` = 'Bob'", {"clicks": "clicks"},
                                   {("tokenize", "user"): 1, ("parse", "user"): 1}),
    "window TVF": ("SELECT window_start, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(cTime), "
                   "INTERVAL '1' HOUR)) GROUP BY window_start, window_end", {"clicks": "clicks"},
                   {("tokenize", "user"): 1, ("parse", "user"): 1}),
    "MATCH_RECOGNIZE over a DataFrame": (
        "SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime MEASURES A.price AS p "
        "PATTERN (A B) DEFINE B AS B.price > A.price) MR", {"Ticker": "ticker"}, {("tokenize", "user"): 1}),
    "temporal join (versioned view)": (VERSIONED, {"orders": "orders", "rates": "rates"},
                                       {("tokenize", "user"): 1, ("parse", "user"): 1}),
    "interval join (LEFT)": (
        "SELECT o.order_id, s.sid FROM orders o LEFT JOIN ships s ON o.order_id = s.order_id "
        "AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '30' MINUTE",
        {"orders": "orders", "ships": "ships"}, {("tokenize", "user"): 1, ("parse", "user"): 1}),
    "batch query": ("SELECT `user`, COUNT(*) AS c FROM clicks GROUP BY `user`", {"clicks": "clicks_df"},
                    {("tokenize", "user"): 1}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_kit_sql_reads_its_text_once(tables, case):
    query, names, expected = CASES[case]
    given = {name: tables[key] for name, key in names.items()}
    result, seen = reads(lambda: kit.sql(query, **given), query)
    assert seen == expected, seen
    assert result.columns                                    # it ran


def test_explain_reads_nothing_again(tables):
    table, _ = reads(lambda: kit.sql(CASCADE, clicks=tables["clicks"]), CASCADE)
    plan, seen = reads(table.explain, CASCADE)
    assert seen == {}, seen
    assert "GroupAggregate" in plan


def test_the_planner_parses_a_spliced_text_once(tables):
    """A window TVF is spliced into a placeholder before the logical planner reads the query:
    sqlglot parses that other text once, and never the user's (module doc of kit.sql.statement)."""
    query = CASES["window TVF"][0]
    plan, seen = reads(lambda: planner.physical_plan(query, "retract", clicks=tables["clicks"]), query)
    assert seen == {("tokenize", "user"): 1, ("parse", "other"): 1}, seen
    assert "WindowAggregate" in plan.tree()
