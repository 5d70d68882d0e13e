"""MATCH_RECOGNIZE in the JVM (kit/jvm/Matcher.java, settings by kit.match_recognize.compiled)
gives the rows of the Python reference (``flink.NFA``), and its errors send the query back to
Python; queries outside its subset run in Python."""

import datetime as dt
from decimal import Decimal
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

import kit
from kit import jvm
from kit.match_recognize import compiled
from kit.errors import KitError
from kit.match_recognize.errors import MatchRecognizeError, MatchRuntimeError
from kit.match_recognize.flink import validate
from kit.match_recognize.matcher import run_partition
from kit.match_recognize.spec import Aggregate, Binary, Column, Literal, MatchRowtime, Measure, Nav, Unary
from kit.match_recognize.types import measure_type
from test_mr_flink import VSHAPE, b, c, first, last, lit, mr, pat, random_spec

SCHEMA = T.StructType([T.StructField("symbol", T.StringType()), T.StructField("rowtime", T.TimestampType()),
                       T.StructField("price", T.LongType()), T.StructField("ratio", T.DoubleType()),
                       T.StructField("_kit_seq", T.LongType())])
START = dt.datetime(2011, 4, 1, 10, 0, 0)


def _rows(keys: dict) -> list:
    """Input rows of ``keys`` (symbol -> [(price, ratio)]), sorted as the matcher reads them."""
    return [(k, START + dt.timedelta(seconds=i, microseconds=250), p, r, seq)
            for seq, (k, i, (p, r)) in enumerate((k, i, v) for k in sorted(keys) for i, v in enumerate(keys[k]))]


def _python(spec, rows, semantics, budget):
    """Per key, the reference's ONE ROW PER MATCH measures, or "raises"."""
    out = {}
    for key in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == key]
        cols = {"rowtime": np.array([r[1] for r in mine], "datetime64[us]"), "price": [r[2] for r in mine],
                "ratio": [r[3] for r in mine]}
        try:
            result = run_partition(cols, spec, semantics, rowtime="rowtime", step_budget=budget, trace=[])
            out[key] = [tuple(v if not hasattr(v, "astype") else v.astype("datetime64[ms]").item() for v in row)
                        for row in result.rows]
        except (MatchRecognizeError, MatchRuntimeError):
            out[key] = "raises"
    return out


def _java(spec, rows, semantics, budget):
    spark = kit.spark()
    measured = [measure_type(m.expr, SCHEMA, semantics) for m in spec.measures]
    config = compiled.settings(spec, semantics, SCHEMA, ["symbol"], measured, budget, "rowtime")
    assert config is not None
    out = T.StructType([SCHEMA["symbol"]] + [T.StructField(m.alias, t) for m, t in zip(spec.measures, measured)]
                       + [T.StructField("_kit_order", T.LongType()), T.StructField("_kit_error", T.StringType()),
                          T.StructField("_kit_raised", T.BinaryType())])
    found = {}
    for row in jvm.matcher(spark.createDataFrame(rows, SCHEMA).coalesce(1), config, out).collect():
        if row["_kit_error"] is not None:
            found[row.symbol] = ("raises", row["_kit_error"])
        else:
            assert row["_kit_order"] == len(found.setdefault(row.symbol, []))
            found[row.symbol].append(tuple(row)[1:-3])
    return found


def _measures(draw, n):
    """Random measures: FIRST/LAST of a column of the match or of a variable, of each type,
    and MATCH_ROWTIME()."""
    ref = st.sampled_from(["price", "ratio", "rowtime"] + [f"{v}.{col}" for v in "ABC"[:n]
                                                            for col in ("price", "ratio", "rowtime")])
    return [(f"m{i}", MatchRowtime() if draw(st.integers(0, 5)) == 0 else
             draw(st.sampled_from((first, last)))(draw(ref), draw(st.integers(0, 2))))
            for i in range(draw(st.integers(1, 3)))]


operand = st.one_of(st.builds(Column, st.sampled_from(("price", "ratio")), st.sampled_from(("A", None))),
                    st.builds(Nav, st.just("LAST"), st.builds(Column, st.just("price"), st.just("A")), st.integers(0, 1)),
                    st.builds(Literal, st.sampled_from((-3, 2, 2 ** 62)), st.just("BIGINT")),
                    st.builds(Literal, st.sampled_from((0.5, -1.5, 1e308)), st.just("DOUBLE")))
