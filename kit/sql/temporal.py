"""Temporal joins in Flink SQL: where they are in the query, and what they ask.

Two forms, as Flink writes them:

- ``FROM orders AS o [LEFT] JOIN rates FOR SYSTEM_TIME AS OF o.order_time [AS] r ON o.currency =
  r.currency [AND ...]``: the temporal table join (event time), or the lookup join when
  ``rates`` is a lookup table and the time is the left side's processing time;
- ``FROM orders AS o, LATERAL TABLE (Rates(o.proctime)) [AS r] WHERE o.currency = r.currency``
  (or ``JOIN LATERAL TABLE (...) ON ...``): the temporal table function join.

The versioned table is a ``kit.stream`` with a primary key, or a versioned view by
deduplication named in the query's ``WITH`` (Flink's ``CREATE VIEW``)::

    WITH versioned_rates AS (
      SELECT currency, rate, update_time FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY update_time DESC) AS rownum
        FROM rates)
      WHERE rownum = 1)

whose primary key is the ``PARTITION BY`` columns and whose time the ``ORDER BY`` column,
which must be the stream's event time.

``find_temporal_joins`` reads them from the query's tree (``Statement.tree``: a table's
``FOR SYSTEM_TIME AS OF`` is its ``exp.Version``, ``LATERAL TABLE (...)`` a ``Lateral``);
``kit.sql`` runs each join and the rewrite (``query.py``) puts the result in place: the left
table becomes a view of its rows with ``__kit_v``, the arrival of the version each one met,
the right table a view of its rows with their own ``__kit_v``, and the condition gains
``o.__kit_v = r.__kit_v AND (...)``. Spark then applies the rest of the condition, the LEFT
padding and the projection, exactly as Flink applies them to the version met.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace

from sqlglot import exp

from .dialect import first_token, span
from .errors import error_at
from .options import DYNAMIC_OPTIONS, duration_option
from .statement import Statement

__all__ = ["TemporalCall", "VersionedView", "find_temporal_joins", "versioned_view"]


@dataclass
class TemporalCall:
    """One temporal join of the query; ``*_at`` and the spans are offsets into the text."""
    how: str                          # "inner" | "left" | "right" | "full" | "cross"
    how_at: int                       # the join's first word (or its comma)
    table: str                        # the right table (or temporal table function) as written
    table_at: int
    start: int                        # the right side's text replaced by its view: start, end
    end: int
    alias: str                        # how the query names the right side
    time_qualifier: str | None
    time_column: str
    time_at: int
    lateral: bool = False             # LATERAL TABLE (Fn(time))
    cond: tuple | None = None         # (start, end) of the ON / WHERE condition
    cond_at: int | None = None        # where its ON or WHERE is
    equalities: list = field(default_factory=list)   # ((qualifier, column, offset), (...), (start, end))
    implied: dict = field(default_factory=dict)      # the key equalities' {start: end} (plan sets them)
    left: str | None = None           # the left table as written, and where
    left_at: int | None = None
    node: exp.Expression | None = field(default=None, repr=False)   # the right side's node of the tree


def find_temporal_joins(statement: Statement) -> dict:
    """{offset of the right side: TemporalCall} for each temporal join of the query's tree.

    >>> q = "SELECT * FROM o LEFT JOIN r FOR SYSTEM_TIME AS OF o.t ON o.k = r.k"
    >>> call = find_temporal_joins(Statement(q))[26]
    >>> call.how, call.table, call.time_column, call.left, q[slice(*call.cond)]
    ('left', 'r', 't', 'o', 'o.k = r.k')
    """
    tree, found = statement.tree, {}
    nodes = [] if tree is None else [node for node in tree.find_all(exp.Table, exp.Lateral) if _temporal(node)]
    for node in sorted(nodes, key=lambda node: node.meta["start"]):
        call = (_for_system_time if isinstance(node, exp.Table) else _lateral)(statement.text, node)
        _left_table(call)
        found[call.start] = call
    return found


def _temporal(node: exp.Expression) -> bool:
    """Whether ``node`` is a temporal join's right side: a table ``FOR SYSTEM_TIME AS OF``, or
    ``LATERAL TABLE (...)``."""
    if isinstance(node, exp.Lateral):
        return isinstance(node.this, exp.Anonymous) and node.this.name.upper() == "TABLE"
    version = node.args.get("version")
    return isinstance(version, exp.Version) and version.args.get("kind") == "AS OF" and version.name == "TIMESTAMP"


def join_kind(text: str, join: exp.Expression) -> str:
    """The join type of ``join`` (a ``Join`` node; a comma's is inner), as written."""
    if not isinstance(join, exp.Join) or text[join.meta["start"]] == ",":
        return "inner"
    return (join.side or (join.kind if join.kind in ("INNER", "CROSS") else "") or "inner").lower()


def _time(text: str, node: exp.Expression):
    """``[qualifier .] column`` of ``AS OF`` or a temporal table function's argument:
    (qualifier, column, offset)."""
    if not (isinstance(node, exp.Column) and len(node.parts) <= 2):
        raise error_at(text, "expected the left table's time attribute (o.order_time)", *first_token(node))
    return node.table or None, node.name, span(node)[0]


def _for_system_time(text: str, table: exp.Table) -> TemporalCall:
    """``JOIN name FOR SYSTEM_TIME AS OF [q.]col [[AS] alias] ON cond``."""
    join = table.parent
    at = table.meta["start"]
    if not isinstance(join, exp.Join) or text[join.meta["start"]] == ",":
        raise error_at(text, "FOR SYSTEM_TIME AS OF belongs to a table joined with JOIN", at)
    qualifier, column, time_at = _time(text, table.args["version"].expression)
    end = span(table)[1]
    call = TemporalCall(join_kind(text, join), join.meta["start"], table.name, at, at, end, table.alias_or_name,
                        qualifier, column, time_at, node=table)
    if "on" not in join.meta:
        raise error_at(text, "a temporal join needs ON with the key equality (ON o.currency = r.currency)",
                       *join.meta["next"])
    call.equalities = join_condition(call, join)
    return call


def _lateral(text: str, lateral: exp.Lateral) -> TemporalCall:
    """``, LATERAL TABLE (Fn([q.]col)) [[AS] alias]`` (condition in WHERE) or ``JOIN LATERAL ... ON``."""
    function = lateral.this.expressions[0] if lateral.this.expressions else None
    if not isinstance(function, exp.Anonymous):
        raise error_at(text, "expected a temporal table function", *first_token(function or lateral.this))
    if not function.expressions:
        close = function.meta["close"]
        raise error_at(text, "expected the left table's time attribute (o.order_time)", close, close)
    if len(function.expressions) > 1:
        comma = function.expressions[1].meta["comma"]
        raise error_at(text, "expected ')'", comma, comma)
    qualifier, column, time_at = _time(text, function.expressions[0])
    join = lateral.parent
    start, end = lateral.meta["start"], span(lateral)[1]
    how_at = join.meta["start"] if isinstance(join, exp.Join) else start
    call = TemporalCall(join_kind(text, join), how_at, function.name, function.meta["start"], start, end,
                        lateral.alias_or_name or function.name, qualifier, column, time_at, lateral=True, node=lateral)
    if isinstance(join, exp.Join) and text[how_at] != ",":
        if "on" in join.meta:
            call.equalities = join_condition(call, join)
    else:
        call.equalities = join_condition(call, lateral.find_ancestor(exp.Select))
    return call


def join_condition(call, clause: exp.Expression) -> list:
    """Set ``call``'s condition (``cond``, ``cond_at``) from ``clause``: a ``Join`` with ON, or
    the ``Select`` whose WHERE holds it; returns its top-level ``a.x = b.y`` conjuncts
    (``TemporalCall.equalities``; none without a condition)."""
    if isinstance(clause, exp.Join):
        condition, at = clause.args["on"], clause.meta["on"]
    else:
        where = clause.args.get("where") if clause is not None else None
        if where is None:
            return []
        condition, at, clause = where.this, where.meta["start"], where
    call.cond_at, call.cond = at, (clause.meta["condition"], span(clause)[1])
    return [(*sides, span(part)) for part in conjuncts(condition) if (sides := _equality(part))]


def conjuncts(condition: exp.Expression) -> list:
    """The top-level ``AND`` conjuncts of ``condition``, in text order (parentheses kept).

    >>> [c.sql() for c in conjuncts(Statement("SELECT 1 WHERE a = 1 AND (b OR c) AND d").tree.args["where"].this)]
    ['a = 1', '(b OR c)', 'd']
    """
    return conjuncts(condition.this) + conjuncts(condition.expression) if isinstance(condition, exp.And) \
        else [condition]


def _equality(part: exp.Expression) -> tuple | None:
    """``[q.]a = [q.]b`` as ``((q, a, offset), (q, b, offset))``."""
    def ref(node):
        if isinstance(node, exp.Column) and len(node.parts) <= 2:
            return node.table or None, node.name, span(node)[0]
        return None

    if not isinstance(part, exp.EQ):
        return None
    a, b = ref(part.this), ref(part.expression)
    return (a, b) if a and b else None


@dataclass
class VersionedView:
    """A ``WITH`` query that deduplicates a table into a versioned view: ``SELECT outer FROM
    (SELECT inner, ROW_NUMBER() OVER (PARTITION BY partition ORDER BY order [DESC]) AS rownum
    FROM source) WHERE rownum = 1``; the select lists hold column names and ``*``; ``*_at``:
    where the names are written."""
    source: str
    source_at: int
    partition: list
    order: str
    order_at: int
    keep: str                          # "last" (DESC) or "first" (ASC)
    inner: list
    rownum: str
    outer: list

    def columns(self, source_columns: list) -> list:
        """The view's columns, given its source's."""
        inner = [c for x in self.inner for c in (source_columns if x == "*" else [x])] + [self.rownum]
        return [c for x in self.outer for c in (inner if x == "*" else [x])]


_SHAPE = ("a versioned view is a deduplication: SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "
          "key ORDER BY time DESC) AS rownum FROM t) WHERE rownum = 1")


def versioned_view(statement: Statement, name: str) -> VersionedView | None:
    """The ``WITH`` query named ``name`` as a ``VersionedView``; None when the query has no
    such ``WITH`` query; a ``SqlError`` when it is not a deduplication.

    >>> s = Statement("WITH v AS (SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t DESC) "
    ...               "AS rn FROM r) WHERE rn = 1) SELECT * FROM v")
    >>> view = versioned_view(s, "V")
    >>> view.source, view.partition, view.order, view.keep, view.rownum
    ('r', ['k'], 't', 'last', 'rn')
    """
    tree = statement.tree
    for cte in tree.ctes if isinstance(tree, exp.Query) else ():
        if cte.alias.lower() == name.lower():
            return _deduplication(statement, cte.this)
    return None


def _deduplication(statement: Statement, query: exp.Expression) -> VersionedView:
    """``SELECT outer FROM (SELECT inner, ROW_NUMBER() OVER (...) [AS] rn FROM t [[AS] a]) [[AS] b]
    WHERE rn = 1 | rn <= 1 | rn < 2``, the query of a ``WITH``; a SqlError at the first node of
    another shape."""
    def fail(node):
        return error_at(statement.text, _SHAPE, (span(node) or span(query))[0])

    def select(node, what):
        """``node``, a SELECT of one table ref (``what``) and no other clause but WHERE."""
        source = node.args.get("from_") if isinstance(node, exp.Select) else None
        if source is None or not isinstance(source.this, what):
            raise fail(node)
        extra = [v for k, v in node.args.items() if v and k not in ("expressions", "from_", "where")]
        if extra:
            raise fail(extra[0] if isinstance(extra[0], exp.Expression) else extra[0][0])
        return source.this

    def columns(nodes):
        """Column names and ``*``."""
        for n in nodes:
            if not (isinstance(n, exp.Star) or isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier)):
                raise fail(n)
        return ["*" if isinstance(n, exp.Star) else n.name for n in nodes]

    inner = select(query, exp.Subquery).this
    table = select(inner, exp.Table)
    *listed, numbered = inner.expressions
    window = numbered.this if isinstance(numbered, exp.Alias) else None
    if not (listed and isinstance(window, exp.Window) and isinstance(window.this, exp.RowNumber)
            and window.args.get("partition_by") and window.args.get("order")
            and len(window.args["order"].expressions) == 1 and not window.args.get("spec")):
        raise fail(numbered)
    order = window.args["order"].expressions[0]
    time = order.this
    if not isinstance(time, exp.Column):
        raise fail(time)
    bound = query.args.get("where") and query.args["where"].this
    if not (isinstance(bound, (exp.EQ, exp.LTE, exp.LT)) and isinstance(bound.this, exp.Column)
            and bound.this.name.lower() == numbered.alias.lower() and bound.expression.is_int
            and int(bound.expression.name) == (2 if isinstance(bound, exp.LT) else 1)):
        raise error_at(statement.text, _SHAPE, statement.token(span(bound.expression)[0], -1).start) \
            if isinstance(bound, exp.Binary) else fail(query)
    return VersionedView(table.name, table.this.meta["start"], columns(window.args["partition_by"]), time.name,
                         time.this.meta["start"], "last" if order.args.get("desc") else "first",
                         columns(listed), numbered.alias, columns(query.expressions))


