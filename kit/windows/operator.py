"""Flink's ``WindowOperator`` (and ``EvictingWindowOperator``) for one key, in pure Python.

This is the reference the Spark execution must equal. ``run_key(key, elements, spec)``
replays one key's elements in arrival order. Before each element the watermark it met
(``Element.watermark``) and its processing time are applied: event-time timers up to the
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

import heapq
from dataclasses import dataclass, field
from typing import Any, Optional

from ..errors import KitError
from .assigners import MAX_TIME, MIN_TIME, GlobalWindow, GlobalWindows, java_long
from .evictors import TimestampedValue
from .functions import Contents
from .state import StateStore
from .triggers import PurgingTrigger, Trigger

__all__ = ["Element", "WindowSpec", "Firing", "KeyResult", "run_key", "replay", "timer_clocks", "FATES",
           "MAX_FIRINGS_AT_END"]

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
        self.op.timers[0].add(time, self.current_window, self.op.floors[0])

    def register_processing_time_timer(self, time: int):
        self.op.timers[1].add(time, self.current_window, self.op.floors[1])

    def delete_event_time_timer(self, time: int):
        self.op.timers[0].delete(time, self.current_window)

    def delete_processing_time_timer(self, time: int):
        self.op.timers[1].delete(time, self.current_window)

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


class _Timers:
    """Timers of one key: fire in time order, registration order for ties; set semantics
    (a timer registered again keeps its first ``floor``)."""

    def __init__(self):
        self.heap, self.live, self.counter = [], {}, 0

    def add(self, time, window, floor):
        if (time, window) not in self.live:
            self.live[(time, window)] = floor
            self.counter += 1
            heapq.heappush(self.heap, (time, self.counter, window))

    def delete(self, time, window):
        self.live.pop((time, window), None)

    def pop_until(self, limit):
        """The next timer at or before ``limit``, as ``(time, window, floor)``; None if none."""
        while self.heap:
            time, _, window = self.heap[0]
            if (time, window) not in self.live:
                heapq.heappop(self.heap)
                continue
            if time > limit:
                return None
            heapq.heappop(self.heap)
            return time, window, self.live.pop((time, window))
        return None


class _Operator:
    def __init__(self, key, spec: WindowSpec):
        self.key, self.spec = key, spec
        self.assigner, self.trigger = spec.assigner, spec.trigger
        self.event_time = spec.assigner.event_time
        self.merging = spec.assigner.merging
        self.watermark, self.proctime = MIN_TIME, None
        self.timers = (_Timers(), _Timers())
        self.trigger_state, self.function_state = StateStore(), StateStore()
        self.contents = {}        # state window -> [state, seqs], updated in place
        self.mapping = {}         # merging: window -> state window
        self.panes = {}           # window -> firings so far
        self.on_time_done = set()
        self.ctx = _Context(self)
        self.result = KeyResult()
        self.fired_seqs, self.evicted_seqs, self.dropped_seqs = set(), set(), set()
        self.current = None       # (cause, timer, fired_after, timer floor) of what is being processed
        # The floors of the timers registered now, for their placement on the whole stream
        # (kit/windows/placement.py). An event-time timer fires after the first arrival whose
        # own watermark reaches max(time, floor): registered at an element, the floor is
        # the watermark then + 1 (a timer behind the watermark waits for it to move); at an
        # event-time firing, that timer's max(time, floor). A processing-time timer fires
        # before the first arrival at or after its floor (a seq) whose processing time
        # reaches its time: registered at an element, the next arrival; at a
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
        last, at_end = None, {} if watermark == MAX_TIME else None
        while (fired := self.timers[0].pop_until(self.watermark)) is not None:
            last = _not_again(fired, last, "event-time")
            if at_end is not None:
                self._not_endless(fired[1], at_end)
            self.floors = (max(fired[0], fired[2]), _next(self.last_seq))
            self.on_timer(*fired, event_time=True)

    def _not_endless(self, window, fired: dict):
        """Counts ``window``'s timer firings at the end of input in ``fired``: a trigger that
        registers its next timer every interval up to the window's end fires without end once
        the watermark jumps to +inf (ContinuousEventTimeTrigger on GlobalWindows: every
        interval up to Long.MAX_VALUE), and Flink spins on it too."""
        n = fired[window] = fired.get(window, 0) + 1
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
        last = None
        while (fired := self.timers[1].pop_until(time)) is not None:
            last = _not_again(fired, last, "processing-time")
            self.proctime = fired[0] if self.proctime is None else max(self.proctime, fired[0])
            self.floors = (_next(self.watermark), fired[2])
            self.on_timer(*fired, event_time=False)
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
            (self.timers[0] if self.event_time else self.timers[1]).delete(cleanup, w)
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
        self.result.firings.append(Firing(window, outputs, self.kind(window), pane, cause, timer,
                                          self.watermark, self.proctime, after, fired, floor))

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


def run_key(key, elements, spec: WindowSpec, end_of_input: bool = True, final_proctime=None) -> KeyResult:
    """Replay one key's ``elements`` (in arrival order) through the window operator; at the
    end of input the clock runs to ``final_proctime`` (ms, the stream's last)."""
    op = _Operator(key, spec)
    op.seen = []
    for e in elements:
        op.advance_watermark(e.watermark)
        op.advance_processing_time(e.proctime)
        op.seen.append(e.seq)
        op.process(e)
    if end_of_input:
        return op.finish(final_proctime)
    return op.result


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


def replay(arrivals, spec: WindowSpec, own_watermark) -> dict:
    """The whole stream through one operator, as Flink runs it: ``arrivals`` are ``(key,
    Element)`` in arrival order, ``own_watermark(element)`` the watermark an element emits
    (or None). Before each arrival the processing clock moves to its time (timers of every
    key fire); after it, its watermark is emitted and every key's event-time timers up to
    it fire. Returns ``{key: KeyResult}``; timer firings carry the arrival after which
    they fired and the exact watermark -- what ``run_key`` + ``placement`` must reproduce.
    """
    ops, watermark, last = {}, MIN_TIME, None
    for key, e in arrivals:
        if e.proctime is not None:
            for op in ops.values():
                n = len(op.result.firings)
                op.advance_processing_time(e.proctime)
                for f in op.result.firings[n:]:
                    f.fired_after, f.watermark = last, watermark
        op = ops.get(key)
        if op is None:
            op = ops[key] = _Operator(key, spec)
            op.seen = []
            op.watermark = watermark
        op.advance_processing_time(e.proctime)
        op.seen.append(e.seq)
        op.process(e)
        own = own_watermark(e)
        if own is not None and own > watermark:
            watermark = own
            for other in ops.values():
                other.proctime = e.proctime if e.proctime is not None else other.proctime
                n = len(other.result.firings)
                other.advance_watermark(watermark)
                for f in other.result.firings[n:]:
                    f.fired_after = e.seq
        last = e.seq
    return {key: op.finish() for key, op in ops.items()}
