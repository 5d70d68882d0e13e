"""The live driver: one ``KeyedOperator`` per key inside Spark Structured Streaming.

The replay driver (``kit.replay.keyed``) steps an operator over recorded arrivals; this one
steps the same operator over the rows of each micro-batch, in Spark's
``transformWithState`` (its rows as Python values, as the replay has them;
``transformWithStateInPandas`` would make a nullable integer a float): a key's ``Context``
(its declared state, its timers, its clock) is kept pickled in the state store between
batches (RocksDB), checkpointed with the query, so a restarted query goes on where the
last committed batch left it.

Flink's watermark, not Spark's. Spark drops rows behind its own watermark before an
operator sees them; the operator must see them (late rows are shown, not lost). So Spark
tracks the largest event time only (``withWatermark`` on a copy of the time, dropped before
the operator: nothing is filtered), and the driver derives Flink's watermark from it
(``WatermarkStrategy.watermark``). Spark moves its watermark between micro-batches, so every
row of a batch meets the same watermark: the one after the rows of all earlier batches
(Flink moves it after each row). At the start of each batch, before a key's rows, the
key's timers up to that watermark fire; a key without rows in the batch is woken by a
Spark timer set at its earliest one.

    batch  rows (key, t)      watermark met (bounded 0 ms)   a timer at 9 fires
    0      (a, 3) (b, 12)     none                           -
    1      (a, 5)             11                             before (a, 5)

``per_key(...)`` runs a continuous query's operator (a group aggregate, a Top-N; with
``watermark=``, one with event-time timers: keeping the first row on event time) over a
changelog that is a stream of change rows: per batch, a key's rows in the order of the
arrivals that caused them (``seq``, ``_n``), its state kept between batches.
Chained one after the other in one query (each keyed as its operator needs), they run a
continuous query's plan, the word-frequency cascade among them.

``LiveRun.process(...)`` builds the streaming DataFrame: per batch, every arrival
(``_kind = 'arrival'``: its values, ``_arr``, the watermark it met ``_wm``) and every
output of the operators (``_kind = 'output'``: the ``output`` columns), so what the
operators saw is recorded beside what they did, and ``kit.stream`` can replay it. A row
without an event time (NULL, or a text Spark could not read as one) never reaches the
operator (Flink fails the job on it): it leaves as ``_kind = 'bad'``, and the query goes on.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from .. import sparksql
from ..arrow import map_in_arrow
from ..errors import KitError
from ..replay.keyed import MAX_TIME, MIN_TIME, Context, KeyedOperator
from ..time import WatermarkStrategy

__all__ = ["LiveRun", "SHIFT_MS", "arrivals", "arrival_ids", "check_watermark", "flink_watermark", "per_key",
           "watched"]

# Spark keeps its watermark at 0 or above and means "none yet" by 0: it tracks the event
# time shifted by 1000 years, so that times back to year 970 keep it above 0
SHIFT_MS = 1000 * 365 * 86_400_000
_TAG = "_kind"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def check_watermark(watermark: WatermarkStrategy) -> None:
    """Live mode derives Flink's watermark from the largest event time Spark saw: a strategy
    of that kind, or a KitError."""
    if watermark.kind not in ("bounded", "sql"):
        raise KitError(f"live mode follows a watermark of the largest event time seen "
                       f"(for_bounded_out_of_orderness, for_monotonous_timestamps, for_sql_delay); "
                       f"got {watermark!r}")


def flink_watermark(strategy: WatermarkStrategy, spark_ms: int) -> int:
    """Flink's watermark for a batch from Spark's (ms; 0: no row seen yet)."""
    if spark_ms <= 0:
        return MIN_TIME
    return strategy.watermark(spark_ms - SHIFT_MS)


def watched(df: DataFrame, ts: str = "_ts") -> DataFrame:
    """The streaming ``df`` with Spark's watermark on its event time ``ts`` (ms): Spark tracks
    the largest, shifted (``SHIFT_MS``), and filters nothing (the column is dropped again)."""
    return (df.withColumn("_event", F.timestamp_millis(F.col(ts) + F.lit(SHIFT_MS)))
            .withWatermark("_event", "0 seconds").drop("_event"))


def arrival_ids(df: DataFrame) -> DataFrame:
    """``df`` (a streaming DataFrame) with ``_arr``: each row's place in the micro-batch as
    Spark reads it (its partitions in order, each's rows in order), the arrival order of
    the batch's rows (Spark allows no ``monotonically_increasing_id`` in a stream). Counted
    in one task over the partitions in turn, so that every branch of a query that reads the
    source (the recorded arrivals and the operators' input) gives a row the same number,
    whatever place Spark gives the branch's tasks."""
    schema = T.StructType([*df.schema.fields, T.StructField("_arr", T.LongType(), False)])

    def number(batches):
        n = 0
        for b in batches:
            ids = pa.array(range(n, n + b.num_rows), pa.int64())
            n += b.num_rows
            yield pa.RecordBatch.from_arrays([*b.columns, ids], names=[*b.schema.names, "_arr"])

    return map_in_arrow(df.coalesce(1), number, schema)


def arrivals(df: DataFrame, time: str, columns, malformed: str | None = None) -> DataFrame:
    """The streaming ``df``'s rows as the live drivers read them: ``columns`` named ``_c0,
    _c1...``, ``_ts`` (the event time ``time`` in ms, NULL where it has none, or where the
    ``malformed`` column holds the text of a record Spark could not read: the row goes
    aside), ``_pt`` (the processing time, ms: the micro-batch's, Spark's ``current_timestamp()``,
    which its offset log keeps, so a batch run again after a restart has it again) and
    ``_arr`` (``arrival_ids``)."""
    kind = df.schema[time].dataType
    millis = F.col(sparksql.name(time)) if isinstance(kind, T.IntegralType) else F.unix_millis(sparksql.name(time))
    if malformed is not None:
        millis = F.when(F.col(sparksql.name(malformed)).isNull(), millis)
    return arrival_ids(df.select(*[F.col(sparksql.name(c)).alias(f"_c{i}") for i, c in enumerate(columns)],
                                 millis.alias("_ts"), F.unix_millis(F.current_timestamp()).alias("_pt")))


@dataclass(frozen=True)
class LiveRun:
    """How to run one operator per key live: the time column (BIGINT ms or TIMESTAMP), the
    watermark strategy (bounded, monotonous or SQL's), the key columns, the input columns
    each arrival carries (``columns``), and the operator's row: names among ``columns`` and
    the arrival's own ``_ts`` (event time, ms), ``_wm`` (the watermark it met, ms) and
    ``_arr`` (its place in the batch), as the replay's rows have them. ``malformed``: the
    column (among ``columns``) of the records Spark could not read, which go aside.
    ``processing``: the operator has processing-time timers (Spark's ``ProcessingTime`` mode;
    else its ``EventTime`` mode: a query has one; event-time timers run in both).

    Processing time is the micro-batch's (``_pt``): every row of a batch arrives at it, and
    a timer fires in the first batch at or after its time, before the key's rows there (and
    after the timers the batch's watermark passed); a key without rows is woken by a Spark
    timer at its earliest one (Spark runs a batch at every trigger in this mode, with data
    or not), or at every batch while it has an event-time timer."""
    time: str
    watermark: WatermarkStrategy
    keys: tuple
    columns: tuple
    row: tuple
    malformed: str | None = None
    processing: bool = False

    def __post_init__(self):
        check_watermark(self.watermark)

    def flink_watermark(self, spark_ms: int) -> int:
        """Flink's watermark for a batch from Spark's (ms; 0: no row seen yet)."""
        return flink_watermark(self.watermark, spark_ms)

    def process(self, df: DataFrame, operator: KeyedOperator, output: T.StructType) -> DataFrame:
        """``operator`` over each key of the streaming ``df``: the tagged rows (see the module
        doc), the arrivals' columns ``_c0..``, the outputs' ``_o0..``. ``operator``'s outputs
        are tuples in ``output``'s order."""
        for c in (self.time, *self.keys, *self.columns):
            if c not in df.columns:
                raise KitError(f"{c!r} is not a column of the live stream; columns are {df.columns}")
        # the state store Spark's transformWithState runs on (a query keeps the one it started with)
        df.sparkSession.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        inner = [f"_c{i}" for i in range(len(self.columns))]
        rows = arrivals(df, self.time, self.columns, self.malformed)
        rows = watched(rows)   # Spark tracks, filters nothing
        fields = [T.StructField(_TAG, T.StringType()), T.StructField("_arr", T.LongType()),
                  T.StructField("_wm", T.LongType()), T.StructField("_ts", T.LongType()),
                  T.StructField("_pt", T.LongType())]
        fields += [T.StructField(n, df.schema[c].dataType) for c, n in zip(self.columns, inner)]
        fields += [T.StructField(f"_o{i}", f.dataType) for i, f in enumerate(output.fields)]
        schema = T.StructType(fields)
        names = dict(zip(self.columns, inner))
        if not self.keys:   # one key for all rows
            rows = rows.withColumn("_all", F.lit(0))
        processor = _Processor(self, operator, [names.get(c, c) for c in self.row], schema, rows.columns)
        keys = [names[k] for k in self.keys] or ["_all"]
        mode = "ProcessingTime" if self.processing else "EventTime"
        return rows.groupBy(*keys).transformWithState(processor, schema, "Append", mode)


class _Processor(StatefulProcessor):
    """``transformWithState``'s processor: one key's ``Context`` per state entry
    (its state, its timers, its clocks) and the Spark timer that wakes it."""

    def __init__(self, run: LiveRun, operator: KeyedOperator, row: list, schema: T.StructType, arriving: list):
        self.run, self.operator, self.row, self.arriving = run, operator, row, arriving
        self.names = schema.fieldNames()
        self.inputs = [n for n in self.names if n.startswith("_c")]
        self.blank = [None] * (len(self.names) - 5 - len(self.inputs))   # an arrival's output columns

    def init(self, handle) -> None:
        self.handle = handle
        self.saved = handle.getValueState("context", "context binary")

    def handleInputRows(self, key, rows, timerValues):
        ctx, out, wake = self._load(key)
        now = _advance(self.operator, ctx, timerValues, self.run.watermark, self.run.processing)
        at = {name: i for i, name in enumerate(self.arriving)}
        arrivals = sorted((tuple(r) for r in rows), key=lambda r: r[at["_arr"]])   # Spark may name them by position
        records, wm = [], ctx.watermark
        for r in arrivals:
            ts = r[at["_ts"]]
            records.append(("bad" if ts is None else "arrival", r[at["_arr"]], wm, ts, r[at["_pt"]],
                            *[r[at[c]] for c in self.inputs], *self.blank))
            if ts is not None:           # no event time: Flink rejects the row; live, it goes aside
                ctx.at = r[at["_arr"]]
                self.operator.process_element(tuple(wm if c == "_wm" else r[at[c]] for c in self.row), ctx)
        yield from self._rows(records + self._outputs(out))
        self._save(ctx, wake, now)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        ctx, out, _ = self._load(key)
        now = _advance(self.operator, ctx, timerValues, self.run.watermark, self.run.processing)
        yield from self._rows(self._outputs(out))
        self._save(ctx, None, now)   # Spark removed the timer that woke the key

    def close(self) -> None:
        pass

    def _load(self, key) -> tuple:
        """The key's context as the last batch left it (new: no state, no watermark yet),
        the list it outputs to and the Spark timer set for it."""
        out = []
        ctx = Context(list(key), self.operator.state, out)
        return ctx, out, _restore(ctx, self.saved.get())   # one call to the state store

    def _save(self, ctx, wake, now: int) -> None:
        _store(self.handle, self.saved, ctx, wake, now, self.run.watermark, self.run.processing)

    def _outputs(self, out: list) -> list:
        blank = [None] * (4 + len(self.inputs))
        return [("output", *blank, *o) for o in out]

    def _rows(self, records: list):
        row = Row(*self.names)
        for r in records:
            yield row(*r)


def _advance(operator: KeyedOperator, ctx: Context, timerValues, strategy: WatermarkStrategy,
             processing: bool = False) -> int:
    """Flink's watermark moved to the batch's (from Spark's) and, for ``processing`` timers,
    the processing clock to the batch's time, firing the key's timers they passed (the
    watermark first: earlier batches brought it); Spark's watermark (ms)."""
    now = timerValues.getCurrentWatermarkInMs()
    ctx.advance(operator, flink_watermark(strategy, now))
    if processing:
        ctx.advance(operator, None, timerValues.getCurrentProcessingTimeInMs())
    return now


def _restore(ctx: Context, saved):
    """A key's state, timers and clocks from its state entry ``saved`` (None: a new key)
    into ``ctx``; the Spark timer set for it (None: none)."""
    if saved is None:
        return None
    ctx._state, ctx._event, ctx._proc, ctx.watermark, ctx.processing_time, wake = pickle.loads(saved[0])
    return wake


def _store(handle, saved, ctx: Context, wake, now: int, strategy: WatermarkStrategy,
           processing: bool = False) -> None:
    """``ctx`` back into the key's state entry ``saved``, and one Spark timer for the key
    (``wake``: the one set before): with event time, at the Spark watermark that brings
    Flink's to its earliest timer (one the watermark ``now``, Spark's, already passed waits
    for it to rise, as in Flink and the replay: a watermark that does not move fires
    nothing); in Spark's processing-time mode, at the earliest processing-time timer, or at
    the next batch while an event-time timer waits (Spark has no event-time timers in this
    mode: the key looks at each batch's watermark)."""
    if ctx._proc and not processing:
        raise KitError("live mode runs this query on event time only: the operator registered a "
                       "processing-time timer")
    if processing:
        due = min([*ctx._proc[:1], *[ctx.processing_time + 1] * bool(ctx._event and ctx._event[0] < MAX_TIME)],
                  default=None)
    else:
        earliest = ctx._event[0] if ctx._event else None
        due = None if earliest is None or earliest >= MAX_TIME else max(earliest + strategy.lag + SHIFT_MS, now + 1)
    if due != wake:
        if wake is not None:
            handle.deleteTimer(wake)
        if due is not None:
            handle.registerTimer(due)
    saved.update((pickle.dumps((ctx._state, ctx._event, ctx._proc, ctx.watermark, ctx.processing_time, due)),))


def per_key(df: DataFrame, keys: list, operator, schema: T.StructType, columns: list, output=None,
            watermark: WatermarkStrategy | None = None, order: tuple = ("seq", "_n")) -> DataFrame:
    """``operator(key)`` (a ``KeyedOperator``) over each key of the streaming changelog ``df``
    (its ``order`` columns give the order of a key's rows in a micro-batch); a row is the
    tuple of ``columns``' values. ``output(rows, outputs)`` makes the rows of ``schema`` from
    a key's sorted rows (all of ``df``'s columns) and what the operator output for them;
    default: each output is a tuple in ``schema``'s order. Without ``watermark`` the operator
    sets no timers. With it (the stream's strategy; ``df`` carries Spark's watermark of the
    arrivals, ``watched``), as ``LiveRun.process``: before a key's rows its timers up to
    Flink's watermark fire, and a key without rows is woken by a Spark timer; ``ctx.watermark``
    is Flink's, ``ctx.processing_time`` the batch's time (Spark's, rising batch by batch)."""
    df.sparkSession.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    if not keys:   # one key for all rows (first: the columns an output reads from the end stay there)
        df, keyed = df.select(F.lit(0).alias("_all"), "*"), ["_all"]
    processor = _Changes(operator, df.columns, list(columns), schema.fieldNames(), output, bool(keys), watermark,
                         order)
    return df.groupBy(*[F.col(sparksql.name(k)) for k in keys or keyed]).transformWithState(
        processor, schema, "Append", "None" if watermark is None else "EventTime")


class _Changes(StatefulProcessor):
    """``per_key``'s processor: a key's operator state, pickled in one state entry (with
    event time: its timers, its watermark and the Spark timer set for it too)."""

    def __init__(self, operator, arriving: list, columns: list, names: list, output, keyed: bool,
                 watermark: WatermarkStrategy | None, order: tuple):
        self.operator, self.names, self.output, self.keyed = operator, names, output, keyed
        self.at = {name: i for i, name in enumerate(arriving)}   # Spark may name a row's fields by position
        self.columns = [self.at[c] for c in columns]
        self.order = [self.at[c] for c in order]
        self.watermark = watermark

    def init(self, handle) -> None:
        self.handle = handle
        self.saved = handle.getValueState("state", "state binary")

    def handleInputRows(self, key, rows, timerValues):
        operator, ctx, out, wake = self._load(key)
        now = self._advance(operator, ctx, timerValues)
        rows = sorted((tuple(r) for r in rows), key=lambda r: [r[i] for i in self.order])
        for ctx.at, r in enumerate(rows):
            operator.process_element(tuple(r[i] for i in self.columns), ctx)
        if self.watermark is None and (ctx._event or ctx._proc):
            raise KitError("live mode runs a continuous query's operators without timers: one registered a timer")
        self._save(ctx, wake, now)
        yield from self._rows(rows, out)   # the timers' outputs, then the rows'

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        operator, ctx, out, _ = self._load(key)
        now = self._advance(operator, ctx, timerValues)
        self._save(ctx, None, now)   # Spark removed the timer that woke the key
        yield from self._rows([], out)

    def close(self) -> None:
        pass

    def _load(self, key) -> tuple:
        """The key's operator and context as the last batch left them, the list it outputs
        to and the Spark timer set for it."""
        key, out = list(key) if self.keyed else [], []
        operator = self.operator(key)
        ctx, wake = Context(key, operator.state, out), None
        saved = self.saved.get()   # one call to the state store (None: a new key)
        if self.watermark is not None:
            wake = _restore(ctx, saved)
        elif saved is not None:
            ctx._state = pickle.loads(saved[0])
        return operator, ctx, out, wake

    def _advance(self, operator, ctx, timerValues) -> int | None:
        """With event time: Flink's watermark moved to the batch's, firing the timers it
        passed; Spark's watermark (ms)."""
        if self.watermark is None:
            return None
        ctx.processing_time = timerValues.getCurrentProcessingTimeInMs()
        return _advance(operator, ctx, timerValues, self.watermark)

    def _save(self, ctx, wake, now) -> None:
        if self.watermark is None:
            self.saved.update((pickle.dumps(ctx._state),))
        else:
            _store(self.handle, self.saved, ctx, wake, now, self.watermark)

    def _rows(self, rows: list, out: list):
        row = Row(*self.names)
        for values in (out if self.output is None else self.output(rows, out)):
            yield row(*values)
