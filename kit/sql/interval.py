"""Interval joins in Flink SQL: a regular join of two streams bounded in event time.

Flink writes them as a plain join whose condition bounds one stream's event time by the
other's::

    FROM Orders o, Shipments s
    WHERE o.id = s.order_id AND o.order_time BETWEEN s.ship_time - INTERVAL '4' HOUR AND s.ship_time

    FROM Orders o [LEFT | RIGHT | FULL] [OUTER] JOIN Shipments s
      ON o.id = s.order_id AND o.order_time >= s.ship_time - INTERVAL '4' HOUR
                           AND o.order_time < s.ship_time

``find_interval_joins`` finds them: two table refs in a row (``FROM a [AS] x, b [AS] y`` with
the condition in the WHERE of that query level, or ``FROM a [AS] x [kind] JOIN b [AS] y ON``)
that are both ``kit.Stream``s, whose condition (its top-level ``AND`` conjuncts) holds a
lower and an upper bound of the left stream's event time against the right one's: a
``BETWEEN`` (either stream's time in front) or a pair of ``>=``, ``>``, ``<=``, ``<``, each
side a time column plus or minus ``INTERVAL`` literals. Equalities between a column of each
stream are the key (none: one key, as Flink allows). The tightest bound of each kind wins;
Spark applies every conjunct anyway. Anything else -- a table that is not a stream, a single
bound, bounds on other columns, a condition the kit's expression parser does not read, a
CROSS or NATURAL join -- stays a plain Spark SQL join.

``kit.sql`` runs the join (``kit.joins.interval.IntervalJoin``) and the rewrite (``query.py``)
puts it in place: both table refs become views of their rows linked pair by pair
(``IntervalJoin.views``: ``__kit_l``/``__kit_r``, the left and right arrival ``seq`` of the
pair, the other one NULL for a row that joined nothing), and the condition gains
``x.__kit_l = y.__kit_l AND x.__kit_r = y.__kit_r AND (...)``. Spark then applies the user's
condition, the padding and the projection; a row the operator dropped as late (or could no
longer pair, its partner expired) has no link, so it never appears joined even when its
times fit. For an outer join, the pairs are first narrowed to those that also meet the
whole ON condition (one small Spark join), as Flink's operator only counts a pair that meets
it as a match: a row whose every pair fails the rest of the condition is padded once.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import sparksql
from ..match_recognize import spec as S
from .cursor import Cursor
from .errors import SqlError
from .expressions import ExpressionParser
from .lexer import Token
from .rewritten import Rewritten
from .statement import Statement
from .temporal import table_alias, join_condition, join_kind, where_of

__all__ = ["IntervalCall", "find_interval_joins"]

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass
class IntervalCall:
    """One interval join of the query. Indexes are into the token list."""
    how: str
    left: str                          # the tables as written, their first tokens' indexes, aliases
    left_index: int
    left_alias: str
    right: str
    right_index: int
    right_alias: str
    keys: tuple = ()                   # ((left column, right column), ...)
    bounds: object = None              # IntervalBounds
    cond: tuple | None = None          # (first, end) token indexes of the ON / WHERE condition
    cond_word: int | None = None       # index of ON or WHERE
    cond_token: Token | None = None

    def link(self) -> str:
        """What the condition gains in front: the pair link."""
        l, r = sparksql.name(self.left_alias), sparksql.name(self.right_alias)
        return f" {l}.__kit_l = {r}.__kit_l AND {l}.__kit_r = {r}.__kit_r AND ("


def find_interval_joins(statement: Statement, stream) -> dict:
    """{index of ON / WHERE: IntervalCall} for each interval join; ``stream(name)`` gives
    the ``kit.Stream`` a table name stands for, or None."""
    query, tokens = statement.text, statement.tokens
    found = {}
    for i, tok in enumerate(tokens):
        if tok.is_word("FROM"):
            call = _pair(query, tokens, i + 1, stream)
            if call is not None:
                found[call.cond_word] = call
    return found


def _table(query, tokens, i):
    """``name [[AS] alias]`` at ``i``: (name token, alias, index after), or None."""
    tok = tokens[i]
    if tok.kind != "IDENT" or (tokens[i + 1].kind == "OP" and tokens[i + 1].value in (".", "(")):
        return None
    cur = Cursor(query, tokens, i + 1)
    if cur.at("FOR", "MATCH_RECOGNIZE", "TABLESAMPLE"):
        return None
    alias = table_alias(cur, tok.value)
    return tok, alias, cur.i


def _pair(query, tokens, i, stream) -> IntervalCall | None:
    first = _table(query, tokens, i)
    if first is None:
        return None
    ltok, lalias, j = first
    if tokens[j].kind == "OP" and tokens[j].value == ",":
        how, k = "inner", j + 1
    else:
        k = j
        while tokens[k].is_word("LEFT", "RIGHT", "FULL", "INNER", "OUTER"):
            k += 1
        if not tokens[k].is_word("JOIN"):
            return None
        how, _ = join_kind(tokens, k)
        k += 1
    second = _table(query, tokens, k)
    if second is None:
        return None
    rtok, ralias, end = second
    left, right = stream(ltok.value), stream(rtok.value)
    if left is None or right is None:
        return None
    call = IntervalCall(how, ltok.value, i, lalias, rtok.value, k, ralias)
    if tokens[j].kind == "OP":
        word = where_of(tokens, end)
    else:
        word = end if tokens[end].is_word("ON") else None
    if word is None:
        return None
    join_condition(tokens, call, word)
    return _analyse(query, tokens, call, left, right)


def _analyse(query, tokens, call: IntervalCall, left, right) -> IntervalCall | None:
    """The keys and bounds of ``call``'s condition, or None when it is no interval join."""
    from ..errors import KitError
    from ..joins.interval import IntervalBounds
    from ..time import Duration

    first, end = call.cond
    parser = ExpressionParser(query, tokens, first)
    try:
        expr = parser.expression()
    except SqlError:
        return None
    if parser.i != end:
        return None
    lcols = {c.lower(): c for c in left.source.columns}
    rcols = {c.lower(): c for c in right.source.columns}
    la, ra = call.left_alias.lower(), call.right_alias.lower()

    def side(col):
        """('L' | 'R', column) of a column reference, or None."""
        if not isinstance(col, S.Column):
            return None
        name = col.name.lower()
        if col.var is not None:
            q = col.var.lower()
            if q == la and name in lcols and q != ra:
                return "L", lcols[name]
            if q == ra and name in rcols and q != la:
                return "R", rcols[name]
            return None
        if name in lcols and name not in rcols:
            return "L", lcols[name]
        if name in rcols and name not in lcols:
            return "R", rcols[name]
        return None

    def linear(node):
        """A time attribute plus or minus INTERVAL literals: (side, ms), or None."""
        if isinstance(node, S.Binary) and node.op in ("+", "-"):
            if isinstance(node.right, S.Literal) and node.right.type == "INTERVAL":
                base = linear(node.left)
                ms = node.right.value if node.op == "+" else -node.right.value
                return base and (base[0], base[1] + ms)
            if node.op == "+" and isinstance(node.left, S.Literal) and node.left.type == "INTERVAL":
                base = linear(node.right)
                return base and (base[0], base[1] + node.left.value)
            return None
        ref = side(node)
        if ref is None:
            return None
        s, column = ref
        time = left.time if s == "L" else right.time
        return (s, 0) if column.lower() == time.lower() else None

    lower, upper = [], []                 # (value, inclusive)

    def bound(a, op, b):
        """``a op b`` with a, b linear: a bound of left time - right time, if it is one."""
        la_, lb_ = linear(a), linear(b)
        if not la_ or not lb_ or {la_[0], lb_[0]} != {"L", "R"}:
            return
        if la_[0] == "R":
            la_, lb_, op = lb_, la_, _FLIP[op]
        c = lb_[1] - la_[1]               # L op R + c
        (lower if op in (">", ">=") else upper).append((c, op in (">=", "<=")))

    conjuncts, todo = [], [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, S.Binary) and node.op == "AND":
            todo += [node.right, node.left]
        else:
            conjuncts.append(node)
    keys = []
    for node in conjuncts:
        if isinstance(node, S.Binary) and node.op == "=":
            a, b = side(node.left), side(node.right)
            if a and b and {a[0], b[0]} == {"L", "R"}:
                l, r = (a[1], b[1]) if a[0] == "L" else (b[1], a[1])
                if l.lower() != left.time.lower() and r.lower() != right.time.lower():
                    keys.append((l, r))
        elif isinstance(node, S.Binary) and node.op in _FLIP:
            bound(node.left, node.op, node.right)
        elif isinstance(node, S.Between) and not node.negated:
            bound(node.arg, ">=", node.low)
            bound(node.arg, "<=", node.high)
    if not lower or not upper:
        return None
    low = max(lower, key=lambda b: b[0] + (0 if b[1] else 1))
    high = min(upper, key=lambda b: b[0] - (0 if b[1] else 1))
    try:
        call.bounds = IntervalBounds(Duration(low[0]), Duration(high[0]), low[1], high[1])
    except KitError as error:
        raise SqlError(f"the interval join of {call.left} and {call.right} has bounds that hold no time: "
                       f"{error}", call.cond_token.line, call.cond_token.column, query) from None
    call.keys = tuple(dict.fromkeys(keys))
    return call


def true_pairs(call: IntervalCall, statement: Statement, left_view: str, right_view: str):
    """The phase-one query of an outer join: the candidate pairs that meet the whole ON
    condition, as a ``query.Rewritten`` (errors map back to the condition)."""
    query, tokens = statement.text, statement.tokens
    first, end = call.cond
    l, r = sparksql.name(call.left_alias), sparksql.name(call.right_alias)
    out = Rewritten(query)
    out.replace(f"SELECT {l}.__kit_l, {l}.__kit_r FROM {left_view} AS {l} JOIN {right_view} AS {r} ON"
                + call.link(), tokens[first].start)
    out.copy(tokens[first].start, tokens[end - 1].end)
    out.replace(")", tokens[end - 1].end)
    return out
