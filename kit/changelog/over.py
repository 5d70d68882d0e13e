"""Flink's OVER aggregate ordered by a non-time column (``StreamExecOverAggregate``,
``NON_TIME``): ``f(...) OVER (PARTITION BY p ORDER BY s)`` with no Top-N filter, over an
insert-only or updating changelog, every frame ``UNBOUNDED PRECEDING AND CURRENT ROW``.

Flink 2.3 keeps, per partition key, the rows sorted by ``s`` (ties in arrival order) and an
accumulator per sort key (``RANGE``: ``NonTimeRangeUnboundedPrecedingFunction``) or per row
(``ROWS``: ``NonTimeRowsUnboundedPrecedingFunction``), and for each input message emits
(``old``/``new``: the aggregates before/after it; ``-U`` only when ``Options.update_before``):

=====================  ========================================  ===========================
input                  RANGE (rows of equal ``s`` share a value)  ROWS (a value per row)
=====================  ========================================  ===========================
``+I``/``+U``, new     the row with its kind (``+I`` or a lone      the same
``s``                  ``+U``) and ``new``
``+I``/``+U``, an      ``-U old, +U new`` for each earlier row of   the row with its kind and
``s`` already there    its ``s``, then the row; only the row when   ``new``
                       its ``s``'s accumulator did not change
``-U``/``-D``          ``-D`` the row with ``old`` (whatever its    ``-D`` the row with ``old``,
                       kind), ``-U/+U`` each other row of its       ``-U/+U`` each later row of
                       ``s`` (none when unchanged)                  its ``s`` until one is
                                                                    unchanged
then                   ``-U old, +U new`` for each row of each      ``-U/+U`` each later row,
                       later ``s``, until an ``s`` whose            until one whose value is
                       accumulator did not change                   unchanged
=====================  ========================================  ===========================

A retraction that matches no row emits nothing. Every output carries the ``seq``/``_pt`` of
the message that caused it and ``_n = input _n + [j]``, ``j`` its place in Flink's order.

Aggregates, with Flink's accumulators (the early stops above compare them): ``ROW_NUMBER``
(ROWS), ``RANK`` and ``DENSE_RANK`` (RANGE), ``COUNT``, ``SUM``, ``MIN``, ``MAX``, ``AVG``.
Flink's streaming planner gives ``RANK(*)``/``DENSE_RANK(*)`` no operands, so their "same
order key as the row before" test is always false: both count the rows so far, which under
RANGE is the number of rows with ``s <=`` the row's -- SQL's ``RANK`` only without ties (the
seed's two users tied at 12:00 are both ranked 2). Flink plans ``SUM(x)`` of a nullable ``x``
as ``COUNT(x)`` and ``$SUM0(x)`` (NULL at count 0) and ``AVG(x)`` as their quotient: a 0 (not
a NULL) joining a sort key changes the accumulator, so its peers get ``-U/+U`` with the same
SUM. Types and values are Flink's (``types.json``): counts and ranks BIGINT, MIN/MAX the
column's type, SUM and AVG ``kit.aggregate_types.result_type``'s. A SUM of integers wraps around
in its type, a FLOAT one adds in FLOAT; an AVG is Flink's ``$SUM0 / COUNT`` in the SUM's
type (of integers: the wrapped sum divided, truncated toward zero; of DECIMAL(p, s): the
quotient rounded HALF_UP to scale ``max(6, s)``). The output is the input's columns and one per call; changelog mode ``[I,UB,UA,D]`` as
Flink's EXPLAIN says, whatever the input; the upsert key is the input's.
Flink refuses a DESC order and more than one order column; so does ``over_aggregate``.
A state TTL (``Options.ttl_ms``; Flink's ``KeyedProcessFunctionWithCleanupState`` with
minimum = maximum = the TTL, on above 1 ms) forgets a partition whole once the TTL passed
since its last message, with no retraction (``kit.changelog.replay.Function``).

    seq  _op  user  t        over_aggregate(log, [], [("t", True, True)], [("RANK", None, "r")], "RANGE", o)
    0    +I   Mary  12:00    seq  _op  user  t      r
    1    +I   Bob   12:00    0    +I   Mary  12:00  1
                             1    -U   Mary  12:00  1
                             1    +U   Mary  12:00  2
                             1    +I   Bob   12:00  2
"""

