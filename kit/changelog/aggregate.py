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
``MinWithRetractAggFunction``) and a DISTINCT keeps a count per value. Values are those of
Spark's batch aggregate over the rows in the table (SUM of NULLs is NULL, AVG of an INT a
DOUBLE), cast to ``call.type``: pass Flink's types (``INT`` for the AVG of an INT) to get
Flink's values, truncation included.

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

Engines. ``reference``: each key replayed in Python (``mapInArrow`` over tasks by key) --
the definition. ``compiled``: the same fold in Java (``kit/jvm/GroupAggregate.java``), one
shuffle by key and each task's messages sorted by ``(seq, _n)``, keys of simple types, the
aggregates of Spark's own result types (COUNT and SUM of integers BIGINT, AVG DOUBLE, MIN/MAX
the column's), no TTL (with mini-batch: the whole input in one task, as above); ``auto``
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
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from .. import jvm, sparksql
from ..arrow import column, groups, python_values
from ..errors import KitError
from ..spark import known_rows
from ..stream import epoch_ms
from . import ADDS, DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, AggCall, Changelog, Options

__all__ = ["FUNCTIONS", "ENGINES", "group_aggregate", "changelog_mode"]

FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX")
ENGINES = ("auto", "compiled", "fast", "reference")


def changelog_mode(input_mode: frozenset, options: Options) -> frozenset:
    """The row kinds a group aggregate emits over an input of ``input_mode``.

    >>> from kit.changelog import INSERT_ONLY, ALL, mode_text
    >>> mode_text(changelog_mode(INSERT_ONLY, Options())), mode_text(changelog_mode(ALL, Options(update_before=False)))
    ('[I,UB,UA]', '[I,UA,D]')
    """
    mode = {INSERT, UPDATE_AFTER} | ({UPDATE_BEFORE} if options.update_before else set())
    return frozenset(mode | ({DELETE} if input_mode - {INSERT} else set()))


def group_aggregate(log: Changelog, keys: list[str], calls: list[AggCall], options: Options,
                    engine: str = "auto") -> tuple[Changelog, DataFrame | None]:
    """``SELECT keys, calls GROUP BY keys`` over ``log`` as a changelog (module doc), and the
    state expirations (None when the TTL is off)."""
    keys = list(keys)
    types = _check(log, keys, calls, options, engine)
    out = (*keys, *(c.name for c in calls))
    why = _not_fast(log, calls, options, types)
    if engine == "fast" and why:
        raise KitError(f"the fast group aggregate does not apply: {why}; use engine='reference' or 'auto'")
    if options.distinct_split and any(c.distinct for c in calls) and not (
            options.mini_batch and options.agg_phase != "ONE_PHASE"):
        return _split(log, keys, calls, options, engine)
    compiled = _not_compiled(log, keys, calls, options, types) if engine in ("auto", "compiled") else None
    if engine == "compiled" and compiled:
        raise KitError(f"the compiled group aggregate does not apply: {compiled}; use engine='auto'")
    in_order = False
    if engine in ("auto", "compiled") and not compiled:
        (df, in_order), expired = _compiled(log, keys, calls, options, types), None
    elif options.mini_batch:
        df, expired = _minibatch(log, keys, calls, options, types)
    elif engine != "reference" and not why:
        df, expired = _fast(log, keys, calls, options, types), None
    else:
        df, expired = _replay(log, keys, calls, options, types)
    return Changelog(df, out, changelog_mode(log.mode, options), tuple(keys), in_order,
                     ticks(log, options.mini_batch[0]) if options.mini_batch else None), expired


def _split_arg(calls) -> str:
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


def _with_bucket(log: Changelog, arg: str, buckets: int, types: dict) -> Changelog:
    """``log`` with ``_kit_bucket = MOD(HASH_CODE(arg), buckets)`` (``minibatch.bucket``)."""
    from .minibatch import bucket
    schema = T.StructType([*log.df.schema.fields, T.StructField("_kit_bucket", T.IntegerType())])
    dtype = types[arg]

    def add(batches):
        for b in batches:
            values = python_values(pa.chunked_array([b.column(b.schema.get_field_index(arg))]))
            yield b.append_column("_kit_bucket", pa.array([bucket(v, dtype, buckets) for v in values], pa.int32()))

    return log.with_df(log.df.mapInArrow(add, schema), columns=(*log.columns, "_kit_bucket"))


