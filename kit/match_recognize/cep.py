"""Flink's ``CepOperator``: MATCH_RECOGNIZE (Flink's semantics) over one key's rows as they
arrive, a ``kit.replay.keyed.KeyedOperator`` on event time.

* ``process_element``: a row whose time is at or below the watermark is late (the goldens'
  tie rule), output as such; else it waits in ``elementQueueState`` (a ``MapState``: time ->
  rows in arrival order) and an event-time timer is registered at its time;
* ``on_timer``: the rows now at or below the watermark are released in (time, the ORDER BY's
  other columns, arrival) order, as one batch, to the key's NFA (``flink.NFA``, kept in
  ``nfaState`` with the rows it has seen, which its DEFINE and MEASURES read: all of them,
  where Flink's ``SharedBuffer`` keeps only those of open matches); then WITHIN
  expires partial matches at the watermark (Flink's ``advanceTime``), and a timer is set
  for when the oldest open one expires. The completed matches are output;
* ``end_of_input``: open partial matches are dropped, and with them the matches that waited
  for them (with WITHIN they expire and release them instead).

A key's matches are those of ``matcher.run_partition`` over its rows that were not late,
in that order, however the rows are released (``tests/test_mr_cep.py``); the replay on
Spark runs that whole-partition path, as a key's rows are all at hand there.

Outputs are ``Emitted(watermark, row, match)``: a match's ONE ROW PER MATCH measures with
its ``matcher.Match`` (rows counted in release order), or a late input row (``match`` None).

>>> from kit.match_recognize.spec import Binary, Column, Concat, Label, MatchRecognize, Measure, OrderItem
>>> from kit.replay.keyed import run_key
>>> spec = MatchRecognize(pattern=Concat((Label("A"), Label("B"))), order_by=(OrderItem("t"),),
...     define=(("B", Binary(">", Column("p", "B"), Column("p", "A"))),), measures=(Measure(Column("p", "B"), "top"),))
>>> out = run_key(CepOperator(spec, ["t", "p"], rowtime="t"), [], [(1, 5), (2, 7), (3, 2), (1, 9)],
...               watermarks=[0, 0, 2, 2])
>>> [(e.watermark, e.row, e.match is not None) for e in out]   # a match at watermark 2, a late row
[(2, (7,), True), (2, (1, 9), False)]
"""

from __future__ import annotations

from operator import itemgetter
from typing import NamedTuple, Optional

import numpy as np

from ..replay.keyed import KeyedOperator, MapState, ValueState
from .expressions import to_ms
from .matcher import Match, Partition

__all__ = ["CepOperator", "Emitted"]


class Emitted(NamedTuple):
    """One output of ``CepOperator``, at ``watermark``: a match's measures (``row``) and the
    ``match``, or a late input ``row`` (``match`` None)."""
    watermark: int
    row: tuple
    match: Optional[Match] = None


class _Key:
    """One key's matcher: its released rows compiled against (``partition``), its NFA, the
    matches output so far. It pickles as data (a live driver keeps it in Spark's state
    store): the rows, the NFA's open and waiting matches and the step budget left; the
    compiled clause is made again (``CepOperator._key``) when it is next used."""
    __slots__ = ("partition", "nfa", "matches", "saved")

    def __init__(self, partition: Partition):
        self.partition, self.nfa, self.matches, self.saved = partition, partition.nfa(), 0, None

    def __getstate__(self):
        if self.partition is None:   # loaded and not used since: as it was saved
            return self.saved
        p, nfa, m = self.partition, self.nfa, self.nfa.matches
        return (p.lists, p.rows, p.budget.limit, p.budget.left, p.budget.reads[0], nfa.rows,
                m.partial, m.waiting, m.emitted, m.seq, m.floor, self.matches)

    def __setstate__(self, saved):
        self.partition, self.nfa, self.matches, self.saved = None, None, saved[-1], saved

    def restore(self, partition: Partition) -> "_Key":
        """The matcher of a loaded key, on ``partition`` (the clause compiled against no rows)."""
        lists, rows, limit, left, reads, nfa_rows, partial, waiting, emitted, seq, floor, _ = self.saved
        for name, values in lists.items():
            partition.lists[name].extend(values)
        partition.rows, partition.budget.limit, partition.budget.left = rows, limit, left
        partition.budget.reads[0] = reads
        nfa = partition.nfa()
        nfa.rows, m = nfa_rows, nfa.matches
        m.partial, m.waiting, m.emitted, m.seq, m.floor = partial, waiting, emitted, seq, floor
        self.partition, self.nfa, self.saved = partition, nfa, None
        return self


