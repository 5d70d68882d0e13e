"""Top-N and deduplication: Flink's ``ROW_NUMBER() OVER (PARTITION BY p ORDER BY s) ... WHERE
rn <= N`` (and ``rn = 1`` ordered by a time attribute) over a changelog.

``top_n`` runs, per partition key and in arrival order, the Flink function the planner picks
(``RankProcessStrategy``; ``StreamExecRank``); ``deduplicate`` the one ``StreamExecDeduplicate``
picks. What each emits for one input message (rank ``r`` = the row's place, 1-based; ranks
outside ``offset..n`` are never emitted; ``-U`` only when ``Options.update_before``):

=========================  ==================  ============================================
Flink function             row number output   a message that changes the top N emits
=========================  ==================  ============================================
AppendOnlyTopNFunction     yes (or offset>1)   ``-U old@r, +U new@r`` for each rank from the
(insert-only input)                            new row's down; ``+I last@k`` when the top N
                                               was not full (no ``-D``: the last row's rank
                                               is taken over by ``+U``)
\"                         no                  ``-D`` of the row pushed out, then ``+I`` new
FastTop1Function (n = 1)   either              ``+I`` first; ``-U old, +U new`` when a row
                                               sorts strictly first (ties keep the old)
RetractableTopNFunction    yes (or offset>1)   accumulate: as AppendOnly; retract: ``-U@r,
(updating input)                               +U@r`` for each rank below, ``-D last@k``
\"                         no                  accumulate: ``-D`` pushed out, ``+I`` new;
                                               retract: ``-D`` it, ``+I`` the row moving in
UpdatableTopNFunction      yes                 as AppendOnly; an update of a row in the top
(updating input, upsert                        N: ``-U/+U`` for its old rank up to its new
key, monotonic order)                          one (the old row retracted first)
\"                         no                  new row: ``-D`` pushed out, ``+I``; an
                                               update of a row in the top N: ``-U old, +U new``
ProcTimeDeduplicate        (never)             keep first: ``+I`` the first row per key;
KeepFirst/LastRow                              keep last: ``+I`` first, then ``-U old, +U
                                               new`` (nothing when the new row equals the old
                                               and no state TTL is set)
RowTimeDeduplicate         (never)             keep last: ``+I`` first, ``-U old, +U new`` when
Function                                       the row's time is not smaller than the kept
                                               row's; keep first: ``+I`` once the watermark
                                               passes the first row's time, late rows dropped
=========================  ==================  ============================================

Ties on the sort key keep the earlier arrival first. Every output row carries the ``seq``
and ``_pt`` of the message that caused it and ``_n = input _n + [j]`` (``j``: its place among
that message's outputs, in Flink's order).

    seq  category  sales      top_n(log, ["category"], [("sales", False, False)], 2, "rn", options)
    0    A         10         seq  _op  category  sales  rn
    1    A         20         0    +I   A         10     1
                              1    -U   A         10     1
                              1    +U   A         20     1
                              1    +I   A         10     2

``rank_fanout`` measures what the seed's ``RANK() OVER (ORDER BY lastAction)`` without a
Top-N filter would cost (Flink rejects it): the rows each input message re-ranks.

>>> sorted([(3,), (None,), (1,)], key=cmp_to_key(sort_key_comparator([(False, False)])))  # DESC NULLS LAST
[(3,), (1,), (None,)]
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import cmp_to_key

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from .. import sparksql
from ..arrow import groups, python_values
from ..errors import KitError, fail
from ..spark import known_rows
from . import (ADDS, ALL, DELETE, INSERT, INSERT_ONLY, UPDATE_AFTER, UPDATE_BEFORE,
                        Changelog, Options)

__all__ = ["top_n", "deduplicate", "rank_fanout", "rank_strategy",
           "AppendOnlyTopNFunction", "FastTop1Function", "RetractableTopNFunction",
           "UpdatableTopNFunction", "ProcTimeDeduplicateKeepFirstRowFunction",
           "ProcTimeDeduplicateKeepLastRowFunction", "RowTimeDeduplicateFunction", "late_rows"]

STRATEGIES = ("append", "retract", "update_fast")   # Flink's AppendFast, Retract, UpdateFast


# ---------------------------------------------------------------- sort keys and buffers

def sort_key_comparator(order: list):
    """Flink's sort-key comparator over tuples of ``(ascending, nulls_first)`` fields:
    negative when ``a`` sorts before ``b``."""
    def compare(a, b):
        for x, y, (ascending, nulls_first) in zip(a, b, order):
            if x is None or y is None:
                c = (x is not None) - (y is not None)   # NULL first...
                c = c if nulls_first else -c            # ... or last, in either direction
            else:
                c = (x > y) - (x < y)
                c = c if ascending else -c
            if c:
                return c
        return 0
    return compare


class _Row:
    """An input row: its place in the task's table (``at``) and its ``values``."""
    __slots__ = ("at", "values")

    def __init__(self, at: int, values: tuple):
        self.at, self.values = at, values