def _split(log: Changelog, keys, calls, options, engine) -> tuple:
    """Split distinct without local-global phases (Flink's ``SplitAggregateRule``): a PARTIAL
    aggregate by ``keys + [MOD(HASH_CODE(x), buckets)]``, a FINAL one by ``keys`` summing
    the partial counts (MIN/MAX/SUM of the partial values), each a group aggregate of its own."""
    arg = _split_arg(calls)
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
    if options.ttl_ms > 0 and known_rows(log.df.where("_pt IS NOT NULL").select("_pt")) == 0 \
            and known_rows(log.df) != 0:
        raise KitError(_NO_CLOCK)
    return schema


_NO_CLOCK = ("the state TTL (table.exec.state.ttl) runs on processing time, but the input has no "
             "processing-time clock: give the stream one, kit.stream(..., proctime=Clock(start, step)) "
             "or proctime=<a TIMESTAMP column>")


def _not_fast(log, calls, options, types) -> str | None:
    """Why the fast path cannot run this aggregate (None: it can)."""
    if options.ttl_ms > 0:
        return "the state TTL is on"
    if options.mini_batch is not None:
        return "mini-batch is on"
    if log.insert_only:
        return None
    for c in calls:
        if c.function.upper() in ("MIN", "MAX"):
            return f"{c.function}({c.arg}) over retractions keeps a multiset of values"
        if c.function.upper() in ("SUM", "AVG") and isinstance(types[c.arg], (T.FloatType, T.DoubleType)):
            return f"{c.function}({c.arg}) of floating-point values over retractions is not exact as a running sum"
    return None


# ---------------------------------------------------------------------------------- fast path

def _fast(log: Changelog, keys, calls, options, types) -> DataFrame:
    """The changelog by window functions over ``(seq, _n)`` per key (module doc)."""
    ks = [sparksql.name(k) for k in keys]
    order, run = _over(ks), _over(ks, frame=True)
    args = sorted({c.arg for c in calls if c.arg is not None})
    arg = {a: f"_a{i}" for i, a in enumerate(args)}
    meta = ["seq", "_n", "_pt"]
    df = log.df.selectExpr(*ks, *(f"{sparksql.name(a)} AS {arg[a]}" for a in args), *meta,
                           f"IF(_op IN {_kinds(ADDS)}, 1, -1) AS _w")
    if ks:
        df = df.repartition(*ks)           # the one shuffle: every window below is per key
    if log.insert_only:
        df = df.selectExpr("*", "false AS _ign", "1 AS _e", f"row_number() OVER {order} AS _c")
    else:
        df = df.selectExpr("*", f"sum(_w) OVER {run} AS _S")
        df = df.selectExpr("*", f"least(0, min(_S) OVER {run}) AS _M")
        df = df.selectExpr("*", f"_M < coalesce(lag(_M) OVER {order}, 0) AS _ign")
        df = df.selectExpr("*", "_S - _M AS _c", "IF(_ign, 0, _w) AS _e")
    distinct = sorted({c.arg for c in calls if c.distinct})
    if distinct:   # the 0->1 / 1->0 transitions of each value's running count
        df = df.selectExpr("*", *(f"sum(IF({arg[a]} IS NULL, 0, _e)) OVER {_over([*ks, arg[a]], frame=True)} "
                                  f"AS _d{arg[a]}" for a in distinct))
        df = df.selectExpr("*", *(f"CASE WHEN _d{arg[a]} = 1 AND _d{arg[a]} - _e = 0 THEN 1 "
                                  f"WHEN _d{arg[a]} = 0 AND _d{arg[a]} - _e = 1 THEN -1 ELSE 0 END AS _t{arg[a]}"
                                  for a in distinct))
    news = [f"CAST({_running(c, arg, types, run)} AS {c.type}) AS _v{i}" for i, c in enumerate(calls)]
    df = df.selectExpr(*ks, *meta, "_ign", "_e", "_c", *news)
    values = [f"_v{i}" for i in range(len(calls))]
    df = df.selectExpr("*", *(f"lag({v}) OVER {order} AS _p{v}" for v in values))

    def change(op, prefix):
        fields = ", ".join(f"'{v}', {prefix}{v}" for v in values)
        return f"named_struct('_op', '{op}'{', ' + fields if fields else ''})"

    same = " AND ".join(f"{v} <=> _p{v}" for v in values) or "true"
    update = ([change(UPDATE_BEFORE, "_p")] if options.update_before else []) + [change(UPDATE_AFTER, "")]
    out = (f"CASE WHEN _ign THEN array() WHEN _e = 1 AND _c = 1 THEN array({change(INSERT, '')}) "
           f"WHEN _c = 0 THEN array({change(DELETE, '_p')}) "
           f"WHEN {same} THEN array() ELSE array({', '.join(update)}) END")
    df = df.selectExpr(*ks, *meta, f"posexplode({out}) AS (_j, _o)")
    return df.selectExpr("_o._op AS _op", *ks, *(f"_o.{v} AS {sparksql.name(c.name)}" for v, c in zip(values, calls)),
                         "seq", "concat(_n, array(_j)) AS _n", "_pt")


