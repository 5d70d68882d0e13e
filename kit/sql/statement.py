"""One ``kit.sql`` call's query, read once: ``Statement(text)``.

``kit.sql`` makes one ``Statement`` per call and hands it to every reader in place of the
text: the batch rewrite (``query.rewrite``), the finders of MATCH_RECOGNIZE, window TVFs,
group windows, temporal and interval joins, the error mapping, the continuous planner
(``planner.logical``, ``planner.rewrite.Special``, ``planner.program``) and the
``DynamicTable``, whose ``explain()`` reuses it. It holds:

- ``text``: the query as the user wrote it (after ``semantics="standard"``'s quoting);
- ``scanned``: sqlglot's tokens of it in the kit's Flink dialect: the one read of the text;
- ``tokens``: the kit's tokens, made from ``scanned`` (``lexer.from_sqlglot``, not reading the
  text again) for the kit's checks of the text the rewrite to Spark SQL makes (how deep it
  nests, characters Flink refuses: a SqlError at the user's line and column). Only a text
  sqlglot's tokenizer refuses (an unclosed string...) is read by the kit's lexer, to say where;
- ``tree``: sqlglot's parse of ``scanned`` in the kit's Flink dialect (``dialect.Flink``:
  Spark's, plus window TVFs, MATCH_RECOGNIZE, ``FOR SYSTEM_TIME AS OF`` and Flink's type
  names), made once on first use; its table sources and the nodes the dialect adds carry
  their offsets, line and column (``node.meta``). None only when the text is no query sqlglot
  reads (``parse_error`` says why: the readers that tolerate it answer without a tree; the
  planner, which needs one, raises). ``tree`` is shared: a reader that changes its tree
  (``qualify``, the planner's placeholders, taking an ORDER BY off) takes ``mutable()``, a
  copy (copying is not parsing).

What reads what:

- the tree: the finders of window TVFs and group windows (``windows``), temporal joins
  (``temporal``) and interval joins (``interval``: the condition's columns, comparisons,
  BETWEEN and ``+``/``-`` INTERVAL, read as sqlglot's nodes): each call they find carries its
  nodes and the offsets of what it names, and their errors the user's line and column (the
  dialect places what they need: ``dialect.span``). MATCH_RECOGNIZE's spec is built from its
  ``MatchRecognize`` node (``match_recognize.SpecReader``): the clause's parts and expressions
  are sqlglot's nodes, placed; its PATTERN, which sqlglot keeps as text, is read from the
  sqlglot tokens it spans (``scanned``). And the continuous planner:
  ``planner.rewrite.Special`` replaces, in a copy, each window TVF's and MATCH_RECOGNIZE's
  node by a placeholder table and takes ``FOR SYSTEM_TIME AS OF`` off a temporal join's
  table, then writes the tree back as text for the logical planner -- rendering, not parsing:
  no text is spliced and read again. A MATCH_RECOGNIZE's subquery input is planned as
  ``part()`` of the statement (its node of the tree), the WITH query a window TVF reads is a
  node too; ``logical.updating``, ``time_over`` and the sink's field names read it. The batch
  rewrite to Spark SQL (``query.rewrite``) finds in the tree what it replaces -- the tables
  of FROM and JOIN, MATCH_RECOGNIZE's nodes, the finders' constructs, CAST's types (placed
  ``DataType`` nodes) -- and splices the user's text by their offsets, copying it verbatim
  in between (comments and layout kept) and mapping a Spark error's offset back through the
  pieces. The versioned view of a temporal join (``temporal.versioned_view``) is its WITH
  query's node; the error mapping finds a name Spark's error names among the tree's placed
  identifiers and calls.
- sqlglot's tokens (``scanned``, by offset: ``token()``): a MATCH_RECOGNIZE's PATTERN, the
  words of a CAST's type, where the query starts and ends (``extent``), whether it is a query
  (the first word).
- the kit's tokens (``tokens``): only the rewrite's checks of the text (above).

So a call reads its text once (sqlglot's tokenizer) and parses those tokens once;
``tests/test_sql_reads_once.py`` counts the reads per construct. A subquery in a
MATCH_RECOGNIZE's DEFINE or MEASURES (semantics="standard"), run as a query of its own, is
``subquery()``: its node of the tree as ``part()`` of the statement, not read again. The text
entry points (``parse_match_recognize``, ``clauses``, ``physical_plan``...) make a
``Statement`` of their text, once.

Why sqlglot with a Flink dialect rather than the kit's parser grown into a tree. The planner
needs what sqlglot's tree gives: names, stars and subqueries resolved by ``qualify``, types,
a tree to rewrite and render; growing the kit's parser into that would rebuild sqlglot's
optimizer (``planner.logical``'s doc). The dialect is additive: Spark's dialect plus a
tokenizer word (MATCH_RECOGNIZE, BYTES) and a parser method per construct, and sqlglot's
tokens know their offsets, so a node can name the user's line and column. No one sqlglot
dialect read all of Flink SQL (MATCH_RECOGNIZE under snowflake's, lacking WITHIN and SUBSET;
no dialect read ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), ...))``). What it does not replace
yet: the kit's tokens for the checks of the text (nesting depth, characters) and the kit's
lexer for where an unreadable text goes wrong.
"""

