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

from ..errors import KitError

__all__ = ["ReduceFunction", "AggregateFunction", "FoldFunction", "ProcessWindowFunction",
           "WindowFunction", "ProcessAllWindowFunction", "AllWindowFunction", "Contents"]


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
