"""MATCH_RECOGNIZE's spec built from sqlglot's tree (``kit.sql.match_recognize.SpecReader``) is
the spec the kit's own parser built from its tokens: on the parser tests' clauses, expressions
and errors, every golden query, and any expression or pattern hypothesis prints -- positions
included."""

import dataclasses

import pytest
from hypothesis import given, settings

import test_sql_parser as P
from kit.sql import to_sql
from kit.sql.dialect import MatchRecognize
from kit.sql.errors import SqlError
from kit.sql.expressions import ExpressionParser
from kit.sql.lexer import tokenize
from kit.sql.match_recognize import MatchRecognizeParser, SpecReader, expression_of, parse_match_recognize
from kit.sql.statement import Statement


def full(node):
    """``node`` with its positions (a spec's equality leaves them out)."""
    if isinstance(node, (tuple, list)):
        return type(node)(full(n) for n in node)
    if dataclasses.is_dataclass(node):
        return (type(node).__name__, *((f.name, full(getattr(node, f.name))) for f in dataclasses.fields(node)))
    return node


def outcome(read, *args):
    try:
        return full(read(*args))
    except SqlError as error:
        return ("error", error.message, error.line, error.column)


def old_clause(text):
    parser = MatchRecognizeParser(text, tokenize(text))
    clause = parser.clause()
    if parser.peek().kind != "EOF":
        raise parser.error("expected end of input")
    return clause


def old_clauses(text):
    tokens = tokenize(text)
    return [MatchRecognizeParser(text, tokens, m).clause() for m, tok in enumerate(tokens)
            if tok.is_word("MATCH_RECOGNIZE")]


def new_clauses(text):
    statement = Statement(text)
    if statement.tree is None:
        raise statement.parse_error
    nodes = sorted(statement.tree.find_all(MatchRecognize), key=lambda n: n.meta["clause"])
    return [SpecReader(statement).clause(node) for node in nodes]


def _args(test, i):
    return [case[i] if isinstance(case, tuple) else case for case in test.pytestmark[0].args[1]]


BODIES = _args(P.test_errors, 0) + [f"PATTERN ({p})" for p in _args(P.test_pattern, 0)] + \
    [f"{r}\nPATTERN (A)" for r in _args(P.test_rows_per_match, 0)] + \
    [f"{a}\nPATTERN (A B)" for a in _args(P.test_after_match, 0)] + \
    [f"PATTERN (A B) WITHIN INTERVAL {w}" for w in _args(P.test_within, 0)]
EXPRESSIONS = _args(P.test_precedence, 0) + _args(P.test_expressions_round_trip, 0) + [
    "2147483647", "2147483648", "1.50", "1e3", "'x'", "TRUE", "false", "NULL", "TIMESTAMP '2011-04-01 10:00:00'",
    "DATE '2011-04-01'", "INTERVAL '2' MINUTE", "PREV(A.price)", "NEXT(price, 2)", "FIRST(A.price * A.tax, 1)",
    "PREV(LAST(A.price), 2)", "count(*)", "COUNT(DISTINCT A.x)", "max(price)", "abs(x)", "coalesce(a, 0)", "NOW()",
    "wavg(A.price)", "CASE WHEN a > 1 THEN 'x' ELSE 'y' END", "CASE a WHEN 1 THEN 2 WHEN 3 THEN 4 END",
    "CAST(A.price AS DOUBLE)", "CAST(x AS decimal(10,2))", "CAST(t AS TIMESTAMP(3))", "`A`.`user`",
    "a +\n  LAST(B.price, 1)", "CAST(t AS TIMESTAMP(3) WITH LOCAL TIME ZONE)", "CAST(b AS VARCHAR)",
    "x IN (SELECT v FROM t) AND EXISTS (SELECT 1 FROM u)", "(SELECT MAX(v) FROM Limits) + 1", "ARRAY[1, 2]",
    "DATE '2011-13-01'", "LAST(A.x, -1)", "INTERVAL '1' WEEK", "PREV(A.x, 1, 2)", "TIMESTAMP 'x'",
]


@pytest.mark.parametrize("body", BODIES)
def test_a_clause_from_the_tree_is_the_parsers(body):
    text = f"MATCH_RECOGNIZE (\n{body}\n)"
    assert outcome(parse_match_recognize, text) == outcome(old_clause, text)


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_an_expression_from_the_tree_is_the_parsers(text):
    assert outcome(expression_of, text) == outcome(ExpressionParser.parse, text)


@pytest.mark.parametrize("sql", [q for q, _, _ in P.golden_queries()] + P.seed_queries())
def test_every_golden_query_reads_the_same(sql):
    assert outcome(new_clauses, sql) == outcome(old_clauses, sql)


@settings(max_examples=300, deadline=None)
@given(P._expressions)
def test_any_expression_reads_the_same(node):
    text = to_sql(node)
    assert outcome(expression_of, text) == outcome(ExpressionParser.parse, text)


@settings(max_examples=300, deadline=None)
@given(P._patterns)
def test_any_pattern_reads_the_same(node):
    text = f"MATCH_RECOGNIZE (PATTERN ({to_sql(node)}))"
    assert outcome(parse_match_recognize, text) == outcome(old_clause, text)
