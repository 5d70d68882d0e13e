"""The planner of continuous queries: Flink SQL over streams -> a tree of changelog operators.

``plan(query, streams)`` reads a SELECT over ``kit.Stream``s and returns the operators a
Flink job would run, each node with its output columns:

==================  ================================  ====================================
node                SQL it comes from                 runs on (``kit.changelog``)
==================  ================================  ====================================
``Source``          a stream named in FROM            ``changelog.from_stream`` / ``join.merge``
``Calc``            SELECT list, WHERE, HAVING        Spark SQL per change (row kind kept)
``GroupAggregate``  GROUP BY, aggregates, DISTINCT    ``aggregate.group_aggregate``
``Rank``            ``ROW_NUMBER() OVER`` + a filter  ``rank.top_n``
``Deduplicate``     the same, ``rn = 1`` on a time    ``rank.deduplicate``
``Over``            an OVER window with no such       ``over.over_aggregate``
                    filter (ascending, non-time)
``Join``            ``[LEFT|RIGHT|FULL] JOIN``, ``,``  ``join.join``
``Union``           ``UNION ALL``                     the changes of both
==================  ================================  ====================================

The word-frequency cascade::

    SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word)
    GROUP BY cnt

    Calc(select=[cnt, freq])
    +- GroupAggregate(groupBy=[cnt], select=[cnt, COUNT(cnt) AS freq])
       +- Calc(select=[cnt])
          +- GroupAggregate(groupBy=[word], select=[word, COUNT(*) AS cnt])
             +- Source(words)

Why sqlglot. A continuous query needs all of SELECT with every name resolved: which table
a column comes from, what ``*`` stands for, which subquery's alias is meant. Three ways
were weighed:

- Spark's analyzed logical plan (``df._jdf.queryExecution().analyzed()``) has resolved
  everything, types included, but it lives in the JVM: walking it costs a py4j call per
  node and expression, its shape changes between Spark versions, and Spark Connect does
  not expose it at all (only ``explain`` text), so dynamic tables would not run there;
- the kit's own parser (``kit.sql.query``) is a token rewriter made to find
  MATCH_RECOGNIZE, window TVFs and temporal joins in otherwise untouched text; growing it
  into a resolver of scopes, stars and subqueries would duplicate a planner;
- sqlglot (pure Python, MIT, well kept) parses the query to a tree and its ``qualify``
  resolves every column to its table, expands ``*`` and names unnamed outputs, given the
  tables' columns; it runs the same on Spark Connect.

So sqlglot builds the tree and Spark does the rest: every expression is rendered back to
Spark SQL and evaluated by Spark (so functions and types are Spark's, as in the batch
query), aggregate result types are Spark's own (``Dataframe.schema`` of the aggregate, no
job), and the result's names and types are those of the same query run as a batch.
Columns inside the plan get internal names (``_c0``, ``_c1``, ...): no clash between the
two sides of a join or a subquery's outputs.

Not planned (a ``KitError`` names the construct): ORDER BY / LIMIT over a stream (Flink
sorts only on time), OVER aggregates, subqueries in expressions, UNION/INTERSECT/EXCEPT
without ALL, aggregates other than COUNT, SUM, AVG, MIN, MAX, aggregate FILTER clauses.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from ... import sparksql
from ...errors import KitError
from ...changelog import AggCall
from ..statement import Statement

__all__ = ["Node", "Source", "Calc", "GroupAggregate", "Rank", "Deduplicate", "Over", "Join", "Union",
           "plan", "updating", "explain_tree", "stream_columns"]

_AGGREGATES = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}
_RANKS = {exp.RowNumber: "ROW_NUMBER", exp.Rank: "RANK", exp.DenseRank: "DENSE_RANK"} \
    if hasattr(exp, "DenseRank") else {exp.RowNumber: "ROW_NUMBER", exp.Rank: "RANK"}


# ---------------------------------------------------------------------------- nodes


@dataclass
class Node:
    """An operator: its output ``columns`` (internal names) and ``names`` (the SQL names
    they have where the query can see them, for ``explain``)."""
    columns: list
    names: list
    times: dict = field(default_factory=dict, kw_only=True)   # internal name -> "rowtime" | "proctime"

    @property
    def inputs(self) -> list:
        return []

    def label(self) -> str:
        raise NotImplementedError


@dataclass
class Source(Node):
    table: str = ""
    stream: object = None
    source_columns: list = field(default_factory=list)   # the stream's own names, by position

    def label(self):
        return f"Source(table=[{self.table}], fields=[{', '.join(self.names)}])"


@dataclass
class Calc(Node):
    input: Node = None
    select: list = field(default_factory=list)     # Spark SQL over the input's internal names
    where: str | None = None
    shown: list = field(default_factory=list)      # the SQL the user wrote, for explain
    shown_where: str | None = None

    @property
    def inputs(self):
        return [self.input]

    def label(self):
        parts = [f"select=[{', '.join(self.shown)}]"]
        if self.shown_where:
            parts.append(f"where=[{self.shown_where}]")
        return f"Calc({', '.join(parts)})"


@dataclass
class GroupAggregate(Node):
    input: Node = None
    keys: list = field(default_factory=list)       # internal names of the input
    calls: list = field(default_factory=list)      # AggCall, args internal names of the input
    shown_calls: list = field(default_factory=list)

    @property
    def inputs(self):
        return [self.input]

    def label(self):
        keys = self.names[:len(self.keys)]
        group = f"groupBy=[{', '.join(keys)}], " if keys else ""
        return f"GroupAggregate({group}select=[{', '.join(keys + self.shown_calls)}])"


@dataclass
class Rank(Node):
    input: Node = None
    function: str = "ROW_NUMBER"
    partition: list = field(default_factory=list)
    order: list = field(default_factory=list)      # (internal name, ascending, nulls first)
    start: int = 1
    end: int = 1
    row_number: str | None = None                  # internal name when output
    shown_order: str = ""

    @property
    def inputs(self):
        return [self.input]

    def label(self):
        part = ", ".join(self.names[self.input.columns.index(c)] for c in self.partition)
        number = "true" if self.row_number else "false"
        return (f"Rank(rankType=[{self.function}], rankRange=[rankStart={self.start}, rankEnd={self.end}], "
                f"partitionBy=[{part}], orderBy=[{self.shown_order}], select=[{', '.join(self.names)}], "
                f"outputRankNumber=[{number}])")


@dataclass
class Deduplicate(Node):
    input: Node = None
    keys: list = field(default_factory=list)
    keep: str = "first"
    time: str | None = None                        # the rowtime column; None: processing time
    row_number: str | None = None                  # its column (always 1) when output

    @property
    def inputs(self):
        return [self.input]

    def label(self):
        keys = ", ".join(self.names[self.input.columns.index(c)] for c in self.keys)
        order = "ROWTIME" if self.time else "PROCTIME"
        return f"Deduplicate(keep=[{'FirstRow' if self.keep == 'first' else 'LastRow'}], key=[{keys}], order=[{order}])"


@dataclass
class Over(Node):
    input: Node = None
    partition: list = field(default_factory=list)
    order: list = field(default_factory=list)      # (internal name, ascending, nulls first)
    calls: list = field(default_factory=list)      # (function, argument's internal name or None, output)
    frame: str = "RANGE"
    shown_order: str = ""
    shown_calls: list = field(default_factory=list)

    @property
    def inputs(self):
        return [self.input]

    def label(self):
        part = ", ".join(self.names[self.input.columns.index(c)] for c in self.partition)
        head = f"partitionBy=[{part}], " if part else ""
        return (f"OverAggregate({head}orderBy=[{self.shown_order}], window=[ {self.frame} BETWEEN UNBOUNDED "
                f"PRECEDING AND CURRENT ROW], select=[{', '.join(self.names[:len(self.input.columns)] + self.shown_calls)}])")


@dataclass
class Join(Node):
    left: Node = None
    right: Node = None
    how: str = "inner"
    left_keys: list = field(default_factory=list)
    right_keys: list = field(default_factory=list)
    condition: str | None = None                   # Spark SQL over the output's internal names
    shown_condition: str = ""

    @property
    def inputs(self):
        return [self.left, self.right]

    def label(self):
        return (f"Join(joinType=[{self.how.capitalize()}Join], where=[{self.shown_condition}], "
                f"select=[{', '.join(self.names)}])")


@dataclass
class Union(Node):
    parts: list = field(default_factory=list)

    @property
    def inputs(self):
        return list(self.parts)

    def label(self):
        return f"Union(all=[true], union=[{', '.join(self.names)}])"


def explain_tree(node: Node, annotate=lambda node: "") -> str:
    """``node`` and its inputs as Flink's EXPLAIN draws a plan: ``:-`` before an input that
    has a sibling after it, ``+-`` before the last."""
    lines = []

    def walk(n, lead, branch):
        lines.append(lead + branch + n.label() + annotate(n))
        inner = lead + ("" if not branch else ":  " if branch == ":- " else "   ")
        for i, child in enumerate(n.inputs):
            walk(child, inner, "+- " if i == len(n.inputs) - 1 else ":- ")
    walk(node, "", "")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- planning


@dataclass
class _Scope:
    """What a query block can see: (qualifier, column) -> internal name, in order."""
    columns: dict = field(default_factory=dict)    # (qualifier lower, column lower) -> internal
    names: dict = field(default_factory=dict)      # internal -> the SQL name
    times: dict = field(default_factory=dict)      # internal -> "rowtime" | "proctime"

    def lookup(self, column: exp.Column) -> str:
        key = ((column.table or "").lower(), column.name.lower())
        if key in self.columns:
            return self.columns[key]
        matches = [v for (q, c), v in self.columns.items() if c == key[1]]
        if not column.table and len(matches) == 1:
            return matches[0]
        raise KitError(f"column {column.sql()} is not known here")


@dataclass
class _Pending:
    """A ``ROW_NUMBER() OVER (...)`` column of a subquery: it becomes a Rank or a
    Deduplicate once the query around it says which rows it keeps."""
    node: Node                      # the subquery's rows, the row number not among them
    column: str                     # the row number's internal name
    function: str
    partition: list
    order: list
    shown_order: str
    visible: list                   # the SELECT list's columns, the row number among them


class _Planner:
    def __init__(self, streams: dict):
        self.streams = {name.lower(): (name, s) for name, s in streams.items()}
        self.counter = itertools.count()
        self.ctes = {}            # WITH name, lower case -> its query

    def fresh(self) -> str:
        return f"_c{next(self.counter)}"

    # -- query blocks

    def block(self, node: exp.Expression):
        """A SELECT, a UNION ALL or a parenthesised query: (Node or _Pending, output names).
        Its WITH queries are planned where FROM names them (each naming: its own operators,
        as Flink plans a view)."""
        if isinstance(node, exp.Subquery):
            return self.block(node.this)
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise KitError("WITH RECURSIVE is not a query Flink runs on streams")
            for cte in with_.expressions:
                self.ctes[cte.alias_or_name.lower()] = cte.this
        if isinstance(node, exp.Union):
            if node.args.get("distinct"):
                raise KitError("UNION without ALL over streams is not planned yet: write UNION ALL "
                               "(and SELECT DISTINCT over it)")
            left, lnames = self._settled(self.block(node.left))
            right, _ = self._settled(self.block(node.right))
            if len(left.columns) != len(right.columns):
                raise KitError("the two sides of UNION ALL have different numbers of columns")
            calc = self._rename(right, left.columns)
            return Union(list(left.columns), list(left.names), parts=[left, calc]), lnames
        if isinstance(node, (exp.Intersect, exp.Except)):
            raise KitError(f"{node.key.upper()} over streams is not planned: Flink runs it as a join")
        if not isinstance(node, exp.Select):
            raise KitError(f"{node.key.upper()} is not a query the kit can run continuously")
        return self.select(node)

    def _settled(self, planned):
        """``planned`` as a node: a ranking with no Top-N filter around it runs as Flink 2.3
        runs it, an OverAggregate over all the rows before (its hidden sort and partition
        columns projected away)."""
        node, names = planned
        if isinstance(node, _Pending):
            inner = node.node
            frame = "ROWS" if node.function == "ROW_NUMBER" else "RANGE"     # Flink's defaults
            over = self._over(inner, node.partition, node.order, [(node.function, None, node.column)], frame,
                              node.shown_order, [f"{node.function}(*) AS {node.column}"])
            return self._visible(over, node.visible), names
        return node, names

    def _over(self, inner, partition, order, calls, frame, shown_order, shown_calls) -> Over:
        if len(order) != 1 or not order[0][1]:
            raise KitError("The window can only be ordered in ASCENDING mode. (Flink 2.3's planner: an OVER window "
                           "ordered by a column that is not a time attribute runs only ascending; for the top rows "
                           "write ROW_NUMBER() OVER (... DESC) with a filter rn <= N, a Top-N)" if len(order) == 1 else
                           "The window can only be ordered by a single time column.")
        if order[0][0] in inner.times:
            raise KitError("an OVER window ordered by a time attribute (Flink's event- or processing-time "
                           "OVER aggregate) is not planned yet")
        return Over(list(inner.columns) + [c for _, _, c in calls], list(inner.names) + [c for _, _, c in calls],
                    input=inner, partition=partition, order=order, calls=calls, frame=frame,
                    shown_order=shown_order, shown_calls=shown_calls)

    def _rename(self, node: Node, columns: list) -> Node:
        """``node``'s rows under ``columns`` (the other side of a UNION ALL)."""
        return Calc(list(columns), list(node.names), input=node,
                    select=[f"{c} AS {n}" for c, n in zip(node.columns, columns)], shown=list(node.names))

    def select(self, sel: exp.Select):
        filtered = next((f for e in sel.expressions for f in e.find_all(exp.Filter)), None)
        if filtered is not None:
            raise KitError(f"{filtered.sql(dialect='spark')}: an aggregate's FILTER (WHERE ...) is not run in "
                           "continuous queries yet; write the condition into the argument, e.g. "
                           "COUNT(CASE WHEN <condition> THEN 1 END) or SUM(CASE WHEN <condition> THEN x END)")
        for key in ("order", "limit", "offset"):
            if sel.args.get(key):
                raise KitError(("Sort on a non-time-attribute field is not supported. (Flink 2.3's planner) "
                                if key == "order" else "") +
                               f"{key.upper()} over a stream: Flink sorts a stream only on its time "
                               "attribute, ascending; sort the result (final(), changelog()) instead")
        node, scope, where = self.from_(sel)
        node, scope, where = self._rank_filter(node, scope, where)
        ranked = node if isinstance(node, (Rank, Deduplicate)) else None
        if where is not None:
            self._no_subqueries(where, "WHERE")
            node = self._filter(node, scope, where)
        grouped = sel.args.get("group") is not None or sel.args.get("distinct") is not None or any(
            e.find(exp.AggFunc) for e in sel.expressions if not self._is_window(e))
        windows = [e for e in sel.expressions if self._is_window(e)]
        if grouped:
            out = self.aggregate(sel, node, scope)
        elif sel.args.get("having"):
            raise KitError("HAVING without GROUP BY or aggregates")
        elif windows:
            return self._windowed(sel, node, scope, windows)
        else:
            out = self._project(node, scope, sel.expressions)[:2]
        if ranked is not None and not _reads(out[0], ranked, ranked.row_number):
            ranked.row_number = None     # Flink: no rank number in the output, fewer updates
        return out

    def from_(self, sel: exp.Select):
        """The FROM clause and its joins: (node, scope, the WHERE left to apply)."""
        source = sel.args.get("from_") or sel.args.get("from")
        if source is None:
            raise KitError("a continuous query needs a FROM clause over a stream")
        node, scope = self.relation(source.this)
        where = sel.args["where"].this if sel.args.get("where") else None
        for j in sel.args.get("joins") or []:
            node, scope, where = self.join(node, scope, j, where)
        return node, scope, where

    def relation(self, rel: exp.Expression):
        alias = rel.alias_or_name.lower()
        if isinstance(rel, exp.Table):
            if rel.args.get("db") or rel.args.get("catalog"):
                raise KitError(f"table {rel.sql()}: pass it as kit.sql(..., name=stream)")
            key = rel.name.lower()
            if key in self.ctes:
                return self.relation(exp.Subquery(this=self.ctes[key], alias=exp.TableAlias(this=exp.to_identifier(alias))))
            if key not in self.streams:
                raise KitError(f"table {rel.name} is not a kit.Stream: a continuous query reads streams "
                               f"(kit.stream(df, time=...)); pass every table as a stream")
            name, s = self.streams[key]
            columns = stream_columns(s)
            internal = [self.fresh() for _ in columns]
            times = {internal[columns.index(s.time)]: "rowtime"} if s.time in columns else {}
            proctime = s.proctime if isinstance(s.proctime, str) else "proctime"
            if s.proctime is not None and proctime in columns:
                times[internal[columns.index(proctime)]] = "proctime"
            node = Source(internal, list(columns), table=name, stream=s, source_columns=list(columns),
                          times=times)
            scope = _Scope({(alias, c.lower()): i for c, i in zip(columns, internal)},
                           dict(zip(internal, columns)), times)
            return node, scope
        if isinstance(rel, exp.Subquery):
            planned, names = self.block(rel.this)
            pending = isinstance(planned, _Pending)
            columns = planned.visible if pending else planned.columns
            times = planned.node.times if pending else planned.times
            scope = _Scope({(alias, n.lower()): c for n, c in zip(names, columns)}, dict(zip(columns, names)),
                           {c: t for c, t in times.items() if c in columns})
            return planned, scope
        raise KitError(f"{rel.key.upper()} in FROM is not planned for a continuous query")

    # -- Top-N and deduplication

    def _windowed(self, sel, node, scope, windows: list):
        """A SELECT with OVER windows: one ``ROW_NUMBER``/``RANK``/``DENSE_RANK`` with no frame
        is a Top-N candidate (``_Pending``: the query around it may filter it); otherwise
        an OverAggregate of every window (one PARTITION BY, ORDER BY and frame for all), as
        Flink 2.3 runs it. The windows see every column of the FROM (Flink's OverAggregate
        keeps them: duplicate rows stay apart), the SELECT list is projected after."""
        named = {w.name.lower(): w for w in sel.args.get("windows") or []}
        specs = []
        for e in windows:
            w = e.this if isinstance(e, exp.Alias) else e
            spec = named.get(w.alias.lower(), w) if isinstance(w.args.get("alias"), exp.Identifier) and not (
                w.args.get("partition_by") or w.args.get("order")) else w
            function = _RANKS.get(type(w.this)) or _AGGREGATES.get(type(w.this))
            if function is None:
                raise KitError(f"{_sql(w.this)} OVER (...): the kit runs ROW_NUMBER, RANK, DENSE_RANK, COUNT, SUM, "
                               "AVG, MIN and MAX over a window")
            if spec.args.get("order") is None:
                raise KitError(f"{function}() OVER (...) needs an ORDER BY")
            arg = None
            if function in _AGGREGATES.values():
                function, arg, distinct = _call(w.this)
                if distinct or (arg is not None and not isinstance(arg, exp.Column)):
                    raise KitError(f"{_sql(w.this)} OVER (...): name a column (compute it in a subquery), no DISTINCT")
                arg = None if arg is None else scope.lookup(arg)
            partition = tuple(self._column_of(node, scope, p) for p in spec.args.get("partition_by") or [])
            order = tuple((self._column_of(node, scope, o.this), not o.args.get("desc"), bool(o.args.get("nulls_first")))
                          for o in spec.args["order"].expressions)
            frame = _frame(spec) or ("ROWS" if function == "ROW_NUMBER" else "RANGE")   # Flink's defaults
            specs.append((e, function, arg, partition, order, frame, _sql(spec.args["order"])[len("ORDER BY "):],
                          _frame(spec) is None))
        if len({(p, o, f) for _, _, _, p, o, f, *_ in specs}) > 1:
            raise KitError("OVER windows with different PARTITION BY, ORDER BY or frames in one SELECT are not "
                           "planned: compute them in nested queries")
        _, _, _, partition, order, frame, shown_order, unframed = specs[0]
        rest = [e for e in sel.expressions if all(e is not w for w, *_ in specs)]
        keep = list(node.columns) + [a for _, _, a, *_ in specs if a]
        projected, names, sources = self._project(node, scope, rest, keep=keep)
        at = dict(zip(sources, projected.columns))        # input column -> its column in the projection
        outputs = {id(e): self.fresh() for e, *_ in specs}
        visible = [outputs[id(e)] if id(e) in outputs else projected.columns[rest.index(e)] for e in sel.expressions]
        names = [e.alias_or_name for e in sel.expressions]
        partition, order = [at[c] for c in partition], [(at[c], a, n) for c, a, n in order]
        e, function, *_ = specs[0]
        if len(specs) == 1 and function in _RANKS.values() and unframed:
            return _Pending(projected, outputs[id(e)], function, partition, order, shown_order, visible), names
        calls = [(f, at.get(a), outputs[id(e)]) for e, f, a, *_ in specs]
        over = self._over(projected, partition, order, calls, frame, shown_order,
                          [f"{_sql((e.this if isinstance(e, exp.Alias) else e).this)} AS {e.alias_or_name}"
                           for e, *_ in specs])
        return self._visible(over, visible), names

    def _visible(self, node: Node, visible: list) -> Node:
        """``node``'s columns ``visible``, in that order (a Calc unless they are all of them)."""
        if visible == node.columns:
            return node
        shown = [node.names[node.columns.index(c)] for c in visible]
        return Calc(list(visible), shown, input=node, select=list(visible), shown=shown,
                    times={c: t for c, t in node.times.items() if c in visible})

    def _rank_filter(self, node, scope, where):
        """The conditions of ``where`` on a pending row number, as a Rank or Deduplicate."""
        if not isinstance(node, _Pending):
            return node, scope, where
        start, end, rest = 1, None, []
        for cond in _conjuncts(where):
            bound = _rank_bound(cond, node.column, scope)
            if bound is None:
                rest.append(cond)
                continue
            lo, hi = bound
            start, end = max(start, lo), hi if end is None else min(end, hi) if hi is not None else end
        if end is None:
            raise KitError(f"{node.function}() OVER (...) needs an upper bound in the WHERE around it "
                           "(rn <= N, rn < N, rn = N or rn BETWEEN a AND b): Flink's Top-N keeps N rows per partition")
        if node.function != "ROW_NUMBER":
            raise KitError(f"{node.function}() on streaming table is not supported currently (Flink 2.3's planner: "
                           "its Top-N numbers rows with ROW_NUMBER() only; use ROW_NUMBER())")
        inner, times = node.node, node.node.times
        columns, names = list(inner.columns) + [node.column], list(inner.names) + [scope.names[node.column]]
        if start == end == 1 and len(node.order) == 1 and node.order[0][0] in times:
            column, ascending, _ = node.order[0]
            out = Deduplicate(columns, names, input=inner, keys=node.partition, keep="first" if ascending else "last",
                              time=column if times[column] == "rowtime" else None, row_number=node.column,
                              times=dict(times))
        else:
            out = Rank(columns, names, input=inner, function=node.function, partition=node.partition,
                       order=node.order, start=start, end=end, row_number=node.column,
                       shown_order=node.shown_order, times=dict(times))
        return out, scope, _and(rest)

    # -- joins

    def join(self, node, scope, j: exp.Join, where):
        if isinstance(node, _Pending):
            node = self._settled((node, []))[0]
        right, rscope = self.relation(j.this)
        right = self._settled((right, []))[0]
        side = (j.args.get("side") or "").lower()
        kind = (j.args.get("kind") or "").lower()
        if kind in ("semi", "anti") or j.args.get("using"):
            raise KitError(f"{kind.upper() or 'USING'} joins are not planned for streams yet")
        how = side or "inner"
        merged = _Scope({**scope.columns, **rscope.columns}, {**scope.names, **rscope.names},
                        {})   # a regular join's output has no time attributes (Flink)
        on = j.args.get("on")
        conds = _conjuncts(on) if on is not None else []
        if how == "inner" and where is not None:      # inner: WHERE's conditions are the join's
            conds, where = conds + _conjuncts(where), None
        left_keys, right_keys, rest = [], [], []
        for cond in conds:
            if isinstance(cond, exp.EQ):
                a, b = (self._side_of(e, scope, rscope) for e in (cond.this, cond.expression))
                if a == "left" and b == "right":
                    left_keys.append(cond.this); right_keys.append(cond.expression); continue
                if a == "right" and b == "left":
                    left_keys.append(cond.expression); right_keys.append(cond.this); continue
            rest.append(cond)
        if how == "inner":   # one side's own conditions filter that side before the join
            lrest = [c for c in rest if self._side_of(c, scope, rscope) == "left"]
            rrest = [c for c in rest if self._side_of(c, scope, rscope) == "right"]
            rest = [c for c in rest if c not in lrest and c not in rrest]
            if lrest:
                node = self._filter(node, scope, _and(lrest))
            if rrest:
                right = self._filter(right, rscope, _and(rrest))
        node, lk = self._keyed(node, scope, left_keys)
        right, rk = self._keyed(right, rscope, right_keys)
        condition = _and(rest)
        out_columns = list(node.columns) + list(right.columns)
        names = [merged.names.get(c, c) for c in out_columns]
        scope_after = _Scope({k: v for k, v in merged.columns.items() if v in out_columns}, merged.names, {})
        joined = Join(out_columns, names, left=node, right=right, how=how, left_keys=lk, right_keys=rk,
                      condition=self._render(condition, scope_after) if condition is not None else None,
                      shown_condition=_sql(_and(conds)) if conds else "true")
        return joined, scope_after, where

    def _side_of(self, e, lscope, rscope):
        sides = set()
        for c in e.find_all(exp.Column):
            key = ((c.table or "").lower(), c.name.lower())
            sides.add("left" if key in lscope.columns else "right" if key in rscope.columns else "?")
        return sides.pop() if len(sides) == 1 else "both" if sides else "none"

    def _keyed(self, node, scope, exprs):
        """``node`` with each of ``exprs`` as a column (a Calc when one is not a plain column)."""
        if all(isinstance(e, exp.Column) for e in exprs):
            return node, [scope.lookup(e) for e in exprs]
        keys = [self.fresh() for _ in exprs]
        calc = Calc(list(node.columns) + keys, list(node.names) + [_sql(e) for e in exprs], input=node,
                    select=list(node.columns) + [f"{self._render(e, scope)} AS {k}" for e, k in zip(exprs, keys)],
                    shown=list(node.names) + [_sql(e) for e in exprs], times=dict(node.times))
        return calc, keys

    # -- projection, filter, aggregation

    def _render(self, e: exp.Expression, scope: _Scope) -> str:
        """``e`` as Spark SQL over internal names."""
        def swap(n):
            if isinstance(n, exp.Column):
                return exp.column(scope.lookup(n))
            return n
        return e.copy().transform(swap).sql(dialect="spark")

    def _filter(self, node, scope, cond) -> Calc:
        return Calc(list(node.columns), list(node.names), input=node, select=list(node.columns),
                    where=self._render(cond, scope), shown=list(node.names), shown_where=_sql(cond),
                    times=dict(node.times))

    def _project(self, node, scope, expressions, keep=()):
        """A Calc of ``expressions`` and of the input columns ``keep`` it lacks (a ranking
        above needs them): (calc, the expressions' names, the input column each output
        copies or None)."""
        node = self._settled((node, []))[0]
        columns, select, shown, names, sources, times = [], [], [], [], [], {}
        for e in expressions:
            self._no_subqueries(e, "SELECT")
            inner = e.this if isinstance(e, exp.Alias) else e
            source = scope.lookup(inner) if isinstance(inner, exp.Column) else None
            columns.append(self.fresh())
            select.append(f"{self._render(inner, scope)} AS {columns[-1]}")
            shown.append(_sql(e))
            names.append(e.alias_or_name)
            sources.append(source)
        for c in keep:
            if c not in sources:
                columns.append(self.fresh())
                select.append(f"{c} AS {columns[-1]}")
                shown.append(scope.names.get(c, c))
                names.append(scope.names.get(c, c))
                sources.append(c)
        for column, source in zip(columns, sources):
            if source in scope.times:
                times[column] = scope.times[source]
        calc = Calc(columns, names, input=node, select=select, shown=shown, times=times)
        return calc, names[:len(expressions)], sources

    def aggregate(self, sel: exp.Select, node, scope):
        """GROUP BY (or SELECT DISTINCT): a Calc of the keys and the aggregates' arguments, the
        GroupAggregate, HAVING as a filter, then the SELECT list over the aggregate's output."""
        node = self._settled((node, []))[0]
        group = sel.args.get("group")
        keys = list(group.expressions) if group is not None else []
        if sel.args.get("distinct") is not None:
            if keys or any(e.find(*_AGGREGATES) for e in sel.expressions):
                raise KitError("SELECT DISTINCT with GROUP BY or aggregates is not planned yet")
            keys = [e.this if isinstance(e, exp.Alias) else e for e in sel.expressions]
        for k in keys:
            if k.find(*_AGGREGATES) or k.find(exp.Window):
                raise KitError(f"GROUP BY {_sql(k)}: an aggregate or OVER in GROUP BY")
        having = sel.args["having"].this if sel.args.get("having") else None
        calls = {}
        for e in list(sel.expressions) + ([having] if having is not None else []):
            self._no_subqueries(e, "SELECT" if e is not having else "HAVING")
            if e.find(exp.Window):
                raise KitError(f"{_sql(e)}: an OVER window beside GROUP BY is not planned")
            for agg in e.find_all(exp.AggFunc):
                if type(agg) not in _AGGREGATES:
                    raise KitError(f"{_sql(agg)}: the kit runs COUNT, SUM, AVG, MIN and MAX continuously, "
                                   f"not {agg.key.upper()}")
                calls.setdefault(_sql(agg), agg)
        pre_columns, pre_select, pre_shown, replace = [], [], [], {}
        made = {}      # an expression the Calc computes already (a key read by an aggregate): its column
        for k in keys:
            replace[_sql(k)] = self.fresh()
            pre_columns.append(replace[_sql(k)])
            pre_select.append(f"{self._render(k, scope)} AS {pre_columns[-1]}")
            pre_shown.append(_sql(k))
            made.setdefault(_sql(k), pre_columns[-1])
        key_columns = list(pre_columns)
        agg_calls = []
        for text, agg in calls.items():
            function, arg, distinct = _call(agg)
            column = None
            if arg is not None and _sql(arg) in made:
                column = made[_sql(arg)]
            elif arg is not None:
                column = made[_sql(arg)] = self.fresh()
                pre_columns.append(column)
                pre_select.append(f"{self._render(arg, scope)} AS {column}")
                pre_shown.append(_sql(arg))
            replace[text] = self.fresh()
            agg_calls.append(AggCall(function, column, replace[text], None, distinct))
        pre = Calc(pre_columns, pre_shown, input=node, select=pre_select, shown=pre_shown)
        shown_calls = [_named(text, sel.expressions) for text in calls]
        grouped = GroupAggregate(key_columns + [c.name for c in agg_calls], [_sql(k) for k in keys] + list(calls),
                                 input=pre, keys=key_columns, calls=agg_calls, shown_calls=shown_calls)
        node = grouped
        if having is not None:
            node = Calc(list(node.columns), list(node.names), input=node, select=list(node.columns),
                        where=_replaced(having, replace), shown=list(node.names), shown_where=_sql(having))
        columns = [self.fresh() for _ in sel.expressions]
        select = [f"{_replaced(e.this if isinstance(e, exp.Alias) else e, replace)} AS {c}"
                  for e, c in zip(sel.expressions, columns)]
        names = [e.alias_or_name for e in sel.expressions]
        return Calc(columns, names, input=node, select=select, shown=[_sql(e) for e in sel.expressions]), names

    # -- helpers

    def _is_window(self, e) -> bool:
        return isinstance(e.this if isinstance(e, exp.Alias) else e, exp.Window)

    def _column_of(self, node, scope, e) -> str:
        if not isinstance(e, exp.Column):
            raise KitError(f"PARTITION BY / ORDER BY {_sql(e)}: name a column (compute it in a subquery)")
        return scope.lookup(e)

    def _no_subqueries(self, e, where):
        if e is not None and e.find(exp.Subquery, exp.Exists) is not None:
            raise KitError(f"a subquery in {where} is not planned for a continuous query yet: join instead")


