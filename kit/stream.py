"""A bounded replay of a stream: event time, arrival order, watermarks, processing time.

``kit.stream(df, time="cTime", watermark=...)`` (``Stream.of``) fixes, once, what a streaming job would see:
the order in which rows arrive (``seq``), the watermark in force when each row arrives,
whether the row is late against it, and (with a ``Clock`` or a column) the processing
time of each arrival. ``Stream.df`` is the input with these columns added, sorted by
``seq``:

==============  ==========================  ===============================================
column          type                        meaning
==============  ==========================  ===============================================
``seq``         BIGINT                      arrival order, ``0 .. n-1``
``watermark``   like the time column        watermark when the row arrived, left by the
                                            rows before it; NULL = ``Long.MIN_VALUE``
``late``        BOOLEAN                     ``time <= watermark``: Flink may drop it
``proctime``    TIMESTAMP                   simulated processing time of the arrival
                                            (only with ``proctime=``)
==============  ==========================  ===============================================

A row without an event time fails whatever reads the stream's rows, as it fails Flink's job
(``KitRuntimeError: row seq=1 has NULL event time in column 't'``), whichever columns are
read; so does a TIMESTAMP on 0001-01-01, which PySpark cannot give back.

An input column with one of these names keeps it; the stream's own is then renamed
``kit_<name>`` (``kit_kit_<name>`` if that is taken too), as Flink reserves no names:
``s.kit_columns`` maps each own name to the one in ``df``. The windows take such streams;
the other operators read the stream's columns by name and say which input column to
rename (``Stream.require_own_names``).

Clicks, monotonous watermark (``max(ts) - 1 ms``)::

    user  cTime     seq  watermark      late
    Mary  12:00:00  0    NULL           false
    Bob   12:00:00  1    11:59:59.999   false
    Mary  11:59:00  2    11:59:59.999   true

The watermark is a prefix maximum over arrival order, computed as a parallel scan:
each input partition is a chunk; one small aggregate gives every chunk's row count and
maximum, a window over that summary gives each chunk's offset and carried-in maximum,
and a window inside each chunk finishes the scan. Nothing is collected to the driver.
Where the kit reaches Spark's JVM, ``s.arrivals`` runs the same scan as two folds over
the input partitions in Java (``kit/jvm/ArrivalScan.java``), with no sort at all: the
first collects one row per chunk, the second carries it in.
"""

from __future__ import annotations

import calendar
import contextlib
import contextvars
import weakref
import re
import warnings
from dataclasses import dataclass, field
from functools import cached_property

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import jvm, sparksql
from .arrow import map_in_arrow
from .errors import KitError, fail, fail_sql
from .time import Clock, Duration, WatermarkStrategy, to_duration

__all__ = ["Stream", "StreamWarning", "Arrivals"]

CHUNK_BITS = 33  # monotonically_increasing_id(): partition index << 33 | row in partition
_ADDED = ("seq", "watermark", "late", "proctime")


