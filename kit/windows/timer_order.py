"""Timers at one time when keys are replayed apart: Flink's order, from one heap.

Flink's window operator keeps the timers of all its keys in one heap per clock
(``operator.TimerHeap``); timers at the same time fire in the order the heap leaves them,
so one key's registrations and firings move another key's ties. A key replayed alone (in
parallel, or by the JVM twin) has a heap of its own: its firings are Flink's, but two of
its windows with timers at one time may fire in the other order.

The order is put right afterwards, without replaying the stream as one operator: each key
is replayed once more, alone, logging only what changed its heap (``run_key(log=...)``:
timers added, deleted, fired); each fired timer is placed on the stream as its firing is
(``placement``: the arrival after which it fired -- the *batch* -- and the watermark, or
processing time, then); then ``heap_ranks`` runs one heap over the keys' changes in the
stream's order -- an element's changes at its arrival, each batch's timers polled up to its
watermark, each one's firing's changes right after it -- which is serial over the timers'
changes only, not the rows. A key's firings at one time in one batch then take the heap's
order (``in_flink_order``).

    key a: windows [-15, 5) and [-5, 15) with timers at 5; key b's timers moved them:
    the heap polls a[-5, 15) before a[-15, 5), and so does Flink

This runs only when a key can have two firings at one time (``may_tie``: a trigger with
timers not at its window's end -- the continuous triggers, a user's trigger) and the
firings show such a tie. The logging replay runs in Python, also for a window the JVM
twin replays, and the heap runs on the driver: for such a window it costs several times
the JVM's replay (20,000 rows, 100 keys, sliding windows under a continuous trigger,
320,000 firings: about 11 s without, 80 s with, on 2 cores). The firings of one key's tied windows are taken to be independent
of their order (each reads and writes its own window's state, as every built-in part does);
a function that carries state between a key's windows (``global_state()``) and reads it in
such tied firings sees them in its own heap's order.
"""

from __future__ import annotations

from collections import deque

import pyarrow as pa
from pyspark.sql import DataFrame, Row, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from ..arrow import column, python_values
from ..errors import KitError
from ..replay.keyed import replay, tuples
from .assigners import MAX_TIME
from .keyed import ELEMENT, KeyedWindow
from .operator import TimerHeap, timer_clocks
from .placement import first_at_least
from .triggers import ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, PurgingTrigger, Trigger

__all__ = ["may_tie", "heap_ranks", "in_flink_order"]

_TIMER_CAUSES = "cause IN ('event-time timer', 'processing-time timer')"


def may_tie(spec) -> bool:
    """Whether one key's windows can fire on timers at the same time: the trigger registers
    timers not at its window's end (a continuous trigger, a user's trigger); a window's end
    and cleanup are its own (two windows of a key never share an end unless they are one)."""
    trigger = spec.trigger
    while type(trigger) is PurgingTrigger:
        trigger = trigger.nested
    return (type(trigger) in (ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger)
            or type(trigger).__module__ != Trigger.__module__)


def heap_ranks(logs: dict, placed) -> dict:
    """``{(key, batch, time, window): rank}``: the place of each timer firing in one heap's
    polls (0, 1, ... across the whole stream). ``logs``: ``{key: run_key's log}``;
    ``placed(time, floor)``: ``(batch, limit)`` of a fired timer -- the arrival after which
    it fired (None: the end of input) and the watermark or processing time it fired under."""
    elements, polls, limits = {}, {}, {}
    for key, log in logs.items():
        changes = None
        for entry in log:
            if entry[0] == "element":
                changes = []
                elements[entry[1]] = (key, changes)
            elif entry[0] == "poll":
                _, time, window, floor = entry
                batch, limit = placed(time, floor)
                batch = MAX_TIME if batch is None else batch
                limits[batch] = limit if batch not in limits else max(limits[batch], limit)
                changes = []
                polls.setdefault((key, time, window), deque()).append((batch, changes))
            else:
                changes.append(entry)
    heap, ranks = TimerHeap(), {}

    def apply(key, changes):
        for change, time, window, floor in changes:
            if change == "add":
                heap.add(key, time, window, floor)
            else:
                heap.delete(key, time, window)

    for at, phase in sorted([(seq, 0) for seq in elements] + [(batch, 1) for batch in limits]):
        if phase == 0:
            apply(*elements[at])
            continue
        while (timer := heap.poll_until(limits[at])) is not None:
            fired = polls.get((timer.owner, timer.time, timer.window))
            batch, changes = fired.popleft() if fired else (None, None)
            if batch != at:
                raise KitError(f"the timer at {timer.time} of key {timer.owner!r}, window {timer.window!r}, fires "
                               f"after arrival {at} in one heap but after {batch} when its key is replayed alone, so "
                               "its key's firings at one time cannot be put in Flink's order; a stream small enough "
                               "to run as one operator (one task) gets Flink's order directly")
            ranks[(timer.owner, None if at == MAX_TIME else at, timer.time, timer.window)] = len(ranks)
            apply(timer.owner, changes)
    return ranks