def _left_table(call: TemporalCall):
    """The table ref before the join that the time attribute's qualifier names (the nearest
    one, without a qualifier), in the FROM clause that holds the join."""
    join = call.node.parent
    select = join.parent if isinstance(join, exp.Join) else None
    if not isinstance(select, exp.Select) or select.args.get("from_") is None:
        return
    joins = select.args.get("joins") or []
    before = [select.args["from_"].this] + [j.this for j in joins[:next(k for k, j in enumerate(joins) if j is join)]]
    for table in reversed(before):
        if isinstance(table, exp.Table) and isinstance(table.this, exp.Identifier) and not table.args.get("db") and (
                call.time_qualifier is None or call.time_qualifier.lower() == table.alias_or_name.lower()):
            call.left, call.left_at = table.name, table.meta["start"]
            return


def plan(call: TemporalCall, tables: dict, statement: Statement, interleave=None, clock=None, retention=None):
    """The join ``call`` asks for, checked as Flink checks it: ``(TemporalJoin, left
    qualifier, the right side's columns)``; ``tables`` maps lower-case names to what
    ``kit.sql`` was given; the options come from ``join_options``."""
    from ..joins.lookup import LookupJoin, LookupTable
    from ..joins.versioned import TemporalJoin, TemporalTableFunction, time_kind
    from ..stream import Stream

    def error(message, at):
        return error_at(statement.text, message, at)

    what = "Temporal table function join" if call.lateral else "Temporal table join"
    allowed = ("inner",) if call.lateral else ("inner", "left")
    if call.how not in allowed:
        raise error(f"{what} currently only supports " + (" and ".join(h.upper() for h in allowed))
                    + f" JOIN, not {call.how.upper()} JOIN", call.how_at)
    if call.left is None:
        raise error(f"cannot tell which table {call.time_qualifier} is: name it in FROM before the join",
                    call.time_at)
    left = tables.get(call.left.lower())
    right = tables.get(call.table.lower())
    view = versioned_view(statement, call.table) if right is None and not call.lateral else None
    if view is not None:
        right = _deduplicated(view, tables, error)
    if not isinstance(left, Stream) and not isinstance(right, Stream) and not call.lateral:
        raise error("a temporal join runs on streams: on batch tables Flink 2.3 fails with \"TableException: "
                    "unexpected correlate variable $cor0 in the plan\"; pass "
                    f"{call.left} as kit.stream(df, time={call.time_column!r}, watermark=...) and {call.table} as "
                    "kit.stream(df, time=..., watermark=..., primary_key=...)", call.time_at)
    if not isinstance(left, Stream):
        raise error("Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's time "
                    f"attribute field: pass {call.left} as kit.stream(df, time={call.time_column!r}, ...) "
                    "(or with proctime=)", call.time_at)
    time = time_kind(left, call.time_column)
    if time is None:
        raise error("Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's time "
                    f"attribute field; {call.time_column} is neither {call.left}'s event time "
                    f"({left.time if left.time else 'it has none'}) nor its processing time", call.time_at)
    if call.lateral:
        if not isinstance(right, TemporalTableFunction):
            raise error(f"{call.table} is not a temporal table function: pass {call.table}="
                        "kit.joins.TemporalTableFunction(stream, time_attribute, primary_key)", call.table_at)
        if right.time != time:
            raise error(f"{call.table} is a {right.time}-time temporal table function but {call.time_column} is "
                        f"{call.left}'s {time} time: both sides need the same kind of time", call.time_at)
        stream, key = right.stream, right.primary_key
    elif isinstance(right, LookupTable):
        if time != "processing":
            raise error("Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's "
                        f"proctime field when joining the lookup table {call.table}", call.time_at)
        pairs = _keys(call, left.source.columns, right.columns)
        if not pairs:
            raise error(f"a lookup join needs an equality between a column of {call.left} and one of "
                        f"{call.table} in ON", call.cond_at or call.time_at)
        return LookupJoin(left, right, tuple(pairs), call.how), call.time_qualifier or call.left, None
    else:
        if time == "processing" and isinstance(right, Stream):
            raise error("Processing-time temporal join is not supported yet. (FLINK-19830: the left rows would "
                        "not wait for a complete snapshot of the versioned table.) Join by event time, use a "
                        "temporal table function (LATERAL TABLE (Rates(o.proctime))) or a lookup table",
                        call.time_at)
        if not isinstance(right, Stream):
            raise error(f"{call.table} is not a versioned table: pass it as kit.stream(df, time=..., "
                        "watermark=..., primary_key=...)", call.table_at)
        if not right.primary_key:
            raise error("Temporal Table Join requires primary key in versioned table, but no primary key can be "
                        f"found: pass {call.table} with kit.stream(..., primary_key=...)", call.table_at)
        stream, key = right, right.primary_key
    pairs = _keys(call, left.source.columns, stream.source.columns)
    missing = [c for c in key if c.lower() not in [r.lower() for _, r in pairs]]
    if missing:
        raise error(f"Join key must be the same as temporal table's primary key in {time.capitalize()}-time "
                    f"temporal table join: the condition needs {', '.join(f'{call.alias}.{c}' for c in missing)} "
                    f"= a column of {call.left}", call.cond_at or call.time_at)
    join = TemporalJoin(left, stream, tuple(pairs), call.how, time,
                        interleave or ("proctime" if time == "processing" else "event_time"), clock, retention,
                        deduplicate=view and view.keep)
    return join, call.time_qualifier or call.left, view and view.columns(stream.source.columns)