@dataclass(frozen=True)
class Stream:
    """A DataFrame with its stream metadata; ``df`` holds the annotated rows (see module doc)."""

    source: DataFrame = field(repr=False)
    time: str | None
    watermark: WatermarkStrategy
    order: tuple[str, ...] = ()
    proctime: str | Clock | None = None
    primary_key: tuple[str, ...] = ()

    @cached_property
    def df(self) -> DataFrame:
        """The annotated rows, built when first read (operators that need no watermark
        per row never read it); the stream's own columns named as ``kit_columns`` says."""
        return self._shown(_annotate(self))

    def deferred_df(self) -> DataFrame:
        """``df``'s rows with no job until they are read: numbered and given their watermarks
        by Spark's own operators (``prefix_scan``) instead of the JVM's arrival scan, whose
        first pass runs when it is built. For what is seldom read: a window aggregation's
        late rows (``kit.sql.window_aggregate``)."""
        return self._shown(_annotate(self, scan=False))

    def _shown(self, out: DataFrame) -> DataFrame:
        """The annotated rows ``out`` with the stream's own columns named as ``kit_columns`` says."""
        renamed = {**{self.inner(c): c for c in self.shown_columns()},
                   **{c: name for c, name in self.kit_columns.items()}}
        if all(old == new for old, new in renamed.items()):
            return out
        return out.select(*[F.col(sparksql.name(c)).alias(renamed.get(c, c)) for c in out.columns])

    @cached_property
    def kit_columns(self) -> dict:
        """Each column the stream adds (``seq``, ``watermark``, ``late``, ``proctime`` with a
        clock) and its name in ``df``: its own, or ``kit_<name>`` where the input has one."""
        shown = set(self.shown_columns())
        own = _ADDED if self.proctime is not None else _ADDED[:3]
        return {c: kit_name(c, shown) for c in own}

    def shown_columns(self) -> list:
        """The input's columns as ``df`` shows them (a proctime column named ``proctime`` is
        the stream's own, made non-decreasing)."""
        return [c for c in self.source.columns if not (c == "proctime" and self.proctime == "proctime")]

    def inner(self, column: str) -> str:
        """An input column's name in the stream's frames for operators (``unordered()``, the
        JVM scan's rows), where the stream's own columns keep their names and operators name
        their working columns with a ``_`` first: its own, or ``__in_<name>`` for one named
        like the stream's own or starting with ``_``."""
        clash = column in _ADDED or column.startswith("_")
        return f"__in_{column}" if clash and column in self.shown_columns() else column

    def require_own_names(self, reader: str) -> None:
        """Raise a KitError when an input column has the name of one the stream adds:
        ``reader`` (an operator that reads them by name) would mistake one for the other."""
        taken = [c for c, name in self.kit_columns.items() if name != c]
        if taken:
            raise KitError(
                f"{reader} reads the stream's own column(s) {taken} by name, and the input has column(s) of "
                f"the same name (the stream calls its own {[self.kit_columns[c] for c in taken]}): rename the "
                f"input's first, e.g. df.withColumnRenamed({taken[0]!r}, '{taken[0]}_in'); windows "
                "(key_by(...).window(...)) take them as they are")

    @cached_property
    def arrivals(self) -> "Arrivals | None":
        """The JVM arrival scan (its first pass runs when first read), shared by ``df`` and
        every operator over this stream; None where the kit does not reach Spark's JVM."""
        from . import jvm

        return Arrivals(self) if jvm.available(self.source.sparkSession, "ArrivalScan") else None

    @property
    def known_rows(self) -> int | None:
        """The input's rows when known without a job of their own: Spark's count of local
        data, or the arrival scan's once it ran (``df`` runs it), or ``rows`` once read;
        else None."""
        from .spark import known_rows

        scan = self.__dict__.get("arrivals")
        if scan is not None:
            return scan.count
        return self.__dict__["rows"] if "rows" in self.__dict__ else known_rows(self.source)

    @cached_property
    def rows(self) -> int:
        """The input's rows: ``known_rows`` where known, else a count of the source (a job
        that reads no column where the format can skip them: Parquet's footers; CSV and JSON
        lines the kit's own read counts: ``jvm.count``)."""
        known = self.known_rows
        return known if known is not None else jvm.count(self.source)

    def columns_only(self, columns: list) -> DataFrame:
        """``df``'s ``columns`` (the input's, and the stream's ``proctime``), typed as ``df`` has
        them, straight over the source's partitions: no arrival scan, no ``seq``. For what
        reads none of the arrivals' places: a query's analysis, a pass that numbers the
        arrivals itself. The stream's ``proctime`` is NULL for a clock, a column's cast."""
        exprs, source = [], self.source
        if self.time is not None:   # a row without an event time fails the query, as in ``df``
            source = source.where(_time_check(self, self.millis_sql(self.time), sparksql.string("of the input")))
        for c in columns:
            if c in self.shown_columns():
                exprs.append(sparksql.name(c))
            elif c == self.kit_columns.get("proctime"):
                column = sparksql.name(self.proctime) if isinstance(self.proctime, str) else "NULL"
                exprs.append(f"CAST({column} AS TIMESTAMP) AS {sparksql.name(c)}")
            else:
                raise KitError(f"internal: the stream has no column {c!r}")
        return sparksql.select(source, *exprs)

    @property
    def time_is_timestamp(self) -> bool:
        """True for TIMESTAMP time columns (and a stream without one), False for BIGINT epoch
        milliseconds."""
        return self.time is None or not isinstance(self.source.schema[self.time].dataType, T.IntegralType)

    def unordered(self) -> DataFrame:
        """``df`` without its final sort by ``seq``: the same rows, for operators that group
        them anyway (it saves a sort of the whole stream); the stream's own columns by their
        own names, the input's named like them as ``inner`` says."""
        return _annotate(self, ordered=False)

    def own_watermark(self) -> Column:
        """The watermark each row emits (before the running maximum), in ms; NULL for none."""
        return F.expr(self.own_watermark_sql())

    def watermark_sql(self, millis: str) -> str:
        """The watermark ``millis`` (Spark SQL, ms) in the time column's kind: a TIMESTAMP
        for a TIMESTAMP column, else the ms as they are."""
        return f"timestamp_millis({millis})" if self.time_is_timestamp else millis

    def own_watermark_sql(self) -> str:
        """``own_watermark`` as Spark SQL over the source's columns."""
        return _candidate(self, self.millis_sql(self.time))

    def own_watermark_shift(self) -> int | None:
        """Where ``own_watermark`` is the event time less a constant and the time column a
        TIMESTAMP or BIGINT: the constant (ms), so a pass can read it off the column as it
        is (``kit/jvm/Chain.java``); else None."""
        wm = self.watermark
        if wm.kind not in ("bounded", "sql") or not isinstance(self.source.schema[self.time].dataType,
                                                               (T.TimestampType, T.LongType)):
            return None
        return wm.delay.millis + (wm.kind == "bounded")

    @classmethod
    def of(cls, df, time: str | None = None, watermark: WatermarkStrategy | Duration | None = None,
           order: str | list[str] | None = None,
           proctime: str | Clock | None = None, primary_key: str | list[str] | None = None) -> "Stream":
        """Replay ``df`` as a stream (``kit.stream(df, ...)``: a ``kit.windows.DataStream``).

        - ``df``: a Spark or pandas DataFrame.
        - ``time``: the event-time column, TIMESTAMP or BIGINT epoch milliseconds; None (the
          default): a stream without a time attribute, as a Flink table with no
          ``WATERMARK``: continuous queries run on its arrival order alone (GROUP BY, joins,
          Top-N, OVER ordered by a column), and what needs event time (windows, temporal
          joins, MATCH_RECOGNIZE, deduplication on a rowtime) fails with Flink's error.
        - ``watermark``: a ``WatermarkStrategy``, or a ``Duration`` (or ``timedelta``) meaning
          ``for_bounded_out_of_orderness(d)``; default ``for_monotonous_timestamps()``.
        - ``order``: column(s) giving the arrival order; default: the input's order
          (its partitions in order, rows in partition order; one file is read in its order,
          but Spark reads a folder of several files larger files first, so rows written in
          time order over many files may arrive late: write one file, or pass ``order``).
          Ties in ``order`` keep input order. The order is fixed once, here: an input sorted
          by ``order``, or whose own order a second read would not repeat (a shuffle's output),
          is read now and kept (see ``in_arrival_order``).
        - ``proctime``: the processing time of each arrival, a TIMESTAMP column or a
          ``Clock``; a clock never goes back, so a column is made non-decreasing.
        - ``primary_key``: column(s) that make the stream a versioned table (Flink's ``PRIMARY
          KEY ... NOT ENFORCED``): each row is the version of its key from its time on, for
          temporal joins; an ``op`` column (``+I``, ``-U``, ``+U``, ``-D``) makes it an upsert
          changelog.
        """
        if not isinstance(df, DataFrame):
            try:
                import pandas as pd
            except ImportError:  # pragma: no cover - pandas is a dependency
                pd = None
            if pd is not None and isinstance(df, pd.DataFrame):
                df = _from_pandas(df)
            elif type(df).__name__ != "DataFrame":
                raise KitError(f"kit.stream() takes a Spark or pandas DataFrame; got {type(df).__name__}")
        if time is None and watermark is not None:
            raise KitError("a watermark needs an event time: pass time=<the event-time column> with watermark=")
        if time is None:
            watermark = WatermarkStrategy.no_watermarks()
        elif watermark is None:
            watermark = WatermarkStrategy.for_monotonous_timestamps()
        elif not isinstance(watermark, WatermarkStrategy):   # a Duration: for_bounded_out_of_orderness(d)
            watermark = WatermarkStrategy.for_bounded_out_of_orderness(to_duration(
                watermark, "kit.stream", "watermark", kinds="a WatermarkStrategy, Duration or timedelta",
                like="Duration"))
        order = (order,) if isinstance(order, str) else tuple(order or ())
        primary_key = (primary_key,) if isinstance(primary_key, str) else tuple(primary_key or ())
        made = _STREAMS.setdefault(df, weakref.WeakValueDictionary())
        args = (cls, time, watermark, order, proctime, primary_key)
        try:
            s = made.get(args)
        except TypeError:   # an argument that cannot be a key, checked below
            s = None
        if s is None:
            _check_columns(df, time, watermark, order, proctime)
            for col in primary_key:
                if col not in df.columns:
                    raise KitError(f"primary key column {col!r} is not a column; columns are {df.columns}")
            made[args] = s = cls(in_arrival_order(df, order), time, watermark, order, proctime, primary_key)
        held = _HELD.get()
        if held is not None:
            held.append(s)
        return s

    @staticmethod
    @contextlib.contextmanager
    def holding():
        """``with Stream.holding() as kept:`` the Streams made (or met again) inside, in
        ``kept``, which keeps them and what they keep (a read order, a join's interleaving)
        while it is held. A Stream otherwise lives as long as a result or variable reads it;
        ``kit.widgets`` holds its last redraw's, so the next one over the same inputs
        reads them again."""
        kept = []
        token = _HELD.set(kept)
        try:
            yield kept
        finally:
            _HELD.reset(token)

    def millis(self, column: str) -> Column:
        """A time column of ``df`` (``time``, ``watermark``) as epoch milliseconds."""
        return F.expr(self.millis_sql(column))

    def millis_sql(self, column: str) -> str:
        """``millis`` as Spark SQL text (NULL for no column: a stream without event time)."""
        if column is None:
            return "CAST(NULL AS BIGINT)"
        q = sparksql.name(column)
        return f"unix_millis(CAST({q} AS TIMESTAMP))" if self.time_is_timestamp else f"CAST({q} AS BIGINT)"


