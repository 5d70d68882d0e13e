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
- What else runs on processing time (mini-batches) and the joins of a continuous
  query (two changelogs) are the replay's only: a ``KitError`` says so when the query is
  planned. The temporal table join of two live streams runs live: ``kit.joins.live``.
"""

from __future__ import annotations

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
from ..stream import Stream
from ..time import WatermarkStrategy
from .planner import logical as P
from .table import DynamicTable, PlanRun

__all__ = ["LiveJoinTable", "LiveMatchTable", "LiveTable", "LiveTableQuery"]


class LiveTable:
    """``kit.sql``'s answer over a live stream: ``start(path)`` runs it; ``explain()`` and
    ``columns`` are the plan's (as over a replay)."""

    def __init__(self, table: DynamicTable, names: dict, config: dict | None):
        self.table, self.names, self.config = table, names, config
        self.columns = table.columns
        options, streams = table.options, table.streams
        why = ("a mini-batch (table.exec.mini-batch.enabled) runs on processing time" if options.mini_batch else
               "the split of distinct aggregates (table.optimizer.distinct-agg.split.enabled)"
               if options.distinct_split else None)
        if why is None:
            why = _not_live(table.root)
        if why is None and len(streams) != 1:
            why = "a query over two streams"
        if why is not None:
            raise KitError(f"live mode does not run {why}: the replay does (kit.stream over a recorded input)")

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