from __future__ import annotations

from bisect import bisect_left
from decimal import Decimal, localcontext
from functools import partial

import numpy as np
from pyspark.sql import types as T

from ..errors import KitError
from ..aggregate_types import result_type
from . import ADDS, ALL, DELETE, UPDATE_AFTER, UPDATE_BEFORE, Changelog, Options
from ..aggregate_types import EXACT, exact_average, wrap
from .rank import SortedKeys, SortKeys
from .replay import check_columns, expirations, replay_per_key

__all__ = ["over_aggregate", "NonTimeRangeUnboundedPrecedingFunction",
           "NonTimeRowsUnboundedPrecedingFunction", "FUNCTIONS"]

FUNCTIONS = ("ROW_NUMBER", "RANK", "DENSE_RANK", "COUNT", "SUM", "MIN", "MAX", "AVG")
FRAMES = {"ROWS": ("ROW_NUMBER", "COUNT", "SUM", "MIN", "MAX", "AVG"),
          "RANGE": ("RANK", "DENSE_RANK", "COUNT", "SUM", "MIN", "MAX", "AVG")}


# ---------------------------------------------------------------- Flink's accumulators

def _count(acc, x):
    return acc + 1


def _count_value(acc, x):
    return acc + (x is not None)


def _sum(acc, x):
    return acc if x is None else x if acc is None else acc + x


def _sum0(acc, x):
    """Flink's ``COUNT(x)`` and ``$SUM0(x)``, its rewrite of ``SUM(x)`` of a nullable ``x``
    and of ``AVG(x)`` (a Calc after the OverAggregate divides, or gives NULL at count 0)."""
    return acc if x is None else (acc[0] + 1, acc[1] + x)


def _min(acc, x):
    return acc if x is None else x if acc is None or x < acc else acc


def _max(acc, x):
    return acc if x is None else x if acc is None or x > acc else acc


_ACCUMULATE = {"ROW_NUMBER": (0, _count), "RANK": (0, _count), "DENSE_RANK": (0, _count),
               "COUNT": (0, _count_value), "SUM": (None, _sum), "MIN": (None, _min),
               "MAX": (None, _max), "SUM0": ((0, 0), _sum0), "AVG": ((0, 0), _sum0)}


class _Aggs:
    """Flink's generated ``AggsHandleFunction`` for the calls: an accumulator is a tuple (one
    entry per call, compared as Flink compares accumulator rows), ``value`` the output.
    ``types``: each call's argument type (None: none, or Python's arithmetic), for SUM and
    AVG in Flink's (module doc)."""

    def __init__(self, calls: list, at: list, types: list | None = None):
        self.at = at                                     # argument index per call (None: *)
        self.init = tuple(_ACCUMULATE[f][0] for f, _, _ in calls)
        self.types = types or [None] * len(calls)
        self.outs = [_output_type(f, t) if f == "AVG" and t is not None else None   # (on the driver: Spark parses it)
                     for (f, _, _), t in zip(calls, self.types)]
        self.steps = [_count if a is None else _in_type(_ACCUMULATE[f][1], t) if f in _SUMS else _ACCUMULATE[f][1]
                      for (f, a, _), t in zip(calls, self.types)]
        self.functions = [f for f, _, _ in calls]

    def accumulate(self, acc: tuple, values: tuple) -> tuple:
        return tuple(step(a, None if i is None else values[i]) for step, a, i in zip(self.steps, acc, self.at))

    def value(self, acc: tuple) -> tuple:
        return tuple(_value(f, a, t, out) for f, a, t, out in zip(self.functions, acc, self.types, self.outs))


_SUMS = ("SUM", "SUM0", "AVG")


