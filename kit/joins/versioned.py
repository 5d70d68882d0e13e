"""The temporal join on Spark: a left stream against a versioned table (a right stream with
a primary key), by event time or by processing time.

``temporal_join(orders, rates, on="currency", how="left")`` returns a ``TemporalJoin``:

=================  ===========================================================================
member             what it holds
=================  ===========================================================================
``df``             the joined rows Flink emits: the left columns, then the right ones (a right
                   column named like a left one gets ``_right``; the shared key once), sorted
                   by the left time, the key, then the other left columns
``fates()``        every arrival of both inputs and what became of it (``temporal.Fate``):
                   ``side``, ``seq``, ``pos`` (merged arrival), ``fate``, ``at_pos`` and ``at``
                   (watermark or processing time then), ``version_seq``, and the row values
                   (``left``/``right`` structs)
``emissions()``    the emitted left rows in Flink's emission order: ``seq``, ``version_seq``,
                   ``emitted_pos``, ``watermark``, ``proctime``, ``version_time``
=================  ===========================================================================

The right side may also be an append-only stream made a versioned view by deduplication
(``deduplicate="last"``: Flink's ``ROW_NUMBER() OVER (PARTITION BY key ORDER BY time DESC)
= 1``): a row older than one its key has seen never becomes a version (fate
``deduplicated``).

Engines: the as-of fast path (``asof.py``) when it gives the replay's answer (event time,
no state retention, no late row on either input), else the replay: both inputs merged
(``replay.interleaved``), spread over tasks by key and sorted by merged position, Flink's
operator (``temporal.py``) run per key on the replay driver (``interleave.per_key``), a
step per arrival, with the operator watermark's rises in hand. ``fates()`` and
``emissions()`` always replay.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import KitError
from ..stream import Stream, prepared
from ..time import Clock, Duration, to_duration
from . import asof
from ..replay.interleave import (LEFT, MAX_TIME, MIN_TIME, RIGHT, Watermarks, check_inputs, interleaved, per_key, tasks,
                     watermarks)
from ..replay.keyed import tuples
from .temporal import (HOWS, Fate, StateRetention, TemporalProcessTimeJoinOperator,
                       TemporalRowTimeJoinOperator)

__all__ = ["TemporalJoin", "TemporalTableFunction", "temporal_join", "time_kind", "VERSION"]

VERSION = "__kit_v"                  # the column that links a left row to its version
_ENGINES = ("auto", "fast", "replay")
_FATES = T.StructType([T.StructField(n, t) for n, t in (
    ("_side", T.IntegerType()), ("_seq", T.LongType()), ("_pos", T.LongType()), ("_fate", T.StringType()),
    ("_at_pos", T.LongType()), ("_at", T.LongType()), ("_vseq", T.LongType()), ("_vts", T.LongType()),
    ("_timer", T.LongType()), ("_batch", T.LongType()))])


def temporal_join(left: Stream, right: Stream, on, how: str = "inner", *, time: str = "event",
                  interleave: str = "event_time", clock: Clock | None = None,
                  state_ttl: Duration | None = None, deduplicate: str | None = None,
                  engine: str = "auto") -> "TemporalJoin":
    """Join each row of ``left`` with the version of ``right`` valid at its time.

    - ``on``: the key: a column name both inputs have, or ``{left_column: right_column}``;
      it must cover ``right``'s ``primary_key`` when it has one.
    - ``how``: ``"inner"`` or ``"left"``.
    - ``time``: ``"event"`` (``FOR SYSTEM_TIME AS OF o.rowtime``, waits for the watermark)
      or ``"processing"`` (the temporal table function join: joins at arrival).
    - ``interleave``, ``clock``: the merged arrival order and processing-time clock
      (``replay.interleaved``); ``state_ttl``: ``table.exec.state.ttl``.
    - ``deduplicate``: ``"last"`` makes ``right`` (append-only) a versioned view by
      deduplication, Flink's ``ROW_NUMBER() OVER (PARTITION BY key ORDER BY time DESC) = 1``
      with the right columns of ``on`` as ``key`` (``"first"``: ``ASC``); ``fates()`` shows
      the rows it dropped.
    """
    pairs = tuple(on.items()) if isinstance(on, dict) else \
        tuple((c, c) for c in ((on,) if isinstance(on, str) else on))
    if deduplicate is not None and isinstance(right, Stream) and not right.primary_key:
        right = replace(right, primary_key=tuple(r for _, r in pairs))
    return TemporalJoin(left, right, pairs, how, time, interleave, clock,
                        StateRetention(to_duration(state_ttl, "temporal_join", "state_ttl", like="Duration"))
                        if state_ttl is not None else None, engine, deduplicate)


@dataclass(frozen=True)
class TemporalTableFunction:
    """PyFlink's ``create_temporal_table_function(time_attribute, primary_key)``: ``stream``
    as a function of time, for ``LATERAL TABLE (Rates(o.proctime))`` in ``kit.sql``. By
    processing time (``time_attribute`` is the stream's proctime) it runs
    ``TemporalProcessTimeJoinOperator``; by event time, the event-time operator."""
    stream: Stream
    time_attribute: str
    primary_key: tuple

    def __post_init__(self):
        if not isinstance(self.stream, Stream):
            raise KitError(f"a temporal table function is made from a kit.stream(...); got {type(self.stream).__name__}")
        key = (self.primary_key,) if isinstance(self.primary_key, str) else tuple(self.primary_key)
        object.__setattr__(self, "primary_key", key)
        for c in key:
            if c not in self.stream.source.columns:
                raise KitError(f"primary key {c!r} is not a column; columns are {self.stream.source.columns}")
        if self.time is None:
            raise KitError(f"time_attribute {self.time_attribute!r} is neither the stream's event time "
                           f"({self.stream.time!r}) nor its processing time (proctime=)")

    @property
    def time(self) -> str | None:
        """``"event"`` or ``"processing"``: which time ``time_attribute`` is."""
        return time_kind(self.stream, self.time_attribute)


def time_kind(s: Stream, column: str) -> str | None:
    """``"event"`` when ``column`` is the event time of ``s``, ``"processing"`` when it is its
    processing time (a proctime column, or ``proctime`` for a ``Clock``), else None."""
    if s.time is not None and column.lower() == s.time.lower():
        return "event"
    if s.proctime is not None and column.lower() == (s.proctime if isinstance(s.proctime, str) else "proctime").lower():
        return "processing"
    return None


@dataclass(frozen=True)
class TemporalJoin:
    """A temporal join, built lazily (see the module doc)."""
    left: Stream
    right: Stream
    keys: tuple                       # ((left column, right column), ...)
    how: str = "inner"
    time: str = "event"
    interleave: str = "event_time"
    clock: Clock | None = None
    retention: StateRetention | None = None
    engine: str = "auto"
    deduplicate: str | None = None    # "last" / "first": right is a versioned view by deduplication

    def __post_init__(self):
        check_inputs(self.left, self.right, self.keys)
        if self.how not in HOWS:
            raise KitError(f"how={self.how!r}: a temporal join is 'inner' or 'left' (Flink supports "
                           "no other join type for it)")
        if self.time not in ("event", "processing"):
            raise KitError(f"time={self.time!r} must be 'event' or 'processing'")
        if self.engine not in _ENGINES:
            raise KitError(f"engine={self.engine!r} is not one of " + ", ".join(map(repr, _ENGINES)))
        if not self.keys:
            raise KitError("on= names no key column")
        missing = [c for c in self.right.primary_key if c not in [r for _, r in self.keys]]
        if missing:
            raise KitError(f"the versioned table's primary key {list(self.right.primary_key)} must be in the "
                           f"join key; {missing} is not (on={dict(self.keys)})")
        if self.deduplicate not in (None, "last", "first"):
            raise KitError(f"deduplicate={self.deduplicate!r} must be 'last' (ORDER BY time DESC), 'first' "
                           "(ASC) or None")
        if self.deduplicate and "op" in self.right.source.columns:
            raise KitError("a versioned view by deduplication reads an append-only stream: Flink's "
                           "Deduplicate doesn't support consuming update and delete changes (drop the op column)")
        if self.deduplicate and self.time != "event":
            raise KitError("a versioned view by deduplication serves the event-time temporal join "
                           "(FOR SYSTEM_TIME AS OF the left table's event time)")
        if self.time == "processing" and self.retention is None and self.left.proctime is None \
                and self.clock is None:
            raise KitError("a processing-time join runs on processing time: give the inputs proctime= "
                           "or the join clock=Clock(...)")

    # -- the joined rows -----------------------------------------------------------------
    @cached_property
    def fast(self) -> bool:
        """Whether the as-of fast path gives the answer (decided once, with a pass over the inputs)."""
        if self.engine != "auto":
            return self.engine == "fast"
        return (self.time == "event" and not (self.retention and self.retention.ttl.millis > 0)
                and not self._checked[0])

    @cached_property
    def _checked(self) -> tuple[bool, asof.Shape]:
        """Whether a row of either input is late (``asof.has_late``), and the shape of the
        versions' spans (``asof.spans_shape``): a small job, run while the inputs are read."""
        with ThreadPoolExecutor(1) as pool:
            shape = pool.submit(asof.spans_shape, self._right_rows(), len(self.keys))
            return asof.has_late(self.left, self.right), shape.result()

    def views(self) -> tuple[DataFrame, DataFrame]:
        """The left rows Flink emits, each with ``__kit_v`` (the arrival ``seq`` of the version it
        met, NULL for none), and the right rows with ``__kit_v`` (their ``seq``): joining
        them on ``__kit_v`` and the key gives the result, and SQL adds its own condition."""
        lcols, rcols = self.left.source.columns, self.right.source.columns
        if self.fast:
            right = self._right_rows()
            right_view = right.select("_vr.*", F.col("_seq").alias(VERSION))
            met = asof.versions(self._left_rows(), right, [f"_l{lcols.index(l)}" for l, _ in self.keys],
                                self._checked[1] if self.engine == "auto" else None)
            left_view = met.select(*[F.col(f"_l{i}").alias(c) for i, c in enumerate(lcols)], F.col("_v").alias(VERSION))
        else:
            right_view = self.merged.where(F.col("_side") == RIGHT).select("_vr.*", F.col("_seq").alias(VERSION))
            fates = self.replayed
            left_view = (fates.where((F.col("_side") == LEFT) & (F.col("_fate") != "expired"))
                         .select(*[F.col("_vl")[c].alias(c) for c in lcols],
                                 F.when(F.col("_fate") == "joined", F.col("_vseq")).alias(VERSION)))
        return left_view.select(*lcols, VERSION), right_view.select(*rcols, VERSION)

    @cached_property
    def df(self) -> DataFrame:
        left_view, right_view = self.views()
        lcols = self.left.source.columns
        shared = {r for l, r in self.keys if l == r}
        # the version met has the left row's key (a NULL key too: keyed state): the link alone joins
        out = left_view.alias("l").join(right_view.alias("r"), F.col("l." + VERSION) == F.col("r." + VERSION), self.how)
        names = [F.col(f"l.`{c}`") for c in lcols] + [
            F.col(f"r.`{c}`").alias(c + "_right" if c in lcols else c)
            for c in self.right.source.columns if c not in shared]
        order = [self.left.time] + [l for l, _ in self.keys] + [
            f.name for f in self.left.source.schema.fields if not isinstance(f.dataType, T.MapType)]
        return out.select(*names).orderBy(*dict.fromkeys(order))

    def fates(self) -> DataFrame:
        """Every arrival of both inputs and what became of it, by replaying (any engine):
        ``side`` ('left'/'right'), ``seq``, ``pos`` (merged arrival), ``fate`` (see
        ``temporal.Fate``), ``at_pos`` (merged position when it happened; NULL: kept to the
        end), ``at`` (the watermark then, or the processing time; NULL at the end of input),
        ``version_seq``/``version_time`` (the version a left row met), ``timer`` (the event
        timer that emitted it), ``left``/``right`` (the values)."""
        return self.replayed.selectExpr(
            f"IF(_side = {LEFT}, 'left', 'right') AS side", "_seq AS seq", "_pos AS pos", "_fate AS fate",
            "_at_pos AS at_pos", "_at AS at", "_vseq AS version_seq", "_vts AS version_time", "_timer AS timer",
            "_batch AS batch", "_vl AS left", "_vr AS right")

    def emissions(self) -> DataFrame:
        """The left rows the operator emitted, in Flink's emission order: by the merged
        position after which they left, then the timer, then per key firing (``batch``: its
        first left arrival), then arrival; ``watermark`` is NULL at the end of input."""
        emitted = ["joined"] + (["no_version", "deleted", "condition"] if self.how == "left" else [])
        return (self.fates().where((F.col("side") == "left") & F.col("fate").isin(emitted))
                .withColumnRenamed("at_pos", "emitted_pos").withColumnRenamed("at", "watermark")
                .coalesce(1).sortWithinPartitions("emitted_pos", "timer", "batch", "pos"))

    # -- the replay ----------------------------------------------------------------------
    def _left_rows(self) -> DataFrame:
        """Left rows for the fast path: ``_ts``, the columns as ``_l0..``."""
        left = self.left
        return prepared(left).select("_ts", *[F.col(left.inner(c)).alias(f"_l{i}") for i, c in enumerate(left.source.columns)])

    def _right_rows(self) -> DataFrame:
        """Right rows for the fast path: ``_k0..``, ``_ts``, ``_seq`` (an id that grows with
        arrival, not dense), ``_op``, ``_vr``."""
        df = prepared(self.right)
        lt = {f.name: f.dataType for f in self.left.source.schema.fields}
        right = self.right
        op = F.coalesce(F.col("op"), F.lit("+I")) if "op" in right.source.columns else F.lit("+I")
        rows = df.select(*[F.col(right.inner(r)).cast(lt[l]).alias(f"_k{i}") for i, (l, r) in enumerate(self.keys)],
                         "_ts", F.monotonically_increasing_id().alias("_seq"), op.alias("_op"),
                         F.struct(*[F.col(right.inner(c)).alias(c) for c in right.source.columns]).alias("_vr"))
        if self.deduplicate:                 # the rows the deduplication passes (no TTL here)
            before = (Window.partitionBy(*[f"_k{i}" for i in range(len(self.keys))]).orderBy("_seq")
                      .rowsBetween(Window.unboundedPreceding, -1))
            passes = (F.col("_ts") >= F.max("_ts").over(before) if self.deduplicate == "last"
                      else F.col("_ts") < F.min("_ts").over(before))
            rows = rows.withColumn("_in", F.coalesce(passes, F.lit(True))).where("_in").drop("_in")
        return rows

    @cached_property
    def merged(self) -> DataFrame:
        """Both inputs in merged arrival order with the key ``_k0..`` (``replay.interleaved``)."""
        return interleaved(self.left, self.right, self.interleave, self.clock, self.keys)

    @cached_property
    def watermarks(self) -> Watermarks:
        return watermarks(self.merged)

    @cached_property
    def replayed(self) -> DataFrame:
        """``_replayed()``, computed once (``localCheckpoint``): ``views``, ``fates`` and
        ``emissions`` all read it. Replayed in one task, it is kept when first read (no job of
        its own); in several, at once (a later read through one partition would replay it
        in one task)."""
        return self._replayed().localCheckpoint(eager=tasks(self.merged) > 1)

    def _replayed(self) -> DataFrame:
        """Every arrival's fate (schema ``_FATES``, plus ``_vl``/``_vr``), replayed per key."""
        merged = self.merged
        keys = [f"_k{i}" for i in range(len(self.keys))]
        how, retention, event, dedup = self.how, self.retention, self.time == "event", self.deduplicate
        schema = T.StructType(_FATES.fields + [merged.schema["_vl"], merged.schema["_vr"]])

        def operator(key, marks):
            return (TemporalRowTimeJoinOperator(marks, how, None, retention, dedup) if event
                    else TemporalProcessTimeJoinOperator(how, None, retention))

        def row(f: Fate) -> tuple:
            a, v = f.arrival, f.version
            at = None if f.at in (MIN_TIME, MAX_TIME) else f.at
            if a.side != LEFT:
                return (a.side, a.seq, a.pos, f.fate, f.pos, at, v and v.seq, v and v.time, None, None, None, a.row)
            return (a.side, a.seq, a.pos, f.fate, f.pos, at, v and v.seq, v and v.time, f.timer,
                    a.pos if f.batch is None else f.batch, a.row, v.row if v else None)

        rows = tuples(schema)

        def output(table, outs):               # the fates (emissions and expirations are in them)
            return rows(table, [row(f) for f in outs if type(f) is Fate])

        return per_key(merged, keys, operator, schema, output, marks=event)