def _from_pandas(pdf) -> DataFrame:
    """``pdf`` as a Spark DataFrame; the same pandas object with the same contents (hashed:
    it may have changed in place) gives the same Spark DataFrame again, so its stream is
    the same too."""
    import hashlib

    import pandas as pd

    from .spark import spark

    try:
        digest = hashlib.sha256(pd.util.hash_pandas_object(pdf, index=True).to_numpy().tobytes()
                                + repr(list(zip(pdf.columns, pdf.dtypes))).encode()).digest()
    except TypeError:   # unhashable cells (lists, dicts): converted every time
        return spark().createDataFrame(pdf)
    known = _FROM_PANDAS.get(id(pdf))
    if known is not None and known[0] == digest:
        return known[1]
    if known is None:
        weakref.finalize(pdf, _FROM_PANDAS.pop, id(pdf), None)
    df = spark().createDataFrame(pdf)
    _FROM_PANDAS[id(pdf)] = (digest, df)
    return df


_FROM_PANDAS: dict[int, tuple] = {}   # id of a live pandas DataFrame -> (its contents' hash, Spark DataFrame)


# What a DataFrame object has given, while both live: the same input replayed again with the
# same arguments (a widget redrawing) is the same Stream (its annotated rows and arrival scan
# computed once), and ordered again by the same columns reads the order kept the first time.
# Held weakly: what a Stream keeps (a read order, a join's interleaving) goes with the last
# Stream, result or DataFrame that reads it, even while its input lives on (``Stream.holding``
# keeps Streams longer).
_STREAMS: "weakref.WeakKeyDictionary[DataFrame, weakref.WeakValueDictionary]" = weakref.WeakKeyDictionary()
_HELD: "contextvars.ContextVar[list | None]" = contextvars.ContextVar("kit_held_streams", default=None)
_ORDERED: "weakref.WeakKeyDictionary[DataFrame, weakref.WeakValueDictionary]" = weakref.WeakKeyDictionary()


