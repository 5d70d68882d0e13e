"""``DynamicTable``: what ``kit.sql`` returns for a continuous query over streams.

A continuous query's result is a table that changes as rows arrive; Flink sends its
changes downstream as a changelog. The result keeps both views::

    t = kit.sql("SELECT user, COUNT(url) AS cnt FROM clicks GROUP BY user", clicks=clicks)

    t.changelog()              t.snapshot(at=2)      t.final()
    seq  op  user  cnt         user  cnt             user  cnt
    0    +I  Mary  1           Mary  2               Mary  2
    1    +I  Bob   1           Bob   1               Bob   1
    2    -U  Mary  1                                 Liz   1
    2    +U  Mary  2
    3    +I  Liz   1

``changelog()`` columns: ``seq`` (the arrival that caused the change), ``op`` (Flink's row
kind), the query's columns (named as the same query run as a batch names them, typed as Flink
types them: ``kit.aggregate_types.result_type``), ``watermark`` (the watermark when that row arrived,
like ``Stream.df``'s; none for a stream without event time) and ``proctime`` (its processing
time; only for a stream with a clock), ordered as a single-task Flink job emits them. Flink's conversions (``to_append_stream``,
``to_retract_stream``, ``to_changelog_stream``, ``to_upsert_stream``) are below; the sink
(``sink="retract"`` or ``"upsert"``) decides whether update-before rows are sent at all.

For other DataFrame methods the result stands for ``final()`` (``t.toPandas()``,
``t.columns``), so code that ran the query as a batch keeps working.
"""

from __future__ import annotations

import functools
import numbers
import re
from dataclasses import replace
from functools import cached_property

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import jvm, sparksql
from ..errors import KitError
from ..spark import replay_tasks
from ..stream import rows_of
from ..time import Clock
from .planner import logical as P, table_plan
from .planner.physical import ascending_top1, ignores_retractions, monotonic_order
from .statement import Statement
from ..changelog import (ALL, DELETE, INSERT, INSERT_ONLY, KINDS, UPDATE_AFTER, UPDATE_BEFORE, Changelog, Options,
                        from_stream, mode_text)
from ..aggregate_types import result_type

__all__ = ["DynamicTable", "SINKS"]

SINKS = ("retract", "upsert")
# up to this many cores, a fused fold of the arrivals makes an order-free final table faster than
# the batch query (10M words, the cascade, Parquet on 2 cores: one file 2.5 s against 6.5 s, 8 files
# 2.4 s against 2.8 s): a parallel scan and a shuffle gain less than the fold's dictionary lookups save
FOLD_CORES = 2
# the changelog's own columns beside the result's, and those it or a conversion adds
_OWN = ("seq", "_op", "_n", "_pt", "_wm", "op", "watermark", "proctime", "flag", "after_expiry")


