"""Triggers: when a window's function runs (Flink's ``Trigger`` and the built-in ones).

A trigger answers each element, event-time timer and processing-time timer of a window
with a ``TriggerResult``: CONTINUE, FIRE (run the function, keep the contents), PURGE
(drop the contents) or FIRE_AND_PURGE. Through its context it registers timers and keeps
per-window state. Subclass ``Trigger`` for your own; the built-ins behave as Flink's:

=============================  =====================================================
EventTimeTrigger               fires when the watermark passes ``window.max_timestamp``
                               (at once for an element of a window already passed)
ProcessingTimeTrigger          fires when the processing clock passes it
CountTrigger.of(n)             fires every ``n`` elements of the window
PurgingTrigger.of(t)           ``t``, with every FIRE turned into FIRE_AND_PURGE
ContinuousEventTimeTrigger     fires every ``interval`` of event time (aligned to
  .of(interval)                multiples of it) and at the window's end
ContinuousProcessingTime...    the same on the processing clock
NeverTrigger                   never fires (GlobalWindows' default)
=============================  =====================================================
"""

from __future__ import annotations

from enum import Enum

from ..errors import KitError
from ..time import millis, time_repr
from .state import ReducingStateDescriptor

__all__ = ["TriggerResult", "Trigger", "EventTimeTrigger", "ProcessingTimeTrigger",
           "CountTrigger", "PurgingTrigger", "ContinuousEventTimeTrigger",
           "ContinuousProcessingTimeTrigger", "NeverTrigger"]


class TriggerResult(Enum):
    CONTINUE = (False, False)
    FIRE = (True, False)
    PURGE = (False, True)
    FIRE_AND_PURGE = (True, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class Trigger:
    """Base class: override the ``on_*`` methods you need (the defaults CONTINUE)."""

    def on_element(self, element, timestamp: int, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window, ctx) -> None:
        raise KitError(f"{type(self).__name__} does not support merging windows (sessions): "
                       "override can_merge() and on_merge()")

    def clear(self, window, ctx) -> None:
        pass

    def __repr__(self):
        return f"{type(self).__name__}()"


class EventTimeTrigger(Trigger):
    @classmethod
    def create(cls):
        return cls()

    def on_element(self, element, timestamp, window, ctx):
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE   # the watermark is past the window already: a late firing
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self):
        return True

    def on_merge(self, window, ctx):
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window, ctx):
        ctx.delete_event_time_timer(window.max_timestamp())

    def __repr__(self):
        return "EventTimeTrigger.create()"


class ProcessingTimeTrigger(Trigger):
    @classmethod
    def create(cls):
        return cls()

    def on_element(self, element, timestamp, window, ctx):
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        return TriggerResult.FIRE

    def can_merge(self):
        return True

    def on_merge(self, window, ctx):
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window, ctx):
        ctx.delete_processing_time_timer(window.max_timestamp())

    def __repr__(self):
        return "ProcessingTimeTrigger.create()"


def _sum(a, b):
    return a + b


def _min(a, b):
    return min(a, b)


class CountTrigger(Trigger):
    def __init__(self, max_count: int):
        if not isinstance(max_count, int) or max_count <= 0:
            raise KitError(f"CountTrigger.of(count): count must be an integer > 0; got {max_count!r}")
        self.max_count = max_count
        self.state = ReducingStateDescriptor("count", _sum)

    @classmethod
    def of(cls, max_count: int):
        return cls(max_count)

    def on_element(self, element, timestamp, window, ctx):
        count = ctx.get_partitioned_state(self.state)
        count.add(1)
        if count.get() >= self.max_count:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self):
        return True

    def on_merge(self, window, ctx):
        ctx.merge_partitioned_state(self.state)

    def clear(self, window, ctx):
        ctx.get_partitioned_state(self.state).clear()

    def __repr__(self):
        return f"CountTrigger.of({self.max_count})"


class PurgingTrigger(Trigger):
    def __init__(self, nested: Trigger):
        if not isinstance(nested, Trigger):
            raise KitError(f"PurgingTrigger.of(trigger) needs a Trigger; got {nested!r}")
        self.nested = nested

    @classmethod
    def of(cls, nested: Trigger):
        return cls(nested)

    @staticmethod
    def _purging(result):
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element, timestamp, window, ctx):
        return self._purging(self.nested.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time, window, ctx):
        return self._purging(self.nested.on_event_time(time, window, ctx))

    def on_processing_time(self, time, window, ctx):
        return self._purging(self.nested.on_processing_time(time, window, ctx))

    def can_merge(self):
        return self.nested.can_merge()

    def on_merge(self, window, ctx):
        self.nested.on_merge(window, ctx)

    def clear(self, window, ctx):
        self.nested.clear(window, ctx)

    def __repr__(self):
        return f"PurgingTrigger.of({self.nested!r})"


class _Continuous(Trigger):
    def __init__(self, interval):
        self.interval = millis(interval, f"{type(self).__name__}.of", "interval")
        if self.interval <= 0:
            raise KitError(f"{type(self).__name__}.of(interval): interval must be > 0 ms; got {self.interval}")
        self.state = ReducingStateDescriptor("fire-time", _min)

    @classmethod
    def of(cls, interval):
        return cls(interval)

    def _first(self, time):
        # Java's %: the remainder has the sign of the dividend
        return time - (abs(time) % self.interval) * (1 if time >= 0 else -1)

    def _register_next(self, time, window, ctx):
        next_fire = min(time + self.interval, window.max_timestamp())
        ctx.get_partitioned_state(self.state).add(next_fire)
        self._register(ctx, next_fire)

    def can_merge(self):
        return True

    def on_merge(self, window, ctx):
        ctx.merge_partitioned_state(self.state)
        next_fire = ctx.get_partitioned_state(self.state).get()
        if next_fire is not None:
            self._register(ctx, next_fire)

    def clear(self, window, ctx):
        state = ctx.get_partitioned_state(self.state)
        if state.get() is not None:
            self._delete(ctx, state.get())
            state.clear()

    def __repr__(self):
        return f"{type(self).__name__}.of({time_repr(self.interval)})"


class ContinuousEventTimeTrigger(_Continuous):
    _register = staticmethod(lambda ctx, t: ctx.register_event_time_timer(t))
    _delete = staticmethod(lambda ctx, t: ctx.delete_event_time_timer(t))

    def on_element(self, element, timestamp, window, ctx):
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        if ctx.get_partitioned_state(self.state).get() is None:
            self._register_next(self._first(timestamp), window, ctx)
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        state = ctx.get_partitioned_state(self.state)
        if state.get() is not None and state.get() == time:
            state.clear()
            self._register_next(time, window, ctx)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_Continuous):
    _register = staticmethod(lambda ctx, t: ctx.register_processing_time_timer(t))
    _delete = staticmethod(lambda ctx, t: ctx.delete_processing_time_timer(t))

    def on_element(self, element, timestamp, window, ctx):
        if ctx.get_partitioned_state(self.state).get() is None:
            now = ctx.get_current_processing_time()
            self._register_next(self._first(now), window, ctx)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        state = ctx.get_partitioned_state(self.state)
        if state.get() == time:
            state.clear()
            self._register_next(time, window, ctx)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE


class NeverTrigger(Trigger):
    """GlobalWindows' default trigger: never fires."""

    def can_merge(self):
        return True

    def on_merge(self, window, ctx):
        pass
