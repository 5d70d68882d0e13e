"""kit.sql parses MATCH_RECOGNIZE: the seed's examples into explicit spec objects, every
golden query, one test per clause, and one per error with its position and caret."""

import json
import re

import pytest
from goldens import DIR as GOLDEN_DIR
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.match_recognize import spec as S
from kit.sql import SqlError, clauses, parse_match_recognize, to_sql
from kit.sql.match_recognize import MAX_DEPTH, depth, expression_of

SEED = GOLDEN_DIR.parent.parent / "seeds" / "001_0706de470e537bc5.txt"


def seed_queries():
    """The seed's SELECT ... MATCH_RECOGNIZE queries, verbatim, in document order."""
    text = SEED.read_text()
    return re.findall(r"^SELECT .*?\n    \)[^\n]*", text, flags=re.DOTALL | re.MULTILINE)


def mr(body):
    return parse_match_recognize(f"MATCH_RECOGNIZE (\n{body}\n)")


def expr(text):
    return expression_of(text)


def C(name, var=None):
    return S.Column(name, var)


def L(value, type_="INT"):
    return S.Literal(value, type_)


def B(op, left, right):
    return S.Binary(op, left, right)


def last(arg, offset=0):
    return S.Nav("LAST", arg, offset)


def first(arg, offset=0):
    return S.Nav("FIRST", arg, offset)


def Q(name, low, high, greedy=True):
    return S.Quantified(S.Label(name), low, high, greedy)


def labels(*names):
    return S.Concat(tuple(S.Label(n) if isinstance(n, str) else n for n in names))


# ------------------------------------------------------------------ the seed, explicitly

TICKER = {"partition_by": ("symbol",), "order_by": (S.OrderItem("rowtime"),)}


def test_the_seed_has_seven_queries():
    assert len(seed_queries()) == 7


def test_seed_intro_example():
    (spec,) = clauses(seed_queries()[0])
    assert spec == S.MatchRecognize(
        pattern=labels("A", "B", "C"),
        partition_by=("userid",), order_by=(S.OrderItem("proctime"),),
        measures=(S.Measure(C("id", "A"), "aid"), S.Measure(C("id", "B"), "bid"),
                  S.Measure(C("id", "C"), "cid")),
        define=tuple((v, B("=", C("name"), L(v.lower(), "STRING"))) for v in "ABC"))


def test_seed_v_shape():
    (spec,) = clauses(seed_queries()[1])
    down, up = "PRICE_DOWN", "PRICE_UP"
    assert spec == S.MatchRecognize(
        pattern=labels("START_ROW", Q(down, 1, None), up),
        measures=(S.Measure(C("rowtime", "START_ROW"), "start_tstamp"),
                  S.Measure(last(C("rowtime", down)), "bottom_tstamp"),
                  S.Measure(last(C("rowtime", up)), "end_tstamp")),
        rows_per_match=S.ONE_ROW,
        after_match=S.AfterMatch("TO LAST", up),
        define=(
            (down, B("OR",
                     B("AND", S.IsNull(last(C("price", down), 1)),
                       B("<", C("price", down), C("price", "START_ROW"))),
                     B("<", C("price", down), last(C("price", down), 1)))),
            (up, B(">", C("price", up), last(C("price", down), 1))),
        ),
        **TICKER)


def test_seed_aggregation():
    (spec,) = clauses(seed_queries()[2])
    assert spec == S.MatchRecognize(
        pattern=labels(Q("A", 1, None), "B"),
        measures=(S.Measure(first(C("rowtime", "A")), "start_tstamp"),
                  S.Measure(last(C("rowtime", "A")), "end_tstamp"),
                  S.Measure(S.Aggregate("AVG", C("price", "A")), "avgPrice")),
        after_match=S.AfterMatch("PAST LAST ROW"),
        define=(("A", B("<", S.Aggregate("AVG", C("price", "A")), L(15))),),
        **TICKER)


def test_seed_greedy_and_reluctant():
    query = seed_queries()[3]
    (greedy,) = clauses(query)
    expected = S.MatchRecognize(
        pattern=labels("A", Q("B", 0, None), "C"),
        measures=(S.Measure(C("price", "C"), "lastPrice"),),
        after_match=S.AfterMatch("PAST LAST ROW"),
        define=(("A", B(">", C("price", "A"), L(10))),
                ("B", B("<", C("price", "B"), L(15))),
                ("C", B(">", C("price", "C"), L(12)))),
        **TICKER)
    assert greedy == expected
    (reluctant,) = clauses(query.replace("B*", "B*?"))
    assert reluctant.pattern == labels("A", Q("B", 0, None, greedy=False), "C")