arithmetic = st.recursive(operand, lambda inner: st.one_of(st.builds(Binary, st.sampled_from("+-*"), inner, inner),
                                                           st.builds(Unary, st.just("-"), inner)), max_leaves=4)
values = st.tuples(st.one_of(st.none(), st.integers(8, 12)),
                   st.one_of(st.none(), st.sampled_from((9.5, 10.0, -0.0, float("nan")))))


@pytest.mark.parametrize("semantics", ["flink", "flink-2.3"])
@settings(max_examples=40, deadline=None)
@given(st.data(), st.dictionaries(st.sampled_from(("ACME", "BETA", "")), st.lists(values, min_size=2, max_size=12),
                                  min_size=1, max_size=3))
def test_the_jvm_matcher_gives_the_reference_rows(semantics, data, keys):
    """Random patterns, DEFINEs (NULLs, NaN, both kinds of numbers, arithmetic), measures,
    AFTER MATCH, WITHIN and step budgets over several keys: the JVM's rows (and its errors: a key whose run fails
    there fails in Python) are the reference runner's."""
    spec = random_spec(data.draw, head=data.draw(st.booleans()))
    try:
        validate(spec)
    except MatchRecognizeError:   # Flink's planner refuses it (a greedy quantifier last...)
        assume(False)
    n = len(spec.pattern.items)
    if data.draw(st.booleans()):   # A's DEFINE with arithmetic of both kinds of numbers (past BIGINT, to inf, NaN)
        extra = data.draw(st.builds(Binary, st.sampled_from(("<", ">=", "=", "<>")), arithmetic, arithmetic))
        define = dict(spec.define)
        define["A"] = extra if "A" not in define else Binary(data.draw(st.sampled_from(("AND", "OR"))), define["A"], extra)
        spec = replace(spec, define=tuple(define.items()))
    spec = replace(spec, measures=tuple(Measure(e, a) for a, e in _measures(data.draw, n)))
    budget = data.draw(st.sampled_from((None, None, None, 3, 40)))
    rows = _rows(keys)
    found, expected = _java(spec, rows, semantics, budget), _python(spec, rows, semantics, budget)
    for key, value in found.items():   # a key past BIGINT in the JVM runs in Python (the query again)
        if value[0] == "raises" and "BIGINT" in value[1] and expected[key] != "raises":
            found[key] = expected[key]
        elif value[0] == "raises":
            found[key] = "raises"
    assert {k: v for k, v in found.items() if v != []} == {k: v for k, v in expected.items() if v != []}


def test_queries_outside_the_subset_run_in_python():
    """WITHIN over a time that is not one, a division, aggregates, a DECIMAL literal and the
    standard semantics get no settings; the seed's V-shape query does, with WITHIN too."""
    measured = [measure_type(m.expr, SCHEMA) for m in VSHAPE.measures]
    assert compiled.settings(VSHAPE, "flink", SCHEMA, ["symbol"], measured, None) is not None
    assert compiled.settings(VSHAPE, "standard", SCHEMA, ["symbol"], measured, None) is None
    within = replace(VSHAPE, within_ms=1000)
    assert compiled.settings(within, "flink", SCHEMA, ["symbol"], measured, None, "rowtime").endswith("within=1000:1:1")
    assert compiled.settings(within, "flink", SCHEMA, ["symbol"], measured, None, "symbol") is None
    for define in (b(">", Binary("/", c("A.price"), lit(2)), lit(3)),
                   b(">", Aggregate("SUM", c("A.price")), lit(3)),
                   b(">", c("A.price"), Literal(Decimal("1.5"), "DECIMAL"))):
        spec = mr(pat("A", "B"), define=[("A", define)], measures=[("p", c("A.price"))], after=("PAST LAST ROW",))
        assert compiled.settings(spec, "flink", SCHEMA, ["symbol"], [T.LongType()], None) is None


