"""A seeded fuzz of malformed SQL: whatever ``kit.sql`` cannot run, it says so as the kit.

Each case starts from a query the notebooks and tests run (``SEEDS``) and breaks it one way
(``MUTATIONS``: a truncation, tokens swapped, dropped or doubled, a bad identifier,
unbalanced parentheses, clauses out of order, a bad literal, an unknown table or column, a
bad type, deep nesting); ``random.Random(SEED)`` picks them, so every run tries the same
queries. A broken query may still be valid SQL and run; one that fails must raise a
``KitError`` (a ``SqlError`` when the text is at fault, with a line and column inside the
query and the query quoted) whose message has no Java frame, no Python traceback and no
name of the kit's internal views. Queries that are not strings fail as ``KitError`` too.

The broken queries are planned, not run: ``kit.sql`` parses, checks and has Spark analyse
the query before it returns its (lazy) DataFrame, which is where these errors belong.
"""

import random
import re
import warnings
from datetime import datetime

import pandas as pd
import pytest

import kit
from kit import Clock, Duration, KitError, SqlError, WatermarkStrategy
from kit.joins import TemporalTableFunction
from kit.sql.lexer import MAX_NESTING, tokenize

SEED = 20240501
CASES = 132      # 12 per mutation
JOIN_CASES = 8   # kit.sql runs a join's Spark jobs as it plans it: seconds per query

SEEDS = [
    # notebooks/01_click_windows.ipynb
    """SELECT `user`, window_start, window_end, COUNT(url) AS cnt
    FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' HOUR))
    GROUP BY `user`, window_start, window_end""",
    """SELECT `user`, TUMBLE_START(cTime, INTERVAL '1' HOUR) AS window_start, COUNT(url) AS cnt
    FROM clicks GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), `user`""",
    # tests/test_sql_windows.py
    """SELECT window_start, window_end, COUNT(*) AS n
    FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '30' MINUTE, INTERVAL '1' HOUR))
    GROUP BY window_start, window_end""",
    """SELECT `user`, window_start, window_end, COUNT(*) AS n
    FROM TABLE(SESSION(TABLE clicks PARTITION BY `user`, DESCRIPTOR(cTime), INTERVAL '30' MINUTE))
    GROUP BY `user`, window_start, window_end""",
    # notebooks/02_ticker_patterns.ipynb
    """SELECT * FROM Ticker MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            START_ROW.rowtime AS start_tstamp,
            LAST(PRICE_DOWN.rowtime) AS bottom_tstamp,
            LAST(PRICE_UP.rowtime) AS end_tstamp
        ONE ROW PER MATCH
        AFTER MATCH SKIP TO LAST PRICE_UP
        PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
        DEFINE
            PRICE_DOWN AS
                (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price) OR
                    PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
            PRICE_UP AS
                PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
    ) MR""",
    """SELECT * FROM Ticker MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            FIRST(A.rowtime) AS start_tstamp,
            LAST(A.rowtime) AS end_tstamp,
            AVG(A.price) AS avgPrice
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A+ B)
        DEFINE
            A AS AVG(A.price) < 15
    ) MR""",
    """SELECT * FROM Ticker MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            C.rowtime AS dropTime,
            A.price - C.price AS dropDiff
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A B* C) WITHIN INTERVAL '1' HOUR
        DEFINE
            B AS B.price > A.price - 10,
            C AS C.price < A.price - 10
    )""",
    """SELECT symbol, start_price, ROUND(100 * (start_price - bottom_price) / start_price, 1) AS drop_pct
    FROM Ticker MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            START_ROW.price AS start_price,
            LAST(PRICE_DOWN.price) AS bottom_price
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (START_ROW PRICE_DOWN{2,} PRICE_UP{1})
        DEFINE
            PRICE_DOWN AS PRICE_DOWN.price < LAST(price, 1),
            PRICE_UP AS PRICE_UP.price > LAST(price, 1)
    ) MR
    WHERE 100 * (start_price - bottom_price) / start_price > 20
    ORDER BY symbol""",
    # tests/test_sql_query.py
    """SELECT symbol, SUM(price) AS total FROM Ticker WHERE price > 12 GROUP BY symbol HAVING COUNT(*) > 1""",
]

