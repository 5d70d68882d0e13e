"""Flink SQL's event-time INTERVAL JOIN, one key at a time: the reference semantics.

::

    SELECT * FROM Orders o JOIN Shipments s
      ON o.id = s.order_id
     AND o.order_time BETWEEN s.ship_time - INTERVAL '4' HOUR AND s.ship_time

is ``IntervalBounds(Time.hours(-4), Time.hours(0))``: a left row ``l`` and a right row ``r`` of the
same key join when ::

    r.time + lower <= l.time <= r.time + upper            (IntervalBounds.contains)

A strict edge is Flink's inclusive edge one millisecond in: ``l.time < r.time + u`` is
``<= r.time + (u - 1)`` and ``l.time > r.time + v`` is ``>= r.time + (v + 1)`` (the planner's
``IntervalJoinUtil.computeWindowBoundFromPredicate``). Flink's runtime operator
(``TimeIntervalJoin`` / ``RowTimeIntervalJoin`` in ``flink-table-runtime``,
``org.apache.flink.table.runtime.operators.join.interval``) then works with ::

    leftRelativeSize  lrs = -lower     rightRelativeSize rrs = upper
    operator time     T   = max(W, 0)  where W = min(left watermark, right watermark)

(``lower``/``upper`` after strict edges are moved in: ``IntervalBounds.left_lower`` /
``left_upper``) and ``allowedLateness = 0`` (SQL). ``RowTimeIntervalJoin`` is that operator,
a step per arrival of a key (``run_key`` steps it over one key's arrivals):

* a left row at ``t`` joins the cached right rows in ``[t - rrs, t + lrs]`` (a right row
  at ``t`` the cached left rows in ``[t - lrs, t + rrs]``), if the other side's
  *expiration time* is below the window's upper end; the expiration time is ::

      E_right = T - rrs - 1,   E_left = T - lrs - 1    (MAX_TIME once W = MAX_TIME)

  and cached rows at or below it are removed during the same probe (after the join);
* it is cached for later rows of the other side only if ``T < t + lrs`` (right row:
  ``T < t + rrs``); otherwise no future row can join it: an outer join emits it
  null-padded at once (if it joined nothing now), an inner join drops it without a trace
  -- the kit lists it in ``dropped`` with the reason;
* one cleanup timer per side and key, at ``t + lrs + 1`` for the left cache (``t + rrs + 1``
  for the right one), for the first row cached while that side has none; when the watermark passes it,
  every cached row at or below the expiration time is removed and, for the preserved
  side of an outer join, emitted null-padded if it never joined; then a new timer for the
  earliest row left. The end of input (``W = MAX_TIME``) removes (and pads) everything.

A row that joined is never emitted null-padded. A cached row that did not join is emitted
null-padded by LEFT/RIGHT/FULL (its side preserved) when its cache entry is removed: by the
side's cleanup timer once the watermark passes ``t + lrs + 1`` (left) / ``t + rrs + 1``
(right) -- the timer follows the earliest cached row, so a row cached after a later one
waits for that row's timer --, by a probe of the other side that finds ``t <= E``, or at the
end of input. A row not cached (too late) is padded at once if it joined nothing.
The output watermark of the join is held back by ``max(lrs, rrs)`` (``output_delay``).

Example: orders at 10 and 20, shipments at 12 and 30, ``lower=-4, upper=0`` (an order at
most 4 ms before its shipment), both watermarks ``max time - 0``, LEFT JOIN:

=====  =====  ====  ==============  ===================================================
 pos   side   time  watermark       emitted / state
=====  =====  ====  ==============  ===================================================
 0     left   10    none            o1 cached, left-cache timer at 10 + 4 + 1 = 15
 1     right  12    none -> 10      (o1, s1) joined; s1 cached, right-cache timer 13
 2     left   20    10 -> 12        o2 cached
 3     right  30    12 -> 20        s2 cached; the rise to 20 fires timers 13 and 15:
                                    s1, o1 removed (both joined), new timers 31, 25
 end                MAX_TIME        timer 25: (o2, None), o2 never joined; timer 31:
                                    s2 removed (RIGHT/FULL would pad it)
=====  =====  ====  ==============  ===================================================

>>> from kit.time import WatermarkStrategy, Duration
>>> wm = WatermarkStrategy.for_sql_delay(Duration(0))
>>> arrivals, W = replay([(10, "o1"), (20, "o2")], [(12, "s1"), (30, "s2")], "LRLR", wm, wm)
>>> result = run_key(arrivals, W, IntervalBounds(Duration.of_millis(-4), Duration(0)), "left")
>>> [(o.left, o.right, o.emitted_pos, o.kind) for o in result.outputs]
[('o1', 's1', 1, 'joined'), ('o2', None, 4, 'left_unmatched')]
>>> result.dropped
[]

Emission order (``Output.order``): ``(emitted_pos, phase, timer, index)``. ``phase`` 0 is
output produced while the arrival at ``emitted_pos`` is processed, 1 output of a timer
fired by the watermark rise right after it (Flink processes the element, then the
watermark it raised). ``timer`` is the firing timer's timestamp (0 for phase 0): one rise
fires all due timers of all keys in timestamp order. ``index`` counts the key's outputs.
To merge keys, sort by ``merge_order(key, output)`` = ``(emitted_pos, phase, timer, key,
index)``: timers of different keys with the same timestamp fire in an order Flink leaves
to its priority queue; the kit puts them in key order (the one tie rule it chooses).

On Spark, ``interval_join(orders, shipments, on="id", bounds=IntervalBounds(Time.hours(-4), Time.hours(0)),
how="left")`` returns an ``IntervalJoin``: ``df`` (the joined rows in Flink's emission order,
``merge_order``), ``details()`` (when each row left, under which watermark, and the dropped
rows with their reasons) and ``views()`` (both inputs linked pair by pair, for ``kit.sql``'s
``FROM o, s WHERE ... BETWEEN ...`` form; ``kit/sql/interval.py``). A key holding a NULL never
joins; its rows are cached and expire like others, so outer joins pad them when Flink would.

Where this differs from a real Flink job (documented, deliberate):

* Flink keeps the two expiration times in fields of the operator instance, not in keyed
  state: another key on the same subtask can refresh them earlier. The kit keeps them
  per key, as Flink does when the key is alone on its subtask. This only changes whether a
  late row still joins right rows that have already expired but were not yet cleaned.
* Flink's MapState is iterated in hash (heap backend) or key-byte (RocksDB) order; the
  kit visits cached rows by ascending time, then arrival (RocksDB's order for times >= 0).
* Times are epoch milliseconds: Flink clamps the operator time at 0 and treats a
  cleanup with no row above time 0 as "cache empty", so rows at times <= 0 (or near 0
  with large bounds) behave oddly; the kit replays that and lists rows cleared that way in
  ``dropped``.
* A negative window (``lower > upper``, also after strict edges) makes Flink plan a join
  that emits nothing (inner) or every row null-padded (outer); the kit refuses the bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, NamedTuple

from .. import sparksql
from ..errors import KitError
from ..time import Duration, millis
from ..replay import keyed
from ..replay.interleave import LEFT, MAX_TIME, MIN_TIME, RIGHT, Arrival, Watermarks, check_inputs, per_key, replay  # noqa: F401
from ..replay.keyed import KeyedOperator, MapState, ValueState

__all__ = ["IntervalBounds", "Output", "Dropped", "IntervalJoinResult", "RowTimeIntervalJoin", "run_key",
           "merge_order", "HOWS", "IntervalJoin", "interval_join"]

HOWS = ("inner", "left", "right", "full")
JOINED, LEFT_UNMATCHED, RIGHT_UNMATCHED = "joined", "left_unmatched", "right_unmatched"


@dataclass(frozen=True)
class IntervalBounds:
    """``right.time + lower <= left.time <= right.time + upper`` (each a Time, Duration or
    timedelta; negative for a bound before the right row's time: ``Time.hours(-4)``); a
    bound with ``*_inclusive=False`` is strict (``<``), which Flink runs as the inclusive
    bound one millisecond in."""
    lower: int
    upper: int
    lower_inclusive: bool = True
    upper_inclusive: bool = True

    def __post_init__(self):
        object.__setattr__(self, "lower", millis(self.lower, "IntervalBounds", "lower"))
        object.__setattr__(self, "upper", millis(self.upper, "IntervalBounds", "upper"))
        for name in ("lower_inclusive", "upper_inclusive"):
            if not isinstance(getattr(self, name), bool):
                raise KitError(f"{name} must be True or False; got {getattr(self, name)!r}")
        if self.lower > self.upper:
            raise KitError(f"lower must be <= upper; got lower={self.lower} ms > upper={self.upper} ms "
                           "(Flink would plan a join that never matches)")
        if self.left_lower > self.left_upper:
            raise KitError(f"the bounds hold no time: lower={self.lower} ms "
                           f"(lower_inclusive={self.lower_inclusive}) and upper={self.upper} ms "
                           f"(upper_inclusive={self.upper_inclusive}); make one edge inclusive")

    @property
    def left_lower(self) -> int:
        """Flink's ``leftLowerBound``: the inclusive lower bound."""
        return self.lower if self.lower_inclusive else self.lower + 1

    @property
    def left_upper(self) -> int:
        """Flink's ``leftUpperBound``: the inclusive upper bound."""
        return self.upper if self.upper_inclusive else self.upper - 1

    @property
    def left_relative_size(self) -> int:
        """``leftRelativeSize = -leftLowerBound``: how far a left row reaches forward."""
        return -self.left_lower

    @property
    def right_relative_size(self) -> int:
        """``rightRelativeSize = leftUpperBound``: how far a right row reaches forward."""
        return self.left_upper

    @property
    def output_delay(self) -> int:
        """How far Flink holds the join's output watermark back (``getMaxOutputDelay``)."""
        return max(self.left_relative_size, self.right_relative_size)

    def contains(self, left_time: int, right_time: int) -> bool:
        """Whether rows at these times join (the definition, without any watermark)."""
        return right_time + self.left_lower <= left_time <= right_time + self.left_upper


class Output(NamedTuple):
    """One row the join emits: ``left``/``right`` values (None when padded), after which
    merged position (``n`` = end of input) and under which operator watermark
    (``MIN_TIME``: none yet), ``kind`` (joined / left_unmatched / right_unmatched), the
    rows' arrival ``seq`` on their sides and event times, and ``order`` (module doc)."""
    left: Any
    right: Any
    emitted_pos: int
    watermark: int
    kind: str
    left_seq: int | None
    right_seq: int | None
    left_time: int | None
    right_time: int | None
    order: tuple


class Dropped(NamedTuple):
    """A row Flink discards without a trace, and why (``IntervalJoinResult.dropped``)."""
    arrival: Arrival
    reason: str


class IntervalJoinResult(NamedTuple):
    """``outputs`` in emission order; ``dropped``: the ``Dropped`` rows (too late to be
    cached and joined nothing, on a side that is not null-padded; or cleared by Flink's
    cleanup with no time above 0)."""
    outputs: list
    dropped: list


def merge_order(key, output: Output) -> tuple:
    """Sort key to merge several keys' outputs into one emission order (module doc)."""
    pos, phase, timer, index = output.order
    return (pos, phase, timer, key, index)


class _Cached:
    __slots__ = ("arrival", "matched")

    def __init__(self, arrival: Arrival, matched: bool):
        self.arrival, self.matched = arrival, matched


CACHE, TIMER = ("left_cache", "right_cache"), ("left_timer", "right_timer")   # state names by side


class RowTimeIntervalJoin(KeyedOperator):
    """Flink's ``RowTimeIntervalJoin`` (``TimeIntervalJoin``): a step per ``Arrival`` of a key,
    its side in the row (module doc). State per key: each side's cache (time -> rows, with
    whether each joined), its cleanup timer, the two expiration times, the outputs so far.
    A cleanup timer fires when the watermark the key sees reaches it; ``watermarks`` (every
    key's rises) place it: after the first rise to reach it (``Watermarks.next_rise``; a
    cleanup timer is always ahead of the watermark). Outputs ``Output`` and ``Dropped``
    values, each passed through ``row(key, value)`` if given."""
    state = (MapState(CACHE[LEFT]), MapState(CACHE[RIGHT]), ValueState(TIMER[LEFT]), ValueState(TIMER[RIGHT]),
             MapState("expiration"), ValueState("outputs"), ValueState("pos"))

    def __init__(self, bounds: IntervalBounds, how: str, watermarks: Watermarks, condition=None,
                 allowed_lateness: Duration = Duration(0), min_cleanup_interval: Duration = Duration(0), row=None):
        if not isinstance(bounds, IntervalBounds):
            raise KitError(f"bounds must be an IntervalBounds(lower, upper); got {bounds!r}")
        if how not in HOWS:
            raise KitError(f"how={how!r} is not one of " + ", ".join(map(repr, HOWS)))
        if condition is not None and not callable(condition):
            raise KitError(f"condition must be a function (left_row, right_row) -> bool; got {condition!r}")
        self.lateness = millis(allowed_lateness, "run_key", "allowed_lateness")
        if self.lateness < 0:
            raise KitError(f"allowed_lateness must be >= 0 ms; got {self.lateness}")
        self.min_cleanup = max(0, millis(min_cleanup_interval, "run_key", "min_cleanup_interval"))
        self.size = {LEFT: bounds.left_relative_size, RIGHT: bounds.right_relative_size}
        self.outer = {LEFT: how in ("left", "full"), RIGHT: how in ("right", "full")}
        self.condition, self.W, self.row = condition, watermarks, row

    # -- output ---------------------------------------------------------------------
    def _output(self, ctx, value):
        ctx.output(value if self.row is None else self.row(ctx.key, value))

    def _emit(self, ctx, at: tuple, left: Arrival | None, right: Arrival | None, kind: str):
        """One output, ``at`` ``(pos, phase, timer, watermark)``."""
        pos, phase, timer, wm = at
        count = ctx.state("outputs")
        index = count.value() or 0
        count.update(index + 1)
        self._output(ctx, Output(
            left.row if left else None, right.row if right else None, pos, wm, kind,
            left.seq if left else None, right.seq if right else None,
            left.time if left else None, right.time if right else None, (pos, phase, timer, index)))

    def _pad(self, ctx, at: tuple, side: int, arrival: Arrival):
        if side == LEFT:
            self._emit(ctx, at, arrival, None, LEFT_UNMATCHED)
        else:
            self._emit(ctx, at, None, arrival, RIGHT_UNMATCHED)

    # -- Flink's helpers ------------------------------------------------------------
    def _expiration_time(self, operator_time: int, size: int) -> int:
        if operator_time < MAX_TIME:
            return operator_time - size - self.lateness - 1
        return MAX_TIME

    def _register_cleanup(self, ctx, side: int, row_time: int):
        ts = row_time + self.size[side] + self.min_cleanup + self.lateness + 1
        ctx.state(TIMER[side]).update(ts)
        ctx.register_event_time_timer(ts)

    # -- an arriving row ------------------------------------------------------------
    def process_element(self, a: Arrival, ctx):
        self._check(a, ctx)
        side, other = a.side, 1 - a.side
        watermark = ctx.watermark
        operator_time = max(watermark, 0)
        at = (a.pos, 0, 0, watermark)
        t = a.time
        low, high = t - self.size[other], t + self.size[side]  # window on the other side's times
        joined = False
        expiration = ctx.state("expiration")
        if expiration.get(other, 0) < high:
            expiration[other] = expired = self._expiration_time(operator_time, self.size[other])
            cache = ctx.state(CACHE[other])
            for other_time in sorted(cache):
                entries = cache[other_time]
                if low <= other_time <= high:
                    for e in entries:
                        pair = (a, e.arrival) if side == LEFT else (e.arrival, a)
                        if self.condition is None or self.condition(pair[0].row, pair[1].row):
                            self._emit(ctx, at, pair[0], pair[1], JOINED)
                            joined = True
                            e.matched = True
                if other_time <= expired:             # eager cleanup while joining
                    if self.outer[other]:
                        for e in entries:
                            if not e.matched:
                                self._pad(ctx, at, other, e.arrival)
                    del cache[other_time]
        if operator_time < high:
            ctx.state(CACHE[side]).setdefault(t, []).append(_Cached(a, joined))
            if ctx.state(TIMER[side]).value() is None:
                self._register_cleanup(ctx, side, t)
        elif not joined:
            if self.outer[side]:
                self._pad(ctx, at, side, a)
            else:
                self._output(ctx, Dropped(a, f"too late: operator time {operator_time} >= {high} "
                                             f"(time {t} + {self.size[side]}); no cached row joined it "
                                             "and no later row can"))

    def _check(self, a: Arrival, ctx):
        last = ctx.state("pos")
        if a.pos <= (-1 if last.value() is None else last.value()) or a.pos >= self.W.n:
            raise KitError(f"arrivals must be in increasing merged position below {self.W.n}; "
                           f"got pos {a.pos} after {last.value()}")
        if a.side not in (LEFT, RIGHT):
            raise KitError(f"arrival at pos {a.pos} has side {a.side!r}; expected LEFT (0) or RIGHT (1)")
        if a.time is None:
            raise KitError(f"arrival at pos {a.pos} ({a.row!r}) has no event time; "
                           "an event-time interval join needs one on every row")
        if a.op != "+I":
            raise KitError(f"arrival at pos {a.pos} ({a.row!r}) is a {a.op} change; the interval "
                           "join (like Flink's) consumes insert-only inputs")
        last.update(a.pos)

    # -- timers -----------------------------------------------------------------------
    def on_timer(self, timestamp: int, ctx):
        """A cleanup timer, fired right after the first watermark rise to reach it."""
        fire_pos, fire_wm, _ = self.W.next_rise(0, timestamp)
        at = (fire_pos, 1, timestamp, fire_wm)
        operator_time = max(fire_wm, 0)
        for side in (RIGHT, LEFT):                    # Flink: right cache first, then left
            if ctx.state(TIMER[side]).value() == timestamp:
                expired = ctx.state("expiration")[side] = self._expiration_time(operator_time, self.size[side])
                self._remove_expired(ctx, at, side, expired)

    def _remove_expired(self, ctx, at: tuple, side: int, expired: int):
        cache, earliest = ctx.state(CACHE[side]), -1
        for row_time in sorted(cache):
            if row_time <= expired:
                if self.outer[side]:
                    for e in cache[row_time]:
                        if not e.matched:
                            self._pad(ctx, at, side, e.arrival)
                del cache[row_time]
            elif row_time < earliest or earliest < 0:
                earliest = row_time
        if earliest > 0:
            self._register_cleanup(ctx, side, earliest)
        else:
            ctx.state(TIMER[side]).clear()
            for entries in cache.values():            # Flink clears them (only times <= 0 left)
                for e in entries:
                    self._output(ctx, Dropped(e.arrival, "cleared: Flink's cleanup found no cached time "
                                                          "above 0 and cleared the cache"))
            cache.clear()


def run_key(arrivals: list, watermarks: Watermarks, bounds: IntervalBounds, how: str = "inner",
            condition: Callable[[Any, Any], bool] | None = None, *, allowed_lateness: Duration = Duration(0),
            min_cleanup_interval: Duration = Duration(0)) -> IntervalJoinResult:
    """Flink's event-time interval join over ONE key's ``arrivals`` (in merged arrival
    order, from ``replay``/``interleaved``): ``RowTimeIntervalJoin`` stepped through them
    (``keyed.run_key``, each with the watermark in force), then the end of input;
    ``watermarks`` are the operator watermark's rises over all keys. ``how``: inner, left,
    right or full; ``condition(left_row, right_row)`` an optional extra non-equi condition.
    ``allowed_lateness`` (0 in SQL) and ``min_cleanup_interval``
    (``table.exec.interval-join.min-cleanup-interval``, 0 since Flink 1.18) are the
    operator's other two parameters."""
    operator = RowTimeIntervalJoin(bounds, how, watermarks, condition, allowed_lateness, min_cleanup_interval)
    out = keyed.run_key(operator, [], arrivals, [watermarks.before(a.pos) for a in arrivals])
    return IntervalJoinResult([o for o in out if type(o) is Output], [o for o in out if type(o) is Dropped])


# -- on Spark ---------------------------------------------------------------------------

LINK_LEFT, LINK_RIGHT = "__kit_l", "__kit_r"   # how kit.sql links the views of a pair (``IntervalJoin.views``)
DROPPED = "dropped"


def interval_join(left, right, on, bounds: IntervalBounds, how: str = "inner", *,
                  interleave: str = "event_time", clock=None) -> "IntervalJoin":
    """Flink's event-time interval join of two ``kit.stream``s on Spark.

    - ``on``: the equi-join key: a column name both inputs have, a list of them,
      ``{left_column: right_column}``, or ``()``/``None`` for none (Flink allows a join
      with only the time bounds: every row is one key, run in one task);
    - ``bounds``: ``IntervalBounds(lower, upper)`` over the two streams' event times
      (``right.time + lower <= left.time <= right.time + upper``);
    - ``how``: inner, left, right or full;
    - ``interleave``, ``clock``: the merged arrival order (``replay.interleaved``).
    """
    for side, s in (("left", left), ("right", right)):
        if getattr(s, "time", "") is None:
            raise KitError(f"an interval join bounds the two streams' event times; the {side} stream has none: "
                           "kit.stream(df, time=<column>, ...) gives it one")
    if on is None:
        pairs = ()
    elif isinstance(on, dict):
        pairs = tuple(on.items())
    else:
        pairs = tuple((c, c) for c in ((on,) if isinstance(on, str) else on))
    return IntervalJoin(left, right, pairs, bounds, how, interleave, clock)


def _never(left_row, right_row) -> bool:
    """The condition of rows whose key holds a NULL: ``NULL = x`` is never true."""
    return False


@dataclass(frozen=True)
class IntervalJoin:
    """An interval join on Spark, built lazily. ``df`` holds the rows Flink emits, ``details()``
    when and why; ``views()`` the two inputs linked pair by pair, for ``kit.sql``.

    Runs as the temporal join does (``versioned.TemporalJoin``): both inputs merged
    (``replay.interleaved``), the operator watermark's rises collected once
    (``replay.watermarks``; found by the task itself when one task holds every row), rows
    spread over tasks by key and sorted by merged position, and ``RowTimeIntervalJoin`` run
    per key on the replay driver (``interleave.per_key``), a step per arrival.

    Order: Flink's emission order, ``merge_order`` -- by the merged position after which a
    row left, elements before the timers fired by the watermark they raised, timers by
    timestamp, then the key (Spark's ascending order, NULLs first) and the key's own
    order. A key holding a NULL never joins (``NULL = x`` is unknown, as in Flink's
    generated condition), but its rows are still cached and expire like any other key's,
    so an outer join pads them when Flink would (at their cleanup timer, or at once when
    late) and an inner join lists its late ones in ``details()``.
    """
    left: Any
    right: Any
    keys: tuple                       # ((left column, right column), ...); () for none
    bounds: IntervalBounds
    how: str = "inner"
    interleave: str = "event_time"
    clock: Any = None

    def __post_init__(self):
        if not isinstance(self.bounds, IntervalBounds):
            raise KitError(f"bounds must be an IntervalBounds(lower, upper); got {self.bounds!r}")
        if self.how not in HOWS:
            raise KitError(f"how={self.how!r} is not one of " + ", ".join(map(repr, HOWS)))
        object.__setattr__(self, "keys", tuple(tuple(k) for k in self.keys))
        check_inputs(self.left, self.right, self.keys)

    # -- the replay ----------------------------------------------------------------------
    @cached_property
    def merged(self):
        """Both inputs in merged arrival order with the key ``_k0..`` (``replay.interleaved``)."""
        from ..replay.interleave import interleaved
        return interleaved(self.left, self.right, self.interleave, self.clock, self.keys)

    @cached_property
    def watermarks(self) -> Watermarks:
        from ..replay.interleave import watermarks
        return watermarks(self.merged)

    @cached_property
    def replayed(self):
        """``_replayed()``, computed once when first read (``localCheckpoint``): ``df``,
        ``details()`` and ``views()`` all read it; the first two join the rows' values back
        (``_with_values``)."""
        return self._replayed().localCheckpoint()

    def _replayed(self, jvm: bool = True):
        """Every output row and every dropped row, with ``_kind``, ``_emitted_pos``, ``_watermark``
        (ms; NULL: none yet or end of input), the merge order (``_phase``, ``_timer``, the
        key ``_k0..``, ``_index``), ``_left_seq``/``_right_seq``, ``_left_time``/``_right_time``
        (ms) and ``_reason`` (dropped rows): the two rows by their seqs, not their values, which
        would cost a Python value and an Arrow conversion a side per row out (a hot key joins each
        of its rows ~50 times: ~250M rows out of 10M in). Run in the JVM (``_in_jvm``) where it
        can (``jvm`` False: the Python replay, the reference it equals)."""
        from pyspark.sql import types as T

        from ..jvm import available

        merged, bounds, how = self.merged, self.bounds, self.how
        keys = [f"_k{i}" for i in range(len(self.keys))]
        L, S = T.LongType(), T.StringType()
        schema = T.StructType(
            [T.StructField(n, t) for n, t in (("_kind", S), ("_emitted_pos", L), ("_watermark", L),
                                              ("_phase", T.IntegerType()), ("_timer", L), ("_index", L),
                                              ("_left_seq", L), ("_right_seq", L), ("_left_time", L),
                                              ("_right_time", L), ("_reason", S))]
            + [merged.schema[k] for k in keys])
        changelog = any("op" in merged.schema[c].dataType.names for c in ("_vl", "_vr"))
        if jvm and not changelog and available(merged.sparkSession, "IntervalJoin"):
            return self._in_jvm(keys, schema)

        def edge(w):
            return None if w in (MIN_TIME, MAX_TIME) else w

        def row(key, o):
            if type(o) is Output:
                pos, phase, timer, index = o.order
                return (o.kind, pos, edge(o.watermark), phase, timer, index, o.left_seq, o.right_seq,
                        o.left_time, o.right_time, None, *key)
            a, reason = o
            mine = (a.seq, a.time)
            l, r = (mine, (None,) * 2) if a.side == LEFT else ((None,) * 2, mine)
            return (DROPPED, None, None, None, None, None, l[0], r[0], l[1], r[1], reason, *key)

        def operator(key, marks):                       # it refuses changelog rows
            return RowTimeIntervalJoin(bounds, how, marks, _never if None in key else None, row=row)

        # no condition reads the rows' values: they stay in the JVM (df and details() join them back)
        return per_key(merged, keys, operator, schema, marks=True, values=False)

    def _in_jvm(self, keys: list, schema):
        """``_replayed()``'s rows from ``kit/jvm/IntervalJoin.java``, the JVM twin of the Python
        replay (``RowTimeIntervalJoin`` per key), which takes four times as long (10M events over
        10K keys: 22-24 s against 95 s)."""
        from pyspark.sql import functions as F

        from ..jvm import interval_join as in_jvm
        from ..replay.interleave import tasks
        from ..replay.keyed import spread
        merged, bounds, how = self.merged, self.bounds, self.how
        arrivals = merged.selectExpr("_pos", "CAST(_side AS INT) AS _side", "_seq", "CAST(_ts AS BIGINT) AS _ts",
                                     "CAST(_Wb AS BIGINT) AS _Wb", *keys)
        rows = spread(arrivals, keys, tasks(merged) if keys else 1, "_pos")
        rises = merged.groupBy("_W").agg(F.min("_pos").alias("p"), F.count(F.lit(1)).alias("n")).orderBy("_W")
        settings = (f"sizes={bounds.left_relative_size},{bounds.right_relative_size};"
                    f"outer={int(how in ('left', 'full'))},{int(how in ('right', 'full'))};keys={len(keys)}")
        return in_jvm(rows, settings, rises, schema)

    def _with_values(self, frame):
        """``frame`` (rows of ``replayed``) with ``_vl``/``_vr``: the values of the left and the
        right row it names (``_left_seq``, ``_right_seq``; NULL where it names none), from the
        merged inputs."""
        from pyspark.sql import functions as F
        for side, seq, values in ((LEFT, "_left_seq", "_vl"), (RIGHT, "_right_seq", "_vr")):
            rows = self.merged.where(F.col("_side") == side).select(F.col("_seq").alias(seq), values)
            frame = frame.join(rows, seq, "left")
        return frame

    def _ordered(self, frame):
        from pyspark.sql import functions as F
        keys = [F.col(f"_k{i}").asc_nulls_first() for i in range(len(self.keys))]
        return frame.orderBy(F.col("_emitted_pos").asc_nulls_last(), "_phase", "_timer", *keys, "_index",
                             F.col("_left_seq").asc_nulls_last(), "_right_seq")

    # -- results -------------------------------------------------------------------------
    @cached_property
    def df(self):
        """The joined rows in Flink's emission order (class doc): the left columns, then the
        right ones (a right column named like a left one gets ``_right``); the padded side
        of an outer join is NULL."""
        from pyspark.sql import functions as F
        lcols, rcols = self.left.source.columns, self.right.source.columns
        rows = self._ordered(self._with_values(self.replayed.where(F.col("_kind") != DROPPED)))
        return rows.select(*[F.col("_vl")[c].alias(c) for c in lcols],
                           *[F.col("_vr")[c].alias(c + "_right" if c in lcols else c) for c in rcols])

    def details(self):
        """Every output row's metadata, then the dropped rows (nothing lost silently):
        ``kind`` (joined / left_unmatched / right_unmatched / dropped), ``emitted_pos``
        (merged position after which it left; the number of arrivals = end of input; NULL
        for dropped rows), ``watermark`` (operator watermark then, ms; NULL: none yet or end
        of input), ``left_seq``/``right_seq`` (arrival on each side), ``left_time``/
        ``right_time`` (ms), ``reason`` (why a row was dropped) and the values ``left``/``right``.
        Same order as ``df``, dropped rows last."""
        from pyspark.sql import functions as F
        return self._ordered(self._with_values(self.replayed)).select(
            F.col("_kind").alias("kind"), F.col("_emitted_pos").alias("emitted_pos"),
            F.col("_watermark").alias("watermark"), F.col("_left_seq").alias("left_seq"),
            F.col("_right_seq").alias("right_seq"), F.col("_left_time").alias("left_time"),
            F.col("_right_time").alias("right_time"), F.col("_reason").alias("reason"),
            F.col("_vl").alias("left"), F.col("_vr").alias("right"))

    def views(self, pairs=None):
        """The two inputs for ``kit.sql``: each row once per pair it joined, with ``__kit_l``
        (its left seq) and ``__kit_r`` (its right seq) naming the pair, or once with the
        other side's seq NULL when it joined nothing; a row Flink dropped and that joined
        nothing is left out. Joining the views on ``(__kit_l, __kit_r)`` gives exactly the
        pairs, and the rows left alone are what an outer join pads. ``pairs``: a DataFrame
        ``(__kit_l, __kit_r)`` to use instead of the operator's (``kit.sql`` passes the pairs
        that also meet the rest of the ON condition)."""
        from pyspark.sql import functions as F
        replayed = self.replayed
        if pairs is None:
            pairs = replayed.where(F.col("_kind") == JOINED).select(
                F.col("_left_seq").alias(LINK_LEFT), F.col("_right_seq").alias(LINK_RIGHT))
        pairs = pairs.select(LINK_LEFT, LINK_RIGHT)
        out = []
        for side, own, other, columns, seq in (
                ("_vl", LINK_LEFT, LINK_RIGHT, self.left.source.columns, "_left_seq"),
                ("_vr", LINK_RIGHT, LINK_LEFT, self.right.source.columns, "_right_seq")):
            rows = self.merged.where(F.col("_side") == (LEFT if side == "_vl" else RIGHT)).select(
                *[F.col(side)[c].alias(c) for c in columns], F.col("_seq").alias(own))
            # never a broadcast of the pairs: the planner takes their size for the input's, but a
            # hot key's pairs can outnumber it 50 to 1 (broadcasting them ran out of memory), and
            # adaptive execution keeps a broadcast it planned, as the plan with fewer shuffles
            linked = rows.join(pairs.hint("merge"), own, "left")
            dropped = replayed.where((F.col("_kind") == DROPPED) & F.col(seq).isNotNull()).select(
                F.col(seq).alias("_dropped"))
            linked = linked.join(dropped, F.col(other).isNull() & (F.col(own) == F.col("_dropped")), "left_anti")
            out.append(linked.select(*map(sparksql.col, columns), LINK_LEFT, LINK_RIGHT))
        return tuple(out)