@pytest.fixture(scope="module")
def ticker_file(tmp_path_factory):
    """The seed's ticker rows, many times over (keys ACME0..ACME9), as a Parquet file: an input
    whose size Spark does not know, so the matcher runs in tasks, in the JVM."""
    prices = [12, 17, 19, 21, 25, 18, 15, 20, 24, 25, 19, 11]
    rows = [(f"ACME{k}", START + dt.timedelta(seconds=i), p + k, 1) for k in range(10) for i, p in enumerate(prices)]
    path = str(tmp_path_factory.mktemp("mr") / "ticker.parquet")
    kit.spark().createDataFrame(rows, "symbol STRING, rowtime TIMESTAMP, price BIGINT, tax BIGINT").write.parquet(path)
    return path


QUERY = """SELECT * FROM Ticker MATCH_RECOGNIZE (
    PARTITION BY symbol ORDER BY rowtime
    MEASURES FIRST(A.price) AS a, LAST(B.price) AS b, C.rowtime AS t
    AFTER MATCH {after}
    PATTERN (A B+ C){within} DEFINE B AS B.price < LAST(B.price, 1) OR LAST(B.price, 1) IS NULL, C AS C.price > 18)"""


def _both(monkeypatch, query, path):
    """The query's rows with the JVM's matcher, then with Python's."""
    ticker = kit.spark().read.parquet(path)
    taken = []
    settings_of = compiled.settings
    monkeypatch.setattr(compiled, "settings", lambda *a: taken.append(settings_of(*a)) or taken[-1])
    java = kit.sql(query, Ticker=ticker).collect()
    monkeypatch.setattr(compiled, "settings", lambda *a: None)
    return taken, java, kit.sql(query, Ticker=ticker).collect()


@pytest.mark.parametrize("within, second", [("", 21), (" WITHIN INTERVAL '3' SECOND", 25)])
def test_kit_sql_runs_the_matcher_in_the_jvm_with_pythons_rows(monkeypatch, ticker_file, within, second):
    """Two matches per key; ACME0's second starts at 21 (rows 3..7, 4 s), or within 3 s at 25
    (the partial match from row 3 expired)."""
    taken, java, python = _both(monkeypatch, QUERY.format(after="SKIP PAST LAST ROW", within=within), ticker_file)
    assert taken[0] is not None and jvm.available(kit.spark(), "Matcher")
    assert len(java) == 20 and java == python and java[1].a == second


def test_an_error_in_the_jvm_is_pythons_error(monkeypatch, ticker_file):
    """SKIP TO FIRST A restarts at the match's first row: the JVM's run fails, and the query
    runs again in Python, which raises Flink's error."""
    query = QUERY.format(after="SKIP TO FIRST A", within="")
    with pytest.raises(KitError, match="Could not skip to first element of a match") as jvm_run:
        _both(monkeypatch, query, ticker_file)
    monkeypatch.undo()
    monkeypatch.setattr(compiled, "settings", lambda *a: None)
    with pytest.raises(KitError) as python_run:
        kit.sql(query, Ticker=kit.spark().read.parquet(ticker_file))
    assert str(jvm_run.value) == str(python_run.value)


def test_an_integer_past_bigint_runs_the_query_in_python(monkeypatch, ticker_file):
    """Python's integers have no range: ``C.price * 2^62`` overflows BIGINT in the JVM, whose
    run fails, and the query's rows are Python's."""
    spec = mr(pat("A", "C"), define=[("C", b(">", Binary("*", c("C.price"), lit(2 ** 62)), lit(0)))],
              measures=[("p", last("C.price"))], after=("PAST LAST ROW",))
    rows = _rows({"ACME": [(12, 1.0), (17, 1.0), (19, 1.0)]})
    (error,) = _java(spec, rows, "flink", None).values()
    assert error[0] == "raises" and "BIGINT" in error[1]
    assert _python(spec, rows, "flink", None) == {"ACME": [(17,)]}
    query = QUERY.format(after="SKIP PAST LAST ROW", within="").replace("C AS C.price > 18",
                                                                           "C AS C.price * 4611686018427387904 > 0")
    taken, java, python = _both(monkeypatch, query, ticker_file)
    assert taken[0] is not None and java == python and len(java) == 20
