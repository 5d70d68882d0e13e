"""Flink's ``WindowOperator`` (and ``EvictingWindowOperator``) for one key, in pure Python.

This is the reference the Spark execution must equal: ``WindowOperator``, a
``kit.replay.keyed.KeyedOperator`` that the replay driver steps element by element
(``run_key(key, elements, spec)``: one key; ``WholeStreamWindowOperator`` and ``replay``:
every key in one operator, as Flink at parallelism 1). Before each element the watermark it
met (``Element.watermark``) and its processing time are applied: event-time timers up to the
watermark fire first, then processing-time timers up to the clock. Then the element:

1. assign windows (by event time, or by processing time);
2. merging assigners (sessions): merge with the windows it touches, as Flink's
   ``MergingWindowSet`` does (the surviving state is the first merged window's in Java
   ``HashSet`` order; the trigger's ``on_merge``; cleanup timers of merged windows deleted);
3. drop the window if ``cleanup_time = max_timestamp + allowed_lateness <= watermark``
   (event time only);
4. add the element to the window's state, ask the trigger, FIRE and/or PURGE, and
   register the cleanup timer.

An element no window accepted is *late* if ``timestamp + allowed_lateness <= watermark``
(it goes to the late side output); otherwise it fell between windows (sliding windows
with slide > size) -- Flink drops it without a trace, the kit records it. At the end of
input the watermark becomes ``Long.MAX_VALUE`` (every event-time timer fires); the
processing clock stops, so processing-time windows not yet fired stay *pending*. A window
whose timers keep firing there (``ContinuousEventTimeTrigger`` on ``GlobalWindows`` fires
every interval up to ``Long.MAX_VALUE``: Flink never finishes) is an error after
``MAX_FIRINGS_AT_END`` firings.

Every element ends with one fate: ``fired`` (in the contents of at least one firing),
``late``, ``evicted`` (removed by an evictor before any firing saw it), ``expired``
(its window was purged or cleaned up before firing with it), ``pending`` (still in a
window at the end) or ``no window``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..errors import KitError
from ..replay import keyed
from ..replay.keyed import KeyedOperator, ValueState
from .assigners import MAX_TIME, MIN_TIME, GlobalWindow, GlobalWindows, java_long
from .evictors import TimestampedValue
from .functions import Contents
from .state import StateStore
from .triggers import PurgingTrigger, Trigger

__all__ = ["Element", "WindowSpec", "Firing", "KeyResult", "WindowOperator", "WholeStreamWindowOperator", "run_key",
           "replay", "timer_clocks", "FATES", "MAX_FIRINGS_AT_END"]

FATES = ("fired", "late", "evicted", "expired", "pending", "no window")
MAX_FIRINGS_AT_END = 100_000   # timer firings of one window at the end of input before they count as endless


@dataclass
class Element:
    """One arrival: its arrival number, event time (ms), the watermark it met (ms,
    ``MIN_TIME`` for none), its processing time (ms or None) and its value (a Row)."""
    seq: int
    timestamp: Optional[int]
    watermark: int
    proctime: Optional[int]
    value: Any


@dataclass
class WindowSpec:
    """Everything ``window(...)...reduce(...)`` said. ``function``: None (the values from
    ``contents``), or ``(kind, f)`` with kind in "process", "apply", "process_all", "apply_all"."""
    assigner: Any
    trigger: Trigger
    contents: Contents
    function: Optional[tuple] = None
    evictor: Any = None
    allowed_lateness: int = 0


@dataclass
class Firing:
    """One firing of one window. ``cause``: "element", "event-time timer" or
    "processing-time timer"; ``timer`` is the timer's time. ``watermark``/``proctime`` are
    what the operator saw (for event-time timers: known once the global watermark is
    placed, see ``kit.windows.stream``). ``seqs``: the elements in the contents."""
    window: Any
    outputs: list
    kind: str
    pane: int
    cause: str
    timer: Optional[int]
    watermark: int
    proctime: Optional[int]
    fired_after: Optional[int]
    seqs: list
    floor: Optional[int] = None   # a timer firing's: see _Operator.floors


@dataclass
class KeyResult:
    firings: list = field(default_factory=list)
    late: list = field(default_factory=list)          # (seq, watermark)
    fates: dict = field(default_factory=dict)         # seq -> fate


def _java_hash_order(windows: list) -> list:
    """The iteration order of a Java ``HashSet`` holding ``windows`` inserted in this order."""
    capacity = 16
    while len(windows) > capacity * 3 // 4:
        capacity *= 2

    def bucket(w):
        h = w.java_hash() & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return [w for _, _, w in sorted((bucket(w), i, w) for i, w in enumerate(windows))]


class _Context:
    """The trigger context, the process-function context and the evictor context at once:
    one key, one window at a time."""

    def __init__(self, op: "_Operator"):
        self.op, self.current_window, self.merged = op, None, ()

    # TriggerContext
    def get_current_watermark(self) -> int:
        return self.op.watermark

    def get_current_processing_time(self) -> int:
        if self.op.proctime is None:
            raise KitError("this stream has no processing time: build it with proctime=Clock(...) "
                           "or a proctime column")
        return self.op.proctime

    def register_event_time_timer(self, time: int):
        self.op.timers[0].add(self.op, time, self.current_window, self.op.floors[0])

    def register_processing_time_timer(self, time: int):
        self.op.timers[1].add(self.op, time, self.current_window, self.op.floors[1])

    def delete_event_time_timer(self, time: int):
        self.op.timers[0].delete(self.op, time, self.current_window)

    def delete_processing_time_timer(self, time: int):
        self.op.timers[1].delete(self.op, time, self.current_window)

    def get_partitioned_state(self, descriptor):
        return self.op.trigger_state.state(self.current_window, descriptor)

    def merge_partitioned_state(self, descriptor):
        self.op.trigger_state.merge(self.current_window, self.merged, descriptor)

    # ProcessWindowFunction.Context
    def window(self):
        return self.current_window

    def current_watermark(self) -> int:
        return self.get_current_watermark()

    def current_processing_time(self) -> int:
        return self.get_current_processing_time()

    def window_state(self):
        return _KeyedStateStore(self.op.function_state, self.current_window)

    def global_state(self):
        return _KeyedStateStore(self.op.function_state, "global")


class _KeyedStateStore:
    def __init__(self, store, namespace):
        self.store, self.namespace = store, namespace

    def get_state(self, descriptor):
        return self.store.state(self.namespace, descriptor)

    get_list_state = get_reducing_state = get_state


class _Timer:
    """One timer: Flink's ``TimerHeapInternalTimer`` (time, key, namespace = window), with its
    place in the heap and the placement's ``floor``."""
    __slots__ = ("time", "owner", "window", "floor", "index")

    def __init__(self, time, owner, window, floor):
        self.time, self.owner, self.window, self.floor, self.index = time, owner, window, floor, 0