class StreamWarning(UserWarning):
    """The stream's input order is Spark's, not one a second run would repeat."""


def in_arrival_order(df: DataFrame, order: tuple[str, ...] = ()) -> DataFrame:
    """``df`` with its partitions and rows in arrival order, the same at every read.

    An input is read again by every job an operator runs (a count, then a scan, then the
    firings), so its order must not change between reads: a file or a local table keeps
    it; a shuffle's output does not (its tasks fetch blocks in whatever order they come),
    nor does a nondeterministic column. Such an input, or one sorted by ``order``, is read
    once, in order, and kept (``localCheckpoint``, released with the last DataFrame that
    reads it). Ties in ``order`` keep the input's order when that is reproducible, else
    go by the rows' values, so the same rows always give the same arrivals.

        order="arr", input shuffled over 7 partitions:  arr 3, 0, 2, 1  ->  0, 1, 2, 3

    The same DataFrame object ordered again by the same columns gives what it gave the
    first time (while that DataFrame and what it gave live), with no further Spark job.
    """
    kept = _ORDERED.setdefault(df, weakref.WeakValueDictionary())
    ordered = kept.get(order)
    if ordered is None:
        kept[order] = ordered = _in_arrival_order(df, order)
    return ordered


def _in_arrival_order(df: DataFrame, order: tuple[str, ...]) -> DataFrame:
    reproducible = _reproducible(df)
    if not order:
        if reproducible:
            return df
        warnings.warn(
            "the stream's input comes out of a shuffle or has a nondeterministic column, so its "
            "order is not one another run would repeat; the kit fixes the order it read once, for "
            "this stream. Pass order=<column(s)> for an arrival order that is the same every time",
            StreamWarning, stacklevel=4)
        return df.localCheckpoint()
    if reproducible and _sorted_by(df, order):
        return df
    ties = [] if reproducible else [F.col(f.name) for f in df.schema.fields
                                    if f.name not in order and _sortable(f.dataType)]
    return (df.withColumn("_in", F.monotonically_increasing_id())
              .orderBy(*[F.col(c).asc_nulls_last() for c in order], *ties, "_in")
              .drop("_in").localCheckpoint())