class DynamicTable:
    """A continuous query's result (see the module doc)."""

    def __init__(self, root: P.Node, batch: DataFrame, options: Options, sink: str = "retract",
                 query: Statement | str = ""):
        if sink not in SINKS:
            raise KitError(f"sink={sink!r} is not one of {list(SINKS)}")
        self.root, self.batch, self.options, self.sink = root, batch, options, sink
        self.statement = Statement.of(query)     # kit.sql's read of the query: explain() reads it again
        self.query = self.statement.text
        self.columns = list(batch.columns)
        taken = [c for c in self.columns if c.lower() in _OWN]   # (Spark's names ignore case)
        if taken:
            raise KitError(f"the query's result has column(s) {taken} named like the changelog's own {list(_OWN)}: "
                           f"give them another name (e.g. {taken[0]} AS {taken[0].lstrip('_')}_; Flink reserves none, the kit these)")
        self.streams = _streams(root)

    # ------------------------------------------------------------ the changelog

    @cached_property
    def log(self) -> Changelog:
        """The root operator's changelog, its columns named as the batch query's and typed as
        Flink's (``kit.aggregate_types.result_type``: the AVG of an INT an INT, a ROW_NUMBER a BIGINT)."""
        run = PlanRun(self)
        log = run.node(self.root, update_before=self.sink == "retract")
        self._expired, self._late = run.expired, run.late
        return self._named(log)

    def _named(self, log: Changelog) -> Changelog:
        """The root's changelog ``log``, its columns named as the batch query's."""
        if len(log.columns) != len(self.columns):
            raise KitError(f"internal: the plan gives {len(log.columns)} columns, the query {len(self.columns)}")
        names = dict(zip(log.columns, self.columns))
        df = log.df.selectExpr("_op", *[f"{c} AS {sparksql.name(n)}" for c, n in zip(log.columns, self.columns)],
                               "seq", "_n", "_pt", *["_wm"] * log.marked)
        key = tuple(names[c] for c in log.upsert_key) if log.upsert_key is not None and all(
            c in names for c in log.upsert_key) else None
        return Changelog(df, tuple(self.columns), log.mode, key, log.in_order, marked=log.marked)

    @property
    def mode(self) -> frozenset:
        """The row kinds the query may emit (Flink's changelog mode of the sink's input)."""
        return self.log.mode

    def changelog(self) -> DataFrame:
        """Every change, in the order Flink emits them (see the module doc for the columns);
        with a state TTL also ``after_expiry``: the arrival found a key's state expired in
        some operator (``expired_state()``), so what it changed started afresh."""
        return self._changes(self.log, self.expired_state())

    def _changes(self, log: Changelog, expired: DataFrame | None) -> DataFrame:
        """``changelog()`` of the root's changelog ``log``, with the state its run found
        ``expired`` (``expired_state()``'s rows, or None)."""
        cols = ["seq", "_op AS op", *map(sparksql.name, self.columns)]
        if log.marked and log.in_order:   # the operator gave each change its watermark, in order: as it is
            s = self.streams[0]
            cols += [f"{s.watermark_sql('_wm')} AS watermark"] if s.time is not None else []
            cols += ["timestamp_millis(_pt) AS proctime"] if s.proctime is not None else []
            return log.df.selectExpr(*cols)
        df, marks = log.df, self._arrival_marks()
        one = _tasks(self.streams) == 1      # seed-sized: in one partition, sorted with no shuffle
        if one:
            df = df.coalesce(1)
        if marks is not None:
            df = df.join(F.broadcast(marks) if one else marks, "seq", "left")
        cols += ["watermark"] if marks is not None and "watermark" in marks.columns else []
        cols += ["proctime"] if marks is not None and "proctime" in marks.columns else []
        if expired is not None:
            df = df.join(expired.select("seq").distinct().selectExpr("seq", "true AS after_expiry"), "seq", "left")
            cols.append("coalesce(after_expiry, false) AS after_expiry")
        return df.orderBy("seq", "_n").selectExpr(*cols)

    def expired_state(self) -> DataFrame | None:
        """With ``table.exec.state.ttl``: each key whose state an operator (a group aggregate,
        a Top-N, an OVER, a deduplication) found expired (Flink forgets it without a trace):
        ``operator``, ``seq`` (the arrival that found it), ``key`` (JSON), ``last_write`` and
        ``proctime`` (then); None without a TTL."""
        self.log
        return _union(self._expired)

    def late_rows(self) -> DataFrame | None:
        """The rows a keep-first deduplicate on event time dropped as late (below the watermark
        they arrived at; Flink drops them without a trace): ``operator``, ``seq``, ``row`` (JSON),
        ``time`` and ``watermark``; None when no operator drops rows."""
        self.log
        return _union(self._late)

    def snapshot(self, at: int | None = None) -> DataFrame:
        """The table after arrival ``at`` (its ``seq``: the first arrival is 0; None: after the
        last), sorted by its columns. An ``at`` past the last arrival gives the table after the
        last, as the stream then has no more rows to change it."""
        if at is not None and (not isinstance(at, numbers.Integral) or isinstance(at, bool)):
            raise KitError(f"snapshot(at=...) takes an arrival number (seq, an integer from 0); got {at!r}")
        if at is not None and at < 0:
            raise KitError(f"snapshot(at={at}): arrivals are numbered from 0 (seq); at=0 is the table after the first")
        from ..changelog import snapshot
        return snapshot(self.log, None if at is None else int(at), one=_tasks(self.streams) == 1)

    def final(self) -> DataFrame:
        """The table once every row has arrived, as the changelog leaves it (``snapshot()``),
        sorted by its columns: the batch query's rows, but for one case, as in Flink: a global
        aggregate (no GROUP BY) over no rows has sent nothing, so its table is empty where the
        batch query gives one row (``COUNT(*)`` 0). Where group aggregates and Calcs alone make
        it and the order of the arrivals cannot change it (``_order_free``), Spark runs the
        batch query over the sources, in parallel -- but over CSV or JSON files that the kit's
        passes read themselves (``jvm.read_by_lines``), whose parse in Spark's batch read costs
        more than the fold below, and on a session of at most ``FOLD_CORES`` cores where that
        fold takes the query straight from sources not parsed row by row (Parquet, say). Else,
        where group aggregates fused over a stream make the
        table (through Calcs), their pass folds the arrivals in without emitting and gives the
        last table alone (``aggregate_compiled.chain``'s ``final``): the same rows as the
        changelog's snapshot, without the changes. Planned once: the table's DataFrame methods
        (``t.count()``, ``t.show()``) read the same DataFrame."""
        return self._final_table

    @cached_property
    def _final_table(self) -> DataFrame:
        from ..changelog import snapshot
        top = self.root
        while isinstance(top, P.Calc):
            top = top.input
        batch = self._order_free() and not any(jvm.read_by_lines(s.source) for s in self.streams)
        if batch and not (isinstance(top, P.GroupAggregate) and _cores(self.batch) <= FOLD_CORES
                          and not any(jvm.parses_rows(s.source) for s in self.streams)):
            return self._batch_table()
        if not isinstance(top, P.GroupAggregate):
            return self.snapshot(None)
        try:
            log = PlanRun(self, final=top, fused_only=batch).node(self.root, update_before=self.sink == "retract")
        except _Unfused:
            return self._batch_table()
        if batch and log.mode != INSERT_ONLY:   # (a snapshot of the changes would cost more)
            return self._batch_table()
        if log.mode == INSERT_ONLY:   # the fold's last table alone (a group aggregate's changes have updates)
            # sorted in its one task: a global sort would sample it first, running the fold twice
            return self._sorted(log.df.select(*[sparksql.name(c) for c in log.columns]), one=True)
        return snapshot(self._named(log), None, one=_tasks(self.streams) == 1)

    def _batch_table(self) -> DataFrame:
        """The batch query's rows, sorted by its columns."""
        return self._sorted(self.batch)

    def _sorted(self, df: DataFrame, one: bool = False) -> DataFrame:
        """``df``'s rows (the table's columns in order) sorted by them, named as the query's;
        ``one``: in one partition, with no shuffle."""
        places = [f"_c{i}" for i in range(len(self.columns))]   # the query may repeat a name
        order = [F.col(c).asc_nulls_first() for c in places]
        df = df.toDF(*places)
        return (df.coalesce(1).sortWithinPartitions(*order) if one else df.orderBy(*order)).toDF(*self.columns)

    def _order_free(self) -> bool:
        """Whether the final table is the batch query's answer over the sources' rows in any
        order: the plan holds group aggregates by keys and Calcs alone, each aggregate typed alike in
        Spark and Flink (``_spark_types_agree``; a state TTL, a Top-N's ties, a
        dedup's first row go by arrivals), over streams without processing time (the batch
        reads the sources' columns: ``Stream.columns_only``), and Spark's plan of the query
        is deterministic and sums no FLOAT or DOUBLE values (``jvm.order_free``)."""
        def plain(n: P.Node) -> bool:   # (a global aggregate: the batch gives a row over no rows, Flink none)
            own = isinstance(n, (P.Source, P.Calc)) or isinstance(n, P.GroupAggregate) and bool(n.keys)
            return own and all(map(plain, n.inputs))

        return (plain(self.root) and self.options.ttl_ms == 0 and all(s.proctime is None for s in self.streams)
                and _spark_types_agree(self.root)
                and jvm.available(self.batch.sparkSession, "Internal") and jvm.order_free(self.batch))

    # ------------------------------------------------------------ Flink's conversions

    def to_changelog_stream(self) -> DataFrame:
        """Flink's ``toChangelogStream``: every change with its row kind (``changelog()``)."""
        return self.changelog()

    def to_append_stream(self) -> DataFrame:
        """Flink's ``toAppendStream``: the rows of an insert-only query (``seq`` first); a query
        that updates its rows fails, as in Flink."""
        if not self.log.insert_only:
            raise KitError(f"toAppendStream doesn't support consuming update changes which is produced by "
                           f"node {self._producer()}: the query updates rows it has emitted "
                           f"(changelog mode {mode_text(self.log.mode)}); use to_retract_stream() or "
                           "to_changelog_stream()")
        return self.changelog().drop("op")

    def to_retract_stream(self) -> DataFrame:
        """Flink's ``toRetractStream``: ``flag`` True adds the row, False retracts it."""
        return _flagged(self.changelog())

    def to_upsert_stream(self) -> DataFrame:
        """Flink's upsert stream: ``flag`` True upserts the row by its unique key, False deletes
        the row with that key. The changes of the query planned for an upsert sink (as with
        ``sink="upsert"``): its operators make no update-before rows but where one above needs
        them, a filter over an aggregate's updates (HAVING), which then reach the sink as deletes,
        as an upsert connector writes them (upsert-kafka's tombstones): ``HAVING COUNT(*) < 2``
        over Mary, Mary gives (True, Mary, 1), (False, Mary, 1). Needs the key the plan derives
        (a GROUP BY's keys); without one it fails, as Flink does."""
        log, expired = self._upserts
        if log.upsert_key is None:
            raise KitError(f"the query has no unique key (node {self._producer()}), so it cannot be an upsert "
                           f"stream: an upsert stream needs one, e.g. the keys of a GROUP BY; use "
                           f"to_retract_stream()")
        return _flagged(self._changes(log, expired))

    @cached_property
    def _upserts(self) -> tuple:
        """The root's changelog planned for an upsert sink and the state its run found expired:
        ``log``'s where the sink is one, else planned again without update-before rows where
        no operator above needs them (a third of the cascade's changes, made to be dropped)."""
        if self.sink == "upsert":
            return self.log, self.expired_state()
        run = PlanRun(self)
        return self._named(run.node(self.root, update_before=False)), _union(run.expired)

    @property
    def upsert_key(self) -> tuple | None:
        """The columns that identify a row of the result (None: none known)."""
        return self.log.upsert_key

    # ------------------------------------------------------------ the plan

    def explain(self, physical: bool = True) -> str:
        """The plan as Flink's ``EXPLAIN CHANGELOG_MODE INSERT INTO <sink> <query>`` prints it:
        Flink's physical nodes (scan, watermark assigner, exchanges, operators, sink), each
        with the row kinds it emits after the update-before decision (``kit.sql.planner``).
        ``physical=False``: the kit's own operator tree (one Calc per SELECT list and per
        aggregate's arguments), with the same decision."""
        if physical:
            return table_plan(self).tree()
        modes = PlanRun(self).modes(self.root, update_before=self.sink == "retract")
        return P.explain_tree(self.root, lambda n: f", changelogMode=[{mode_text(modes[id(n)])[1:-1]}]")

    def messages(self) -> list:
        """What each operator of the plan sends downstream when it runs: one dict per operator
        (top first) with ``node`` (Flink's label), ``changelogMode`` and the number of rows of
        each kind (``+I``, ``-U``, ``+U``, ``-D``). Each operator runs with the update-before
        decision of the plan (it sends ``-U`` only when its consumer needs them), so the same
        query into a retract and an upsert sink shows the messages the decision saves. A
        ``TableSourceScan`` sends its stream's rows as inserts. Runs Spark jobs: one per
        operator, and a count of each stream whose rows are not known yet."""
        out = []
        for node in table_plan(self).walk():
            kit_node = node.attrs.get("kit")
            if node.name == "TableSourceScan":
                out.append({"node": node.flink_label(), "changelogMode": mode_text(node.mode),
                            **{k: node.attrs["stream"].rows if k == INSERT else 0 for k in KINDS}})
            if kit_node is None:
                continue
            log = PlanRun(self).node(kit_node, update_before=UPDATE_BEFORE in node.mode)
            counts = {r["_op"]: r["count"] for r in log.df.groupBy("_op").count().collect()}
            out.append({"node": node.flink_label(), "changelogMode": mode_text(node.mode),
                        **{k: int(counts.get(k, 0)) for k in KINDS}})
        return out

    def _producer(self) -> str:
        node = self.root
        while isinstance(node, P.Calc):
            node = node.input
        return node.label()

    def _arrival_marks(self) -> DataFrame | None:
        """``seq``, ``watermark`` (none without event time) and ``proctime`` (with one) of each
        arrival, for one input stream; None for several, or for one with neither."""
        if len(self.streams) != 1:
            return None
        s = self.streams[0]
        marks = ["watermark"] * (s.time is not None) + ["proctime"] * (s.proctime is not None)
        return s.df.select("seq", *marks) if marks else None

    # ------------------------------------------------------------ as a DataFrame

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if hasattr(type(self), name):   # its own attribute failed with an AttributeError: that error, not a DataFrame's
            return object.__getattribute__(self, name)
        return getattr(self.final(), name)

    def __repr__(self):
        return f"DynamicTable({', '.join(self.columns)}; changelog mode {mode_text(self.mode)})"