from __future__ import annotations

import re

import bisect
import sys
from functools import cached_property

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from .dialect import Flink, position, span, type_spelling
from .errors import SqlError
from .lexer import MAX_NESTING, Token, from_sqlglot, tokenize

__all__ = ["Statement"]


class Statement:
    """The query ``text``, its ``tokens`` and its sqlglot ``tree``, each made once (module doc).

    ``tree``, given, stands for the parse of ``text`` (a tree the planner changed and wrote
    back as ``text``): nothing is parsed then.

    >>> s = Statement("SELECT a FROM t WHERE b > 1")
    >>> [t.value for t in s.tokens], s.tree.sql()
    (['SELECT', 'a', 'FROM', 't', 'WHERE', 'b', '>', '1', ''], 'SELECT a FROM t WHERE b > 1')
    >>> Statement("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL '1' HOUR))").tree.sql(Flink)
    "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL '1' HOUR))"
    >>> Statement("SELECT * FROM").tree is None
    True
    """

    def __init__(self, text: str, tree: exp.Expression | None = None):
        self.text = text
        if tree is not None:
            self.__dict__["parsed"] = (tree, None)

    def part(self, tree: exp.Expression) -> "Statement":
        """The part of this statement whose tree is ``tree`` (a node of ``self.tree``): a
        subquery read as a query of its own. Its ``text`` is the user's, its tokens theirs
        (``scanned``), so a reader's error names the user's line and column; nothing is read
        again. Its ``extent`` is the node's span."""
        part = Statement(self.text, tree)
        part.__dict__["scanned"] = self.scanned
        part.__dict__["extent"] = span(tree)
        return part

    def subquery(self, pos: tuple) -> "Statement":
        """The query whose first token (SELECT or WITH) is at ``pos`` (line, column), as
        ``part()`` of this statement (a MATCH_RECOGNIZE's DEFINE subquery).

        >>> s = Statement("SELECT * FROM t WHERE x IN (SELECT y FROM u)")
        >>> s.subquery((1, 29)).tree.sql(), s.subquery((1, 29)).extent
        ('SELECT y FROM u', (28, 43))
        """
        found = next(node for node in self.tree.walk()
                     if isinstance(node, exp.Query) and position(node) == tuple(pos))
        return self.part(found)

    @cached_property
    def extent(self) -> tuple[int, int]:
        """(start, end) offsets of the query in ``text``: from its first token to its last but
        trailing semicolons (comments and blanks around it are not the query's)."""
        raw = self.read()
        while raw and raw[-1].token_type == TokenType.SEMICOLON:
            raw = raw[:-1]
        return (raw[0].start, raw[-1].end + 1) if raw else (0, 0)

    def token(self, offset: int, step: int = 0):
        """The sqlglot token ``step`` tokens after (before: negative) the first one that starts
        at or after ``offset``.

        >>> Statement("SELECT a FROM t").token(9, -1).text
        'a'
        """
        return self.read()[self._index(offset) + step]

    def _index(self, offset: int) -> int:
        """The index in ``scanned`` of the first token that starts at or after ``offset``."""
        return bisect.bisect_left(self.read(), offset, key=lambda tok: tok.start)

    def cast_type(self, cast: exp.Cast) -> tuple[str, int, int] | None:
        """The type of ``CAST(x AS type)`` as Flink spells it, upper-cased (``DOUBLE``,
        ``DECIMAL(10, 2)``, ``TIMESTAMP(3) WITH LOCAL TIME ZONE``), and its start and end
        offsets; None when the node is no such CAST (``x::t``, a type quoted or followed by more).

        >>> s = Statement("SELECT CAST(a AS varchar (10)) FROM t")
        >>> s.cast_type(s.tree.find(exp.Cast))
        ('VARCHAR(10)', 17, 29)
        """
        to = cast.args.get("to")
        if not ("start" in cast.meta and isinstance(to, exp.DataType) and "start" in to.meta
                and self.token(cast.meta["start"]).text.upper() == "CAST"):
            return None
        first, end = to.meta["start"], to.meta["end"] + 1
        if self.token(end).start != cast.meta["end"]:
            return None
        words = self.read()[self._index(first):self._index(end)]
        if any(tok.token_type in (TokenType.IDENTIFIER, TokenType.STRING) for tok in words):
            return None
        return type_spelling(words), first, end

    @classmethod
    def of(cls, query) -> "Statement":
        """``query`` as a ``Statement``: itself if it is one, else read from its text."""
        return query if isinstance(query, Statement) else cls(query)

    @cached_property
    def scanned(self) -> tuple:
        """(sqlglot's tokens of ``text`` in the Flink dialect, None), or (None, the TokenError):
        the one read of the text."""
        try:
            return _FLINK.tokenize(self.text), None
        except TokenError as error:
            return None, error

    def read(self) -> list:
        """sqlglot's tokens of ``text``; the SqlError saying where they cannot be read."""
        raw, _ = self.scanned
        if raw is None:
            self.tokens                     # the kit's lexer says where (an unclosed string...)
            raise self.parse_error
        return raw

    @cached_property
    def tokens(self) -> list[Token]:
        """The kit's tokens of ``text``, ending with ``EOF``, made from ``scanned``
        (``lexer.from_sqlglot``); a SqlError where they cannot be. Only when sqlglot cannot
        read the text does the kit's lexer read it, to say where (an unclosed string...)."""
        raw, _ = self.scanned
        return tokenize(self.text) if raw is None else from_sqlglot(self.text, raw)

    @cached_property
    def parsed(self) -> tuple:
        """(sqlglot's tree of ``text``, parsed from ``scanned``, None), or (None, a SqlError at
        the user's line and column saying why sqlglot cannot read it)."""
        raw, error = self.scanned
        limit = sys.getrecursionlimit()
        try:
            if raw is None:
                raise error
            sys.setrecursionlimit(max(limit, _PARSER_DEPTH))
            trees = _FLINK.parser().parse(raw, self.text)
            if not trees or trees[0] is None:
                raise ParseError(f"No expression was parsed from '{self.text}'")
            return (exp.Block(expressions=trees) if len(trees) > 1 else trees[0]), None
        except (ParseError, TokenError) as error:
            return None, _syntax_error(error, self.text)
        except SqlError as error:               # the kit's own (a MATCH_RECOGNIZE's clause)
            return None, error
        except RecursionError:                  # sqlglot's parser recurses per nesting level
            return None, SqlError("cannot read the query: it nests too deeply for sqlglot", 1, 1, self.text)
        finally:
            sys.setrecursionlimit(limit)

    @property
    def tree(self) -> exp.Expression | None:
        """sqlglot's tree of ``text``, shared by every reader (read it, do not change it); None
        when sqlglot cannot read the text."""
        return self.parsed[0]

    @property
    def parse_error(self) -> SqlError | None:
        """Why sqlglot cannot read ``text`` (a SqlError at the user's line and column), or None."""
        return self.parsed[1]

    def mutable(self) -> exp.Expression:
        """A copy of ``tree`` for a reader that changes it; raises ``parse_error`` when there is none."""
        tree, error = self.parsed
        if tree is None:
            raise error
        return tree.copy()

    def __repr__(self) -> str:
        return f"Statement({self.text!r})"


_FLINK = Flink()
#: The recursion limit sqlglot's parser needs for a query nested ``MAX_NESTING`` levels deep
#: (a parenthesis takes some 60 of its frames).
_PARSER_DEPTH = 100 * MAX_NESTING


def _syntax_error(error, text: str) -> SqlError:
    """sqlglot's ParseError (or TokenError) of ``text`` as a SqlError at the user's line and
    column (sqlglot's ``col`` is its token's last column; this is its first)."""
    found = error.errors[0] if isinstance(error, ParseError) and error.errors else {}
    line, col = found.get("line") or 1, found.get("col") or 1
    col = max(1, col - len(found.get("highlight") or "") + 1)
    message = found.get("description") or str(error).splitlines()[0]
    missing = re.fullmatch(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", message)
    if missing:                             # sqlglot names its own node: say what the user left out
        message = f"an incomplete {missing[2].upper()}: something it needs is missing after it"
    return SqlError(f"cannot read the query: {message}", line, col, text)