def _over(partition: list, frame: bool = False) -> str:
    """A window per ``partition`` in changelog order (``frame``: up to the current row)."""
    part = f"PARTITION BY {', '.join(partition)} " if partition else ""
    return f"({part}ORDER BY seq, _n{' ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW' if frame else ''})"


def _kinds(kinds) -> str:
    return "(" + ", ".join(f"'{k}'" for k in kinds) + ")"


def _running(call: AggCall, arg: dict, types: dict, run: str) -> str:
    """A call's running value over ``run`` in Spark SQL, as Spark's batch aggregate gives it."""
    function = call.function.upper()
    if call.arg is None:
        return f"sum(_e) OVER {run}"
    x, weight = arg[call.arg], f"_t{arg[call.arg]}" if call.distinct else "_e"
    if function in ("MIN", "MAX"):
        return f"{function.lower()}({x}) OVER {run}"
    n = f"sum(IF({x} IS NULL, 0, {weight})) OVER {run}"
    if function == "COUNT":
        return n
    dtype = types[call.arg]
    v = x if function == "SUM" or isinstance(dtype, T.DecimalType) else f"CAST({x} AS DOUBLE)"
    total = f"sum(CASE {weight} WHEN 1 THEN {v} WHEN -1 THEN -{v} END) OVER {run}"
    if function == "SUM":
        return f"IF({n} = 0, NULL, {total})"
    divisor = f"CAST({n} AS DECIMAL(20, 0))" if isinstance(dtype, T.DecimalType) else n
    return f"IF({n} = 0, NULL, {total} / {divisor})"


# ------------------------------------------------------------------------- the compiled path

_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_SIMPLE = (*_INTEGERS, T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType)


_HASHED = {T.StringType: "s", T.LongType: "l", T.IntegerType: "i", T.ShortType: "h", T.ByteType: "b",
           T.BooleanType: "z", T.DateType: "D", T.TimestampType: "t"}   # MiniBatchGroupAggregate's type codes


def _not_compiled(log, keys, calls, options, types) -> str | None:
    """Why ``flinkkit.GroupAggregate`` (or, with mini-batch, ``MiniBatchGroupAggregate``)
    cannot run this aggregate (None: it can)."""
    if options.ttl_ms > 0:
        return "the state TTL is on"
    name = "GroupAggregate" if options.mini_batch is None else "MiniBatchGroupAggregate"
    if not jvm.available(log.df.sparkSession, name):
        return "the kit's Java classes are not in this Spark session (Spark Connect, or a session started elsewhere)"
    if options.mini_batch is not None:
        phase, arg = _bundles(calls, options)
        if any(type(types[k]) not in _HASHED for k in keys):
            return "a mini-batch key of a type without a modelled BinaryRowData hash"
        if arg and _HASHED.get(type(types[arg]), "D") in "Dt":   # HASH_CODE: Java's hashCode() of these only
            return f"split distinct over {arg!r}, a {types[arg].simpleString()}: no modelled HASH_CODE"
    for name in [*keys, *(c.arg for c in calls if c.arg is not None)]:
        if not isinstance(types[name], _SIMPLE):
            return f"column {name!r} is a {types[name].simpleString()}, not an integer, string, boolean, date or time"
    for c in calls:
        function, dtype = c.function.upper(), types.get(c.arg)
        if function in ("SUM", "AVG") and not isinstance(dtype, _INTEGERS):
            return f"{c.function}({c.arg}) is not of integers"
        natural = T.LongType() if function in ("COUNT", "SUM") else T.DoubleType() if function == "AVG" else dtype
        if T._parse_datatype_string(c.type) != natural:
            return f"{c.function}({c.arg or '*'}) is typed {c.type}, not {natural.simpleString()} (Spark's own)"
    return None