def test_within_without_the_comma_says_where():
    """The golden README says the documented WITHIN query lacks the comma between the B and C
    definitions; this seed (the Chinese page) has it. Without it the parser points at C."""
    query = seed_queries()[4]
    assert "A.price - 10,\n" in query
    query = query.replace("A.price - 10,\n", "A.price - 10\n", 1)
    with pytest.raises(SqlError) as info:
        clauses(query)
    error = info.value
    assert (error.line, error.column) == (14, 13)
    assert str(error) == ("line 14, column 13: expected ')' but found 'C'\n"
                          "                C AS C.price < A.price - 10\n"
                          "                ^")


def test_seed_within():
    (spec,) = clauses(seed_queries()[4])
    assert spec == S.MatchRecognize(
        pattern=labels("A", Q("B", 0, None), "C"),
        measures=(S.Measure(C("rowtime", "C"), "dropTime"),
                  S.Measure(B("-", C("price", "A"), C("price", "C")), "dropDiff")),
        after_match=S.AfterMatch("PAST LAST ROW"),
        within_ms=3_600_000,
        define=(("B", B(">", C("price", "B"), B("-", C("price", "A"), L(10)))),
                ("C", B("<", C("price", "C"), B("-", C("price", "A"), L(10))))),
        **TICKER)


def test_seed_output_mode():
    (spec,) = clauses(seed_queries()[5])
    assert spec == S.MatchRecognize(
        pattern=labels(Q("A", 1, None), "B"),
        measures=(S.Measure(first(C("price", "A")), "startPrice"),
                  S.Measure(last(C("price", "A")), "topPrice"),
                  S.Measure(C("price", "B"), "lastPrice")),
        after_match=None,
        define=(("A", B("OR", S.IsNull(last(C("price", "A"), 1)),
                        B(">", C("price", "A"), last(C("price", "A"), 1)))),
                ("B", B("<", C("price", "B"), last(C("price", "A"))))),
        **TICKER)


@pytest.mark.parametrize("strategy, after", [
    ("AFTER MATCH SKIP PAST LAST ROW", S.AfterMatch("PAST LAST ROW")),
    ("AFTER MATCH SKIP TO NEXT ROW", S.AfterMatch("TO NEXT ROW")),
    ("AFTER MATCH SKIP TO LAST A", S.AfterMatch("TO LAST", "A")),
    ("AFTER MATCH SKIP TO FIRST A", S.AfterMatch("TO FIRST", "A")),
])
def test_seed_after_match(strategy, after):
    query = seed_queries()[6]
    assert "[AFTER MATCH STRATEGY]" in query
    (spec,) = clauses(query.replace("[AFTER MATCH STRATEGY]", strategy))
    assert spec == S.MatchRecognize(
        pattern=labels(Q("A", 1, None), "C"),
        measures=(S.Measure(S.Aggregate("SUM", C("price", "A")), "sumPrice"),
                  S.Measure(first(C("rowtime")), "startTime"),
                  S.Measure(last(C("rowtime")), "endTime")),
        after_match=after,
        define=(("A", B("<", S.Aggregate("SUM", C("price", "A")), L(30))),),
        **TICKER)


def test_seed_navigation_fragments():
    spec = mr("PATTERN (A B+)\nDEFINE\n  A AS A.price >= 10,\n"
              "  B AS B.price > A.price AND SUM(price) < 100 AND SUM(B.price) < 80")
    assert spec.definitions["B"] == B(
        "AND", B("AND", B(">", C("price", "B"), C("price", "A")),
                 B("<", S.Aggregate("SUM", C("price")), L(100))),
        B("<", S.Aggregate("SUM", C("price", "B")), L(80)))
    spec = mr("PATTERN (A B+)\nDEFINE\n  A AS A.price >= 10,\n"
              "  B AS (LAST(B.price, 1) IS NULL OR B.price > LAST(B.price, 1)) AND\n"
              "       (LAST(B.price, 2) IS NULL OR B.price > 2 * LAST(B.price, 2))")
    assert spec.definitions["B"].right == B(
        "OR", S.IsNull(last(C("price", "B"), 2)),
        B(">", C("price", "B"), B("*", L(2), last(C("price", "B"), 2))))
    spec = mr("PATTERN (A B? C)\nDEFINE\n  B AS B.price < 20,\n  C AS LAST(price, 1) < C.price")
    assert spec.pattern == labels("A", Q("B", 0, 1), "C")
    assert spec.definitions["C"] == B("<", last(C("price"), 1), C("price", "C"))


