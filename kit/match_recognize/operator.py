"""MATCH_RECOGNIZE on Spark: one partition per PARTITION BY key, matched in Python over Arrow.

``match_recognize(table, spec)`` spreads the input over tasks by the PARTITION BY columns,
sorts each task's rows by PARTITION BY then ORDER BY in the JVM, and runs the matcher
(``matcher.run_partition``) once per group, on the replay driver (``kit.replay.keyed``, as
a ``Rows`` operator: the matcher reads a group's rows at once): the columns reach the
matcher as numpy arrays, never as per-row pandas objects, and the output is built as
Arrow columns. Partitions are independent, so the same plan scales out on a cluster.
An input whose row count is known without a job (a stream's arrival count, Spark's
statistics of local data) is spread over ``kit.spark.replay_tasks(rows)`` tasks: a small one
runs as one task with no shuffle, and its details (``MatchResult.details()``) are kept with
its matches, so reading them runs the matcher no more. The output is the same however the
input is spread.

Row order inside a partition is the ORDER BY, ties broken by arrival. For a
``kit.Stream`` (event time), Flink's CEP operator buffers rows until the watermark
passes them and drops those already behind it: a row is *late* when its time is at or
below the watermark it met (the goldens' tie rule). The kit drops them from matching as
Flink does, but returns them in ``MatchResult.late`` with the watermark that made them late.
``ORDER BY`` a stream's processing time (``proctime=``) matches the rows as they arrive,
in arrival order: none waits, none is late (``late`` is None).

Flink's semantics have a per-element form, ``cep.CepOperator`` (a ``KeyedOperator``: rows
buffered until the watermark releases them to a resumable NFA), which a live driver runs;
the replay has a key's on-time rows at hand, so it runs the whole-partition fast path
(``flink.run_blocks``), whose matches are the operator's (``tests/test_mr_cep.py``).
semantics="standard" (the SQL standard, as Trino: batch only) stays a whole-partition
``Rows`` operator: NEXT() reads rows after the one being classified and the anchor ``$``
the partition's last row, which a stream has not released, and its matcher tries one start
row at a time to the end of its threads, where Flink's NFA moves every partial match one row
at a time.

Output (``MatchResult.rows``), ordered by partition, then match, then row:

- ONE ROW PER MATCH: the PARTITION BY columns, then the measures;
- ALL ROWS PER MATCH: the input columns (of the matched row; NULL for an empty match),
  then the measures; under semantics="standard" the standard's order instead: the PARTITION
  BY columns, the ORDER BY columns, the measures, then the other input columns.

Under semantics="standard" ORDER BY may be left out (the standard allows it): rows are then
matched in input order. An empty result is an empty DataFrame with the query's columns.
"""

from __future__ import annotations

import pickle
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from .. import jvm, sparksql
from ..arrow import column
from ..errors import KitError, fail
from ..replay.keyed import Rows, replay
from ..spark import known_rows, replay_tasks
from ..stream import Stream
from . import compiled
from .errors import MatchRecognizeError, MatchRuntimeError
from .matcher import SEMANTICS, run_partition
from .expressions import to_decimal, walk
from .spec import ONE_ROW, Column, MatchProctime, MatchRecognize, MatchRowtime
from .types import check_types, coerce_spec, measure_type

__all__ = ["match_recognize", "MatchResult", "SEMANTICS", "MatchRecognizeWarning"]

_SEQ = "_kit_seq"
_ERROR = "_kit_error"    # a partition's run-time error: its message, for Spark's raise_error
_RAISED = "_kit_raised"  # ... and the error itself (pickled), for the driver to raise
_DETAILS = "_kit_details"  # a group's details, kept with its matches (a small input)


class MatchRecognizeWarning(UserWarning):
    """Something runs, but not the way a streaming job would want it (e.g. one partition)."""


