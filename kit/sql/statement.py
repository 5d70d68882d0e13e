"""One ``kit.sql`` call's query, read once: ``Statement(text)``.

``kit.sql`` makes one ``Statement`` per call and hands it to every reader in place of the
text: the batch rewrite (``query.rewrite``), the finders of MATCH_RECOGNIZE, window TVFs,
group windows, temporal and interval joins, the error mapping, the continuous planner
(``planner.logical``, ``planner.rewrite.Special``, ``planner.program``) and the
``DynamicTable``, whose ``explain()`` reuses it. It holds:

- ``text``: the query as the user wrote it (after ``semantics="standard"``'s quoting);
- ``tokens``: the kit's lexer over it, made once on first use; each token knows its line and
  column, so errors point at the user's text;
- ``tree``: sqlglot's parse of the same text (Spark's dialect), made once on first use;
  None when sqlglot cannot read it (``parse_error`` says why: the readers that tolerate it
  answer without a tree; the planner, which needs one, raises). ``tree`` is shared: a reader
  that changes its tree (``qualify``, taking an ORDER BY off) takes ``mutable()``, a copy
  (copying is not parsing).

Two readers remain, and why. The kit's lexer finds the constructs sqlglot cannot read; sqlglot
gives the continuous planner its resolved tree. When the query holds such a construct, the
planner's ``Special`` splices a placeholder in its place (``TABLE(TUMBLE(...))`` ->
``__kit_special_0``) and sqlglot parses that spliced text, once, into its own ``Statement``
-- a second parse, of another text, only when there is something to splice. Other texts read
on their own: a subquery in a MATCH_RECOGNIZE's DEFINE or MEASURES (standard SQL) and, in
the planner, a MATCH_RECOGNIZE's subquery input; and, on the way to an error only, the WITH
query a window TVF reads (``planner.rewrite``: does it update?). The text entry points
(``parse_match_recognize``, ``clauses``, ``physical_plan``...) make a ``Statement`` of
their text, once.

One tree for all of Flink SQL would end both. Two ways:

- sqlglot with a Flink dialect of the kit's own. sqlglot 30 parses MATCH_RECOGNIZE (under
  ``read="snowflake"``) and ``FOR SYSTEM_TIME AS OF`` (under ``"tsql"``), but in no one
  dialect, and no dialect parses ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), ...))``; a dialect
  would combine the two and add the window TVFs, group windows and Flink's types. The
  MATCH_RECOGNIZE spec (``kit.match_recognize.spec``, with its DEFINE expressions and their
  positions) would then be built from sqlglot's nodes, which keep no line and column per
  token: errors would need the token offsets carried through.
- the kit's parser grown into a tree: it reads MATCH_RECOGNIZE, window TVFs and temporal
  joins with exact positions already, but resolving names, stars and subqueries for the
  planner would rebuild what sqlglot's ``qualify`` does (``planner.logical``'s doc).

Chosen: sqlglot with a Flink dialect, as the next step -- its tree and ``qualify`` are what
the planner needs, and the dialect is additive (tokens for the new words, a parser method
per construct). Until it exists, one ``Statement`` holds both reads, each made once.
"""

from __future__ import annotations

from functools import cached_property

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from .lexer import Token, tokenize

__all__ = ["Statement"]


class Statement:
    """The query ``text``, its ``tokens`` and its sqlglot ``tree``, each made once (module doc).

    ``tree``, given, stands for the parse of ``text`` (a tree the planner changed and wrote
    back as ``text``): nothing is parsed then.

    >>> s = Statement("SELECT a FROM t WHERE b > 1")
    >>> [t.value for t in s.tokens], s.tree.sql()
    (['SELECT', 'a', 'FROM', 't', 'WHERE', 'b', '>', '1', ''], 'SELECT a FROM t WHERE b > 1')
    >>> Statement("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL '1' HOUR))").tree is None
    True
    """

    def __init__(self, text: str, tree: exp.Expression | None = None):
        self.text = text
        if tree is not None:
            self.__dict__["parsed"] = (tree, None)

    @classmethod
    def of(cls, query) -> "Statement":
        """``query`` as a ``Statement``: itself if it is one, else read from its text."""
        return query if isinstance(query, Statement) else cls(query)

    @cached_property
    def tokens(self) -> list[Token]:
        """The kit's tokens of ``text``, ending with ``EOF``; a SqlError where it cannot read it."""
        return tokenize(self.text)

    @cached_property
    def parsed(self) -> tuple:
        """(sqlglot's tree of ``text``, None), or (None, the ParseError)."""
        try:
            return sqlglot.parse_one(self.text, read="spark"), None
        except ParseError as error:
            return None, error

    @property
    def tree(self) -> exp.Expression | None:
        """sqlglot's tree of ``text``, shared by every reader (read it, do not change it); None
        when sqlglot cannot read the text."""
        return self.parsed[0]

    @property
    def parse_error(self) -> ParseError | None:
        """Why sqlglot cannot read ``text``, or None."""
        return self.parsed[1]

    def mutable(self) -> exp.Expression:
        """A copy of ``tree`` for a reader that changes it; the ParseError when there is none."""
        tree, error = self.parsed
        if tree is None:
            raise error
        return tree.copy()

    def __repr__(self) -> str:
        return f"Statement({self.text!r})"