class TopNBuffer:
    """Flink's ``TopNBuffer``: sort key -> the rows (or row keys) under it in arrival order,
    the keys kept sorted; ``count`` rows in all."""

    def __init__(self, key):
        self.key = key            # sort key tuple -> comparable object
        self.keys, self.lists, self.count = [], [], 0

    def _find(self, sort_key) -> tuple:
        k = self.key(sort_key)
        i = bisect_left(self.keys, k)
        return i, i < len(self.keys) and self.keys[i] == k

    def put(self, sort_key, value) -> int:
        i, found = self._find(sort_key)
        if not found:
            self.keys.insert(i, self.key(sort_key))
            self.lists.insert(i, [])
        self.lists[i].append(value)
        self.count += 1
        return len(self.lists[i])

    def remove(self, sort_key, value):
        i, found = self._find(sort_key)
        if found and value in self.lists[i]:
            self.lists[i].remove(value)
            self.count -= 1
            if not self.lists[i]:
                del self.keys[i], self.lists[i]

    def remove_from(self, i: int):
        """Drop the entries from the ``i``-th on (those out of the top N)."""
        self.count -= sum(map(len, self.lists[i:]))
        del self.keys[i:], self.lists[i:]

    def remove_last(self):
        value = self.lists[-1].pop()
        self.count -= 1
        if not self.lists[-1]:
            del self.keys[-1], self.lists[-1]
        return value

    def in_range(self, sort_key, n: int) -> bool:
        """``checkSortKeyInBufferRange``: before the worst key, or the buffer not full."""
        return not self.keys or self.key(sort_key) < self.keys[-1] or self.count < n


# ---------------------------------------------------------------- Flink's functions

class _TopN:
    """What every Top-N function shares (Flink's ``AbstractTopNFunction``): the rank range
    ``start..end``, whether the rank is output, whether ``-U`` is sent. ``process`` takes a
    message (row kind, ``_Row``) and returns its outputs ``(kind, row, rank or None)``."""

    def __init__(self, sort_columns: list, order: list, start: int, end: int,
                 output_rank: bool, update_before: bool):
        self.sort_columns, self.start, self.end = sort_columns, start, end
        self.output_rank, self.update_before = output_rank, update_before
        self.key = cmp_to_key(sort_key_comparator(order))
        self.with_number = output_rank or start > 1   # Flink's "with-number algorithm"
        self.out = []

    def sort_key(self, row: _Row) -> tuple:
        return tuple(row.values[i] for i in self.sort_columns)

    def _collect(self, kind, row, rank):
        if rank is None or self.start <= rank <= self.end:
            self.out.append((kind, row, rank if self.output_rank else None))

    def insert(self, row, rank=None):
        self._collect(INSERT, row, rank)

    def delete(self, row, rank=None):
        self._collect(DELETE, row, rank)

    def update_after(self, row, rank=None):
        self._collect(UPDATE_AFTER, row, rank)

    def retract(self, row, rank=None):
        if self.update_before:
            self._collect(UPDATE_BEFORE, row, rank)

    def process(self, kind: str, row: _Row, pt: int | None = None) -> list:
        self.out = []
        self.process_element(kind, row)
        return self.out


