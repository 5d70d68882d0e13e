"""Window functions (PyFlink's names) and how a window keeps its contents for them.

- ``ReduceFunction.reduce(a, b)``: combines two elements into one of the same shape;
  the window keeps one value (incremental).
- ``AggregateFunction``: ``create_accumulator()``, ``add(value, acc) -> acc``,
  ``get_result(acc)``, ``merge(acc_a, acc_b)``; the window keeps one accumulator.
- ``FoldFunction`` (legacy): ``fold(acc, value) -> acc`` from an initial value; not with
  merging windows.
- ``ProcessWindowFunction.process(key, context, elements) -> iterable`` and
  ``WindowFunction.apply(key, window, inputs) -> iterable`` (``ProcessAllWindowFunction`` /
  ``AllWindowFunction`` without the key, for ``window_all``): the window keeps every element,
  unless an incremental function comes first (``reduce(f, window_function=...)``), in which
  case they receive the one pre-aggregated value.

Plain Python callables work too: ``reduce(lambda a, b: ...)``, ``process(lambda key, ctx,
elements: ...)``.
"""

from __future__ import annotations

import copy

from pyspark.sql import Row
from pyspark.sql import types as T

from ..aggregate_types import long_sum, wrap
from ..errors import KitError

__all__ = ["ReduceFunction", "AggregateFunction", "FoldFunction", "ProcessWindowFunction",
           "WindowFunction", "ProcessAllWindowFunction", "AllWindowFunction", "Contents",
           "SqlAggregate", "Count", "Sum", "Min", "Max", "Avg", "Aggregates"]


class ReduceFunction:
    def reduce(self, value1, value2):
        raise NotImplementedError


class AggregateFunction:
    def create_accumulator(self):
        raise NotImplementedError

    def add(self, value, accumulator):
        raise NotImplementedError

    def get_result(self, accumulator):
        raise NotImplementedError

    def merge(self, acc_a, acc_b):
        raise KitError(f"{type(self).__name__} cannot merge accumulators (needed by merging "
                       "windows such as sessions): implement merge(acc_a, acc_b)")


class FoldFunction:
    def fold(self, accumulator, value):
        raise NotImplementedError


class ProcessWindowFunction:
    def process(self, key, context, elements):
        raise NotImplementedError

    def clear(self, context):
        pass


class WindowFunction:
    def apply(self, key, window, inputs):
        raise NotImplementedError


class ProcessAllWindowFunction:
    def process(self, context, elements):
        raise NotImplementedError

    def clear(self, context):
        pass


class AllWindowFunction:
    def apply(self, window, inputs):
        raise NotImplementedError


def _method(function, name: str, what: str):
    f = getattr(function, name, None)
    if callable(f):
        return f
    if callable(function) and not isinstance(function, type):
        return function
    raise KitError(f"{what} must be a {name}() function or an object with a {name} method; got {function!r}")


class Contents:
    """What a window keeps and what its function receives.

    ``kind``: "reduce", "aggregate", "fold" (one value per window) or "list" (every
    element). ``add(state, value)``, ``merge(a, b)`` maintain a window's state;
    ``values(state)`` is what the window function gets; ``of_elements(values)`` computes
    the same from a list of elements (the evicting path, where nothing is pre-aggregated).
    """

    def __init__(self, kind: str, function=None, initial=None):
        self.kind, self.initial = kind, initial
        if kind == "reduce":
            self._reduce = _method(function, "reduce", "reduce(function)")
        elif kind == "fold":
            self._fold = _method(function, "fold", "fold(initial, function)")
        elif kind == "aggregate":
            for name in ("create_accumulator", "add", "get_result"):
                if not callable(getattr(function, name, None)):
                    raise KitError(f"aggregate(function) needs an AggregateFunction with create_accumulator, "
                                   f"add, get_result (and merge for sessions); {function!r} has no {name}")
            self._agg = function

    @property
    def incremental(self) -> bool:
        return self.kind != "list"

    def add(self, state, value):
        if self.kind == "list":
            return (state or []) + [value]
        if self.kind == "reduce":
            return value if state is None else self._reduce(state, value)
        if self.kind == "fold":
            return self._fold(copy.deepcopy(self.initial) if state is None else state, value)
        return self._agg.add(value, self._agg.create_accumulator() if state is None else state)

    def merge(self, a, b):
        if self.kind == "list":
            return a + b
        if self.kind == "reduce":
            return self._reduce(a, b)
        if self.kind == "aggregate":
            return self._agg.merge(a, b)
        raise KitError("Fold cannot be used with a merging WindowAssigner.")

    def values(self, state) -> list:
        if self.kind == "list":
            return list(state)
        if self.kind == "aggregate":
            return [self._agg.get_result(state)]
        return [state]

    def of_elements(self, values: list) -> list:
        state = None
        for v in values:
            state = self.add(state, v)
        return [] if state is None else self.values(state)


