"""MATCH_RECOGNIZE's spec built from sqlglot's tree (``kit.sql.match_recognize.SpecReader``) is
the spec the kit's own token parser built, positions included: ``mr_from_tree.json`` holds, for
the parser tests' clauses, expressions and errors, edge cases of both, every golden query and
the seed's, what that parser gave (recorded from it, commit ad10658, before it was removed)."""

import dataclasses
import json
from pathlib import Path

import pytest

from kit.sql.dialect import MatchRecognize
from kit.sql.errors import SqlError
from kit.sql.match_recognize import SpecReader, expression_of, parse_match_recognize
from kit.sql.statement import Statement

EXPECTED = json.loads((Path(__file__).parent / "mr_from_tree.json").read_text())


PLANNED = {"arg_type"}   # fields told at planning (Aggregate.arg_type), not by a reader


def full(node):
    """``node`` with its positions (a spec's equality leaves them out)."""
    if isinstance(node, (tuple, list)):
        return type(node)(full(n) for n in node)
    if dataclasses.is_dataclass(node):
        return (type(node).__name__, *((f.name, full(getattr(node, f.name))) for f in dataclasses.fields(node)
                                       if f.name not in PLANNED))
    return node


def outcome(read, *args) -> str:
    try:
        return repr(full(read(*args)))
    except SqlError as error:
        return repr(("error", error.message, error.line, error.column))


def clauses(text):
    statement = Statement(text)
    if statement.tree is None:
        raise statement.parse_error
    nodes = sorted(statement.tree.find_all(MatchRecognize), key=lambda n: n.meta["clause"])
    return [SpecReader(statement).clause(node) for node in nodes]


@pytest.mark.parametrize("body", sorted(EXPECTED["clauses"]))
def test_a_clause_from_the_tree(body):
    assert outcome(parse_match_recognize, f"MATCH_RECOGNIZE (\n{body}\n)") == EXPECTED["clauses"][body]


@pytest.mark.parametrize("text", sorted(EXPECTED["expressions"]))
def test_an_expression_from_the_tree(text):
    assert outcome(expression_of, text) == EXPECTED["expressions"][text]


@pytest.mark.parametrize("sql", sorted(EXPECTED["queries"]))
def test_every_golden_query_from_the_tree(sql):
    assert outcome(clauses, sql) == EXPECTED["queries"][sql]