class AppendOnlyTopNFunction(_TopN):
    """Top-N over an insert-only input: the buffer holds the top N (with the ranks output,
    also the ties of the last rank reached)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.buffer = TopNBuffer(self.key)

    def process_element(self, kind, row):
        sort_key = self.sort_key(row)
        if not self.buffer.in_range(sort_key, self.end):
            return
        self.buffer.put(sort_key, row)
        if self.with_number:
            self._with_row_number(sort_key, row)
        else:
            self._without_row_number(row)

    def _with_row_number(self, sort_key, row):
        b, own, rank, current, found, i = self.buffer, self.key(sort_key), 0, None, False, 0
        while i < len(b.keys) and rank <= self.end:
            if not found and b.keys[i] == own:
                rank += len(b.lists[i])
                current, found = row, True
            elif found:
                for previous in b.lists[i]:
                    if rank > self.end:
                        break
                    self.retract(previous, rank)
                    self.update_after(current, rank)
                    current, rank = previous, rank + 1
            else:
                rank += len(b.lists[i])
            i += 1
        if rank <= self.end:
            self.insert(current, rank)
        b.remove_from(i)

    def _without_row_number(self, row):
        b = self.buffer
        if b.count > self.end:
            last = b.remove_last()
            if last.values == row.values:
                return
            self.delete(last)
        self.insert(row)


class FastTop1Function(_TopN):
    """Top-1 (insert-only input, or updates whose order is monotonic): the current first row;
    a row sorting strictly before it replaces it."""
    row = None

    def process_element(self, kind, row):
        if self.row is None:
            self.row = row
            self.insert(row, 1)
        elif self.key(self.sort_key(row)) < self.key(self.sort_key(self.row)):
            self.retract(self.row, 1)
            self.update_after(row, 1)
            self.row = row


class RetractableTopNFunction(_TopN):
    """Top-N over any changelog: every row of the partition is kept (per sort key, in
    order: its ``counts`` and its rows in arrival order); a retraction finds its row by all
    its values. Flink emits first, then updates its state."""

    def __init__(self, *args):
        super().__init__(*args)
        self.keys, self.counts, self.rows = [], [], []

    def process_element(self, kind, row):
        own = self.key(self.sort_key(row))
        i = bisect_left(self.keys, own)
        found = i < len(self.keys) and self.keys[i] == own
        if kind in ADDS:
            if found:
                self.counts[i] += 1
            else:
                self.keys.insert(i, own)
                self.counts.insert(i, 1)
                self.rows.insert(i, [])
            (self._accumulate_with_number if self.with_number else self._accumulate)(own, row)
            self.rows[i].append(row)
            return
        removed = (self._retract_with_number if self.with_number else self._retract)(own, row)
        if not found:
            return
        self.counts[i] -= 1
        if not removed:
            rows = self.rows[i]
            for j, r in enumerate(rows):
                if r.values == row.values:
                    del rows[j]
                    break
        if not self.counts[i]:
            del self.keys[i], self.counts[i], self.rows[i]

    def _entries(self):
        return zip(self.keys, self.counts, self.rows)

    def _accumulate_with_number(self, own, row):
        rank, current, found = 0, None, False
        for k, count, rows in self._entries():
            if rank > self.end:
                break
            if not found and k == own:
                rank += count
                current, found = row, True
            elif found:
                for previous in rows:
                    if rank > self.end:
                        break
                    self.retract(previous, rank)
                    self.update_after(current, rank)
                    current, rank = previous, rank + 1
            else:
                rank += count
        if rank <= self.end:
            self.insert(current, rank)

    def _accumulate(self, own, row):
        rank, found, to_collect, to_delete = 0, False, None, None
        for k, count, rows in self._entries():
            if rank > self.end:
                break
            if not found and k == own:
                rank += count
                to_collect = row if self.start <= rank <= self.end else None
                found = True
            elif found:
                if rank + count <= self.end:
                    rank += count
                else:
                    to_delete = rows[self.end - rank]
                    break
            else:
                rank += count
        if to_delete is not None:
            self.delete(to_delete)
        if to_collect is not None:
            self.insert(row)

    def _retract_with_number(self, own, row) -> bool:
        rank, previous, found = 0, None, False
        for k, count, rows in self._entries():
            if rank > self.end:
                break
            if not found and k == own:
                j = 0
                while j < len(rows) and rank <= self.end:
                    current = rows[j]
                    if not found and current.values == row.values:
                        previous, found = current, True
                        del rows[j]
                    else:
                        if found:
                            self.retract(previous, rank)
                            self.update_after(current, rank)
                            previous = current
                        j += 1
                    rank += 1
            elif found:
                for current in rows:
                    if rank > self.end:
                        break
                    self.retract(previous, rank)
                    self.update_after(current, rank)
                    previous, rank = current, rank + 1
            else:
                rank += count
        if rank <= self.end and previous is not None:
            self.delete(previous, rank)
        return found

    def _retract(self, own, row) -> bool:
        next_rank, found = 1, False
        for k, count, rows in self._entries():
            if next_rank > self.end:
                break
            if not found and k == own:
                j = 0
                while j < len(rows) and next_rank <= self.end:
                    previous = rows[j]
                    if not found and previous.values == row.values:
                        self.delete(previous, next_rank)
                        next_rank, found = next_rank - 1, True
                        del rows[j]
                    else:
                        if found and next_rank == self.end:
                            self.insert(previous, next_rank)
                        j += 1
                    next_rank += 1
            elif found:
                if next_rank + count - 1 < self.end:
                    next_rank += count
                else:
                    self.insert(rows[self.end - next_rank])
                    break
            else:
                next_rank += count
        return found


class UpdatableTopNFunction(_TopN):
    """Top-N over updates with an upsert key whose sort key only moves up (Flink's
    ``UpdateFastStrategy``): the buffer holds row keys, ``rows`` the row of each key in it."""

    def __init__(self, *args, row_key: list):
        super().__init__(*args)
        self.row_key = row_key
        self.buffer = TopNBuffer(self.key)
        self.rows = {}

    def process_element(self, kind, row):
        sort_key = self.sort_key(row)
        key = tuple(row.values[i] for i in self.row_key)
        b = self.buffer
        if key not in self.rows:
            if b.in_range(sort_key, self.end):
                b.put(sort_key, key)
                self.rows[key] = row
                if self.with_number:
                    self._with_row_number(sort_key, row)
                    return
                if b.count > self.end:
                    self.delete(self.rows.pop(b.remove_last()))
                self.insert(row)
            return
        old = self.rows[key]
        old_key = self.sort_key(old)
        moved = self.key(old_key) != self.key(sort_key)
        if moved and self.with_number and self.key(old_key) < self.key(sort_key):
            raise KitError(f"row {row.values} sorts after its old version {old.values}: an "
                           "update_fast Top-N needs an order the updates only move up; use "
                           "strategy='retract'")
        old_rank = self._rank(old_key, key) if self.with_number else None
        if moved:
            b.remove(old_key, key)
            b.put(sort_key, key)
        self.rows[key] = row
        if moved and self.with_number:
            self._with_row_number(sort_key, row, old_key, old, old_rank)
        else:
            self.retract(old, old_rank)
            self.update_after(row, old_rank)

    def _rank(self, sort_key, key) -> int:
        rank, own = 1, self.key(sort_key)
        for k, keys in zip(self.buffer.keys, self.buffer.lists):
            if k == own:
                return rank + keys.index(key)
            rank += len(keys)
        raise AssertionError(f"row key {key} is not in the Top-N buffer")

    def _with_row_number(self, sort_key, row, old_key=None, old=None, old_rank=None):
        """Flink's ``emitRecordsWithRowNumber``: a new row (``old`` None) or one moved up
        from ``old_rank``."""
        b, own, rank, current, found, retracted, i = self.buffer, self.key(sort_key), 0, None, False, False, 0
        while i < len(b.keys) and rank <= self.end:
            k, keys = b.keys[i], b.lists[i]
            if not found and k == own:
                rank += len(keys)
                current, found = row, True
            elif found:
                if old is not None and self.key(old_key) < k:
                    break   # below the old rank nothing moves
                for key in keys:
                    if rank > self.end or (old is not None and rank >= old_rank):
                        break
                    previous = self.rows[key]
                    self.retract(previous, rank)
                    if current is row and old is not None and not retracted:
                        self.retract(old, old_rank)   # the same row key: its old row first
                        retracted = True
                    self.update_after(current, rank)
                    current, rank = previous, rank + 1
            else:
                rank += len(keys)
            i += 1
        if rank <= self.end:
            if old is None:
                self.insert(current, rank)
            else:
                if not retracted:
                    self.retract(old, old_rank)
                self.update_after(current, rank)
            return
        for keys in b.lists[i:]:
            for key in keys:
                del self.rows[key]
        b.remove_from(i)


class _Deduplicate:
    """What the deduplicate functions share: the kept row (``row``), the processing time it
    was written at and the state TTL (``ttl_ms``: a key whose state is older starts afresh)."""
    row = None
    written = None

    def __init__(self, update_before: bool, ttl_ms: int, time: int | None = None):
        self.update_before, self.ttl_ms, self.time = update_before, ttl_ms, time

    def process(self, kind: str, row: _Row, pt: int | None) -> list:
        if self.ttl_ms:
            if pt is None:
                raise KitError("the state TTL (table.exec.state.ttl) runs on processing time: "
                               "give the stream a proctime (kit.stream(..., proctime=...))")
            if self.written is not None and self.written + self.ttl_ms <= pt:
                self.row = self.written = None
        return self.process_element(row, pt)

    def keep(self, row, pt):
        self.row, self.written = row, pt

    def updated(self, old, new) -> list:
        """``updateDeduplicateResult``: ``+I`` the first row, else ``-U`` old, ``+U`` new."""
        if old is None:
            return [(INSERT, new, None)]
        before = [(UPDATE_BEFORE, old, None)] if self.update_before else []
        return before + [(UPDATE_AFTER, new, None)]


class ProcTimeDeduplicateKeepFirstRowFunction(_Deduplicate):
    """The first row of each key, ``+I``; later rows emit nothing."""

    def process_element(self, row, pt):
        if self.row is not None:
            return []
        self.keep(row, pt)
        return [(INSERT, row, None)]


class ProcTimeDeduplicateKeepLastRowFunction(_Deduplicate):
    """The last row of each key: a row equal to the kept one emits nothing unless a state
    TTL is set (downstream state must be kept alive)."""

    def process_element(self, row, pt):
        old = self.row
        self.keep(row, pt)
        if old is not None and not self.ttl_ms and old.values == row.values:
            return []
        return self.updated(old, row)


class RowTimeDeduplicateFunction(_Deduplicate):
    """The row of the largest event time of each key (keep last: a time not smaller than
    the kept row's replaces it). Flink 2.3 keeps the first row on event time with another
    function, insert-only, on watermarks (``_first_on_event_time``)."""

    def process_element(self, row, pt):
        t = row.values[self.time]
        if t is None:
            raise KitError(f"row {row.values} has a NULL event time: a rowtime deduplicate "
                           "needs one in every row")
        old = self.row
        if old is not None:
            kept = old.values[self.time]
            if t < kept:
                return []
        self.keep(row, pt)
        return self.updated(old, row)


# ---------------------------------------------------------------- the replay on Spark

def replay_per_key(log: Changelog, keys: list, make, options: Options, extra: list) -> DataFrame:
    """Run ``make()`` (a fresh function per key) over each key's messages in arrival order
    on Spark: the input spread over ``options.tasks`` by ``keys``, one ``mapInArrow`` per
    task. Output: the value columns of the rows the function emitted, ``extra`` (name,
    Spark type, function of the output tuple giving a value of that type), ``_op``, ``seq``,
    ``_n``, ``_pt``."""
    columns = list(log.columns)
    df = log.df.select(*[F.col(sparksql.name(c)) for c in columns], "_op", "seq", "_n", "_pt")
    df = df.repartition(options.tasks, *keys) if options.tasks > 1 and keys else df.coalesce(1)
    df = df.sortWithinPartitions(*[F.col(sparksql.name(k)) for k in keys], "seq", "_n")
    fields = [df.schema[c] for c in columns] + [T.StructField(n, t) for n, t, _ in extra] + [
        T.StructField("_op", T.StringType()), T.StructField("seq", T.LongType()),
        T.StructField("_n", T.ArrayType(T.IntegerType())), T.StructField("_pt", T.LongType())]

    def per_task(batches):
        batches = list(batches)
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        values = list(zip(*[python_values(table.column(c)) for c in columns]))
        ops, seqs, ns, pts = (table.column(c).to_pylist() for c in ("_op", "seq", "_n", "_pt"))
        out = []   # (output tuple, input message, place among its outputs)
        for start, length in groups(table, keys):
            function = make()
            for i in range(start, start + length):
                out += [(o, i, j) for j, o in enumerate(function.process(ops[i], _Row(i, values[i]), pts[i]))]
        if not out:
            return
        taken = table.select(columns).take([o[1].at for o, _, _ in out])
        arrays = list(taken.columns) + [
            pa.array([f(o) for o, _, _ in out], to_arrow_type(t, timezone="UTC")) for _, t, f in extra] + [
            pa.array([o[0] for o, _, _ in out], pa.string()),
            pa.array([seqs[i] for _, i, _ in out], pa.int64()),
            pa.array([ns[i] + [j] for _, i, j in out], pa.list_(pa.int32())),
            pa.array([pts[i] for _, i, _ in out], pa.int64())]
        yield from pa.Table.from_arrays(arrays, [f.name for f in fields]).to_batches()

    return df.mapInArrow(per_task, T.StructType(fields))


def check_columns(log: Changelog, names: list, what: str):
    missing = [c for c in names if c not in log.columns]
    if missing:
        raise KitError(f"{what} column(s) {missing} are not in the input: it has {list(log.columns)}")


def rank_strategy(log: Changelog, partition: list, monotonic: bool = False) -> str:
    """Flink's ``RankProcessStrategy`` for a Top-N over ``log``: ``append`` for an
    insert-only input; ``update_fast`` when the input has an upsert key containing the
    partition keys, no deletions and an order ``monotonic`` in its direction (the planner
    knows: e.g. ``COUNT(*) ... ORDER BY cnt DESC``); else ``retract``."""
    if log.insert_only:
        return "append"
    key = log.upsert_key
    if monotonic and key is not None and set(partition) <= set(key) and DELETE not in log.mode:
        return "update_fast"
    return "retract"


def top_n(log: Changelog, partition: list[str], order: list[tuple[str, bool, bool]], n: int,
          row_number: str | None = None, options: Options = Options(), offset: int = 1,
          strategy: str | None = None) -> Changelog:
    """Flink's Top-N: per ``partition`` key the rows ranked ``offset..n`` by ``order``
    (``(column, ascending, nulls_first)``), as a changelog (module doc). ``row_number``: the
    output column of the rank (BIGINT, last), None when the query drops it. ``strategy``:
    ``rank_strategy``'s answer (default: ``append`` for an insert-only input, ``retract``
    otherwise); the planner passes ``update_fast`` where Flink picks it."""
    columns = list(log.columns)
    check_columns(log, list(partition) + [c for c, _, _ in order], "Top-N")
    if not order:
        raise KitError("a Top-N needs an ORDER BY in its ROW_NUMBER() OVER (...)")
    if not 1 <= offset <= n:
        raise KitError(f"the Top-N rank range {offset}..{n} is empty: it needs 1 <= start <= end")
    if row_number is not None and row_number in columns:
        raise KitError(f"the row number column {row_number!r} is already an input column")
    if options.ttl_ms > 0:
        raise KitError("the state TTL (table.exec.state.ttl) is not supported for Top-N yet: "
                       "set it to 0, or deduplicate (rn = 1 over a time attribute)")
    strategy = strategy or rank_strategy(log, partition)
    if strategy not in STRATEGIES:
        raise KitError(f"unknown Top-N strategy {strategy!r}: one of {STRATEGIES}")
    if strategy == "append" and not log.insert_only:
        raise KitError("the append Top-N strategy reads an insert-only input; this one updates: "
                       "use strategy='retract'")
    if strategy == "update_fast" and (log.upsert_key is None or DELETE in log.mode
                                      or not set(partition) <= set(log.upsert_key)):
        raise KitError("the update_fast Top-N strategy needs an input without deletions whose "
                       "upsert key contains the partition keys: use strategy='retract'")
    index = {c: i for i, c in enumerate(columns)}
    args = ([index[c] for c, _, _ in order], [(a, nf) for _, a, nf in order], offset, n,
            row_number is not None, options.update_before)
    top1 = n == 1 and offset == 1 and strategy != "retract"
    if top1:
        function = FastTop1Function
    elif strategy == "append":
        function = AppendOnlyTopNFunction
    elif strategy == "retract":
        function = RetractableTopNFunction
    else:
        row_key = [index[c] for c in log.upsert_key]
        function = lambda *a: UpdatableTopNFunction(*a, row_key=row_key)   # noqa: E731
    log_df = log.df.where("_op <> '-U'") if strategy == "update_fast" else log.df
    extra = [(row_number, T.LongType(), lambda o: o[2])] if row_number is not None else []
    df = replay_per_key(log.with_df(log_df), list(partition), lambda: function(*args), options, extra)
    return Changelog(df, tuple(columns + ([row_number] if row_number else [])),
                     _top_n_mode(strategy, top1, row_number is not None or offset > 1, options),
                     _top_n_key(log, partition, row_number, top1))


def _top_n_mode(strategy: str, top1: bool, with_number: bool, options: Options) -> frozenset:
    """The row kinds the chosen function can emit (``-U`` only with ``update_before``);
    Flink's EXPLAIN declares every Rank ``[I,UB,UA,D]`` whatever its function emits."""
    if top1 or (with_number and strategy != "retract"):
        kinds = {INSERT, UPDATE_BEFORE, UPDATE_AFTER}
    elif strategy == "append":
        kinds = {INSERT, DELETE}
    elif strategy == "retract":
        kinds = set(ALL) if with_number else {INSERT, DELETE}
    else:
        kinds = set(ALL)
    return frozenset(kinds if options.update_before else kinds - {UPDATE_BEFORE})