JOIN_SEEDS = [
    # notebooks/03_temporal_joins.ipynb
    """SELECT o.order_id, o.order_time, o.currency, r.rate
    FROM orders o
    LEFT JOIN currency_rates FOR SYSTEM_TIME AS OF o.order_time AS r
    ON o.currency = r.currency""",
    """SELECT o.order_id, o.currency, r.rate
    FROM orders AS o, LATERAL TABLE (Rates(o.proctime)) AS r
    WHERE o.currency = r.currency""",
    """WITH versioned_rates AS (
      SELECT currency, rate, update_time FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY update_time DESC) AS rownum
        FROM rates_log)
      WHERE rownum = 1)
    SELECT o.order_id, o.order_time, o.currency, r.rate
    FROM orders o
    LEFT JOIN versioned_rates FOR SYSTEM_TIME AS OF o.order_time AS r
    ON o.currency = r.currency""",
    """SELECT o.order_id, o.order_time, s.ship_time
    FROM orders o LEFT JOIN shipments s
    ON o.order_id = s.order_id AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '30' MINUTE""",
]

BAD_IDENTIFIERS = ["`", "``", "`a`b`", "nope", "1abc", "a$b", "ticker.nope", "\"price\"", "#x", "NULL", "SELECT"]
BAD_LITERALS = ["'unterminated", "INTERVAL 'x' HOUR", "INTERVAL '1' FORTNIGHT", "1e99999", "99999999999999999999999",
                "DATE '2024-13-45'", "TIMESTAMP 'noon'", "X'zz'", "1.2.3", "''''", "INTERVAL '-' SECOND"]
BAD_TYPES = ["CAST(price AS NOPE)", "CAST('x' AS INT)", "'a' + 1", "SUM(symbol)", "price || TRUE", "ABS('x')",
             "LAST(price, 'one')", "CAST(price AS DECIMAL(99, 2))", "price > DATE '2024-01-01'"]


def tables():
    """The tables the seeds read, built as the notebooks build them."""
    sql_delay = WatermarkStrategy.for_sql_delay
    orders_df, rates_df = kit.data.load("orders"), kit.data.load("currency_rates")
    clock = Clock(datetime(2024, 1, 1, 10), Duration.of_minutes(10))
    rates_p = kit.stream(rates_df, time="update_time", watermark=sql_delay(Duration.of_minutes(60)), proctime=clock)
    shipments = pd.DataFrame({"ship_time": pd.to_datetime(["2024-01-01 10:05", "2024-01-01 10:30"]),
                              "order_id": ["o1", "o3"]})
    return {
        "clicks": kit.stream(kit.data.load("clicks"), time="cTime", watermark=sql_delay(Duration.of_seconds(0))),
        "Ticker": kit.data.load("ticker"),
        "orders": kit.stream(orders_df, time="order_time", watermark=sql_delay(Duration.of_minutes(0)),
                             proctime=clock),
        "currency_rates": kit.stream(rates_df, time="update_time", watermark=sql_delay(Duration.of_minutes(60)),
                                     primary_key="currency"),
        "rates_log": kit.stream(rates_df, time="update_time", watermark=sql_delay(Duration.of_minutes(60))),
        "Rates": TemporalTableFunction(rates_p, "proctime", "currency"),
        "shipments": kit.stream(shipments, time="ship_time", watermark=sql_delay(Duration.of_minutes(0))),
    }


# -- mutations: each takes (rng, query, tokens) and gives a broken query ------------------

def _splice(query, tok, text):
    return query[:tok.start] + text + query[tok.end:]