def stream_columns(s) -> list:
    """The columns a query sees in stream ``s``: its source's, and ``proctime`` for a clock."""
    columns = list(s.source.columns)
    if s.proctime is not None and "proctime" not in columns:
        columns.append("proctime")
    return columns


def _frame(w: exp.Window) -> str | None:
    """``ROWS``/``RANGE`` of a window's frame (None: none written); only ``UNBOUNDED
    PRECEDING`` to ``CURRENT ROW`` runs on a stream."""
    spec = w.args.get("spec")
    if spec is None:
        return None
    start, end = str(spec.args.get("start", "")).upper(), str(spec.args.get("end", "CURRENT ROW")).upper()
    if start != "UNBOUNDED" or str(spec.args.get("start_side", "")).upper() != "PRECEDING" or end != "CURRENT ROW":
        raise KitError(f"OVER (... {_sql(spec)}): Non-time attribute sort is not supported for bounded OVER window "
                       "(ordered by a column that is no time attribute, a stream runs only BETWEEN UNBOUNDED "
                       "PRECEDING AND CURRENT ROW)")
    return str(spec.args.get("kind", "RANGE")).upper()


def _reads(node: Node, below: Node, column: str) -> bool:
    """Whether a Calc between ``node`` and ``below`` reads ``column``."""
    word = re.compile(rf"\b{re.escape(column)}\b")
    while node is not below:
        if isinstance(node, Calc) and any(word.search(t) for t in node.select + [node.where or ""]):
            return True
        if not node.inputs:
            return False
        node = node.inputs[0]
    return False