def _compiled(log: Changelog, keys, calls, options, types) -> tuple[DataFrame, bool]:
    """The reference's fold in Java (``kit/jvm/GroupAggregate.java``): the keys spread over
    ``options.tasks`` tasks (one: no shuffle), each task's messages in ``(seq, _n)`` order
    (sorted, unless ``log`` is ``in_order`` and one task reads it) and folded with a map of
    key states; and whether its output is ``in_order`` (one task)."""
    ticked = options.mini_batch is not None and log.ticks is not None
    df = _compiled_input(log.with_df(_with_ticks(log)) if ticked else log, keys, calls)
    settings, schema = _settings(keys, calls, options.update_before), _compiled_schema(keys, calls, types)
    ks = [sparksql.name(k) for k in keys]
    spread = options.mini_batch is None and bool(ks) and options.tasks > 1
    df = df.repartition(options.tasks, *ks) if spread else df.coalesce(1)
    if spread or ticked or not log.in_order:
        df = df.sortWithinPartitions("seq", "_n")
    if options.mini_batch is None:
        return jvm.group_aggregate(df, settings, schema), not spread
    settings += _mini_batch_settings(keys, calls, options, types) + f";ticked={int(ticked)}"
    return jvm.mini_batch_group_aggregate(df, settings, schema), True


def _mini_batch_settings(keys, calls, options, types) -> str:
    """``MiniBatchGroupAggregate``'s settings beyond ``GroupAggregate``'s: the bundle size, the
    latency, the phases, the split (buckets, argument column, its type code) and the keys' type codes."""
    args = sorted({c.arg for c in calls if c.arg is not None})
    (latency, size), (phase, arg) = options.mini_batch, _bundles(calls, options)
    split = f"{options.distinct_split}:{len(keys) + args.index(arg)}:{_HASHED[type(types[arg])]}" if arg else ""
    return (f";size={size};latency={latency};phase={phase};split={split}"
            f";hash={''.join(_HASHED[type(types[k])] for k in keys)}")


def _compiled_input(log: Changelog, keys, calls) -> DataFrame:
    """The Java folds' input: the keys, the arguments (``_a0``, ... in name order), ``_w``
    (1 accumulate, -1 retract, 0 a mini-batch watermark: ``_with_ticks``), ``seq``, ``_n``, ``_pt``."""
    args = sorted({c.arg for c in calls if c.arg is not None})
    return log.df.selectExpr(*map(sparksql.name, keys), *(f"{sparksql.name(a)} AS _a{i}" for i, a in enumerate(args)),
                             f"CASE WHEN _op IS NULL THEN 0 WHEN _op IN {_kinds(ADDS)} THEN 1 ELSE -1 END AS _w",
                             "seq", "_n", "_pt")


def _settings(keys, calls, update_before: bool) -> str:
    """``GroupAggregate``'s settings: each call's function, its argument's place in
    ``_compiled_input`` (-1 for ``*``) and whether it is DISTINCT."""
    args = sorted({c.arg for c in calls if c.arg is not None})
    functions = ",".join(f"{c.function.lower()}:{-1 if c.arg is None else len(keys) + args.index(c.arg)}:"
                         f"{int(c.distinct)}" for c in calls)
    return f"keys={len(keys)};calls={functions};ub={int(update_before)}"


def _compiled_schema(keys, calls, types) -> T.StructType:
    """The Java folds' output: ``_op``, the keys, the calls, ``seq``, ``_n``, ``_pt``."""
    long = T.LongType()
    return T.StructType(
        [T.StructField("_op", T.StringType()), *(T.StructField(k, types[k]) for k in keys),
         *(T.StructField(c.name, T._parse_datatype_string(c.type)) for c in calls),
         T.StructField("seq", long), T.StructField("_n", T.ArrayType(T.IntegerType())), T.StructField("_pt", long)])


# --------------------------------------------------------------------- chained, arrival-parallel

SUMMARY_LIMIT = 1_000_000   # distinct first-level inputs per chunk, summed, that a chain sends every task
PREFIX_CHUNKS = 4   # up to this many chunks, each task reads those before its own itself (no first job)


def _natural_type(call: AggCall, types: dict) -> str:
    """The type Spark's batch aggregate gives ``call`` where the Java folds apply (COUNT and
    SUM of integers BIGINT, AVG DOUBLE, MIN/MAX the column's)."""
    function = call.function.upper()
    return "bigint" if function in ("COUNT", "SUM") else "double" if function == "AVG" \
        else types[call.arg].simpleString()


