"""Top-N: Flink's ``ROW_NUMBER() OVER (PARTITION BY p ORDER BY s) ... WHERE rn <= N`` over
a changelog (``rn = 1`` ordered by a time attribute is ``kit.changelog.deduplicate``).

``top_n`` runs, per partition key and in arrival order (``kit.changelog.replay``), the Flink
function the planner picks (``RankProcessStrategy``; ``StreamExecRank``). What each emits for one input message (rank ``r`` = the row's place, 1-based; ranks
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
=========================  ==================  ============================================

Ties on the sort key keep the earlier arrival first. Every output row carries the ``seq``
and ``_pt`` of the message that caused it and ``_n = input _n + [j]`` (``j``: its place among
that message's outputs, in Flink's order). A state TTL (``Options.ttl_ms``) forgets what each
function's Flink state and cache would (each class's doc; ``ttl.json``), with no retraction.

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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import sparksql
from ..errors import KitError
from . import ADDS, ALL, DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, Changelog, Options
from .replay import Row, check_columns, clock, expirations, replay_per_key

__all__ = ["top_n", "rank_fanout", "rank_strategy", "sort_key_comparator", "SortKeys", "SortedKeys",
           "AppendOnlyTopNFunction", "FastTop1Function", "RetractableTopNFunction", "UpdatableTopNFunction"]

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


class SortKeys:
    """``cmp_to_key(sort_key_comparator(order))`` that pickles (as its ``order``), and so
    do the holders of its keys (``SortedKeys``): the live driver keeps a key's function
    pickled between micro-batches."""
    __slots__ = ("order", "wrap")

    def __init__(self, order):
        self.order = [tuple(o) for o in order]
        self.wrap = cmp_to_key(sort_key_comparator(self.order))

    def __call__(self, values):
        return self.wrap(values)

    def __reduce__(self):
        return SortKeys, (self.order,)


class SortedKeys:
    """What holds sort keys made by its ``key`` (a ``SortKeys``) in ``keys``: pickles their
    values and wraps them again when loaded."""

    def __getstate__(self):
        return {**self.__dict__, "keys": [k.obj for k in self.keys]}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.keys = [self.key(k) for k in self.keys]


class TopNBuffer(SortedKeys):
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

    def remove_at(self, i: int):
        """Drop the ``i``-th entry (its sort key and every row under it)."""
        self.count -= len(self.lists[i])
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
    message (row kind, ``Row``) and returns its outputs ``(kind, row, rank or None)``."""

    def __init__(self, sort_columns: list, order: list, start: int, end: int,
                 output_rank: bool, update_before: bool, ttl_ms: int = 0):
        self.sort_columns, self.start, self.end = sort_columns, start, end
        self.output_rank, self.update_before, self.ttl_ms = output_rank, update_before, ttl_ms
        self.key = SortKeys(order)
        self.with_number = output_rank or start > 1   # Flink's "with-number algorithm"
        self.out, self.now, self.forgot = [], None, None

    def sort_key(self, row: Row) -> tuple:
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

    def process(self, kind: str, row: Row, pt: int | None = None) -> list:
        self.out, self.now = [], clock(pt) if self.ttl_ms else pt
        self.process_element(kind, row)
        return self.out

    def expired(self, written) -> bool:
        """Whether what was written at ``written`` is gone now (state TTL: ``written + ttl <= now``)."""
        return self.ttl_ms > 0 and written is not None and written + self.ttl_ms <= self.now

    def forget(self, written):
        """Note state last written at ``written`` as forgotten by this message (``forgot``:
        the latest of what it forgot, for ``kit.changelog.replay``)."""
        self.forgot = written if self.forgot is None else max(self.forgot, written)


