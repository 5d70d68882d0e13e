"""The event-time temporal join of two live streams: Flink's ``TemporalRowTimeJoinOperator``
on the live driver.

    orders = kit.live(spark.readStream.schema("id string, currency string, t timestamp").json("orders/"),
                      time="t")
    rates = kit.live(spark.readStream.schema("currency string, rate double, t timestamp").json("rates/"),
                     time="t", primary_key="currency")
    run = kit.sql("SELECT o.id, o.t, r.rate FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.t AS r "
                  "ON o.currency = r.currency", orders=orders, rates=rates).start("runs/priced")
    run.process_all_available()
    run.df          # the query's rows so far: each order once the watermark passed its time
    run.arrivals    # both inputs' rows in the order the operator took them, with the watermark met
    run.replay()    # kit.sql over kit.stream of the record: the same rows

One Structured Streaming query reads both inputs; their rows, keyed by the join key, go to
the operator of their key (``kit.live.per_key``), its state (the waiting left rows, the
versions) kept in Spark's state store between micro-batches; a left row leaves, joined with
the version valid at its time (or NULL-padded: LEFT JOIN), when the operator watermark
passes it. The query around the join (its other conditions, the projection) runs on the
joined rows, as over a replay (``kit.sql.query``: the two sides linked by ``__kit_v``).

What live timing does, and how the replay of the record repeats it:

- The operator watermark is the smaller of the two inputs' (Flink's: none until both have
  one). Spark tracks each input's own (its largest event time less the strategy's lag)
  and, with several inputs, takes the smaller (``multipleWatermarkPolicy`` ``min``), moving
  it between micro-batches: every row of a batch meets the watermark after the batches
  before, and the left rows its rise passed leave at the start of the batch.
- In a batch, the versions go to the operator before the left rows (the replay's order on
  ties), each side in Spark's read order. Within one watermark the order between the sides
  changes no output: only a rise of the watermark emits.
- ``arrivals`` numbers the rows in that order (``seq``) with the watermark each met. The
  replay reads each input as a ``kit.stream`` whose rows emit, as their watermark, the one
  the next row of their side met: the smaller of the two then equals, after each row, the
  live one, so the timers fire at the same rows. It reads the left rows the live operator
  took: not those still waiting for a rise of the watermark to their time (the rise after
  them has not come, or not that far: ``applied()``, the last batch's watermark, is below
  their time or the one they met), whose end of input would emit them.
- A row without an event time never reaches the operator (Flink fails the job on it): it is
  in ``bad`` with its side and the reason, and the query goes on.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..live.driver import arrivals as live_arrivals, per_key, watched
from ..live.query import LiveQuery
from ..live.stream import LiveStream
from ..replay.interleave import LEFT, RIGHT, Arrival
from ..replay.keyed import MIN_TIME
from ..time import Duration, WatermarkStrategy
from .temporal import Emitted, TemporalRowTimeJoinOperator

__all__ = ["LiveTemporalJoin", "LiveJoinQuery"]

OPERATOR_WATERMARK = WatermarkStrategy.for_sql_delay(Duration(0))   # Spark's is already the operator's


class LiveTemporalJoin(TemporalRowTimeJoinOperator):
    """``TemporalRowTimeJoinOperator`` over the live driver's rows ``(side, _arr, _ts, op, *left
    values, *right values)`` (``left``: how many left values): a timer fires at the
    watermark of the micro-batch that reached it."""

    def __init__(self, how: str, deduplicate: str | None, left: int):
        super().__init__(None, how, None, None, deduplicate)
        self.left = left

    def process_element(self, row, ctx):
        side, arr, ts, op, *values = row
        value = tuple(values[:self.left] if side == LEFT else values[self.left:])
        super().process_element(Arrival(arr, side, arr, ts, value, op=op or "+I"), ctx)

    def on_timer(self, timestamp: int, ctx):
        if ctx.state("timers").pop(timestamp, None) is not None:   # not deleted
            self._fire(ctx, timestamp, None, ctx.watermark, None)


class LiveJoinQuery(LiveQuery):
    """A started live temporal join (``kit.sql`` over two ``kit.live`` streams, started): ``df``
    (the query's rows so far), ``joined`` (the operator's), ``arrivals``, ``bad``,
    ``replay()``, and ``LiveQuery``'s ``process_all_available()``, ``stop()``, ``status``.
    ``join``: the ``TemporalJoin`` planned over no rows (its keys, ``how``, deduplication);
    ``outer(left, right)``: the query around the join over its two linked sides;
    ``replayer(left, right)``: the query over ``kit.stream``s of the two records."""

    def __init__(self, left: LiveStream, right: LiveStream, join, path: str, trigger, sink, query: dict,
                 outer, replayer):
        self.left, self.right, self.join = left, right, join
        self.outer, self.replayer = outer, replayer
        self.lvalues, self.rvalues = list(left.source.columns), list(right.source.columns)
        left.source.sparkSession.conf.set("spark.sql.streaming.multipleWatermarkPolicy", "min")
        both = _side(left, LEFT, "_l", [l for l, _ in join.keys], None).unionByName(
            _side(right, RIGHT, "_r", [r for _, r in join.keys], [left.source.schema[l].dataType for l, _ in join.keys]),
            allowMissingColumns=True)
        lcols, rcols = [f"_l{i}" for i in range(len(self.lvalues))], [f"_r{i}" for i in range(len(self.rvalues))]
        types = [*[left.source.schema[c].dataType for c in self.lvalues],
                 *[right.source.schema[c].dataType for c in self.rvalues]]
        schema = T.StructType([T.StructField("_lt", T.LongType()), T.StructField("_wm", T.LongType()),
                               T.StructField("_v", T.BooleanType()),
                               *[T.StructField(n, t) for n, t in zip([*lcols, *rcols], types)]])
        blank, n = (None,) * len(rcols), len(lcols)
        how, dedup = join.how, join.deduplicate

        def output(rows, outs):   # the left rows the timers emitted, with the version met
            return [(o.left.time, o.watermark, o.right is not None, *o.left.row, *(o.right.row if o.right else blank))
                    for o in outs if type(o) is Emitted]

        keys = [f"_k{i}" for i in range(len(join.keys))]
        operating = both.where("_ts IS NOT NULL").withColumn("seq", F.when(F.col("_side") == RIGHT, 0).otherwise(1)) \
            .withColumn("_n", F.col("_arr"))   # a batch's versions first, each side in read order
        joined = per_key(operating, keys, lambda key: LiveTemporalJoin(how, dedup, n), schema,
                         ["_side", "_arr", "_ts", "_op", *lcols, *rcols], output, OPERATOR_WATERMARK)
        tagged = both.withColumn("_kind", F.when(F.col("_ts").isNull(), "bad").otherwise("arrival")).unionByName(
            joined.withColumn("_kind", F.lit("joined")), allowMissingColumns=True)
        lv = F.struct(*[F.col(c).alias(v) for c, v in zip(lcols, self.lvalues)])
        rv = F.struct(*[F.col(c).alias(v) for c, v in zip(rcols, self.rvalues)])
        is_left = F.col("_side") == LEFT
        side = F.when(is_left, "left").otherwise("right").alias("side")
        values = [F.when(is_left, lv).alias("left"), F.when(~is_left, rv).alias("right")]
        tables = {"arrival": [side, "_arr", "_ts", *values], "bad": [side, *values, "_arr", F.col("_why").alias("reason")],
                  "joined": ["_lt", "_wm", "_v", *lcols, *rcols]}
        super().__init__(tagged, path, tables, trigger, query, sink)

    @property
    def watermark(self) -> WatermarkStrategy:
        """Flink's operator watermark is Spark's (each input's already less its lag)."""
        return OPERATOR_WATERMARK

    @property
    def status(self) -> dict:
        """``LiveQuery.status``, its ``rows`` the arrivals of the last batch (Spark counts each
        of the query's two reads of the sources: the record and the operator's input)."""
        status = super().status
        if status["rows"] is not None:
            status["rows"] //= 2
        return status

    @property
    def arrivals(self) -> DataFrame:
        """Every row of both inputs with an event time so far, in the order the operator took
        them: ``seq`` (that order: by micro-batch, in each the versions first), ``side``
        (``left``, ``right``), ``_ts`` (event time, ms), ``_wm`` (the operator watermark it
        met, ms; NULL before both inputs had one), ``batch``, ``_arr`` (its place among its
        side's rows of the batch) and the values (``left``, ``right``: a struct each, NULL
        on the other side)."""
        rows = self.table("arrival")
        tops = rows.groupBy("batch", "side").agg(F.max("_ts").alias("top")).collect()
        lag = {"left": self.left.watermark, "right": self.right.watermark}
        seen, marks = {}, []
        for batch in sorted({t.batch for t in tops}):
            own = [lag[s].watermark(seen[s]) if s in seen else None for s in ("left", "right")]
            marks.append((batch, None if None in own else min(own)))
            for t in tops:
                if t.batch == batch:
                    seen[t.side] = max(seen.get(t.side, t.top), t.top)
        wm = self.spark.createDataFrame(marks, "batch long, _wm long")
        order = Window.orderBy("batch", F.col("side").desc(), "_arr")   # right before left
        return (rows.join(wm, "batch").withColumn("seq", F.row_number().over(order) - 1)
                .select("seq", "side", "_ts", "_wm", "batch", "_arr", "left", "right").orderBy("seq"))

    @property
    def joined(self) -> DataFrame:
        """The left rows the operator emitted, in emission order (``batch``, then by time):
        the left input's columns, the version's (NULL when none: LEFT JOIN), prefixed
        ``left.``/``right.`` as structs ``left`` and ``right``, ``watermark`` (the one
        whose rise emitted it, typed as the left time column) and ``batch``."""
        return self._joined(self.table("joined"))

    def _joined(self, rows: DataFrame) -> DataFrame:
        """The operator's rows (``table("joined")``'s) as ``joined`` has them."""
        lcols, rcols = rows.columns[3:3 + len(self.lvalues)], rows.columns[3 + len(self.lvalues):-1]
        return rows.orderBy("batch", "_lt", *lcols, *rcols).select(
            F.struct(*[F.col(c).alias(v) for c, v in zip(lcols, self.lvalues)]).alias("left"),
            F.when(F.col("_v"), F.struct(*[F.col(c).alias(v) for c, v in zip(rcols, self.rvalues)])).alias("right"),
            (F.timestamp_millis("_wm") if self.left.time_is_timestamp else F.col("_wm")).alias("watermark"), "batch")

    def _sides(self, rows: DataFrame) -> tuple[DataFrame, DataFrame]:
        """``rows`` (``joined``'s) as the two sides the query around the join reads, linked by
        ``__kit_v`` (numbered: each left row with the version it met)."""
        from .versioned import VERSION
        linked = rows.withColumn(VERSION, F.row_number().over(Window.orderBy(*rows.columns)))
        left = linked.select("left.*", F.when(F.col("right").isNotNull(), F.col(VERSION)).alias(VERSION))
        return left, linked.where(F.col("right").isNotNull()).select("right.*", VERSION)

    @property
    def df(self) -> DataFrame:
        """The query's rows over the joined rows so far (the query around the join applied)."""
        return self.outer(*self._sides(self.joined.drop("batch", "watermark")))

    def batch_rows(self, batch: int) -> DataFrame:
        """The query's rows over the left rows micro-batch ``batch`` emitted, with ``batch``."""
        rows = self._joined(self.table("joined", batch)).drop("batch", "watermark")   # (being committed)
        return self.outer(*self._sides(rows)).withColumn("batch", F.lit(batch))

    def replay(self) -> DataFrame:
        """The record replayed by ``kit.stream`` through the same query (see the module doc):
        its rows are ``df``'s."""
        applied = self.applied()
        rec = self.arrivals.where((F.col("side") == "right") | (   # the left rows the live operator took
            (F.col("_ts") <= applied) & (F.coalesce("_wm", F.lit(MIN_TIME)) < applied)))
        mine = Window.partitionBy("side").orderBy("seq")
        after = F.when(F.lead("seq").over(mine).isNull(), F.lit(None if applied == MIN_TIME else applied).cast("long")
                       ).otherwise(F.lead("_wm").over(mine))
        rec = rec.withColumn("_emits", after).withColumn("_when", F.timestamp_millis("seq"))

        def record(side: str, stream: LiveStream) -> DataFrame:
            emits = F.timestamp_millis("_emits") if stream.time_is_timestamp else F.col("_emits")
            return rec.where(F.col("side") == side).select(f"{side}.*", "batch", "_arr", emits.alias("_emits"), "_when")

        return self.replayer(record("left", self.left), record("right", self.right))


def _side(stream: LiveStream, side: int, prefix: str, keys: list, cast: list | None) -> DataFrame:
    """One input's rows as the join reads them: ``_side``, ``_arr``, ``_ts``, its recorded
    columns as ``<prefix>0..``, the key ``_k0..`` (``cast`` to the left key's types), its
    changelog kind ``_op`` and, for a row that goes aside, why (``_why``). Spark's watermark
    tracks its event time less its strategy's lag (``watched``): the operator's is then
    Spark's, the smaller of the two inputs'."""
    columns = list(stream.source.columns)
    rows = live_arrivals(stream.raw, stream.time, stream.recorded, stream.malformed)
    names = {c: f"{prefix}{i}" for i, c in enumerate(stream.recorded)}
    read = {c: f"_c{i}" for i, c in enumerate(stream.recorded)}   # as live_arrivals names them
    op = F.col(read["op"]) if "op" in columns else F.lit(None).cast("string")
    key = [F.col(read[k]) if cast is None else F.col(read[k]).cast(t) for k, t in zip(keys, cast or keys)]
    reason = stream.reason(f"_c{len(columns)}" if stream.malformed else None)
    rows = rows.select(F.lit(side).alias("_side"), "_arr", "_ts",
                       *[F.col(f"_c{i}").alias(names[c]) for i, c in enumerate(stream.recorded)],
                       *[k.alias(f"_k{i}") for i, k in enumerate(key)], op.alias("_op"),
                       F.when(F.col("_ts").isNull(), reason).alias("_why"),
                       (F.col("_ts") - F.lit(stream.watermark.lag)).alias("_own"))
    if stream.malformed:   # its text only in the reason
        rows = rows.drop(names[stream.malformed])
    return watched(rows, "_own").drop("_own")

