"""kit.sql.lexer: token kinds, values and exact positions; errors with a caret."""

import pytest
from hypothesis import given, settings, strategies as st
from sqlglot.errors import TokenError

from kit.sql.dialect import Flink
from kit.sql.errors import SqlError
from kit.sql.lexer import from_sqlglot, tokenize


def kinds(text):
    return [(t.kind, t.value) for t in tokenize(text)][:-1]


def test_identifiers_keywords_and_positions():
    toks = tokenize("select `user`,\n  Price from t")
    assert [(t.kind, t.value, t.line, t.column) for t in toks] == [
        ("KEYWORD", "SELECT", 1, 1), ("IDENT", "user", 1, 8), ("OP", ",", 1, 14),
        ("IDENT", "Price", 2, 3), ("KEYWORD", "FROM", 2, 9), ("IDENT", "t", 2, 14),
        ("EOF", "", 2, 15)]
    assert toks[1].quoted and not toks[3].quoted
    assert "select `user`,\n  Price from t"[toks[1].start:toks[1].end] == "`user`"


def test_keywords_are_case_insensitive_and_quoting_makes_an_identifier():
    assert kinds("Match_Recognize `define` DEFINE") == [
        ("KEYWORD", "MATCH_RECOGNIZE"), ("IDENT", "define"), ("KEYWORD", "DEFINE")]
    assert tokenize("define")[0].is_word("DEFINE")
    assert not tokenize("`define`")[0].is_word("DEFINE")


def test_strings_with_doubled_quotes_and_backquotes():
    assert kinds("'it''s' `a``b` ''") == [
        ("STRING", "it's"), ("IDENT", "a`b"), ("STRING", "")]


def test_numbers():
    assert kinds("1 12.5 .5 1e3 2E-2 7.") == [
        ("NUMBER", "1"), ("NUMBER", "12.5"), ("NUMBER", ".5"), ("NUMBER", "1e3"),
        ("NUMBER", "2E-2"), ("NUMBER", "7.")]


def test_operators_longest_first():
    assert [v for _, v in kinds("a<>b <= >= != || {- A -} ^ $ | ?")] == [
        "a", "<>", "b", "<=", ">=", "!=", "||", "{-", "A", "-}", "^", "$", "|", "?"]
    assert [v for _, v in kinds("A.price-1")] == ["A", ".", "price", "-", "1"]


def test_comments_are_skipped_and_lines_still_count():
    toks = tokenize("a -- one\n/* two\nthree */ b")
    assert [(t.value, t.line, t.column) for t in toks[:2]] == [("a", 1, 1), ("b", 3, 10)]


@pytest.mark.parametrize("text, message, line, column, caret", [
    ("SELECT a\nFROM t WHERE a # 1", "unexpected character '#'", 2, 16,
     "    FROM t WHERE a # 1\n                   ^"),
    ("SELECT 'abc", "unterminated string literal", 1, 8, "    SELECT 'abc\n           ^"),
    ("SELECT `abc", "unterminated quoted identifier", 1, 8, "    SELECT `abc\n           ^"),
    ("a /* b", "unterminated comment", 1, 3, "    a /* b\n      ^"),
    ('SELECT "x"', "unexpected character '\"'", 1, 8, '    SELECT "x"\n           ^'),
])
def test_errors_point_at_the_character(text, message, line, column, caret):
    with pytest.raises(SqlError) as info:
        tokenize(text)
    error = info.value
    assert (error.message, error.line, error.column) == (message, line, column)
    assert str(error) == f"line {line}, column {column}: {message}\n{caret}"


def test_caret_keeps_tabs_so_it_lines_up():
    with pytest.raises(SqlError) as info:
        tokenize("\tx # y")
    assert str(info.value).splitlines()[1:] == ["    \tx # y", "    \t  ^"]


# Pieces of Flink SQL text, the odd ones included: words (reserved or not, several that sqlglot
# reads as one), numbers (a type suffix, a leading point), strings and names with quotes,
# backslashes and spaces inside, every operator, comments, characters neither reads.
_PIECES = ["SELECT", "select", "a", "_b1", "GROUP", "BY", "ORDER", "PARTITION", "MATCH_RECOGNIZE", "PATTERN",
           "DEFINE", "TABLE", "DESCRIPTOR", "INTERVAL", "1", "1.5", ".5", "1e3", "2E-4", "1L", "3BD", "'a'",
           "'it''s'", "'C:\\x'", "''", "`a b`", "`a``b`", "=>", "{-", "-}", "<>", "<=", ">=", "!=", "||", "=",
           "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ".", ";", "^", "$", "|", "?", "{", "}", "[", "]",
           ":", "-- note\n", "/* c */", '"x"', "#", "@", "\n", "\t"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(["", " ", "\n"])), max_size=14))
def test_the_kits_tokens_made_from_sqlglots_are_the_lexers(pieces):
    """``from_sqlglot`` (what kit.sql uses: the text read once, by sqlglot) gives what the kit's
    own lexer gives, tokens or error, wherever sqlglot's tokenizer reads the text."""
    text = "".join(p + gap for p, gap in pieces)
    try:
        raw = Flink().tokenize(text)
    except TokenError:
        return                                  # kit.sql then asks the kit's lexer where it fails
    outcomes = []
    for read in (lambda: tokenize(text), lambda: from_sqlglot(text, raw)):
        try:
            outcomes.append(read())
        except SqlError as error:
            outcomes.append(str(error))
    assert outcomes[0] == outcomes[1]
