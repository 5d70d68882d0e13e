"""One operator per key, every key of a DataFrame replayed on Spark (layer 4, the driver).

An operator decides how one key's rows change; a driver decides where and when it runs.
The operator is Flink's ``KeyedProcessFunction`` in small (``KeyedOperator``): its state
declared up front (``ValueState``, ``ListState``, ``MapState``: names and kinds, as Flink's
state descriptors), a step per element, a step per timer, and the end of input::

    class KeyedOperator:
        state = ()                            # descriptors: what the driver keeps per key
        def process_element(self, row, ctx)   # one row, in arrival order
        def on_timer(self, timestamp, ctx)    # a timer the watermark (or the clock) passed
        def end_of_input(self, ctx)           # after the final watermark fired every timer

``ctx`` gives the ``key``, the ``watermark`` and ``processing_time`` in force, the state
(``ctx.state("name")``), the timer service (``ctx.register_event_time_timer(t)``,
``ctx.register_processing_time_timer(t)``) and ``ctx.output(value)``; in the replay also
``at``, the row's place in its task's Arrow table. Before each row, the timers the row's
watermark (or processing time) passed fire, earliest first; at the end of input the final
watermark (+inf) fires the event-time ones.

This module is the replay driver: ``spread`` puts the rows over tasks by key and sorts each
task's by key and arrival, ``replay`` runs one ``mapInArrow`` per task, cuts its Arrow table
into runs of equal keys (``kit.arrow.groups``), runs a fresh operator over each run with a
dict-backed state, and turns what the operators output into Arrow batches (``tuples``, or
the caller's ``output``). An operator that reads a key's rows at once (a matcher over numpy
columns) is a ``Rows``: the replay hands it the key's run of the Arrow table instead of
stepping it row by row.

A count per key, emitted when the watermark passes ``t + 10``:

>>> class Count(KeyedOperator):
...     state = (ValueState("n"),)
...     def process_element(self, row, ctx):
...         n = ctx.state("n")
...         n.update((n.value() or 0) + 1)
...         ctx.register_event_time_timer(row[0] + 10)
...     def on_timer(self, timestamp, ctx):
...         ctx.output((ctx.key[0], timestamp, ctx.state("n").value()))
>>> run_key(Count(), ["a"], [(1,), (5,), (30,)], watermarks=[0, 4, 29])
[('a', 11, 2), ('a', 15, 2), ('a', 40, 3)]
"""

from __future__ import annotations

import functools
import heapq
import itertools
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from .. import sparksql
from ..arrow import column, groups, map_in_arrow, python_values

__all__ = ["ValueState", "ListState", "MapState", "KeyedOperator", "Rows", "Context", "run_key", "run_task", "spread",
           "replay", "tuples"]

CONVERT_ROWS = 65_536   # a task's rows made Python values at a time, whole keys (``run_task``)
OUTPUT_ROWS = 65_536    # a task's outputs turned into Arrow at a time (``replay``)

MIN_TIME, MAX_TIME = -(2 ** 63), 2 ** 63 - 1


@dataclass(frozen=True)
class ValueState:
    """One value per key (Flink's ``ValueStateDescriptor``): ``value()``, ``update(v)``, ``clear()``."""
    name: str

    def new(self):
        return _Value()


@dataclass(frozen=True)
class ListState:
    """A list per key (Flink's ``ListStateDescriptor``): ``get()``, ``add(v)``, ``update(vs)``, ``clear()``."""
    name: str

    def new(self):
        return _List()


@dataclass(frozen=True)
class MapState:
    """A map per key (Flink's ``MapStateDescriptor``): a dict (``get``, ``[k] = v``, ``items()``...)."""
    name: str

    def new(self):
        return {}


class _Value:
    __slots__ = ("v",)

    def __init__(self):
        self.v = None

    def value(self):
        return self.v

    def update(self, v):
        self.v = v

    def clear(self):
        self.v = None


class _List(list):
    def get(self):
        return self

    def add(self, v):
        self.append(v)

    def update(self, values):
        self[:] = values


class KeyedOperator:
    """The operator interface (see the module): declare ``state``, override the steps."""
    state: tuple = ()

    def process_element(self, row, ctx: Context):
        pass

    def on_timer(self, timestamp: int, ctx: Context):
        pass

    def end_of_input(self, ctx: Context):
        pass


class Rows(KeyedOperator):
    """An operator that reads its key's rows at once, in the replay only (MATCH_RECOGNIZE's
    matchers over numpy columns, the fast path next to ``CepOperator``; the standard
    semantics, which has no streaming form): ``run(rows, key)`` over the key's run of
    the task's Arrow table, its outputs."""

    def __init__(self, run):
        self.run = run

    def process_rows(self, table: pa.Table, ctx: Context):
        for out in self.run(table, ctx.key):
            ctx.output(out)


