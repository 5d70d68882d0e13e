"""Temporal joins: each left row joins the version of the right row valid at its time.

Two operators (``KeyedOperator``s), a step per arrival of a key in merged order
(``kit.replay.interleave``), the way Flink 2.3's runtime runs them (seed 002);
``event_time_join`` and ``processing_time_join`` step one through a key's arrivals:

**Event time** (``TemporalRowTimeJoinOperator``, ``FOR SYSTEM_TIME AS OF o.rowtime``).
Both sides go to state: left rows under a counter (arrival order), right rows under their
time (a later arrival with the same time replaces the earlier one). Each row registers the
key's event-time timer at the smallest time seen (``registerSmallestTimer``). When the
operator watermark ``W`` passes the timer:

- every stored left row with ``time <= W`` is emitted, in arrival order, joined with the
  latest version with ``version.time <= left.time`` (inclusive); a version that is a
  deletion (``-U``/``-D``) or fails the join condition counts as none: LEFT pads NULLs,
  INNER drops the row;
- the right state drops every version ``<= W`` except the newest of them;
- the timer is registered again at the earliest left row still waiting.

Neither input is checked for lateness: a late version still serves left rows not yet
emitted, a late left row joins whatever versions survived the cleanup.

**Versioned view by deduplication** (``ROW_NUMBER() OVER (PARTITION BY key ORDER BY time
DESC) = 1``): ``RowTimeDeduplicateFunction`` sits in front of the right input. Keeping the
last row, it passes a row whose time is at or after the key's current one (as ``+I``, then
``+U``) and drops an older one (Flink asks it for no ``-U``, so nothing is retracted);
keeping the first (``ASC``), it passes only a strictly earlier time. Its state (the key's
current row) expires ``ttl`` after its last write, on processing time.

The key is the operator's state key: a NULL key is a key like any other, so a left row
with a NULL key meets the versions with a NULL key (Flink 2.3 does so; its interval join
does not).

**Processing time** (``TemporalProcessTimeJoinOperator``, the temporal table function join
``LATERAL TABLE (Rates(o.proctime))``). Only the right row last seen per key is kept; a
left row joins it at once, when it arrives (a right row arriving just after is missed).

**State retention** (``table.exec.state.ttl``, ``BaseTwoInputStreamOperatorWithStateRetention``),
on the processing-time clock: with ``ttl > 1 ms``, ``min = ttl`` and ``max = 1.5 * ttl``; a
key's cleanup timer is registered at ``now + max`` and moved only when ``now + min`` passes
it; when it fires, the key's state is cleared (left rows waiting in it are never emitted).
The replay checks that timer at the processing times a key sees: its arrivals' and its
event timers' (the processing time of the arrival whose watermark fired them).

Orders and rates of one currency, watermark delays covering the disorder::

    arrival             state after                          emitted when W passes
    rate 10:00 1.10     right {10:00}
    order o1 09:59      left {o1}                            o1 + NULL   (no version <= 09:59)
    order o2 10:00      left {o2}                            o2 + 1.10   (10:00 inclusive)
    rate 10:30 1.12     right {10:00, 10:30}
    rate 10:15 1.11     right {10:00, 10:15, 10:30}          (a late version, still used)
    order o3 10:20                                           o3 + 1.11

>>> from kit.replay.interleave import replay
>>> from kit import WatermarkStrategy, Duration
>>> wm = WatermarkStrategy.for_sql_delay(Duration(0))
>>> arrivals, W = replay([(5, "o1"), (20, "o2")], [(10, "r1"), (20, "r2")], "RLRL", wm, wm)
>>> [(e.left.row, e.right and e.right.row, e.pos) for e in event_time_join(arrivals, W, "left").emitted]
[('o1', None, 1), ('o2', 'r2', 3)]
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ..errors import KitError
from ..time import Duration, to_duration
from ..replay import keyed
from ..replay.interleave import LEFT, MAX_TIME, Arrival, Watermarks
from ..replay.keyed import KeyedOperator, MapState, ValueState

__all__ = ["HOWS", "ACCUMULATE", "StateRetention", "Emitted", "Fate", "Expiration", "KeyResult",
           "TemporalRowTimeJoinOperator", "TemporalProcessTimeJoinOperator", "event_time_join", "processing_time_join"]

HOWS = ("inner", "left")
ACCUMULATE = ("+I", "+U")             # changelog kinds that are a version (not a deletion)


@dataclass(frozen=True)
class StateRetention:
    """``table.exec.state.ttl``: ``min_ms = ttl``, ``max_ms = ttl * 3 / 2``; on when ``ttl > 1 ms``.

    >>> StateRetention(Duration.of_hours(2)).max_ms == Duration.of_hours(3).millis
    True
    """
    ttl: Duration

    def __post_init__(self):
        object.__setattr__(self, "ttl", to_duration(self.ttl, "StateRetention", "ttl", like="Duration"))
        if self.ttl.millis < 0:
            raise KitError(f"state_ttl must be a Duration >= 0, e.g. Duration.of_hours(1); got {self.ttl!r}")

    @property
    def enabled(self) -> bool:
        return self.ttl.millis > 1

    @property
    def min_ms(self) -> int:
        return self.ttl.millis

    @property
    def max_ms(self) -> int:
        return self.ttl.millis * 3 // 2


@dataclass(frozen=True)
class Emitted:
    """A left row leaving the operator: joined with ``right`` (None: NULL-padded), after
    merged arrival ``pos`` (``n``: end of input) under watermark ``watermark``, by the timer
    at ``timer`` (event time; None for processing time)."""
    left: Arrival
    right: Arrival | None
    pos: int
    watermark: int | None
    timer: int | None = None


@dataclass(frozen=True)
class Fate:
    """What became of one arrival. Left rows: ``joined``, ``no_version`` (none at or before
    its time in state), ``deleted`` (the version is a deletion), ``condition`` (the version
    failed the join condition), ``expired`` (state retention cleared it first). Right rows:
    ``cleaned`` (dropped by a watermark cleanup), ``replaced`` (by a later arrival with the
    same key and time; processing time: by any later row), ``deleted`` and ``deletion``
    (processing time: a ``-U``/``-D`` row removed it), ``expired``, ``kept`` (in state at
    the end, ``pos`` None), ``deduplicated``
    (a versioned view's deduplication dropped it: not newer than the key's current row). ``pos``: merged position when it happened; ``at``: the watermark (event) or processing time then;
    ``version``: the right arrival a left row met; ``timer``, ``batch``: the event timer that
    emitted a left row and the first left row that firing emitted."""
    arrival: Arrival
    fate: str
    pos: int | None
    at: int | None = None
    version: Arrival | None = None
    timer: int | None = None
    batch: int | None = None


class Expiration(NamedTuple):
    """State retention cleared a key's state: the cleanup timer, at merged position ``pos``."""
    timer: int
    pos: int


