"""Flink's ``GroupAggFunction``: one key's group aggregate, message by message -- the
reference the other engines of ``kit.changelog.aggregate`` equal.

A key's state (``State``) holds its accumulators (COUNT, SUM/AVG, MIN/MAX with retraction,
DISTINCT as a count per value), its record count and the processing time of its last
write; ``emit`` folds messages into it and gives the changes, ``expired`` the state TTL's
verdict. ``GroupAggFunction`` runs it per key on the replay driver (``kit.replay.keyed``);
``reference`` runs that over a changelog on Spark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from .. import sparksql
from ..aggregate_types import EXACT, exact_average, wrap
from ..errors import KitError
from ..live import per_key
from ..replay.keyed import KeyedOperator, ValueState, replay, spread, tuples
from . import ADDS, DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, Changelog, Options

__all__ = ["changelog_mode", "NO_CLOCK", "java_key", "java_order", "Spec", "State", "emit", "expired", "GroupAggFunction", "replay_schema",
           "reference", "outputs"]


def changelog_mode(input_mode: frozenset, options: Options) -> frozenset:
    """The row kinds a group aggregate emits over an input of ``input_mode``.

    >>> from kit.changelog import INSERT_ONLY, ALL, mode_text
    >>> mode_text(changelog_mode(INSERT_ONLY, Options())), mode_text(changelog_mode(ALL, Options(update_before=False)))
    ('[I,UB,UA]', '[I,UA,D]')
    """
    mode = {INSERT, UPDATE_AFTER} | ({UPDATE_BEFORE} if options.update_before else set())
    return frozenset(mode | ({DELETE} if input_mode - {INSERT} else set()))


NO_CLOCK = ("the state TTL (table.exec.state.ttl) runs on processing time, but the input has no "
             "processing-time clock: give the stream one, kit.stream(..., proctime=Clock(start, step)) "
             "or proctime=<a TIMESTAMP column>")

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
    The value is Flink's at the call's type ``out`` (``kit.aggregate_types.result_type``): a SUM
    of integers wraps around in its type (Java's arithmetic), a FLOAT SUM adds in FLOAT; an
    AVG of integers is the exact quotient truncated toward zero, one of decimals the exact
    quotient rounded HALF_UP to ``out``'s scale, one of floating values a DOUBLE quotient.

        SUM(TINYINT) of 100, 100: -56        AVG(INT) of -7, -8: -7
    """

    def __init__(self, avg: bool, dtype, out):
        self.avg, self.out, self.n = avg, out, 0
        exact = isinstance(dtype, (T.IntegralType, T.DecimalType))
        self.total = Decimal(0) if isinstance(dtype, T.DecimalType) else 0 if exact else 0.0
        self.single = not avg and isinstance(dtype, T.FloatType) and isinstance(out, T.FloatType)
        if self.single:
            self.total = np.float32(0)

    def add(self, v, w: int):
        if v is None:
            return
        if self.single:
            v = np.float32(v)
        elif isinstance(self.total, float):
            v = float(v)
        with localcontext(EXACT):
            self.total, self.n = (self.total + v, self.n + 1) if w > 0 else (self.total - v, self.n - 1)

    def value(self):
        if self.n == 0:
            return None
        out, total = self.out, self.total
        if not self.avg:
            return wrap(total, out) if isinstance(total, int) else float(total) if self.single else total
        if isinstance(out, T.IntegralType) and isinstance(total, int):
            return wrap(exact_average(wrap(total, T.LongType()), self.n, out), out)   # a BIGINT sum
        if isinstance(out, T.DecimalType) and isinstance(total, Decimal):
            return exact_average(total, self.n, out)
        return float(total) / self.n


