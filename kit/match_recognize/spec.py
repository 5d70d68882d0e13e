"""MATCH_RECOGNIZE as plain objects: the clause, its pattern and its expressions.

The SQL front end (``kit.sql``) parses text into these objects; the matcher runs them.
They print, compare and hash; ``pos`` (line, column of the source text, 1-based) is kept
for error messages and ignored by comparisons.

    PATTERN (A B+? C) WITHIN INTERVAL '1' HOUR
    -> pattern = Concat((Label("A"), Quantified(Label("B"), 1, None, greedy=False), Label("C")))
       within_ms = 3_600_000
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

__all__ = [
    # pattern
    "Label", "Concat", "Alternation", "Quantified", "Permute", "Exclusion", "Anchor", "Empty",
    "Pattern",
    # expressions
    "Column", "Literal", "Nav", "Aggregate", "Call", "Binary", "Unary", "IsNull", "Between",
    "InList", "Case", "Cast", "Classifier", "MatchNumber", "MatchRowtime", "MatchProctime",
    "Semantics", "Subquery", "Expr",
    # the clause
    "OrderItem", "Measure", "AfterMatch", "MatchRecognize",
    "ONE_ROW", "ALL_ROWS_SHOW", "ALL_ROWS_OMIT", "ALL_ROWS_WITH_UNMATCHED",
    # words
    "RESERVED", "STANDARD_AGGREGATES", "INTERVAL_UNITS",
]

Pos = Optional[tuple]  # (line, column), 1-based

#: Words that never name a column, variable or alias (they end clauses or are operators).
RESERVED = frozenset((
    "SELECT", "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "BY", "PARTITION", "MATCH_RECOGNIZE",
    "MEASURES", "PATTERN", "DEFINE", "SUBSET", "WITHIN", "AFTER", "ONE", "ALL", "AS", "AND", "OR",
    "NOT", "IS", "NULL", "TRUE", "FALSE", "BETWEEN", "IN", "LIKE", "CASE", "WHEN", "THEN", "ELSE",
    "END", "CAST", "INTERVAL", "DISTINCT", "JOIN", "ON", "UNION", "EXCEPT", "INTERSECT", "LIMIT",
    "ASC", "DESC",
))

#: Aggregates of the SQL standard and Trino that MATCH_RECOGNIZE takes under semantics="standard"
#: (Flink's rejects them): two arguments for MAX_BY and MIN_BY.
STANDARD_AGGREGATES = frozenset({"MAX_BY", "MIN_BY", "ARBITRARY", "ANY_VALUE", "ARRAY_AGG"})

#: Milliseconds per day-time interval unit, coarsest first.
INTERVAL_UNITS = {"DAY": 86_400_000, "HOUR": 3_600_000, "MINUTE": 60_000, "SECOND": 1_000,
                  "MILLISECOND": 1}


def _pos():
    return field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------- pattern


@dataclass(frozen=True)
class Label:
    """A pattern variable: ``A``."""
    name: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Concat:
    """``A B C``: rows in this order, nothing between them."""
    items: tuple
    pos: Pos = _pos()


@dataclass(frozen=True)
class Alternation:
    """``A | B``: the first alternative is preferred."""
    items: tuple
    pos: Pos = _pos()


@dataclass(frozen=True)
class Quantified:
    """``node{min,max}``; ``max`` None = unbounded; ``greedy`` False for ``*? +? ?? {..}?``.

    ``*`` = (0, None), ``+`` = (1, None), ``?`` = (0, 1), ``{n}`` = (n, n), ``{n,}`` = (n, None),
    ``{,m}`` = (0, m).
    """
    node: Any
    min: int
    max: Optional[int]
    greedy: bool = True
    pos: Pos = _pos()


@dataclass(frozen=True)
class Permute:
    """``PERMUTE(A, B, C)``: every order, in lexicographic preference of the listed order."""
    items: tuple
    pos: Pos = _pos()


@dataclass(frozen=True)
class Exclusion:
    """``{- A -}``: matched but left out of ALL ROWS PER MATCH output."""
    node: Any
    pos: Pos = _pos()


@dataclass(frozen=True)
class Anchor:
    """``^`` (start of partition) or ``$`` (end of partition)."""
    kind: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Empty:
    """``()``: matches no rows."""
    pos: Pos = _pos()


Pattern = Union[Label, Concat, Alternation, Quantified, Permute, Exclusion, Anchor, Empty]


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Column:
    """``A.price`` (``var`` = "A") or ``price`` (``var`` None: the universal variable ``*``)."""
    name: str
    var: Optional[str] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Literal:
    """A constant. ``type`` is a Flink SQL type name: INT, BIGINT, DECIMAL, DOUBLE, STRING,
    BOOLEAN, NULL, DATE, TIMESTAMP, INTERVAL (``value`` in milliseconds)."""
    value: Any
    type: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Nav:
    """``FIRST/LAST(expr, n)`` (logical offsets over the rows of one variable) and
    ``PREV/NEXT(expr, n)`` (physical offsets over the partition); ``offset`` as written,
    default 0 for FIRST/LAST and 1 for PREV/NEXT."""
    kind: str
    arg: Any
    offset: int
    pos: Pos = _pos()


@dataclass(frozen=True)
class Aggregate:
    """``COUNT(*)`` (``arg`` None), ``SUM(A.price)``, ``AVG(price * tax)``, or a user aggregate
    registered by name; ``distinct`` for ``COUNT(DISTINCT ...)`` (rejected by Flink);
    ``arg_type``: the Spark type of a SUM's or AVG's argument, told at planning
    (``types.coerce``) where Flink computes in it (None: Python's arithmetic)."""
    func: str
    arg: Any
    distinct: bool = False
    pos: Pos = _pos()
    arg_type: Any = None


@dataclass(frozen=True)
class Call:
    """A scalar function call: ``ABS(x)``, ``COALESCE(a, b)``, ``TIMESTAMPADD(...)``..."""
    func: str
    args: tuple
    pos: Pos = _pos()


@dataclass(frozen=True)
class Binary:
    """``left op right``; ``op`` is one of + - * / % || = <> < <= > >= AND OR."""
    op: str
    left: Any
    right: Any
    pos: Pos = _pos()


@dataclass(frozen=True)
class Unary:
    """``NOT x`` or ``-x``."""
    op: str
    arg: Any
    pos: Pos = _pos()


@dataclass(frozen=True)
class IsNull:
    """``x IS [NOT] NULL``."""
    arg: Any
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Between:
    """``x [NOT] BETWEEN low AND high``."""
    arg: Any
    low: Any
    high: Any
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class InList:
    """``x [NOT] IN (a, b, ...)``."""
    arg: Any
    items: tuple
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Case:
    """``CASE [operand] WHEN w THEN t ... [ELSE e] END``; ``whens`` is ((w, t), ...)."""
    operand: Any
    whens: tuple
    else_: Any = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Cast:
    """``CAST(x AS type)``, ``type`` a Flink SQL type name such as DOUBLE or DECIMAL(10, 2)."""
    arg: Any
    type: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Classifier:
    """``CLASSIFIER()``: the variable the current row is mapped to; ``CLASSIFIER(v)`` (``var``
    a variable or a SUBSET): the variable of the last row mapped to ``v`` so far."""
    var: Optional[str] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class MatchNumber:
    """``MATCH_NUMBER()``: 1 for the first match of a partition, then 2, 3..."""
    pos: Pos = _pos()


@dataclass(frozen=True)
class MatchRowtime:
    """``MATCH_ROWTIME([rowtime_field])``: the time of the match's last row."""
    arg: Any = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class MatchProctime:
    """``MATCH_PROCTIME()``: the processing time at which the match was emitted."""
    pos: Pos = _pos()


@dataclass(frozen=True)
class Subquery:
    """An uncorrelated subquery ``(SELECT ...)`` in DEFINE or MEASURES (semantics="standard"):
    a scalar, the list of ``x IN (SELECT ...)``, or the argument of ``EXISTS``. ``text`` is its
    SQL; ``kit.sql`` runs it once, before matching, and puts its answer in its place."""
    text: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Semantics:
    """``RUNNING x`` or ``FINAL x`` (MEASURES under ALL ROWS PER MATCH)."""
    kind: str
    arg: Any
    pos: Pos = _pos()


Expr = Union[Column, Literal, Nav, Aggregate, Call, Binary, Unary, IsNull, Between, InList, Case,
             Cast, Classifier, MatchNumber, MatchRowtime, MatchProctime, Semantics, Subquery]


# ---------------------------------------------------------------- the clause

ONE_ROW = "ONE ROW PER MATCH"
ALL_ROWS_SHOW = "ALL ROWS PER MATCH SHOW EMPTY MATCHES"
ALL_ROWS_OMIT = "ALL ROWS PER MATCH OMIT EMPTY MATCHES"
ALL_ROWS_WITH_UNMATCHED = "ALL ROWS PER MATCH WITH UNMATCHED ROWS"


@dataclass(frozen=True)
class OrderItem:
    """``ORDER BY column [ASC|DESC]``."""
    column: str
    ascending: bool = True
    pos: Pos = _pos()


@dataclass(frozen=True)
class Measure:
    """``expr AS alias`` in MEASURES."""
    expr: Any
    alias: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class AfterMatch:
    """``AFTER MATCH SKIP ...``: ``kind`` is PAST LAST ROW, TO NEXT ROW, TO FIRST, TO LAST
    (``var`` names the variable; ``SKIP TO v`` is TO LAST)."""
    kind: str
    var: Optional[str] = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class MatchRecognize:
    """One MATCH_RECOGNIZE clause. ``after_match`` None = no AFTER MATCH clause written (the
    default depends on the semantics); ``define`` maps variables to conditions (missing = TRUE);
    ``subsets`` maps a SUBSET name to its variables."""
    pattern: Any
    partition_by: tuple = ()
    order_by: tuple = ()
    measures: tuple = ()
    rows_per_match: str = ONE_ROW
    after_match: Optional[AfterMatch] = None
    within_ms: Optional[int] = None
    subsets: tuple = ()          # ((name, (var, ...)), ...)
    define: tuple = ()           # ((var, expr), ...)
    pos: Pos = _pos()

    @property
    def definitions(self) -> dict:
        return dict(self.define)

    @property
    def subset_map(self) -> dict:
        return {name: tuple(vars_) for name, vars_ in self.subsets}