@dataclass
class KeyResult:
    """One key's replay: the emitted rows in emission order, and every arrival's fate."""
    emitted: list = field(default_factory=list)
    fates: list = field(default_factory=list)
    expirations: list = field(default_factory=list)     # (processing time, pos) state cleared


class _Retention:
    """The processing-time cleanup timer of one key (``registerProcessingCleanupTimer``)."""

    def __init__(self, retention: StateRetention | None):
        self.on = retention is not None and retention.enabled
        self.retention = retention
        self.registered = None            # latestRegisteredCleanupTimer
        self.timers = set()               # the timer service's processing-time timers

    def register(self, now):
        if not self.on:
            return
        if now is None:
            raise KitError("state retention runs on processing time: give the join a clock "
                           "(clock=Clock(...)) or both inputs proctime=")
        if self.registered is None or now + self.retention.min_ms > self.registered:
            self.timers.discard(self.registered)
            self.registered = now + self.retention.max_ms
            self.timers.add(self.registered)

    def clear(self):
        """``cleanupLastTimer``."""
        if self.on and self.registered is not None:
            self.timers.discard(self.registered)
            self.registered = None

    def due(self, now) -> list:
        """The timers that fire once the clock reads ``now``, in time order; each one that is
        the registered one cleans the state (``onProcessingTime``)."""
        if not self.timers or now is None:
            return []
        fired = sorted(t for t in self.timers if t <= now)
        self.timers.difference_update(fired)
        cleans = [t for t in fired if t == self.registered]
        if cleans:
            self.registered = None
        return cleans


class _Dedup:
    """The deduplication in front of one key's right input (``RowTimeDeduplicateFunction``):
    ``keep`` the ``"last"`` or the ``"first"`` row by time. Its state, the
    key's current row, is ``(time, processing time of its last write)``."""

    def __init__(self, keep: str, retention: StateRetention | None):
        self.keep = keep
        self.ttl = retention.ttl.millis if retention is not None and retention.ttl.millis > 0 else None

    def passes(self, a: Arrival, current) -> bool:
        """Whether right arrival ``a`` leaves the deduplication (and becomes the ``current`` row)."""
        time, written = current.value() or (None, None)
        if self.ttl is not None:
            if a.proctime is None:
                raise KitError("state retention runs on processing time: give the join a clock "
                               "(clock=Clock(...)) or both inputs proctime=")
            if written is not None and written + self.ttl <= a.proctime:
                time = None               # the state expired: the row counts as the first
        if time is None or (a.time >= time if self.keep == "last" else a.time < time):
            current.update((a.time, a.proctime))
            return True
        return False