class AppendOnlyTopNFunction(_TopN):
    """Top-N over an insert-only input: the buffer holds the top N (with the ranks output,
    also the ties of the last rank reached).

    With a state TTL, Flink keeps each sort key's rows as a state entry of its own, written
    when a row joins the key (``written``), and the buffer in a cache that expires the TTL
    after it was loaded from state (``loaded``; Guava's ``expireAfterWrite``, put only when
    missing): the first message at or after that reloads the buffer from the entries not
    expired. (Flink's cache also drops partitions when it holds more than
    ``table.exec.rank.topn-cache-size / N``, reloading them sooner: the kit takes the cache
    as large enough.)

        pt    v (Top-2 DESC, TTL 1 s)   buffer          emits
        0     5, 3                      5@0 3@0         +I 5 1, +I 3 2
        600   4                         5@0 4@600       -U 3 2, +U 4 2
        1200  1                         4@600 1@1200    +I 1 2 (the cache, loaded at 0, expired)
    """
    loaded = None

    def __init__(self, *args):
        super().__init__(*args)
        self.buffer = TopNBuffer(self.key)
        self.written = {}

    def process_element(self, kind, row):
        if self.ttl_ms:
            self._load()
        sort_key = self.sort_key(row)
        if not self.buffer.in_range(sort_key, self.end):
            return
        self.buffer.put(sort_key, row)
        if self.ttl_ms:   # (the buffer's own key: equal keys need not be equal tuples, NaN's)
            self.written[self.buffer.keys[self.buffer._find(sort_key)[0]].obj] = self.now
        if self.with_number:
            self._with_row_number(sort_key, row)
        else:
            self._without_row_number(row)
        if self.ttl_ms:
            kept = {k.obj for k in self.buffer.keys}
            self.written = {k: w for k, w in self.written.items() if k in kept}

    def _load(self):
        """The buffer as the cache has it: reloaded from the entries not expired once the
        cache's TTL from its last load passed."""
        if self.loaded is not None and not self.expired(self.loaded):
            return
        self.loaded, b = self.now, self.buffer
        for i in reversed(range(len(b.keys))):
            written = self.written[b.keys[i].obj]
            if self.expired(written):
                self.forget(written)
                del self.written[b.keys[i].obj]
                b.remove_at(i)

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
            last_key = b.keys[-1].obj
            last = b.remove_last()
            if self.ttl_ms and b.keys and b.keys[-1].obj == last_key:   # the entry keeps its other rows: written
                self.written[last_key] = self.now
            if last.values == row.values:
                return
            self.delete(last)
        self.insert(row)


class FastTop1Function(_TopN):
    """Top-1 (insert-only input, or updates whose order is monotonic): the current first row;
    a row sorting strictly before it replaces it.

    With a state TTL, Flink holds the row in a cache that expires the TTL after the row was
    put there (``written``: when it became first) and writes it to state only at a checkpoint
    or when the cache is full; the kit takes neither (a job without checkpoints whose keys fit
    the cache): the row is forgotten the TTL after it became first, however many rows came
    since, and the next row is ``+I`` again."""
    row = written = None

    def process_element(self, kind, row):
        if self.expired(self.written):
            self.forget(self.written)
            self.row = None
        if self.row is None:
            self.row, self.written = row, self.now
            self.insert(row, 1)
        elif self.key(self.sort_key(row)) < self.key(self.sort_key(self.row)):
            self.retract(self.row, 1)
            self.update_after(row, 1)
            self.row, self.written = row, self.now


class RetractableTopNFunction(_TopN, SortedKeys):
    """Top-N over any changelog: every row of the partition is kept (per sort key, in
    order: its ``counts`` and its rows in arrival order); a retraction finds its row by all
    its values. Flink emits first, then updates its state.

    With a state TTL, Flink's sorted map of counts is one value, written at every message
    (``tree_written``), and each sort key's rows an entry of their own, written when a row
    joins or leaves them (``written``): a message after the map's TTL finds the partition
    empty; a sort key whose rows expired is dropped from the map where Flink reads its rows
    (below the new row, or the retracted row's own key: Flink logs "The state is cleared
    because of state ttl"), and a row joining it starts its rows afresh while its count goes on.
    """
    tree_written = None

    def __init__(self, *args):
        super().__init__(*args)
        self.keys, self.counts, self.rows, self.written = [], [], [], []

    def process_element(self, kind, row):
        if self.expired(self.tree_written):   # the sorted map expired, and every sort key's rows with it
            self.forget(self.tree_written)
            self.keys, self.counts, self.rows, self.written = [], [], [], []
        self.tree_written = self.now
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
                self.written.insert(i, None)
            (self._accumulate_with_number if self.with_number else self._accumulate)(own, row)
            if self.expired(self.written[i]):   # (only keys after it may have gone: it is still at i)
                self.forget(self.written[i])
                self.rows[i] = []
            self.rows[i].append(row)
            self.written[i] = self.now
            return
        removed = (self._retract_with_number if self.with_number else self._retract)(own, row)
        i = bisect_left(self.keys, own)
        if i == len(self.keys) or self.keys[i] != own:   # never there, or its rows expired
            return
        self.counts[i] -= 1
        if not removed and not self.expired(self.written[i]):
            rows = self.rows[i]
            for j, r in enumerate(rows):
                if r.values == row.values:
                    del rows[j]
                    break
            self.written[i] = self.now
        if not self.counts[i]:
            del self.keys[i], self.counts[i], self.rows[i], self.written[i]

    def _stale(self, i: int) -> bool:
        """Whether sort key ``i``'s rows expired; if so it leaves the map (Flink's
        ``processStateStaled``), and ``i`` is then the next key's."""
        if not self.expired(self.written[i]):
            return False
        self.forget(self.written[i])
        del self.keys[i], self.counts[i], self.rows[i], self.written[i]
        return True

    def _accumulate_with_number(self, own, row):
        rank, current, found, i = 0, None, False, 0
        while i < len(self.keys) and rank <= self.end:
            if not found and self.keys[i] == own:
                rank += self.counts[i]
                current, found = row, True
            elif found:
                if self._stale(i):
                    continue
                for previous in self.rows[i]:
                    if rank > self.end:
                        break
                    self.retract(previous, rank)
                    self.update_after(current, rank)
                    current, rank = previous, rank + 1
            else:
                rank += self.counts[i]
            i += 1
        if rank <= self.end:
            self.insert(current, rank)

    def _accumulate(self, own, row):
        rank, found, to_collect, to_delete, i = 0, False, None, None, 0
        while i < len(self.keys) and rank <= self.end:
            count = self.counts[i]
            if not found and self.keys[i] == own:
                rank += count
                to_collect = row if self.start <= rank <= self.end else None
                found = True
            elif found:
                if self._stale(i):
                    continue
                if rank + count <= self.end:
                    rank += count
                else:
                    to_delete = self.rows[i][self.end - rank]
                    break
            else:
                rank += count
            i += 1
        if to_delete is not None:
            self.delete(to_delete)
        if to_collect is not None:
            self.insert(row)

    def _retract_with_number(self, own, row) -> bool:
        rank, previous, found, i = 0, None, False, 0
        while i < len(self.keys) and rank <= self.end:
            if not found and self.keys[i] == own:
                if self._stale(i):
                    continue
                rows, j = self.rows[i], 0
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
                self.written[i] = self.now
            elif found:
                if self._stale(i):
                    continue
                for current in self.rows[i]:
                    if rank > self.end:
                        break
                    self.retract(previous, rank)
                    self.update_after(current, rank)
                    previous, rank = current, rank + 1
            else:
                rank += self.counts[i]
            i += 1
        if rank <= self.end and previous is not None:
            self.delete(previous, rank)
        return found

    def _retract(self, own, row) -> bool:
        next_rank, found, i = 1, False, 0
        while i < len(self.keys) and next_rank <= self.end:
            count = self.counts[i]
            if not found and self.keys[i] == own:
                if self._stale(i):
                    continue
                rows, j = self.rows[i], 0
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
                self.written[i] = self.now
            elif found:
                if next_rank + count - 1 < self.end:
                    next_rank += count
                elif self._stale(i):
                    continue
                else:
                    self.insert(self.rows[i][self.end - next_rank])
                    break
            else:
                next_rank += count
            i += 1
        return found