def in_flink_order(result, firings: DataFrame) -> DataFrame:
    """``firings`` (the replay's rows, times in ms, timers placed; ``WindowResult._firings``)
    with each key's timer firings at one time in one batch in Flink's order: their ``_order``
    values permuted among them as ``heap_ranks`` ranks them. The same rows when nothing ties."""
    spec = result.spec
    if not result.keys or not may_tie(spec) or len(timer_clocks(spec)) != 1:
        return firings
    ties = (firings.where(_TIMER_CAUSES).groupBy("key", "cause", "fired_after", "timer").count()
            .where("count > 1").limit(1).collect())
    if not ties:
        return firings
    logs = _logs(result)
    ranks = heap_ranks(logs, _placement(result, logs))
    groups = {}
    for (key, batch, time, window), rank in ranks.items():
        groups.setdefault((key, batch, time), []).append((window, rank))
    rows = [(key, time, batch, window[0], window[1], rank) for (key, batch, time), fired in groups.items()
            if len(fired) > 1 for window, rank in fired]
    if not rows:
        return firings
    schema = T.StructType([T.StructField("_k", result._key_type()), *[
        T.StructField(c, T.LongType()) for c in ("_t", "_b", "_ws", "_we", "_rank")]])
    arrow = to_arrow_schema(schema, timezone="UTC")
    ranked = firings.sparkSession.createDataFrame(pa.Table.from_arrays(   # Arrow: no Python row per rank
        [column(list(c), f.dataType, arrow.field(f.name).type) for c, f in zip(zip(*rows), schema.fields)],
        schema=arrow))
    joined = firings.join(ranked, F.expr(f"{_TIMER_CAUSES} AND key <=> _k AND timer = _t AND fired_after <=> _b "
                                         "AND window_start <=> _ws AND window_end <=> _we"), "left")
    group = Window.partitionBy("key", "cause", "fired_after", "timer")
    permuted = joined.where("_rank IS NOT NULL").withColumn("_order", F.element_at(
        F.array_sort(F.collect_list("_order").over(group)),
        F.row_number().over(group.orderBy("_rank", "_order")).cast("int")))
    columns = firings.columns
    return permuted.select(*columns).unionByName(joined.where("_rank IS NULL").select(*columns))


def _window(window) -> tuple:
    """A window's bounds in ms; ``(None, None)`` for the global window."""
    return (getattr(window, "start", None), getattr(window, "end", None))


def _logs(result) -> dict:
    """``{key: log}``: each key replayed alone once more, logging its heap (``KeyedWindow``'s ``log``), the
    keys spread over tasks as the replay spreads them; windows as their bounds."""
    keys, values, spec, inner = list(result.keys), result.values, result.spec, result.inner.__getitem__
    end, crossings = result._end, result._crossings
    crossing = None if crossings is None else (lambda t: crossings.get(t, MAX_TIME))
    key_type, element_row = result._key_type(), Row(*values)
    schema = T.StructType([T.StructField("_k", key_type), T.StructField("_i", T.LongType()),
                           T.StructField("_op", T.StringType()), *[T.StructField(c, T.LongType())
                                                                   for c in ("_t", "_ws", "_we", "_f")]])

    def operator(key):
        log = []

        def emit(key, elements, result):
            head = key if len(keys) == 1 else dict(zip(keys, key))
            for i, entry in enumerate(log):
                if entry[0] == "element":
                    yield head, i, "element", entry[1], None, None, None
                else:
                    yield head, i, entry[0], entry[1], *_window(entry[2]), entry[3]
        return KeyedWindow(spec, element_row, emit, end=end, crossing=crossing, log=log)

    replayed = replay(result._spread(values), [inner(k) for k in keys], operator, schema,
                      [inner(c) for c in values] + ELEMENT, tuples(schema, nan_is_null=True))
    table = replayed.orderBy("_k", "_i").toArrow()
    cols = [python_values(table.column(c)) for c in ("_k", "_op", "_t", "_ws", "_we", "_f")]
    logs = {}
    for key, op, t, ws, we, f in zip(*cols):
        key = tuple(key.values()) if len(keys) > 1 else key
        logs.setdefault(key, []).append(("element", t) if op == "element" else (op, t, (ws, we), f))
    return logs


def _placement(result, logs: dict):
    """``placed(time, floor)`` for ``heap_ranks``: a fired timer's batch and limit, found as
    ``placement.place_timers`` finds a firing's (one pass over the stream for all of them)."""
    s = result.stream
    event = "event" in timer_clocks(result.spec)
    fired = {(e[1], e[3]) for log in logs.values() for e in log if e[0] == "poll"}
    arrivals = result._arrivals if result._arrivals is not None else s.unordered().select(
        "seq", s.own_watermark().alias("own"), s.millis("watermark").alias("before"),
        (F.unix_millis("proctime") if s.proctime is not None else F.lit(None).cast("long")).alias("pt"))
    if event:
        hits = first_at_least(arrivals, {"own": [max(t, f) for t, f in fired]})
    else:
        hits = first_at_least(arrivals, {"pt": [t for t, _ in fired], "seq": [f for _, f in fired]})

    def placed(time, floor):
        if event:
            hit = hits.get(("own", max(time, floor)))
            return (None, MAX_TIME) if hit is None else (
                hit.seq, max(v for v in (hit.before, hit.own) if v is not None))
        by_clock, by_seq = hits.get(("pt", time)), hits.get(("seq", floor))
        if by_clock is None or by_seq is None:
            return None, MAX_TIME
        hit = max(by_clock, by_seq, key=lambda h: h.seq)
        return hit.seq - 1, hit.pt
    return placed