def chain(log: Changelog, levels: list, options: Options, source: tuple | None = None) -> Changelog | None:
    """Group aggregates each over the changelog of the one before, fused into one pass per
    chunk of arrivals (``kit/jvm/Chain.java``): ``levels`` bottom-up, ``(keys, calls,
    inputs)``, the first over ``log`` (insert-only, straight from one stream: its partitions
    the stream's chunks, in arrival order), each next one reading ``inputs`` (``{its
    column: a column of the level below}``); ``source``: where the first level reads
    columns of the stream's source straight, ``(stream, {its column: the source's})``. The
    source's partitions are the chunks too: for a stream without a processing-time column,
    the pass reads the first level's inputs there, with no arrival scan, numbering the
    arrivals itself (each chunk's first ``seq`` from the stream's scan).
    The changelog of the last level, equal to
    ``group_aggregate`` applied level by level -- or None where that must run instead:

    - a state TTL; split distinct, unless in mini-batch's local-global phases; the Java
      classes are not in the session; a level the compiled path does not take (``_not_compiled``);
    - without mini-batch: one chunk that should be spread over ``options.tasks`` tasks by
      key; counted by a first job (below), chunks whose distinct first-level inputs sum to
      more than ``SUMMARY_LIMIT``.

    With mini-batch, the levels run in one task over the whole input, as they do one by one
    (Flink's parallelism 1): each level's changes go to the next as its bundles flush, and
    read straight from the source, a key Parquet keeps in a dictionary makes its bundle key
    once per column chunk (``Chain.MiniBatch``).

    Without mini-batch and with several chunks, every task starts from the states the chunks before its own leave
    (an aggregate's state is a function of its input table): read straight from the source
    in up to ``PREFIX_CHUNKS`` chunks, each task first reads those chunks itself, folding
    them into the first level without emitting; otherwise a first job counts each chunk's
    distinct first-level inputs (in Java, looking a value that Parquet keeps in a dictionary
    up once per column chunk) for every task. No shuffle by key, so a hot key costs no more
    than a cold one.

        chunk 0: a b | chunk 1: a      -> chunk 1 starts at {a: 1, b: 1} and {1: 2}
    """
    mini_batch = options.mini_batch is not None
    if not log.insert_only or options.ttl_ms > 0 or not levels \
            or (options.distinct_split and any(c.distinct for _, calls, _ in levels for c in calls)
                and not (mini_batch and options.agg_phase != "ONE_PHASE")) \
            or not jvm.available(log.df.sparkSession, "Chain"):
        return None
    types, mode, parts, schema = {f.name: f.dataType for f in log.df.schema.fields}, log.mode, [], None
    for i, (keys, calls, inputs) in enumerate(levels):
        if i:
            types = {name: types[column] for name, column in inputs.items()}
        calls = [replace(c, type=_natural_type(c, types)) for c in calls]
        if _not_compiled(log, keys, calls, options, types):
            return None
        top = i == len(levels) - 1
        settings = _settings(keys, calls, options.update_before if top else True)
        if mini_batch:   # the levels above the first read their watermarks among its changes
            settings += _mini_batch_settings(keys, calls, options, types) + f";ticked={int(i > 0)}"
        if i:
            below = [*levels[i - 1][0], *(c.name for c in levels[i - 1][1])]
            args = sorted({c.arg for c in calls if c.arg is not None})
            settings += ";in=" + ",".join(str(below.index(inputs[c])) for c in [*keys, *args])
        parts.append(settings)
        schema = _compiled_schema(keys, calls, types)
        types = {f.name: f.dataType for f in schema.fields}
        mode = changelog_mode(mode, replace(options, update_before=options.update_before if top else True))
    keys, calls, _ = levels[0]
    df = _compiled_input(log, keys, calls)
    chunks, raw = jvm.bridge.dataset(df).rdd().getNumPartitions(), None
    if source is not None:   # the first level's inputs, straight from the stream's source
        stream, columns = source
        args = sorted({c.arg for c in calls if c.arg is not None})
        raw = sparksql.select(stream.source, *(f"{sparksql.name(columns[c])} AS {sparksql.name(i)}"
                                               for c, i in zip([*keys, *args], df.columns)))
    if options.tasks > 1 and chunks == 1 and not mini_batch:
        return None
    numbered = raw is not None and not isinstance(stream.proctime, str)   # the arrivals numbered in the pass
    if numbered:
        clock = stream.proctime
        parts[0] += f";offsets={','.join(map(str, stream.arrivals.offsets))}" + (
            f";clock={epoch_ms(clock.start)}:{clock.step.millis}" if clock is not None else "")
        df = raw
    if mini_batch:   # one task reads the chunks in turn
        out = jvm.mini_batch_chain(df, "|".join(parts), schema)
    else:
        if options.tasks == 1 and chunks > 1:   # one task reads the chunks in turn
            df, chunks = df.coalesce(1), 1
        out = jvm.chain(df, chunks, "|".join(parts), schema, SUMMARY_LIMIT, numbered and chunks <= PREFIX_CHUNKS)
    if out is None:
        return None
    last_keys, last_calls, _ = levels[-1]
    return Changelog(out, (*last_keys, *(c.name for c in last_calls)), mode, tuple(last_keys), True,
                     ticks(log, options.mini_batch[0]) if mini_batch else None)