def _in_type(step, dtype):
    """A SUM's ``step`` in Flink's arithmetic for ``dtype``: integers wrapped around to its
    width, a FLOAT added in FLOAT, decimals exactly (a ``partial``: the live driver pickles it)."""
    if isinstance(dtype, T.FloatType):
        return partial(_in_float, step)
    if isinstance(dtype, T.DecimalType):
        return partial(_exactly, step)
    if isinstance(dtype, T.IntegralType):
        return partial(_wrapped, step, dtype)
    return step


def _in_float(step, acc, x):
    return step(acc, None if x is None else np.float32(x))


def _exactly(step, acc, x):
    with localcontext(EXACT):
        return step(acc, x)


def _wrapped(step, dtype, acc, x):
    acc = step(acc, x)
    return (acc[0], wrap(acc[1], dtype)) if isinstance(acc, tuple) else None if acc is None else wrap(acc, dtype)


def _value(function: str, acc, dtype, out):
    """A call's output from its accumulator: a SUM (of nullable values: ``SUM0``, NULL at
    count 0) or an AVG (``$SUM0 / COUNT`` in the SUM's type, its output type ``out``) as
    Flink computes them."""
    if function in ("SUM0", "AVG"):
        n, total = acc
        if not n:
            return None
        if function == "SUM0":
            return float(total) if isinstance(dtype, T.FloatType) else total
        if isinstance(dtype, (T.IntegralType, T.DecimalType)):
            return exact_average(Decimal(total) if isinstance(dtype, T.DecimalType) else total, n, out)
        if isinstance(dtype, T.FloatType):
            return float(total / np.float32(n))
        return total / n
    if function == "SUM" and isinstance(dtype, T.FloatType) and acc is not None:
        return float(acc)
    return acc


# ---------------------------------------------------------------- Flink's functions

class _NonTimeUnboundedPrecedingOver(SortedKeys):
    """Flink's ``AbstractNonTimeUnboundedPrecedingOver``: the partition's sort keys in order
    (``keys``) and, per key, its rows in arrival order (``rows``). ``process`` takes one
    message and returns its outputs ``(kind, row, values of the calls)``."""

    def __init__(self, sort_at: list, directions: list, aggs: _Aggs, update_before: bool):
        self.sort_at, self.aggs, self.update_before = sort_at, aggs, update_before
        self.key = SortKeys(directions)
        self.keys, self.rows, self.out = [], [], []

    def _find(self, row) -> tuple:
        k = self.key(tuple(row.values[i] for i in self.sort_at))
        i = bisect_left(self.keys, k)
        return k, i, i < len(self.keys) and self.keys[i] == k

    def process(self, kind, row, pt=None) -> list:
        self.out = []
        (self.insert if kind in ADDS else self.remove)(kind, row)
        return self.out

    def collect(self, kind, row, acc):
        if kind != UPDATE_BEFORE or self.update_before:
            self.out.append((kind, row, self.aggs.value(acc)))

    def updated(self, row, old, new):
        self.collect(UPDATE_BEFORE, row, old)
        self.collect(UPDATE_AFTER, row, new)

    def fold(self, acc, rows):
        for r in rows:
            acc = self.aggs.accumulate(acc, r.values)
        return acc