class UpdatableTopNFunction(_TopN):
    """Top-N over updates with an upsert key whose sort key only moves up (Flink's
    ``UpdateFastStrategy``): the buffer holds row keys, ``rows`` the row of each key in it.

    With a state TTL, Flink holds the buffer in a cache that expires the TTL after it was
    loaded from state (``loaded``), and writes it to state only at a checkpoint or when the
    cache is full; the kit takes neither (a job without checkpoints whose keys fit the
    cache): the first message the TTL after the load finds the partition empty, however busy
    it was."""
    loaded = None

    def __init__(self, *args, row_key: list):
        super().__init__(*args)
        self.row_key = row_key
        self.buffer = TopNBuffer(self.key)
        self.rows = {}

    def process_element(self, kind, row):
        if self.expired(self.loaded):   # the cache expired; the state it reloads from was never written
            if self.rows:
                self.forget(self.loaded)
            self.buffer, self.rows, self.loaded = TopNBuffer(self.key), {}, None
        if self.loaded is None:
            self.loaded = self.now
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
    strategy = strategy or rank_strategy(log, partition)
    if strategy not in STRATEGIES:
        raise KitError(f"unknown Top-N strategy {strategy!r}: one of {STRATEGIES}")
    top1 = n == 1 and offset == 1 and strategy != "retract"
    if strategy == "append" and not log.insert_only:
        raise KitError("the append Top-N strategy reads an insert-only input; this one updates: "
                       "use strategy='retract'")
    if strategy == "update_fast" and (log.upsert_key is None or DELETE in log.mode
                                      or not set(partition) <= set(log.upsert_key)):
        raise KitError("the update_fast Top-N strategy needs an input without deletions whose "
                       "upsert key contains the partition keys: use strategy='retract'")
    index = {c: i for i, c in enumerate(columns)}
    args = ([index[c] for c, _, _ in order], [(a, nf) for _, a, nf in order], offset, n,
            row_number is not None, options.update_before, max(0, options.ttl_ms))
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
    df, expired = expirations(replay_per_key(log.with_df(log_df), list(partition), lambda: function(*args), options,
                                             extra), partition)
    return Changelog(df, tuple(columns + ([row_number] if row_number else [])),
                     _top_n_mode(strategy, top1, row_number is not None or offset > 1, options),
                     _top_n_key(log, partition, row_number, top1), expired=expired)


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