def _bundles(calls, options) -> tuple:
    """The mini-batch plan's phase (``ONE_PHASE``, ``TWO_PHASE``, ``SPLIT``) and the split
    DISTINCT column (None without split)."""
    phase = "ONE_PHASE" if options.agg_phase == "ONE_PHASE" else "TWO_PHASE"
    if options.distinct_split and phase != "ONE_PHASE" and any(c.distinct for c in calls):
        return "SPLIT", _split_arg(calls)
    return phase, None


# ------------------------------------------------------------------------------- the reference

_EXACT = Context(prec=100)   # decimals of up to 38 digits, summed without rounding


class _Count:
    """COUNT(*) (``star``) or COUNT(x): the rows (with x not NULL) accumulated minus retracted."""

    def __init__(self, star: bool):
        self.star, self.n = star, 0

    def add(self, v, w: int):
        if self.star or v is not None:
            self.n += w

    def value(self):
        return self.n


class _Sum:
    """SUM(x) or AVG(x) (``avg``): a total and the count of non-NULL values; NULL when none.
    AVG sums DOUBLEs, or decimals divided as Spark divides them (``_decimal_avg``)."""

    def __init__(self, avg: bool, dtype):
        self.avg, self.dtype, self.n = avg, dtype, 0
        self.total = Decimal(0) if isinstance(dtype, T.DecimalType) else 0.0 if avg else 0

    def add(self, v, w: int):
        if v is None:
            return
        if self.avg and not isinstance(self.dtype, T.DecimalType):
            v = float(v)
        with localcontext(_EXACT):
            self.total, self.n = (self.total + v, self.n + 1) if w > 0 else (self.total - v, self.n - 1)

    def value(self):
        if self.n == 0:
            return None
        if not self.avg:
            return self.total
        return _decimal_avg(self.total, self.n, self.dtype) if isinstance(self.dtype, T.DecimalType) \
            else self.total / self.n


class _MinMax:
    """MIN(x) / MAX(x) over a multiset: a count per value (Flink's ``MinWithRetractAggFunction``)."""

    def __init__(self, pick):
        self.pick, self.counts, self.best = pick, {}, None

    def add(self, v, w: int):
        if v is None:
            return
        n = self.counts.get(v, 0) + w
        if n:
            self.counts[v] = n
        else:
            del self.counts[v]
        if w > 0 and (self.best is None or self.pick(v, self.best) == v):
            self.best = v
        elif w < 0 and n == 0 and v == self.best:
            present = [u for u, c in self.counts.items() if c > 0]
            self.best = self.pick(present) if present else None

    def value(self):
        return self.best


class _Distinct:
    """A DISTINCT aggregate: a count per value; the inner one sees a value's 0->1 and 1->0."""

    def __init__(self, inner):
        self.inner, self.counts = inner, {}

    def add(self, v, w: int):
        if v is None:
            return
        before = self.counts.get(v, 0)
        self.counts[v] = before + w
        if (before, before + w) in ((0, 1), (1, 0)):
            self.inner.add(v, w)

    def value(self):
        return self.inner.value()


def _decimal_avg(total: Decimal, n: int, dtype: T.DecimalType) -> Decimal:
    """Spark's AVG of a decimal(p, s): its sum, a decimal(p + 10, s), divided by the count, a
    decimal(20, 0), in Spark's decimal division (38 places, then the quotient's scale, both
    HALF_UP); the cast to the call's type follows."""
    p, s = min(38, dtype.precision + 10), dtype.scale
    scale = max(6, s + 21)
    if p - s + scale > 38:
        scale = max(38 - (p - s), min(scale, 6))
    with localcontext(_EXACT):
        q = (total / n).quantize(Decimal(1).scaleb(-38), ROUND_HALF_UP)
        return q.quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP)


