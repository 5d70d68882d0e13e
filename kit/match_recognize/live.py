"""MATCH_RECOGNIZE over a live stream: Flink's ``CepOperator`` on the live driver.

    ticks = kit.live(spark.readStream.schema("symbol string, rowtime timestamp, price int").json("in/"),
                     time="rowtime")
    run = kit.sql("SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime "
                  "MEASURES ... PATTERN (A B+ C) DEFINE ...)", Ticker=ticks).start("runs/v")
    run.process_all_available()
    run.matches     # symbol  <measures>  batch     (the clause's rows so far)
    run.df          # the query's answer over them
    run.late        # rows dropped as late: their columns, the watermark then, batch
    run.replay()    # kit.sql over kit.stream of the record: the same matches and late rows

Each PARTITION BY key's ``cep.CepOperator`` keeps its rows in Spark's state store until the
watermark passes them, then releases them to its NFA (``kit.live.driver.LiveRun``: one
pickled state per key, event-time timers on Spark's). What the operator outputs leaves as
rows: a match's measures, numbered per key (``number``), and each late row (its place in
the batch; ``late`` finds its columns among the arrivals).

Where live differs from Flink, and what the replay of the record shows:

- every row of a micro-batch meets the watermark after the earlier batches (Flink moves it
  after each row), so rows are released, and matches complete, batch by batch;
- the rows still waiting at the end (after the last batch's watermark) are in no match yet:
  the replay reads the rows the live run released (``released``), whose end of input then
  changes nothing, except that a completed match waiting for an earlier partial match (one
  that WITHIN would expire later) is output by the replay's end of input and not yet live.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..live.driver import LiveRun
from ..live.query import LiveQuery
from ..live.stream import LiveStream
from .cep import CepOperator, Emitted
from .expressions import to_decimal
from .operator import MatchResult

__all__ = ["LiveCep", "LiveMatchQuery"]


class LiveCep(CepOperator):
    """``CepOperator`` whose outputs are the live driver's rows: ``("match", watermark, None,
    number, *key, *measures)`` (TIMESTAMP measures as epoch ms) or ``("late", watermark, the
    row's place in its batch, None, ...)``; ``measures``: the measures' Spark types."""

    def __init__(self, *args, keys: int, measures: list, **kwargs):
        super().__init__(*args, **kwargs)
        self.keys, self.measures = keys, measures
        self.blank = [None] * (keys + len(measures))

    def emit(self, ctx, emitted: Emitted):
        if emitted.match is None:
            ctx.output(("late", emitted.watermark, ctx.at, None, *self.blank))
            return
        values = [_value(v, dtype) for v, dtype in zip(emitted.row, self.measures)]
        ctx.output(("match", emitted.watermark, None, emitted.match.number, *ctx.key[:self.keys], *values))


def _value(value, dtype: T.DataType):
    """A measure's value as the live driver's row carries it (a TIMESTAMP as epoch ms)."""
    if isinstance(value, np.datetime64):
        return None if np.isnat(value) else int(value.astype("datetime64[ms]").astype("int64"))
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(dtype, T.DecimalType) and value is not None:   # rounded to its scale, as the replay's
        return None if value != value else to_decimal(value, dtype.scale)
    return value


def _carried(dtype: T.DataType) -> T.DataType:
    return T.LongType() if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)) else dtype


class LiveMatchQuery(LiveQuery):
    """A started live MATCH_RECOGNIZE (``kit.sql`` over a ``kit.live`` stream, started):
    ``matches``, ``df`` (``outer`` applied to the matches: the query around the clause),
    ``late``, ``bad``, ``arrivals``, ``replay()`` (``replayer`` of the released record), and
    ``LiveQuery``'s ``process_all_available()``, ``stop()``, ``status``. ``twin``: the
    clause's ``MatchResult`` over no rows, its plan (the spec coerced to the input's types)
    and columns."""

    def __init__(self, stream: LiveStream, twin: MatchResult, path: str, trigger, sink, query: dict,
                 outer, replayer):
        plan, schema = twin.plan, twin.rows.schema
        self.stream, self.outer, self.replayer = stream, outer, replayer
        self.values, self.partition_by = list(stream.source.columns), list(plan.partition_by)
        self.schema = schema
        measures = schema.fields[len(self.partition_by):]
        source = stream.source.schema
        stamps = [c for c in self.values if isinstance(source[c].dataType, (T.TimestampType, T.TimestampNTZType))]
        time_ms = not isinstance(source[stream.time].dataType, T.IntegralType)
        operator = LiveCep(plan.spec, self.values, twin.semantics, plan.aggregates, rowtime=stream.time,
                           timestamps=stamps, step_budget=plan.limits.get("step_budget"),
                           keys=len(self.partition_by), measures=[f.dataType for f in measures])
        long = T.LongType()
        self._fields = ([T.StructField("_what", T.StringType()), T.StructField("_watermark", long),
                         T.StructField("_late", long), T.StructField("number", long)]
                        + [T.StructField(f.name, _carried(f.dataType)) for f in schema.fields])
        self.run = LiveRun(stream.time, stream.watermark, tuple(self.partition_by), tuple(stream.recorded),
                           tuple("_ts" if c == stream.time and time_ms else c for c in self.values) + ("_arr",),
                           stream.malformed)
        tagged = self.run.process(stream.raw, operator, T.StructType(self._fields))
        out = {f"_o{i}": f.name for i, f in enumerate(self._fields)}
        arrival = [F.col(f"_c{i}").alias(c) for i, c in enumerate(self.values)] + ["_arr", "_ts", "_wm"]
        reason = stream.reason(f"_c{len(self.values)}" if stream.malformed else None)
        tables = {"arrival": arrival, "bad": [*arrival[:len(self.values)], "_arr", reason],
                  "match": [F.col(o).alias(n) for o, n in out.items() if n not in ("_what", "_late")],
                  "late": [F.col(o).alias(n) for o, n in out.items() if n in ("_watermark", "_late")]}
        super().__init__(tagged.withColumn("_kind", F.when(F.col("_kind") == "output", F.col("_o0"))
                                           .otherwise(F.col("_kind"))), path, tables, trigger, query, sink)

    @property
    def _timestamps(self) -> bool:
        return self.stream.time_is_timestamp

    @property
    def matches(self) -> DataFrame:
        """The clause's rows the committed batches output (its columns: the PARTITION BY
        columns, then the measures), each with its ``batch``: by key, each key's in order."""
        return self._matches(self.table("match"))

    def _matches(self, rows: DataFrame) -> DataFrame:
        typed = [F.timestamp_millis(f.name).alias(f.name) if _carried(f.dataType) != f.dataType else F.col(f.name)
                 for f in self.schema.fields]
        return rows.orderBy(*self.partition_by, "number").select(*typed, "batch")

    @property
    def df(self) -> DataFrame:
        """The query's answer over the matches so far (the query around the clause applied)."""
        return self.outer(self.matches.drop("batch"))

    def batch_rows(self, batch: int) -> DataFrame:
        """The query's rows over the matches micro-batch ``batch`` output, with ``batch``."""
        rows = self.outer(self._matches(self.table("match", batch)).drop("batch"))
        return rows.withColumn("batch", F.lit(batch))

    @property
    def late(self) -> DataFrame:
        """The rows dropped as late (their time at or below the watermark they met: Flink drops
        them silently): their columns, the ``watermark`` then and ``batch``."""
        late = self.table("late").withColumnRenamed("_late", "_arr")
        watermark = F.col("_watermark")
        return (self.table("arrival").join(late, ["batch", "_arr"]).orderBy("batch", "_arr")
                .select(*self.values, (F.timestamp_millis(watermark) if self._timestamps else watermark)
                        .alias("watermark"), "batch"))

    @property
    def released(self) -> DataFrame:
        """The record a replay reads (``LiveQuery.record``): the arrivals the operators released
        or dropped as late (time at or below the last batch's watermark), not those still
        waiting for it."""
        return self.record(self.values, self._timestamps, upto=self.applied())

    def replay(self) -> DataFrame:
        """The released record (``released``) replayed by ``kit.stream`` through the same query:
        its rows are ``df``'s, its ``late_rows`` ``late``'s (see the module doc for WITHIN)."""
        return self.replayer(self.released)
