"""A continuous query over a live stream: ``kit.sql`` over ``kit.live(...)``, started.

    clicks = kit.live(spark.readStream.schema("user string, cTime timestamp").json("clicks/"),
                      time="cTime")
    q = kit.sql("SELECT user, COUNT(*) AS cnt FROM clicks GROUP BY user", clicks=clicks)
    run = q.start("runs/counts")
    run.process_all_available()
    run.changelog()     # seq  op  user  cnt  watermark  batch
    run.replay()        # the recorded arrivals replayed by kit.stream: the same changelog

The query is planned as over a replay (``kit.sql.planner``), and each operator of the plan
runs as the same Flink function on the live driver (``kit.live.per_key``): a group
aggregate, a Top-N, a deduplicate, an OVER aggregate each keyed as it needs, their change
rows flowing in one Structured Streaming query from one to the next (the word-frequency
cascade is two aggregates chained so). Each micro-batch writes the arrivals and the
root's changes (``kit.live.query.LiveQuery``, exactly once).

What differs from a replay, and why:

- ``seq`` numbers the arrivals a run recorded, in the order the operators took them: by
  micro-batch, and in one by Spark's read order. A change belongs to the arrival that caused
  it, so ``changelog()`` is ordered by ``seq`` then the change's place among that arrival's,
  as a single-task Flink job emits them.
- The watermark an arrival met is the one after all earlier micro-batches (Flink's moves
  after each row; Spark moves its own between batches): the strategy's watermark of the
  largest event time of the batches before.
- A row without an event time never reaches the query (Flink fails the job on it): it is
  in ``bad`` with the reason, and the query goes on.
- Keeping the first row on event time waits for the watermark: its operator runs with
  Spark's event-time timers (``per_key(..., watermark=)``), and a row it emits belongs to
  the rise of the watermark between two micro-batches, so it takes the ``seq`` of the last
  arrival before that rise, as in the replay (``changelog()``).
- A state TTL (``table.exec.state.ttl``) expires a key's state on processing time: an
  arrival's is its micro-batch's (Spark's ``current_timestamp()``, kept in the offset log,
  so a batch run again after a restart has it again), recorded with it (``arrivals``'
  ``_pt``); the replay runs on those times. Flink's clock moves per row, Spark's per batch:
  rows of one batch never expire each other's state.
- Over several streams (a join, a UNION ALL), one query reads them all: in a micro-batch
  the operators take the rows of the last stream FROM reads first, then the one before...,
  each stream's in Spark's read order (``_arrivals``; Flink's order across its sources is
  whatever their threads make it). ``arrivals`` has each row's ``stream``. The replay reads
  each stream's record with its rows' processing times (``proctime=``: the batches') and
  interleaves them by it, which is that order; the changelog then has no ``watermark``,
  as the replay's of several streams. A join's condition (beyond its keys) is met by
  Spark's stream-stream join of the two inputs' rows, which keeps every row (as Flink's
  join state without a TTL does): a pair reaches the join operator in the batch of its
  later row, before the rows of that batch.
- What else runs on processing time (mini-batches) is the replay's only: a ``KitError``
  says so when the query is planned; so are interval joins (``kit.sql.__init__.live``).
  The temporal table join of two live streams runs live: ``kit.joins.live``.
- A window TVF aggregation is the DataStream window it is (``kit.sql.window_aggregate``
  reads it so over a replay too), run live (``kit.windows.live``): ``LiveWindowTable``.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .. import sparksql
from ..changelog import Changelog, Options
from ..errors import KitError
from ..live import arrivals as live_arrivals, watched
from ..joins.live import LiveJoinQuery
from ..live.query import LiveQuery
from ..replay.keyed import MIN_TIME
from ..match_recognize.live import LiveMatchQuery
from ..windows.live import LiveWindowQuery
from ..stream import Stream
from ..time import WatermarkStrategy
from .planner import logical as P
from .table import DynamicTable, PlanRun

__all__ = ["LiveJoinTable", "LiveMatchTable", "LiveTable", "LiveTableQuery", "LiveWindowTable",
           "LiveWindowTableQuery"]


class LiveTable:
    """``kit.sql``'s answer over a live stream: ``start(path)`` runs it; ``explain()`` and
    ``columns`` are the plan's (as over a replay)."""

    def __init__(self, table: DynamicTable, names: dict, config: dict | None):
        self.table, self.names, self.config = table, names, config
        self.columns = table.columns
        options, several = table.options, len(table.streams) > 1
        why = ("a mini-batch (table.exec.mini-batch.enabled) runs on processing time" if options.mini_batch else
               "the split of distinct aggregates (table.optimizer.distinct-agg.split.enabled)"
               if options.distinct_split else
               "keeping the first row on event time in a query over several streams" if several and _timers(table.root)
               else "an interleaving of its own (kit.join.interleave, kit.join.clock): live, the micro-batches "
               "interleave the streams" if set(options.extra) & {"interleave", "clock"} else None)
        if why is not None:
            raise KitError(f"live mode does not run {why}: the replay does (kit.stream over a recorded input)")
        named = {}
        for name, stream in names.items():
            named.setdefault(id(stream), name)
        self.stream_names = [named[id(s)] for s in table.streams]   # each stream's table name, as FROM reads them

    def start(self, path: str, trigger: str | None = None, sink=None) -> "LiveTableQuery":
        """Starts the query; its rows and checkpoint go under ``path`` (``kit.live.query``).
        ``trigger``: None (a batch as soon as the last is done), ``"available_now"`` (what the
        source has now, then stop) or an interval such as ``"10 seconds"``. ``sink``: a
        ``kit.DbApiSink`` that each batch's changes go to too (``batch_rows``)."""
        return LiveTableQuery(self, path, trigger, sink)

    def explain(self, physical: bool = True) -> str:
        """The plan, as ``DynamicTable.explain`` prints it."""
        return self.table.explain(physical)

    @property
    def mode(self) -> frozenset:
        return self.table.mode

    def __repr__(self):
        return f"LiveTable({', '.join(self.columns)}; start(path) runs it)"