class SqlAggregate(AggregateFunction):
    """Built-in aggregates that run both ways: as Python (the reference operator) and as a
    Spark column (the fast path). ``Count()``, ``Count("url")`` (non-NULL values), ``Sum``,
    ``Min``, ``Max``, ``Avg`` of a column; ``alias`` names the output column. Several at
    once: ``Aggregates(Count(), Max("price"))`` gives one row with both.

    >>> agg = Sum("price", alias="total")
    >>> acc = agg.add(Row(price=3), agg.add(Row(price=4), agg.create_accumulator()))
    >>> agg.get_result(acc)
    Row(total=7)
    """

    function = None

    def __init__(self, column: str | None = None, alias: str | None = None):
        if column is None and self.function != "count":
            raise KitError(f"{type(self).__name__}(column) needs the column to aggregate")
        self.column = column
        self.alias = alias or (self.function if column is None else f"{self.function}_{column}")
        self.parts = (self,)

    def create_accumulator(self):
        return [(0, None) for _ in self.parts]

    def add(self, value, accumulator):
        out = []
        for part, (n, acc) in zip(self.parts, accumulator):
            v = 1 if part.column is None else value[part.column]
            if v is None:
                out.append((n, acc))
            elif part.function == "count":
                out.append((n + 1, None))
            elif part.function in ("sum", "avg"):
                out.append((n + 1, v if acc is None else acc + v))
            else:
                pick = min if part.function == "min" else max
                out.append((n + 1, v if acc is None else pick(acc, v)))
        return out

    def merge(self, acc_a, acc_b):
        out = []
        for part, (na, a), (nb, b) in zip(self.parts, acc_a, acc_b):
            if part.function == "count":
                out.append((na + nb, None))
            elif a is None or b is None:
                out.append((na + nb, a if b is None else b))
            elif part.function in ("count", "sum", "avg"):
                out.append((na + nb, a + b))
            else:
                out.append((na + nb, (min if part.function == "min" else max)(a, b)))
        return out

    def get_result(self, accumulator):
        values = {}
        for part, (n, acc) in zip(self.parts, accumulator):
            if part.function == "count":
                values[part.alias] = n
            elif part.function == "avg":
                values[part.alias] = None if n == 0 else acc / n
            elif part.function == "sum" and isinstance(acc, int):
                values[part.alias] = wrap(acc, T.LongType())   # a BIGINT sum wraps around, as Java's long
            else:
                values[part.alias] = acc
        return Row(**values)

    def to_spark(self, schema, order, mask=None, window=None) -> list:
        """The same aggregates as Spark columns: ``[(alias, column)]``, for rows of ``schema``
        in the arrival ``order`` (a column); with ``mask`` (a boolean column) over the rows
        where it holds; with ``window``, running over it. MIN and MAX of FLOAT or DOUBLE
        compare as Python's min and max (and Flink SQL's MIN and MAX): a NaN that comes first
        stays, a later one replaces nothing -- Spark's would rank NaN above every number."""
        from pyspark.sql import functions as F

        def over(c):
            return c if window is None else c.over(window)

        out = []
        for part in self.parts:
            col = F.lit(1) if part.column is None else F.col(part.column)
            if mask is not None:
                col = F.when(mask, col)
            f = {"count": F.count, "sum": F.sum, "min": F.min, "max": F.max, "avg": F.avg}[part.function]
            if part.function in ("min", "max") and isinstance(schema[part.column].dataType,
                                                              (T.FloatType, T.DoubleType)):
                first = over(F.min_by(col, F.when(col.isNotNull(), order)))
                out.append((part.alias, F.when(F.isnan(first), first).otherwise(over(f(F.when(~F.isnan(col), col))))))
            elif part.function == "sum" and isinstance(schema[part.column].dataType, T.LongType):
                out.append((part.alias, long_sum(col, over)))   # wraps around, as Java's long (Spark's fails)
            else:
                out.append((part.alias, over(f(col))))
        return out

    def output_type(self, schema):
        """The result columns for an input ``schema``, typed as Spark types these aggregates."""
        fields = []
        for part in self.parts:
            if part.column is not None and part.column not in schema.fieldNames():
                raise KitError(f"{type(part).__name__}({part.column!r}): no such column; columns are "
                               f"{schema.fieldNames()}")
            source = None if part.column is None else schema[part.column].dataType
            if part.function in ("sum", "avg") and not isinstance(source, T.NumericType):
                raise KitError(f"{type(part).__name__}({part.column!r}) needs a numeric column; {part.column!r} "
                               f"is {source.simpleString().upper()}")
            if part.function == "count":
                dtype = T.LongType()
            elif part.function in ("min", "max"):
                dtype = source
            elif isinstance(source, T.DecimalType):
                dtype = T.DecimalType(min(38, source.precision + (10 if part.function == "sum" else 4)),
                                      source.scale + (0 if part.function == "sum" else 4))
            elif part.function == "sum" and isinstance(source, T.IntegralType):
                dtype = T.LongType()
            else:
                dtype = T.DoubleType()
            fields.append(T.StructField(part.alias, dtype, True))
        return T.StructType(fields)


class Count(SqlAggregate):
    function = "count"


class Sum(SqlAggregate):
    function = "sum"


class Min(SqlAggregate):
    function = "min"


class Max(SqlAggregate):
    function = "max"


class Avg(SqlAggregate):
    function = "avg"


class Aggregates(SqlAggregate):
    """Several built-in aggregates computed together."""

    def __init__(self, *aggregates: SqlAggregate):
        parts = [p for a in aggregates for p in getattr(a, "parts", (a,))]
        if not parts or not all(isinstance(p, SqlAggregate) for p in parts):
            raise KitError("Aggregates(...) takes Count, Sum, Min, Max or Avg aggregates")
        names = [p.alias for p in parts]
        if len(set(names)) != len(names):
            raise KitError(f"Aggregates(...) output names must differ; got {names} (use alias=)")
        self.column, self.alias, self.parts = None, None, tuple(parts)
