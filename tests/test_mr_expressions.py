"""DEFINE/MEASURES expressions: variables and the universal variable, logical and physical
offsets, aggregates (built-in and user), three-valued logic, SQL arithmetic, CAST, CASE,
scalar functions, timestamps and intervals, MATCH_ROWTIME/MATCH_PROCTIME."""

from decimal import Decimal

import numpy as np
import pytest

from kit.match_recognize.errors import MatchRecognizeError
from kit.match_recognize.expressions import Env, compile_expr
from kit.match_recognize.matcher import run_partition
from kit.match_recognize.measures import prepare_columns
from kit.match_recognize.spec import (AfterMatch, Aggregate, Between, Binary, Call, Case, Cast,
                                      Column, Concat, InList, IsNull, Label, Literal,
                                      MatchProctime, MatchRecognize, MatchRowtime, Measure, Nav,
                                      Quantified, Semantics, Unary)

COLS = {"price": np.array([10, 15, 20, 31, 35], dtype=np.int64),
        "tax": np.array([1.0, np.nan, 2.0, 3.0, 4.0]),
        "name": np.array(["a", None, "c", "d", "e"], dtype=object),
        "ts": np.datetime64("2024-01-01T00:00:00", "ms") + np.arange(5) * np.timedelta64(1, "m")}
R, L = (0, 1, 2, 3), ("A", "B", "B", "B")


def ev(expr, R=R, L=L, semantics_avg_truncates=False, aggregates=None, **kw):
    lists, stamps = prepare_columns(COLS)
    env = Env(lists, {"A", "B"}, aggregates=aggregates, timestamp_columns=stamps,
              avg_truncates=semantics_avg_truncates, **kw)
    return compile_expr(expr, env)(R, L, 1, (R, L))


def c(ref):
    var, _, name = ref.rpartition(".")
    return Column(name, var or None)


def lit(v, t=None):
    return Literal(v, t or ("BIGINT" if isinstance(v, int) else "DOUBLE"))


NULL = Literal(None, "NULL")


@pytest.mark.parametrize("expr, expected", [
    (c("A.price"), 10), (c("B.price"), 31), (c("price"), 31),
    (Nav("LAST", c("B.price"), 1), 20), (Nav("LAST", c("B.price"), 3), None),
    (Nav("FIRST", c("B.price"), 0), 15), (Nav("FIRST", c("price"), 1), 15),
    (Nav("LAST", Binary("*", c("B.price"), lit(2)), 0), 62),
    (Nav("PREV", c("price"), 1), 20), (Nav("NEXT", c("price"), 1), 35),
    (Nav("PREV", c("A.price"), 1), None), (Nav("NEXT", c("price"), 2), None),
    (Nav("PREV", Nav("LAST", c("B.price"), 1), 2), 10),
])
def test_variables_and_navigation(expr, expected):
    assert ev(expr) == expected


@pytest.mark.parametrize("expr, expected", [
    (Aggregate("SUM", c("price")), 76), (Aggregate("SUM", c("B.price")), 66),
    (Aggregate("COUNT", None), 4), (Aggregate("COUNT", c("B.tax")), 2),
    (Aggregate("MIN", c("B.price")), 15), (Aggregate("MAX", c("price")), 31),
    (Aggregate("AVG", c("B.price")), 22.0), (Aggregate("SUM", c("B.tax")), 5.0),
    (Aggregate("SUM", Binary("*", c("B.price"), c("B.price"))), 225 + 400 + 961),
])
def test_aggregates(expr, expected):
    assert ev(expr) == expected


def test_avg_truncates_only_for_the_runtime():
    avg = Aggregate("AVG", c("price"), )
    assert ev(avg, R=(0, 1), L=("A", "A")) == 12.5
    assert ev(avg, R=(0, 1), L=("A", "A"), semantics_avg_truncates=True) == 12


class Concat_:
    """A user aggregate in Flink's AggregateFunction shape."""

    def create_accumulator(self):
        return []

    def accumulate(self, acc, value):
        acc.append(str(value))

    def get_value(self, acc):
        return "-".join(acc)