def _reproducible(df: DataFrame) -> bool:
    """Whether every read of ``df`` gives the same rows in the same partitions and order:
    no shuffle exchange in its plan (a broadcast keeps the streamed side's order) and no
    nondeterministic expression."""
    jdf = getattr(df, "_jdf", None)
    if jdf is not None:
        execution = jdf.queryExecution()
        plan, deterministic = execution.executedPlan().toString(), execution.optimizedPlan().deterministic()
    else:   # Spark Connect: the plans as text
        plan = df._explain_string(extended=True)
        deterministic = not _NONDETERMINISTIC.search(plan)
    return deterministic and not _SHUFFLE.search(plan)


_SHUFFLE = re.compile(r"(?<!Broadcast)Exchange ")
_NONDETERMINISTIC = re.compile(r"\b(rand|randn|uuid|shuffle|monotonically_increasing_id|spark_partition_id|"
                               r"input_file_name|random)\(", re.IGNORECASE)


def _sorted_by(df: DataFrame, order: tuple[str, ...]) -> bool:
    """Whether ``df`` is already in ``order`` (NULLs last): each input partition sorted, and
    each one's last row at most the next one's first. One pass over the ``order`` columns
    (a log written in arrival order then needs no sort), in the JVM (``OrderScan``) or
    through Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import TaskContext

    fields = [df.schema[c] for c in order]
    ends = T.StructType([T.StructField(f.name, f.dataType) for f in fields])
    schema = T.StructType([T.StructField("part", T.IntegerType()), T.StructField("ok", T.BooleanType()),
                           T.StructField("first", ends), T.StructField("last", ends)])

    def check(batches):
        table = pa.Table.from_batches(list(batches))
        if not table.num_rows:
            return
        sort = pc.sort_indices(table, sort_keys=[(c, "ascending") for c in order], null_placement="at_end")
        ok = pc.all(pc.equal(sort, pa.array(range(table.num_rows), sort.type))).as_py()
        first, last = (pa.StructArray.from_arrays([c.combine_chunks() for c in table.slice(at, 1).columns],
                                                  names=list(order)) for at in (0, table.num_rows - 1))
        yield pa.RecordBatch.from_arrays([pa.array([TaskContext.get().partitionId()], pa.int32()),
                                          pa.array([ok]), first, last], names=["part", "ok", "first", "last"])

    from . import jvm

    columns = df.select(*order)
    scan = (jvm.order_scan(columns, schema) if jvm.available(df.sparkSession, "OrderScan")
            else map_in_arrow(columns, check, schema))
    parts = sorted(scan.collect())
    return all(p.ok for p in parts) and all(
        _sort_key(a.last) <= _sort_key(b.first) for a, b in zip(parts, parts[1:]))


def _sort_key(row) -> tuple:
    """A row's ``order`` values as Spark sorts them ascending: NaN above numbers, NULL last."""
    return tuple((v is None, v != v, None if v is None or v != v else v) for v in row)


def _sortable(dtype) -> bool:
    return not isinstance(dtype, (T.MapType, T.VariantType)) and not (
        isinstance(dtype, (T.ArrayType, T.StructType)) and "map<" in dtype.simpleString())


def check_column_names(owner: str, columns) -> None:
    """Raise a KitError unless ``owner``'s column names are unique and free of dots: Spark
    matches names ignoring case, so two that differ only in case are the same column, and
    reads ``a.b`` as field ``b`` of a struct ``a``."""
    seen = {}
    for column in map(str, columns):
        twin = seen.get(column.lower())
        if twin is not None:
            raise KitError(f"{owner}: " + (f"two columns are named {column!r}" if twin == column else
                                           f"columns {twin!r} and {column!r} differ only in case, which "
                                           "Spark SQL ignores") + "; rename one of them")
        seen[column.lower()] = column
        if "." in column:
            raise KitError(f"{owner}: column {column!r} has a '.', which Spark SQL reads as a field of a "
                           f"struct; rename it, e.g. to {column.replace('.', '_')!r}")