# ------------------------------------------------------------------ every golden query

def golden_queries():
    seen = {}
    for path in sorted(GOLDEN_DIR.glob("mr_*.json")):
        data = json.loads(path.read_text())
        if "query" in data:
            seen.setdefault(data["query"].replace("<source>", "Ticker"), (path.name, None))
        for q in data.get("queries", []):
            seen.setdefault(q["sql"], (path.name, q.get("columns")))
    return [(sql, *where) for sql, where in seen.items()]


@pytest.mark.parametrize("sql, name, columns", golden_queries(),
                         ids=[f"{n}:{i}" for i, (_, n, _) in enumerate(golden_queries())])
def test_golden_query_parses(sql, name, columns):
    (spec,) = clauses(sql)
    assert spec.partition_by == ("symbol",)
    assert spec.order_by == (S.OrderItem("rowtime"),)
    if columns is not None:     # ONE ROW PER MATCH: partition columns, then the measures
        assert ["symbol", *(m.alias for m in spec.measures)] == columns
    assert parse_match_recognize(to_sql(spec)) == spec
    variables = {n.name for n in _walk(spec.pattern) if isinstance(n, S.Label)}
    assert set(spec.definitions) <= variables
    # every node carries the position of its text
    for measure in spec.measures:
        line, column = measure.pos
        assert sql.split("\n")[line - 1][column - 1:].startswith(_head(measure.expr))


def _walk(node):
    yield node
    for child in getattr(node, "items", ()) or ():
        yield from _walk(child)
    if isinstance(node, (S.Quantified, S.Exclusion)):
        yield from _walk(node.node)


def _head(node):
    """How the text of ``node`` starts (first token)."""
    if isinstance(node, S.Column):
        return node.var or node.name
    if isinstance(node, S.Binary):
        return _head(node.left)
    return {S.Nav: lambda n: n.kind, S.Aggregate: lambda n: n.func}[type(node)](node)


def test_golden_p2_quantifier_variants():
    got = {}
    for sql, name, _ in golden_queries():
        if name.startswith("mr_p2"):
            (spec,) = clauses(sql)
            got[re.search(r"PATTERN \((.*)\)", sql).group(1)] = spec.pattern
    assert got == {"A B*": labels("A", Q("B", 0, None)), "A B+": labels("A", Q("B", 1, None)),
                   "A B+?": labels("A", Q("B", 1, None, False)),
                   "A B{2}": labels("A", Q("B", 2, 2))}


# ------------------------------------------------------------------ one test per clause

def test_partition_and_order_by():
    spec = mr("PARTITION BY symbol, `region`\nORDER BY rowtime ASC, price DESC\nPATTERN (A)")
    assert spec.partition_by == ("symbol", "region")
    assert spec.order_by == (S.OrderItem("rowtime", True), S.OrderItem("price", False))
    assert spec.order_by[1].pos == (3, 23)


def test_measures_with_running_and_final():
    spec = mr("MEASURES RUNNING LAST(A.price) AS r, FINAL COUNT(*) AS n, CLASSIFIER() AS c,\n"
              "  MATCH_NUMBER() AS m, MATCH_ROWTIME() AS t, MATCH_ROWTIME(rowtime) AS t2,\n"
              "  MATCH_PROCTIME() AS p\nPATTERN (A)")
    assert [m.expr for m in spec.measures] == [
        S.Semantics("RUNNING", last(C("price", "A"))),
        S.Semantics("FINAL", S.Aggregate("COUNT", None)), S.Classifier(), S.MatchNumber(),
        S.MatchRowtime(), S.MatchRowtime(C("rowtime")), S.MatchProctime()]
    assert spec.measures[1].pos == (2, 38)


@pytest.mark.parametrize("text, mode", [
    ("ONE ROW PER MATCH", S.ONE_ROW),
    ("ALL ROWS PER MATCH", S.ALL_ROWS_SHOW),
    ("ALL ROWS PER MATCH SHOW EMPTY MATCHES", S.ALL_ROWS_SHOW),
    ("all rows per match omit empty matches", S.ALL_ROWS_OMIT),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", S.ALL_ROWS_WITH_UNMATCHED),
    ("", S.ONE_ROW),
])
def test_rows_per_match(text, mode):
    assert mr(f"{text}\nPATTERN (A)").rows_per_match == mode