class _MinMax:
    """MIN(x) / MAX(x) (``largest``). Over updates (``retract``), Flink's
    ``MinWithRetractAggFunction``: a count per value, the values ordered by Java's
    ``compareTo`` (a FLOAT or DOUBLE NaN above every number, -0.0 below 0.0; values equal
    when their bits are: ``java_key``). Over inserts only, or ignoring retractions, Flink's
    ``MinAggFunction``: Java's ``<``, a value replaces the kept one only when strictly smaller:
    a NaN kept first stays, a NaN later changes nothing, -0.0 and 0.0 keep the first.

        x (inserts)   NaN, 1.5   1.5, NaN   0.0, -0.0
        MIN           NaN        1.5        0.0        (over updates: 1.5, 1.5, -0.0)
    """

    def __init__(self, largest: bool, retract: bool):
        self.largest, self.retract, self.counts, self.best = largest, retract, {}, None

    def _before(self, a, b) -> bool:
        """Whether ``a`` is to be kept before ``b``."""
        if not self.retract:
            return a > b if self.largest else a < b
        a, b = java_order(a), java_order(b)
        return a > b if self.largest else a < b

    def add(self, v, w: int):
        if v is None:
            return
        if not self.retract:
            if self.best is None or self._before(v, self.best):
                self.best = v
            return
        key = java_key(v)
        n = self.counts.get(key, (v, 0))[1] + w
        if n:
            self.counts[key] = (v, n)
        else:
            del self.counts[key]
        if w > 0 and (self.best is None or self._before(v, self.best)):
            self.best = v
        elif w < 0 and n == 0 and self.best is not None and key == java_key(self.best):
            present = [u for u, c in self.counts.values() if c > 0]
            self.best = None
            for u in present:
                if self.best is None or self._before(u, self.best):
                    self.best = u

    def value(self):
        return self.best


def java_key(v):
    """``v`` as a key equal where Java's ``equals`` is: a float's bits (one NaN; -0.0 apart
    from 0.0), other values themselves."""
    if isinstance(v, float):
        return "NaN" if v != v else (v, math.copysign(1.0, v))
    return v


def java_order(v):
    """``v`` ordered as Java's ``compareTo``: for a float, -0.0 below 0.0 and NaN above every
    number (Python's own ``<`` is False both ways for NaN)."""
    if isinstance(v, float):
        return (1, 0.0, 0.0) if v != v else (0, v, math.copysign(1.0, v))
    return v


class _Distinct:
    """A DISTINCT aggregate: a count per value (equal as Java's ``equals``: ``java_key``); the
    inner one sees a value's 0->1 and 1->0."""

    def __init__(self, inner):
        self.inner, self.counts = inner, {}

    def add(self, v, w: int):
        if v is None:
            return
        key = java_key(v)
        before = self.counts.get(key, 0)
        self.counts[key] = before + w
        if (before, before + w) in ((0, 1), (1, 0)):
            self.inner.add(v, w)

    def value(self):
        return self.inner.value()


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
        with localcontext(EXACT):
            return Decimal(v if not isinstance(v, float) else repr(v)).quantize(
                Decimal(1).scaleb(-dtype.scale), ROUND_HALF_UP)
    return v


def _same(a: tuple, b: tuple) -> bool:
    """Equal results as Flink's record equaliser finds them, value by value with Java's ``==``:
    a NaN equals nothing (a NaN result that stays NaN is sent again), -0.0 equals 0.0."""
    return all(x == y for x, y in zip(a, b))


@dataclass
class Spec:
    """What the replay of one key needs: the aggregates' factories and output types."""
    calls: list
    types: dict
    out_types: list
    ttl_ms: int
    update_before: bool
    insert_only: bool = False   # the input: MIN and MAX then compare as Java's < (``_MinMax``)

    def accumulators(self) -> list:
        made = []
        for c, out in zip(self.calls, self.out_types):
            function = c.function.upper()
            dtype = self.types.get(c.arg)
            acc = (_Count(c.arg is None) if function == "COUNT" else
                   _Sum(function == "AVG", dtype, out) if function in ("SUM", "AVG") else
                   _MinMax(function == "MAX", c.retract and not self.insert_only))
            made.append(_Distinct(acc) if c.distinct else acc)
        return made


class State:
    """A key's accumulators, its record count (COUNT(*)) and the time of its last write."""

    def __init__(self, spec: Spec):
        self.spec, self.accs, self.count, self.written = spec, spec.accumulators(), 0, None

    def add(self, args: tuple, w: int):
        self.count += w
        for acc, v, call in zip(self.accs, args, self.spec.calls):
            if w > 0 or call.retract:   # a non-retracting MAX / MIN keeps what it saw
                acc.add(v, w)

    def value(self) -> tuple:
        return tuple(_cast(a.value(), t) for a, t in zip(self.accs, self.spec.out_types))


