"""``expect(actual, expected, what)``: the checks that keep a notebook honest, out of its way.

A notebook's example cell shows the example and its result; the check cell after it (its
source collapsed in JupyterLab, tagged ``check``) compares the result with what the
documentation or real Flink says::

    from kit.expect import expect

    expect(rows(hourly_counts, "key", "window_start", "clicks"),
           [("Bob", "12:00", 1), ("Bob", "13:00", 1)], "hourly clicks per user")

It prints nothing when they agree. When they differ it raises :class:`ExpectationFailed`
(an ``AssertionError``, so nbval, pytest and ``make demo`` report a failed cell) naming
``what``, with both values and where they first differ.

Equality is Python's ``==`` with three differences, so that a check says what it means:

- a Spark DataFrame is compared as pandas (``toPandas()``); two pandas DataFrames are equal
  when their column names are, in order, and their values are cell for cell (as objects:
  ``Timestamp("2011-04-01 10:00:04")`` equals itself, ``14.5`` equals ``14.5``);
- NaN equals NaN (pandas gives NaN for a missing number);
- a comparison that does not give one ``True`` or ``False`` (numpy arrays, pandas Series)
  is a ``TypeError``: compare lists or scalars, so a check cannot pass by accident.

>>> expect(sorted({3, 1, 2}), [1, 2, 3], "sorted")
>>> expect([("Mary", 3), ("Bob", 1)], [("Mary", 3), ("Bob", 2)], "clicks per user")
Traceback (most recent call last):
...
kit.expect.ExpectationFailed: clicks per user: item 1 differs: got ('Bob', 1), expected ('Bob', 2)
    got      [('Mary', 3), ('Bob', 1)]
    expected [('Mary', 3), ('Bob', 2)]
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ExpectationFailed", "expect"]

_LONG = 300  # characters of a value shown in a failure


class ExpectationFailed(AssertionError):
    """A notebook's result differs from what the documentation or Flink says."""


def expect(actual: Any, expected: Any, what: str = "") -> None:
    """Raise :class:`ExpectationFailed` unless ``actual`` equals ``expected`` (see the module)."""
    actual, expected = _comparable(actual), _comparable(expected)
    difference = _difference(actual, expected)
    if difference is None:
        return
    head = f"{what}: {difference}" if what else difference
    raise ExpectationFailed(f"{head}\n    got      {_short(actual)}\n    expected {_short(expected)}")


def _comparable(value: Any) -> Any:
    if type(value).__module__.startswith("pyspark.sql") and hasattr(value, "toPandas"):
        return value.toPandas()
    return value


def _is_frame(value: Any) -> bool:
    return type(value).__name__ == "DataFrame" and hasattr(value, "columns") and hasattr(value, "values")


def _difference(actual: Any, expected: Any) -> str | None:
    """None when equal, else where they first differ."""
    if _is_frame(actual) or _is_frame(expected):
        if not (_is_frame(actual) and _is_frame(expected)):
            return f"a {type(actual).__name__} compared with a {type(expected).__name__}"
        got, want = list(actual.columns), list(expected.columns)
        if got != want:
            return f"columns {got}, expected {want}"
        rows, wanted = actual.astype(object).values.tolist(), expected.astype(object).values.tolist()
        where = _difference(rows, wanted)
        return None if where is None else where.replace("item", "row", 1).replace("items", "rows", 1)
    if _equal(actual, expected):
        return None
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)) \
            and type(actual) is type(expected):
        for i, (a, e) in enumerate(zip(actual, expected)):
            if not _equal(a, e):
                return f"item {i} differs: got {_short(a)}, expected {_short(e)}"
        return f"{len(actual)} items, expected {len(expected)}"
    if isinstance(actual, (set, frozenset)) and isinstance(expected, (set, frozenset)):
        extra, missing = actual - expected, expected - actual
        parts = ([f"unexpected {_short(sorted(extra, key=repr))}"] if extra else []) + \
                ([f"missing {_short(sorted(missing, key=repr))}"] if missing else [])
        return ", ".join(parts)
    if isinstance(actual, dict) and isinstance(expected, dict):
        for key in list(expected) + [k for k in actual if k not in expected]:
            if key not in actual:
                return f"key {key!r} missing"
            if key not in expected:
                return f"unexpected key {key!r}"
            if not _equal(actual[key], expected[key]):
                return f"at key {key!r}: got {_short(actual[key])}, expected {_short(expected[key])}"
    return "values differ"


def _equal(a: Any, b: Any) -> bool:
    missing = _missing(a)
    if missing or _missing(b):
        return missing == _missing(b)
    if type(a) in (list, tuple) and type(a) is type(b):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    same = a == b
    if isinstance(same, bool):
        return same
    if type(same).__name__ in ("bool_", "bool"):   # a numpy scalar's answer
        return bool(same)
    raise TypeError(f"expect: comparing {type(a).__name__} with {type(b).__name__} gives a "
                    f"{type(same).__name__}, not True or False; compare lists or scalars "
                    "(e.g. list(series)) so that the check means one thing")


def _missing(value: Any) -> str:
    """"nan", "NaT" or "NA" for pandas' and numpy's missing values (each equals itself
    only), "" for anything else (None is compared as itself)."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    name = type(value).__name__
    if name == "NaTType":
        return "NaT"
    if name == "NAType":
        return "NA"
    if name in ("datetime64", "timedelta64") and str(value) == "NaT":
        return "NaT"
    return ""


def _short(value: Any) -> str:
    text = repr(value)
    if _is_frame(value):
        text = "\n" + value.to_string(max_rows=20)
        return text.replace("\n", "\n        ")
    return text if len(text) <= _LONG else text[:_LONG] + "…"
