"""A window aggregation over a TUMBLE or HOP TVF of a stream, run by the DataStream window
operator's fast path (``kit.windows.fast``) instead of the annotated stream.

The reference (``windows.windowed``, then Spark's GROUP BY) reads ``Stream.df``, which
gives every row its watermark in a first scan, only to drop the rows late for their
window. The window operator's fast path finds, in one pass over the source rows, the first
arrival whose watermark passes each window's end, and aggregates what came before it: the
same rows, the same late rule (``window_end - 1 ms <= watermark``, each of a row's windows
judged apart), in about half the time.

It takes the query when it is exactly this shape, else the reference runs it::

    SELECT <group columns, window_start, window_end, window_time, aggregates>
    FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(<s's event time>), size [, offset])) [alias]
         (or HOP(TABLE s, DESCRIPTOR(...), slide, size [, offset]): size a multiple of slide)
    GROUP BY <columns of s>, window_start, window_end [, window_time]
    [ORDER BY <output columns>] [LIMIT n]

with aggregates ``COUNT(*)``, ``COUNT(c)``, ``SUM(c)``, ``AVG(c)`` of a numeric column,
and ``MIN(c)``/``MAX(c)`` of a column that is not FLOAT or DOUBLE (Spark's MIN ranks NaN
above every number, the window operator's keeps the first NaN as Flink does: the two
would differ). SUM and AVG come out at Flink's types (``kit.aggregate_types``), from the
operator's SUM and COUNT as the reference's from Spark's. ``s`` is a ``kit.Stream`` without a processing-time clock whose columns have
no names of its own (``seq``, ``watermark``...). The output's names and types are the
reference's: the same query planned over no rows gives them.

    user  cTime     ->  user  window_start  window_end  cnt
    Mary  12:00:01      Mary  12:00         12:01       2
    Mary  12:00:30
    Bob   12:01:05      Bob   12:01         12:02       1

Over a live stream (``kit.live``) the same shape, grouped by a column besides the window
and without ORDER BY or LIMIT, runs as that window live (``kit.sql.live.LiveWindowTable``).

``late_rows`` holds the rows dropped as late with their window, as the reference gives
them, from the stream's rows annotated when read (``Stream.deferred_df``), planned when
first read: a query whose late rows are not read makes no pass for them, and no plan
(~0.15 s of py4j calls).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from .. import sparksql
from ..aggregate_types import avg_of_sql, sum_of_sql
from ..time import Duration
from ..windows import fast
from ..windows.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from ..windows.datastream import DataStream, WindowWarning
from ..windows.functions import Aggregates, Avg, Count, Max, Min, Sum
from .statement import Statement
from .windows import find_windows, windowed

__all__ = ["WindowShape", "window_aggregate", "window_shape"]

_WINDOW = ("window_start", "window_end", "window_time")
_FUNCTIONS = {exp.Count: Count, exp.Sum: Sum, exp.Avg: Avg, exp.Min: Min, exp.Max: Max}
_ORDERED = (T.IntegralType, T.DecimalType, T.StringType, T.DateType, T.TimestampType, T.TimestampNTZType)


@dataclass
class WindowShape:
    """A window aggregation of the module doc's shape, read: the stream's table ``name``, its
    ``WindowCall``, the GROUP BY ``keys`` besides the window, each SELECT item's ``pick`` (a
    grouped column's name or a ``_Call``), the ``parts`` (the window operator's aggregates
    the calls read), the output ``schema`` (the reference's), ``order`` (Spark sort columns) and
    ``limit`` (None: none)."""
    name: str
    call: object
    keys: list
    picks: list
    parts: list
    schema: T.StructType
    order: list
    limit: int | None

    @property
    def assigner(self):
        """The DataStream window assigner of the TVF."""
        call = self.call
        size, offset = Duration(call.sizes["size"]), Duration(call.offset)
        if call.kind == "TUMBLE":
            return TumblingEventTimeWindows.of(size, offset)
        return SlidingEventTimeWindows.of(size, Duration(call.sizes["slide"]), offset)

    def project(self, fired: DataFrame, integral: bool) -> DataFrame:
        """The window operator's firings ``fired`` (``WindowResult.df``'s columns) as the query's
        rows; ``integral``: the time column is BIGINT (the window bounds are too)."""
        end_ms = F.col("window_end") if integral else F.unix_millis(F.col("window_end"))
        columns = []
        for pick, field in zip(self.picks, self.schema.fields):
            if isinstance(pick, str) and pick in self.keys:
                value = F.col("key") if len(self.keys) == 1 else F.col("key")[pick]
            elif pick == "window_time":
                value = F.timestamp_millis(end_ms - 1)
            elif isinstance(pick, str):
                value = F.col(pick)
            else:
                value = pick.value()
            columns.append(value.cast(field.dataType).alias(field.name))
        return fired.select(*columns)


def window_shape(statement: Statement, tables: dict, accepts, probe) -> WindowShape | None:
    """The query as the module doc's shape over a stream of ``tables`` that ``accepts(stream)``
    and whose event time the TVF reads, or None; ``probe(name)`` gives the query's output
    schema with table ``name`` empty."""
    tree = statement.tree
    if not isinstance(tree, exp.Select) or \
            {k for k, v in tree.args.items() if v} - {"expressions", "from_", "group", "order", "limit"}:
        return None
    found = find_windows(statement)
    if len(found) != 1:
        return None
    (_, call), = found.values()
    source = tree.args["from_"].this
    name = next((n for n in tables if n.lower() == call.table.lower()), None)
    stream = tables.get(name)
    step = call.sizes.get("slide", call.sizes.get("size"))
    if call.kind not in ("TUMBLE", "HOP") or call.node is not source or abs(call.offset) >= step \
            or stream is None or not accepts(stream) or call.time != stream.time:
        return None
    alias = source.alias

    def column(node) -> str | None:
        """The name of a column written bare or after the TVF's alias."""
        if isinstance(node, exp.Column) and not node.args.get("db") and node.table in ("", alias):
            return node.name
        return None

    schema = stream.source.schema
    group = tree.args.get("group")
    grouped = [column(e) for e in group.expressions] if group else [None]
    if None in grouped or {k for k, v in group.args.items() if v} != {"expressions"} \
            or not {"window_start", "window_end"} <= set(grouped):
        return None
    keys = list(dict.fromkeys(c for c in grouped if c not in _WINDOW))
    if any(k not in schema.names for k in keys):
        return None
    picks, parts = [], []
    for item in tree.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if column(node) is not None and column(node) in grouped:
            picks.append(column(node))
        elif (agg := _call(node, schema, f"kit_a{len(picks)}")) is not None:
            parts.extend(agg.parts)
            picks.append(agg)
        else:
            return None
    if not parts:
        return None
    shape = probe(name)   # the reference's names and types
    order = _order(tree.args.get("order"), shape.names)
    limit = tree.args.get("limit")
    if order is None or (limit is not None and not (isinstance(limit.expression, exp.Literal)
                                                     and limit.expression.is_int)):
        return None
    return WindowShape(name, call, keys, picks, parts, shape, order,
                       None if limit is None else int(limit.expression.this))