def _deduplicated(view: VersionedView, tables: dict, error):
    """The stream a versioned view deduplicates, its primary key the ``PARTITION BY`` columns."""
    from ..stream import Stream

    source = tables.get(view.source.lower())
    if not isinstance(source, Stream):
        raise error(f"{view.source} is not a stream: pass it as kit.stream(df, time=..., watermark=...)",
                    view.source_at)
    columns = {c.lower(): c for c in source.source.columns}
    if view.order.lower() != source.time.lower():
        raise error("Event-Time Temporal Table Join requires both primary key and row time attribute in "
                    f"versioned table, but no row time attribute can be found: the view orders by "
                    f"{view.order}, not {view.source}'s event time {source.time}", view.order_at)
    for name in view.partition + [c for c in view.inner if c != "*"]:
        if name.lower() not in columns:
            raise error(f"{name} is not a column of {view.source}; columns are {source.source.columns}",
                        view.source_at)
    inner = [c.lower() for c in replace(view, outer=["*"]).columns(source.source.columns)]
    for name in view.outer:
        if name != "*" and name.lower() not in inner:
            raise error(f"{name} is not a column of the view's subquery; it has {inner}", view.source_at)
    missing = [c for c in view.partition + [source.time] if c.lower() not in
               [x.lower() for x in view.columns(source.source.columns)]]
    if missing:
        raise error(f"the versioned view must keep its primary key and time attribute; it drops {missing}",
                    view.source_at)
    return replace(source, primary_key=tuple(columns[c.lower()] for c in view.partition))


