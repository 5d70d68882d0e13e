"""Evictors: remove elements from a window when it fires, before and/or after the function.

PyFlink has none; these are Flink's (Java) evictors with its rules. An evictor sees the
window's elements as a list of ``TimestampedValue`` (``.value``, ``.timestamp``) in state
order and removes elements from it in place; what it leaves becomes the window's state
(Flink rewrites the state after the function). Evicting disables pre-aggregation: the
window keeps every element until it fires.

=================================  ===================================================
CountEvictor.of(n)                 keeps the last ``n`` elements (evicts from the head)
DeltaEvictor.of(threshold, delta)  evicts elements whose ``delta(element, last) >=
                                   threshold``, ``last`` being the window's last element
TimeEvictor.of(t)                  keeps elements with ``timestamp > max_timestamp - t``
=================================  ===================================================
Each takes ``do_evict_after=True`` to evict after the function instead of before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import KitError
from ..time import millis
from ..time import time_repr
from .assigners import function_repr

__all__ = ["TimestampedValue", "Evictor", "CountEvictor", "DeltaEvictor", "TimeEvictor"]


@dataclass
class TimestampedValue:
    value: Any
    timestamp: int | None

    def get_value(self):
        return self.value

    def get_timestamp(self):
        return self.timestamp

    def has_timestamp(self) -> bool:
        return self.timestamp is not None


class Evictor:
    """Base class: ``evict_before`` / ``evict_after`` remove from ``elements`` in place."""

    def evict_before(self, elements: list, size: int, window, ctx) -> None:
        pass

    def evict_after(self, elements: list, size: int, window, ctx) -> None:
        pass


class _Builtin(Evictor):
    do_evict_after = False

    def evict_before(self, elements, size, window, ctx):
        if not self.do_evict_after:
            self.evict(elements, size, window, ctx)

    def evict_after(self, elements, size, window, ctx):
        if self.do_evict_after:
            self.evict(elements, size, window, ctx)

    def _repr(self, *args) -> str:
        after = ", do_evict_after=True" if self.do_evict_after else ""
        return f"{type(self).__name__}.of({', '.join(args)}{after})"


class CountEvictor(_Builtin):
    def __init__(self, max_count: int, do_evict_after: bool = False):
        if not isinstance(max_count, int) or max_count < 0:
            raise KitError(f"CountEvictor.of(count): count must be an integer >= 0; got {max_count!r}")
        self.max_count, self.do_evict_after = max_count, do_evict_after

    @classmethod
    def of(cls, max_count: int, do_evict_after: bool = False):
        return cls(max_count, do_evict_after)

    def evict(self, elements, size, window, ctx):
        if size > self.max_count:
            del elements[:size - self.max_count]

    def __repr__(self):
        return self._repr(str(self.max_count))


class DeltaEvictor(_Builtin):
    def __init__(self, threshold: float, delta_function, do_evict_after: bool = False):
        self.delta_function = delta_function
        self.delta = getattr(delta_function, "get_delta", delta_function)
        if not callable(self.delta):
            raise KitError(f"DeltaEvictor.of(threshold, delta_function): delta_function must be callable "
                           f"(old, new) -> number; got {delta_function!r}")
        self.threshold, self.do_evict_after = threshold, do_evict_after

    @classmethod
    def of(cls, threshold: float, delta_function, do_evict_after: bool = False):
        return cls(threshold, delta_function, do_evict_after)

    def evict(self, elements, size, window, ctx):
        if not elements:
            return
        last = elements[-1].value
        elements[:] = [e for e in elements if self.delta(e.value, last) < self.threshold]

    def __repr__(self):
        return self._repr(repr(self.threshold), function_repr(self.delta_function))


class TimeEvictor(_Builtin):
    def __init__(self, window_size, do_evict_after: bool = False):
        self.window_size = millis(window_size, "TimeEvictor.of", "window_size")
        if self.window_size < 0:
            raise KitError(f"TimeEvictor.of(size): size must be >= 0 ms; got {self.window_size}")
        self.do_evict_after = do_evict_after

    @classmethod
    def of(cls, window_size, do_evict_after: bool = False):
        return cls(window_size, do_evict_after)

    def evict(self, elements, size, window, ctx):
        if not elements or any(not e.has_timestamp() for e in elements):
            return
        cutoff = max(e.timestamp for e in elements) - self.window_size
        elements[:] = [e for e in elements if e.timestamp > cutoff]

    def __repr__(self):
        return self._repr(time_repr(self.window_size))