def _cast(v, dtype):
    """A value as Spark's CAST to ``dtype`` gives it (integers truncate, decimals round HALF_UP)."""
    if v is None:
        return None
    if isinstance(dtype, T.IntegralType):
        return int(v)
    if isinstance(dtype, T.FloatType):
        return float(np.float32(v))
    if isinstance(dtype, T.DoubleType):
        return float(v)
    if isinstance(dtype, T.DecimalType):
        with localcontext(_EXACT):
            return Decimal(v if not isinstance(v, float) else repr(v)).quantize(
                Decimal(1).scaleb(-dtype.scale), ROUND_HALF_UP)
    return v


def _same(a: tuple, b: tuple) -> bool:
    """Equal results (NaN equals NaN, as Spark's ``<=>``)."""
    return all(x == y or (x != x and y != y) for x, y in zip(a, b))


@dataclass
class _Spec:
    """What the replay of one key needs: the aggregates' factories and output types."""
    calls: list
    types: dict
    out_types: list
    ttl_ms: int
    update_before: bool

    def accumulators(self) -> list:
        made = []
        for c in self.calls:
            function = c.function.upper()
            dtype = self.types.get(c.arg)
            acc = (_Count(c.arg is None) if function == "COUNT" else
                   _Sum(function == "AVG", dtype) if function in ("SUM", "AVG") else
                   _MinMax(min if function == "MIN" else max))
            made.append(_Distinct(acc) if c.distinct else acc)
        return made


class _State:
    """A key's accumulators, its record count (COUNT(*)) and the time of its last write."""

    def __init__(self, spec: _Spec):
        self.spec, self.accs, self.count, self.written = spec, spec.accumulators(), 0, None

    def add(self, args: tuple, w: int):
        self.count += w
        for acc, v in zip(self.accs, args):
            acc.add(v, w)

    def value(self) -> tuple:
        return tuple(_cast(a.value(), t) for a, t in zip(self.accs, self.spec.out_types))


def _emit(spec: _Spec, state: _State, first: bool, prev: tuple, messages: list, now) -> tuple:
    """Fold ``messages`` (``(w, args)``) into ``state``; the changes ``[(kind, values)]``
    (Flink's ``processElement`` for one message, ``finishBundle`` for a bundle's) and the
    state to keep (None: cleared)."""
    for w, args in messages:
        state.add(args, w)
    new = state.value()
    if state.count == 0:
        return ([] if first else [(DELETE, prev)]), None
    state.written = now
    if first:
        return [(INSERT, new)], state
    if spec.ttl_ms <= 0 and _same(prev, new):
        return [], state
    return ([(UPDATE_BEFORE, prev)] if spec.update_before else []) + [(UPDATE_AFTER, new)], state


def _expired(spec: _Spec, state: _State | None, now) -> bool:
    if state is None or spec.ttl_ms <= 0:
        return False
    if now is None:
        raise KitError(_NO_CLOCK)
    return now - state.written >= spec.ttl_ms


def _replay_key(spec: _Spec, messages: list):
    """One key's messages ``(w, args, seq, n, pt)`` in order: its changes ``(kind, values,
    seq, n, pt)`` and expirations ``(None, (last_write_pt,), seq, None, pt)``."""
    state = None
    for w, args, seq, n, pt in messages:
        if _expired(spec, state, pt):
            yield None, (state.written,), seq, None, pt
            state = None
        if state is None and w < 0:
            continue
        first, state = state is None, state or _State(spec)
        prev = state.value()
        changes, state = _emit(spec, state, first, prev, [(w, args)], pt)
        for j, (kind, values) in enumerate(changes):
            yield kind, values, seq, [*n, j], pt


def _replay_schema(keys, calls, options, types) -> tuple:
    """The replay's ``_Spec`` and the Spark and Arrow schemas of its rows: ``_op`` (NULL for
    an expiration), keys, results, ``seq``, ``_n``, ``_pt``, ``_last_write``."""
    out_types = [T._parse_datatype_string(c.type) for c in calls]
    spec = _Spec(list(calls), types, out_types, options.ttl_ms, options.update_before)
    long = T.LongType()
    schema = T.StructType(
        [T.StructField("_op", T.StringType())] + [T.StructField(k, types[k]) for k in keys]
        + [T.StructField(c.name, t) for c, t in zip(calls, out_types)]
        + [T.StructField("seq", long), T.StructField("_n", T.ArrayType(T.IntegerType())),
           T.StructField("_pt", long), T.StructField("_last_write", long)])
    return spec, schema, to_arrow_schema(schema, timezone="UTC")