def _keys(call: TemporalCall, left: list, right: list) -> list:
    """``(left column, right column)`` for each ``left = right`` conjunct of the condition;
    ``left``, ``right``: the two sides' columns. The link to the version met implies them
    (Flink keys the operator's state by them, and a NULL key meets a NULL key), so the
    rewrite puts ``TRUE`` in their place (``implied``): Spark then joins on the link alone."""
    lq, rq = (call.time_qualifier or call.left).lower(), call.alias.lower()
    lcols = {c.lower(): c for c in left}
    rcols = {c.lower(): c for c in right}

    def side(ref):
        q, c, _ = ref
        if q is not None:
            return ("L" if q.lower() == lq else "R" if q.lower() == rq else None), c
        if c.lower() in lcols and c.lower() not in rcols:
            return "L", c
        if c.lower() in rcols and c.lower() not in lcols:
            return "R", c
        return None, c

    pairs = []
    for a, b, (first, end) in call.equalities:
        (sa, ca), (sb, cb) = side(a), side(b)
        if {sa, sb} == {"L", "R"}:
            l, r = (ca, cb) if sa == "L" else (cb, ca)
            if l.lower() in lcols and r.lower() in rcols:
                pairs.append((lcols[l.lower()], rcols[r.lower()]))
                call.implied[first] = end
    return pairs