class Context:
    """What an operator sees of its key in the replay: state, time, timers, output."""
    __slots__ = ("key", "watermark", "processing_time", "at", "output", "_state", "_event", "_proc")

    def __init__(self, key, state: tuple, out: list):
        self.key, self.watermark, self.processing_time, self.at = key, MIN_TIME, None, None
        self.output = out.append   # ctx.output(value): one output
        self._state = {d.name: d.new() for d in state}
        self._event, self._proc = [], []

    def state(self, name: str):
        return self._state[name]

    def register_event_time_timer(self, t: int):
        if t not in self._event:
            heapq.heappush(self._event, t)

    def register_processing_time_timer(self, t: int):
        if t not in self._proc:
            heapq.heappush(self._proc, t)

    def advance(self, operator: KeyedOperator, watermark=None, processing_time=None):
        """Move the clocks forward, firing the timers they pass (processing time first)."""
        if processing_time is not None:
            self.processing_time = processing_time
            while self._proc and self._proc[0] <= processing_time:
                operator.on_timer(heapq.heappop(self._proc), self)
        if watermark is not None and watermark > self.watermark:
            self.watermark = watermark
            while self._event and self._event[0] <= watermark:
                operator.on_timer(heapq.heappop(self._event), self)


def run_key(operator: KeyedOperator, key: list, rows, watermarks=None, proctimes=None, out=None, at=0,
            end: int = MAX_TIME) -> list:
    """``operator`` over one key's ``rows`` in arrival order (``watermarks`` / ``proctimes``:
    the clocks in force at each row, if given), then the watermark moves to ``end``: the
    end of input at ``MAX_TIME`` (then ``end_of_input``), else a stream still running whose
    watermark is there now. What it output (added to ``out``). ``at``: the first row's place
    in its task's table."""
    out = [] if out is None else out
    _, = _steps(operator, key, rows, watermarks, proctimes, at, end, out, limit=float("inf"))   # one list: out
    return out


def _steps(operator: KeyedOperator, key: list, rows, watermarks, proctimes, at: int, end: int, out: list, limit):
    """``run_key``'s steps (``rows``, ``watermarks``, ``proctimes``: iterables), its outputs
    added to ``out`` and yielded as they come: each list once it holds ``limit`` outputs or
    more (then a new one), the last at the end. A key that outputs more than memory holds
    (an interval join's hot key) is handed on as it runs."""
    ctx, step = Context(key, operator.state, out), operator.process_element
    if watermarks is None and proctimes is None:
        for ctx.at, row in enumerate(rows, at):
            step(row, ctx)
            if len(out) >= limit:
                yield out
                out = []
                ctx.output = out.append
    else:
        advance = ctx.advance
        watermarks = itertools.repeat(None) if watermarks is None else watermarks
        proctimes = itertools.repeat(None) if proctimes is None else proctimes
        for ctx.at, row, watermark, proctime in zip(itertools.count(at), rows, watermarks, proctimes):
            advance(operator, watermark, proctime)
            step(row, ctx)
            if len(out) >= limit:
                yield out
                out = []
                ctx.output = out.append
    ctx.advance(operator, end)
    if end == MAX_TIME:
        operator.end_of_input(ctx)
    yield out


def spread(df: DataFrame, keys: list, tasks: int, *order) -> DataFrame:
    """``df`` over ``tasks`` tasks by ``keys`` (one task, with no shuffle, for one task or no
    keys), each task's rows sorted by ``keys`` then ``order`` (arrival)."""
    cols = [F.col(sparksql.name(k)) for k in keys]
    df = df.repartition(tasks, *cols) if tasks > 1 and keys else df.coalesce(1)
    return df.sortWithinPartitions(*cols, *order)