class NonTimeRangeUnboundedPrecedingFunction(_NonTimeUnboundedPrecedingOver):
    """RANGE: one accumulator per sort key (``accs``), that of every row up to that key."""

    def __init__(self, *args):
        super().__init__(*args)
        self.accs = []

    def _before(self, i):
        return self.accs[i - 1] if i > 0 else self.aggs.init

    def insert(self, kind, row):
        k, i, found = self._find(row)
        if not found:
            self.keys.insert(i, k)
            self.rows.insert(i, [row])
            acc = self.aggs.accumulate(self._before(i), row.values)
            self.collect(kind, row, acc)
            self.accs.insert(i, acc)
        else:
            self.rows[i].append(row)
            acc = self.fold(self._before(i), self.rows[i])
            self._emit_updates_for_ids(self.rows[i], len(self.rows[i]) - 1, self.accs[i], acc, kind, row)
            self.accs[i] = acc
        self._process_remaining(i + 1, acc)

    def remove(self, kind, row):
        _, i, found = self._find(row)
        if not found:
            return
        rows, acc, at = self.rows[i], self._before(i), -1
        for j, r in enumerate(rows):   # every equal row is left out; the last one is removed
            if r.values == row.values:
                at = j
            else:
                acc = self.aggs.accumulate(acc, r.values)
        if at < 0:
            return
        self._emit_updates_for_ids(rows, at, self.accs[i], acc, DELETE, row)
        del rows[at]
        if rows:
            self.accs[i] = acc
            i += 1
        else:
            del self.keys[i], self.rows[i], self.accs[i]
        self._process_remaining(i, acc)

    def _emit_updates_for_ids(self, rows, changed, old, new, kind, row):
        if old != new:
            for j, r in enumerate(rows):
                if j != changed:
                    self.updated(r, old, new)
                else:
                    self.collect(kind, row, old if kind == DELETE else new)
        else:
            self.collect(kind, row, old if kind == DELETE else new)

    def _process_remaining(self, start, acc):
        for i in range(start, len(self.keys)):
            acc = self.fold(acc, self.rows[i])
            if acc == self.accs[i]:
                return
            for r in self.rows[i]:
                self.updated(r, self.accs[i], acc)
            self.accs[i] = acc


class NonTimeRowsUnboundedPrecedingFunction(_NonTimeUnboundedPrecedingOver):
    """ROWS: one accumulator per row (``accs[i][j]``: that of the rows up to ``rows[i][j]``).
    Flink compares a row's new value with its stored accumulator; for the functions allowed
    here both are the same tuple."""

    def __init__(self, *args):
        super().__init__(*args)
        self.accs = []

    def _before(self, i, j):
        if j > 0:
            return self.accs[i][j - 1]
        return self.accs[i - 1][-1] if i > 0 else self.aggs.init

    def insert(self, kind, row):
        k, i, found = self._find(row)
        if not found:
            self.keys.insert(i, k)
            self.rows.insert(i, [])
            self.accs.insert(i, [])
        acc = self.aggs.accumulate(self._before(i, len(self.rows[i])), row.values)
        self.rows[i].append(row)
        self.accs[i].append(acc)
        self.collect(kind, row, acc)
        self._process_remaining(i + 1, acc)

    def remove(self, kind, row):
        _, i, found = self._find(row)
        if not found:
            return
        rows, accs = self.rows[i], self.accs[i]
        at = next((j for j, r in enumerate(rows) if r.values == row.values), -1)
        if at < 0:
            return
        acc = self._before(i, at)
        self.collect(DELETE, rows[at], accs[at])
        for j in range(at + 1, len(rows)):
            acc = self.aggs.accumulate(acc, rows[j].values)
            if acc == accs[j]:
                break   # Flink goes on with the next keys from this accumulator
            self.updated(rows[j], accs[j], acc)
            accs[j] = acc
        del rows[at], accs[at]
        if rows:
            i += 1
        else:
            del self.keys[i], self.rows[i], self.accs[i]
        self._process_remaining(i, acc)

    def _process_remaining(self, start, acc):
        for i in range(start, len(self.keys)):
            for j, r in enumerate(self.rows[i]):
                acc = self.aggs.accumulate(acc, r.values)
                if acc == self.accs[i][j]:
                    return
                self.updated(r, self.accs[i][j], acc)
                self.accs[i][j] = acc


# ---------------------------------------------------------------- the operator

def _output_type(function: str, arg_type):
    """Flink's type of an OVER call's output (module doc)."""
    if function in ("ROW_NUMBER", "RANK", "DENSE_RANK", "COUNT"):
        return T.LongType()
    if function in ("MIN", "MAX"):
        return arg_type
    return T._parse_datatype_string(result_type(function, arg_type))