class LiveMatchTable:
    """``kit.sql``'s answer when its MATCH_RECOGNIZE reads a live stream: ``start(path)`` runs
    it (``kit.match_recognize.live``); ``columns`` are the query's. ``twin``: the clause over
    no rows; ``outer(matches)``: the query around the clause over its rows; ``replayer(record)``:
    the query over ``kit.stream`` of a record."""

    def __init__(self, stream, twin, columns: list, outer, replayer, query: dict):
        self.stream, self.twin, self.columns = stream, twin, columns
        self.outer, self.replayer, self.query = outer, replayer, query

    def start(self, path: str, trigger: str | None = None, sink=None) -> LiveMatchQuery:
        """Starts the query; its rows and checkpoint go under ``path`` (``kit.live.query``).
        ``trigger`` as ``LiveTable.start``'s; ``sink``: a ``kit.DbApiSink`` that each batch's
        rows of the query go to too (``batch_rows``)."""
        return LiveMatchQuery(self.stream, self.twin, path, trigger, sink, self.query, self.outer, self.replayer)

    def __repr__(self):
        return f"LiveMatchTable({', '.join(self.columns)}; start(path) runs it)"


class LiveWindowTable:
    """``kit.sql``'s answer when its window TVF aggregation reads a live stream: the DataStream
    window it is (``result``, a ``LiveWindowResult``; ``shape``: the query read,
    ``kit.sql.window_aggregate.WindowShape``); ``start(path)`` runs it. ``replayer(stream)``:
    the query over a ``kit.stream``."""

    def __init__(self, result, shape, replayer):
        self.result, self.shape, self.replayer = result, shape, replayer
        self.columns = shape.schema.names

    def start(self, path: str, trigger: str | None = None, sink=None) -> "LiveWindowTableQuery":
        """Starts the query; its rows and checkpoint go under ``path`` (``kit.live.query``).
        ``trigger`` as ``LiveTable.start``'s; ``sink``: a ``kit.DbApiSink`` that each batch's
        rows of the query go to too (``batch_rows``)."""
        return LiveWindowTableQuery(self, path, trigger, sink)

    def __repr__(self):
        return f"LiveWindowTable({', '.join(self.columns)}; start(path) runs it)"