@dataclass
class MatchResult:
    """What a MATCH_RECOGNIZE produced: ``rows`` (the query's output), ``late`` (rows of a
    stream dropped as late, with their ``watermark``; None for a batch input), and
    ``details()``: every input row with the ``match_number`` and ``classifier`` it got (one
    row per match it belongs to; NULLs for rows in no match) and ``late``, for charts and
    explanations."""

    rows: DataFrame
    late: Optional[DataFrame]
    spec: MatchRecognize = field(repr=False)
    semantics: str = "flink"
    plan: "_Plan" = field(default=None, repr=False, compare=False)

    def details(self) -> DataFrame:
        return self.plan.details()


def _check(table, spec: MatchRecognize, semantics: str) -> tuple[DataFrame, Optional[Stream], bool]:
    """The input's rows, its stream (None: a DataFrame), and whether ORDER BY is the stream's
    processing time; or a KitError for what Flink's planner refuses."""
    if semantics not in SEMANTICS:
        raise KitError(f"semantics must be one of {', '.join(map(repr, SEMANTICS))}; got {semantics!r}")
    stream = table if isinstance(table, Stream) else None
    if stream:
        stream.require_own_names("MATCH_RECOGNIZE")
    df = table.df if stream else table
    if not isinstance(df, DataFrame):
        raise KitError(f"MATCH_RECOGNIZE input must be a Spark DataFrame or a kit.Stream; got {type(table).__name__}")
    columns = df.columns
    for col in list(spec.partition_by) + [o.column for o in spec.order_by]:
        if col not in columns:
            raise KitError(f"column {col!r} of PARTITION BY / ORDER BY is not in the input; columns are {columns}")
    if not spec.order_by and semantics != "standard":
        # the standard allows no ORDER BY (the order is then the implementation's): the kit's is
        # the input's, so the answer stays deterministic
        raise KitError("MATCH_RECOGNIZE needs ORDER BY: patterns depend on the order of rows")
    if stream is not None and semantics != "standard":
        first = spec.order_by[0]
        proctime = stream.kit_columns.get("proctime") if stream.proctime is not None else None
        if first.column in (proctime, stream.proctime):
            if not first.ascending or len(spec.order_by) > 1:
                what = f"then {spec.order_by[1].column!r}" if first.ascending else "DESC"
                raise KitError(
                    f"ORDER BY {first.column!r} (the processing time) {what}: the kit runs ORDER BY a processing "
                    "time ascending and alone, matching rows in arrival order (Flink 2.3 sorts the rows of one "
                    "millisecond by the next field when a processing-time timer fires, which a bounded input "
                    "never reaches: it emits nothing)")
            return df, stream, True
        if stream.time is None:
            raise KitError("You must specify either rowtime or proctime for order by as the first one: the "
                           f"stream has no time attribute (kit.stream(df, time={first.column!r}, ...) makes "
                           f"{first.column!r} one)")
        if first.column != stream.time or not first.ascending:
            raise KitError(
                f"ORDER BY must start with the stream's time attribute {stream.time!r} ascending "
                f"(Flink's rule for streams); got {first.column!r} {'ASC' if first.ascending else 'DESC'}")
    return df, stream, False


def _order_time(spec: MatchRecognize, schema: T.StructType) -> Optional[str]:
    """The row time of a table that declares none: its first ORDER BY column when that is a
    TIMESTAMP (or TIMESTAMP_LTZ), the time ``MATCH_ROWTIME()`` then reads; else None."""
    if not spec.order_by or spec.order_by[0].column not in schema.fieldNames():
        return None
    column = spec.order_by[0].column
    return column if isinstance(schema[column].dataType, (T.TimestampType, T.TimestampNTZType)) else None


def _known_rows(table, df: DataFrame) -> Optional[int]:
    """The input's row count when known without a job: a stream's arrival count, or the
    optimizer's row count (exact for local data); None otherwise."""
    if isinstance(table, Stream):
        return table.arrivals.count if table.arrivals is not None else None
    return known_rows(df)


def _one_batch(table, batches: list) -> list:
    """A chunk of groups' output batches as one: each batch crosses to the JVM at a cost of its
    own, and a task of many small keys makes one per key."""
    return pa.Table.from_batches(batches).combine_chunks().to_batches() if len(batches) > 1 else batches