def window_aggregate(statement: Statement, tables: dict, probe) -> DataFrame | None:
    """The query's result through the window operator, or None when it is not the module
    doc's shape; ``probe(name, frame)`` runs the query over ``frame`` as table ``name``."""
    def accepts(stream) -> bool:
        return isinstance(stream, DataStream) and stream.proctime is None and all(
            c == shown for c, shown in stream.kit_columns.items())

    shape = window_shape(statement, tables, accepts, lambda name: probe(name, tables[name].source.limit(0)).schema)
    if shape is None:
        return None
    stream = tables[shape.name]
    with warnings.catch_warnings():   # a window over the whole stream runs in one task in Flink too
        warnings.simplefilter("ignore", WindowWarning)
        windows = stream.key_by(*shape.keys).window(shape.assigner) if shape.keys else \
            stream.window_all(shape.assigner)
        result = windows.aggregate(Aggregates(*shape.parts))
    integral = isinstance(stream.source.schema[shape.call.time].dataType, T.IntegralType)
    out = shape.project(result.df, integral)
    out = out.orderBy(*shape.order) if shape.order else out
    out = out.limit(shape.limit) if shape.limit is not None else out
    out = sparksql.made_when_read(   # the reference's
        out, late_rows=lambda: windowed(stream.deferred_df(), shape.call, drop_late=True)[1])
    return fast.holding(out, result)


@dataclass
class _Call:
    """An aggregate of the SELECT list as the window operator's ``parts`` (AVG: a SUM and a
    COUNT) of a column of type ``dtype`` (None: ``COUNT(*)``)."""
    function: str
    dtype: T.DataType | None
    parts: list

    def value(self):
        """The call's value (Flink's, at Flink's type) from the operator's output columns."""
        first = self.parts[0].alias
        if self.function == "count":
            return F.coalesce(F.col(first), F.lit(0))     # never NULL
        if self.function == "avg":
            return F.expr(avg_of_sql(sparksql.name(first), sparksql.name(self.parts[1].alias), self.dtype))
        if self.function == "sum":
            return F.expr(sum_of_sql(sparksql.name(first), self.dtype))
        return F.col(first)


def _call(node, schema: T.StructType, alias: str) -> _Call | None:
    """The window operator's parts for ``COUNT(*)`` or ``FUNCTION(column)``, or None."""
    function = _FUNCTIONS.get(type(node))
    arg = node.this
    if function is None or node.expressions or any(k not in ("this", "big_int") and v for k, v in node.args.items()):
        return None
    if function is Count and isinstance(arg, exp.Star):
        return _Call("count", None, [Count(alias=alias)])
    if not isinstance(arg, exp.Column) or arg.table or arg.name not in schema.names:
        return None
    dtype = schema[arg.name].dataType
    fits = (isinstance(dtype, T.NumericType) if function in (Sum, Avg)
            else isinstance(dtype, _ORDERED) if function in (Min, Max) else True)
    if not fits:
        return None
    if function is Avg:
        return _Call("avg", dtype, [Sum(arg.name, alias=f"{alias}_s"), Count(arg.name, alias=f"{alias}_n")])
    return _Call(function.function, dtype, [function(arg.name, alias=alias)])


def _order(order, names: list) -> list | None:
    """ORDER BY over output columns as Spark sort columns ([] for none), or None."""
    if order is None:
        return []
    out = []
    for ordered in order.expressions:
        c = ordered.this
        if not isinstance(c, exp.Column) or c.table or names.count(c.name) != 1:
            return None
        desc, first = bool(ordered.args.get("desc")), ordered.args.get("nulls_first")
        first = not desc if first is None else first   # Spark's default: NULLs are the smallest
        col = F.col(c.name)
        out.append((col.desc_nulls_first() if first else col.desc_nulls_last()) if desc
                   else (col.asc_nulls_first() if first else col.asc_nulls_last()))
    return out