def _check_columns(df: DataFrame, time, watermark, order, proctime) -> None:
    names = df.columns
    check_column_names("the stream's input", names)
    schema = {f.name: f.dataType for f in df.schema.fields}

    def need(col, what):
        if not isinstance(col, str) or col not in schema:
            raise KitError(f"{what} {col!r} is not a column; columns are {names}")

    if time is not None:
        need(time, "time column")
    if time is not None and not isinstance(schema[time], (T.TimestampType, T.TimestampNTZType, T.IntegralType)):
        raise KitError(f"time column {time!r} must be TIMESTAMP or BIGINT epoch milliseconds; "
                       f"it is {schema[time].simpleString()} (cast it first)")
    for col in order:
        need(col, "order column")
    if watermark.kind == "column":
        need(watermark.column, "watermark column")
    if isinstance(proctime, str):
        need(proctime, "proctime column")
        if not isinstance(schema[proctime], (T.TimestampType, T.TimestampNTZType)):
            raise KitError(f"proctime column {proctime!r} must be TIMESTAMP; "
                           f"it is {schema[proctime].simpleString()}")
    elif proctime is not None and not isinstance(proctime, Clock):
        raise KitError(f"proctime must be a column name or a Clock; got {proctime!r}")
    times = {"time column": time, "watermark column": watermark.column if watermark.kind == "column" else None,
             "proctime column": proctime if isinstance(proctime, str) and proctime != "proctime" else None}
    for what, col in times.items():
        if col in _ADDED:
            raise KitError(f"the {what} {col!r} has the name of a column the stream adds, and operators read "
                           f"both: rename it first, e.g. df.withColumnRenamed({col!r}, '{col}_in') (other input "
                           "columns may have these names)")


def kit_name(name: str, taken: set) -> str:
    """``name``, or ``kit_`` before it (again while taken) when a user column has it: a column
    the kit adds (to a stream, a window result) beside the user's."""
    while name in taken:
        name = "kit_" + name
    return name


def _candidate(s: Stream, ts_ms: str) -> str:
    """The watermark each row leaves behind (before the running maximum), in ms, from the
    row's event time ``ts_ms`` (Spark SQL text). Like Flink's ``BoundedOutOfOrdernessWatermarks``
    (whose running maximum starts at ``Long.MIN_VALUE + delay + 1``), it never goes below
    ``Long.MIN_VALUE``: NULL there."""
    wm = s.watermark
    if wm.kind in ("bounded", "sql"):
        shift = wm.delay.millis + (wm.kind == "bounded")
        return f"IF({ts_ms} >= {-2 ** 63 + shift}, {ts_ms} - {shift}, NULL)" if shift else ts_ms
    if wm.kind == "column":
        return s.millis_sql(wm.column)
    return "CAST(NULL AS BIGINT)"


def rows_of(streams) -> int | None:
    """The rows of ``streams`` together (``Stream.known_rows``), None unless each is known."""
    counts = [s.known_rows for s in streams]
    return None if None in counts else sum(counts)


def epoch_ms(dt) -> int:
    """A naive datetime (UTC) as epoch milliseconds."""
    return calendar.timegm(dt.timetuple()) * 1000 + dt.microsecond // 1000


def null_time_error(column: str, where: Column) -> Column:
    """Fails the query: Flink rejects rows without an event time. ``where``: the row."""
    return fail(F.concat(F.lit("row "), where, F.lit(_null_time(column))))


def null_time_sql(column: str, where: str) -> str:
    """``null_time_error`` as Spark SQL text; ``where`` is a string expression's text (after
    the word ``row``)."""
    return fail_sql(f"'row ', {where}, {sparksql.string(_null_time(column))}")


FIRST_DAY_MS = -62_135_510_400_000   # 0001-01-02 00:00:00: PySpark's collect() gives back no TIMESTAMP before it


def _time_check(s: Stream, ts: str, where: str) -> str:
    """Spark SQL, a filter that passes every row and fails the query on one whose event time
    ``ts`` (ms) is NULL, as Flink's job fails, or, for a TIMESTAMP, before ``FIRST_DAY_MS``;
    ``where``: the row, as ``null_time_sql`` takes it."""
    early = fail_sql(f"'row ', {where}, {sparksql.string(_first_day(s.time))}")
    first_day = f"WHEN {ts} < {FIRST_DAY_MS} THEN CAST({early} AS BOOLEAN) " if s.time_is_timestamp else ""
    return f"CASE WHEN {ts} IS NULL THEN CAST({null_time_sql(s.time, where)} AS BOOLEAN) {first_day}ELSE true END"


