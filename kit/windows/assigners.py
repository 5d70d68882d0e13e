"""Window assigners: which windows an element belongs to (Flink's ``WindowAssigner``s).

Times are epoch milliseconds. A window ``[start, end)`` holds timestamps ``start ..
end - 1``; ``max_timestamp = end - 1`` is when event time has passed it. Window starts
follow Flink's formula ``start = ts - (ts - offset) mod size`` (the remainder taken
non-negative), so an offset of ``Time.hours(-8)`` aligns daily windows to UTC+8 midnight.
The arithmetic is Java's ``long``, as in Flink: near ``Long.MAX_VALUE`` a window's end
overflows (``end < start``, and the window is over as soon as the watermark rises), near
``Long.MIN_VALUE`` its start does -- Flink's answer on the whole BIGINT range.

    TumblingEventTimeWindows.of(Time.seconds(5))          ts 7000 -> [5000, 10000)
    SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))
                                                          ts 7000 -> [5000, 15000), [0, 10000)
    EventTimeSessionWindows.with_gap(Time.seconds(3))     ts 7000 -> [7000, 10000), merged
                                                          with every window it touches
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

from ..errors import KitError
from ..time import millis, time_repr
from .triggers import EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger

__all__ = ["TimeWindow", "GlobalWindow", "WindowAssigner", "MergingWindowAssigner",
           "TumblingEventTimeWindows", "TumblingProcessingTimeWindows",
           "SlidingEventTimeWindows", "SlidingProcessingTimeWindows",
           "EventTimeSessionWindows", "ProcessingTimeSessionWindows", "GlobalWindows",
           "MIN_TIME", "MAX_TIME", "java_long"]

MIN_TIME = -2 ** 63      # Long.MIN_VALUE: no watermark yet
MAX_TIME = 2 ** 63 - 1   # Long.MAX_VALUE: end of input


def java_long(value: int) -> int:
    """``value`` as a Java ``long`` holds it: wrapped into ``Long.MIN_VALUE .. Long.MAX_VALUE``
    (``java_long(MAX_TIME + 1) == MIN_TIME``), as Flink's window arithmetic overflows."""
    return value if MIN_TIME <= value <= MAX_TIME else (value - MIN_TIME) % 2 ** 64 + MIN_TIME


def function_repr(f) -> str:
    return getattr(f, "__name__", None) or repr(f)


class TimeWindow(NamedTuple):
    """``[start, end)`` in epoch milliseconds (a tuple: windows are hashed and compared
    for every element, and a tuple does both in C)."""
    start: int
    end: int

    def max_timestamp(self) -> int:
        return self.end - 1 if self.end != MIN_TIME else MAX_TIME   # Java's end - 1

    def intersects(self, other: "TimeWindow") -> bool:
        """True when the windows overlap or touch (Flink merges touching sessions)."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    def java_hash(self) -> int:
        """``TimeWindow.hashCode()``, Flink's ``MathUtils.longToIntWithBitMixing(start + end)``:
        the iteration order of Flink's merge sets depends on it."""
        x = (self.start + self.end) & 0xFFFFFFFFFFFFFFFF
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 31)) & 0xFFFFFFFF
        return x - (1 << 32) if x & 0x80000000 else x

    def __repr__(self) -> str:
        return f"TimeWindow{{start={self.start}, end={self.end}}}"


@dataclass(frozen=True)
class GlobalWindow:
    """The one window of ``GlobalWindows``: it never ends."""
    start = None
    end = None

    def max_timestamp(self) -> int:
        return MAX_TIME

    def __repr__(self) -> str:
        return "GlobalWindow"


def window_start(timestamp: int, offset: int, size: int) -> int:
    """Flink's ``TimeWindow.getWindowStartWithOffset``, in Java's ``long`` arithmetic."""
    remainder = java_long(timestamp - offset) % size   # Python's % is already non-negative here
    return java_long(timestamp - remainder)


class WindowAssigner:
    """Assigns each element to zero or more windows. ``event_time`` says which clock the
    windows follow; ``default_trigger()`` is the trigger used without ``.trigger(...)``."""

    event_time = True
    merging = False

    def assign_windows(self, element, timestamp: int, processing_time: int | None) -> list:
        raise NotImplementedError

    def default_trigger(self):
        raise NotImplementedError

    def _time(self, timestamp, processing_time):
        if self.event_time:
            if timestamp is None or timestamp == MIN_TIME:
                raise KitError(f"{type(self).__name__} needs an event time on every element: the record "
                               "has no timestamp (use kit.stream(df, time=...))")
            return timestamp
        if processing_time is None:
            raise KitError(f"{type(self).__name__} needs processing time: build the stream with "
                           "proctime=Clock(...) or a proctime column")
        return processing_time


class MergingWindowAssigner(WindowAssigner):
    merging = True

    @staticmethod
    def merge_windows(windows) -> list:
        """Flink's ``TimeWindow.mergeWindows``: ``[(merged window, [windows merged into it])]``
        for every group of more than one window, the groups' windows in start order."""
        out, current, members = [], None, []
        for w in sorted(windows, key=lambda w: w.start):
            if current is not None and current.intersects(w):
                current = current.cover(w)
                if w not in members:   # a set: an equal window is the same window
                    members.append(w)
            else:
                if len(members) > 1:
                    out.append((current, members))
                current, members = w, [w]
        if len(members) > 1:
            out.append((current, members))
        return out