def _flagged(changes: DataFrame) -> DataFrame:
    """Flink's retract and upsert conversions of ``changes`` (``changelog()``'s columns):
    ``seq``, ``flag`` (True for +I and +U, False for -U and -D), then its other columns."""
    return changes.selectExpr("seq", f"op IN ('{INSERT}', '{UPDATE_AFTER}') AS flag",
                              *[sparksql.name(c) for c in changes.columns if c not in ("seq", "op")])


def _union(frames: list) -> DataFrame | None:
    """The rows of ``frames`` (by column name) in one DataFrame; None for none."""
    return functools.reduce(DataFrame.unionByName, frames) if frames else None


class _Unfused(Exception):
    """A final table asked of a fused fold (``PlanRun.fused_only``) that the fold does not take."""


def _cores(df: DataFrame) -> int | float:
    """The cores ``df``'s session runs tasks on (its default parallelism; Connect too), or
    infinity where the kit's classes are not in it (no fused fold there)."""
    if not jvm.available(df.sparkSession, "Chain"):
        return float("inf")
    return jvm.bridge.dataset(df).sparkSession().sparkContext().defaultParallelism()


def _tasks(streams: list) -> int:
    """``kit.spark.replay_tasks`` of the streams' rows (their arrival scans count them)."""
    return replay_tasks(streams[0].source.sparkSession, rows_of(streams))