def _pick(rng, tokens, keep=lambda t: True):
    """A random token (not EOF) that ``keep`` accepts, or None."""
    found = [t for t in tokens[:-1] if keep(t)]
    return rng.choice(found) if found else None


def truncate(rng, query, tokens):
    return query[:rng.choice(tokens[:-1]).start]


def swap_tokens(rng, query, tokens):
    i = rng.randrange(len(tokens) - 2)
    a, b = tokens[i], tokens[i + 1]
    return query[:a.start] + query[b.start:b.end] + query[a.end:b.start] + query[a.start:a.end] + query[b.end:]


def drop_token(rng, query, tokens):
    return _splice(query, _pick(rng, tokens), "")


def double_token(rng, query, tokens):
    tok = _pick(rng, tokens)
    return _splice(query, tok, query[tok.start:tok.end] * 2 if tok.kind != "IDENT" else
                   f"{query[tok.start:tok.end]} {query[tok.start:tok.end]}")


def bad_identifier(rng, query, tokens):
    return _splice(query, _pick(rng, tokens, lambda t: t.kind == "IDENT"), rng.choice(BAD_IDENTIFIERS))


def unknown_name(rng, query, tokens):
    """A name changed everywhere (an unknown table, alias or variable) or once (an unknown column)."""
    tok = _pick(rng, tokens, lambda t: t.kind == "IDENT")
    if rng.random() < 0.5:
        return re.sub(rf"\b{re.escape(tok.value)}\b", f"{tok.value}_x", query)
    return _splice(query, tok, f"{tok.value}_x")


def unbalance(rng, query, tokens):
    tok = _pick(rng, tokens, lambda t: t.kind == "OP" and t.value in "()")
    if tok is None:
        tok = _pick(rng, tokens)
        return _splice(query, tok, rng.choice("()") + query[tok.start:tok.end])
    return _splice(query, tok, "" if rng.random() < 0.5 else query[tok.start:tok.end] * 2)


def reorder_clauses(rng, query, tokens):
    words = ("FROM", "WHERE", "GROUP", "ORDER", "HAVING", "PARTITION", "MEASURES", "ONE", "AFTER", "PATTERN",
             "DEFINE", "WITHIN", "ON")
    heads = [t for t in tokens if t.is_word(*words)]
    if len(heads) < 2:
        return truncate(rng, query, tokens)
    i = rng.randrange(len(heads) - 1)
    a, b = heads[i], heads[i + 1]
    end = heads[i + 2].start if i + 2 < len(heads) else len(query)
    return query[:a.start] + query[b.start:end] + " " + query[a.start:b.start] + query[end:]


def bad_literal(rng, query, tokens):
    tok = _pick(rng, tokens, lambda t: t.kind in ("NUMBER", "STRING")) or _pick(rng, tokens)
    return _splice(query, tok, rng.choice(BAD_LITERALS))


def bad_type(rng, query, tokens):
    tok = _pick(rng, tokens, lambda t: t.kind in ("IDENT", "NUMBER") and t.value.lower() in ("price", "1", "10"))
    return _splice(query, tok, rng.choice(BAD_TYPES)) if tok else bad_literal(rng, query, tokens)


def deep_nesting(rng, query, tokens):
    tok = _pick(rng, tokens, lambda t: t.kind in ("IDENT", "NUMBER"))
    depth = rng.choice([MAX_NESTING - 10, MAX_NESTING + 1, 300, 3000])
    word = query[tok.start:tok.end]
    nested = rng.choice(["(" * depth + word + ")" * depth, "NOT " * depth + word, "- " * depth + word,
                         "ABS(" * depth + word + ")" * depth, "CASE WHEN TRUE THEN " * depth + word + " END" * depth,
                         " + ".join([word] * depth * 2)])
    return _splice(query, tok, nested)


MUTATIONS = [truncate, swap_tokens, drop_token, double_token, bad_identifier, unknown_name, unbalance,
             reorder_clauses, bad_literal, bad_type, deep_nesting]