class LiveWindowTableQuery(LiveWindowQuery):
    """A started live window TVF aggregation: ``LiveWindowQuery``'s run of its window, ``df``
    the query's rows (each window's when the watermark passed its end), ``late`` the rows
    dropped as late, ``replay()`` the query over ``kit.stream`` of the record."""

    def __init__(self, table: LiveWindowTable, path: str, trigger, sink=None):
        self.table_of = table
        super().__init__(table.result, path, trigger, sink)

    def _rows(self, firings: DataFrame) -> DataFrame:
        return self.table_of.shape.project(firings, not self._timestamps)

    @property
    def df(self) -> DataFrame:
        """The query's rows of the windows fired so far, sorted by their columns."""
        return self._rows(super().df).orderBy(*map(sparksql.name, self.table_of.columns))

    def batch_rows(self, batch: int) -> DataFrame:
        """The query's rows of the windows micro-batch ``batch`` fired, with ``batch``."""
        return self._rows(super().batch_rows(batch)).withColumn("batch", F.lit(batch))

    def replay(self) -> DataFrame:
        """The query over ``kit.stream`` of the record (each arrival emitting the watermark the
        next one met, the last the last committed batch's): its rows of the windows whose end
        that watermark passed are ``df``'s; its end of input fires the rest."""
        record = self.record(self.result.values, self._timestamps)
        stream = Stream.of(record, time=self.run.time, order=["batch", "_arr"],
                           watermark=WatermarkStrategy.from_column("_emits"))
        return self.table_of.replayer(stream)


class LiveJoinTable:
    """``kit.sql``'s answer when its temporal table join reads two live streams: ``start(path)``
    runs it (``kit.joins.live``); ``columns`` are the query's. ``join``: the ``TemporalJoin``
    planned over no rows; ``outer``, ``replayer``: as ``LiveJoinQuery`` takes them."""

    def __init__(self, left, right, join, columns: list, outer, replayer, query: dict):
        self.left, self.right, self.join, self.columns = left, right, join, columns
        self.outer, self.replayer, self.query = outer, replayer, query

    def start(self, path: str, trigger: str | None = None, sink=None) -> LiveJoinQuery:
        """Starts the query; its rows and checkpoint go under ``path`` (``kit.live.query``).
        ``trigger`` as ``LiveTable.start``'s; ``sink``: a ``kit.DbApiSink`` that each batch's
        rows of the query go to too (``batch_rows``)."""
        return LiveJoinQuery(self.left, self.right, self.join, path, trigger, sink, self.query, self.outer,
                             self.replayer)

    def __repr__(self):
        return f"LiveJoinTable({', '.join(self.columns)}; start(path) runs it)"


def _timers(node: P.Node) -> bool:
    """Whether an operator of the plan under ``node`` sets event-time timers (keeping the
    first row on event time)."""
    if isinstance(node, P.Deduplicate) and node.time and node.keep == "first":
        return True
    return any(_timers(child) for child in node.inputs)