def run_task(table: pa.Table, keys: list, operator, columns: list = (), watermark: str = None,
             proctime: str = None, shared: tuple = ()):
    """``operator(key values, *shared)`` (a fresh ``KeyedOperator``) over each run of equal
    ``keys`` in ``table`` (sorted by key, then arrival), one run after the other: yields
    lists of their outputs, in order (a key's in one list or, as it runs, in several). A row
    is the tuple of ``columns``' values, the clocks those of the ``watermark`` and
    ``proctime`` columns, if named. Rows become Python values whole keys of about
    ``CONVERT_ROWS`` rows at a time; a larger key's, ``CONVERT_ROWS`` rows at a time as it runs."""
    names = list(dict.fromkeys([*keys, *columns, *filter(None, [watermark, proctime])]))
    for part in _parts(groups(table, keys), CONVERT_ROWS):
        base, rows = part[0][0], sum(n for _, n in part)
        if rows > CONVERT_ROWS and len(part) == 1:   # a large key
            key = [python_values(table.column(k).slice(base, 1))[0] for k in keys]
            values = functools.partial(_values, table, base, rows)
            yield from _run(operator(key, *shared), key, table, base, rows, values, columns, watermark, proctime)
            continue
        cols = {c: python_values(table.column(c).slice(base, rows)) for c in names}
        for start, length in part:
            at = start - base
            key = [cols[k][at] for k in keys]
            values = lambda c, at=at, end=at + length: cols[c][at:end]   # noqa: E731
            yield from _run(operator(key, *shared), key, table, start, length, values, columns, watermark, proctime)


def _run(op: KeyedOperator, key: list, table: pa.Table, start: int, length: int, values, columns, watermark,
         proctime):
    """``op`` over the key's run ``table[start:start + length]``; ``values(c)``: the run's
    values of column ``c``. Its outputs, in lists."""
    if isinstance(op, Rows):
        out = []
        op.process_rows(table.slice(start, length), Context(key, op.state, out))
        return [out]
    rows = zip(*map(values, columns)) if columns else itertools.repeat((), length)
    return _steps(op, key, rows, watermark and values(watermark), proctime and values(proctime), start, MAX_TIME, [],
                  OUTPUT_ROWS)


def _values(table: pa.Table, start: int, length: int, column: str):
    """``column``'s values in ``table[start:start + length]``, made Python values
    ``CONVERT_ROWS`` at a time as they are read."""
    col, end = table.column(column), start + length
    return itertools.chain.from_iterable(python_values(col.slice(s, min(CONVERT_ROWS, end - s)))
                                         for s in range(start, end, CONVERT_ROWS))


def _parts(runs: list, rows: int):
    """``runs`` (``(start, length)`` of each key) in consecutive parts of whole keys, each
    closed once it holds ``rows`` rows or more (fewer than ``2 * rows``), or before a key of
    ``rows`` or more, which is a part of its own."""
    part, held = [], 0
    for run in runs:
        if run[1] >= rows and part:
            yield part
            part, held = [], 0
        part.append(run)
        held += run[1]
        if held >= rows:
            yield part
            part, held = [], 0
    if part:
        yield part


def replay(df: DataFrame, keys: list, operator, schema, columns: list = (), output=None, watermark: str = None,
           proctime: str = None, task=None) -> DataFrame:
    """``run_task`` over each task of ``df`` (``spread``: sorted by key and arrival in its
    tasks), in one ``mapInArrow`` per task. ``output(table, outputs)`` turns a task's outputs
    into Arrow batches of ``schema`` (default ``tuples(schema)``: tuples in its order),
    called once per ``OUTPUT_ROWS`` outputs, in order: a task holds a chunk of its outputs
    (and the rows they hold) at a time, not all of them.
    ``task(table)``, if given, is called with each task's table first: what it returns is
    handed to ``operator`` as its second argument (data the task's keys share)."""
    output, rows = output or tuples(schema), OUTPUT_ROWS

    def per_task(batches):
        batches = list(batches)
        table = pa.Table.from_batches(batches) if batches else None
        if table is None or not table.num_rows:
            return
        shared = () if task is None else (task(table),)
        chunk = []
        for out in run_task(table, keys, operator, columns, watermark, proctime, shared):
            chunk += out
            if len(chunk) >= rows:   # a task's outputs held a chunk at a time
                full = len(chunk) - len(chunk) % rows
                for i in range(0, full, rows):
                    yield from output(table, chunk[i:i + rows])
                chunk = chunk[full:]
        if chunk:
            yield from output(table, chunk)

    return map_in_arrow(df, per_task, schema)


def tuples(schema, nan_is_null: bool | None = None):
    """``output`` for ``replay``: each output a tuple in ``schema``'s order, its values as
    Arrow gives them (``nan_is_null`` None), or as ``kit.arrow.column`` converts them."""
    arrow = to_arrow_schema(schema, timezone="UTC")
    rows = pa.struct(arrow)

    def batches(table, out):
        out = list(out)
        if not out:
            return
        if nan_is_null is None:   # the tuples as Arrow structs: no transposing in Python
            yield pa.RecordBatch.from_struct_array(pa.array(out, type=rows))
            return
        yield pa.RecordBatch.from_arrays(   # a column at a time: one column's values held at once
            [column(list(c), f.dataType, arrow.field(i).type, nan_is_null)
             for i, (c, f) in enumerate(zip(zip(*out), schema))], schema=arrow)
    return batches