def join_options(config: dict) -> dict:
    """``kit.sql``'s ``config`` as the temporal joins' options (``plan``'s keywords)."""
    from ..replay.interleave import INTERLEAVINGS
    from ..joins.temporal import StateRetention
    from ..time import Clock
    from ..errors import KitError

    from ..match_recognize.budget import MAX_THREADS, STEP_BUDGET

    known = ("table.exec.state.ttl", "kit.join.interleave", "kit.join.clock", STEP_BUDGET, MAX_THREADS)
    unknown = [k for k in config if k not in known]   # (match_options and dynamic_options took theirs out)
    if unknown:
        every = list(known) + list(DYNAMIC_OPTIONS)
        close = {k: difflib.get_close_matches(k, every, n=1, cutoff=0.6) for k in unknown}
        hints = ", ".join(f"{near[0]!r} for {k!r}" for k, near in close.items() if near)
        raise KitError(f"unknown config key(s) {unknown}" + (f" (did you mean {hints}?)" if hints else "")
                       + f"; known: {every}")
    options = {}
    if "table.exec.state.ttl" in config:
        options["retention"] = StateRetention(duration_option(config["table.exec.state.ttl"], "table.exec.state.ttl"))
    if "kit.join.interleave" in config:
        if config["kit.join.interleave"] not in INTERLEAVINGS:
            raise KitError(f"kit.join.interleave={config['kit.join.interleave']!r} is not one of {list(INTERLEAVINGS)}")
        options["interleave"] = config["kit.join.interleave"]
    if "kit.join.clock" in config:
        if not isinstance(config["kit.join.clock"], Clock):
            raise KitError(f"kit.join.clock must be a Clock; got {config['kit.join.clock']!r}")
        options["clock"] = config["kit.join.clock"]
    return options
