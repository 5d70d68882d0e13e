"""Arrow in and out of the operators that run Python per key (``kit.replay.keyed``).

The replay driver runs one ``mapInArrow`` per task (``map_in_arrow``, which takes any column
name): the task's rows arrive sorted by the keys, ``groups`` splits them into runs of equal
keys, ``python_values`` gives a column as plain Python values, and ``column`` turns the
values an operator produced back into an Arrow column of the output's Spark type.

>>> import pyarrow as pa
>>> groups(pa.table({"k": ["a", "a", None, None, "b"]}), ["k"])
[(0, 2), (2, 2), (4, 1)]
>>> groups(pa.table({"x": [1.0, None, float("nan"), float("nan")]}), ["x"])
[(0, 1), (1, 1), (2, 2)]
>>> python_values(pa.chunked_array([pa.array([1, None], pa.int64())]))
[1, None]
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

__all__ = ["groups", "python_values", "column", "map_in_arrow", "unquoted"]


def map_in_arrow(df, function, schema):
    """``df.mapInArrow(function, schema)`` for columns of any name (see ``unquoted``):
    ``function`` sees them under their own names."""
    inner, names = unquoted(df)
    if inner is df:
        return df.mapInArrow(function, schema)

    def named(batches):
        return function(pa.RecordBatch.from_arrays(b.columns, names=names) for b in batches)

    return inner.mapInArrow(named, schema)


def unquoted(df):
    """``df`` with each column whose name has a backtick renamed ``_kit_in<position>``, and
    its names: PySpark's ``mapInArrow`` and ``applyInPandas`` resolve each input column by
    its name unquoted, so a name like `` a`b `` fails there."""
    names = df.columns
    if not any("`" in n for n in names):
        return df, names
    return df.toDF(*(f"_kit_in{i}" if "`" in n else n for i, n in enumerate(names))), names


def groups(table: pa.Table, keys: list) -> list:
    """``(start, length)`` of each run of equal ``keys`` in ``table`` (sorted by them); NULLs
    equal NULLs and NaN equals NaN, as in Spark's GROUP BY. No keys: one run."""
    n = table.num_rows
    if n == 0:
        return []
    change = np.zeros(n - 1, dtype=bool)
    for key in keys:
        col = table.column(key)
        a, b = col.slice(1), col.slice(0, n - 1)
        differ = pc.fill_null(pc.not_equal(a, b), False)
        if pa.types.is_floating(col.type):   # (is_nan of a NULL is NULL: a NULL beside a number differs, below)
            differ = pc.and_(differ, pc.invert(pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False)))
        differ = pc.or_(differ, pc.xor(a.is_null(), b.is_null()))
        change |= differ.to_numpy(zero_copy_only=False)
    bounds = np.concatenate([[0], np.flatnonzero(change) + 1, [n]]).tolist()
    return [(s, e - s) for s, e in zip(bounds, bounds[1:])]


def python_values(col: pa.ChunkedArray) -> list:
    """A column as plain Python values: NULL is None, integers stay exact, timestamps are
    naive ``datetime``s in UTC (the session time zone), as Spark's ``Row``s give them."""
    if pa.types.is_timestamp(col.type) and col.type.tz is not None:
        col = col.cast(pa.timestamp(col.type.unit))
    return col.to_pylist()


def column(values: list, dtype: T.DataType, arrow: pa.DataType, nan_is_null: bool = True) -> pa.Array:
    """Python values as an Arrow column of ``dtype`` (integers truncate like Java; NaN ->
    NULL, unless ``nan_is_null`` is False: then a NaN in a FLOAT or DOUBLE column stays, as
    Flink keeps it; integers in a TIMESTAMP column are epoch milliseconds)."""
    if isinstance(dtype, T.IntegralType):
        values = [None if v is None or v != v else int(v) for v in values]
    elif isinstance(dtype, (T.FloatType, T.DoubleType)):
        values = [None if v is None or (nan_is_null and v != v) else float(v) for v in values]
    elif isinstance(dtype, T.TimestampType):
        if all(v is None or type(v) is int for v in values):   # epoch ms, converted at once
            return pa.array(values, pa.int64()).cast(pa.timestamp("ms")).cast(arrow)
        if all(v is None or isinstance(v, np.datetime64) for v in values):   # numpy's, converted at once
            return pa.array(np.array(values, dtype="datetime64[us]"), from_pandas=True).cast(arrow)
        values = [_datetime(v) for v in values]   # datetimes, not pandas: years 1 to 9999
    return pa.array(values, type=arrow)


_EPOCH = datetime(1970, 1, 1)


def _datetime(v):
    """A TIMESTAMP value (datetime, pandas or numpy timestamp, epoch ms) as a datetime."""
    if v is None or v is pd.NaT:
        return None
    if isinstance(v, (int, np.integer)):
        return _EPOCH + timedelta(milliseconds=int(v))
    if isinstance(v, np.datetime64):
        return None if np.isnat(v) else v.astype("datetime64[us]").item()
    return v