class TimerHeap:
    """The timers of one clock as Flink keeps them (heap state backend): a
    ``HeapPriorityQueueSet`` -- one binary heap (an array from index 1) for every key of the
    operator, ordered by time alone, with set semantics on (time, key, window): a timer
    registered again is ignored (it keeps its first ``floor``). Timers at the same time fire
    in the order the heap's sift-up, sift-down and removals leave them, not in registration
    order: a deletion moves the heap's last timer into the hole, and every key's timers share
    the array, so another key's timers move a key's ties too. ``replay`` gives the keys one
    heap (the whole stream in one operator, as Flink at parallelism 1); ``run_key``, a key
    alone, a heap of its own."""

    def __init__(self, log: list | None = None):
        self.queue, self.live = [None], {}
        # what changed the heap, for kit/windows/timer_order.py: ("add" | "delete" | "poll",
        # time, window, floor) of each timer that entered, left or fired
        self.log = log

    def add(self, owner, time: int, window, floor):
        ident = (time, owner, window)
        if ident not in self.live:
            timer = self.live[ident] = _Timer(time, owner, window, floor)
            self.queue.append(timer)
            timer.index = len(self.queue) - 1
            self._sift_up(timer.index)
            if self.log is not None:
                self.log.append(("add", time, window, floor))

    def delete(self, owner, time: int, window):
        timer = self.live.pop((time, owner, window), None)
        if timer is not None:
            self._remove_at(timer.index)
            if self.log is not None:
                self.log.append(("delete", time, window, timer.floor))

    def poll_until(self, limit: int):
        """The head timer if its time is at or before ``limit`` (removed), else None."""
        if len(self.queue) < 2 or self.queue[1].time > limit:
            return None
        timer = self.queue[1]
        self._remove_at(1)
        del self.live[(timer.time, timer.owner, timer.window)]
        if self.log is not None:
            self.log.append(("poll", timer.time, timer.window, timer.floor))
        return timer

    def _move(self, timer, i):
        self.queue[i] = timer
        timer.index = i

    def _remove_at(self, i):
        """``removeInternal``: the last timer takes the hole, then moves up or down (the
        array still holds it at the end while it sifts)."""
        q = self.queue
        size = len(q) - 1
        if i != size:
            last = q[size]
            self._move(last, i)
            parent = q[i >> 1]
            if parent is not None and last.time < parent.time:
                self._sift_up(i)
            else:
                self._sift_down(i, size)
        q.pop()

    def _sift_up(self, i):
        q = self.queue
        timer, parent = q[i], i >> 1
        while parent > 0 and timer.time < q[parent].time:
            self._move(q[parent], i)
            i, parent = parent, parent >> 1
        self._move(timer, i)

    def _sift_down(self, i, size):
        q = self.queue
        timer = q[i]
        child = i << 1
        if child + 1 <= size and q[child + 1].time < q[child].time:
            child += 1
        while child <= size and q[child].time < timer.time:
            self._move(q[child], i)
            i, child = child, child << 1
            if child + 1 <= size and q[child + 1].time < q[child].time:
                child += 1
        self._move(timer, i)