@pytest.mark.parametrize("text, after", [
    ("AFTER MATCH SKIP PAST LAST ROW", S.AfterMatch("PAST LAST ROW")),
    ("AFTER MATCH SKIP TO NEXT ROW", S.AfterMatch("TO NEXT ROW")),
    ("AFTER MATCH SKIP TO FIRST B", S.AfterMatch("TO FIRST", "B")),
    ("AFTER MATCH SKIP TO LAST B", S.AfterMatch("TO LAST", "B")),
    ("AFTER MATCH SKIP TO B", S.AfterMatch("TO LAST", "B")),
    ("", None),
])
def test_after_match(text, after):
    assert mr(f"{text}\nPATTERN (A B)").after_match == after


@pytest.mark.parametrize("pattern, node", [
    ("A", S.Label("A")),
    ("A B C", labels("A", "B", "C")),
    ("A | B C | D", S.Alternation((S.Label("A"), labels("B", "C"), S.Label("D")))),
    ("(A B)+", S.Quantified(labels("A", "B"), 1, None)),
    ("A* B+ C?", labels(Q("A", 0, None), Q("B", 1, None), Q("C", 0, 1))),
    ("A*? B+? C??", labels(Q("A", 0, None, False), Q("B", 1, None, False), Q("C", 0, 1, False))),
    ("A{3} B{2,} C{1,4} D{,5}", labels(Q("A", 3, 3), Q("B", 2, None), Q("C", 1, 4),
                                       Q("D", 0, 5))),
    ("A{3}? B{2,}? C{1,4}? D{,5}?", labels(Q("A", 3, 3, False), Q("B", 2, None, False),
                                           Q("C", 1, 4, False), Q("D", 0, 5, False))),
    ("PERMUTE(A, B C, D)", S.Permute((S.Label("A"), labels("B", "C"), S.Label("D")))),
    ("{- A -} B", labels(S.Exclusion(S.Label("A")), "B")),
    ("^ A $", labels(S.Anchor("^"), "A", S.Anchor("$"))),
    ("()", S.Empty()),
    ("A () | B", S.Alternation((labels("A", S.Empty()), S.Label("B")))),
    ("((A | B) C)*", S.Quantified(labels(S.Alternation((S.Label("A"), S.Label("B"))), "C"),
                                  0, None)),
])
def test_pattern(pattern, node):
    spec = mr(f"PATTERN ({pattern})")
    assert spec.pattern == node
    assert parse_match_recognize(to_sql(spec)) == spec


def test_pattern_positions():
    spec = mr("PATTERN (A  B+?)")
    assert spec.pattern.items[0].pos == (2, 10)
    assert spec.pattern.items[1].pos == (2, 13)
    assert spec.pattern.items[1].node.pos == (2, 13)


@pytest.mark.parametrize("text, ms", [
    ("'1' HOUR", 3_600_000), ("'10' SECOND", 10_000), ("'5' MINUTE", 300_000),
    ("'2' DAY", 172_800_000), ("'250' MILLISECOND", 250), ("'1:30' HOUR TO MINUTE", 5_400_000),
    ("'1 02:03:04.5' DAY TO SECOND", 93_784_500), ("'1.5' SECOND", 1_500),
])
def test_within(text, ms):
    assert mr(f"PATTERN (A B) WITHIN INTERVAL {text}").within_ms == ms


def test_subset_and_define():
    spec = mr("PATTERN (A B C)\nSUBSET U = (A, B), V = (C)\nDEFINE A AS U.price > 1, C AS TRUE")
    assert spec.subsets == (("U", ("A", "B")), ("V", ("C",)))
    assert spec.subset_map == {"U": ("A", "B"), "V": ("C",)}
    assert spec.define == (("A", B(">", C("price", "U"), L(1))), ("C", L(True, "BOOLEAN")))


def test_define_is_optional_and_keywords_any_case():
    spec = parse_match_recognize("match_recognize (partition by s order by t pattern (a b))")
    assert spec == S.MatchRecognize(labels("a", "b"), ("s",), (S.OrderItem("t"),))


# ------------------------------------------------------------------ expressions