def _numpy(col: pa.ChunkedArray) -> np.ndarray:
    """A column for the matcher: integers with NULLs stay integers (None), not float64 NaN."""
    if col.null_count and pa.types.is_integer(col.type):
        return np.array(col.to_pylist(), dtype=object)
    return col.to_numpy()


def match_recognize(table, spec: MatchRecognize, semantics: str = "flink",
                    aggregates: dict | None = None, *, step_budget: int | None = None,
                    max_threads: int | None = None) -> MatchResult:
    """Run ``spec`` over ``table`` (a Spark DataFrame or a ``kit.Stream``).

    The matches are computed here (the query's errors are raised here, as KitErrors).
    ``step_budget``: the most steps the matcher may take in one partition (``budget.py``;
    default ``1_000_000 + 200 * rows``); ``max_threads``: the most live threads of the
    standard matcher (default 10,000). Past either, TooManyThreads."""
    limits = {"step_budget": step_budget, "max_threads": max_threads}
    for name, value in limits.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise KitError(f"{name} must be a positive int; got {value!r}")
    plan = _Plan(table, spec, semantics, aggregates, {k: v for k, v in limits.items() if v is not None})
    return MatchResult(plan.rows(), plan.late, spec, semantics, plan)


def _runtime(error: KitError) -> MatchRecognizeError:
    """A run-time error of the matcher as a MatchRecognizeError (which pickles with its type)."""
    return error if isinstance(error, MatchRecognizeError) else MatchRuntimeError("MATCH_RECOGNIZE", str(error))


def _group_row(group: pa.Table, arrow: pa.Schema, values: dict) -> pa.RecordBatch:
    """A row of a group's own carrying ``values`` (Arrow arrays of one value, by column): the
    group's first values in its input columns (NOT NULL ones included: a NULL there would fail
    Spark's row writer), NULL elsewhere."""
    return pa.RecordBatch.from_arrays(
        [values[f.name] if f.name in values else group.column(f.name).slice(0, 1).combine_chunks()
         if f.name in group.column_names else pa.nulls(1, f.type) for f in arrow], schema=arrow)


def _error_row(group: pa.Table, arrow: pa.Schema, error: MatchRecognizeError) -> pa.RecordBatch:
    """A row carrying ``error``, its message and the error itself (pickled)."""
    return _group_row(group, arrow, {_ERROR: pa.array([str(error)]),
                                     _RAISED: pa.array([pickle.dumps(error)], pa.binary())})


def _details(group: pa.Table, result, inputs: list) -> list:
    """A group's details as Arrow columns: its ``inputs``, once per match a row belongs to (once
    when in none), in row order, then ``match_number`` and ``classifier`` (NULL: in no match)."""
    entries = [(i, m.number, c) for m in result.matches for i, c in zip(m.rows, m.classifiers)]
    matched = {i for i, _, _ in entries}
    entries += [(i, None, None) for i in range(group.num_rows) if i not in matched]
    entries.sort(key=lambda e: (e[0], e[1] or 0))  # row order, then match
    index, number, label = zip(*entries) if entries else ((), (), ())
    return group.select(inputs).take(pa.array(index, pa.int64())).columns + [
        pa.array(number, pa.int64()), pa.array(label, pa.string())]


def _scaled(values: list, dtype: T.DataType) -> list:
    """A measure's values, rounded to the scale of its type when that is a DECIMAL (Arrow
    refuses a digit past it: ``price / 3`` is DECIMAL(21, 13))."""
    if not isinstance(dtype, T.DecimalType):
        return values
    return [None if v is None or v != v else to_decimal(v, dtype.scale) for v in values]


