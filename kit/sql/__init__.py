"""Flink SQL in, Spark DataFrame out: ``kit.sql(query, **tables)``.

Example::

    kit.sql('''
        SELECT * FROM Ticker MATCH_RECOGNIZE (
            PARTITION BY symbol ORDER BY rowtime
            MEASURES C.price AS lastPrice
            PATTERN (A B*? C)
            DEFINE A AS A.price > 10, B AS B.price < 15, C AS C.price > 12
        )''', Ticker=kit.data.load("ticker_greedy_reluctant"))

The tables the Spark SQL reads are registered as temporary views under unique internal
names for the call (so concurrent calls and the user's own views never collide) and dropped
once the result is built. Each ``<table or (subquery)> MATCH_RECOGNIZE (...)`` runs on the
matcher (``kit.match_recognize``; a table goes in as given, a ``kit.Stream`` whole, with its
watermarks) and is replaced by a view of its rows; the rest of the query (projection, WHERE, joins, GROUP BY,
ORDER BY) runs as Spark SQL. Errors, Spark's included, are ``SqlError``s that point at the
line and column of ``query``.

Window TVFs (``FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' HOUR))``, HOP,
CUMULATE, SESSION; arguments by position or by name) become views with ``window_start``,
``window_end``, ``window_time``; a window aggregation over a stream drops the rows late for
their window into ``result.late_rows``, as Flink does (``windows.py``).

The legacy group windows (``GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), user`` with
``TUMBLE_START``/``TUMBLE_END``/``TUMBLE_ROWTIME``, ``HOP``, ``SESSION``) run the same way.

Interval joins: a join of two ``kit.Stream``s whose condition bounds one's event time by the
other's (``FROM Orders o, Shipments s WHERE o.id = s.order_id AND o.order_time BETWEEN
s.ship_time - INTERVAL '4' HOUR AND s.ship_time``, or ``[LEFT|RIGHT|FULL] [OUTER] JOIN ... ON``
with ``>=``/``>``/``<=``/``<`` pairs) run Flink's event-time interval join
(``kit.joins.interval``): rows Flink drops as late never appear, even when their times fit,
and outer joins pad what Flink pads (``interval.py``; ``result.interval_joins``). Joins
of tables that are not both streams, or without both a lower and an upper bound on the
two event times, stay plain Spark SQL joins (no late row is dropped for them).

Continuous queries: a query over ``kit.Stream``s only with an operator that keeps state and
updates what it emitted -- a non-windowed GROUP BY (COUNT, SUM, AVG, MIN, MAX, DISTINCT),
SELECT DISTINCT, Top-N and deduplication (``ROW_NUMBER() OVER (...)`` filtered by ``rn <=
N``), regular joins -- is planned as Flink plans it (``kit.sql.planner.logical``) and returns a
``DynamicTable`` (``kit.sql.table``): its changelog with Flink's row kinds, its table at
any arrival, Flink's conversions; ``sink="upsert"`` drops update-before rows. Its columns
are named as the same query run as a batch and typed as Flink types them (an AVG of an INT
is an INT, truncated; Spark's batch query gives a DOUBLE: ``kit.aggregate_types.result_type``). Other queries over streams read the annotated rows (``Stream.df``) as a table.

Over live streams (``kit.live(...)``) a continuous query (joins too) returns a ``LiveTable``,
a window TVF aggregation a ``LiveWindowTable`` (``kit.sql.live``), a MATCH_RECOGNIZE a
``LiveMatchTable``, a temporal table join a ``LiveJoinTable``: ``start(path)`` runs it on
Spark Structured Streaming, the same operators micro-batch by micro-batch.

Not translated: a MATCH_RECOGNIZE whose input is a CTE name (use a subquery); a window
TVF or group window over anything but a table passed to ``kit.sql`` (a CTE, view or
subquery); processing-time windows (``PROCTIME()``, ``*_PROCTIME``); Flink functions Spark
spells differently. Window joins, Top-N and deduplication over a TVF run as plain Spark SQL
(no late rows are dropped for them).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import replace

import pandas
import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.errors.exceptions.base import QueryContextType
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type
from sqlglot import exp
from sqlglot.tokens import TokenType

from ..errors import KitError
from ..time import WatermarkStrategy
from ..live.stream import LiveStream
from .. import match_recognize as matching  # looked up per call, so tests can stand in
from .. import sparksql
from ..match_recognize.errors import MatchRecognizeError, NotSupportedByFlink
from ..match_recognize.matcher import SEMANTICS
from ..spark import spark as session
from ..stream import Stream, check_column_names
from .errors import SqlError, position
from ..match_recognize.format import to_sql
from .lexer import delimited_to_backquoted
from .match_recognize import match_options, parse_match_recognize, resolve_subqueries, subqueries_of
from .query import Resolver, Rewritten, clauses, rewrite
from .temporal import find_temporal_joins, join_options, plan as plan_temporal
from .interval import true_pairs
from ..joins.interval import IntervalJoin, LINK_LEFT, LINK_RIGHT
from ..joins.lookup import LookupTable
from ..joins.versioned import VERSION, TemporalTableFunction
from ..windows.functions import Aggregates
from ..windows.live import LiveDataStream
from .options import dynamic_options
from .statement import Statement
from .table import SINKS, DynamicTable
from .live import LiveJoinTable, LiveMatchTable, LiveTable, LiveWindowTable
from .planner import logical as dynamic_plan, physical_plan
from .planner.rewrite import temporal_sort
from .planner.changelog_mode import reads_inserts
from .windows import find_group_window, find_windows, groups_by_window, validate, windowed
from .window_aggregate import window_aggregate, window_shape
from .interval import find_interval_joins

__all__ = ["SEMANTICS", "SqlError", "clauses", "parse_match_recognize", "sql", "to_sql"]


_QUERIES = ("SELECT", "WITH", "VALUES", "TABLE", "FROM")


def sql(query: str, semantics: str = "flink", aggregates: dict | None = None, config: dict | None = None,
        sink: str = "retract", **tables):
    """Run Flink SQL ``query`` over ``tables`` (Spark or pandas DataFrames, or ``kit.Stream``s,
    by the names the query uses) and return a Spark DataFrame -- or, for a continuous query
    over streams (module doc), a ``DynamicTable`` whose changelog a ``sink`` (``"retract"``
    or ``"upsert"``) receives.

    Under ``semantics="standard"`` a double-quoted name (``"Price"``) is a delimited identifier of
    standard SQL, case-sensitive (Flink's SQL rejects the double quote; it back-quotes names).

    ``aggregates`` maps names to user aggregate functions (PyFlink's ``AggregateFunction``:
    ``create_accumulator``, ``accumulate``, ``get_value``) that MATCH_RECOGNIZE may call.

    ``config`` holds table options: ``table.exec.state.ttl`` (a ``Duration``, a ``timedelta``, milliseconds or
    Flink's ``'2 h'``/``'30 min'``/``'10 s'``/``'500 ms'``), for continuous queries the
    mini-batch and aggregation options of ``kit.sql.options``, and for temporal joins
    ``kit.join.interleave`` (``replay.INTERLEAVINGS``) and ``kit.join.clock`` (a ``Clock``
    over the merged arrivals, for state retention); interval joins take the interleaving
    too (they clean their state by event time, so the TTL does not apply to them).
    MATCH_RECOGNIZE takes ``kit.match-recognize.step-budget`` (the most steps its matcher
    may take in one partition: rows met by partial matches plus rows its DEFINEs'
    aggregates read; default ``1_000_000 + 200 * rows``) and ``kit.match-recognize.max-threads``
    (semantics="standard": the most live threads, default 10,000); past them the query
    fails with TooManyThreads instead of running for minutes.

    The versioned table of a temporal join (``FOR SYSTEM_TIME AS OF``) is a ``kit.Stream`` with
    a ``primary_key``, or a ``WITH`` query that deduplicates a stream (``ROW_NUMBER() OVER
    (PARTITION BY key ORDER BY time DESC) = 1``, Flink's versioned view); each temporal join
    run is in ``result.temporal_joins`` (``TemporalJoin``: ``fates()``, ``emissions()``).

    When a MATCH_RECOGNIZE reads a ``kit.Stream``, the rows it dropped as late (Flink drops
    them silently) are in ``result.late_rows``: a DataFrame of the input rows with their
    ``seq`` and the ``watermark`` that made them late (a list when several inputs are streams).
    With one MATCH_RECOGNIZE, ``result.match_details`` has every input row with its
    ``match_number``, ``classifier`` and ``late`` (see ``MatchResult.details``), for
    ``kit.viz.match_timeline``. Each interval join run is in ``result.interval_joins``
    (``IntervalJoin``: ``details()`` has the rows it dropped as late).
    """
    if not isinstance(query, str):
        raise KitError(f"kit.sql takes the query as a string of Flink SQL; got {_short(query)} "
                       f"({type(query).__name__})")
    if semantics not in SEMANTICS:
        raise KitError(f"semantics={semantics!r} is not one of " + ", ".join(map(repr, SEMANTICS)))
    if config is not None and not isinstance(config, Mapping):
        raise KitError(f"config takes a mapping of option names to values, e.g. {{'table.exec.state.ttl': '1 h'}}; "
                       f"got {type(config).__name__}")
    if semantics == "standard":   # delimited identifiers ("Name"), which Flink's SQL rejects
        query = delimited_to_backquoted(query)
    aggregates = {name.upper(): function for name, function in (aggregates or {}).items()}
    statement, run, dynamic = _prepared(query, semantics, aggregates, config)
    if sink not in SINKS:
        raise KitError(f"sink={sink!r} is not one of {list(SINKS)}")
    if any(isinstance(t, LiveStream) for t in tables.values()):
        kind = live(statement, tables)
        if kind == "match":
            return _live_match(run, statement, tables, config)
        if kind == "join":
            return _live_temporal(run, statement, tables, config)
        if kind == "window":
            return _live_window(run, statement, tables, config)
        return LiveTable(_continuous(run, statement, tables, dynamic, sink), tables, config)
    if continuous(statement, tables):
        return _continuous(run, statement, tables, dynamic, sink)

    if semantics != "standard" and isinstance(statement.tree, exp.Select):   # Flink's planner on a stream's ORDER BY
        read = {t.name.lower() for t in statement.tree.find_all(exp.Table)}
        streams = [t for name, t in tables.items() if isinstance(t, Stream) and name.lower() in read]
        windowed = {"window_time"} if find_windows(statement) or find_group_window(statement) else set()
        windowed.add("seq")   # the kit's arrival order: the order the stream has
        if streams:
            temporal_sort(statement, windowed | {n.lower() for s in streams for n in (s.time, s.proctime,
                                                 s.kit_columns.get("proctime")) if isinstance(n, str)})

    def probe(name, frame):   # the same statement over another table: no second read of the text
        again = _Run(run.spark, statement, semantics, aggregates)
        again.match_options, again.options = run.match_options, run.options
        return _batch(again, statement, {name: frame}, aggregates)

    fast = window_aggregate(statement, tables, probe)
    return fast if fast is not None else _batch(run, statement, tables, aggregates)


def _prepared(query: str, semantics: str, aggregates: dict, config: dict | None) -> tuple:
    """``query`` read once (every reader below gets the ``Statement``), its ``_Run`` with the
    options of ``config`` for MATCH_RECOGNIZE and joins, and those for continuous queries."""
    statement = Statement(query)
    run = _Run(session(), statement, semantics, aggregates)
    run.match_options, config = match_options(config or {})
    dynamic, config = dynamic_options(config)
    run.options = join_options(config)
    return statement, run, dynamic


def replayed(query: str, tables: dict, config: dict | None = None, sink: str = "retract") -> DynamicTable:
    """``query`` over the streams ``tables`` planned as a continuous query, even one that only
    appends: a live query's replay (``kit.sql.live``) has a changelog whatever its query."""
    statement, run, dynamic = _prepared(query, "flink", {}, config)
    return _continuous(run, statement, tables, dynamic, sink)


def _batch(run, statement: Statement, tables: dict, aggregates: dict) -> DataFrame:
    """``statement`` run by ``run`` as Spark SQL over ``tables`` (the rewrite runs what Spark
    lacks on the way), with what it dropped or matched as attributes of the result."""
    keep = run.keeps_views()
    try:
        for name, table in tables.items():
            run.register(name, table)
        result = run.sql(rewrite(statement, run, aggregates))
    finally:
        if not keep:
            run.drop()
    if VERSION in result.columns:                # the temporal joins' link, not the user's
        result = result.drop(VERSION)
    if LINK_LEFT in result.columns or LINK_RIGHT in result.columns:   # the interval joins' link
        result = result.drop(LINK_LEFT, LINK_RIGHT)
    if run.late:
        # nothing lost silently: the rows Flink would drop as late, per MATCH_RECOGNIZE input
        result.late_rows = run.late[0] if len(run.late) == 1 else run.late
    if len(run.matches) == 1:   # planned when read (~0.1 s of py4j calls)
        result = sparksql.made_when_read(result, match_details=run.matches[0].details)
    if run.temporal_joins:
        result.temporal_joins = run.temporal_joins
    if run.interval_joins:
        result.interval_joins = run.interval_joins
    return result


def continuous(statement: Statement, tables: dict) -> bool:
    """Whether ``statement`` is a continuous query over streams that ``kit.changelog`` runs: it
    reads only ``kit.Stream``s, has an operator that updates what it emitted (GROUP BY,
    DISTINCT, Top-N, a join: ``dynamic.plan.updating``) and none of what the rewrite runs
    itself (MATCH_RECOGNIZE, window TVFs and group windows, temporal and interval joins).
    Other queries over streams read the annotated rows (``Stream.df``: ``seq``,
    ``watermark``...) as a table: their answer is the append-only stream's rows."""
    streams = {name.lower(): t for name, t in tables.items() if isinstance(t, Stream)}
    if not streams or len(streams) != len(tables):
        return False
    tree = statement.tree
    if tree is None or not {name.name.lower() for name in tree.find_all(exp.Identifier)} & set(streams):
        return False
    return dynamic_plan.updating(statement) and not (
        _own_operator(statement) or find_interval_joins(statement, lambda n: streams.get(n.lower())))


def _own_operator(statement: Statement) -> bool:
    """Whether ``statement`` has what the rewrite runs as its own operator: MATCH_RECOGNIZE, a
    temporal join (``FOR SYSTEM_TIME AS OF``, LATERAL), a window TVF or a group window."""
    tree = statement.tree
    return (tree is not None and tree.find(exp.MatchRecognize, exp.Version, exp.Lateral) is not None) or bool(
        find_windows(statement) or find_group_window(statement) or groups_by_window(statement))


def live(statement: Statement, tables: dict) -> str:
    """What ``statement`` over live streams is: ``"match"`` (a MATCH_RECOGNIZE,
    ``kit.match_recognize.live``), ``"join"`` (a temporal table join, ``kit.joins.live``),
    ``"window"`` (a window TVF aggregation: ``kit.sql.live.LiveWindowTable``) or
    ``"continuous"`` (a continuous query, regular joins among them: ``kit.sql.live``): live mode runs those; for
    anything else a KitError says why not."""
    if not all(isinstance(t, LiveStream) for t in tables.values()):
        raise KitError(f"a query over a live stream reads live streams only; got "
                       f"{', '.join(f'{n}: {type(t).__name__}' for n, t in tables.items())}")
    tree = statement.tree
    if (tree is not None and tree.find(exp.Lateral) is not None) or find_group_window(statement) \
            or (groups_by_window(statement) and not find_windows(statement)):
        raise KitError("live mode runs continuous queries (GROUP BY, DISTINCT, Top-N, deduplication, OVER, joins), "
                       "window TVF aggregations, MATCH_RECOGNIZE and temporal table joins (FOR SYSTEM_TIME AS OF) "
                       "over live streams; group windows (GROUP BY TUMBLE(...)) and temporal table functions are the "
                       "replay's (kit.stream), and DataStream windows run live: kit.live(...).key_by(...).window(...)")
    if find_windows(statement):
        return "window"
    named = {name.lower(): t for name, t in tables.items()}
    if find_interval_joins(statement, lambda n: named.get(n.lower())):
        raise KitError("live mode runs regular joins and temporal table joins (FOR SYSTEM_TIME AS OF) over live "
                       "streams; an interval join (a join on time bounds) is the replay's (kit.stream)")
    if tree is not None and tree.find(exp.Version) is not None:
        return "join"
    return "match" if tree is not None and tree.find(exp.MatchRecognize) is not None else "continuous"


def _live_temporal(run, statement: Statement, tables: dict, config: dict | None) -> LiveJoinTable:
    """The temporal table join of ``statement`` over two live streams, planned as over
    ``kit.stream``s of no rows (their twins): the join checked as Flink checks it, the query
    around it analysed over the twins' linked sides (``kit.sql.query``)."""
    calls = list(find_temporal_joins(statement).values())
    if len(calls) != 1 or statement.tree.find(exp.MatchRecognize) is not None:
        raise KitError("live mode runs one temporal table join (FOR SYSTEM_TIME AS OF) per query, with nothing "
                       "else that keeps state: the replay (kit.stream) runs the rest")
    if run.options:
        raise KitError(f"live mode runs the temporal join on event time without {', '.join(sorted(config or {}))} "
                       "(state retention and interleavings are the replay's)")
    twins = {name: Stream.of(run.spark.createDataFrame([], s.source.schema), time=s.time, watermark=s.watermark,
                             primary_key=list(s.primary_key) or None) for name, s in tables.items()}
    try:
        for name, twin in twins.items():
            run.register(name, twin)
        rewritten = rewrite(statement, run, run.aggregates)
        columns = run.sql(rewritten).columns
        ((lview, rview, _),) = run.joins.values()
        wanted = {view: run.spark.table(view).columns for view in (lview, rview)}   # a versioned view's own
        read = {view: run.spark.table(view).schema for view in run.views.values()}
    finally:
        run.drop()
    (join,) = run.temporal_joins   # by event time: a live stream has no processing-time attribute
    name = {id(t.source): n for n, t in twins.items()}
    left, right = name[id(join.left.source)], name[id(join.right.source)]
    named = [t for t in statement.tree.find_all(exp.Table) if t.name.lower() == right.lower()]
    if run.views and not (join.deduplicate and set(run.views) == {right.lower()} and len(named) == 1):
        raise KitError("live mode runs a temporal join that reads the two live streams themselves, in a query "
                       "that reads them nowhere else: the replay (kit.stream) runs the rest")
    spark, keeps = run.spark, run.keeps_views()

    def outer(lrows: DataFrame, rrows: DataFrame) -> DataFrame:
        """The query around the join over its two sides (each with ``__kit_v``)."""
        text, fresh = rewritten.text, []
        for view, schema in read.items():   # the versioned view's source, read by the join only
            made = f"{view}_{uuid.uuid4().hex[:8]}"
            spark.createDataFrame([], schema).createOrReplaceTempView(made)
            text, fresh = text.replace(view, made), [*fresh, made]
        for view, rows in ((lview, lrows), (rview, rrows)):
            have = {c.lower(): c for c in rows.columns}
            made = f"{view}_{uuid.uuid4().hex[:8]}"
            rows.select(*[F.col(have[c.lower()]) if c.lower() in have else F.lit(1).cast("long").alias(c)
                          for c in wanted[view]]).createOrReplaceTempView(made)
            text, fresh = text.replace(view, made), [*fresh, made]
        try:
            return spark.sql(text)
        finally:
            if not keeps:
                for made in fresh:
                    spark.catalog.dropTempView(made)

    def replayer(lrec: DataFrame, rrec: DataFrame) -> DataFrame:
        streams = {left: Stream.of(lrec, time=tables[left].time, order="_when", proctime="_when",
                                   watermark=WatermarkStrategy.from_column("_emits")),
                   right: Stream.of(rrec, time=tables[right].time, order="_when", proctime="_when",
                                    watermark=WatermarkStrategy.from_column("_emits"),
                                    primary_key=list(tables[right].primary_key) or None)}
        return sql(statement.text, run.semantics, run.aggregates, {**(config or {}), "kit.join.interleave": "proctime"},
                   **streams)

    schema = {n: ", ".join(f.simpleString() for f in t.source.schema.fields) for n, t in tables.items()}
    query = {"query": statement.text, "columns": repr(sorted(schema.items())),
             "time": repr(sorted((n, t.time) for n, t in tables.items())),
             "watermark": repr(sorted((n, repr(t.watermark)) for n, t in tables.items())),
             "key": repr(sorted((n, t.primary_key) for n, t in tables.items()))}
    return LiveJoinTable(tables[left], tables[right], join, columns, outer, replayer, query)


def _live_window(run, statement: Statement, tables: dict, config: dict | None) -> LiveWindowTable:
    """The window TVF aggregation of ``statement`` over a live stream, as the DataStream window
    that ``window_aggregate`` hands it to over a replay (``window_shape``), live; its output
    names and types those of the query over a ``kit.stream`` of no rows (its twin)."""
    def twin(s):
        return Stream.of(run.spark.createDataFrame([], s.source.schema), time=s.time, watermark=s.watermark)

    def probe(name: str):
        return sql(statement.text, run.semantics, run.aggregates, config, **{name: twin(tables[name])}).schema

    shape = window_shape(statement, tables, lambda s: isinstance(s, LiveDataStream), probe)
    if shape is None or not shape.keys or shape.order or shape.limit is not None or config:
        raise KitError("live mode runs a window TVF aggregation of this shape: SELECT <columns of GROUP BY, "
                       "window_start, window_end, window_time, COUNT(*), COUNT/SUM/AVG/MIN/MAX(column)> FROM "
                       "TABLE(TUMBLE(TABLE s, DESCRIPTOR(<s's event time>), size) | HOP(...)) GROUP BY <a column of s, "
                       "...>, window_start, window_end (no ORDER BY, LIMIT or config; a window over the whole "
                       "stream, CUMULATE and SESSION are the replay's: kit.stream)")
    stream = tables[shape.name]
    result = stream.key_by(*shape.keys).window(shape.assigner).aggregate(Aggregates(*shape.parts))

    def replayer(record: Stream) -> DataFrame:
        return sql(statement.text, run.semantics, run.aggregates, config, **{shape.name: record})

    return LiveWindowTable(result, shape, replayer)


def _live_match(run, statement: Statement, tables: dict, config: dict | None) -> LiveMatchTable:
    """The MATCH_RECOGNIZE of ``statement`` over the live stream of ``tables``, planned on a
    stream of no rows of the same columns: its twin (``MatchResult``) gives the clause checked
    and coerced, the query around it is analysed over the twin's rows."""
    if len(tables) != 1:
        raise KitError(f"live mode runs MATCH_RECOGNIZE over one live stream; got {len(tables)}: {', '.join(tables)}")
    if run.semantics == "standard":
        raise KitError("live mode runs MATCH_RECOGNIZE with Flink's semantics (semantics='standard' reads rows "
                       "a stream has not released: the replay's only)")
    ((name, stream),) = tables.items()
    empty = run.spark.createDataFrame([], stream.source.schema)
    try:
        run.register(name, Stream.of(empty, time=stream.time, watermark=stream.watermark))
        rewritten = rewrite(statement, run, run.aggregates)
        batch = run.sql(rewritten)
        read = name.lower() in run.views    # the stream read as a table beside the clause
        if len(run.matches) != 1 or run.matches[0].late is None or read:
            raise KitError("live mode runs one MATCH_RECOGNIZE that reads the live stream itself (not a query "
                           "over it), in a query that reads nothing else: the replay (kit.stream) runs the rest")
    finally:
        run.drop()
    (view,) = [v for v, label in run.labels.items() if label == "MATCH_RECOGNIZE"]
    spark, keeps = run.spark, run.keeps_views()

    def outer(matches: DataFrame) -> DataFrame:
        """The query around the clause over ``matches`` (the clause's rows)."""
        fresh = f"{view}_{uuid.uuid4().hex[:8]}"
        matches.createOrReplaceTempView(fresh)
        try:
            return spark.sql(rewritten.text.replace(view, fresh))
        finally:
            if not keeps:
                spark.catalog.dropTempView(fresh)

    def replayer(record: DataFrame) -> DataFrame:
        replayed = Stream.of(record, time=stream.time, order=["batch", "_arr"],
                             watermark=WatermarkStrategy.from_column("_emits"))
        return sql(statement.text, run.semantics, run.aggregates, config, **{name: replayed})

    query = {"query": statement.text, "columns": ", ".join(f.simpleString() for f in stream.source.schema.fields),
             "time": stream.time, "watermark": repr(stream.watermark), "config": repr(sorted((config or {}).items(), key=str))}
    return LiveMatchTable(stream, run.matches[0], batch.columns, outer, replayer, query)


def _continuous(run, statement: Statement, tables: dict, options, sink: str) -> DynamicTable:
    """``query`` planned as a tree of changelog operators; its batch twin (the same query over
    the streams' rows, as Spark SQL) gives the result's names and types and checks the query."""
    streams = {name: t for name, t in tables.items()}
    for name, s in streams.items():
        run.tables[name.lower()] = s.columns_only(dynamic_plan.stream_columns(s))   # analysed, never run
    try:
        batch = run.sql(rewrite(statement, run, {}))
        retention = run.options.get("retention")
        options = replace(options, ttl_ms=retention.ttl.to_milliseconds() if retention else 0,
                          extra={k: v for k, v in run.options.items() if k in ("interleave", "clock")})
        try:
            root, _ = dynamic_plan.plan(statement, streams)
        except KitError as error:
            raise SqlError(str(error), 1, 1, statement.text) from None
        return DynamicTable(root, batch, options, sink, statement)
    finally:
        if not run.keeps_views():
            run.drop()


class _Run(Resolver):
    """One ``sql`` call: its views on the session, the matcher calls and the error mapping."""

    def __init__(self, spark, statement: Statement, semantics, aggregates):
        self.spark, self.statement, self.query, self.semantics = spark, statement, statement.text, semantics
        self.aggregates = aggregates
        self.tag = uuid.uuid4().hex[:8]
        self.views = {}            # registered name, lower case -> internal view (made when first named)
        self.labels = {}           # internal view -> how messages name it
        self.streams = {}          # registered name, lower case -> kit.Stream
        self.late = []             # late rows of each stream a MATCH_RECOGNIZE read
        self.matches = []          # the MatchResult of each MATCH_RECOGNIZE
        self.tables = {}           # registered name, lower case -> the table as given
        self.joins = {}            # id(TemporalCall) -> (left view, right view, left qualifier)
        self.temporal_joins = []   # each TemporalJoin run
        self.interval_joins = []   # each IntervalJoin run

    def register(self, name, table):
        self.tables[name.lower()] = table
        if isinstance(table, (TemporalTableFunction, LookupTable)):
            return
        if not isinstance(table, (DataFrame, Stream, pandas.DataFrame)):
            raise KitError(f"table {name}: expected a Spark or pandas DataFrame or a kit.Stream, "
                           f"got {type(table).__name__}")
        check_column_names(f"table {name}", table.source.columns if isinstance(table, Stream) else table.columns)
        if isinstance(table, Stream):
            table.require_own_names(f"kit.sql (table {name})")
            self.streams[name.lower()] = table

    def _temp_view(self, frame, stem, label):
        view = f"__kit_{re.sub(r'[^0-9A-Za-z_]', '_', stem)}_{self.tag}_{len(self.labels)}"
        frame.createOrReplaceTempView(view)
        self.labels[view] = label
        return view

    def view(self, name):
        """The view of registered table ``name``, made when first asked for: a stream a join
        reads is never annotated as a table of its own."""
        key = name.lower()
        table = self.tables.get(key)
        if key not in self.views and table is not None and not isinstance(table, (TemporalTableFunction, LookupTable)):
            self.views[key] = self._temp_view(_frame(self.spark, table), name, name)
        return self.views.get(key)

    def match(self, source, spec, at, inner=None):
        if isinstance(source, Rewritten):
            if inner is not None:
                self._reads_inserts(inner)
            table = self.sql(source)
        elif source.lower() in self.streams:       # event time and watermarks go along
            table = self.streams[source.lower()]
        elif isinstance(self.tables.get(source.lower()), (DataFrame, pandas.DataFrame)):   # read as given: no view
            table = _frame(self.spark, self.tables[source.lower()])
        else:
            table = self.sql(_verbatim(self.query, source, at))
        try:
            spec = self.subqueries(spec)
            options = {"aggregates": self.aggregates} if self.aggregates else {}
            options.update(self.match_options)
            result = matching.match_recognize(table, spec, semantics=self.semantics, **options)
        except KitError as error:
            placed = self._placed(error)
            if placed is error:
                raise
            raise placed from None   # the same message, placed on the query: one is enough
        self.matches.append(result)
        if result.late is not None:
            self.late.append(result.late)
        return self._temp_view(result.rows, "match", "MATCH_RECOGNIZE")

    def _reads_inserts(self, inner: Statement) -> None:
        """Flink's check that a MATCH_RECOGNIZE reads an insert-only input: ``inner``, its input
        query, planned as a continuous query over the streams it reads (a GROUP BY, a Top-N, a
        keep-last deduplication, an outer join update what they emitted), or a ``KitError`` with
        Flink's message. A query the continuous planner does not plan runs as before."""
        if not self.streams or not dynamic_plan.updating(inner):
            return
        try:
            root = physical_plan(inner, None, **self.streams)
        except KitError:
            return
        reads_inserts("Match", root, root.kinds)

    def subqueries(self, spec):
        """``spec`` with its uncorrelated subqueries (DEFINE, MEASURES) run and replaced by
        their answers (semantics="standard"; Flink's MATCH_RECOGNIZE rejects them)."""
        found = subqueries_of(spec)
        if not found:
            return spec
        if self.semantics != "standard":
            raise NotSupportedByFlink("MATCH_RECOGNIZE", "a subquery in DEFINE or MEASURES", found[0].pos)

        def answer(node):
            try:
                frame = self.sql(rewrite(self.statement.subquery(node.pos), self, self.aggregates))
            except SqlError as error:   # placed on the subquery in the user's text
                raise MatchRecognizeError("MATCH_RECOGNIZE", f"the subquery ({node.text}): {error.message}",
                                          node.pos) from None
            return [tuple(r) for r in frame.collect()], frame.schema
        return resolve_subqueries(spec, answer)

    def register_query(self, name, source):
        """The answer of ``source`` (a WITH query a window reads) as table ``name``."""
        self.tables[name.lower()] = self.sql(source)

    def window(self, call, drop_late):
        name = call.table.lower()
        if self.view(name) is None:
            raise SqlError(f"unknown table {call.table}: pass it as kit.sql(..., {call.table}=df)",
                           *position(self.query, call.table_at), self.query)
        frame = self.spark.table(self.views[name])
        validate(call, frame, self.streams.get(name), self.query)
        rows, late = windowed(frame, call, drop_late and name in self.streams)
        if late is not None:
            self.late.append(late)
        return self._temp_view(rows, call.kind.lower(), f"{call.kind}({call.table})")

    def temporal(self, call):
        if id(call) not in self.joins:
            join, qualifier, columns = plan_temporal(call, self.tables, self.statement, **self.options)
            left, right = join.views()
            if columns is not None:              # a versioned view's own columns (its rownum is 1)
                have = {c.lower(): c for c in right.columns}
                right = right.select(*[F.col(have[c.lower()]) if c.lower() in have else
                                       F.lit(1).cast("long").alias(c) for c in columns], VERSION)
            self.temporal_joins.append(join)
            self.joins[id(call)] = (self._temp_view(left, call.left, call.left),
                                    self._temp_view(right, call.table, call.table), qualifier)
        return self.joins[id(call)]

    def stream(self, name):
        return self.streams.get(name.lower())

    def interval(self, call):
        if id(call) not in self.joins:
            join = IntervalJoin(self.streams[call.left.lower()], self.streams[call.right.lower()], call.keys,
                                call.bounds, call.how, self.options.get("interleave", "event_time"),
                                self.options.get("clock"))
            left, right = join.views()
            if call.how != "inner":                # the pairs that meet all of ON (module doc of sql.interval)
                views = (self._temp_view(left, call.left, call.left), self._temp_view(right, call.right, call.right))
                met = self.sql(true_pairs(call, self.statement, *views))
                left, right = join.views(met.toDF(LINK_LEFT, LINK_RIGHT))
            self.interval_joins.append(join)
            self.joins[id(call)] = (self._temp_view(left, call.left, call.left),
                                    self._temp_view(right, call.right, call.right))
        return self.joins[id(call)]

    def schema(self, query: Rewritten):
        return self.sql(query).schema

    def sql(self, rewritten: Rewritten):
        """``spark.sql`` of ``rewritten``, its errors turned into SqlErrors on the user's text
        (parse and analysis errors, and those of constants Spark checks then: a DECIMAL(99, 2),
        an INTERVAL '-' SECOND)."""
        try:
            return self.spark.sql(rewritten.text)
        except PySparkException as error:
            raise self._error(error, rewritten) from None

    def _placed(self, error: KitError) -> KitError:
        """A matcher error that knows its ``pos`` as a SqlError on the user's text."""
        pos = getattr(error, "pos", None)
        if isinstance(error, SqlError) or not pos:
            return error
        message = re.sub(r" \(line \d+, column \d+\)$", "", str(error))
        return SqlError(message, *pos, self.query)

    def _error(self, error, rewritten) -> SqlError:
        condition = (error.getCondition() if hasattr(error, "getCondition") else error.getErrorClass()) or ""
        if self.statement.tree is None and not condition.startswith("PARSE_"):
            return self.statement.parse_error   # Spark read what sqlglot cannot: sqlglot says where
        message = str(error).strip().split("\n")[0]
        message = re.split(r"\s*SQLSTATE:", message)[0]
        for view, label in self.labels.items():
            message = message.replace(view, label)
        # the joins' link columns are no names the user can use: not among Spark's suggestions
        message = re.sub(r"\[([^\[\]]*__kit_[^\[\]]*)\]", lambda m: "[" + ", ".join(
            name for name in m.group(1).split(", ") if "__kit_" not in name) + "]", message)
        offset = _spark_offset(error, rewritten.text)
        if offset is not None:
            offset = rewritten.source_offset(offset)
        else:
            offset = _named_offset(error, self.statement, rewritten)
        line, column = position(self.query, offset)
        return SqlError(message, line, column, self.query)

    def keeps_views(self) -> bool:
        """Whether the views must outlive the call. Classic Spark analyses ``spark.sql``
        eagerly, so a query's result holds the views' plans and they can go; Spark Connect
        analyses lazily, and a statement that is not a query (CREATE VIEW ...) may keep
        referring to them."""
        if type(self.spark).__module__.startswith("pyspark.sql.connect"):
            return True
        first = next((t for t in self.statement.read() if t.token_type != TokenType.L_PAREN), None)
        return not (first and first.token_type != TokenType.IDENTIFIER and first.text.upper() in _QUERIES)

    def drop(self):
        for view in self.labels:
            self.spark.catalog.dropTempView(view)


def _short(value, width: int = 60) -> str:
    """``repr(value)``, cut to ``width`` characters."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _frame(spark, table):
    """``table`` as a Spark DataFrame."""
    if isinstance(table, DataFrame):
        return table
    if isinstance(table, Stream):
        return table.df
    if len(table) == 0:   # Spark cannot infer types from no rows: take them from the dtypes
        return spark.createDataFrame(table, schema=_empty_schema(table))
    return spark.createDataFrame(table)          # pandas (register checked the type)


def _empty_schema(table: pandas.DataFrame) -> T.StructType:
    """The Spark schema of a pandas DataFrame with no rows, from its dtypes (as Arrow reads
    them); a column of no known type (object) is STRING, a naive datetime a TIMESTAMP."""
    fields = []
    for field in pa.Schema.from_pandas(table, preserve_index=False):
        if pa.types.is_null(field.type):
            dtype = T.StringType()
        elif pa.types.is_timestamp(field.type):
            dtype = T.TimestampType()
        else:
            dtype = from_arrow_type(field.type)
        fields.append(T.StructField(field.name, dtype, True))
    return T.StructType(fields)


def _verbatim(query, name, start) -> Rewritten:
    """``SELECT * FROM name`` for an unregistered table, mapped onto ``name`` in ``query``."""
    out = Rewritten(query)
    out.replace("SELECT * FROM ", start)
    out.copy(start, start + len(name))
    return out


def _spark_offset(error, text):
    """The offset of ``text`` a Spark error points at: its query context, else the
    ``line L, pos P`` (0-based pos) of its message; None when it names no place."""
    for context in error.getQueryContext() or ():
        if context.contextType() == QueryContextType.SQL and context.startIndex() >= 0:
            return context.startIndex()
    found = re.search(r"line (\d+),? pos (\d+)", str(error))
    if not found:
        return None
    line, pos = int(found.group(1)), int(found.group(2))
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return starts[min(line, len(starts)) - 1] + pos


def _named_offset(error, statement: Statement, rewritten) -> int:
    """Where the user wrote the object an error names (``objectName``...: a name or a function's
    name the tree placed), else the start of the statement."""
    start = rewritten.pieces[0][1] if rewritten.pieces else 0
    params = error.getMessageParameters() or {}
    placed = sorted((node.meta["start"], node.name.lower()) for node in statement.tree.walk()
                    if isinstance(node, (exp.Identifier, exp.Anonymous)) and "start" in node.meta) \
        if statement.tree is not None else []
    for key in ("objectName", "relationName", "routineName", "expression"):
        name = params.get(key, "").strip('`"').split("`.`")[-1].lower()
        found = next((at for at, written in placed if at >= start and written == name), None) if name else None
        if found is not None:
            return found
    return start
