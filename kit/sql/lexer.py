"""Flink SQL text to tokens, each with its exact line and column.

Token kinds: ``IDENT`` (plain or back-quoted; ``quoted`` tells which), ``KEYWORD`` (a
reserved word, ``value`` upper-cased), ``STRING`` (``value`` unescaped: ``'it''s'`` is
``it's``), ``NUMBER`` (``value`` as written), ``OP`` (operators and punctuation) and
``EOF``. Comments (``-- ...`` and ``/* ... */``) and white space are skipped.

A query may nest ``MAX_NESTING`` levels deep: each open parenthesis or ``CASE``, and each
``NOT`` or sign in a row (``NOT NOT x``, ``- -1``), is a level. Deeper, the recursive parsers (the
kit's, and Spark's, whose stack overflows a few hundred parentheses down) would fail
without saying where; ``tokenize`` raises a SqlError at the first token too deep.

>>> [t.value for t in tokenize("SELECT `user`, 1e3 FROM t -- hi")]
['SELECT', 'user', ',', '1e3', 'FROM', 't', '']
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from sqlglot.tokens import TokenType

from ..match_recognize.spec import RESERVED
from .errors import SqlError, position

__all__ = ["MAX_NESTING", "RESERVED", "Token", "tokenize", "from_sqlglot", "delimited_to_backquoted"]

MAX_NESTING = 50


# two-character operators first, so "<=" wins over "<" and "{-" over "{"
_OPS = ("{-", "-}", "<>", "<=", ">=", "!=", "||", "=", "<", ">", "+", "-", "*", "/", "%", "(",
        ")", ",", ".", ";", "^", "$", "|", "?", "{", "}", "[", "]", ":")


@dataclass(frozen=True)
class Token:
    """One token: ``kind``, ``value``, 1-based ``line``/``column``, and ``start``/``end``
    offsets into the text (``text[start:end]`` is the token as written)."""
    kind: str
    value: str
    line: int
    column: int
    start: int
    end: int
    quoted: bool = False

    @property
    def pos(self) -> tuple:
        return (self.line, self.column)

    def is_word(self, *words: str) -> bool:
        """True for an unquoted word (keyword or identifier) spelled as one of ``words``."""
        return self.kind in ("KEYWORD", "IDENT") and not self.quoted and self.value.upper() in words


def tokenize(text: str) -> list[Token]:
    """All tokens of ``text``, ending with one ``EOF`` token; unknown characters raise SqlError."""
    tokens = []
    i, n = 0, len(text)
    line_starts = [0] + [k + 1 for k, c in enumerate(text) if c == "\n"]

    def fail(message, at):
        line, column = position(text, at)
        raise SqlError(message, line, column, text)

    def add(kind, value, start, end, quoted=False):
        line = bisect.bisect_right(line_starts, start)
        tokens.append(Token(kind, value, line, start - line_starts[line - 1] + 1, start, end,
                            quoted))

    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                fail("unterminated comment", i)
            i = j + 2
        elif c == "'":
            j, value = _quoted(text, i, "'")
            if j < 0:
                fail("unterminated string literal", i)
            add("STRING", value, i, j)
            i = j
        elif c == "`":
            j, value = _quoted(text, i, "`")
            if j < 0:
                fail("unterminated quoted identifier", i)
            if not value:
                fail("empty quoted identifier", i)
            add("IDENT", value, i, j, quoted=True)
            i = j
        else:
            i = _plain(text, i, add, fail)
    add("EOF", "", n, n)
    _check_nesting(text, tokens)
    return tokens


def _plain(text: str, i: int, add, fail) -> int:
    """The number, word or operator at ``i`` (no string, name or comment starts there) handed
    to ``add``; its end."""
    c, n = text[i], len(text)
    if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
        j = _number_end(text, i)
        add("NUMBER", text[i:j], i, j)
        return j
    if c.isalpha() or c == "_":
        j = i + 1
        while j < n and (text[j].isalnum() or text[j] == "_"):
            j += 1
        word = text[i:j]
        if word.upper() in RESERVED:
            add("KEYWORD", word.upper(), i, j)
        else:
            add("IDENT", word, i, j)
        return j
    op = next((o for o in _OPS if text.startswith(o, i)), None)
    if op is None:
        fail(f"unexpected character {c!r}", i)
    add("OP", op, i, i + len(op))
    return i + len(op)


def from_sqlglot(text: str, raw: list) -> list[Token]:
    """The kit's tokens of ``text`` made from sqlglot's tokens of it (``raw``, the ``Flink``
    dialect's), not by reading the text again: what ``tokenize`` gives (the reference; a
    property test compares them). Where sqlglot's tokens differ they are cut or joined: several
    words as one (``GROUP BY``), operators (``=>``), a number's type suffix (``1L``, read by
    sqlglot as ``1::BIGINT``: tokens over the same text) and a number that starts with its
    point (``.5``).

    >>> from kit.sql.dialect import Flink
    >>> q = "SELECT `a b`, 'it''s', .5 FROM t GROUP BY x"
    >>> from_sqlglot(q, Flink().tokenize(q)) == tokenize(q)
    True
    """
    line_starts = [0] + [k + 1 for k, c in enumerate(text) if c == "\n"]
    tokens = []

    def add(kind, value, start, end, quoted=False):
        line = bisect.bisect_right(line_starts, start)
        tokens.append(Token(kind, value, line, start - line_starts[line - 1] + 1, start, end, quoted))

    def fail(message, at):
        raise SqlError(message, *position(text, at), text)

    covered = 0                                   # the text up to here has its tokens
    for t in raw:
        start, end = max(t.start, covered), t.end + 1
        if start >= end:
            continue
        if text[start] == '"':
            fail("unexpected character '\"'", start)
        whole = start == t.start                  # else the rest of one a number took the start of
        if whole and t.token_type == TokenType.STRING:
            add("STRING", t.text, start, end)
        elif whole and t.token_type == TokenType.IDENTIFIER:
            if not t.text:
                fail("empty quoted identifier", start)
            add("IDENT", t.text, start, end, quoted=True)
        else:       # words (several: GROUP BY), numbers (1L: sqlglot adds ::BIGINT), operators
            a = start
            while a < end:
                if text[a].isspace():
                    a += 1
                    continue
                a = _plain(text, a, add, fail)
            end = max(end, a)      # .5: sqlglot reads "." then "5" (or "5x")
        covered = end
    add("EOF", "", len(text), len(text))
    _check_nesting(text, tokens)
    return tokens


def _check_nesting(text: str, tokens: list[Token]):
    """Raise a SqlError at the first token nested deeper than ``MAX_NESTING`` (module doc)."""
    depth = run = 0
    for tok in tokens:
        if (tok.kind == "OP" and tok.value in ("(", ")")) or tok.is_word("CASE", "END"):
            depth += 1 if tok.value in ("(", "CASE") else -1
        prefix = tok.is_word("NOT") or (tok.kind == "OP" and tok.value in ("-", "+"))
        run = run + 1 if prefix else 0
        if depth + run > MAX_NESTING:
            raise SqlError(f"the query nests more than {MAX_NESTING} levels deep here (parentheses, CASE, and NOT "
                           "and signs in a row each add one): simplify the expression", tok.line, tok.column, text)


def delimited_to_backquoted(text: str) -> str:
    """``text`` with each delimited identifier of standard SQL (``"Name"``: double-quoted,
    case-sensitive, ``""`` for a quote inside) written back-quoted, as Flink and Spark write
    them; string literals, comments and back-quoted names are left alone, and an unclosed
    ``"`` too (``tokenize`` then says where it is). Offsets stay the same unless a name holds
    a quote or a back quote.

    >>> print(delimited_to_backquoted('''SELECT "a""b", 'say "hi"' FROM t'''))
    SELECT `a"b`, 'say "hi"' FROM t
    """
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "'`":
            j = _quoted(text, i, c)[0]
            j = n if j < 0 else j
        elif text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c == '"' and (end := _quoted(text, i, '"')[0]) > 0:
            out.append("`" + _quoted(text, i, '"')[1].replace("`", "``") + "`")
            i = end
            continue
        else:
            j = i + 1
        out.append(text[i:j])
        i = j
    return "".join(out)


def _quoted(text: str, i: int, quote: str) -> tuple[int, str]:
    """End offset and unescaped body of the quoted run at ``i`` (a doubled quote is one
    quote); end -1 when it is not closed."""
    parts, j = [], i + 1
    while True:
        k = text.find(quote, j)
        if k < 0:
            return -1, ""
        parts.append(text[j:k])
        if text.startswith(quote * 2, k):
            parts.append(quote)
            j = k + 2
        else:
            return k + 1, "".join(parts)


def _number_end(text: str, i: int) -> int:
    """End of the number at ``i``: digits, an optional fraction, an optional exponent."""
    n = len(text)
    j = i
    while j < n and text[j].isdigit():
        j += 1
    if j < n and text[j] == ".":
        j += 1
        while j < n and text[j].isdigit():
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k].isdigit():
            j = k
            while j < n and text[j].isdigit():
                j += 1
    return j