class _Tumbling(WindowAssigner):
    def __init__(self, size, offset=None):
        of = f"{type(self).__name__}.of"
        self.size = millis(size, of, "size")
        self.offset = 0 if offset is None else millis(offset, of, "offset")
        if self.size <= 0 or abs(self.offset) >= self.size:
            raise KitError(f"{type(self).__name__} parameters must satisfy abs(offset) < size and "
                           f"size > 0; got size={self.size} ms, offset={self.offset} ms")

    def assign_windows(self, element, timestamp, processing_time):
        t = self._time(timestamp, processing_time)
        start = window_start(t, self.offset, self.size)
        return [TimeWindow(start, java_long(start + self.size))]

    def __repr__(self):
        return f"{type(self).__name__}.of({_times(self.size, offset=self.offset)})"


class _Sliding(WindowAssigner):
    def __init__(self, size, slide, offset=None):
        of = f"{type(self).__name__}.of"
        self.size, self.slide = millis(size, of, "size"), millis(slide, of, "slide")
        self.offset = 0 if offset is None else millis(offset, of, "offset")
        if self.size <= 0 or self.slide <= 0 or abs(self.offset) >= self.slide:
            raise KitError(f"{type(self).__name__} parameters must satisfy abs(offset) < slide and "
                           f"size > 0 (and slide > 0); got size={self.size} ms, slide={self.slide} ms, "
                           f"offset={self.offset} ms")

    def assign_windows(self, element, timestamp, processing_time):
        t = self._time(timestamp, processing_time)
        out, start, low = [], window_start(t, self.offset, self.slide), java_long(t - self.size)
        for _ in range(-(-self.size // self.slide)):   # Flink's loop, but never around the long range
            if start <= low:
                break
            out.append(TimeWindow(start, java_long(start + self.size)))
            start = java_long(start - self.slide)
        return out

    def __repr__(self):
        return f"{type(self).__name__}.of({_times(self.size, self.slide, offset=self.offset)})"


class _Session(MergingWindowAssigner):
    def __init__(self, gap=None, extractor: Callable | None = None):
        self.gap = None if gap is None else millis(gap, f"{type(self).__name__}.with_gap", "gap")
        self.extractor = extractor
        if self.gap is not None and self.gap <= 0:
            raise KitError(f"{type(self).__name__} parameters must satisfy 0 < gap; got gap={self.gap} ms")

    def assign_windows(self, element, timestamp, processing_time):
        t = self._time(timestamp, processing_time)
        gap = self.gap
        if self.extractor is not None:
            extract = getattr(self.extractor, "extract", self.extractor)
            gap = extract(element)
            if type(gap) is not int:   # Flink's extractor returns a long: milliseconds
                gap = millis(gap, f"{type(self).__name__}.with_dynamic_gap", f"the gap returned for {element!r}",
                             kinds="an int (milliseconds), a Duration or a timedelta", bare_ms=True)
            if gap <= 0:
                raise KitError(f"Dynamic gap can not be negative or zero: the extractor returned {gap} ms "
                               f"for {element!r}")
        return [TimeWindow(t, java_long(t + gap))]

    def __repr__(self):
        if self.extractor is None:
            return f"{type(self).__name__}.with_gap({time_repr(self.gap)})"
        return f"{type(self).__name__}.with_dynamic_gap({function_repr(self.extractor)})"


class _EventTime:
    event_time = True

    def default_trigger(self):
        return EventTimeTrigger.create()


class _ProcessingTime:
    event_time = False

    def default_trigger(self):
        return ProcessingTimeTrigger.create()


class TumblingEventTimeWindows(_EventTime, _Tumbling):
    """``TumblingEventTimeWindows.of(size, offset=None)``."""
    of = classmethod(lambda cls, size, offset=None: cls(size, offset))


class TumblingProcessingTimeWindows(_ProcessingTime, _Tumbling):
    """``TumblingProcessingTimeWindows.of(size, offset=None)``: by the arrival's processing time."""
    of = classmethod(lambda cls, size, offset=None: cls(size, offset))


class SlidingEventTimeWindows(_EventTime, _Sliding):
    """``SlidingEventTimeWindows.of(size, slide, offset=None)``."""
    of = classmethod(lambda cls, size, slide, offset=None: cls(size, slide, offset))


class SlidingProcessingTimeWindows(_ProcessingTime, _Sliding):
    """``SlidingProcessingTimeWindows.of(size, slide, offset=None)``."""
    of = classmethod(lambda cls, size, slide, offset=None: cls(size, slide, offset))


class EventTimeSessionWindows(_EventTime, _Session):
    """``EventTimeSessionWindows.with_gap(gap)`` or ``.with_dynamic_gap(extractor)``, where the
    extractor (a function of the element, or an object with ``extract``) gives the gap."""
    with_gap = classmethod(lambda cls, gap: cls(gap=gap))
    with_dynamic_gap = classmethod(lambda cls, extractor: cls(extractor=extractor))


class ProcessingTimeSessionWindows(_ProcessingTime, _Session):
    """``ProcessingTimeSessionWindows.with_gap(gap)`` or ``.with_dynamic_gap(extractor)``."""
    with_gap = classmethod(lambda cls, gap: cls(gap=gap))
    with_dynamic_gap = classmethod(lambda cls, extractor: cls(extractor=extractor))


class GlobalWindows(WindowAssigner):
    """``GlobalWindows.create()``: one window per key that never ends; its default trigger
    never fires, so give it one (``count_window`` does)."""
    event_time = False   # Flink: not an event-time assigner, so nothing is ever late

    @classmethod
    def create(cls):
        return cls()

    def assign_windows(self, element, timestamp, processing_time):
        return [GlobalWindow()]

    def default_trigger(self):
        return NeverTrigger()

    def __repr__(self):
        return "GlobalWindows.create()"


def _times(*ms: int, offset: int = 0) -> str:
    """The arguments of ``of(...)``: the times, then the offset when it is not zero."""
    return ", ".join(time_repr(t) for t in ms + ((offset,) if offset else ()))