@pytest.mark.parametrize("text, node", [
    ("a OR b AND NOT c", B("OR", C("a"), B("AND", C("b"), S.Unary("NOT", C("c"))))),
    ("a = 1 AND b <> 2 AND c != 3", B("AND", B("AND", B("=", C("a"), L(1)), B("<>", C("b"), L(2))),
                                     B("<>", C("c"), L(3)))),
    ("NOT a < b", S.Unary("NOT", B("<", C("a"), C("b")))),
    ("a || b = c", B("=", B("||", C("a"), C("b")), C("c"))),
    ("1 + 2 * 3 % 4 - -x", B("-", B("+", L(1), B("%", B("*", L(2), L(3)), L(4))),
                             S.Unary("-", C("x")))),
    ("a IS NOT NULL AND b IS NULL", B("AND", S.IsNull(C("a"), True), S.IsNull(C("b")))),
    ("x BETWEEN 1 AND 2 AND y NOT BETWEEN a + 1 AND 3",
     B("AND", S.Between(C("x"), L(1), L(2)),
       S.Between(C("y"), B("+", C("a"), L(1)), L(3), True))),
    ("x IN (1, 2) OR x NOT IN ('a')", B("OR", S.InList(C("x"), (L(1), L(2))),
                                       S.InList(C("x"), (L("a", "STRING"),), True))),
    ("s LIKE 'a%' AND s NOT LIKE 'b'", B("AND", S.Call("LIKE", (C("s"), L("a%", "STRING"))),
                                        S.Unary("NOT", S.Call("LIKE", (C("s"), L("b", "STRING")))))),
    ("(a + b) * c", B("*", B("+", C("a"), C("b")), C("c"))),
])
def test_precedence(text, node):
    assert expr(text) == node
    assert expr(to_sql(node)) == node


def test_literals():
    import datetime
    import decimal
    assert expr("2147483647") == L(2147483647, "INT")
    assert expr("2147483648") == L(2147483648, "BIGINT")
    assert expr("1.50") == L(decimal.Decimal("1.50"), "DECIMAL")
    assert expr("1e3") == L(1000.0, "DOUBLE")
    assert expr("'x'") == L("x", "STRING")
    assert expr("TRUE") == L(True, "BOOLEAN") and expr("false") == L(False, "BOOLEAN")
    assert expr("NULL") == L(None, "NULL")
    assert expr("TIMESTAMP '2011-04-01 10:00:00'") == L(datetime.datetime(2011, 4, 1, 10),
                                                         "TIMESTAMP")
    assert expr("DATE '2011-04-01'") == L(datetime.date(2011, 4, 1), "DATE")
    assert expr("INTERVAL '2' MINUTE") == L(120_000, "INTERVAL")


def test_calls_navigation_and_aggregates():
    assert expr("PREV(A.price)") == S.Nav("PREV", C("price", "A"), 1)
    assert expr("NEXT(price, 2)") == S.Nav("NEXT", C("price"), 2)
    assert expr("FIRST(A.price * A.tax, 1)") == first(B("*", C("price", "A"), C("tax", "A")), 1)
    assert expr("PREV(LAST(A.price), 2)") == S.Nav("PREV", last(C("price", "A")), 2)
    assert expr("count(*)") == S.Aggregate("COUNT", None)
    assert expr("COUNT(DISTINCT A.x)") == S.Aggregate("COUNT", C("x", "A"), True)
    assert expr("max(price)") == S.Aggregate("MAX", C("price"))
    assert expr("abs(x)") == S.Call("ABS", (C("x"),))
    assert expr("coalesce(a, 0)") == S.Call("COALESCE", (C("a"), L(0)))
    assert expr("NOW()") == S.Call("NOW", ())
    assert expression_of("wavg(A.price)", aggregates=("wavg",)) == \
        S.Aggregate("WAVG", C("price", "A"))
    assert expr("wavg(A.price)") == S.Call("WAVG", (C("price", "A"),))
    two = expression_of("wavg(A.price, A.tax)", aggregates=("WAVG",))
    assert two == S.Aggregate("WAVG", (C("price", "A"), C("tax", "A")))
    assert expression_of(to_sql(two), aggregates=("WAVG",)) == two


def test_case_cast_and_quoted_columns():
    assert expr("CASE WHEN a > 1 THEN 'x' ELSE 'y' END") == S.Case(
        None, ((B(">", C("a"), L(1)), L("x", "STRING")),), L("y", "STRING"))
    assert expr("CASE a WHEN 1 THEN 2 WHEN 3 THEN 4 END") == S.Case(
        C("a"), ((L(1), L(2)), (L(3), L(4))), None)
    assert expr("CAST(A.price AS DOUBLE)") == S.Cast(C("price", "A"), "DOUBLE")
    assert expr("CAST(x AS decimal(10,2))") == S.Cast(C("x"), "DECIMAL(10, 2)")
    assert expr("CAST(t AS TIMESTAMP(3))") == S.Cast(C("t"), "TIMESTAMP(3)")
    assert expr("`A`.`user`") == C("user", "A")


