"""Flink's non-windowed group aggregation (``GROUP BY`` over a changelog), on Spark.

``group_aggregate(log, keys, calls, options)`` reads a changelog (``kit.changelog``)
and emits the changelog of ``SELECT keys, calls... GROUP BY keys``, as Flink's
``GroupAggFunction.processElement`` does, per key, for each input message in ``(seq, _n)``
order (``accumulate``: ``+I``/``+U``; ``retract``: ``-U``/``-D``):

==========================================  =============================================
the key's state, the message                emits (``_n`` = input ``_n`` + [j])
==========================================  =============================================
no state, a retraction                      nothing (ignored)
no state, an accumulate                     ``+I`` new (a fresh accumulator)
a result that changed                       ``-U`` old (if ``update_before``), ``+U`` new
a result that did not change                nothing; with a state TTL ``-U``/``+U`` anyway
the record count back to zero               ``-D`` old; the state is cleared
==========================================  =============================================

    seq  _op  word             seq  _op  cnt  freq    (SELECT cnt, COUNT(cnt) AS freq ... GROUP BY cnt)
    0    +I   Hello 1          0    +I   1    1
    1    +I   World 1          1    -U   1    1
    2    -U   Hello 1          1    +U   1    2
    2    +U   Hello 2          2    -U   1    2
                               2    +U   1    1
                               2    +I   2    1

Aggregates: COUNT(*), COUNT(x), COUNT(DISTINCT x), SUM, AVG, MIN, MAX (any DISTINCT); over
retractions SUM/AVG/COUNT subtract, MIN/MAX keep the multiset of values (Flink's
``MinWithRetractAggFunction``; a call with ``retract=False`` ignores retractions instead, as
the non-retracting MAX / MIN the planner picks over an input that only moves its way) and a DISTINCT keeps a count per value. Values are those of
the batch aggregate over the rows in the table (SUM of NULLs is NULL) at ``call.type``, as
Flink computes them at Flink's types (``result_type``: a SUM of INTs an INT that wraps
around, an AVG of INTs truncated toward zero; ``group_agg._Sum``), or at Spark's wider ones.

Changelog mode (Flink's ``FlinkChangelogModeInferenceProgram``): ``+I``, ``+U``, ``-U`` when
``update_before``, ``-D`` when the input holds updates or deletes (a count can go back to
zero). A state TTL adds no ``-D``: an expired key is forgotten silently. The upsert key is
``keys`` (``()`` for a global aggregate: one row, nothing at all for an empty input).

State TTL (``options.ttl_ms``, ``table.exec.state.ttl``: processing time, written on create
and write, never returning expired state): a key whose state was last written at ``w`` is
gone at a message with ``_pt - w >= ttl`` (Flink: ``w + ttl <= now``); a retraction is then
ignored and an accumulate starts again at ``+I``. The second value returned lists these
expirations (the key columns, ``seq``, ``last_write_pt``, ``pt``).

Mini-batch (``options.mini_batch = (allow_latency_ms, size)``): Flink's bundle operators,
replayed in one task (Flink's parallelism 1) by ``kit.changelog.minibatch`` (in Java by
``kit/jvm/MiniBatchGroupAggregate.java`` where the compiled path applies and the keys have a
modelled hash): ONE_PHASE
(``MiniBatchGroupAggFunction``: a key without state drops its bundle's leading retractions),
local-global (``TWO_PHASE``, or ``AUTO``: ``MiniBatchLocal/GlobalGroupAggFunction``, each
level with its own count trigger) and, with split distinct, Local -> Incremental -> Global.
A bundle is flushed at ``size`` records of its operator's input, when processing time
enters a new ``allow_latency`` interval (``_pt - _pt % allow_latency``; every level, with the
interval's end as ``_pt``) and at the end of input; keys in Flink's ``HashMap`` order. A
flush's changes carry the ``seq`` of the record that caused it and ``_n = [place among the
changes of that seq]``. Without a clock (``_pt`` NULL) only size and the end of input flush.

    words a b a c b a c c a b d, COUNT(*) GROUP BY word, size 3, TWO_PHASE:
    +I b 2, +I a 2 | +I c 3, -U a 2, +U a 3 | -U b 2, +U b 3, -U a 3, +U a 4, +I d 1

Split distinct (``options.distinct_split``, Flink's ``SplitAggregateRule``) without
local-global phases: a PARTIAL aggregate by ``keys + [MOD(HASH_CODE(x), buckets)]`` then a
FINAL one by ``keys`` over its changelog (transient lower values included), both this
function; with them, the Incremental level (above). One DISTINCT column; no AVG.

Engines. ``reference``: each key replayed in Python (``group_agg.GroupAggFunction`` on the
replay driver, over tasks by key) -- the definition. ``compiled``: the same fold in Java (``kit/jvm/GroupAggregate.java``), one
shuffle by key and each task's messages sorted by ``(seq, _n)``, keys of simple types, the
aggregates of its own result types (COUNT and SUM of integers BIGINT, AVG DOUBLE, MIN/MAX
the column's) or a SUM of integers at a narrower type (wrapped after the fold), no TTL (with mini-batch: the whole input in one task, as above); ``auto``
takes it when the session has the kit's Java classes. ``chain`` (what a continuous query
over one stream takes first): the group aggregates stacked over that stream -- one, or a
cascade -- fused into one Java pass per chunk of arrivals, each chunk seeded with the
states the chunks before it leave: no shuffle and no sort at all (with mini-batch: one pass
over the whole input, each level's changes read by the next as they flush, the first level
on a thread of its own). ``fast``: Spark SQL window functions over one shuffle by key, each input
message exploded into its 0-2 changes. Per key, in ``(seq, _n)`` order, with weight
``w = ±1``:

    S = running sum(w)        M = min(0, running min(S))      count c = S - M
    ignored  <=>  M < M before (a retraction at c = 0)        e = 0 if ignored else w
    first    <=>  e = 1 and c = 1        gone  <=>  not ignored and c = 0
    COUNT/SUM/AVG: running sums of e·x (and of e·[x not NULL]); DISTINCT x: e replaced by the
    0->1 / 1->0 transitions of the running count of (key, x); MIN/MAX: running min/max.

It assumes the input is a valid changelog (a retraction retracts a row that was added), as
the kit's operators emit. ``auto`` takes it unless the state TTL or mini-batch is on, or
the input has retractions and a MIN/MAX (a multiset) or a floating-point SUM/AVG (its
running sum would carry a rounding remainder past a clear) -- and the compiled path does not apply.

Modules, as Flink's runtime splits them: ``group_agg`` (``GroupAggFunction``, the reference),
``mini_batch_agg`` (with ``minibatch``: the bundle operators), ``aggregate_compiled`` (the
Java folds and ``chain``), ``aggregate_fast`` (Spark SQL); this module picks one.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..arrow import map_in_arrow, python_values
from ..errors import KitError
from ..spark import known_rows
from . import UPDATE_AFTER, UPDATE_BEFORE, AggCall, Changelog, Options
from .aggregate_compiled import compiled, not_compiled
from .aggregate_fast import fast, not_fast
from .group_agg import NO_CLOCK, changelog_mode, reference
from .mini_batch_agg import mini_batch, split_arg, ticks
from .minibatch import bucket

__all__ = ["FUNCTIONS", "ENGINES", "group_aggregate", "changelog_mode"]

FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX")
ENGINES = ("auto", "compiled", "fast", "reference")


def group_aggregate(log: Changelog, keys: list[str], calls: list[AggCall], options: Options,
                    engine: str = "auto") -> tuple[Changelog, DataFrame | None]:
    """``SELECT keys, calls GROUP BY keys`` over ``log`` as a changelog (module doc), and the
    state expirations (None when the TTL is off)."""
    keys = list(keys)
    if log.df.isStreaming and engine == "auto":   # live: the reference function on the live driver
        engine = "reference"
    types = _check(log, keys, calls, options, engine)
    out = (*keys, *(c.name for c in calls))
    why = not_fast(log, calls, options, types)
    if engine == "fast" and why:
        raise KitError(f"the fast group aggregate does not apply: {why}; use engine='reference' or 'auto'")
    if options.distinct_split and any(c.distinct for c in calls) and not (
            options.mini_batch and options.agg_phase != "ONE_PHASE"):
        return _split(log, keys, calls, options, engine)
    unfit = not_compiled(log, keys, calls, options, types) if engine in ("auto", "compiled") else None
    if engine == "compiled" and unfit:
        raise KitError(f"the compiled group aggregate does not apply: {unfit}; use engine='auto'")
    in_order = False
    if engine in ("auto", "compiled") and not unfit:
        (df, in_order), expired = compiled(log, keys, calls, options, types), None
    elif options.mini_batch:
        df, expired = mini_batch(log, keys, calls, options, types)
    elif engine != "reference" and not why:
        df, expired = fast(log, keys, calls, options, types), None
    else:
        df, expired = reference(log, keys, calls, options, types)
    return Changelog(df, out, changelog_mode(log.mode, options), tuple(keys), in_order,
                     ticks(log, options.mini_batch[0]) if options.mini_batch else None), expired


def _with_bucket(log: Changelog, arg: str, buckets: int, types: dict) -> Changelog:
    """``log`` with ``_kit_bucket = MOD(HASH_CODE(arg), buckets)`` (``minibatch.bucket``)."""
    schema = T.StructType([*log.df.schema.fields, T.StructField("_kit_bucket", T.IntegerType())])
    dtype = types[arg]

    def add(batches):
        for b in batches:
            values = python_values(pa.chunked_array([b.column(b.schema.get_field_index(arg))]))
            yield b.append_column("_kit_bucket", pa.array([bucket(v, dtype, buckets) for v in values], pa.int32()))

    return log.with_df(map_in_arrow(log.df, add, schema), columns=(*log.columns, "_kit_bucket"))


def _split(log: Changelog, keys, calls, options, engine) -> tuple:
    """Split distinct without local-global phases (Flink's ``SplitAggregateRule``): a PARTIAL
    aggregate by ``keys + [MOD(HASH_CODE(x), buckets)]``, a FINAL one by ``keys`` summing
    the partial counts (MIN/MAX/SUM of the partial values), each a group aggregate of its own."""
    arg = split_arg(calls)
    types = {f.name: f.dataType for f in log.df.schema.fields}
    partial_calls = [AggCall(c.function, c.arg, f"_kit_p{i}", c.type, c.distinct) for i, c in enumerate(calls)]
    final_calls = [AggCall("SUM" if c.function.upper() == "COUNT" else c.function, f"_kit_p{i}", c.name, c.type)
                   for i, c in enumerate(calls)]
    bucketed = _with_bucket(log, arg, options.distinct_split, types)
    inner = replace(options, update_before=True, distinct_split=None)
    partial, _ = group_aggregate(bucketed, [*keys, "_kit_bucket"], partial_calls, inner, engine)
    return group_aggregate(partial, keys, final_calls, replace(options, distinct_split=None), engine)


def _check(log, keys, calls, options, engine) -> dict:
    """The Spark types of the input's value columns; a KitError for what cannot run."""
    if engine not in ENGINES:
        raise KitError(f"engine must be one of {ENGINES}; got {engine!r}")
    schema = {f.name: f.dataType for f in log.df.schema.fields}
    columns = list(log.columns)
    for k in keys:
        if k not in columns:
            raise KitError(f"group key {k!r} is not a column of the input; its columns are {columns}")
    names = [*keys]
    for c in calls:
        function = c.function.upper()
        if function not in FUNCTIONS:
            raise KitError(f"aggregate function {c.function!r} is not supported by the group aggregate; "
                           f"use one of {', '.join(FUNCTIONS)}")
        if c.arg is None and (function != "COUNT" or c.distinct):
            raise KitError(f"{c.function}{'(DISTINCT *)' if c.distinct else '(*)'} needs a column: "
                           f"only COUNT takes *")
        if c.arg is not None and c.arg not in columns:
            raise KitError(f"{c.function}({c.arg}) reads no column of the input; its columns are {columns}")
        try:
            T._parse_datatype_string(c.type)
        except Exception as e:
            raise KitError(f"{c.function}({c.arg or '*'}) AS {c.name}: type {c.type!r} is not a Spark SQL type") from e
        names.append(c.name)
    if len(set(names)) < len(names):
        raise KitError(f"output columns must have distinct names; got {names}")
    if UPDATE_AFTER in log.mode and UPDATE_BEFORE not in log.mode:
        raise KitError("a group aggregate needs its input's update-before (-U) messages to retract old "
                       "rows; produce the input with Options(update_before=True)")
    if options.mini_batch is not None:
        latency, size = options.mini_batch
        if latency <= 0 or size <= 0:
            raise KitError(f"mini_batch = (allow_latency_ms, size) must both be > 0; got {options.mini_batch}")
    if options.ttl_ms > 0 and not log.df.isStreaming and known_rows(log.df.where("_pt IS NOT NULL").select("_pt")) == 0 \
            and known_rows(log.df) != 0:   # (live: the micro-batches' processing time)
        raise KitError(NO_CLOCK)
    return schema