def _fire_timers(heap: TimerHeap, limit: int, event_time: bool):
    """Every timer of ``heap`` up to ``limit``, in the heap's order, each on its operator
    (those the firings register too)."""
    last, at_end = None, {} if event_time and limit == MAX_TIME else None
    while (timer := heap.poll_until(limit)) is not None:
        op = timer.owner
        if last is not None and last.owner is op:
            _not_again((timer.time, timer.window), (last.time, last.window),
                       "event-time" if event_time else "processing-time")
        last = timer
        if at_end is not None:
            op._not_endless(timer.window, at_end)
        if event_time:
            op.floors = (max(timer.time, timer.floor), _next(op.last_seq))
        else:
            op.proctime = timer.time if op.proctime is None else max(op.proctime, timer.time)
            op.floors = (_next(op.watermark), timer.floor)
        if event_time and op.crossing is not None:   # a key alone: the watermark that crossed the timer
            now, op.watermark = op.watermark, op.crossing(op.floors[0])
            op.on_timer(timer.time, timer.window, timer.floor, event_time=True)
            op.watermark = now
        else:
            op.on_timer(timer.time, timer.window, timer.floor, event_time=event_time)


class _Operator:
    def __init__(self, key, spec: WindowSpec, timers: tuple | None = None, crossing=None):
        self.key, self.spec = key, spec
        self.assigner, self.trigger = spec.assigner, spec.trigger
        self.event_time = spec.assigner.event_time
        self.merging = spec.assigner.merging
        self.watermark, self.proctime = MIN_TIME, None
        self.timers = timers or (TimerHeap(), TimerHeap())   # event time, processing time
        # a key replayed alone sees the watermark only at its arrivals; ``crossing(t)`` gives the
        # first watermark of the whole stream at or above ``t`` (Long.MAX_VALUE: none), the one
        # that fired an event-time timer there, for the trigger and the function to read
        self.crossing = crossing
        self.trigger_state, self.function_state = StateStore(), StateStore()
        self.contents = {}        # state window -> [state, seqs], updated in place
        self.mapping = {}         # merging: window -> state window
        self.panes = {}           # window -> firings so far
        self.on_time_done = set()
        self.ctx = _Context(self)
        self.result = KeyResult()
        self.fired_seqs, self.evicted_seqs, self.dropped_seqs = set(), set(), set()
        self.seen = []            # the seqs of the elements, in arrival order
        self.wakes = [None, None]   # see _wake
        self.timer_firings = None   # a list that gets its timer firings too (_Keys.fire stamps them)
        self.current = None       # (cause, timer, fired_after, timer floor) of what is being processed
        # The floors of the timers registered now, for their placement on the whole stream
        # (kit/windows/placement.py). An event-time timer fires after the first arrival whose
        # own watermark reaches max(time, floor): registered at an element, the floor is
        # the watermark then + 1 (a timer behind the watermark waits for it to move); at an
        # event-time firing, that timer's max(time, floor). A processing-time timer fires
        # before the first arrival at or after its floor (a seq) whose processing time
        # reaches its time (one the clock had reached when an element registered it: right
        # after that element): registered at an element, the next arrival; at a
        # processing-time firing, that timer's floor. Across clocks (user triggers only),
        # the floor is this key's: its watermark + 1, its last arrival + 1.
        self.floors, self.last_seq = (MIN_TIME, MIN_TIME), MIN_TIME
        if self.merging and not self.trigger.can_merge():
            raise KitError(f"{self.trigger!r} cannot be used with the merging assigner {self.assigner!r}: "
                           "its can_merge() is False")

    # ------------------------------------------------------------ time

    def advance_watermark(self, watermark: int):
        """The watermark moves first, then every event-time timer up to it fires (those the
        firings register too), as Flink's timer service does; a watermark that does not move
        fires nothing (Flink emits only rising watermarks)."""
        if watermark <= self.watermark:
            return
        self.watermark = watermark
        _fire_timers(self.timers[0], watermark, event_time=True)

    def _not_endless(self, window, fired: dict):
        """Counts ``window``'s timer firings at the end of input in ``fired``: a trigger that
        registers its next timer every interval up to the window's end fires without end once
        the watermark jumps to +inf (ContinuousEventTimeTrigger on GlobalWindows: every
        interval up to Long.MAX_VALUE), and Flink spins on it too."""
        n = fired[(self, window)] = fired.get((self, window), 0) + 1
        if n > MAX_FIRINGS_AT_END:
            raise KitError(
                f"window {window!r} fired {MAX_FIRINGS_AT_END:,} times at the end of input and {self.trigger!r} "
                f"registers its next timer every time, up to the window's end ({window.max_timestamp()}): when "
                "the input ends the watermark jumps to +inf (Long.MAX_VALUE), so Flink would not finish either. "
                "Use windows that end with the data (an event-time assigner) or a trigger without periodic timers")

    def advance_processing_time(self, time):
        """The clock runs to ``time``; each processing-time timer fires at its own time."""
        if time is None:
            return
        _fire_timers(self.timers[1], time, event_time=False)
        self.proctime = time if self.proctime is None else max(self.proctime, time)

    # ------------------------------------------------------------ elements

    def cleanup_time(self, window) -> int:
        if not self.event_time:
            return window.max_timestamp()
        t = window.max_timestamp() + self.spec.allowed_lateness
        return t if t <= MAX_TIME else MAX_TIME

    def is_window_late(self, window) -> bool:
        return self.event_time and self.cleanup_time(window) <= self.watermark

    def process(self, e: Element):
        windows = self.assigner.assign_windows(e.value, e.timestamp, e.proctime)
        self.current = ("element", None, e.seq, None)
        self.floors, self.last_seq = (_next(self.watermark), e.seq + 1), e.seq
        skipped = True
        for window in windows:
            if self.merging:
                window = self.add_merging_window(window)
                if self.is_window_late(window):
                    self.mapping.pop(window, None)
                    continue
                state_window = self.mapping[window]
            else:
                if self.is_window_late(window):
                    continue
                state_window = window
            skipped = False
            entry = self.contents.get(state_window)
            if entry is None:
                entry = self.contents[state_window] = [[] if self.spec.evictor is not None else None, []]
            if self.spec.evictor is not None:
                value = TimestampedValue(e.value, e.timestamp)
                value.seq = e.seq
                entry[0].append(value)
            else:
                entry[0] = self.spec.contents.add(entry[0], e.value)
            entry[1].append(e.seq)
            self.ctx.current_window = window
            result = self.trigger.on_element(e.value, e.timestamp, window, self.ctx)
            self.apply(result, window, state_window)
            cleanup = self.cleanup_time(window)
            if cleanup != MAX_TIME:
                self.ctx.current_window = window
                (self.ctx.register_event_time_timer if self.event_time
                 else self.ctx.register_processing_time_timer)(cleanup)
        if skipped:
            late = self.event_time and java_long(e.timestamp + self.spec.allowed_lateness) <= self.watermark
            if late:
                self.result.late.append((e.seq, self.watermark))
            self.result.fates[e.seq] = "late" if late else "no window"

    def add_merging_window(self, new):
        """``MergingWindowSet.addWindow``: returns the window ``new`` ended up in."""
        result, merged_new = new, False
        for merged, members in self.assigner.merge_windows(list(self.mapping) + [new]):
            ordered = [w for w in _java_hash_order(members) if w != new]
            if len(ordered) < len(members):
                merged_new, result = True, merged
            state_window = self.mapping[ordered[0]]
            merged_state_windows = [self.mapping.pop(w) for w in ordered]
            self.mapping[merged] = state_window
            merged_state_windows.remove(state_window)
            if not (merged in ordered and len(ordered) == 1):
                self.merge(merged, ordered, state_window, merged_state_windows)
        if not merged_new:
            self.mapping[new] = new
        return result

    def merge(self, merged, merged_windows, state_window, merged_state_windows):
        if self.event_time and self.cleanup_time(merged) <= self.watermark:
            raise KitError(f"The end timestamp of an event-time window cannot become earlier than the "
                           f"current watermark by merging. Current watermark: {self.watermark} window: {merged}")
        if not self.event_time and merged.max_timestamp() <= (self.proctime or MIN_TIME):
            raise KitError(f"The end timestamp of a processing-time window cannot become earlier than the "
                           f"current processing time by merging. Current processing time: {self.proctime} "
                           f"window: {merged}")
        self.ctx.current_window, self.ctx.merged = merged, merged_windows
        self.trigger.on_merge(merged, self.ctx)
        self.ctx.merged = ()
        for w in merged_windows:
            self.ctx.current_window = w
            self.trigger.clear(w, self.ctx)
            cleanup = self.cleanup_time(w)
            (self.timers[0] if self.event_time else self.timers[1]).delete(self, cleanup, w)
            self.panes.pop(w, None)
            self.on_time_done.discard(w)
        target_state, target_seqs = self.contents.get(state_window, (None, []))
        merged_value, merged_seqs = None, []
        for source in merged_state_windows:
            value, seqs = self.contents.pop(source, (None, []))
            if value is not None:
                merged_value = value if merged_value is None else self._merge_values(merged_value, value)
            merged_seqs += seqs
        if merged_value is not None:
            target_state = merged_value if target_state is None else self._merge_values(target_state, merged_value)
        if target_state is not None or target_seqs or merged_seqs:
            target_seqs.extend(merged_seqs)   # in place: a session growing by one element copies nothing
            self.contents[state_window] = [target_state, target_seqs]

    def _merge_values(self, a, b):
        return a + b if self.spec.evictor is not None else self.spec.contents.merge(a, b)

    # ------------------------------------------------------------ timers and firing

    def on_timer(self, time, window, floor, event_time: bool):
        if self.merging:
            state_window = self.mapping.get(window)
            if state_window is None:
                return   # a timer of a window merged away
        else:
            state_window = window
        self.current = ("event-time timer" if event_time else "processing-time timer", time, None, floor)
        self.ctx.current_window = window
        result = (self.trigger.on_event_time(time, window, self.ctx) if event_time
                  else self.trigger.on_processing_time(time, window, self.ctx))
        self.apply(result, window, state_window)
        if event_time == self.event_time and time == self.cleanup_time(window):
            self.clear_all(window, state_window)

    def apply(self, result, window, state_window):
        if result.is_fire() and state_window in self.contents:
            self.emit(window, state_window)
        if result.is_purge():
            self.drop_contents(state_window)

    def drop_contents(self, state_window):
        state, seqs = self.contents.pop(state_window, (None, []))
        self.dropped_seqs.update(seqs)

    def clear_all(self, window, state_window):
        self.drop_contents(state_window)
        self.ctx.current_window = window
        self.trigger.clear(window, self.ctx)
        function = self.spec.function
        if function is not None and function[0].startswith("process"):
            clear = getattr(function[1], "clear", None)
            if callable(clear):
                clear(self.ctx)
        self.function_state.clear_namespace(window)
        self.trigger_state.clear_namespace(window)
        self.mapping.pop(window, None)
        self.panes.pop(window, None)

    def emit(self, window, state_window):
        state, seqs = self.contents[state_window]
        if self.spec.evictor is not None:
            # EvictingWindowOperator: evict, run the function, evict, rewrite the state
            elements = list(state)
            self.ctx.current_window = window
            self.spec.evictor.evict_before(elements, len(elements), window, self.ctx)
            fired = [t.seq for t in elements]
            self.evicted_seqs.update(set(seqs) - set(fired))
            outputs = self.run_function(window, self.spec.contents.of_elements([t.value for t in elements]))
            self.spec.evictor.evict_after(elements, len(elements), window, self.ctx)
            if elements:
                self.contents[state_window] = [elements, [t.seq for t in elements]]
            else:
                del self.contents[state_window]
        else:
            outputs = self.run_function(window, self.spec.contents.values(state))
            fired = list(seqs)
        self.fired_seqs.update(fired)
        cause, timer, after, floor = self.current
        pane = self.panes.get(window, 0)
        self.panes[window] = pane + 1
        firing = Firing(window, outputs, self.kind(window), pane, cause, timer, self.watermark, self.proctime, after,
                        fired, floor)
        self.result.firings.append(firing)
        if self.timer_firings is not None and cause != "element":
            self.timer_firings.append(firing)

    def kind(self, window) -> str:
        """early (before the window's end), on-time (the first timer firing at or after it)
        or late. A timer firing is judged at its own time, an element at the clock it met."""
        cause, timer, _, _ = self.current
        if isinstance(window, GlobalWindow):
            return "early"
        event_clock = cause == "event-time timer" if self.event_time else cause == "processing-time timer"
        if event_clock:
            now = timer
        elif self.event_time:
            now = self.watermark
        else:
            now = self.proctime if self.proctime is not None else MIN_TIME
        if now < window.max_timestamp():
            return "early"
        first = cause != "element" and window not in self.on_time_done
        self.on_time_done.add(window)
        return "on-time" if first else "late"

    def run_function(self, window, values) -> list:
        function = self.spec.function
        if function is None:
            return list(values)
        kind, f = function
        self.ctx.current_window = window
        if kind == "process":
            out = f.process(self.key, self.ctx, values) if hasattr(f, "process") else f(self.key, self.ctx, values)
        elif kind == "apply":
            out = f.apply(self.key, window, values) if hasattr(f, "apply") else f(self.key, window, values)
        elif kind == "process_all":
            out = f.process(self.ctx, values) if hasattr(f, "process") else f(self.ctx, values)
        else:
            out = f.apply(window, values) if hasattr(f, "apply") else f(window, values)
        return [] if out is None else list(out)

    def finish(self, final_proctime=None):
        """End of input: the processing clock runs to ``final_proctime`` (the last arrival's
        processing time, which a key replayed alone did not see: the arrivals after its last
        one move it; None when none came after it) and stops; the watermark jumps to
        Long.MAX_VALUE."""
        self.advance_processing_time(final_proctime)
        self.advance_watermark(MAX_TIME)
        self.ctx = None   # no reference cycle left: the key's objects go when it does, not at the next GC
        return self.fates()

    def fates(self) -> KeyResult:
        """The result, with every element's fate (once the input has ended)."""
        pending = {s for _, seqs in self.contents.values() for s in seqs}
        fates = self.result.fates
        for seq in self.seen:
            if seq in fates:
                continue
            if seq in self.fired_seqs:
                fates[seq] = "fired"
            elif seq in pending:
                fates[seq] = "pending"
            elif seq in self.evicted_seqs:
                fates[seq] = "evicted"
            else:
                fates[seq] = "expired"
        return self.result