def _check(how):
    if how not in HOWS:
        raise KitError(f"how={how!r}: a temporal join is INNER or LEFT; got {how!r} "
                       "(Flink supports no other join type here)")


def _joins(left: Arrival, version: Arrival | None, condition) -> str:
    """The fate of ``left`` meeting ``version``."""
    if version is None:
        return "no_version"
    if version.op not in ACCUMULATE:
        return "deleted"
    if condition is not None and not condition(left.row, version.row):
        return "condition"
    return "joined"


def _cleanup(ctx, retention: StateRetention | None) -> _Retention:
    """The key's state-retention timer (kept in its state, made at its first use)."""
    state = ctx.state("cleanup")
    ttl = state.value()
    if ttl is None:
        ttl = _Retention(retention)
        state.update(ttl)
    return ttl


def _result(outputs: list) -> KeyResult:
    """An operator's outputs as a ``KeyResult``."""
    out = KeyResult()
    for o in outputs:
        (out.emitted if type(o) is Emitted else out.fates if type(o) is Fate else out.expirations).append(o)
    return out


class TemporalRowTimeJoinOperator(KeyedOperator):
    """Flink's ``TemporalRowTimeJoinOperator``: a step per ``Arrival`` of a key (module doc).
    State per key: the left rows by a counter, the versions by time, the registered event
    timer and the timers still set (``timers``: a replaced one is deleted), the
    state-retention timer (``cleanup``), the versioned view's current row (``current``) and
    the last merged position the key saw (``pos``). A timer fires when the watermark the key
    sees reaches it; ``watermarks`` (every key's rises) place it: at the first rise, from
    the key's last position on, to reach it. Outputs ``Fate``, ``Emitted`` and
    ``Expiration`` values."""
    state = (MapState("left"), MapState("right"), ValueState("next_left_index"), ValueState("registered_timer"),
             MapState("timers"), ValueState("cleanup"), ValueState("current"), ValueState("pos"))

    def __init__(self, watermarks: Watermarks, how: str = "inner", condition: Callable | None = None,
                 retention: StateRetention | None = None, deduplicate: str | None = None):
        _check(how)
        self.W, self.how, self.condition, self.retention = watermarks, how, condition, retention
        self.ttl = retention is not None and retention.enabled
        self.dedup = _Dedup(deduplicate, retention) if deduplicate else None

    def process_element(self, a: Arrival, ctx):
        state = ctx.state
        if self.ttl:
            self._expire(ctx, a.proctime, a.pos)
        state("pos").update(a.pos)
        if a.side == LEFT:
            index = state("next_left_index")
            i = index.value() or 0
            state("left")[i] = a
            index.update(i + 1)
        elif self.dedup is not None and not self.dedup.passes(a, state("current")):
            ctx.output(Fate(a, "deduplicated", a.pos))
            return
        else:
            right = state("right")
            if a.time in right:
                ctx.output(Fate(right[a.time], "replaced", a.pos))
            right[a.time] = a
        registered = state("registered_timer")                # registerSmallestTimer
        if registered.value() is None or registered.value() > a.time:
            timers = state("timers")
            timers.pop(registered.value(), None)               # deleteEventTimeTimer
            self._register(ctx, registered, timers, a.time)
        if self.ttl:
            _cleanup(ctx, self.retention).register(a.proctime)

    @staticmethod
    def _register(ctx, registered, timers, t: int):
        registered.update(t)
        timers[t] = True
        ctx.register_event_time_timer(t)

    def on_timer(self, timestamp: int, ctx):
        if ctx.state("timers").pop(timestamp, None) is None:   # deleted
            return
        last = ctx.state("pos")
        pos, w, now = self.W.next_rise(last.value(), timestamp)
        if self.ttl:
            self._expire(ctx, now, pos)       # (a state cleanup leaves the event timers in place)
        self._fire(ctx, timestamp, pos, w, now)
        last.update(pos)

    def _fire(self, ctx, timer: int, pos: int, w: int, now):
        state, output = ctx.state, ctx.output
        registered = state("registered_timer")
        registered.clear()
        left, right = state("left"), state("right")
        times = sorted(right)
        batch = None                          # the first left row this firing emits
        for k in [k for k, a in left.items() if a.time <= w]:
            a = left.pop(k)
            i = bisect.bisect_right(times, a.time) - 1
            version = right[times[i]] if i >= 0 else None
            fate = _joins(a, version, self.condition)
            if fate == "joined" or self.how == "left":
                batch = a.pos if batch is None else batch
                output(Fate(a, fate, pos, w, version, timer, batch))
                output(Emitted(a, version if fate == "joined" else None, pos, w, timer))
            else:
                output(Fate(a, fate, pos, w, version))
        keep = bisect.bisect_right(times, w) - 1          # the newest version <= w stays
        for t in times[:max(keep, 0)]:
            output(Fate(right.pop(t), "cleaned", pos, w))
        waiting = min((a.time for a in left.values()), default=MAX_TIME)
        if waiting < MAX_TIME:
            self._register(ctx, registered, state("timers"), waiting)
        if waiting < MAX_TIME or right:
            if self.ttl:
                _cleanup(ctx, self.retention).register(now)
        else:
            if self.ttl:
                _cleanup(ctx, self.retention).clear()
            state("next_left_index").clear()

    def _expire(self, ctx, now, pos: int):
        """The state-retention timers due at processing time ``now`` clear the key's state."""
        for t in _cleanup(ctx, self.retention).due(now):
            ctx.output(Expiration(t, pos))
            left, right = ctx.state("left"), ctx.state("right")
            for a in [*left.values(), *right.values()]:
                ctx.output(Fate(a, "expired", pos, t))
            left.clear(), right.clear()
            ctx.state("next_left_index").clear()
            ctx.state("registered_timer").clear()

    def end_of_input(self, ctx):
        for a in ctx.state("right").values():
            ctx.output(Fate(a, "kept", None))