def _call(agg) -> tuple:
    """``(function, argument or None for *, distinct)`` of an aggregate call."""
    function, arg = _AGGREGATES[type(agg)], agg.this
    if agg.args.get("expressions"):
        raise KitError(f"{_sql(agg)}: one argument only")
    distinct = isinstance(arg, exp.Distinct)
    if distinct:
        if len(arg.expressions) != 1:
            raise KitError(f"{_sql(agg)}: DISTINCT over one expression only")
        arg = arg.expressions[0]
    if isinstance(arg, exp.Star) or arg is None:
        if function != "COUNT":
            raise KitError(f"{_sql(agg)}: only COUNT takes *")
        return function, None, distinct
    return function, arg, distinct


def _replaced(e: exp.Expression, replace: dict) -> str:
    """``e`` over an aggregate's output (``replace``: an aggregate's or a key's SQL -> its column)."""
    def swap(n):
        if _sql(n) in replace:
            return exp.column(replace[_sql(n)])
        if isinstance(n, exp.Column):
            raise KitError(f"{n.sql()} is neither grouped nor aggregated: add it to GROUP BY "
                           "or wrap it in an aggregate")
        return n
    return e.copy().transform(swap).sql(dialect="spark")


def _named(text: str, select: list) -> str:
    """An aggregate's SQL as Flink's plan names it: ``COUNT(*) AS c`` when the SELECT list
    aliases it, ``COUNT(*) AS EXPR$1`` when it is the list's unnamed second item."""
    for i, e in enumerate(select):
        inner = e.this if isinstance(e, exp.Alias) else e
        if _sql(inner) == text:
            alias = e.alias if isinstance(e, exp.Alias) else ""
            return f"{text} AS {alias if alias and not alias.startswith('_col_') else f'EXPR${i}'}"
    return text