def _first_day(column: str) -> str:
    return (f" has event time on 0001-01-01 in column {column!r}: PySpark cannot give back a TIMESTAMP before "
            "0001-01-02 (Python's datetime); give the stream a BIGINT time column (epoch milliseconds)")


def _null_time(column: str) -> str:
    return f" has NULL event time in column {column!r}; Flink rejects such rows: filter or fill them first"


def prepared(s: Stream) -> DataFrame:
    """The source (in arrival order: ``in_arrival_order``), not yet numbered, with ``_ts`` (event time, ms), ``_g``
    (the watermark the row emits, ms) and, for a proctime column, ``_p`` (ms)."""
    df = s.source
    ts = s.millis_sql(s.time)
    exprs = [f"{sparksql.name(c)} AS {sparksql.name(s.inner(c))}" for c in df.columns]   # the input's, as ``inner``
    exprs += [f"{ts} AS _ts", f"{_candidate(s, ts)} AS _g"]
    if isinstance(s.proctime, str):
        exprs.append(f"unix_millis(CAST({sparksql.name(s.proctime)} AS TIMESTAMP)) AS _p")
    return sparksql.select(df, *exprs)


def _annotate(s: Stream, ordered: bool = True, scan: bool = True) -> DataFrame:
    scan = s.arrivals if scan else None
    if scan is not None:   # the JVM's scan: its output partitions are the input's, in arrival order
        ordered = False
        out = scan.rows([s.inner(c) for c in s.shown_columns()]).withColumnRenamed("_pt", "_proc")
    else:
        df = prepared(s)
        running = {"_wm": ("_g", False)}
        if isinstance(s.proctime, str):
            running["_proc"] = ("_p", True)  # a clock never goes back
        out = prefix_scan(df, running)
    late = "false" if s.time is None else "coalesce(_ts <= _wm, false)"
    if s.time is not None:   # a filter, not a column: a read of any columns fails on a NULL event time, as Flink does
        out = out.where(_time_check(s, "_ts", "concat('seq=', CAST(seq AS STRING))"))
    exprs = [*(sparksql.name(s.inner(c)) for c in s.shown_columns()), "seq",
             f"{s.watermark_sql('_wm')} AS watermark", f"{late} AS late"]
    if isinstance(s.proctime, Clock):
        exprs.append(f"timestamp_millis({epoch_ms(s.proctime.start)} + seq * {s.proctime.step.millis}) AS proctime")
    elif isinstance(s.proctime, str):
        exprs.append("timestamp_millis(_proc) AS proctime")
    out = sparksql.select(out, *exprs)   # text: a few py4j calls, where Column objects cost ~170
    return out.orderBy("seq") if ordered else out


def prefix_scan(df: DataFrame, running: dict[str, tuple[str, bool]]) -> DataFrame:
    """Add ``seq`` (dense arrival order) and, for each ``name: (column, inclusive)``, the
    running maximum of ``column`` over the rows before (``inclusive``: up to and with) each row.

    The chunks are the input partitions, in order: one aggregate over them, a window over
    that small summary for the carried-in values, then a window inside each chunk.
    """
    df = (df.withColumn("_id", F.monotonically_increasing_id())
            .withColumn("_chunk", F.shiftright("_id", CHUNK_BITS))
            .withColumn("_pos", F.col("_id").bitwiseAND((1 << CHUNK_BITS) - 1)))
    before = Window.orderBy("_chunk").rowsBetween(Window.unboundedPreceding, -1)
    summary = (df.groupBy("_chunk")
                 .agg(F.count(F.lit(1)).alias("_n"), *[F.max(c).alias(f"{n}_max") for n, (c, _) in running.items()])
                 .select("_chunk", F.coalesce(F.sum("_n").over(before), F.lit(0)).alias("_offset"),
                         *[F.max(f"{n}_max").over(before).alias(f"{n}_carry") for n in running]))
    out = df.join(F.broadcast(summary), "_chunk").withColumn("seq", F.col("_offset") + F.col("_pos"))
    for name, (col, inclusive) in running.items():
        inside = Window.partitionBy("_chunk").orderBy("_pos").rowsBetween(
            Window.unboundedPreceding, 0 if inclusive else -1)
        out = out.withColumn(name, F.greatest(F.col(f"{name}_carry"), F.max(col).over(inside)))
    return out