def _next(value: int) -> int:
    """``value + 1``, kept within the times."""
    return value if value >= MAX_TIME else value + 1


def _not_again(fired: tuple, last: tuple | None, clock: str) -> tuple:
    """``fired``, unless it is the timer that just fired: a trigger that registers its
    timer anew at its own time would fire it forever (Flink spins until the window goes)."""
    if last is not None and fired[:2] == last[:2]:
        raise KitError(
            f"the {clock} timer at {fired[0]} of window {fired[1]!r} fires again at once, without end: the "
            "trigger registers it anew at its own time. A processing-time trigger on an event-time window "
            "that ends behind the processing clock does this: use a processing-time window, or a clock "
            "within the windows' times")
    return fired


def timer_clocks(spec: WindowSpec) -> set:
    """The clocks whose timers can change what ``spec``'s windows do: those the trigger
    answers (``on_event_time``, ``on_processing_time`` overridden; a timer of another clock
    only gets CONTINUE) and the clock of the windows' cleanup (none for GlobalWindows)."""
    trigger = spec.trigger
    while type(trigger) is PurgingTrigger:   # answers as the trigger it wraps
        trigger = trigger.nested
    clocks = {clock for clock, method in (("event", "on_event_time"), ("processing", "on_processing_time"))
              if getattr(type(trigger), method) is not getattr(Trigger, method)}
    if not isinstance(spec.assigner, GlobalWindows):
        clocks.add("event" if spec.assigner.event_time else "processing")
    return clocks