def _check(log, partition, order, calls, frame, options):
    """A KitError, with Flink's message where Flink has one, for what cannot run."""
    check_columns(log, list(partition) + [c for c, _, _ in order]
                   + [a for _, a, _ in calls if a is not None], "OVER")
    if len(order) != 1:
        raise KitError("The window can only be ordered by a single time column. (Flink: an OVER "
                       f"window without a time attribute is ordered by exactly one column; got {len(order)})")
    if not order[0][1]:
        raise KitError("The window can only be ordered in ASCENDING mode. (Flink: order the OVER "
                       f"window by {order[0][0]} ASC, or keep a Top-N filter on the rank for DESC)")
    if frame not in FRAMES:
        raise KitError(f"frame must be 'ROWS' or 'RANGE', not {frame!r}")
    types = {f.name: f.dataType for f in log.df.schema.fields}
    names = set(log.columns)
    for function, arg, name in calls:
        if function not in FUNCTIONS:
            raise KitError(f"{function} is not an OVER aggregate here: one of {FUNCTIONS}")
        if function not in FRAMES[frame]:
            other = "RANGE" if frame == "ROWS" else "ROWS"
            raise KitError(f"{function} runs over {other}, not {frame} (Calcite's frame for it): "
                           f"pass frame={other!r} or leave {function} out")
        if arg is not None and function in ("ROW_NUMBER", "RANK", "DENSE_RANK"):
            raise KitError(f"{function}({arg}) AS {name}: {function} takes no argument: pass None")
        if arg is None and function not in ("ROW_NUMBER", "RANK", "DENSE_RANK", "COUNT"):
            raise KitError(f"{function}() AS {name}: give the column it aggregates")
        if function in ("SUM", "AVG") and not isinstance(types[arg], T.NumericType):
            raise KitError(f"{function}({arg}) needs a numeric column; {arg} is {types[arg].simpleString()}")
        if name in names:
            raise KitError(f"the OVER output column {name!r} is already a column: name it otherwise")
        names.add(name)
    return types


def over_aggregate(log: Changelog, partition: list[str], order: list[tuple[str, bool, bool]],
                   calls: list[tuple[str, str | None, str]], frame: str, options: Options,
                   not_null: frozenset = frozenset()) -> Changelog:
    """``calls`` ``OVER (PARTITION BY partition ORDER BY order <frame> BETWEEN UNBOUNDED
    PRECEDING AND CURRENT ROW)`` over ``log`` as a changelog (module doc). ``order``: one
    ``(column, ascending, nulls_first)``; ``calls``: ``(function, argument or None, output
    column)``; ``frame``: ``"ROWS"`` (ROW_NUMBER's) or ``"RANGE"`` (RANK's, and SQL's default
    for an aggregate); ``not_null``: the columns whose Flink type is NOT NULL (else the Spark
    schema's nullability decides how Flink plans a SUM: module doc). Replayed per partition
    key on ``options.tasks`` tasks (one without a PARTITION BY)."""
    calls = [(f.upper(), a, n) for f, a, n in calls]
    frame = frame.upper()
    types = _check(log, partition, order, calls, frame, options)
    columns = list(log.columns)
    index = {c: i for i, c in enumerate(columns)}
    nullable = {f.name: f.nullable and f.name not in not_null for f in log.df.schema.fields}
    aggs = _Aggs([("SUM0" if f == "SUM" and nullable[a] else f, a, n) for f, a, n in calls],
                 [None if a is None else index[a] for _, a, _ in calls], [types.get(a) for _, a, _ in calls])
    function = NonTimeRowsUnboundedPrecedingFunction if frame == "ROWS" else NonTimeRangeUnboundedPrecedingFunction
    sort_at, directions = [index[order[0][0]]], [order[0][1:]]
    extra = [(name, _output_type(f, types.get(a)), lambda o, k=k: o[2][k])
             for k, (f, a, name) in enumerate(calls)]
    df, expired = expirations(replay_per_key(
        log, list(partition), lambda: function(sort_at, directions, aggs, options.update_before), options, extra,
        cleanup_ms=options.ttl_ms if options.ttl_ms > 1 else 0), partition)
    mode = ALL if options.update_before else ALL - {UPDATE_BEFORE}
    return Changelog(df, tuple(columns + [n for _, _, n in calls]), mode, log.upsert_key, expired=expired)