def _source(s, numbered: bool = True) -> Changelog:
    """Stream ``s``'s arrivals as ``PlanRun.sources`` has them (``from_stream``)."""
    columns = P.stream_columns(s)
    return from_stream(s, columns, [f"_s{i}" for i in range(len(columns))], numbered)


def _streams(root: P.Node) -> list:
    """The distinct streams the plan reads, in the order FROM names them."""
    out = []
    for n in _nodes(root):
        if isinstance(n, P.Source) and all(s is not n.stream for s in out):
            out.append(n.stream)
    return out


def _nodes(node: P.Node):
    """The plan's nodes, ``node`` first, depth first."""
    yield node
    for n in node.inputs:
        yield from _nodes(n)


class PlanRun:
    """One run of a plan: each node's changelog, from the sources up."""

    def __init__(self, table: DynamicTable, final: P.GroupAggregate | None = None, fused_only: bool = False):
        self.table, self.final = table, final   # final: a fused chain with this top gives its last table alone
        self.fused_only = fused_only   # and only that: else _Unfused is raised (the batch query does better)
        self.unnumbered = {}       # id(stream): its arrivals unnumbered, while a fused chain that numbers them is planned
        self.expired = []          # per aggregate with a state TTL: the keys whose state expired
        self.late = []             # per keep-first deduplicate on event time: the rows it dropped as late

    @cached_property
    def sources(self) -> dict:
        """{id(stream): its arrivals as an insert-only changelog, the values named ``_s0``,
        ``_s1``... by position (a column the user named ``_pt`` or ``_op`` clashes with nothing)}."""
        streams = self.table.streams
        if len(streams) == 1:
            return {id(streams[0]): _source(streams[0])}
        from ..changelog.join import merge
        options = self.table.options.extra
        logs = merge(streams, options.get("interleave", "event_time"), options.get("clock"))
        return {id(s): log for s, log in zip(streams, logs)}

    def node(self, n: P.Node, update_before: bool) -> Changelog:
        """The changelog of ``n``; ``update_before``: whether its consumer needs ``-U`` rows."""
        if isinstance(n, P.Source):
            log = self.unnumbered.get(id(n.stream)) or self.sources[id(n.stream)]
            df = log.df.selectExpr("_op", *[f"{sparksql.name(c)} AS {i}" for c, i in zip(log.columns, n.columns)],
                                   "seq", "_n", "_pt")
            return Changelog(df, tuple(n.columns), INSERT_ONLY, None)
        if isinstance(n, P.Calc):
            # a filter over updates needs -U whatever its consumer needs: a row an update takes out
            # of the filter is retracted by its -U (Flink's Calc asks its input for UB then too)
            log = self.node(n.input, update_before or bool(n.where))
            df = log.df.where(n.where) if n.where else log.df
            df = df.selectExpr("_op", *n.select, "seq", "_n", "_pt", *["_wm"] * log.marked)
            return Changelog(df, tuple(n.columns), log.mode, _through(n, log.upsert_key), log.in_order, log.ticks,
                             log.marked)
        if isinstance(n, P.GroupAggregate):
            from ..changelog.aggregate import group_aggregate
            chained = self._chained(n, update_before)
            if chained is not None:
                return chained
            if self.fused_only:
                raise _Unfused
            log = self.node(n.input, True)
            calls = [replace(c, retract=False) if ignores_retractions(c, n) else c for c in _typed(log, n.calls)]
            out, expired = group_aggregate(log, list(n.keys), calls, self._with(update_before))
            self._expired(n, list(n.keys), dict(zip(n.keys, n.names)), expired)
            return out
        if isinstance(n, P.Rank):
            from ..changelog.rank import rank_strategy, top_n
            log = self.node(n.input, True)
            strategy = rank_strategy(log, list(n.partition), monotonic_order(n))
            if ascending_top1(n) and log.insert_only:   # Flink's insert-only Top-1: a lone +U, no -U
                out = top_n(log, list(n.partition), list(n.order), 1, n.row_number, self._with(False),
                            strategy=strategy)
                out = replace(out, mode=INSERT_ONLY)
            else:
                out = top_n(log, list(n.partition), list(n.order), n.end, n.row_number,
                            self._with(update_before), offset=n.start, strategy=strategy)
            return self._expired(n, list(n.partition), dict(zip(n.columns, n.names)), out.expired, out)
        if isinstance(n, P.Deduplicate):
            out = self._deduplicate(n, self.node(n.input, True), update_before)
            self._expired(n, list(n.keys), dict(zip(n.columns, n.names)), out.expired)
            if n.row_number is None:
                return out
            df = out.df.selectExpr("*", f"CAST(1 AS BIGINT) AS {n.row_number}")
            return out.with_df(df.selectExpr("_op", *out.columns, n.row_number, "seq", "_n", "_pt"),
                               columns=tuple(out.columns) + (n.row_number,))
        if isinstance(n, P.Over):
            from ..changelog.over import over_aggregate
            log = self.node(n.input, True)
            out = over_aggregate(log, list(n.partition), list(n.order), list(n.calls), n.frame,
                                 self._with(update_before))
            return self._expired(n, list(n.partition), dict(zip(n.columns, n.names)), out.expired, out)
        if isinstance(n, P.Join):
            from ..changelog.join import join
            left, right = self.node(n.left, True), self.node(n.right, True)
            return join(left, right, n.how, list(n.left_keys), list(n.right_keys), n.condition,
                        self._with(update_before))
        if isinstance(n, P.Union):
            logs = [self.node(p, update_before) for p in n.parts]
            df = logs[0].df
            for log in logs[1:]:
                df = df.unionByName(log.df)
            return Changelog(df, tuple(n.columns), frozenset().union(*(log.mode for log in logs)), None)
        raise KitError(f"internal: no operator for {type(n).__name__}")

    def _chained(self, n: P.GroupAggregate, update_before: bool) -> Changelog | None:
        """``n`` and the group aggregates below it, fused (``aggregate.chain``), when each
        reads the one below through Calcs that only copy what it reads and the lowest reads
        Calcs of one stream; None otherwise, or where the fused pass does not apply."""
        from ..changelog.aggregate_compiled import chain
        levels, node = [], n
        while True:
            inputs, below, filtered = _copied(node.input)
            levels.append((node, inputs))
            reads = [*node.keys, *(a.arg for a in node.calls if a.arg is not None)]
            if not isinstance(below, P.GroupAggregate) or filtered or any(inputs[c] is None for c in reads):
                break
            node = below
        if not isinstance(below, P.Source) or any(ignores_retractions(c, level)
                                                  for level, _ in levels for c in level.calls):
            return None   # (the fused pass retracts every aggregate: a non-retracting MAX is the reference's)
        # the columns the lowest level reads, when it copies them from the stream's source
        stream, named = below.stream, dict(zip(below.columns, below.source_columns))
        source = {c: named.get(column) for c, column in inputs.items()}
        direct = jvm.available(stream.source.sparkSession, "ArrivalScan") and not filtered and all(
            source.get(c) in stream.source.columns for c in reads)
        if self.fused_only and not direct:   # (only a pass over the source gives the last table alone)
            return None
        levels.reverse()
        options = self._with(update_before)
        # where the pass reads the source and numbers the arrivals itself, its input's columns
        # and partitions alone matter: no arrival scan for them (a mini-batch's ticks need a clock's)
        numbers = direct and (stream.proctime is None or (isinstance(stream.proctime, Clock) and options.mini_batch is None))
        if numbers:
            self.unnumbered[id(stream)] = _source(stream, numbered=False)
        try:
            log = self.node(levels[0][0].input, True)
        finally:
            self.unnumbered.pop(id(stream), None)
        return chain(log, [(list(a.keys), list(a.calls), inputs if i else None) for i, (a, inputs) in enumerate(levels)],
                     options, (stream, source) if direct else None, final=self.final is n)

    def _deduplicate(self, n: P.Deduplicate, log: Changelog, update_before: bool) -> Changelog:
        """A deduplicate's changelog; keeping the first row on event time, its late rows go
        to ``late``."""
        from ..changelog.deduplicate import deduplicate, late_rows
        marks = self.table._arrival_marks() if n.time and n.keep == "first" else None
        out = deduplicate(log, list(n.keys), n.keep, self._with(update_before), time=n.time, marks=marks)
        if marks is not None:
            late = late_rows(log, n.time, marks)
            fields = ", ".join(f"{sparksql.string(name)}, {c}" for c, name in zip(n.input.columns, n.names))
            self.late.append(late.selectExpr(f"{sparksql.string(n.label())} AS operator", "seq",
                                             f"to_json(named_struct({fields})) AS row", f"{n.time} AS time",
                                             "watermark"))
        return out

    def _expired(self, n: P.Node, keys: list, names: dict, expired: DataFrame | None, out=None):
        """Keep ``expired`` (an operator's expirations: ``keys``, ``seq``, ``last_write_pt``,
        ``pt``) for ``expired_state()``, each key as JSON by the names the query gives its
        columns (``names``); returns ``out``."""
        if expired is not None:
            key = ", ".join(f"{sparksql.string(names.get(k, k))}, {sparksql.name(k)}" for k in keys) or "'', NULL"
            self.expired.append(expired.selectExpr(
                f"{sparksql.string(n.label())} AS operator", "seq", f"to_json(named_struct({key})) AS key",
                "timestamp_millis(last_write_pt) AS last_write", "timestamp_millis(pt) AS proctime"))
        return out

    def _with(self, update_before: bool) -> Options:
        """The query's options for one operator: ``update_before`` and ``tasks``, the tasks a
        replay of the query's input rows is spread over (``kit.spark.replay_tasks``: one for
        seed-sized inputs), as many as known then (the arrival scans of the operators below
        have counted them, or a fused chain)."""
        return replace(self.table.options, update_before=update_before, tasks=_tasks(self.table.streams))

    def modes(self, n: P.Node, update_before: bool) -> dict:
        """{id(node): the row kinds it emits}, inferred bottom-up as Flink's planner does."""
        out = {}

        def walk(node, ub):
            if isinstance(node, P.Calc) and node.where:
                ub = True
            kids = [walk(child, ub if isinstance(node, (P.Calc, P.Union)) else True) for child in node.inputs]
            if isinstance(node, P.Source):
                mode = INSERT_ONLY
            elif isinstance(node, (P.Calc, P.Union)):
                mode = frozenset().union(*kids)
            elif isinstance(node, P.GroupAggregate):
                mode = frozenset({INSERT, UPDATE_AFTER} | ({UPDATE_BEFORE} if ub else set())
                                 | ({DELETE} if kids[0] != INSERT_ONLY else set()))
            elif (isinstance(node, P.Deduplicate) and node.keep == "first" or ascending_top1(node)) \
                    and kids[0] == INSERT_ONLY:
                mode = INSERT_ONLY
            elif isinstance(node, (P.Rank, P.Over, P.Deduplicate)):   # Flink 2.3 declares D for all three
                mode = ALL if ub else frozenset({INSERT, UPDATE_AFTER, DELETE})
            elif node.how == "inner":   # an inner join changes what its inputs change
                changed = frozenset().union(*kids)
                mode = changed - {UPDATE_BEFORE} | ({UPDATE_BEFORE} if ub and UPDATE_AFTER in changed else set())
            else:                       # an outer join also retracts its padded rows
                mode = ALL if ub else frozenset({INSERT, UPDATE_AFTER, DELETE})
            out[id(node)] = mode
            return mode
        walk(n, update_before)
        return out