class LivePlanRun(PlanRun):
    """A plan's operators over a live stream's arrivals (``kit.live.arrivals``): each its
    reference function on the live driver (a group aggregate is never fused with the one
    below: each keeps its own state, keyed its own way)."""

    def __init__(self, table: DynamicTable, arrivals: DataFrame):
        super().__init__(table)
        self.arrivals = arrivals

    @property
    def sources(self) -> dict:
        """{id(stream): its arrivals with an event time as an insert-only changelog}, as
        ``PlanRun.sources`` (values ``_s0, _s1...``, ``seq`` their ``_arr``: of several streams,
        one order, ``_pt`` the micro-batch's processing time: a state TTL expires on it)."""
        streams, out = self.table.streams, {}
        rows = self.arrivals.where("_ts IS NOT NULL")
        if _timers(self.table.root):   # Spark's watermark of the arrivals, for the operators' timers
            rows = watched(rows)
        for i, s in enumerate(streams):
            names = [f"_s{j}" for j in range(len(P.stream_columns(s)))]
            own = rows if len(streams) == 1 else rows.where(f"_src = {i}")
            df = own.selectExpr("'+I' AS _op", *[f"{_value(streams, i, j)} AS {n}" for j, n in enumerate(names)],
                                "_arr AS seq", "CAST(array() AS ARRAY<INT>) AS _n", "_pt")
            out[id(s)] = Changelog(df, tuple(names))
        return out

    def _chained(self, n, update_before):
        return None

    def _deduplicate(self, n, log, update_before):
        from ..changelog.deduplicate import deduplicate
        return deduplicate(log, list(n.keys), n.keep, self._with(update_before), time=n.time,
                           watermark=self.table.streams[0].watermark)

    def _with(self, update_before: bool) -> Options:
        return replace(self.table.options, update_before=update_before, tasks=1)


_STREAM = 1 << 40   # several streams: the arrival order of a batch is a stream's rows after the next's


def _value(streams: list, i: int, j: int) -> str:
    """The name ``_arrivals`` gives column ``j`` of stream ``i``."""
    return f"_c{j}" if len(streams) == 1 else f"_c{i}_{j}"


def _arrivals(streams: list) -> DataFrame:
    """The streams' rows as the live driver reads them (``kit.live.arrivals``), in one
    DataFrame: of one stream as it reads them; of several, stream ``i``'s columns named
    ``_c{i}_{j}``, ``_src`` (``i``), ``_why`` (a row that goes aside: why) and ``_arr`` one
    order for all: in a micro-batch, the last stream's rows first, then the one before...,
    each stream's in read order (as ``changelog.join.merge`` takes streams whose rows came
    at one processing time)."""
    if len(streams) == 1:
        s = streams[0]
        return live_arrivals(s.raw, s.time, s.recorded, s.malformed)
    parts = []
    for i, s in enumerate(streams):
        rows = live_arrivals(s.raw, s.time, s.recorded, s.malformed)
        reason = s.reason(f"_c{len(s.source.columns)}" if s.malformed else None)
        parts.append(rows.select(
            F.lit(i).alias("_src"), *[F.col(f"_c{j}").alias(_value(streams, i, j)) for j in range(len(s.recorded))],
            "_ts", "_pt", (F.col("_arr") + F.lit((len(streams) - 1 - i) * _STREAM)).alias("_arr"),
            F.when(F.col("_ts").isNull(), reason).alias("_why")))
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)


