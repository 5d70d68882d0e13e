"""Flink's per-key changelog functions (Top-N, deduplicate, over) on the replay driver.

A function takes one message -- its row kind, the ``Row`` and its processing time -- and
returns its outputs (``process(kind, row, pt)``); it keeps its state in itself, as Flink's
functions keep their state handles. ``Function`` runs one as a ``KeyedOperator`` whose one
state is the function; ``replay_per_key`` runs a fresh one per key of a changelog.
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

__all__ = ["Row", "Function", "replay_per_key", "check_columns"]


class Row:
    """An input row: its place in the task's table (``at``) and its ``values``."""
    __slots__ = ("at", "values")

    def __init__(self, at: int, values: tuple):
        self.at, self.values = at, values


class Function(KeyedOperator):
    """``make()``, a changelog function, as a keyed operator; a row is the message's values,
    then its ``_op`` and ``_pt``. Outputs ``(output, at, j)``: ``j`` its place among the
    message's outputs."""
    state = (ValueState("function"),)

    def __init__(self, make):
        self.make = make

    def function(self, ctx):
        """The key's function: made at its first message."""
        held = ctx.state("function")
        if held.value() is None:
            held.update(self.make())
        return held.value()

    def process_element(self, row, ctx):
        at = ctx.at
        for j, o in enumerate(self.function(ctx).process(row[-2], Row(at, row[:-2]), row[-1])):
            ctx.output((o, at, j))


def replay_per_key(log: Changelog, keys: list, make, options: Options, extra: list) -> DataFrame:
    """Run ``make()`` (a fresh function per key) over each key's messages in arrival order
    on Spark: the input spread over ``options.tasks`` by ``keys``, one ``mapInArrow`` per
    task (a streaming ``log``, live: ``kit.live.per_key``, micro-batch after micro-batch). Output: the value columns of the rows the function emitted, ``extra`` (name,
    Spark type, function of the output tuple giving a value of that type), ``_op``, ``seq``,
    ``_n``, ``_pt``."""
    columns = list(log.columns)
    df = log.df.select(*[F.col(sparksql.name(c)) for c in columns], "_op", "seq", "_n", "_pt")
    fields = [df.schema[c] for c in columns] + [T.StructField(n, t) for n, t, _ in extra] + [
        T.StructField("_op", T.StringType()), T.StructField("seq", T.LongType()),
        T.StructField("_n", T.ArrayType(T.IntegerType())), T.StructField("_pt", T.LongType())]
    if df.isStreaming:   # live: the same function per key, micro-batch after micro-batch
        def changes(rows, out):   # a row: the columns, _op, seq, _n, _pt; an output's row, the values it keeps
            for o, at, j in out:
                _, seq, n, pt = rows[at][-4:]
                yield (*o[1].values, *[f(o) for _, _, f in extra], o[0], seq, [*n, j], pt)
        return per_key(df, keys, lambda key: Function(make), T.StructType(fields), [*columns, "_op", "_pt"], changes)
    df = spread(df, keys, options.tasks, "seq", "_n")

    def output(table, out):
        out = list(out)
        if not out:
            return
        seqs, ns, pts = (table.column(c).to_pylist() for c in ("seq", "_n", "_pt"))
        taken = table.select(columns).take([o[1].at for o, _, _ in out])
        arrays = list(taken.columns) + [
            pa.array([f(o) for o, _, _ in out], to_arrow_type(t, timezone="UTC")) for _, t, f in extra] + [
            pa.array([o[0] for o, _, _ in out], pa.string()),
            pa.array([seqs[i] for _, i, _ in out], pa.int64()),
            pa.array([ns[i] + [j] for _, i, j in out], pa.list_(pa.int32())),
            pa.array([pts[i] for _, i, _ in out], pa.int64())]
        yield from pa.Table.from_arrays(arrays, [f.name for f in fields]).to_batches()

    return replay(df, keys, lambda key: Function(make), T.StructType(fields), [*columns, "_op", "_pt"], output)


def check_columns(log: Changelog, names: list, what: str):
    missing = [c for c in names if c not in log.columns]
    if missing:
        raise KitError(f"{what} column(s) {missing} are not in the input: it has {list(log.columns)}")