def emit(spec: Spec, state: State, first: bool, prev: tuple, messages: list, now) -> tuple:
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


def expired(spec: Spec, state: State | None, now) -> bool:
    if state is None or spec.ttl_ms <= 0:
        return False
    if now is None:
        raise KitError(NO_CLOCK)
    return now - state.written >= spec.ttl_ms


class GroupAggFunction(KeyedOperator):
    """Flink's ``GroupAggFunction`` for one key, its one state the key's ``State`` (None:
    none yet). A row is ``(_op, seq, _n, _pt, *args)``; it outputs rows of the replay
    (``replay_schema``): the changes and the expirations (``_op`` NULL)."""
    state = (ValueState("acc"),)

    def __init__(self, spec: Spec, args: list):
        self.spec, self.args = spec, args

    def process_element(self, row, ctx):
        spec, acc, key = self.spec, ctx.state("acc"), ctx.key
        op, seq, n, pt = row[:4]
        w, state = 1 if op in ADDS else -1, acc.value()
        if expired(spec, state, pt):
            ctx.output([None, *key, *[None] * len(spec.calls), seq, None, pt, state.written])
            acc.update(state := None)
        if state is None and w < 0:
            return
        first, state = state is None, state or State(spec)
        prev = state.value()
        changes, state = emit(spec, state, first, prev, [(w, tuple(None if i is None else row[i] for i in self.args))],
                               pt)
        acc.update(state)
        for j, (kind, values) in enumerate(changes):
            ctx.output([kind, *key, *values, seq, [*n, j], pt, None])


def replay_schema(keys, calls, options, types, insert_only: bool = False) -> tuple:
    """The replay's ``Spec`` and the Spark and Arrow schemas of its rows: ``_op`` (NULL for
    an expiration), keys, results, ``seq``, ``_n``, ``_pt``, ``_last_write``."""
    out_types = [T._parse_datatype_string(c.type) for c in calls]
    spec = Spec(list(calls), types, out_types, options.ttl_ms, options.update_before, insert_only)
    long = T.LongType()
    schema = T.StructType(
        [T.StructField("_op", T.StringType())] + [T.StructField(k, types[k]) for k in keys]
        + [T.StructField(c.name, t) for c, t in zip(calls, out_types)]
        + [T.StructField("seq", long), T.StructField("_n", T.ArrayType(T.IntegerType())),
           T.StructField("_pt", long), T.StructField("_last_write", long)])
    return spec, schema, to_arrow_schema(schema, timezone="UTC")


def reference(log: Changelog, keys, calls, options, types) -> tuple:
    """Each key replayed in Python (``GroupAggFunction``), spread over ``options.tasks`` tasks by
    key; over a streaming ``log`` (live), run by the live driver (``kit.live.per_key``)."""
    spec, schema, _ = replay_schema(keys, calls, options, types, log.insert_only)
    read = list(dict.fromkeys(c.arg for c in calls if c.arg))
    args = [4 + read.index(c.arg) if c.arg else None for c in calls]
    operator, columns = (lambda key: GroupAggFunction(spec, args)), ["_op", "seq", "_n", "_pt", *read]
    if log.df.isStreaming:   # live: the same operator per key, micro-batch after micro-batch
        replayed = per_key(log.df, keys, operator, schema, columns)
    else:
        replayed = replay(spread(log.df, keys, options.tasks, "seq", "_n"), keys, operator, schema, columns,
                          tuples(schema, nan_is_null=False))   # a NaN stays, as Flink keeps it
    return outputs(replayed, keys, calls, options)


def outputs(replayed: DataFrame, keys, calls, options) -> tuple:
    """A replay's rows (``replay_schema``) as the changelog and the state expirations."""
    names = [*map(sparksql.name, keys), *(sparksql.name(c.name) for c in calls)]
    changes = replayed.where("_op IS NOT NULL").selectExpr("_op", *names, "seq", "_n", "_pt")
    if options.ttl_ms <= 0:
        return changes, None
    expired = replayed.where("_op IS NULL").selectExpr(*map(sparksql.name, keys), "seq",
                                                       "_last_write AS last_write_pt", "_pt AS pt")
    return changes, expired
