"""The group aggregate in Java (``engine="compiled"``, ``kit/jvm/GroupAggregate.java`` and
``MiniBatchGroupAggregate.java``), and ``chain``: group aggregates stacked over one stream,
fused into one Java pass per chunk of arrivals (``kit/jvm/Chain.java``)."""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from .. import jvm, sparksql
from ..stream import epoch_ms, null_time_sql
from . import ADDS, INSERT_ONLY, AggCall, Changelog, Options
from ..aggregate_types import result_type, wrapped_sql
from .aggregate_fast import kinds
from .group_agg import changelog_mode
from .mini_batch_agg import bundles, ticks, with_ticks

__all__ = ["not_compiled", "compiled", "chain", "spans", "SUMMARY_LIMIT", "PREFIX_CHUNKS"]

_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_SIMPLE = (*_INTEGERS, T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType)


_HASHED = {T.StringType: "s", T.LongType: "l", T.IntegerType: "i", T.ShortType: "h", T.ByteType: "b",
           T.BooleanType: "z", T.DateType: "D", T.TimestampType: "t"}   # MiniBatchGroupAggregate's type codes


def not_compiled(log, keys, calls, options, types) -> str | None:
    """Why ``flinkkit.GroupAggregate`` (or, with mini-batch, ``MiniBatchGroupAggregate``)
    cannot run this aggregate (None: it can)."""
    if options.ttl_ms > 0:
        return "the state TTL is on"
    kept = next((c for c in calls if not c.retract), None)
    if kept is not None and not log.insert_only:
        return f"{kept.function}({kept.arg}) ignores retractions"
    name = "GroupAggregate" if options.mini_batch is None else "MiniBatchGroupAggregate"
    if not jvm.available(log.df.sparkSession, name):
        return "the kit's Java classes are not in this Spark session (Spark Connect, or a session started elsewhere)"
    if options.mini_batch is not None:
        phase, arg = bundles(calls, options)
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
        natural, wanted = T._parse_datatype_string(_natural_type(c, types)), T._parse_datatype_string(c.type)
        if wanted != natural and not (function == "SUM" and isinstance(wanted, T.IntegralType)):
            return f"{c.function}({c.arg or '*'}) is typed {c.type}, not {natural.simpleString()} (the Java fold's)"
    return None


def wrapped(df: DataFrame, calls) -> DataFrame:
    """The Java folds' output with each SUM of integers (a BIGINT there) at its call's
    narrower type, wrapped around as Java's arithmetic in that type leaves it: a sum's
    changes are the same in both (a step that changes one changes the other)."""
    wanted = {c.name: T._parse_datatype_string(c.type) for c in calls}
    narrower = {f.name for f in df.schema.fields if f.name in wanted and wanted[f.name] != f.dataType}
    if not narrower:
        return df
    return df.selectExpr(*(f"CAST({wrapped_sql(sparksql.name(f.name), wanted[f.name])} AS {wanted[f.name].simpleString()}) "
                           f"AS {sparksql.name(f.name)}" if f.name in narrower else sparksql.name(f.name)
                           for f in df.schema.fields))


def compiled(log: Changelog, keys, calls, options, types) -> tuple[DataFrame, bool]:
    """The reference's fold in Java (``kit/jvm/GroupAggregate.java``): the keys spread over
    ``options.tasks`` tasks (one: no shuffle), each task's messages in ``(seq, _n)`` order
    (sorted, unless ``log`` is ``in_order`` and one task reads it) and folded with a map of
    key states; and whether its output is ``in_order`` (one task)."""
    ticked = options.mini_batch is not None and log.ticks is not None
    df = _compiled_input(log.with_df(with_ticks(log)) if ticked else log, keys, calls)
    natural = [replace(c, type=_natural_type(c, types)) for c in calls]
    settings, schema = _settings(keys, calls, options.update_before), _compiled_schema(keys, natural, types)
    ks = [sparksql.name(k) for k in keys]
    spread = options.mini_batch is None and bool(ks) and options.tasks > 1
    df = df.repartition(options.tasks, *ks) if spread else df.coalesce(1)
    if spread or ticked or not log.in_order:
        df = df.sortWithinPartitions("seq", "_n")
    if options.mini_batch is None:
        return wrapped(jvm.group_aggregate(df, settings, schema), calls), not spread
    settings += _mini_batch_settings(keys, calls, options, types) + f";ticked={int(ticked)}"
    return wrapped(jvm.mini_batch_group_aggregate(df, settings, schema), calls), True


def _mini_batch_settings(keys, calls, options, types) -> str:
    """``MiniBatchGroupAggregate``'s settings beyond ``GroupAggregate``'s: the bundle size, the
    latency, the phases, the split (buckets, argument column, its type code) and the keys' type codes."""
    args = sorted({c.arg for c in calls if c.arg is not None})
    (latency, size), (phase, arg) = options.mini_batch, bundles(calls, options)
    split = f"{options.distinct_split}:{len(keys) + args.index(arg)}:{_HASHED[type(types[arg])]}" if arg else ""
    return (f";size={size};latency={latency};phase={phase};split={split}"
            f";hash={''.join(_HASHED[type(types[k])] for k in keys)}")


