"""Keyed state for triggers and process functions (PyFlink's state descriptors and states).

A state lives in a *namespace* (a window, or the key itself for global state) of one key.
``ValueState`` holds one value, ``ListState`` a list, ``ReducingState`` the reduction of
what was added; reducing and list states can be merged when windows merge.

    count = ctx.get_partitioned_state(ReducingStateDescriptor("count", lambda a, b: a + b))
    count.add(1); count.get()   -> 1
"""

from __future__ import annotations

from ..errors import KitError

__all__ = ["ValueStateDescriptor", "ListStateDescriptor", "ReducingStateDescriptor",
           "ValueState", "ListState", "ReducingState", "StateStore"]


class _Descriptor:
    def __init__(self, name: str, type_info=None):
        if not isinstance(name, str) or not name:
            raise KitError(f"a state descriptor needs a name; got {name!r}")
        self.name, self.type_info = name, type_info


class ValueStateDescriptor(_Descriptor):
    """``ValueStateDescriptor(name, type_info=None)``: one value, None until updated."""


class ListStateDescriptor(_Descriptor):
    """``ListStateDescriptor(name, type_info=None)``: a list of values."""


class ReducingStateDescriptor(_Descriptor):
    """``ReducingStateDescriptor(name, reduce_function, type_info=None)``."""

    def __init__(self, name: str, reduce_function, type_info=None):
        super().__init__(name, type_info)
        self.reduce = getattr(reduce_function, "reduce", reduce_function)
        if not callable(self.reduce):
            raise KitError(f"ReducingStateDescriptor {name!r} needs a reduce function; got {reduce_function!r}")


class _State:
    def __init__(self, store: "StateStore", namespace, name: str):
        self._store, self._key = store, (namespace, name)

    def _get(self):
        return self._store.values.get(self._key)

    def _set(self, value):
        if value is None:
            self._store.values.pop(self._key, None)
        else:
            self._store.values[self._key] = value

    def clear(self):
        self._set(None)


class ValueState(_State):
    def value(self):
        return self._get()

    def update(self, value):
        self._set(value)


class ListState(_State):
    def get(self):
        return list(self._get() or [])

    def add(self, value):
        self._set((self._get() or []) + [value])

    def add_all(self, values):
        self._set((self._get() or []) + list(values))

    def update(self, values):
        self._set(list(values) or None)


class ReducingState(_State):
    def __init__(self, store, namespace, name, reduce):
        super().__init__(store, namespace, name)
        self._reduce = reduce

    def get(self):
        return self._get()

    def add(self, value):
        current = self._get()
        self._set(value if current is None else self._reduce(current, value))


class StateStore:
    """The states of one key: ``values[(namespace, name)]``."""

    def __init__(self):
        self.values = {}

    def state(self, namespace, descriptor):
        if isinstance(descriptor, ReducingStateDescriptor):
            return ReducingState(self, namespace, descriptor.name, descriptor.reduce)
        if isinstance(descriptor, ListStateDescriptor):
            return ListState(self, namespace, descriptor.name)
        if isinstance(descriptor, ValueStateDescriptor):
            return ValueState(self, namespace, descriptor.name)
        raise KitError(f"unknown state descriptor {descriptor!r}; use ValueStateDescriptor, "
                       "ListStateDescriptor or ReducingStateDescriptor")

    def merge(self, target, sources, descriptor):
        """Merge the states of ``sources`` into ``target`` (Flink's ``mergeNamespaces``)."""
        if isinstance(descriptor, ValueStateDescriptor):
            raise KitError(f"state {descriptor.name!r} is a ValueState, which cannot be merged; "
                           "use a ReducingStateDescriptor or ListStateDescriptor in a merging trigger")
        merged = None
        for source in sources:
            value = self.values.pop((source, descriptor.name), None)
            if value is not None:
                merged = value if merged is None else self._combine(descriptor, merged, value)
        if merged is not None:
            current = self.values.get((target, descriptor.name))
            self.values[(target, descriptor.name)] = (merged if current is None
                                                      else self._combine(descriptor, current, merged))

    @staticmethod
    def _combine(descriptor, a, b):
        if isinstance(descriptor, ReducingStateDescriptor):
            return descriptor.reduce(a, b)
        return a + b

    def clear_namespace(self, namespace):
        for key in [k for k in self.values if k[0] == namespace]:
            del self.values[key]