class Arrivals:
    """The stream's arrival scan in the JVM (``kit/jvm/ArrivalScan.java``), for operators
    that read every row: a first pass over the source counts each input partition's rows
    and finds the largest watermark and processing time they carry on (one row per
    partition, collected; ``count``: the rows in all); ``rows`` and ``first`` then read the
    source once more each, chunk by chunk, with no sort. ``last_proctime``: the last
    arrival's processing time (ms; None without a clock).

        chunk  rows  largest own watermark   ->  carried in: seq  watermark
        0      2     7                           0    NULL
        1      3     12                          2    7
    """

    def __init__(self, s: Stream):
        self.stream = s
        self._prepared = prepared(s)
        self._times = ["_g"] + (["_p"] if isinstance(s.proctime, str) else [])
        self._chunks = ""
        summary = self._scan("summary", self._prepared.select(*self._times), T.StructType([
            T.StructField("_chunk", T.IntegerType()), T.StructField("_n", T.LongType()),
            T.StructField("_max", T.LongType()), T.StructField("_pmax", T.LongType())])).collect()
        # offsets: each chunk's first seq; carried: the watermark in force at its first row
        seq, wm, pt, chunks, self.offsets, self.carried = 0, None, None, [], [], []
        for r in sorted(summary):
            if r._chunk != len(chunks):
                raise KitError(f"the stream's input partition {len(chunks)} was not scanned")
            chunks.append(f"{seq}:{r._n}:{'' if wm is None else wm}:{'' if pt is None else pt}")
            self.offsets.append(seq)
            self.carried.append(wm)
            seq += r._n
            wm = r._max if wm is None or (r._max is not None and r._max > wm) else wm
            pt = r._pmax if pt is None or (r._pmax is not None and r._pmax > pt) else pt
        self._chunks, self.count = ",".join(chunks), seq
        clock = s.proctime
        # the last arrival's processing time, ms (a clock never goes back)
        self.last_proctime = (epoch_ms(clock.start) + (seq - 1) * clock.step.millis if isinstance(clock, Clock) and seq
                              else pt if isinstance(clock, str) else None)

    def _scan(self, mode: str, df: DataFrame, schema: T.StructType, grids: str = "") -> DataFrame:
        from . import jvm

        s, names = self.stream, df.columns
        clock = (f"{epoch_ms(s.proctime.start)}:{s.proctime.step.millis}" if isinstance(s.proctime, Clock) else "")
        settings = {"mode": mode, "g": names.index("_g"), "p": names.index("_p") if "_p" in names else -1,
                    "clock": clock, "chunks": self._chunks, "grids": grids}
        return jvm.arrival_scan(df, ";".join(f"{k}={v}" for k, v in settings.items()), schema)

    def rows(self, columns: list, own: bool = False) -> DataFrame:
        """The source's ``columns`` and ``seq``, ``_ts`` (event time), ``_wm`` (the watermark
        the row met) and ``_pt`` (processing time), and with ``own`` ``_own`` (the watermark
        the row emits), in ms; rows in no particular order."""
        df = sparksql.select(self._prepared, *map(sparksql.name, dict.fromkeys([*columns, "_ts", *self._times])))
        long = T.LongType()
        out = self._scan("annotate", df, T.StructType(df.schema.fields + [
            T.StructField("seq", long, False), T.StructField("_wm", long), T.StructField("_pt", long)]))
        return sparksql.select(out, *map(sparksql.name, columns), "seq", "_ts", "_wm", "_pt",
                               *(["_g AS _own"] if own else []))

    def first(self, grids: dict) -> DataFrame:
        """For ``grids`` of sorted thresholds, ``{"own" | "pt" | "seq": [t, ...]}`` (of the
        watermark a row emits, of its processing time, of its seq), each chunk's first
        arrival at or above each threshold: rows ``_c`` (the grid's place in ``grids``),
        ``_i`` (the threshold's index), ``seq``, ``own``, ``before`` (the watermark it met),
        ``pt``. The JVM twin of the pass in ``kit.windows.placement.first_at_least``."""
        long = T.LongType()
        schema = T.StructType([T.StructField("_c", T.IntegerType()), T.StructField("_i", long),
                               *[T.StructField(c, long) for c in ("seq", "own", "before", "pt")]])
        return self._scan("first", self._prepared.select(*self._times), schema,
                          grids="/".join(f"{name}:{','.join(map(str, grid))}" for name, grid in grids.items()))