def _top_n_key(log, partition, row_number, top1):
    """Flink's upsert key of a Rank: the partition keys and the rank when it is output (the
    partition keys alone for a Top-1), else the input's when it contains the partition keys."""
    if row_number is not None:
        return tuple(partition) + (row_number,)
    if top1:
        return tuple(partition)
    key = log.upsert_key
    return key if key is not None and set(partition) <= set(key) else None


def deduplicate(log: Changelog, keys: list[str], keep: str, options: Options,
                time: str | None = None, engine: str = "auto", marks: DataFrame | None = None) -> Changelog:
    """Flink's deduplication (``ROW_NUMBER() OVER (PARTITION BY keys ORDER BY time ASC|DESC)
    = 1``): ``keep`` ``"first"`` or ``"last"`` row per key, by arrival (``time`` None:
    processing time) or by event time ``time`` (a rowtime column; keeping the first needs
    ``marks``, the input stream's ``seq``, ``watermark`` (and ``proctime``): ``_first_on_event_time``).
    ``engine``: ``"auto"`` takes Spark window functions when the state TTL is off,
    ``"replay"`` always replays."""
    check_columns(log, list(keys) + ([time] if time else []), "deduplicate")
    if keep not in ("first", "last"):
        raise KitError(f"keep must be 'first' or 'last', not {keep!r}")
    if not log.insert_only:
        raise KitError("deduplicate reads an insert-only input; over updates, use top_n(..., "
                       "strategy='retract')")
    last = keep == "last"
    if engine not in ("auto", "replay"):
        raise KitError(f"engine must be 'auto' or 'replay', not {engine!r}")
    if time is not None and not last:
        if marks is None:
            raise KitError("keeping the first row on event time needs the watermarks of the input's one "
                           "stream (marks=): it waits for the watermark to pass the row's time")
        if options.ttl_ms:
            raise KitError("keeping the first row on event time with a state TTL is not modelled; "
                           "turn table.exec.state.ttl off")
        return Changelog(_first_on_event_time(log, list(keys), time, marks, options.tasks), log.columns,
                         INSERT_ONLY, tuple(keys))
    mode = INSERT_ONLY if not last else frozenset(
        {INSERT, UPDATE_AFTER} | ({UPDATE_BEFORE} if options.update_before else set()))
    if engine == "auto" and not options.ttl_ms:
        df = _deduplicate_fast(log, list(keys), last, time, options.update_before)
    else:
        ub, ttl = options.update_before, options.ttl_ms
        if time is None:
            function = ProcTimeDeduplicateKeepLastRowFunction if last else ProcTimeDeduplicateKeepFirstRowFunction
            make = lambda: function(ub, ttl)   # noqa: E731
        else:
            at = list(log.columns).index(time)
            make = lambda: RowTimeDeduplicateFunction(ub, ttl, at)   # noqa: E731
        df = replay_per_key(log, list(keys), make, options, [])
    return Changelog(df, log.columns, mode, tuple(keys))


