"""Interval joins in Flink SQL: a regular join of two streams bounded in event time.

Flink writes them as a plain join whose condition bounds one stream's event time by the
other's::

    FROM Orders o, Shipments s
    WHERE o.id = s.order_id AND o.order_time BETWEEN s.ship_time - INTERVAL '4' HOUR AND s.ship_time

    FROM Orders o [LEFT | RIGHT | FULL] [OUTER] JOIN Shipments s
      ON o.id = s.order_id AND o.order_time >= s.ship_time - INTERVAL '4' HOUR
                           AND o.order_time < s.ship_time

``find_interval_joins`` finds them in the query's tree (``Statement.tree``): two table refs
in a row (``FROM a [AS] x, b [AS] y`` with the condition in the WHERE of that query level, or
``FROM a [AS] x [kind] JOIN b [AS] y ON``) that are both ``kit.Stream``s, whose condition (its
top-level ``AND`` conjuncts, sqlglot's nodes) holds a lower and an upper bound of the left
stream's event time against the right one's: a ``BETWEEN`` (either stream's time in front)
or a pair of ``>=``, ``>``, ``<=``, ``<``, each side a time column plus or minus ``INTERVAL``
literals. Equalities between a column of each stream are the key (none: one key, as Flink
allows). The tightest bound of each kind wins; Spark applies every conjunct anyway. Anything
else -- a table that is not a stream, a single bound, bounds on other columns, an interval
literal the kit does not read, a CROSS or NATURAL join -- stays a plain Spark SQL join.

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

from sqlglot import exp

from .. import sparksql
from .errors import SqlError, error_at
from .intervals import interval_ms
from .rewritten import Rewritten
from .statement import Statement
from .temporal import conjuncts, join_condition, join_kind

__all__ = ["IntervalCall", "find_interval_joins"]

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_OPS = {exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


@dataclass
class IntervalCall:
    """One interval join of the query; ``*_at`` and ``cond`` are offsets into the text."""
    how: str
    left: str                          # the tables as written, where they start, their aliases
    left_at: int
    left_alias: str
    right: str
    right_at: int
    right_alias: str
    keys: tuple = ()                   # ((left column, right column), ...)
    bounds: object = None              # IntervalBounds
    cond: tuple | None = None          # (start, end) of the ON / WHERE condition
    cond_at: int | None = None         # where its ON or WHERE is

    def link(self) -> str:
        """What the condition gains in front: the pair link."""
        l, r = sparksql.name(self.left_alias), sparksql.name(self.right_alias)
        return f" {l}.__kit_l = {r}.__kit_l AND {l}.__kit_r = {r}.__kit_r AND ("


def find_interval_joins(statement: Statement, stream) -> dict:
    """{offset of ON / WHERE: IntervalCall} for each interval join of the query's tree;
    ``stream(name)`` gives the ``kit.Stream`` a table name stands for, or None."""
    tree, found = statement.tree, {}
    for select in tree.find_all(exp.Select) if tree is not None else ():
        call = _pair(statement.text, select, stream)
        if call is not None:
            found[call.cond_at] = call
    return found


def _table(node) -> bool:
    """Whether ``node`` is a table ref by a plain name (``name [[AS] alias]``)."""
    return isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier) and not any(
        node.args.get(key) for key in ("db", "catalog", "version", "sample", "joins", "laterals", "pivots"))


def _pair(text: str, select: exp.Select, stream) -> IntervalCall | None:
    """The first two table refs of ``select``'s FROM as an interval join, or None."""
    joins = select.args.get("joins") or []
    first = select.args["from_"].this if select.args.get("from_") else None
    if not joins or not _table(first) or not _table(joins[0].this):
        return None
    join, second = joins[0], joins[0].this
    comma = text[join.meta["start"]] == ","
    if not comma and (join.method or join.kind not in (None, "", "INNER", "OUTER") or "on" not in join.meta):
        return None
    left, right = stream(first.name), stream(second.name)
    if left is None or right is None or left.time is None or right.time is None:   # no time attribute: a regular join
        return None
    call = IntervalCall(join_kind(text, join), first.name, first.meta["start"], first.alias_or_name,
                        second.name, second.meta["start"], second.alias_or_name)
    join_condition(call, select if comma else join)
    if call.cond is None:
        return None
    return _analyse(text, call, (select.args["where"].this if comma else join.args["on"]), left, right)


