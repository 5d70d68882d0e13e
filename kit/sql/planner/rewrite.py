"""The constructs ``kit.sql`` runs outside dynamic tables, as placeholders the planner reads.

Window TVFs, MATCH_RECOGNIZE, temporal (``FOR SYSTEM_TIME AS OF``) and interval joins, an
ORDER BY on the time attribute and an OVER aggregate ordered by it have no node in
``logical``'s operator tree. ``Special.rewrite`` changes a copy of the query's one tree (the
kit's Flink dialect: ``kit.sql.dialect``) so the logical planner can read it: a window TVF's
or a MATCH_RECOGNIZE's node becomes a placeholder table with its output's columns, a
temporal join a regular join (its ``FOR SYSTEM_TIME AS OF`` taken off), a sort is taken off
(``Special.sort``); the builders it leaves put Flink's nodes (``Match``, ``TemporalJoin``,
``IntervalJoin``, the window TVF's scan) back when ``physical.Converter`` meets a
placeholder. Nodes are replaced, no text is spliced and parsed again. For example::

    SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' MINUTES))
    ->  SELECT * FROM __kit_special_0

An OVER aggregate ordered by a time attribute, which the logical planner refuses, is routed
(``flink_error`` raises ``TimeOver``) to ``time_over``, Flink's insert-only OverAggregate.
"""

from __future__ import annotations

from types import SimpleNamespace

from sqlglot import exp

from ...errors import KitError
from ..dialect import Flink, MatchRecognize, at, span
from ..errors import error_at
from ..interval import find_interval_joins
from ..query import find_match_recognize
from ..statement import Statement
from ..temporal import find_temporal_joins
from ..windows import find_windows
from . import logical as P
from .physical import PhysicalNode, exchange, join_needs, scan

__all__ = ["Special", "TimeOver", "flink_error", "temporal_sort", "time_over"]