def _sql(e) -> str:
    """``e`` as the user would write it (Spark SQL, columns unqualified)."""
    if e is None:
        return ""
    return e.copy().transform(lambda n: exp.column(n.name) if isinstance(n, exp.Column) else n).sql(dialect="spark")


def _conjuncts(e) -> list:
    if e is None:
        return []
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    return [e]


def _and(conds):
    conds = [c for c in conds if c is not None]
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = exp.And(this=out, expression=c)
    return out


def _rank_bound(cond, column: str, scope: _Scope):
    """``(lowest, highest)`` row numbers ``cond`` keeps when it bounds the row number
    ``column`` by integer literals (highest None: no upper bound), else None."""
    def is_rn(e):
        return isinstance(e, exp.Column) and scope.lookup(e) == column

    def number(e):
        return int(e.this) if isinstance(e, exp.Literal) and not e.is_string and e.this.lstrip("-").isdigit() else None

    if isinstance(cond, exp.Between) and is_rn(cond.this):
        lo, hi = number(cond.args["low"]), number(cond.args["high"])
        return (lo, hi) if lo is not None and hi is not None else None
    ops = {exp.LTE: "<=", exp.LT: "<", exp.EQ: "=", exp.GTE: ">=", exp.GT: ">"}
    op = ops.get(type(cond))
    if op is None:
        return None
    a, b = cond.this, cond.expression
    if is_rn(b) and number(a) is not None:      # N >= rn
        a, b, op = b, a, {"<=": ">=", "<": ">", "=": "=", ">=": "<=", ">": "<"}[op]
    if not is_rn(a) or number(b) is None:
        return None
    n = number(b)
    return {"<=": (1, n), "<": (1, n - 1), "=": (n, n), ">=": (n, None), ">": (n + 1, None)}[op]