def _analyse(text: str, call: IntervalCall, condition, left, right) -> IntervalCall | None:
    """The keys and bounds of ``call``'s condition, or None when it is no interval join."""
    from ..errors import KitError
    from ..joins.interval import IntervalBounds
    from ..time import Duration

    lcols = {c.lower(): c for c in left.source.columns}
    rcols = {c.lower(): c for c in right.source.columns}
    la, ra = call.left_alias.lower(), call.right_alias.lower()

    def side(col):
        """('L' | 'R', column) of a column reference, or None."""
        col = col.unnest()
        if not (isinstance(col, exp.Column) and len(col.parts) <= 2):
            return None
        name = col.name.lower()
        if col.table:
            q = col.table.lower()
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
        node = node.unnest()
        if isinstance(node, (exp.Add, exp.Sub)):
            if isinstance(node.expression, exp.Interval):
                base = linear(node.this)
                ms = interval_ms(node.expression, text)
                return base and (base[0], base[1] + (ms if isinstance(node, exp.Add) else -ms))
            if isinstance(node, exp.Add) and isinstance(node.this, exp.Interval):
                base = linear(node.expression)
                return base and (base[0], base[1] + interval_ms(node.this, text))
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

    keys = []
    try:
        for node in _flat(condition):
            if isinstance(node, exp.EQ):
                a, b = side(node.this), side(node.expression)
                if a and b and {a[0], b[0]} == {"L", "R"}:
                    l, r = (a[1], b[1]) if a[0] == "L" else (b[1], a[1])
                    if l.lower() != left.time.lower() and r.lower() != right.time.lower():
                        keys.append((l, r))
            elif type(node) in _OPS:
                bound(node.this, _OPS[type(node)], node.expression)
            elif isinstance(node, exp.Between):
                bound(node.this, ">=", node.args["low"])
                bound(node.this, "<=", node.args["high"])
    except SqlError:                      # an interval the kit does not read: no interval join
        return None
    if not lower or not upper:
        return None
    low = max(lower, key=lambda b: b[0] + (0 if b[1] else 1))
    high = min(upper, key=lambda b: b[0] - (0 if b[1] else 1))
    try:
        call.bounds = IntervalBounds(Duration(low[0]), Duration(high[0]), low[1], high[1])
    except KitError as error:
        raise error_at(text, f"the interval join of {call.left} and {call.right} has bounds that hold no time: "
                       f"{error}", call.cond_at) from None
    call.keys = tuple(dict.fromkeys(keys))
    return call


def _flat(condition) -> list:
    """The top-level ``AND`` conjuncts of ``condition``, parentheses around them taken off."""
    parts = conjuncts(condition.unnest())
    return parts if len(parts) == 1 else [c for part in parts for c in _flat(part)]


def true_pairs(call: IntervalCall, statement: Statement, left_view: str, right_view: str):
    """The phase-one query of an outer join: the candidate pairs that meet the whole ON
    condition, as a ``query.Rewritten`` (errors map back to the condition)."""
    start, end = call.cond
    l, r = sparksql.name(call.left_alias), sparksql.name(call.right_alias)
    out = Rewritten(statement.text)
    out.replace(f"SELECT {l}.__kit_l, {l}.__kit_r FROM {left_view} AS {l} JOIN {right_view} AS {r} ON"
                + call.link(), start)
    out.copy(start, end)
    out.replace(")", end)
    return out