def _lateness(log: Changelog, time: str, marks: DataFrame) -> DataFrame:
    """``log``'s rows with ``_wm`` (the watermark at their arrival) and ``_late``: below it."""
    t = sparksql.name(time)
    null = fail(F.lit(f"a row has a NULL event time in {time!r}: a rowtime deduplicate needs one in every row"))
    rows = log.df.join(marks.selectExpr("seq", "watermark AS _wm"), "seq")
    return rows.withColumn("_late", F.when(F.col(t).isNull(), null.cast("boolean")).otherwise(F.expr(f"coalesce({t} < _wm, false)")))


def late_rows(log: Changelog, time: str, marks: DataFrame) -> DataFrame:
    """The rows keep-first on event time drops (Flink drops them without a trace): the
    input's columns, ``seq`` and ``watermark`` (the one each arrived at)."""
    return _lateness(log, time, marks).where("_late").selectExpr(*map(sparksql.name, log.columns), "seq",
                                                                 "_wm AS watermark")


def _first_on_event_time(log: Changelog, keys, time, marks: DataFrame, tasks: int = 1) -> DataFrame:
    """Keep first on event time (Flink 2.3's ``RowTimeDeduplicateKeepFirstRowFunction``,
    insert-only), as real Flink 2.3 runs it (``topn.json``): a row below the watermark it
    arrives at is dropped (one *at* it is kept); of the others, each key's row of the
    smallest time (ties: the earlier arrival) is emitted once, as ``+I``, by its timer: at
    the first rise of the watermark, at or after the row's arrival, to its time or past it
    (after the last arrival: the end of input). A later row cannot change it: one of a
    smaller time would be late by then. Emissions of one rise are in time order, then by
    arrival; ``_n = [place]``.

        k  ts  seq  watermark before     ->  seq  _op  k  ts
        a  2   0    NULL                     1    +I   a  2    (the watermark rises to 25 after seq 1)
        b  30  1    -3                       2    +I   b  30   (end of input)
        a  1   2    25 (late: dropped)

    A row fires at ``max(_at, _next)``: ``_at`` the first rise to its time or past it,
    ``_next`` the first rise at or after its arrival. Both are searches over the rises,
    whose watermarks grow with their arrival: the arrivals are cut into ``tasks`` ranges of
    ``seq`` (buckets), each searched by a window of its own, and a bucket with no answer
    takes the first rise of the buckets after it (a small summary); a kept row is searched
    for in the one bucket whose range of rise watermarks holds its time. No window spans
    all rows, and each search is a running minimum in reverse order (Spark recomputes a
    frame that ends at UNBOUNDED FOLLOWING for every row: quadratic).
    """
    ks, t = [sparksql.name(k) for k in keys], sparksql.name(time)
    cols = [sparksql.name(c) for c in log.columns]
    rows = _lateness(log, time, marks).where("NOT _late")
    kept = rows.withColumn("_r", F.row_number().over(Window.partitionBy(*ks).orderBy(t, "seq", "_n"))).where("_r = 1")
    size = max(1, -(-(known_rows(marks) or marks.count()) // max(1, tasks)))   # arrivals per bucket
    # the watermark each arrival leaves (the one the next arrives at; the last's: the end of
    # input, NULL sorted last); a rise is a step a timer can fire at
    left = marks.selectExpr("seq - 1 AS seq", "watermark AS _w", "false AS _end")
    after = marks.selectExpr("seq", "watermark AS _met").join(left, "seq", "left").selectExpr(
        "seq", f"seq div {size} AS _b", "IF(_end IS NULL, NULL, _w) AS _v",
        "_end IS NULL OR (_w IS NOT NULL AND (_met IS NULL OR _w > _met)) AS _step")
    # _next: the first rise from each arrival on, inside its bucket or carried in from the buckets after
    firsts = after.groupBy("_b").agg(F.min(F.when(F.col("_step"), F.col("seq"))).alias("_first"))
    carry = firsts.selectExpr("_b", "min(_first) OVER (ORDER BY _b DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
                                    " AS _carry")
    nexts = after.join(F.broadcast(carry), "_b").selectExpr(
        "seq AS _j", "coalesce(min(IF(_step, seq, NULL)) OVER (PARTITION BY _b ORDER BY seq DESC ROWS BETWEEN UNBOUNDED "
        "PRECEDING AND CURRENT ROW), _carry) AS _next")
    # _at: each bucket's rises cover the watermarks (its predecessor's highest, its own highest]
    steps = after.where("_step")
    bounds = steps.groupBy("_b").agg(F.max("_v").alias("_hi"), F.max(F.col("_v").isNull()).alias("_inf"))
    bounds = bounds.selectExpr("_b", "IF(_inf, NULL, _hi) AS _hi", "lag(_hi) OVER (ORDER BY _b) AS _lo")
    placed = kept.join(F.broadcast(bounds), F.expr(f"(_lo IS NULL OR {t} > _lo) AND (_hi IS NULL OR {t} <= _hi)"))
    both = placed.selectExpr("_b", f"{t} AS _v", "0 AS _kind", "seq AS _j", f"struct({', '.join(cols)}) AS _row") \
        .unionByName(steps.selectExpr("_b", "_v", "1 AS _kind", "seq AS _j"), allowMissingColumns=True)
    ahead = "(PARTITION BY _b ORDER BY _v DESC NULLS FIRST, _kind DESC, _j DESC ROWS UNBOUNDED PRECEDING)"
    fired = both.selectExpr("*", f"min(IF(_kind = 1, _j, NULL)) OVER {ahead} AS _at").where("_kind = 0")
    fired = fired.join(nexts, "_j").selectExpr("_row", "_v", "_j", "greatest(_at, _next) AS seq")
    fired = fired.withColumn("_k", F.row_number().over(Window.partitionBy("seq").orderBy("_v", "_j")) - 1)
    pt = "unix_millis(proctime)" if "proctime" in marks.columns else "CAST(NULL AS BIGINT)"
    fired = fired.join(marks.selectExpr("seq", f"{pt} AS _pt"), "seq")
    return fired.selectExpr("'+I' AS _op", *(f"_row.{c}" for c in cols), "seq", "array(CAST(_k AS INT)) AS _n", "_pt")


def _deduplicate_fast(log, keys, last, time, update_before) -> DataFrame:
    """Deduplication with window functions: a row is kept when it is the key's first
    (by arrival) or, on event time, not older than every earlier row of its key; each kept
    row after the first updates the one kept before it."""
    cols = [sparksql.name(c) for c in log.columns]
    by_arrival = Window.partitionBy(*[F.col(sparksql.name(k)) for k in keys]).orderBy("seq", "_n")
    df = log.df.withColumn("_v", F.struct(*cols)).withColumn("_first", F.row_number().over(by_arrival) == 1)
    if time is not None:
        t = F.col(sparksql.name(time))
        earlier = by_arrival.rowsBetween(Window.unboundedPreceding, -1)
        null = fail(F.lit(f"a row has a NULL event time in {time!r}: a rowtime deduplicate needs one in every row"))
        df = df.withColumn("_bound", F.max(t).over(earlier)).where(
            F.when(t.isNull(), null.cast("boolean")).otherwise(F.col("_first") | (t >= F.col("_bound"))))
    elif not last:
        df = df.where("_first")
    df = df.withColumn("_old", F.lag("_v").over(by_arrival))
    first = F.array(F.struct(F.lit(INSERT).alias("k"), F.col("_v").alias("v")))
    after = F.struct(F.lit(UPDATE_AFTER).alias("k"), F.col("_v").alias("v"))
    before = F.struct(F.lit(UPDATE_BEFORE).alias("k"), F.col("_old").alias("v"))
    update = F.array(before, after) if update_before else F.array(after)
    if time is None:   # keep last by arrival: a row equal to the kept one changes nothing
        df = df.where(F.col("_first") | ~F.col("_old").eqNullSafe(F.col("_v")))
    df = df.select("*", F.posexplode(F.when(F.col("_first"), first).otherwise(update)).alias("_j", "_c"))
    return df.selectExpr(*[f"_c.v.{c}" for c in cols], "_c.k AS _op", "seq",
                         "concat(_n, array(_j)) AS _n", "_pt")


def rank_fanout(log: Changelog, partition: list[str], order: list[tuple[str, bool, bool]],
                options: Options | None = None) -> DataFrame:
    """What a full ``RANK() OVER (PARTITION BY partition ORDER BY order)`` (no Top-N filter:
    Flink rejects it) would cost over ``log``: per input message, ``updated`` = the rows whose
    rank it changes (the row itself and every row ranked strictly below it) and ``size`` =
    the partition's rows after it. Columns: ``partition``, ``_op``, ``seq``, ``_n``,
    ``updated``, ``size``; one row per message."""
    check_columns(log, list(partition) + [c for c, _, _ in order], "RANK()")
    columns = list(log.columns)
    at = [columns.index(c) for c, _, _ in order]
    directions = [(a, nf) for _, a, nf in order]

    class Fanout:
        def __init__(self):
            self.keys = []   # the partition's sort keys, sorted
            self.key = cmp_to_key(sort_key_comparator(directions))

        def process(self, kind, row, pt):
            k = self.key(tuple(row.values[i] for i in at))
            if kind in ADDS:
                self.keys.insert(bisect_right(self.keys, k), k)
            else:
                i = bisect_left(self.keys, k)
                if i < len(self.keys) and self.keys[i] == k:
                    del self.keys[i]
            below = len(self.keys) - bisect_right(self.keys, k)
            return [(kind, row, 1 + below, len(self.keys))]

    out = replay_per_key(log, list(partition), Fanout, options or Options(),
                  [("updated", T.LongType(), lambda o: o[2]), ("size", T.LongType(), lambda o: o[3])])
    return out.select(*[F.col(sparksql.name(p)) for p in partition], "_op", "seq",
                      F.slice("_n", 1, F.size("_n") - 1).alias("_n"), "updated", "size")