class WindowOperator(KeyedOperator):
    """Flink's ``WindowOperator`` on the driver's interface (``kit.replay.keyed``). Its state is
    one value per key, the key's ``_Operator`` (windows, contents, trigger state and a timer
    heap per clock; cloudpickle pickles it). ``process_element(e, ctx)``, an ``Element``:
    the key's clocks move to those the element met, firing the heaps' timers up to them,
    then the element is processed. The earliest timer of each heap is registered with
    ``ctx`` (``_wake``), and ``on_timer`` moves the clocks to ``ctx``'s: a driver that wakes
    a key only at its registered timers fires them in time (the replay gives the driver no
    clocks, each element carrying its own: there it wakes the key at the end of input only).
    ``end_of_input`` outputs the key's ``KeyResult``. The key is ``ctx.key``'s value (a tuple
    for several, None for none); the instance holds no key's state, so one serves every key.

    ``end``: ``(seq, proctime)`` of the stream's last arrival: at the end of input the clock
    runs to its time (the arrivals after this key's last one moved it). ``crossing``,
    ``log`` (one key's: an instance per key then): see ``run_key``."""
    state = (ValueState("operator"),)

    def __init__(self, spec: WindowSpec, end: tuple | None = None, crossing=None, log: list | None = None):
        clocks = timer_clocks(spec)
        if log is not None and len(clocks) > 1:
            raise KitError("a heap log is for windows with timers of one clock; these have both")
        self.spec, self.end, self.crossing, self.log = spec, end, crossing, log
        self.logs = tuple(log if clock in clocks else None for clock in ("event", "processing"))

    def operator(self, ctx) -> _Operator:
        """The key's ``_Operator``, made at its first element."""
        state = ctx.state("operator")
        op = state.value()
        if op is None:
            key = ctx.key[0] if len(ctx.key) == 1 else tuple(ctx.key) if ctx.key else None
            op = _Operator(key, self.spec, tuple(map(TimerHeap, self.logs)), self.crossing)
            state.update(op)
        return op

    def process_element(self, e: Element, ctx):
        self.step(self.operator(ctx), e, ctx)

    def step(self, op: _Operator, e: Element, ctx):
        """``e`` through the key's ``op``: its clocks first, then the element, then the
        processing-time timers it registered at or behind the clock. (The callees
        check the same conditions; checked here first, an element that moves no clock and
        leaves one timer per heap costs no calls: ~5% of a Python window replay.)"""
        if e.watermark > op.watermark:
            op.advance_watermark(e.watermark)
        if e.proctime is not None:
            op.advance_processing_time(e.proctime)
        op.seen.append(e.seq)
        if self.log is not None:
            self.log.append(("element", e.seq))
        op.process(e)
        timers, wakes = op.timers, op.wakes
        heap = timers[1].queue
        if e.proctime is not None and len(heap) > 1 and heap[1].time <= e.proctime:
            op.advance_processing_time(e.proctime)   # a timer registered behind the clock: at once (Flink)
        if len(timers[0].queue) > 1 or len(heap) > 1:
            _wake(ctx, timers, wakes)

    def on_timer(self, timestamp: int, ctx):
        if ctx.watermark == MAX_TIME:   # the end of input: finish() runs the clock first
            return
        op = self.operator(ctx)
        _passed(ctx, op.wakes)
        op.advance_watermark(ctx.watermark)
        op.advance_processing_time(ctx.processing_time)
        _wake(ctx, op.timers, op.wakes)

    def finish(self, ctx) -> KeyResult:
        """The end of input (``_Operator.finish``), the clock run to the stream's last
        processing time unless the key's last element was the stream's last."""
        op, end = self.operator(ctx), self.end
        return op.finish(None if end is None or op.last_seq >= end[0] else end[1])

    def end_of_input(self, ctx):
        ctx.output(self.finish(ctx))