class LiveTableQuery(LiveQuery):
    """A started live query (``LiveTable.start``): ``changelog()``, ``arrivals``, ``bad``,
    ``late_rows()``, ``replay()``, and ``LiveQuery``'s ``process_all_available()``, ``stop()``,
    ``status``."""

    def __init__(self, live: LiveTable, path: str, trigger, sink=None):
        self.live = live
        table, streams = live.table, live.table.streams
        self.stream, self.values = streams[0], list(streams[0].source.columns)
        rows = _arrivals(streams)
        log = table._named(LivePlanRun(table, rows).node(table.root, update_before=table.sink == "retract"))
        out = [f"_o{i}" for i in range(len(table.columns))]
        changes = log.df.select(F.lit("change").alias("_kind"), F.col("seq").alias("_arr"), "_n", "_op",
                                *[F.col(sparksql.name(c)).alias(o) for c, o in zip(table.columns, out)])
        recorded = rows.withColumn("_kind", F.when(F.col("_ts").isNull(), "bad").otherwise("arrival")).observe(
            "kit_arrivals", F.count(F.lit(1)).alias("rows"))   # a batch's rows, for ``status``
        tagged = recorded.unionByName(changes, allowMissingColumns=True)
        if len(streams) == 1:
            values = [F.col(f"_c{i}").alias(c) for i, c in enumerate(self.values)]
            reason = self.stream.reason(f"_c{len(self.values)}" if self.stream.malformed else None)
            tables = {"arrival": [*values, "_arr", "_ts", "_pt"], "bad": [*values, "_arr", reason]}
            schema = {"columns": ", ".join(f.simpleString() for f in self.stream.source.schema.fields),
                      "time": self.stream.time, "watermark": repr(self.stream.watermark)}
        else:   # each stream's values in a struct named as its table, NULL on the others' rows
            values = [F.when(F.col("_src") == i, F.struct(*[F.col(_value(streams, i, j)).alias(c)
                                                            for j, c in enumerate(s.source.columns)])).alias(name)
                      for i, (s, name) in enumerate(zip(streams, live.stream_names))]
            tables = {"arrival": ["_src", "_arr", "_ts", "_pt", *values],
                      "bad": [F.element_at(F.array(*map(F.lit, live.stream_names)), F.col("_src") + 1).alias("stream"),
                              *values, "_arr", F.col("_why").alias("reason")]}
            schema = {key: repr([(n, get(s)) for n, s in zip(live.stream_names, streams)]) for key, get in (
                ("columns", lambda s: ", ".join(f.simpleString() for f in s.source.schema.fields)),
                ("time", lambda s: s.time), ("watermark", lambda s: repr(s.watermark)))}
        tables["change"] = ["_arr", "_n", "_op", *out]
        query = {"query": table.query, **schema, "sink": table.sink,
                 "config": repr(sorted((live.config or {}).items(), key=str))}
        super().__init__(tagged, path, tables, trigger, query, sink)

    # ------------------------------------------------------------ what the batches wrote

    @property
    def _several(self) -> bool:
        return len(self.live.table.streams) > 1

    def _numbered(self) -> DataFrame:
        """The recorded arrivals with ``seq``, their place in the order the operators took them."""
        return self.table("arrival").withColumn("seq", F.row_number().over(Window.orderBy("batch", "_arr")) - 1)

    @property
    def arrivals(self) -> DataFrame:
        """Every arrival with an event time so far, in arrival order: its columns, ``seq``
        (its number), ``_ts`` (event time, ms), ``_wm`` (the watermark it met, ms; NULL
        before the first), ``_pt`` (its processing time, ms: the micro-batch's), ``batch``
        and ``_arr`` (its place in the batch). Of several streams: ``stream`` (its table's
        name), ``seq``, ``_ts``, ``_pt``, ``batch``, ``_arr`` (its place among its stream's
        rows of the batch) and its columns as a struct named as its table (NULL on the other
        streams' rows); a batch's rows of the last stream FROM reads come first."""
        rows = self._numbered()
        if self._several:
            names = self.live.stream_names
            stream = F.element_at(F.array(*map(F.lit, names)), F.col("_src") + 1)
            return rows.select(stream.alias("stream"), "seq", "_ts", "_pt", "batch",
                               (F.col("_arr") % _STREAM).alias("_arr"), *map(sparksql.name, names)).orderBy("seq")
        tops = rows.groupBy("batch").agg(F.max("_ts").alias("_top"))
        before = Window.orderBy("batch").rowsBetween(Window.unboundedPreceding, -1)
        marks = tops.select("batch", (F.max("_top").over(before) - F.lit(self.stream.watermark.lag)).alias("_wm"))
        return rows.join(marks, "batch").select(*self.values, "seq", "_ts", "_wm", "_pt", "batch", "_arr").orderBy("seq")

    def changelog(self) -> DataFrame:
        """Every change the committed batches made, in the order Flink emits them: ``seq``
        (the arrival that caused it, as ``arrivals`` numbers them), ``op``, the query's
        columns, ``watermark`` (the one that arrival met), with a state TTL ``proctime``
        (its processing time: the micro-batch's) and, where an operator reports expired
        state (``expired_state``), ``after_expiry`` (the arrival found a key's state
        expired), as ``DynamicTable.changelog`` has them, and ``batch``. Of several streams,
        as their replay's: no ``watermark``, no ``proctime``."""
        several = self._several
        marks = (self._numbered() if several else self.arrivals).select(
            "batch", "_arr", "seq", *[] if several else ["_wm"], "_pt")
        changes = self.table("change")
        if not several:   # a timer's emission (``_arr`` -1) belongs to the last arrival before its batch
            rises = changes.where("_arr < 0").select("batch").distinct()
            earlier = marks.select(F.col("batch").alias("_b"), "seq")
            before = (rises.join(earlier, F.col("_b") < F.col("batch")).groupBy("batch").agg(F.max("seq").alias("seq"))
                      .join(marks.drop("batch", "_arr"), "seq").withColumn("_arr", F.lit(-1)))
            marks = marks.unionByName(before)
        changes = changes.join(marks, ["batch", "_arr"])
        wm = F.col("_wm")
        watermark = [] if several else [
            (F.timestamp_millis(wm) if self.stream.time_is_timestamp else wm).alias("watermark")]
        ttl = []
        if self._ttl:
            ttl = [] if several else [F.timestamp_millis("_pt").alias("proctime")]
            expired = self.expired_state()   # which arrivals found a key's state expired
            if expired is not None:
                changes = changes.join(expired.select("seq").distinct().withColumn("_found", F.lit(True)), "seq", "left")
                ttl.append(F.coalesce("_found", F.lit(False)).alias("after_expiry"))
        return changes.orderBy("seq", "_n").select(
            "seq", F.col("_op").alias("op"),
            *[F.col(f"_o{i}").alias(c) for i, c in enumerate(self.live.columns)], *watermark, *ttl, "batch")

    @property
    def _ttl(self) -> bool:
        return self.live.table.options.ttl_ms > 0

    def expired_state(self) -> DataFrame | None:
        """With a state TTL (``table.exec.state.ttl``, on processing time: the micro-batches'),
        each key whose state an operator found expired (Flink forgets it without a trace), as
        ``DynamicTable.expired_state`` has them (``operator``, ``seq``, ``key``, ``last_write``,
        ``proctime``) with the ``batch`` of the arrival that found it: by the replay of the
        record, whose operators expire what the live ones did; None without a TTL or an
        operator that reports them (a group aggregate does)."""
        expired = self.replay().expired_state() if self._ttl else None
        return None if expired is None else expired.join(self.arrivals.select("seq", "batch"), "seq").orderBy("seq")

    def late_rows(self) -> DataFrame | None:
        """The rows a keep-first deduplicate on event time dropped as late (Flink drops them
        without a trace), as ``DynamicTable.late_rows`` has them (``operator``, ``seq``,
        ``row``, ``time``, ``watermark``), with the ``batch`` each arrived in: found by the
        replay of the record, whose operator drops the rows the live one dropped (the
        oracle); None when no operator drops rows."""
        late = self.replay().late_rows()
        return None if late is None else late.join(self.arrivals.select("seq", "batch"), "seq").orderBy("seq")

    @property
    def watermark(self):
        return self.stream.watermark

    @property
    def status(self) -> dict:
        """``LiveQuery.status``, its ``rows`` the rows the last batch read (Spark counts a row
        at each read of its source: the record's, each operator input's)."""
        status = super().status
        if status["rows"] is not None:
            observed = (self.query.lastProgress.get("observedMetrics") or {}).get("kit_arrivals")
            status["rows"] = 0 if observed is None else observed["rows"]
        return status

    def batch_rows(self, batch: int) -> DataFrame:
        """The changes micro-batch ``batch`` made, as a sink receives them: ``batch``,
        ``change`` (0, 1, ...: the order Flink emits them in), ``op`` and the query's columns."""
        rows = self.table("change", batch)
        order = Window.orderBy("_arr", "_n")
        return rows.select("batch", (F.row_number().over(order) - 1).alias("change"), F.col("_op").alias("op"),
                           *[F.col(f"_o{i}").alias(c) for i, c in enumerate(self.live.columns)])

    def replay(self):
        """The recorded arrivals replayed by ``kit.stream`` through the same query: a
        ``DynamicTable`` whose ``changelog()`` is ``changelog()``'s rows (without ``batch``).
        Each arrival emits the watermark the next one met (the last: the one after the
        largest time; with timers, the last committed batch's, the one they fired up to, so
        the replay's end of input fires the rest); the replayed stream has the record's
        ``batch``, ``_arr`` and ``_emits`` (that watermark, typed as the time column) beside
        the input's columns, and with a state TTL its processing time ``_proctime`` (the
        micro-batch's) as its clock."""
        from . import replayed
        if self._several:
            return self._replay_several(replayed)
        record = self.arrivals
        now = F.max("_ts").over(Window.partitionBy()) - F.lit(self.stream.watermark.lag)
        if _timers(self.live.table.root):   # timers fired live up to the last committed batch's watermark
            applied = self.applied()
            now = F.lit(None if applied == MIN_TIME else applied).cast("long")
        order = Window.orderBy("seq")
        after = F.when(F.lead("seq").over(order).isNull(), now).otherwise(F.lead("_wm").over(order))   # last: now
        after = F.timestamp_millis(after) if self.stream.time_is_timestamp else after
        record = record.withColumn("_emits", after).withColumn("_proctime", F.timestamp_millis("_pt"))
        clock = ["_proctime"] if self._ttl else []   # a state TTL's: the micro-batches' processing times
        stream = Stream.of(record.select(*self.values, "batch", "_arr", "_emits", *clock),
                           time=self.stream.time, order=["batch", "_arr"],
                           watermark=WatermarkStrategy.from_column("_emits"), proctime=clock[0] if clock else None)
        (name,) = self.live.stream_names
        return replayed(self.live.table.query, {name: stream}, self.live.config, self.live.table.sink)

    def _replay_several(self, replayed):
        """``replay()`` of a query over several streams: each stream's record a ``kit.stream``
        whose processing time is its micro-batch's (``proctime=``), the streams interleaved
        by it (``kit.join.interleave: proctime``): a batch's rows of the last stream first, as
        live (batches are milliseconds apart: checked)."""
        record = self._numbered()
        times = [r._pt for r in record.groupBy("batch").agg(F.min("_pt").alias("_pt")).orderBy("batch").collect()]
        if any(later <= earlier for earlier, later in zip(times, times[1:])):
            raise KitError("two micro-batches with rows ran at one processing time (ms): the replay orders the "
                           "streams' rows by it and cannot tell the batches apart")
        record = record.withColumn("_proctime", F.timestamp_millis("_pt"))
        streams = {}
        for i, (s, name) in enumerate(zip(self.live.table.streams, self.live.stream_names)):
            rows = record.where(F.col("_src") == i).select(f"{sparksql.name(name)}.*", "batch", "_arr", "_proctime")
            streams[name] = Stream.of(rows, time=s.time, order=["batch", "_arr"], watermark=s.watermark,
                                      proctime="_proctime")
        config = {**(self.live.config or {}), "kit.join.interleave": "proctime"}
        return replayed(self.live.table.query, streams, config, self.live.table.sink)