class Special:
    """The constructs kit.sql runs outside dynamic tables (window TVFs, MATCH_RECOGNIZE,
    temporal and interval joins, a sort on time, OVER on time): each becomes a placeholder
    table the dynamic planner reads (or a join it plans), and its Flink nodes replace it."""

    def __init__(self, statement: Statement, streams: dict, plan):
        self.statement = statement
        self.streams = {k.lower(): (k, v) for k, v in streams.items()}
        self.plan = plan               # (query, streams) -> its PhysicalNode: the planner, for a subquery
        self.tables = dict(streams)    # what the dynamic planner sees: streams and placeholders
        self.builders = {}
        self.windows = {}              # placeholder of a window TVF -> (WindowCall, stream)
        self.sort = None

    def rewrite(self) -> Statement:
        """The query the logical planner reads: the user's ``Statement`` itself when there is
        nothing to replace, else a copy of its tree with each construct's node replaced by a
        placeholder table (or, for a temporal join, its ``FOR SYSTEM_TIME AS OF`` taken off),
        written back as text: rendering, not parsing (module doc of ``statement``). The finders
        of window TVFs and joins give their nodes of the tree, MATCH_RECOGNIZE's the offset where
        its node starts."""
        tree = twins = None

        def copied(original):
            """The node of the copy of the tree that stands for ``original``, a node of the tree."""
            nonlocal tree, twins
            if tree is None:
                tree = self.statement.mutable()
                twins = {id(a): b for a, b in zip(self.statement.tree.walk(), tree.walk())}
            return twins[id(original)]

        for start, (_, _, spec) in find_match_recognize(self.statement, ()).items():
            found = at(self.statement.tree, MatchRecognize, start)
            if found is None:
                raise error_at(self.statement.text, "the planner finds no MatchRecognize here in sqlglot's tree of "
                               "the query", start)
            match = copied(found)
            match.replace(_table(self._match(match, spec), match.args.get("alias")))
        for call in (call for _, call in find_windows(self.statement).values()):
            table = copied(call.node)
            table.replace(_table(self._window(call), table.args.get("alias")))
        for call in find_temporal_joins(self.statement).values():
            # FOR SYSTEM_TIME AS OF <time>: a regular join to the dynamic planner, a TemporalJoin here
            if not call.lateral:
                copied(call.node).set("version", None)
            self.builders[("join", self._name(call.table))] = self._temporal
        for call in find_interval_joins(self.statement, lambda n: self.streams.get(n.lower(), (None, None))[1]).values():
            self.builders[("join", self._name(call.right))] = self._interval
        if tree is None:
            return self._order_by(self.statement)
        return self._order_by(Statement(tree.sql(dialect=Flink), tree))    # the tree stands for its text

    def _name(self, table):
        return self.streams.get(table.lower(), (table, None))[0]

    def _placeholder(self, columns, time, build) -> str:
        name = f"__kit_special_{len(self.builders)}"
        self.tables[name] = SimpleNamespace(source=SimpleNamespace(columns=list(columns)), time=time, proctime=None)
        self.builders[name] = build
        return name

    def _base(self, table: str):
        key = table.lower()
        if key not in self.streams:
            cte = _cte(self.statement, table)
            if cte is not None and P.updating(cte):
                raise KitError("The window function requires the timecol is a time attribute type, but is "
                               f"TIMESTAMP(3). (Flink 2.3's planner: {table} is an updating query, whose columns "
                               "are no time attributes any more: a window needs a stream's event time)")
            raise KitError(f"table {table} is not a kit.Stream: a window TVF or MATCH_RECOGNIZE reads a table "
                           "passed to kit.sql")
        name, s = self.streams[key]
        columns = P.stream_columns(s)
        return name, s, columns

    # -- MATCH_RECOGNIZE: partition columns and measures (ONE ROW PER MATCH), insert-only

    def _match(self, match, spec) -> str:
        """``match``, a MATCH_RECOGNIZE and its table ref, as a placeholder."""
        source = match.this                     # the table ref it reads: a table, or (a subquery)
        columns = [*spec.partition_by, *[x.alias for x in spec.measures]]

        def build(_node):
            if isinstance(source, exp.Subquery):
                part = self.statement.part(source.this)    # inside its parentheses
                child = self.plan(part, {n: s for n, s in self.streams.values()})
            else:
                name, s, cols = self._base(source.name)
                child = scan(name, s, cols, cols)
            order = ", ".join(f"{o.column} {'ASC' if o.ascending else 'DESC'}" for o in spec.order_by)
            measures = ", ".join(f"FINAL({x.expr}) AS {x.alias}" for x in spec.measures)
            detail = (f"partitionBy=[{', '.join(spec.partition_by)}], orderBy=[{order}], measures=[{measures}], "
                      f"rowsPerMatch=[{spec.rows_per_match}]")
            node = PhysicalNode("Match", detail, [exchange(list(spec.partition_by), {}, child)],
                                attrs={"fixed": True, "out": list(_node.columns)})
            return node, {}, None
        return self._placeholder(columns, None, build)

    # -- window TVF: its table with window_start, window_end, window_time

    def _window(self, call) -> str:
        name, s, cols = self._base(call.table)
        columns = cols + ["window_start", "window_end", "window_time"]

        def build(node):
            return scan(name, s, list(node.columns[:len(cols)]), cols), {}, None
        placeholder = self._placeholder(columns, "window_time", build)
        self.windows[placeholder] = (call, s)
        return placeholder

    # -- temporal and interval joins over the planned regular join

    def _temporal(self, n, left, right, names):
        detail = f"joinType=[{'InnerJoin' if n.how == 'inner' else 'LeftOuterJoin'}], where=[{n.shown_condition}], " \
                 f"select=[{', '.join(n.names)}]"
        node = PhysicalNode("TemporalJoin", detail, [exchange(n.left_keys, names, left),
                                                     exchange(n.right_keys, names, right)],
                            attrs=join_needs(n, times=True))
        return node, names, None

    def _interval(self, n, left, right, names):
        how = {"inner": "InnerJoin", "left": "LeftOuterJoin", "right": "RightOuterJoin", "full": "FullOuterJoin"}
        detail = f"joinType=[{how[n.how]}], where=[{n.shown_condition}], select=[{', '.join(n.names)}]"
        node = PhysicalNode("IntervalJoin", detail, [exchange(n.left_keys, names, left),
                                                     exchange(n.right_keys, names, right)],
                            attrs=join_needs(n, times=True))
        return node, names, None

    # -- ORDER BY: only the time attribute, ascending (TemporalSort)

    def _order_by(self, statement: Statement) -> Statement:
        tree = statement.tree
        order = tree.args.get("order") if isinstance(tree, exp.Select) else None
        if order is None:
            return statement
        if tree.args.get("limit"):
            raise KitError("ORDER BY ... LIMIT over a stream: a Top-N the kit plans from ROW_NUMBER() only")
        items = order.expressions
        temporal_sort(statement, {s.time.lower() for _, s in self.streams.values() if s.time})
        self.sort = ", ".join(f"{o.this.name} {'DESC' if o.args.get('desc') else 'ASC'}" for o in items)
        tree = statement.mutable()
        tree.set("order", None)
        return Statement(tree.sql(dialect="spark"), tree)    # the tree stands for its text: no parse


