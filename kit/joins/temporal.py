"""Temporal joins: each left row joins the version of the right row valid at its time.

Two operators, run per key over the key's arrivals in merged order (``replay.py``), the
way Flink 2.3's runtime runs them (seed 002):

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
from typing import Callable

from ..errors import KitError
from ..time import Duration, to_duration
from ..replay.interleave import LEFT, MAX_TIME, Arrival, Watermarks

__all__ = ["HOWS", "ACCUMULATE", "StateRetention", "Emitted", "Fate", "KeyResult",
           "event_time_join", "processing_time_join"]

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
    ``version``: the right arrival a left row met."""
    arrival: Arrival
    fate: str
    pos: int | None
    at: int | None = None
    version: Arrival | None = None


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
    ``keep`` ``"last"`` or ``"first"`` row by time, None for no deduplication."""

    def __init__(self, keep: str | None, retention: StateRetention | None):
        self.keep = keep
        self.ttl = retention.ttl.millis if retention is not None and retention.ttl.millis > 0 else None
        self.time = None                  # the key's current row's time
        self.written = None               # the processing time of its last write

    def passes(self, a: Arrival) -> bool:
        """Whether right arrival ``a`` leaves the deduplication (and becomes the current row)."""
        if self.keep is None:
            return True
        if self.ttl is not None:
            if a.proctime is None:
                raise KitError("state retention runs on processing time: give the join a clock "
                               "(clock=Clock(...)) or both inputs proctime=")
            if self.written is not None and self.written + self.ttl <= a.proctime:
                self.time = None          # the state expired: the row counts as the first
        if self.time is None or (a.time >= self.time if self.keep == "last" else a.time < self.time):
            self.time, self.written = a.time, a.proctime
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


def event_time_join(arrivals: list, watermarks: Watermarks, how: str = "inner",
                    condition: Callable | None = None,
                    retention: StateRetention | None = None, deduplicate: str | None = None) -> KeyResult:
    """Replay one key's ``arrivals`` (merged order) through ``TemporalRowTimeJoinOperator``;
    ``deduplicate``: the right input is a versioned view keeping the ``"last"`` (or
    ``"first"``) row per key by time."""
    _check(how)
    out = KeyResult()
    left = {}                              # counter -> arrival (a dict keeps arrival order)
    right = {}                             # time -> arrival
    counter = 0
    registered = None                      # registeredTimer
    timers = set()                         # the timer service's event-time timers
    ttl = _Retention(retention)
    dedup = _Dedup(deduplicate, retention)

    def smallest(t):
        nonlocal registered
        if registered is None or registered > t:
            timers.discard(registered)
            registered = t
            timers.add(t)

    def expire(now, pos):
        nonlocal counter, registered
        for t in ttl.due(now):
            out.expirations.append((t, pos))
            out.fates.extend(Fate(a, "expired", pos, t) for a in left.values())
            out.fates.extend(Fate(a, "expired", pos, t) for a in right.values())
            left.clear(), right.clear()
            counter, registered = 0, None

    def fire(timer, pos, w, now):
        nonlocal registered, counter
        registered = None
        times = sorted(right)
        ready = [k for k, a in left.items() if a.time <= w]
        for k in ready:
            a = left.pop(k)
            i = bisect.bisect_right(times, a.time) - 1
            version = right[times[i]] if i >= 0 else None
            fate = _joins(a, version, condition)
            out.fates.append(Fate(a, fate, pos, w, version))
            if fate == "joined" or how == "left":
                out.emitted.append(Emitted(a, version if fate == "joined" else None, pos, w, timer))
        keep = bisect.bisect_right(times, w) - 1          # the newest version <= w stays
        for t in times[:max(keep, 0)]:
            out.fates.append(Fate(right.pop(t), "cleaned", pos, w))
        waiting = min((a.time for a in left.values()), default=MAX_TIME)
        if waiting < MAX_TIME:
            registered = waiting
            timers.add(waiting)
        if waiting < MAX_TIME or right:
            ttl.register(now)
        else:
            ttl.clear()
            counter = 0

    cursor = 0
    for a in [*arrivals, None]:
        end = a is None
        until = watermarks.n if end else a.pos
        while timers:
            timer = min(timers)
            pos, w, now = watermarks.next_rise(cursor, timer)
            if pos >= until and not end:
                break
            expire(now, pos)               # (a state cleanup leaves the event timers in place)
            timers.discard(timer)
            fire(timer, pos, w, now)
            cursor = pos
        if end:
            break
        expire(a.proctime, a.pos)
        if a.side != LEFT and not dedup.passes(a):
            out.fates.append(Fate(a, "deduplicated", a.pos))
            cursor = a.pos
            continue
        if a.side == LEFT:
            left[counter] = a
            counter += 1
        else:
            if a.time in right:
                out.fates.append(Fate(right[a.time], "replaced", a.pos))
            right[a.time] = a
        smallest(a.time)
        ttl.register(a.proctime)
        cursor = a.pos
    out.fates.extend(Fate(a, "kept", None) for a in right.values())
    return out


def processing_time_join(arrivals: list, how: str = "inner", condition: Callable | None = None,
                         retention: StateRetention | None = None) -> KeyResult:
    """Replay one key's ``arrivals`` through ``TemporalProcessTimeJoinOperator``: a left row
    joins the right row in state when it arrives."""
    _check(how)
    out = KeyResult()
    current = None
    ttl = _Retention(retention)
    for a in arrivals:
        for t in ttl.due(a.proctime):
            out.expirations.append((t, a.pos))
            if current is not None:
                out.fates.append(Fate(current, "expired", a.pos, t))
            current = None
        if a.side == LEFT:
            fate = _joins(a, current, condition)
            out.fates.append(Fate(a, fate, a.pos, a.proctime, current))
            if fate == "joined" or how == "left":
                out.emitted.append(Emitted(a, current if fate == "joined" else None, a.pos, None))
            if current is not None:
                ttl.register(a.proctime)
        elif a.op in ACCUMULATE:
            if current is not None:
                out.fates.append(Fate(current, "replaced", a.pos, a.proctime))
            current = a
            ttl.register(a.proctime)
        else:
            if current is not None:
                out.fates.append(Fate(current, "deleted", a.pos, a.proctime))
            out.fates.append(Fate(a, "deletion", a.pos, a.proctime))
            current = None
            ttl.clear()
    if current is not None:
        out.fates.append(Fate(current, "kept", None))
    return out