def _replay(log: Changelog, keys, calls, options, types) -> tuple:
    """Each key replayed in Python, spread over ``options.tasks`` tasks by key."""
    spec, schema, arrow = _replay_schema(keys, calls, options, types)
    fields = schema.fields
    args = [c.arg for c in calls]

    def per_task(batches):
        batches = list(batches)
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        col = {name: python_values(table.column(name)) for name in table.column_names}
        weights = [1 if op in ADDS else -1 for op in col["_op"]]
        rows = []
        for start, length in groups(table, keys):
            at = range(start, start + length)
            key = [col[k][start] for k in keys]
            messages = [(weights[i], tuple(col[a][i] if a else None for a in args), col["seq"][i],
                         col["_n"][i], col["_pt"][i]) for i in at]
            changes = _replay_key(spec, messages)
            for kind, values, seq, n, pt in changes:
                if kind is None:
                    rows.append([None, *key, *[None] * len(calls), seq, None, pt, values[0]])
                else:
                    rows.append([kind, *key, *values, seq, n, pt, None])
        if rows:
            yield pa.RecordBatch.from_arrays(
                [column([r[i] for r in rows], f.dataType, arrow.field(i).type) for i, f in enumerate(fields)],
                schema=arrow)

    df = log.df
    tasks = options.tasks if keys else 1
    df = df.repartition(tasks, *map(sparksql.name, keys)) if tasks > 1 else df.coalesce(1)
    replayed = df.sortWithinPartitions(*map(sparksql.name, keys), "seq", "_n").mapInArrow(per_task, schema)
    return _outputs(replayed, keys, calls, options)


def _outputs(replayed: DataFrame, keys, calls, options) -> tuple:
    """A replay's rows (``_replay_schema``) as the changelog and the state expirations."""
    names = [*map(sparksql.name, keys), *(sparksql.name(c.name) for c in calls)]
    changes = replayed.where("_op IS NOT NULL").selectExpr("_op", *names, "seq", "_n", "_pt")
    if options.ttl_ms <= 0:
        return changes, None
    expired = replayed.where("_op IS NULL").selectExpr(*map(sparksql.name, keys), "seq",
                                                       "_last_write AS last_write_pt", "_pt AS pt")
    return changes, expired


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


def _with_ticks(log: Changelog) -> DataFrame:
    """``log.df`` with its ticks among its rows (``_op`` NULL, after the changes of their ``seq``)."""
    if log.ticks is None:
        return log.df
    types = {f.name: f.dataType.simpleString() for f in log.df.schema.fields}
    marks = log.ticks.selectExpr("CAST(NULL AS STRING) AS _op",
                                 *(f"CAST(NULL AS {types[c]}) AS {sparksql.name(c)}" for c in log.columns),
                                 "seq", "array(2147483647) AS _n", "_pt")
    return log.df.unionByName(marks)


def _minibatch(log: Changelog, keys, calls, options, types) -> tuple:
    """The mini-batch plan (``kit.changelog.minibatch``) replayed in one task over the input
    in arrival order: ONE_PHASE, local-global (TWO_PHASE, or AUTO), or local-incremental-
    global when split distinct is on too."""
    from .minibatch import bucket, flushes, run
    latency, size = options.mini_batch
    phase, arg = _bundles(calls, options)
    split = options.distinct_split if arg else None
    key_types = [types[k] for k in keys] + ([T.IntegerType()] if split else [])
    spec, schema, arrow = _replay_schema(keys, calls, options, types)
    args = [c.arg for c in calls]
    states, ticked = {}, log.ticks is not None

    def fold(key, messages, seq, pt, one_phase):
        """``finishBundle`` for one key of the last level: its changes (``_emit``)."""
        state = states.get(key)
        if _expired(spec, state, pt):
            yield None, key, (state.written,), seq, pt
            state = None
        if state is None and one_phase:
            while messages and messages[0][0] < 0:
                messages = messages[1:]
            if not messages:
                return
        first, state = state is None, state or _State(spec)
        changes, states[key] = _emit(spec, state, first, state.value(), messages, pt)
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
                [column([r[i] for r in rows], f.dataType, arrow.field(i).type) for i, f in enumerate(schema.fields)],
                schema=arrow)

    replayed = _with_ticks(log).coalesce(1).sortWithinPartitions("seq", "_n").mapInArrow(task, schema)
    return _outputs(replayed, keys, calls, options)