def _compiled_input(log: Changelog, keys, calls) -> DataFrame:
    """The Java folds' input: the keys, the arguments (``_a0``, ... in name order), ``_w``
    (1 accumulate, -1 retract, 0 a mini-batch watermark: ``with_ticks``), ``seq``, ``_n``, ``_pt``."""
    args = sorted({c.arg for c in calls if c.arg is not None})
    return log.df.selectExpr(*map(sparksql.name, keys), *(f"{sparksql.name(a)} AS _a{i}" for i, a in enumerate(args)),
                             f"CASE WHEN _op IS NULL THEN 0 WHEN _op IN {kinds(ADDS)} THEN 1 ELSE -1 END AS _w",
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
PREFIX_CHUNKS = 4   # up to this many chunks, each task reads the rows before its own itself (no first job)
SPAN_TASKS = 8      # at most this many tasks then (the last reads the whole stream)
# a row folded in silently costs about this share of one folded with its changes out: read
# from columns (Parquet), or from lines that every task parses again (CSV, JSON), the parse in both
# (the word-frequency cascade, 10M rows, two tasks: 1/3 for both left the task that reads
# more 0.4-0.9 s behind on CSV and JSON, ahead by 0.2-0.4 s on Parquet; these, within ~0.3 s)
ACCUMULATE, ACCUMULATE_PARSED = 1 / 4, 4 / 9


def spans(rows: int, tasks: int, accumulate: float = ACCUMULATE) -> list[int]:
    """The first seq of each of ``tasks`` tasks that read a stream of ``rows`` arrivals from
    its start, folding the rows before their own in silently (at ``accumulate`` of the cost
    of a row they emit for), then ``rows``: each task's rows ``1 - accumulate`` times the
    previous one's, so all take about as long (57 rows; 57 / 4 + 43 below).

    >>> spans(100, 2)
    [0, 57, 100]
    >>> spans(2, 3)
    [0, 1, 2, 2]
    """
    weights = [(1 - accumulate) ** k for k in range(tasks)]
    out = [0]
    for w in weights[:-1]:
        out.append(min(rows, out[-1] + round(rows * w / sum(weights))))
    return out + [rows]


def _natural_type(call: AggCall, types: dict) -> str:
    """The type Spark's batch aggregate gives ``call`` where the Java folds apply (COUNT and
    SUM of integers BIGINT, AVG DOUBLE, MIN/MAX the column's)."""
    function = call.function.upper()
    return "bigint" if function in ("COUNT", "SUM") else "double" if function == "AVG" \
        else types[call.arg].simpleString()


def chain(log: Changelog, levels: list, options: Options, source: tuple | None = None,
          final: bool = False) -> Changelog | None:
    """Group aggregates each over the changelog of the one before, fused into one pass per
    chunk of arrivals (``kit/jvm/Chain.java``): ``levels`` bottom-up, ``(keys, calls,
    inputs)`` (a call without a type gets Flink's, ``result_type``), the first over ``log``
    (insert-only, straight from one stream: its partitions
    the stream's chunks, in arrival order), each next one reading ``inputs`` (``{its
    column: a column of the level below}``); ``source``: where the first level reads
    columns of the stream's source straight, ``(stream, {its column: the source's})``. The
    source's partitions are the chunks too: for a stream without a processing-time column,
    the pass reads the first level's inputs there, with no arrival scan, numbering the
    arrivals itself (each chunk's first ``seq`` and carried-in watermark counted by the
    first job below, or read by a task that reads the stream from its start).
    The changelog of the last level, equal to
    ``group_aggregate`` applied level by level -- or None where that must run instead:

    - a state TTL; split distinct, unless in mini-batch's local-global phases; the Java
      classes are not in the session; a level the compiled path does not take (``not_compiled``);
    - without mini-batch: one chunk that should be spread over ``options.tasks`` tasks by
      key; counted by a first job (below), chunks whose distinct first-level inputs sum to
      more than ``SUMMARY_LIMIT``.

    With mini-batch, the levels run in one task over the whole input, as they do one by one
    (Flink's parallelism 1): each level's changes go to the next as its bundles flush, and
    read straight from the source, a key Parquet keeps in a dictionary makes its bundle key
    once per column chunk (``Chain.MiniBatch``).

    Without mini-batch, every task starts from the states the rows before its own leave
    (an aggregate's state is a function of its input table). Read straight from the source
    in up to ``PREFIX_CHUNKS`` chunks (and not from CSV or JSON files that Spark's parser
    reads row by row, not the kit's own read, which a task would parse again from their start:
    ``jvm.parses_rows``, ``jvm.read_by_lines``), the tasks
    (``options.tasks``, at most one per core and ``SPAN_TASKS``) take spans of the arrivals
    (``spans``), whatever the chunks: each
    reads the stream from its start, folding the rows before its span into the first level
    without emitting. Otherwise each task takes a chunk, and a first job counts each chunk's
    distinct first-level inputs (in Java, looking a value that Parquet keeps in a dictionary
    up once per column chunk) for every task. No shuffle by key, so a hot key costs no more
    than a cold one.

        arrivals a b a, 2 tasks -> spans [0, 2, 3]: task 1 starts at {a: 1, b: 1} and {1: 2}

    ``final``: only the last level's table at the end of input matters (``DynamicTable.final``),
    the same with mini-batch or without: where tasks would take spans (then in any number of
    chunks), one task folds every arrival in silently and gives that table alone, as ``+I``
    rows (of the last arrival), not the changes that lead to it: an insert-only changelog.
    """
    if final:   # bundles change the changes, not the last table
        options = replace(options, mini_batch=None)
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
        top = i == len(levels) - 1
        wanted = [c if c.type else replace(c, type=result_type(c.function, types.get(c.arg))) for c in calls]
        natural = [replace(c, type=_natural_type(c, types)) for c in calls]
        if not_compiled(log, keys, wanted, options, types) or not top and natural != wanted:
            return None   # (a level above reads this one's values: the Java fold's type exactly)
        calls = natural
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
        raw = [f"{sparksql.name(columns[c])} AS {sparksql.name(i)}" for c, i in zip([*keys, *args], df.columns)]
    numbered = raw is not None and not isinstance(stream.proctime, str)   # the arrivals numbered in the pass
    # tasks of spans; not over files Spark parses row by row, which a span's task would parse again from the start
    rows_parsed = numbered and jvm.parses_rows(stream.source)   # a file parsed row by row: CSV, JSON
    reparsed = rows_parsed and not jvm.read_by_lines(stream.source)   # by Spark's parser, at every read
    prefixes = numbered and not mini_batch and (chunks <= PREFIX_CHUNKS or final) and not (
        chunks > 1 and options.tasks > 1 and reparsed)
    if options.tasks > 1 and chunks == 1 and not mini_batch and not prefixes:
        return None
    marked = numbered   # each change's watermark found in the pass too
    if numbered:
        clock = stream.proctime
        # the first chunk's seq and watermark: the pass counts the rows of any others (Chain.run)
        parts[0] += ";offsets=0" + (f";clock={epoch_ms(clock.start)}:{clock.step.millis}" if clock is not None else "")
        if prefixes:
            cores = jvm.bridge.dataset(df).sparkSession().sparkContext().defaultParallelism()   # Connect too
            tasks = 1 if final else max(1, min(options.tasks, SPAN_TASKS, cores))
            # the last task reads on to the end, whatever the count: a reckoning from the files will do
            known = stream.known_rows if tasks > 1 else 0
            rows = known if known is not None else jvm.reckon(stream.source)
            share = ACCUMULATE_PARSED if rows_parsed else ACCUMULATE
            parts[0] += f";spans={','.join(map(str, spans(rows, tasks, share)))}" + ";final=1" * final
        if marked:   # the watermark each row emits: off the time column as read, where Java can
            parts[0] += ";marks="
            shift = stream.own_watermark_shift()
            if shift is None and stream.time is None:
                raw.append(f"{stream.own_watermark_sql()} AS _g")
            elif shift is None:   # (a NULL event time fails the query, as a read of the stream's rows does)
                null = null_time_sql(stream.time, sparksql.string("of the input"))
                raw.append(f"CASE WHEN {sparksql.name(stream.time)} IS NULL THEN CAST({null} AS BIGINT) "
                           f"ELSE {stream.own_watermark_sql()} END AS _g")
            else:   # a column read straight stays one: Parquet's dictionaries reach the pass
                kind = "t" if isinstance(stream.source.schema[stream.time].dataType, T.TimestampType) else "l"
                parts[0] += f";own={kind}:{shift};time={stream.time.encode().hex()}"   # (named in its error)
                raw.append(f"{sparksql.name(stream.time)} AS _g")
            schema = schema.add("_wm", T.LongType())
        df = sparksql.select(stream.source, *raw)
    # a file parsed row by row: read on a thread of its own by a task that reads it alone
    parts[0] += ";ahead=1" * rows_parsed
    if mini_batch:   # one task reads the chunks in turn
        out = jvm.mini_batch_chain(df, "|".join(parts), schema)
    else:
        if options.tasks == 1 and chunks > 1 and not prefixes:   # one task reads the chunks in turn (spans: already)
            df, chunks = df.coalesce(1), 1
        out = jvm.chain(df, chunks, "|".join(parts), schema, SUMMARY_LIMIT, prefixes)
    if out is None:
        return None
    last_keys = levels[-1][0]
    mode = INSERT_ONLY if final and prefixes else mode   # (the last table alone: a +I per row)
    return Changelog(wrapped(out, wanted), (*last_keys, *(c.name for c in wanted)), mode, tuple(last_keys), True,
                     ticks(log, options.mini_batch[0]) if mini_batch else None, marked)