class CepOperator(KeyedOperator):
    """``spec`` (semantics "flink" or "flink-2.3") over rows of ``columns`` (tuples in that
    order), their event time the ``rowtime`` column (epoch ms, or datetimes in UTC);
    ``timestamps``: the TIMESTAMP columns (MEASURES give them as datetime64)."""
    state = (MapState("elementQueueState"), ValueState("nfaState"))

    def __init__(self, spec, columns: list, semantics: str = "flink", aggregates: dict | None = None, *,
                 rowtime: str, timestamps=(), step_budget: int | None = None):
        if semantics == "standard":
            raise ValueError("semantics='standard' has no streaming form: run it with matcher.run_partition")
        self.spec, self.columns, self.semantics, self.aggregates = spec, list(columns), semantics, aggregates
        self.rowtime, self.timestamps, self.step_budget = rowtime, set(timestamps), step_budget
        self.time = self.columns.index(rowtime)
        self.order = [(self.columns.index(o.column), o.ascending) for o in spec.order_by[1:]]
        self._partition()   # the planner's errors, here rather than at the first timer

    def _partition(self) -> Partition:
        """The clause compiled against no rows yet (a key's, as they are released)."""
        return Partition({c: [] for c in self.columns}, self.timestamps, self.spec, self.semantics,
                         self.aggregates, rowtime=self.rowtime, step_budget=self.step_budget)

    def process_element(self, row, ctx):
        t = to_ms(row[self.time])
        if t <= ctx.watermark:
            self.emit(ctx, Emitted(ctx.watermark, row))
            return
        ctx.state("elementQueueState").setdefault(t, []).append(row)
        ctx.register_event_time_timer(t)

    def on_timer(self, timestamp, ctx):
        queue, key = ctx.state("elementQueueState"), self._key(ctx)
        released = [row for t in sorted(t for t in queue if t <= ctx.watermark) for row in self._sorted(queue.pop(t))]
        if released:
            key.partition.extend({c: _objects(values) for c, values in zip(self.columns, zip(*released))})
        self._output(ctx, key, key.nfa.advance(key.partition.rows) + key.nfa.advance_time(ctx.watermark))
        expires = key.nfa.expires()
        if expires is not None:
            ctx.register_event_time_timer(expires)

    def end_of_input(self, ctx):
        if ctx.state("nfaState").value() is not None:
            key = self._key(ctx)
            self._output(ctx, key, key.nfa.finish())

    def _key(self, ctx) -> _Key:
        state = ctx.state("nfaState")
        key = state.value()
        if key is None:
            state.update(_Key(self._partition()))
        elif key.partition is None:   # unpickled: its clause compiled again
            key.restore(self._partition())
        return state.value()

    def _sorted(self, rows: list) -> list:
        """Rows of one time (in arrival order) by the ORDER BY's other columns, NULLs last."""
        for i, ascending in reversed(self.order):   # stable sorts, the last key first
            rows = (sorted((r for r in rows if r[i] is not None), key=itemgetter(i), reverse=not ascending)
                    + [r for r in rows if r[i] is None])
        return rows

    def _output(self, ctx, key: _Key, found: list):
        for R, L in found:
            key.matches += 1
            match, row = key.partition.one_row(key.matches, R, L)
            self.emit(ctx, Emitted(ctx.watermark, row, match))

    def emit(self, ctx, emitted: Emitted):
        """One output (a driver may make it a row of its own: ``kit.match_recognize.live``)."""
        ctx.output(emitted)


def _objects(values) -> np.ndarray:
    """Python values as a numpy object column (``prepare_columns`` turns them as it turns Arrow's)."""
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column