def cases():
    """``(mutation name, broken query)``, the same ones on every run."""
    rng = random.Random(SEED)
    for n in range(CASES + JOIN_CASES):
        query = rng.choice(SEEDS if n < CASES else JOIN_SEEDS)
        mutation = MUTATIONS[n % len(MUTATIONS)]
        yield mutation.__name__, mutation(rng, query, tokenize(query))


# -- the checks ---------------------------------------------------------------------------

FOREIGN = re.compile(r"java\.|at org\.apache|Py4J|Traceback|__kit_|SQLSTATE", re.IGNORECASE)


def check_error(error, query):
    """``error`` is the kit's, says where in ``query`` and carries nothing foreign."""
    assert isinstance(error, KitError), f"{type(error).__name__} for {query!r}: {error}"
    message = str(error)
    assert not FOREIGN.search(message), f"foreign text in the error for {query!r}:\n{message}"
    if isinstance(error, SqlError):
        lines = query.split("\n")
        assert 1 <= error.line <= len(lines) and 1 <= error.column <= len(lines[error.line - 1]) + 1, (
            f"line {error.line}, column {error.column} is not in {query!r}")
        assert message.startswith(f"line {error.line}, column {error.column}: ")
        assert error.text == query
    else:  # about a table or an argument: it names one the query does
        assert any(re.search(rf"\b{re.escape(t.value)}\b", message) for t in tokenize(query) if t.kind == "IDENT"), (
            f"{message!r} names nothing of {query!r}")


@pytest.fixture(scope="module")
def inputs(spark):
    return tables()


def test_the_seeds_run(inputs):
    """The seeds are valid: a failure of a mutant is the mutation's doing (the joins' seeds
    are the notebooks', which their tests run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for query in SEEDS:
            kit.sql(query, **inputs)


def test_malformed_queries_fail_as_the_kit_naming_the_place(inputs):
    failures = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, query in cases():
            try:
                kit.sql(query, **inputs)
            except Exception as error:          # noqa: BLE001 - every kind is checked
                check_error(error, query)
                failures[name] = failures.get(name, 0) + 1
    assert set(failures) == {m.__name__ for m in MUTATIONS}, f"mutations that never broke a query: {failures}"


@pytest.mark.parametrize("query", [None, 42, b"SELECT 1", ["SELECT 1"], 3.5])
def test_a_query_that_is_not_a_string_is_a_kit_error(query):
    with pytest.raises(KitError, match=rf"takes the query as a string of Flink SQL; got .*\({type(query).__name__}\)"):
        kit.sql(query)


def test_the_checks_reject_what_is_not_the_kits():
    """The fuzz can fail: each way an error can be wrong is caught."""
    for error in (TypeError("object of type 'NoneType' has no len()"),                  # not the kit's type
                  SqlError("[X] boom\n\tat org.apache.spark.sql.X(X.scala:1)", 1, 1, "SELECT"),  # a Java frame
                  SqlError("unknown view __kit_t_1234_0", 1, 1, "SELECT"),            # an internal name
                  SqlError("expected ')'", 2, 1, "SELECT"),                            # a line not in the query
                  SqlError("expected ')'", 1, 1, "SELECT 1")):                         # another query's text
        with pytest.raises(AssertionError):
            check_error(error, "SELECT")
    with pytest.raises(AssertionError):                                                 # names no input
        check_error(KitError("something went wrong"), "SELECT x FROM t")


def test_an_unknown_config_key_lists_every_key_kit_sql_takes(spark):
    with pytest.raises(KitError) as error:
        kit.sql("SELECT 1 AS x", config={"table.exec.state.tll": "1 h"})
    message = str(error.value)
    assert "['table.exec.state.tll'] (did you mean 'table.exec.state.ttl' for 'table.exec.state.tll'?); known:" in message
    for key in ("table.exec.state.ttl", "kit.join.interleave", "kit.join.clock", "kit.match-recognize.step-budget",
                "kit.match-recognize.max-threads"):
        assert key in message, message