class _Keys:
    """Every key's ``_Operator`` in one task, sharing one heap per clock (the state of a
    ``WholeStreamWindowOperator``): the stream's watermark and its last arrival."""

    def __init__(self, spec: WindowSpec):
        self.spec, self.ops, self.timers = spec, {}, (TimerHeap(), TimerHeap())
        self.watermark, self.last, self.wakes, self.timer_firings = MIN_TIME, None, [None, None], []

    def process(self, key, e: Element, own):
        """The processing clock moves to ``e``'s time, ``e`` is processed (a processing-time
        timer it registered at or behind the clock fires right after it), then its own
        watermark ``own`` (None: none) is emitted."""
        if e.proctime is not None:
            self.fire(e.proctime, False, self.last)
        op = self.ops.get(key)
        if op is None:
            op = self.ops[key] = _Operator(key, self.spec, self.timers)
            op.watermark, op.timer_firings = self.watermark, self.timer_firings
        op.advance_processing_time(e.proctime)
        op.seen.append(e.seq)
        op.process(e)
        self.last = e.seq
        heap = self.timers[1].queue
        if e.proctime is not None and len(heap) > 1 and heap[1].time <= e.proctime:
            self.fire(e.proctime, False, e.seq)   # registered behind the clock: at once (Flink), under e's watermark
        self.emit_watermark(own, e.proctime)

    def emit_watermark(self, watermark, now=None):
        if watermark is not None and watermark > self.watermark:
            self.watermark = watermark
            self.fire(watermark, True, self.last, now)

    def fire(self, limit: int, event_time: bool, after, now=None):
        """Every key's timers of one clock up to ``limit``, after the arrival ``after``."""
        self.timer_firings.clear()
        if event_time:
            for op in self.ops.values():
                if op.watermark < limit:
                    op.watermark = limit
        if now is not None:
            for op in self.ops.values():
                op.proctime = now
        _fire_timers(self.timers[0 if event_time else 1], limit, event_time)
        for f in self.timer_firings:
            f.fired_after = after
            if not event_time:
                f.watermark = self.watermark
        if not event_time:
            for op in self.ops.values():
                op.proctime = limit if op.proctime is None else max(op.proctime, limit)

    def finish(self, until: int | None = None) -> dict:
        """The end of input: the processing clock runs to ``until`` (None: it stays at the
        last arrival's), then the watermark to the end of time."""
        if until is not None:
            self.fire(until, False, self.last)
        self.fire(MAX_TIME, True, None)
        return {key: op.fates() for key, op in self.ops.items()}


