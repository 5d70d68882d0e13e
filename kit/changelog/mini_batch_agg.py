"""The mini-batch group aggregate on Spark: the plan of ``kit.changelog.minibatch`` (ONE_PHASE,
local-global, local-incremental-global with split distinct) replayed in one task over the
input in arrival order, and the mini-batch watermarks (``ticks``) its changes pass on."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import sparksql
from ..arrow import column, map_in_arrow, python_values
from ..errors import KitError
from . import ADDS, Changelog
from .group_agg import State, emit, expired, outputs, replay_schema
from .minibatch import bucket, flushes, run

__all__ = ["split_arg", "bundles", "ticks", "with_ticks", "mini_batch"]


def split_arg(calls) -> str:
    """The one column the DISTINCT aggregates share (Flink splits by its hash)."""
    args = {c.arg for c in calls if c.distinct}
    if len(args) > 1:
        raise KitError(f"split distinct aggregation over DISTINCT aggregates of several columns {sorted(args)} "
                       f"is not modelled (Flink expands the input per column): turn "
                       f"table.optimizer.distinct-agg.split.enabled off or keep one DISTINCT column")
    for c in calls:
        if c.function.upper() == "AVG":
            raise KitError(f"split distinct aggregation with AVG({c.arg}) is not modelled: turn "
                           f"table.optimizer.distinct-agg.split.enabled off")
    return args.pop()


def bundles(calls, options) -> tuple:
    """The mini-batch plan's phase (``ONE_PHASE``, ``TWO_PHASE``, ``SPLIT``) and the split
    DISTINCT column (None without split)."""
    phase = "ONE_PHASE" if options.agg_phase == "ONE_PHASE" else "TWO_PHASE"
    if options.distinct_split and phase != "ONE_PHASE" and any(c.distinct for c in calls):
        return "SPLIT", split_arg(calls)
    return phase, None


def ticks(log: Changelog, latency: int) -> DataFrame:
    """The mini-batch watermarks a mini-batch aggregate over ``log`` flushes at, as its
    changes pass them on: ``log.ticks`` if it has them (it is such changes itself), else one
    right after each row whose next row's processing time reaches the next ``latency``
    interval, ``(seq, _pt)``: that row's ``seq`` and the interval's start.

        _pt of the rows (seq 0, 1, 2):  500, 900, 2100   latency 1000  ->  (1, 1000)
    """
    if log.ticks is not None:
        return log.ticks
    start = F.col("_pt") - F.pmod(F.col("_pt"), F.lit(latency)) + F.lit(latency)
    following = F.lead("_pt").over(Window.orderBy("seq", "_n"))
    return (log.df.select("seq", "_pt", following.alias("_next")).where(F.col("_next") >= start)
            .select("seq", start.alias("_pt")))


def with_ticks(log: Changelog) -> DataFrame:
    """``log.df`` with its ticks among its rows (``_op`` NULL, after the changes of their ``seq``)."""
    if log.ticks is None:
        return log.df
    types = {f.name: f.dataType.simpleString() for f in log.df.schema.fields}
    marks = log.ticks.selectExpr("CAST(NULL AS STRING) AS _op",
                                 *(f"CAST(NULL AS {types[c]}) AS {sparksql.name(c)}" for c in log.columns),
                                 "seq", "array(2147483647) AS _n", "_pt")
    return log.df.unionByName(marks)


def mini_batch(log: Changelog, keys, calls, options, types) -> tuple:
    """The mini-batch plan (``kit.changelog.minibatch``) replayed in one task over the input
    in arrival order: ONE_PHASE, local-global (TWO_PHASE, or AUTO), or local-incremental-
    global when split distinct is on too."""
    latency, size = options.mini_batch
    phase, arg = bundles(calls, options)
    split = options.distinct_split if arg else None
    key_types = [types[k] for k in keys] + ([T.IntegerType()] if split else [])
    spec, schema, arrow = replay_schema(keys, calls, options, types, log.insert_only)
    args = [c.arg for c in calls]
    states, ticked = {}, log.ticks is not None

    def fold(key, messages, seq, pt, one_phase):
        """``finishBundle`` for one key of the last level: its changes (``emit``)."""
        state = states.get(key)
        if expired(spec, state, pt):
            yield None, key, (state.written,), seq, pt
            state = None
        if state is None and one_phase:
            while messages and messages[0][0] < 0:
                messages = messages[1:]
            if not messages:
                return
        first, state = state is None, state or State(spec)
        changes, states[key] = emit(spec, state, first, state.value(), messages, pt)
        for kind, values in changes:
            yield kind, key, values, seq, pt

    def task(batches):
        batches = list(batches)
        table = pa.Table.from_batches(batches) if batches else None
        if table is None or table.num_rows == 0:
            return
        col = {name: python_values(table.column(name)) for name in table.column_names}

        def records():
            for i in range(table.num_rows):
                if col["_op"][i] is None:   # a mini-batch watermark of the input (its ticks)
                    yield None, None, col["seq"][i], col["_pt"][i]
                    continue
                key = tuple(col[k][i] for k in keys)
                if split:
                    key = (*key, bucket(col[arg][i], types[arg], split))
                message = (1 if col["_op"][i] in ADDS else -1, tuple(col[a][i] if a else None for a in args))
                yield key, message, col["seq"][i], col["_pt"][i]

        rows, places = [], {}
        for kind, key, values, seq, pt in run(flushes(records(), latency, ticked), phase, size, key_types,
                                              len(keys), fold):
            key = key[:len(keys)]
            if kind is None:
                rows.append([None, *key, *[None] * len(calls), seq, None, pt, values[0]])
                continue
            places[seq] = places.get(seq, -1) + 1
            rows.append([kind, *key, *values, seq, [places[seq]], pt, None])
        if rows:
            yield pa.RecordBatch.from_arrays(
                [column([r[i] for r in rows], f.dataType, arrow.field(i).type, nan_is_null=False)
                 for i, f in enumerate(schema.fields)],
                schema=arrow)

    replayed = map_in_arrow(with_ticks(log).coalesce(1).sortWithinPartitions("seq", "_n"), task, schema)
    return outputs(replayed, keys, calls, options)