class TemporalProcessTimeJoinOperator(KeyedOperator):
    """Flink's ``TemporalProcessTimeJoinOperator``: a step per ``Arrival`` of a key; a left row
    joins the right row in state (``current``) when it arrives. Outputs ``Fate``,
    ``Emitted`` and ``Expiration`` values."""
    state = (ValueState("current"), ValueState("cleanup"))

    def __init__(self, how: str = "inner", condition: Callable | None = None, retention: StateRetention | None = None):
        _check(how)
        self.how, self.condition, self.retention = how, condition, retention

    def process_element(self, a: Arrival, ctx):
        state, ttl = ctx.state("current"), _cleanup(ctx, self.retention)
        for t in ttl.due(a.proctime):
            ctx.output(Expiration(t, a.pos))
            if state.value() is not None:
                ctx.output(Fate(state.value(), "expired", a.pos, t))
            state.clear()
        current = state.value()
        if a.side == LEFT:
            fate = _joins(a, current, self.condition)
            ctx.output(Fate(a, fate, a.pos, a.proctime, current))
            if fate == "joined" or self.how == "left":
                ctx.output(Emitted(a, current if fate == "joined" else None, a.pos, None))
            if current is not None:
                ttl.register(a.proctime)
        elif a.op in ACCUMULATE:
            if current is not None:
                ctx.output(Fate(current, "replaced", a.pos, a.proctime))
            state.update(a)
            ttl.register(a.proctime)
        else:
            if current is not None:
                ctx.output(Fate(current, "deleted", a.pos, a.proctime))
            ctx.output(Fate(a, "deletion", a.pos, a.proctime))
            state.clear()
            ttl.clear()

    def end_of_input(self, ctx):
        if ctx.state("current").value() is not None:
            ctx.output(Fate(ctx.state("current").value(), "kept", None))


def event_time_join(arrivals: list, watermarks: Watermarks, how: str = "inner",
                    condition: Callable | None = None,
                    retention: StateRetention | None = None, deduplicate: str | None = None) -> KeyResult:
    """``TemporalRowTimeJoinOperator`` stepped through one key's ``arrivals`` (merged order),
    each with the watermark in force (``keyed.run_key``); ``deduplicate``: the right input
    is a versioned view keeping the ``"last"`` (or ``"first"``) row per key by time."""
    operator = TemporalRowTimeJoinOperator(watermarks, how, condition, retention, deduplicate)
    return _result(keyed.run_key(operator, [], arrivals, [watermarks.before(a.pos) for a in arrivals]))


def processing_time_join(arrivals: list, how: str = "inner", condition: Callable | None = None,
                         retention: StateRetention | None = None) -> KeyResult:
    """``TemporalProcessTimeJoinOperator`` stepped through one key's ``arrivals``: a left row
    joins the right row in state when it arrives."""
    return _result(keyed.run_key(TemporalProcessTimeJoinOperator(how, condition, retention), [], arrivals))