class _Plan:
    """One MATCH_RECOGNIZE over one input: the checks, the grouping, the per-partition run."""

    def __init__(self, table, spec: MatchRecognize, semantics: str, aggregates, limits: dict):
        df, stream, by_proctime = _check(table, spec, semantics)
        rows = _known_rows(table, df)
        self.late = None
        if by_proctime:   # rows are matched as they arrive: none waits for a watermark, none is late
            df = df.drop("late", "watermark").withColumnRenamed("seq", _SEQ)
        elif stream is not None:
            self.late = df.filter("late").drop("late")
            df = df.filter("NOT late").drop("late", "watermark").withColumnRenamed("seq", _SEQ)
        else:
            df = df.withColumn(_SEQ, F.monotonically_increasing_id())
        if not spec.partition_by:
            warnings.warn("MATCH_RECOGNIZE without PARTITION BY runs as one partition on one core; "
                          "add PARTITION BY to match in parallel", MatchRecognizeWarning, stacklevel=3)
        self.spec, self.semantics, self.aggregates, self.limits = spec, semantics, aggregates, limits
        self.schema = df.schema
        self.rowtime = None if by_proctime else stream.time if stream is not None else _order_time(spec, self.schema)
        self.proctime = "proctime" if stream is not None and stream.proctime is not None else None   # df's column
        self.inputs = [c for c in df.columns if c != _SEQ]
        self.partition_by = list(spec.partition_by)
        # a small input in one task, read where it is (no shuffle); else spread by PARTITION BY
        tasks = replay_tasks(df.sparkSession, rows)
        self.narrow = rows is not None and tasks == 1
        self.tasks = tasks if self.partition_by and not self.narrow else 1
        self.order = [] if by_proctime else [o.column for o in spec.order_by]   # processing time: arrival order
        self.ascending = [o.ascending for o in spec.order_by][:len(self.order)]
        self.order, self.ascending = self.order + [_SEQ], self.ascending + [True]
        self.df = df
        self.kept = None   # a small input's matches as kept, with its details
        # a dry run on no rows raises the planning errors (greedy last, unknown variables,
        # unsupported features...) here, on the driver, instead of inside a Spark task
        run_partition({c: np.array([], dtype=object) for c in self.inputs}, spec, semantics,
                      aggregates=aggregates, rowtime=self.rowtime, proctime=self.proctime)
        check_types(spec, self.schema, semantics, aggregates)
        self.spec = coerce_spec(spec, self.schema, semantics, aggregates)

    def _sorted(self, columns: list) -> DataFrame:
        """The input, only ``columns`` of it, in ``self.tasks`` tasks by PARTITION BY (one with no
        shuffle when ``self.narrow``), sorted by PARTITION BY then ORDER BY (NULLs last) then
        arrival, in the JVM."""
        col = sparksql.col   # (a name with a backtick is read as written)
        df = self.df.select(*map(col, dict.fromkeys(self.partition_by + columns + [_SEQ])))
        order = [col(c).asc_nulls_last() if up else col(c).desc_nulls_last() for c, up in zip(self.order, self.ascending)]
        keys = list(map(col, self.partition_by))
        spread = df.coalesce(1) if self.narrow else df.repartition(self.tasks, *keys)
        return spread.sortWithinPartitions(*keys, *order)

    def _referenced(self) -> list:
        """The input columns the matcher reads: ORDER BY, DEFINE, MEASURES, WITHIN's time."""
        names = {o.column.lower() for o in self.spec.order_by}

        def visit(e):
            if isinstance(e, Column):
                names.add(e.name.lower())
            elif isinstance(e, MatchRowtime) and e.arg is None and self.rowtime:
                names.add(self.rowtime.lower())
            elif isinstance(e, MatchProctime) and self.proctime:
                names.add(self.proctime)
        for expr in [e for _, e in self.spec.define] + [m.expr for m in self.spec.measures]:
            walk(expr, visit)
        return [c for c in self.inputs if c.lower() in names]

    def _run(self, out_schema: T.StructType, emit, columns: list, eager: bool = False, measured: list | None = None):
        """The matcher over ``columns`` of the input, one PARTITION BY group at a time, in a
        ``mapInArrow`` over the sorted input; ``emit(group, result)`` builds a group's output
        columns (Arrow arrays). A group's run-time error (SKIP TO FIRST onto a match's first
        row, a step budget exceeded...) is a row of its own: ``eager`` computes the matches
        now (``localCheckpoint``), keeps them in ``self.kept`` with a small input's details
        (a row of their own per group, in an array) and raises the first such error here,
        as the kit's own exception; otherwise it fails the query, when read, with its message.
        ``measured``: ONE ROW PER MATCH's measure types, when a large input may run in the JVM
        (``compiled``); a group failing there runs the query again here, for its error."""
        spec, semantics, aggregates, rowtime, proctime, limits = (self.spec, self.semantics, self.aggregates,
                                                                  self.rowtime, self.proctime, self.limits)
        partition_by, all_inputs = self.partition_by, self.inputs
        keep = eager and self.narrow
        columns = all_inputs if keep else columns
        inputs = [c for c in columns if c not in partition_by or c in self._referenced()]
        schema = T.StructType(out_schema.fields + [T.StructField("_kit_order", T.LongType()),
                                                   T.StructField(_ERROR, T.StringType()),
                                                   T.StructField(_RAISED, T.BinaryType())]
                              + [T.StructField(_DETAILS, T.ArrayType(self._details_schema(), False))] * keep)
        arrow = to_arrow_schema(schema, timezone="UTC")
        nulls = list(arrow)[len(out_schema) + 1:]   # after _kit_order: NULL in the output rows

        def match(group, _):
            """One PARTITION BY group's rows, matched: its output batches."""
            try:
                result = run_partition({c: _numpy(group.column(c)) for c in inputs}, spec, semantics,
                                       aggregates=aggregates, rowtime=rowtime, proctime=proctime, epoch_ms=True,
                                       **limits)
            except KitError as e:  # e.g. SKIP TO FIRST onto the match's first row: Flink fails the job
                where = ", ".join(f"{c}={group.column(c)[0].as_py()!r}" for c in partition_by)
                yield _error_row(group, arrow, _runtime(e).in_partition(where or "all rows"))
                return
            out = emit(group, result, arrow)
            n = len(out[0]) if out else 0
            out += [pa.array(range(n), pa.int64())] + [pa.nulls(n, f.type) for f in nulls]
            yield from pa.Table.from_arrays(out, schema=arrow).to_batches()   # emission order
            if keep:
                kind = arrow.field(_DETAILS).type
                rows = pa.StructArray.from_arrays(
                    [pa.concat_arrays(c.chunks) if isinstance(c, pa.ChunkedArray) else c
                     for c in _details(group, result, all_inputs)], fields=list(kind.value_type))
                yield _group_row(group, arrow, {_DETAILS: pa.ListArray.from_arrays(
                    pa.array([0, len(rows)], pa.int32()), rows, type=kind)})

        rows, found = self._sorted(columns), None
        if measured is not None and not keep and jvm.available(rows.sparkSession, "Matcher"):
            config = compiled.settings(spec, semantics, rows.schema, list(dict.fromkeys(partition_by)), measured,
                                       limits.get("step_budget"), rowtime)
            found = None if config is None else jvm.matcher(rows, config, schema)
        matched = found if found is not None else replay(rows, partition_by, lambda key: Rows(match), schema,
                                                         output=_one_batch)
        internal = ("_kit_order", _ERROR, _RAISED, _DETAILS)
        if eager:
            # kept by the job that first reads it: the check for errors computes and keeps the
            # matches in one job (head() would scan in steps)
            matched = matched.localCheckpoint(eager=False)
            failed = matched.where(f"{_ERROR} IS NOT NULL").select(_RAISED).collect()
            if failed and found is not None:   # the JVM's matcher says where, Python's what
                return self._run(out_schema, emit, columns, eager)
            if failed:
                raise pickle.loads(failed[0][0])
            if keep:   # one partition, in order already (PARTITION BY, then emission)
                self.kept = matched
                return matched.where(f"{_DETAILS} IS NULL").drop(*internal)
            one = matched.coalesce(1)   # kept: one task reads it all, with no shuffle
        else:
            error = F.col(_ERROR)
            matched = matched.filter(F.when(error.isNull(), F.lit(True))
                                      .otherwise(fail(error).cast("boolean")))
            # in many tasks, not coalesce: the matcher stays parallel
            one = matched.coalesce(1) if self.narrow else matched.repartition(1)
        # one partition, then a sort inside it: a total order without the sampling job of a
        # global orderBy, which would run the matcher twice
        return one.sortWithinPartitions(*map(sparksql.col, partition_by), "_kit_order").drop(*internal)

    def rows(self) -> DataFrame:
        measures = [(m.alias, measure_type(m.expr, self.schema, self.semantics, self.aggregates))
                    for m in self.spec.measures]
        one_row = self.spec.rows_per_match == ONE_ROW
        head, tail = self.layout()
        unique = list(dict.fromkeys(head))
        keep = unique + tail

        def emit(group, result, arrow):
            by_column = [list(c) for c in zip(*result.rows)] or [[] for _ in range(len(measures) + 1 - one_row)]
            index = [0] * len(result.rows) if one_row else by_column.pop(0)
            taken = group.select(keep).take(pa.array(index, pa.int64())).columns  # None: a NULL row
            return taken[:len(unique)] + [column(_scaled(values, dtype), dtype, arrow.field(name).type)
                                          for values, (name, dtype) in zip(by_column, measures)] + taken[len(unique):]

        out = self._run(T.StructType([self.schema[c] for c in unique] + [
            T.StructField(name, dtype, True) for name, dtype in measures] + [self.schema[c] for c in tail]),
            emit, self._referenced() if one_row else self.inputs, eager=True,
            measured=[dtype for _, dtype in measures] if one_row else None)
        if len(unique) < len(head):   # a column ORDER BY names twice, listed twice (Spark allows two of a name)
            out = out.select(*[sparksql.col(c) for c in [*head, *(name for name, _ in measures), *tail]])
        return out

    def layout(self) -> tuple:
        """The input columns of an output row, as (before the measures, after them): ONE ROW PER
        MATCH the PARTITION BY columns, then the measures; ALL ROWS PER MATCH, in the standard the
        PARTITION BY columns, the ORDER BY columns, the measures, then the other input columns
        (in input order; an ORDER BY column written twice is listed twice, as Trino lists it),
        and in Flink's semantics the input columns, then the measures."""
        if self.spec.rows_per_match == ONE_ROW:
            return list(self.partition_by), []
        if self.semantics != "standard":
            return list(self.inputs), []
        head = list(self.partition_by) + [o.column for o in self.spec.order_by]
        return head, [c for c in self.inputs if c not in head]

    def _details_schema(self) -> T.StructType:
        return T.StructType([self.schema[c] for c in self.inputs] + [
            T.StructField("match_number", T.LongType()), T.StructField("classifier", T.StringType())])

    def details(self) -> DataFrame:
        """Every input row with its ``match_number``, ``classifier`` and ``late``: kept with the
        matches of a small input (one partition, in order), else from the matcher run again."""
        if self.kept is not None:
            details = self.kept.where(f"{_DETAILS} IS NOT NULL").selectExpr(f"inline({_DETAILS})", "false AS late")
        else:
            inputs = self.inputs
            details = self._run(self._details_schema(), lambda group, result, arrow: _details(group, result, inputs),
                                inputs).withColumn("late", F.lit(False))
        if self.late is None:
            return details
        late = self.late.select(*map(sparksql.col, self.inputs), F.lit(None).cast("long").alias("match_number"),
                                F.lit(None).cast("string").alias("classifier"), F.lit(True).alias("late"))
        order = [sparksql.col(o.column).asc() if o.ascending else sparksql.col(o.column).desc() for o in self.spec.order_by]
        both = details.unionByName(late)
        return ((both.coalesce(1) if self.narrow else both.repartition(1))
                .sortWithinPartitions(*map(sparksql.col, self.partition_by), *order, "match_number"))
