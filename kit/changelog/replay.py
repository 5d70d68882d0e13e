"""Flink's per-key changelog functions (Top-N, deduplicate, over) on the replay driver.

A function takes one message -- its row kind, the ``Row`` and its processing time -- and
returns its outputs (``process(kind, row, pt)``); it keeps its state in itself, as Flink's
functions keep their state handles. ``Function`` runs one as a ``KeyedOperator`` whose one
state is the function; ``replay_per_key`` runs a fresh one per key of a changelog.

A state TTL (``table.exec.state.ttl``) runs on processing time (``clock``). A function that
forgot state while taking a message says when that state was last written (``forgot``);
``replay_per_key`` then adds a row for it (``_op`` NULL, ``_last_write``) that ``expirations``
takes apart from the changes. A function whose Flink original cleans its key with a timer
(``KeyedProcessFunctionWithCleanupState``, the non-time OVER's) is forgotten whole by
``Function(cleanup_ms=ttl)``: each message moves the key's cleanup timer to ``pt + ttl``,
and a message at or after it finds a fresh function::

    pt    (ttl 1000)      function
    0     a 5             made, cleanup at 1000
    600   a 3             kept, cleanup at 1600
    2500  a 4             forgotten at 1600: a fresh one, cleanup at 3500
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from .. import sparksql
from ..errors import KitError
from ..live import per_key
from ..replay.keyed import KeyedOperator, ValueState, replay, spread
from . import Changelog, Options
from .group_agg import NO_CLOCK

__all__ = ["Row", "Function", "replay_per_key", "expirations", "check_columns", "clock"]


class Row:
    """An input row: its place in the task's table (``at``) and its ``values``."""
    __slots__ = ("at", "values")

    def __init__(self, at: int, values: tuple):
        self.at, self.values = at, values


def clock(pt):
    """The processing time ``pt`` a state TTL runs on, or a KitError when the input has none."""
    if pt is None:
        raise KitError(NO_CLOCK)
    return pt


class Function(KeyedOperator):
    """``make()``, a changelog function, as a keyed operator; a row is the message's values,
    then its ``_op`` and ``_pt``. Outputs ``(output, at, j)``: ``j`` its place among the
    message's outputs. ``cleanup_ms``: the key's cleanup timer (module doc), 0: none."""
    state = (ValueState("function"), ValueState("cleanup"))

    def __init__(self, make, cleanup_ms: int = 0):
        self.make, self.cleanup_ms = make, cleanup_ms

    def function(self, ctx, pt=None):
        """The key's function: made at its first message, and again after its cleanup time
        (then outputs ``(None, row, its last message's time)``: what it forgot)."""
        held = ctx.state("function")
        if self.cleanup_ms:
            cleanup, now = ctx.state("cleanup"), clock(pt)
            if cleanup.value() is not None and cleanup.value() <= now:
                held.update(None)
                ctx.output(((None, Row(ctx.at, ()), cleanup.value() - self.cleanup_ms), ctx.at, -1))
            if cleanup.value() is None or now + self.cleanup_ms > cleanup.value():
                cleanup.update(now + self.cleanup_ms)
        if held.value() is None:
            held.update(self.make())
        return held.value()

    def process_element(self, row, ctx):
        at = ctx.at
        function = self.function(ctx, row[-1])
        outputs = function.process(row[-2], Row(at, row[:-2]), row[-1])
        forgot = getattr(function, "forgot", None)
        if forgot is not None:   # it found state expired: when that was last written
            function.forgot = None
            ctx.output(((None, Row(at, ()), forgot), at, -1))
        for j, o in enumerate(outputs):
            ctx.output((o, at, j))


def replay_per_key(log: Changelog, keys: list, make, options: Options, extra: list, cleanup_ms: int = 0) -> DataFrame:
    """Run ``make()`` (a fresh function per key) over each key's messages in arrival order
    on Spark: the input spread over ``options.tasks`` by ``keys``, one ``mapInArrow`` per
    task (a streaming ``log``, live: ``kit.live.per_key``, micro-batch after micro-batch). Output: the value columns of the rows the function emitted, ``extra`` (name,
    Spark type, function of the output tuple giving a value of that type), ``_op``, ``seq``,
    ``_n``, ``_pt``; with a state TTL (``options.ttl_ms``) also ``_last_write`` and a row for
    each time a key's state was found expired (``_op`` NULL: ``expirations``).
    ``cleanup_ms``: ``Function``'s."""
    columns = list(log.columns)
    df = log.df.select(*[F.col(sparksql.name(c)) for c in columns], "_op", "seq", "_n", "_pt")
    ttl = options.ttl_ms > 0 or cleanup_ms > 0
    fields = [df.schema[c] for c in columns] + [T.StructField(n, t) for n, t, _ in extra] + [
        T.StructField("_op", T.StringType()), T.StructField("seq", T.LongType()),
        T.StructField("_n", T.ArrayType(T.IntegerType())), T.StructField("_pt", T.LongType())] + [
        T.StructField("_last_write", T.LongType())] * ttl
    if df.isStreaming:   # live: the same function per key, micro-batch after micro-batch
        def changes(rows, out):   # a row: the columns, _op, seq, _n, _pt; an output's row, the values it keeps
            for o, at, j in out:   # (live, expirations are read off the replay of its record)
                if o[0] is not None:
                    _, seq, n, pt = rows[at][-4:]
                    yield (*o[1].values, *[f(o) for _, _, f in extra], o[0], seq, [*n, j], pt, *[None] * ttl)
        return per_key(df, keys, lambda key: Function(make, cleanup_ms), T.StructType(fields), [*columns, "_op", "_pt"], changes)
    df = spread(df, keys, options.tasks, "seq", "_n")

    def output(table, out):
        out = list(out)
        if not out:
            return
        seqs, ns, pts = (table.column(c).to_pylist() for c in ("seq", "_n", "_pt"))
        taken = table.select(columns).take([o[1].at for o, _, _ in out])
        arrays = list(taken.columns) + [   # (an expiration: the message's values, its extras NULL)
            pa.array([None if o[0] is None else f(o) for o, _, _ in out], to_arrow_type(t, timezone="UTC"))
            for _, t, f in extra] + [
            pa.array([o[0] for o, _, _ in out], pa.string()),
            pa.array([seqs[i] for _, i, _ in out], pa.int64()),
            pa.array([ns[i] + [j] for _, i, j in out], pa.list_(pa.int32())),
            pa.array([pts[i] for _, i, _ in out], pa.int64())] + [
            pa.array([o[2] if o[0] is None else None for o, _, _ in out], pa.int64())] * ttl
        yield from pa.Table.from_arrays(arrays, [f.name for f in fields]).to_batches()

    return replay(df, keys, lambda key: Function(make, cleanup_ms), T.StructType(fields), [*columns, "_op", "_pt"], output)


def expirations(df: DataFrame, keys: list) -> tuple:
    """A replay's rows (``replay_per_key``) as its changes and, with a state TTL, its
    expirations: ``keys``, ``seq`` (the message that found them), ``last_write_pt``, ``pt``."""
    if "_last_write" not in df.columns:
        return df, None
    expired = df.where("_op IS NULL").selectExpr(*map(sparksql.name, keys), "seq", "_last_write AS last_write_pt",
                                                 "_pt AS pt")
    return df.where("_op IS NOT NULL").drop("_last_write"), expired


def check_columns(log: Changelog, names: list, what: str):
    missing = [c for c in names if c not in log.columns]
    if missing:
        raise KitError(f"{what} column(s) {missing} are not in the input: it has {list(log.columns)}")