def test_user_aggregate():
    assert ev(Aggregate("JOIN", c("B.price")), aggregates={"join": Concat_}) == "15-20-31"
    assert ev(Aggregate("JOIN", c("B.price")), aggregates={"JOIN": Concat_()}) == "15-20-31"


@pytest.mark.parametrize("expr, expected", [
    (Binary("<", c("A.tax"), lit(2.0)), True), (Binary("<", Nav("LAST", c("B.tax"), 2), lit(2.0)), None),
    (Binary("=", NULL, lit(1)), None), (Binary("AND", NULL, lit(False, "BOOLEAN")), False),
    (Binary("OR", NULL, lit(True, "BOOLEAN")), True), (Binary("OR", NULL, lit(False, "BOOLEAN")), None),
    (Unary("NOT", NULL), None), (IsNull(NULL), True), (IsNull(c("price"), negated=True), True),
    (Between(c("price"), lit(30), lit(40)), True), (Between(c("price"), lit(30), NULL), None),
    (InList(c("price"), (lit(1), lit(31))), True), (InList(c("price"), (lit(1), NULL)), None),
])
def test_three_valued_logic(expr, expected):
    assert ev(expr) == expected


@pytest.mark.parametrize("expr, expected", [
    (Binary("/", lit(7), lit(2)), 3), (Binary("/", lit(-7), lit(2)), -3),
    (Binary("/", lit(7.0), lit(2)), 3.5), (Binary("%", lit(-7), lit(2)), -1),
    (Binary("+", c("price"), NULL), None), (Unary("-", c("price")), -31),
    (Cast(c("price"), "DOUBLE"), 31.0), (Cast(lit(3.9), "BIGINT"), 3),
    (Cast(c("price"), "STRING"), "31"), (Cast(lit(2.345), "DECIMAL(10, 2)"), Decimal("2.35")),
    (Case(None, ((Binary(">", c("price"), lit(30)), lit("big", "STRING")),), lit("small", "STRING")), "big"),
    (Case(c("price"), ((lit(1), lit("one", "STRING")),), None), None),
    (Call("ABS", (lit(-3),)), 3), (Call("ROUND", (lit(2.5),)), 3.0),
    (Call("ROUND", (lit(2.345), lit(2))), 2.35), (Call("FLOOR", (lit(2.7),)), 2),
    (Call("CEIL", (lit(2.1),)), 3), (Call("UPPER", (lit("ab", "STRING"),)), "AB"),
    (Call("LOWER", (lit("AB", "STRING"),)), "ab"), (Call("COALESCE", (NULL, lit(4))), 4),
    (Call("CHAR_LENGTH", (lit("abc", "STRING"),)), 3), (Call("MOD", (lit(7), lit(3))), 1),
    (Call("POWER", (lit(2), lit(3))), 8.0), (Call("SQRT", (lit(9),)), 3.0),
    (Call("CONCAT", (lit("a", "STRING"), c("A.name"))), "aa"),
    (Call("CONCAT", (lit("a", "STRING"), c("B.name"))), "ad"),
    (Binary("||", lit("x", "STRING"), lit(1)), "x1"),
])
def test_arithmetic_casts_and_functions(expr, expected):
    assert ev(expr) == expected


def test_timestamps_and_intervals_are_milliseconds():
    start = np.datetime64("2024-01-01T00:00:00", "ms").astype("int64")
    assert ev(c("B.ts")) == int(start) + 3 * 60_000
    later = Binary(">=", Binary("-", c("B.ts"), c("A.ts")), Literal(3 * 60_000, "INTERVAL"))
    assert ev(later) is True
    assert ev(Binary("<", c("A.ts"), Literal("2024-01-01 00:00:01", "TIMESTAMP"))) is True


def test_final_and_running():
    final = Semantics("FINAL", Aggregate("SUM", c("price")))
    lists, stamps = prepare_columns(COLS)
    env = Env(lists, {"A", "B"}, clause="MEASURES")
    f = compile_expr(final, env)
    assert f((0,), ("A",), 1, ((0, 1), ("A", "B"))) == 25