class WholeStreamWindowOperator(KeyedOperator):
    """The whole stream through one ``WindowOperator``, as Flink runs it at parallelism 1: a
    driver runs it as one key (``()``) over rows ``(key, Element, own)`` in arrival order
    (``own``: the watermark the element emits, or None). Its state is one value, every key's
    ``_Operator`` and the heaps they share (``_Keys``). Before each element the processing
    clock moves to its time (every key's timers fire); after it, its watermark is emitted and
    every key's event-time timers up to it fire, so timers at one time fire in Flink's order
    across keys too. ``end_of_input`` outputs ``(key, KeyResult)`` for each key; timer firings
    carry the arrival after which they fired and the exact watermark -- what ``run_key`` +
    ``placement`` must reproduce. ``until``: the processing time the clock runs to at the
    end of input (None: the last arrival's)."""
    state = (ValueState("keys"),)

    def __init__(self, spec: WindowSpec, until: int | None = None):
        self.spec, self.until = spec, until

    def keys(self, ctx) -> _Keys:
        state = ctx.state("keys")
        if state.value() is None:
            state.update(_Keys(self.spec))
        return state.value()

    def process_element(self, row, ctx):
        keys = self.keys(ctx)
        keys.process(*row)
        _wake(ctx, keys.timers, keys.wakes)

    def on_timer(self, timestamp: int, ctx):
        if ctx.watermark == MAX_TIME:   # the end of input: finish()
            return
        keys = self.keys(ctx)
        _passed(ctx, keys.wakes)
        if ctx.processing_time is not None:
            keys.fire(ctx.processing_time, False, keys.last)
        keys.emit_watermark(ctx.watermark, ctx.processing_time)
        _wake(ctx, keys.timers, keys.wakes)

    def finish(self, ctx) -> dict:
        """``{key: KeyResult}``: the final watermark fires every key's event-time timers."""
        return self.keys(ctx).finish(self.until)

    def end_of_input(self, ctx):
        for key_result in self.finish(ctx).items():
            ctx.output(key_result)