def updating(query: Statement | str) -> bool:
    """Whether ``query`` has an operator that keeps state and may update what it emitted
    (GROUP BY, an aggregate, DISTINCT, a ranking OVER, a join): where a batch answer and
    Flink's changelog part. False for what sqlglot cannot read (Spark reports it)."""
    tree = Statement.of(query).tree
    if tree is None:
        return False
    return any(isinstance(n, (exp.Group, exp.AggFunc, exp.Window, exp.Join)) or
               (isinstance(n, exp.Select) and n.args.get("distinct") is not None) for n in tree.walk())


def parse(query: Statement | str, schema: dict) -> exp.Expression:
    """``query``'s tree (a copy: qualifying changes it) qualified against ``schema`` ({table:
    {column: type}})."""
    tree = Statement.of(query).mutable()       # sqlglot cannot read it: a SqlError at its line and column
    try:
        return qualify(tree, schema=schema, dialect="spark", quote_identifiers=False,
                       validate_qualify_columns=True, expand_stars=True)
    except OptimizeError as error:
        raise KitError(str(error)) from None


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def plan(query: Statement | str, streams: dict) -> tuple[Node, list]:
    """The operator tree of ``query`` over ``streams`` ({name: kit.Stream}) and its output
    names. The aggregates' types are left to the run (``AggCall.type`` None): Spark gives them."""
    # sqlglot parses a schema's names unless they are plain (``c;`` would read as ``c``): others go quoted
    schema = {name: {c if _PLAIN_NAME.match(c) else sparksql.name(c): "STRING" for c in stream_columns(s)}
              for name, s in streams.items()}
    tree = parse(query, schema)
    planner = _Planner(streams)
    node, names = planner._settled(planner.block(tree))
    return node, names
