"""The window operators on the replay's rows (``kit.replay.keyed``): a row is the element's
``values``, then ``ELEMENT`` (``seq``, ``_ts``, ``_wm``, ``_pt``); ``KeyedWindow`` runs one
key's, ``WholeStreamWindow`` every key's in arrival order. ``datastream`` replays them on
Spark, ``timer_order`` replays a key once more with its heap logged."""

from __future__ import annotations

from pyspark.sql import Row

from ..replay.keyed import ListState, MapState
from .assigners import MIN_TIME
from .operator import Element, WholeStreamWindowOperator, WindowOperator

__all__ = ["ELEMENT", "KeyedWindow", "WholeStreamWindow", "keyed_windows"]


def _element(element_row, row, n: int) -> Element:
    """The ``Element`` of a replay row: ``n`` values, then ``seq``, ``_ts``, ``_wm``, ``_pt``."""
    seq, ts, wm, pt = row[n:n + 4]
    return Element(seq, ts, MIN_TIME if wm is None else wm, pt, element_row(*row[:n]))


class KeyedWindow(WindowOperator):
    """The ``WindowOperator`` on the replay's rows: ``values``, then ``seq``, ``_ts``,
    ``_wm``, ``_pt`` (``ELEMENT``); ``element_row`` makes a value's ``Row``. It keeps the
    key's elements (for their rows: late, fates); at the end of input its outputs are what
    ``emit(key, elements, result)`` gives."""
    state = WindowOperator.state + (ListState("elements"),)

    def __init__(self, spec, element_row, emit, **options):
        super().__init__(spec, **options)
        self.element_row, self.emit, self.n = element_row, emit, len(element_row)
        self.current = (None, None, None)   # (ctx, its operator, its elements): the key being stepped

    def process_element(self, row, ctx):
        if ctx is not self.current[0]:   # a key's state looked up once per run of its rows, not per row
            self.current = ctx, self.operator(ctx), ctx.state("elements")
        e = _element(self.element_row, row, self.n)
        self.current[2].append(e)
        self.step(self.current[1], e, ctx)

    def end_of_input(self, ctx):
        result = self.finish(ctx)
        for out in self.emit(self.operator(ctx).key, ctx.state("elements").get(), result):
            ctx.output(out)


class WholeStreamWindow(WholeStreamWindowOperator):
    """The ``WholeStreamWindowOperator`` on the replay's rows in arrival order: ``values``,
    ``ELEMENT``, then ``_own`` (the watermark the arrival emits); the key is the values at
    ``keys`` (indexes). At the end of input it outputs ``(key, elements, result)`` per key."""
    state = WholeStreamWindowOperator.state + (MapState("elements"),)

    def __init__(self, spec, element_row, keys: list, until: int | None = None):
        super().__init__(spec, until)
        self.element_row, self.n, self.key_at = element_row, len(element_row), keys

    def process_element(self, row, ctx):
        key = row[self.key_at[0]] if len(self.key_at) == 1 else tuple(row[i] for i in self.key_at)
        e = _element(self.element_row, row, self.n)
        ctx.state("elements").setdefault(key, []).append(e)
        super().process_element((key, e, row[-1]), ctx)

    def end_of_input(self, ctx):
        elements = ctx.state("elements")
        for key, result in self.finish(ctx).items():
            ctx.output((key, elements[key], result))


ELEMENT = ["seq", "_ts", "_wm", "_pt"]


def keyed_windows(values: list, spec, emit, **options):
    """``operator`` for ``kit.replay.keyed``: one ``KeyedWindow`` (``options``: ``end``,
    ``crossing``) for every key, its state kept by the driver."""
    operator = KeyedWindow(spec, Row(*values), emit, **options)
    return lambda key: operator