def test_expression_positions():
    node = expr("a +\n  LAST(B.price, 1)")
    assert node.pos == (1, 3)
    assert node.right.pos == (2, 3)
    assert node.right.arg.pos == (2, 8)


# ------------------------------------------------------------------ errors, exactly

@pytest.mark.parametrize("body, message, line, column, caret", [
    ("  PATTERN (A B C DEFINE A AS TRUE", "expected ')' but found 'DEFINE'", 2, 18,
     "      PATTERN (A B C DEFINE A AS TRUE\n                     ^"),
    ("  PATTERN (A B)\n  DEFINE C AS C.x > 1",
     "DEFINE of C, which is not a variable of the PATTERN", 3, 10,
     "      DEFINE C AS C.x > 1\n             ^"),
    ("  PATTERN (A B)\n  DEFINE A AS TRUE, A AS FALSE", "A is defined twice", 3, 21,
     "      DEFINE A AS TRUE, A AS FALSE\n                        ^"),
    ("  AFTER MATCH SKIP TO LAST X\n  PATTERN (A B)",
     "AFTER MATCH SKIP to X, which is not a variable of the PATTERN", 2, 28,
     "      AFTER MATCH SKIP TO LAST X\n                               ^"),
    ("  MEASURES A.x AS total, B.x AS Total\n  PATTERN (A B)", "duplicate measure alias Total",
     2, 33, "      MEASURES A.x AS total, B.x AS Total\n                                    ^"),
    ("  PATTERN (A B)\n  SUBSET U = (A, Z)", ("subset U lists Z, which is not a variable of "
     "the PATTERN"), 3, 18, "      SUBSET U = (A, Z)\n                     ^"),
    ("  MEASURES Z.price AS p\n  PATTERN (A)", "Z.price: Z is not a pattern variable or subset",
     2, 12, "      MEASURES Z.price AS p\n               ^"),
    ("  PATTERN (A{3,1})", "quantifier {3,1}: the minimum is larger than the maximum", 2, 13,
     "      PATTERN (A{3,1})\n                ^"),
    ("  PATTERN (A) WITHIN INTERVAL '1' WEEK",
     "expected an interval unit (DAY, HOUR, MINUTE, SECOND, MILLISECOND) but found 'WEEK'",
     2, 35, "      PATTERN (A) WITHIN INTERVAL '1' WEEK\n                                      ^"),
    ("  PATTERN (A) WITHIN INTERVAL '1:xx' HOUR TO MINUTE",
     "invalid interval '1:xx' for HOUR TO MINUTE: give its fields as numbers (at most 10 digits in the first), "
     "e.g. '1' HOUR or '1:30' HOUR TO MINUTE", 2, 31,
     "      PATTERN (A) WITHIN INTERVAL '1:xx' HOUR TO MINUTE\n                                  ^"),
    ("  PATTERN (A) WITHIN INTERVAL '12345678901' MINUTE",
     "invalid interval '12345678901' for MINUTE: give its fields as numbers (at most 10 digits in the first), "
     "e.g. '1' HOUR or '1:30' HOUR TO MINUTE", 2, 31,
     "      PATTERN (A) WITHIN INTERVAL '12345678901' MINUTE\n                                  ^"),
    ("  MEASURES LAST(A.x, -1) AS p\n  PATTERN (A)",
     "expected a non-negative integer offset but found '-'", 2, 22,
     "      MEASURES LAST(A.x, -1) AS p\n                         ^"),
    ("  MEASURES A.x p\n  PATTERN (A)", "expected 'AS' but found 'p'", 2, 16,
     "      MEASURES A.x p\n                   ^"),
    ("  ONE ROW MATCH\n  PATTERN (A)", "expected 'PER' but found 'MATCH'", 2, 11,
     "      ONE ROW MATCH\n              ^"),
    ("  AFTER MATCH SKIP TO\n  PATTERN (A)",
     "expected a pattern variable, FIRST, LAST or NEXT ROW but found 'PATTERN'", 3, 3,
     "      PATTERN (A)\n      ^"),
    ("  AFTER MATCH SKIP TO LAST\n  PATTERN (A)",
     "expected a pattern variable but found 'PATTERN'", 3, 3, "      PATTERN (A)\n      ^"),
    ("  PARTITION BY s", "expected 'PATTERN' but found ')'", 3, 1, "    )\n    ^"),
    ("  PATTERN (A |)", "expected a pattern variable but found ')'", 2, 15,
     "      PATTERN (A |)\n                  ^"),
    ("  PATTERN (A) DEFINE A AS A.price >", "expected an expression but found ')'", 3, 1,
     "    )\n    ^"),
    ("  PATTERN (A) DEFINE A AS CASE END", "expected 'WHEN' but found 'END'", 2, 32,
     "      PATTERN (A) DEFINE A AS CASE END\n                                   ^"),
])
def test_errors(body, message, line, column, caret):
    with pytest.raises(SqlError) as info:
        mr(body)
    error = info.value
    assert (error.message, error.line, error.column) == (message, line, column)
    assert str(error) == f"line {line}, column {column}: {message}\n{caret}"