def _typed(log: Changelog, calls: list) -> list:
    """``calls`` with Flink's result types (``kit.aggregate_types.result_type``: the AVG of an INT
    an INT, where Spark's batch query gives a DOUBLE)."""
    types = {f.name: f.dataType for f in log.df.schema.fields}
    return [replace(c, type=result_type(c.function, types.get(c.arg))) for c in calls]


def _spark_types_agree(node: P.Node) -> bool:
    """Whether every group aggregate under ``node`` gives Spark's batch type, which is then
    Flink's: COUNT, MIN, MAX, a SUM of BIGINT or DOUBLE, an AVG of DOUBLE, over columns
    copied from a stream or an aggregate below (Spark widens the SUM of an INT to BIGINT,
    Flink keeps INT: ``kit.aggregate_types.result_type``)."""
    def typed(n: P.Node, column: str) -> T.DataType | None:
        copies, below, _ = _copied(n)
        column = copies.get(column)
        if column is None:
            return None
        if isinstance(below, P.Source):
            named = dict(zip(below.columns, below.source_columns))
            fields = {f.name: f.dataType for f in below.stream.source.schema.fields}
            return fields.get(named.get(column))
        if isinstance(below, P.GroupAggregate):
            call = next((c for c in below.calls if c.name == column), None)
            if call is None:
                return typed(below.input, column)
            arg = None if call.arg is None else typed(below.input, call.arg)
            return T._parse_datatype_string(result_type(call.function, arg)) if call.arg is None or arg else None
        return None

    for n in _nodes(node):
        for c in n.calls if isinstance(n, P.GroupAggregate) else ():
            f = c.function.upper()
            if f in ("SUM", "AVG") and not (isinstance(typed(n.input, c.arg), T.DoubleType)
                                            or f == "SUM" and isinstance(typed(n.input, c.arg), T.LongType)):
                return False
    return True


def _copies(calc: P.Calc) -> dict:
    """{output column: the input column it copies} of a Calc."""
    copies = {}
    for text, out in zip(calc.select, calc.columns):
        m = re.fullmatch(r"`?(\w+)`?(?: AS `?(\w+)`?)?", text.strip())
        if m:
            copies[out] = m.group(1)
    return copies


def _copied(node: P.Node) -> tuple[dict, P.Node, bool]:
    """Below the Calcs that end at ``node``: ``{column of node: the column it copies there}``
    (None: computed), the node there, and whether one of those Calcs filters rows."""
    below, copies, filtered = node, {c: c for c in node.columns}, False
    while isinstance(below, P.Calc):
        own = _copies(below)
        copies = {c: own.get(column) for c, column in copies.items()}
        filtered = filtered or bool(below.where)
        below = below.input
    return copies, below, filtered


def _through(calc: P.Calc, key: tuple | None) -> tuple | None:
    """The upsert key ``key`` of a Calc's input as the Calc's columns (None: a key column is dropped)."""
    if key is None:
        return None
    outputs = {}
    for out, source in _copies(calc).items():
        outputs.setdefault(source, out)
    if not all(k in outputs for k in key):
        return None
    return tuple(outputs[k] for k in key)