def temporal_sort(statement: Statement, times: set) -> None:
    """Flink's planner on the ORDER BY of ``statement`` (a SELECT) over a stream whose time
    attributes are ``times`` (lower case): without LIMIT (a Top-N) it must start with one of
    them, ascending, a temporal sort (rows leave in time order as the watermark passes); a
    SqlError with Flink's words, at the ORDER BY, otherwise. A name the SELECT list gives a
    time attribute counts as one."""
    select = statement.tree
    order = select.args.get("order")
    if order is None or select.args.get("limit"):
        return
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias) and (
        isinstance(e.this, exp.Column) and e.this.name.lower() in times
        or isinstance(e.this, exp.Anonymous) and e.this.name.upper().endswith(("_ROWTIME", "_PROCTIME")))}
    first = order.expressions[0]
    if not (isinstance(first.this, exp.Column) and first.this.name.lower() in times | aliases
            and not first.args.get("desc")):
        raise error_at(statement.text, "Sort on a non-time-attribute field is not supported. (Flink 2.3's "
                       "planner: a stream is sorted only by its time attribute, ascending, as rows pass the "
                       "watermark, or with LIMIT, a Top-N; sort the result instead: .orderBy(...) on the "
                       "DataFrame, final(), changelog())", (span(first) or (0,))[0])


def _table(name: str, alias) -> exp.Table:
    """A table ``name`` [AS ``alias``] (a placeholder in place of a construct)."""
    table = exp.Table(this=exp.to_identifier(name))
    if alias is not None:
        table.set("alias", alias)
    return table


def _cte(statement: Statement, name: str) -> Statement | None:
    """The query of WITH ``name`` in ``statement``, or None."""
    tree = statement.tree
    with_ = tree.args.get("with_") or tree.args.get("with") if tree is not None else None
    for cte in (with_.expressions if with_ is not None else []):
        if cte.alias_or_name.lower() == name.lower():
            return Statement(cte.this.sql(dialect=Flink), cte.this)
    return None


def flink_error(error: KitError, statement: Statement, special) -> KitError:
    """The kit planner's refusal of ``statement`` (the query it read) as Flink's planner words
    it, where Flink refuses too."""
    message = str(error)
    if "OVER window ordered by a time attribute" in message or "Non-time attribute sort" in message:
        times = {s.time.lower() for _, s in special.streams.values() if getattr(s, "time", None)}
        windows = list(statement.tree.find_all(exp.Window))
        if windows and all(w.args.get("order") and w.args["order"].expressions[0].this.name.lower() in times
                           for w in windows):
            return TimeOver(statement, special)
    return error


class TimeOver(KitError):
    """Raised to route an OVER aggregate ordered by a time attribute (not a kit dynamic table)."""

    def __init__(self, statement, special):
        super().__init__("an OVER aggregate ordered by a time attribute")
        self.statement, self.special = statement, special


def time_over(statement: Statement, special) -> PhysicalNode:
    """``SELECT ..., agg OVER (PARTITION BY p ORDER BY t ...) FROM stream``: Flink's OverAggregate
    on the time attribute (insert-only: each row's result is final when the watermark passes it)."""
    tree = statement.tree
    table = tree.find(exp.Table)
    name, s, cols = special._base(table.name)
    windows = list(tree.find_all(exp.Window))
    w = windows[0]
    partition = [p.name for p in w.args.get("partition_by") or []]
    order = w.args["order"].expressions[0]
    spec = w.args.get("spec")
    frame = spec.sql(dialect="spark") if spec is not None else "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
    calls = ", ".join(f"{x.this.sql(dialect='spark')} AS w0$o{i}" for i, x in enumerate(windows))
    node = PhysicalNode("OverAggregate", f"{'partitionBy=[' + ', '.join(partition) + '], ' if partition else ''}"
                        f"orderBy=[{order.this.name} ASC], window=[ {frame}], select=[{', '.join(cols)}, {calls}]",
                        [exchange(partition, {}, scan(name, s, cols, cols))],
                        attrs={"time_ordered": True, "fixed": True})
    return PhysicalNode("Calc", f"select=[{', '.join(e.alias_or_name for e in tree.expressions)}]", [node],
                        attrs={"fixed": True})