def _not_live(node: P.Node) -> str | None:
    """What in the plan under ``node`` live mode does not run (None: it runs it all)."""
    if isinstance(node, P.Join):
        return "a join of two streams"
    for child in node.inputs:
        why = _not_live(child)
        if why is not None:
            return why
    return None


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
        ``PlanRun.sources`` (values ``_s0, _s1...``, ``seq`` their ``_arr``, ``_pt`` the
        micro-batch's processing time: a state TTL expires on it)."""
        s = self.table.streams[0]
        names = [f"_s{i}" for i in range(len(P.stream_columns(s)))]
        rows = self.arrivals.where("_ts IS NOT NULL")
        if _timers(self.table.root):   # Spark's watermark of the arrivals, for the operators' timers
            rows = watched(rows)
        df = rows.selectExpr(
            "'+I' AS _op", *[f"_c{i} AS {n}" for i, n in enumerate(names)], "_arr AS seq",
            "CAST(array() AS ARRAY<INT>) AS _n", "_pt")
        return {id(s): Changelog(df, tuple(names))}

    def _chained(self, n, update_before):
        return None

    def _deduplicate(self, n, log, update_before):
        from ..changelog.deduplicate import deduplicate
        return deduplicate(log, list(n.keys), n.keep, self._with(update_before), time=n.time,
                           watermark=self.table.streams[0].watermark)

    def _with(self, update_before: bool) -> Options:
        return replace(self.table.options, update_before=update_before, tasks=1)


class LiveTableQuery(LiveQuery):
    """A started live query (``LiveTable.start``): ``changelog()``, ``arrivals``, ``bad``,
    ``late_rows()``, ``replay()``, and ``LiveQuery``'s ``process_all_available()``, ``stop()``,
    ``status``."""

    def __init__(self, live: LiveTable, path: str, trigger, sink=None):
        self.live = live
        table, stream = live.table, live.table.streams[0]
        self.stream, self.values = stream, list(stream.source.columns)
        rows = live_arrivals(stream.raw, stream.time, stream.recorded, stream.malformed)
        log = table._named(LivePlanRun(table, rows).node(table.root, update_before=table.sink == "retract"))
        out = [f"_o{i}" for i in range(len(table.columns))]
        changes = log.df.select(F.lit("change").alias("_kind"), F.col("seq").alias("_arr"), "_n", "_op",
                                *[F.col(sparksql.name(c)).alias(o) for c, o in zip(table.columns, out)])
        recorded = rows.withColumn("_kind", F.when(F.col("_ts").isNull(), "bad").otherwise("arrival"))
        tagged = recorded.unionByName(changes, allowMissingColumns=True)
        values = [F.col(f"_c{i}").alias(c) for i, c in enumerate(self.values)]
        reason = stream.reason(f"_c{len(self.values)}" if stream.malformed else None)
        tables = {"arrival": [*values, "_arr", "_ts", "_pt"], "bad": [*values, "_arr", reason],
                  "change": ["_arr", "_n", "_op", *out]}
        query = {"query": table.query, "columns": ", ".join(f.simpleString() for f in stream.source.schema.fields),
                 "time": stream.time, "watermark": repr(stream.watermark), "sink": table.sink,
                 "config": repr(sorted((live.config or {}).items(), key=str))}
        super().__init__(tagged, path, tables, trigger, query, sink)

    # ------------------------------------------------------------ what the batches wrote

    @property
    def arrivals(self) -> DataFrame:
        """Every arrival with an event time so far, in arrival order: its columns, ``seq``
        (its number), ``_ts`` (event time, ms), ``_wm`` (the watermark it met, ms; NULL
        before the first), ``_pt`` (its processing time, ms: the micro-batch's), ``batch``
        and ``_arr`` (its place in the batch)."""
        rows = self.table("arrival")
        tops = rows.groupBy("batch").agg(F.max("_ts").alias("_top"))
        before = Window.orderBy("batch").rowsBetween(Window.unboundedPreceding, -1)
        marks = tops.select("batch", (F.max("_top").over(before) - F.lit(self.stream.watermark.lag)).alias("_wm"))
        return (rows.join(marks, "batch").withColumn("seq", F.row_number().over(Window.orderBy("batch", "_arr")) - 1)
                .select(*self.values, "seq", "_ts", "_wm", "_pt", "batch", "_arr").orderBy("seq"))

    def changelog(self) -> DataFrame:
        """Every change the committed batches made, in the order Flink emits them: ``seq``
        (the arrival that caused it, as ``arrivals`` numbers them), ``op``, the query's
        columns, ``watermark`` (the one that arrival met), with a state TTL ``proctime``
        (its processing time: the micro-batch's) and, where an operator reports expired
        state (``expired_state``), ``after_expiry`` (the arrival found a key's state
        expired), as ``DynamicTable.changelog`` has them, and ``batch``."""
        marks = self.arrivals.select("batch", "_arr", "seq", "_wm", "_pt")
        changes = self.table("change")
        # a timer's emission (``_arr`` -1) belongs to the last arrival before its batch
        rises = changes.where("_arr < 0").select("batch").distinct()
        earlier = marks.select(F.col("batch").alias("_b"), "seq")
        before = (rises.join(earlier, F.col("_b") < F.col("batch")).groupBy("batch").agg(F.max("seq").alias("seq"))
                  .join(marks.drop("batch", "_arr"), "seq").withColumn("_arr", F.lit(-1)))
        changes = changes.join(marks.unionByName(before), ["batch", "_arr"])
        wm = F.col("_wm")
        watermark = F.timestamp_millis(wm) if self.stream.time_is_timestamp else wm
        ttl = []
        if self._ttl:
            ttl = [F.timestamp_millis("_pt").alias("proctime")]
            expired = self.expired_state()   # which arrivals found a key's state expired
            if expired is not None:
                changes = changes.join(expired.select("seq").distinct().withColumn("_found", F.lit(True)), "seq", "left")
                ttl.append(F.coalesce("_found", F.lit(False)).alias("after_expiry"))
        return changes.orderBy("seq", "_n").select(
            "seq", F.col("_op").alias("op"),
            *[F.col(f"_o{i}").alias(c) for i, c in enumerate(self.live.columns)], watermark.alias("watermark"),
            *ttl, "batch")

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
        """``LiveQuery.status``, its ``rows`` the arrivals of the last batch (Spark counts
        each of the query's two reads of the source: the record and the operators' input)."""
        status = super().status
        if status["rows"] is not None:
            status["rows"] //= 2
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
        (name,) = self.live.names
        return replayed(self.live.table.query, {name: stream}, self.live.config, self.live.table.sink)