def test_errors_name_the_clause():
    with pytest.raises(MatchRecognizeError, match="DEFINE: unknown column 'nope'"):
        ev(c("A.nope"))
    with pytest.raises(MatchRecognizeError, match="unknown pattern variable 'Z'"):
        ev(c("Z.price"))
    with pytest.raises(MatchRecognizeError, match="FINAL cannot be used in DEFINE"):
        ev(Semantics("FINAL", c("price")))
    with pytest.raises(MatchRecognizeError, match="line 3, column 7"):
        ev(Call("NOPE", (), pos=(3, 7)))


def _spec(measures):
    return MatchRecognize(pattern=Concat((Label("A"), Quantified(Label("B"), 1, None, False))),
                          measures=tuple(Measure(e, a) for a, e in measures),
                          after_match=AfterMatch("PAST LAST ROW"))


def test_match_rowtime_and_proctime():
    cols = {"ts": COLS["ts"], "price": COLS["price"],
            "pt": np.arange(5, dtype=np.int64) * 1000}
    spec = _spec([("rt", MatchRowtime()), ("pt", MatchProctime())])
    rows = run_partition(cols, spec, rowtime="ts", proctime="pt").rows
    assert rows[0] == (np.datetime64("2024-01-01T00:01:00", "ms"), 1000)
    assert run_partition(cols, spec, rowtime="ts").rows[0][1] is None
    with pytest.raises(MatchRecognizeError, match="rowtime="):
        run_partition(cols, spec)


def test_int_epoch_ms_timestamps_are_accepted():
    cols = {"ts": np.arange(3, dtype=np.int64) * 60_000, "price": np.array([1, 2, 3])}
    spec = MatchRecognize(pattern=Concat((Label("A"), Label("B"))),
                          measures=(Measure(MatchRowtime(), "rt"),), within_ms=60_000,
                          after_match=AfterMatch("PAST LAST ROW"))
    assert run_partition(cols, spec, "flink", rowtime="ts").rows == [(60_000,)]
    assert run_partition(cols, spec, "flink-2.3", rowtime="ts").rows == []


def test_nulls_from_numpy():
    lists, _ = prepare_columns({"x": np.array([1.0, np.nan]), "t": np.array(["2024-01-01", "NaT"],
                                                                            dtype="datetime64[ms]"),
                                "o": np.array([None, np.int64(3)], dtype=object)})
    assert lists == {"x": [1.0, None], "t": [1704067200000, None], "o": [None, 3]}
    pd = pytest.importorskip("pandas")
    lists, stamps = prepare_columns({"n": pd.array([1, None], dtype="Int64").to_numpy(),
                                     "d": np.array([pd.Timestamp("2024-01-01"), pd.NaT], dtype=object)})
    assert lists == {"n": [1, None], "d": [1704067200000, None]} and stamps == {"d"}


def test_like_and_not_like_in_define():
    import numpy as np

    from kit.match_recognize.matcher import run_partition
    from kit.sql.match_recognize import parse_match_recognize

    spec = parse_match_recognize("MATCH_RECOGNIZE (ORDER BY t MEASURES A.s AS a, B.s AS b PATTERN (A B) "
                                 "DEFINE A AS A.s LIKE 'a_c%', B AS B.s NOT LIKE '%z')")
    columns = {"t": np.array([1, 2, 3, 4]), "s": np.array(["abcx", "xyz", "abc", "q"], dtype=object)}
    assert run_partition(columns, spec).rows == [("abc", "q")]


@pytest.mark.parametrize("func, args, expected", [
    # Trino's substr: 1-based, a negative start counts from the end, start 0 gives ''
    ("SUBSTRING", ("ABCDE", 2), "BCDE"), ("SUBSTRING", ("ABCDE", 2, 2), "BC"),
    ("SUBSTR", ("ABCDE", -2), "DE"), ("SUBSTRING", ("ABCDE", 0, 2), ""),
    ("TRIM", ("  a b ",), "a b"), ("REPLACE", ("ABAB", "A", "x"), "xBxB"), ("REVERSE", ("AB",), "BA"),
    ("CONCAT_WS", ("-", "a", None, "b"), "a-b"), ("CONCAT_WS", (None, "a"), None),
])
def test_string_functions(func, args, expected):
    typed = tuple(Literal(a, "NULL" if a is None else "STRING" if isinstance(a, str) else "INT") for a in args)
    assert ev(Call(func, typed)) == expected