def test_expressions_deeper_than_the_kit_takes_are_an_error_at_their_start():
    assert depth(expr(" AND ".join(["x > 0"] * (MAX_DEPTH // 2)))) == MAX_DEPTH // 2 + 1
    assert depth(expr("CASE WHEN a THEN ABS(b) END")) == 3
    chain = " + ".join(["A.x"] * MAX_DEPTH)                    # MAX_DEPTH - 1 operators on a comparison
    with pytest.raises(SqlError, match=f"this expression is {MAX_DEPTH + 1} nodes deep .* more than the "
                                       f"{MAX_DEPTH} the kit takes: split the chain") as info:
        mr(f"  PATTERN (A)\n  DEFINE A AS {chain} > 0")
    assert (info.value.line, info.value.column) == (3, 15)
    with pytest.raises(SqlError, match="nodes deep") as info:
        mr(f"  MEASURES {chain} + 1 AS total\n  PATTERN (A)\n  DEFINE A AS TRUE")
    assert (info.value.line, info.value.column) == (2, 12)


def test_error_at_end_of_input():
    with pytest.raises(SqlError) as info:
        parse_match_recognize("MATCH_RECOGNIZE (PATTERN (A)")
    assert str(info.value) == ("line 1, column 29: expected ')' but found end of input\n"
                               "    MATCH_RECOGNIZE (PATTERN (A)\n"
                               "                                ^")


def test_error_is_a_kit_error():
    import kit
    with pytest.raises(kit.KitError):
        parse_match_recognize("MATCH_RECOGNIZE (")


def test_clauses_finds_each_clause_in_a_query():
    query = ("SELECT * FROM (SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) x) "
             "MATCH_RECOGNIZE (PATTERN (B C)) AS y")
    assert [c.pattern for c in clauses(query)] == [S.Label("A"), labels("B", "C")]
    assert [c.pos for c in clauses(query)] == [(1, 32), (1, 65)]


def test_seed_queries_round_trip():
    for query in seed_queries():
        query = query.replace("[AFTER MATCH STRATEGY]", "AFTER MATCH SKIP TO LAST A")
        (spec,) = clauses(query)
        assert parse_match_recognize(to_sql(spec)) == spec


@pytest.mark.parametrize("text", [
    "RUNNING LAST(A.price, 2) + FINAL COUNT(DISTINCT A.x)", "- (-x)", "NOT (a OR b)",
    "(a = b) IS NULL", "x BETWEEN (a OR b) AND c", "CASE a WHEN 1 THEN 'it''s' END",
    "TIMESTAMP '2011-04-01 10:00:00' < DATE '2011-04-02'", "1e3 + 2.50 + INTERVAL '90' SECOND",
    "CAST(`select`.`from` AS DECIMAL(10, 2))", "MATCH_ROWTIME(rowtime) = MATCH_PROCTIME()",
    "a - (b - c)", "a / (b * c)", "PREV(A.x, 1) <> NEXT(A.x, 2)",
])
def test_expressions_round_trip(text):
    node = expr(text)
    assert expr(to_sql(node)) == node


def test_clause_round_trip_keeps_every_part():
    spec = mr("PARTITION BY s ORDER BY t DESC MEASURES CLASSIFIER() AS c\n"
              "ALL ROWS PER MATCH OMIT EMPTY MATCHES AFTER MATCH SKIP TO FIRST B\n"
              "PATTERN (^ {- A -} PERMUTE(B, C){1,3}? $) WITHIN INTERVAL '1:30' HOUR TO MINUTE\n"
              "SUBSET U = (A, B) DEFINE B AS U.x > 0")
    assert parse_match_recognize(to_sql(spec)) == spec
    assert "WITHIN INTERVAL '90' MINUTE" in to_sql(spec)


# ------------------------------------------------------------------ properties

_names = st.sampled_from(["A", "B", "price", "rowtime", "select", "x y", "Last"])
_leaves = st.one_of(
    st.builds(S.Column, _names, st.one_of(st.none(), st.sampled_from(["A", "B"]))),
    st.builds(S.Literal, st.integers(0, 2**40), st.just("INT")).map(
        lambda lit: S.Literal(lit.value, "INT" if lit.value < 2**31 else "BIGINT")),
    st.builds(S.Literal, st.text(max_size=3), st.just("STRING")),
    st.builds(S.Literal, st.booleans(), st.just("BOOLEAN")),
    st.just(S.Literal(None, "NULL")), st.just(S.Classifier()),
)


def _compound(children):
    ops = ["+", "-", "*", "/", "%", "||", "=", "<>", "<", "<=", ">", ">=", "AND", "OR"]
    return st.one_of(
        st.builds(S.Binary, st.sampled_from(ops), children, children),
        st.builds(S.Unary, st.sampled_from(["NOT", "-"]), children),
        st.builds(S.IsNull, children, st.booleans()),
        st.builds(S.Between, children, children, children, st.booleans()),
        st.builds(S.InList, children, st.lists(children, min_size=1, max_size=2).map(tuple),
                  st.booleans()),
        st.builds(S.Nav, st.sampled_from(["FIRST", "LAST", "PREV", "NEXT"]), children,
                  st.integers(0, 3)),
        st.builds(S.Aggregate, st.sampled_from(["SUM", "AVG", "MAX"]), children, st.booleans()),
        st.builds(S.Call, st.sampled_from(["ABS", "COALESCE"]),
                  st.lists(children, max_size=2).map(tuple)),
        st.builds(S.Cast, children, st.sampled_from(["DOUBLE", "DECIMAL(10, 2)"])),
    )


_expressions = st.recursive(_leaves, _compound, max_leaves=8)

_labels = st.builds(S.Label, st.sampled_from(["A", "B", "C"]))


def _pattern_compound(children):
    items = st.lists(children, min_size=2, max_size=3).map(tuple)
    return st.one_of(
        st.builds(S.Concat, items), st.builds(S.Alternation, items),
        st.builds(lambda node, lo, extra, greedy: S.Quantified(node, lo, None if extra < 0 else
                                                               lo + extra, greedy),
                  children, st.integers(0, 3), st.integers(-1, 2), st.booleans()),
        st.builds(S.Permute, items), st.builds(S.Exclusion, children),
    )


_patterns = st.recursive(st.one_of(_labels, st.just(S.Empty()), st.just(S.Anchor("^"))),
                         _pattern_compound, max_leaves=6)


def _canonical(node):
    """The tree the parser builds: nested Concat/Alternation flattened, as the grammar does."""
    if isinstance(node, (S.Concat, S.Alternation)):
        items = []
        for item in map(_canonical, node.items):
            items += item.items if type(item) is type(node) else [item]
        return type(node)(tuple(items))
    if isinstance(node, (S.Quantified, S.Exclusion)):
        return type(node)(**{**node.__dict__, "node": _canonical(node.node)})
    if isinstance(node, S.Permute):
        return S.Permute(tuple(map(_canonical, node.items)))
    return node


@settings(max_examples=300, deadline=None)
@given(_expressions)
def test_any_expression_prints_and_parses_back(node):
    assert expression_of(to_sql(node)) == node


@settings(max_examples=300, deadline=None)
@given(_patterns)
def test_any_pattern_prints_and_parses_back(node):
    spec = parse_match_recognize(f"MATCH_RECOGNIZE (PATTERN ({to_sql(node)}))")
    assert spec.pattern == _canonical(node)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab1.'`-/*\n =<>(){}|?", max_size=30))
def test_tokens_know_where_they_are(text):
    from kit.sql.errors import position
    from kit.sql.lexer import tokenize
    try:
        tokens = tokenize(text)
    except SqlError as error:
        assert 1 <= error.line <= text.count("\n") + 1
        return
    for tok in tokens:
        assert (tok.line, tok.column) == position(text, tok.start)
        assert tok.kind == "EOF" or text[tok.start:tok.end].strip() != ""