def _wake(ctx, timers: tuple, wakes: list):
    """Registers with ``ctx`` the earliest timer of each heap in ``timers`` (event time,
    processing time) when it comes before ``wakes[i]``, the earliest time registered and not
    yet passed (then kept there): the driver wakes the key (``on_timer``) by the time one of
    the heap's timers is due, with a registration only when the heap's head moves before
    every pending one."""
    for i in 0, 1:
        queue = timers[i].queue
        if len(queue) > 1 and (wakes[i] is None or queue[1].time < wakes[i]):
            wakes[i] = queue[1].time
            (ctx.register_processing_time_timer if i else ctx.register_event_time_timer)(wakes[i])


def _passed(ctx, wakes: list):
    """Forgets the registered times that ``ctx``'s clocks passed (their timers fired)."""
    if wakes[0] is not None and wakes[0] <= ctx.watermark:
        wakes[0] = None
    if wakes[1] is not None and ctx.processing_time is not None and wakes[1] <= ctx.processing_time:
        wakes[1] = None


def run_key(key, elements, spec: WindowSpec, end: tuple | None = None, crossing=None,
            log: list | None = None) -> KeyResult:
    """Replay one key's ``elements`` (in arrival order) through the ``WindowOperator``, run by
    ``kit.replay.keyed.run_key``. ``end``: ``(seq, proctime)`` of the stream's last arrival,
    the processing time the clock runs to at the end of input. ``crossing(t)``: the first
    watermark of the whole stream at or above ``t`` (or ``MAX_TIME``), what
    ``context.current_watermark()`` gives inside an event-time timer's firing; without it,
    the watermark this key's next arrival met (the key alone knows no other). ``log``: a list
    that gets what changed the heap of the clock ``timer_clocks(spec)`` names (one, or none),
    ``("element", seq)`` before each element's changes (``TimerHeap.log``), for
    ``kit.windows.timer_order``."""
    return keyed.run_key(WindowOperator(spec, end, crossing, log), [key], elements)[0]


def replay(arrivals, spec: WindowSpec, own_watermark) -> dict:
    """The whole stream through one operator (``WholeStreamWindowOperator``): ``arrivals``
    are ``(key, Element)`` in arrival order, ``own_watermark(element)`` the watermark an
    element emits (or None). Returns ``{key: KeyResult}``."""
    rows = [(key, e, own_watermark(e)) for key, e in arrivals]
    return dict(keyed.run_key(WholeStreamWindowOperator(spec), [], rows))
