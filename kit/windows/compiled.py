"""The general path's replay in the JVM, for windows built only from built-in parts.

``WindowResult`` replays each key through the reference operator (``operator.py``) in
Python. When every part of the window is one the JVM twin of that operator
(``kit/jvm/WindowOperator.java``) implements, the same replay runs there instead, with
the same rows: about a hundred times less time per element. The built-in parts are:

===============  ===================================================================
assigner         tumbling, sliding, session with a static gap (event or processing
                 time), ``GlobalWindows``
trigger          ``EventTimeTrigger``, ``ProcessingTimeTrigger``, ``CountTrigger``,
                 ``ContinuousEventTimeTrigger``, ``ContinuousProcessingTimeTrigger``,
                 ``NeverTrigger``, and ``PurgingTrigger`` of one of them
evictor          none, ``CountEvictor``, ``TimeEvictor``
function         ``aggregate(...)`` of ``Count``, ``Sum``, ``Avg`` (integer or floating
                 columns), ``Min``, ``Max`` (numbers, strings, booleans, dates,
                 timestamps), and no window function
===============  ===================================================================

Anything else -- a user trigger, evictor or function, ``DeltaEvictor``, a dynamic gap,
decimals -- runs in Python, as does every window in a session the kit cannot reach the
JVM of (``kit.jvm.available``) and a window with timers of both clocks, which replays the
whole stream at once (``operator.timer_clocks``). Property tests
(tests/test_window_compiled.py) check that both give the same rows.

    settings(result, fields)  ->  "assigner=session;event_time=1;size=30000;...;trigger=event;..."
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import jvm
from ..stream import null_time_error
from .assigners import (EventTimeSessionWindows, GlobalWindows, ProcessingTimeSessionWindows,
                        SlidingEventTimeWindows, SlidingProcessingTimeWindows, TumblingEventTimeWindows,
                        TumblingProcessingTimeWindows)
from .evictors import CountEvictor, TimeEvictor
from .functions import Aggregates, Avg, Count, Max, Min, Sum
from .operator import MAX_FIRINGS_AT_END
from .triggers import (ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountTrigger,
                       EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger, PurgingTrigger)

__all__ = ["settings", "run"]

_ASSIGNERS = {TumblingEventTimeWindows: "tumbling", TumblingProcessingTimeWindows: "tumbling",
              SlidingEventTimeWindows: "sliding", SlidingProcessingTimeWindows: "sliding",
              EventTimeSessionWindows: "session", ProcessingTimeSessionWindows: "session",
              GlobalWindows: "global"}


def _trigger(trigger) -> tuple[str, bool] | None:
    """The JVM's name of a built-in trigger and whether it reads the processing clock."""
    kind = type(trigger)
    if kind is PurgingTrigger:
        nested = _trigger(trigger.nested)
        return None if nested is None else (f"purging:{nested[0]}", nested[1])
    if kind is EventTimeTrigger:
        return "event", False
    if kind is ProcessingTimeTrigger:
        return "processing", True
    if kind is CountTrigger:
        return f"count:{trigger.max_count}", False
    if kind is ContinuousEventTimeTrigger:
        return f"continuous-event:{trigger.interval}", False
    if kind is ContinuousProcessingTimeTrigger:
        return f"continuous-processing:{trigger.interval}", True
    if kind is NeverTrigger:
        return "never", False
    return None


def aggregate_kind(function: str, dtype) -> int | None:
    """How the JVM adds or compares a column: 0 as integers, 1 as doubles, 2 by
    ``compareTo``, 3 as strings by code point; None: not compiled."""
    if function == "count":
        return 2
    if isinstance(dtype, T.IntegralType):
        return 0
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        return 1
    if function in ("min", "max"):
        if isinstance(dtype, T.StringType):
            return 3
        if isinstance(dtype, (T.BooleanType, T.DateType, T.TimestampType)):
            return 2
    return None


def settings(result, fields: list, kinds=("firing", "late", "element"), values=None) -> str | None:
    """The JVM operator's settings for ``result`` (a ``WindowResult``) writing the rows of
    ``kinds`` in the tagged ``fields`` (``WindowResult._run``) from the columns ``values``
    (default: all of the stream's), or None when a part is not built in."""
    spec, stream = result.spec, result.stream
    assigner = _ASSIGNERS.get(type(spec.assigner))
    trigger = _trigger(spec.trigger)
    agg = spec.contents._agg if spec.contents.kind == "aggregate" else None
    if (assigner is None or trigger is None or spec.function is not None
            or type(agg) not in (Count, Sum, Min, Max, Avg, Aggregates)
            or type(spec.evictor) not in (type(None), CountEvictor, TimeEvictor)):
        return None
    if getattr(spec.assigner, "extractor", None) is not None:
        return None
    if not isinstance(result.time_type, (T.IntegralType, T.TimestampType)):
        return None
    clock = trigger[1] or not spec.assigner.event_time and assigner != "global"
    if clock and stream.proctime is None:
        return None   # Python names the missing clock
    schema = stream.source.schema
    compare = [aggregate_kind(p.function, None if p.column is None else schema[p.column].dataType)
               for p in agg.parts]
    if None in compare:
        return None
    values = result.values if values is None else values
    evictor = spec.evictor
    n_firing = sum(1 for f in fields if f.name.startswith("_firing"))
    n_late = sum(1 for f in fields if f.name.startswith("_late"))
    a = spec.assigner
    return ";".join(f"{k}={v}" for k, v in {
        "assigner": assigner, "event_time": int(a.event_time),
        "size": getattr(a, "size", None) or getattr(a, "gap", None) or 0, "slide": getattr(a, "slide", 0),
        "offset": getattr(a, "offset", 0), "lateness": spec.allowed_lateness, "trigger": trigger[0],
        "trigger_repr": repr(spec.trigger), "max_firings_at_end": MAX_FIRINGS_AT_END,
        "final_pt": "" if result._end is None else result._end[1],
        "end_seq": -1 if result._end is None else result._end[0],
        "evictor": {type(None): "", CountEvictor: "count", TimeEvictor: "time"}[type(evictor)],
        "evict_arg": (0 if evictor is None else evictor.max_count if isinstance(evictor, CountEvictor)
                      else evictor.window_size),
        "evict_after": int(bool(evictor is not None and evictor.do_evict_after)),
        "keys": ",".join(str(values.index(k)) for k in result.keys),
        "agg_functions": ",".join(p.function for p in agg.parts),
        "agg_columns": ",".join(str(-1 if p.column is None else values.index(p.column)) for p in agg.parts),
        "agg_kinds": ",".join(map(str, compare)),
        "seq": len(values), "ts": len(values) + 1, "wm": len(values) + 2, "pt": len(values) + 3,
        "kinds": ",".join(kinds), "width": len(fields),
        "firing_at": 1, "late_at": 1 + n_firing, "element_at": 1 + n_firing + n_late,
    }.items())


def applies(result) -> bool:
    """Whether ``run`` takes ``result``: its parts are built in and the JVM is in reach."""
    return (settings(result, []) is not None
            and jvm.available(result.stream.source.sparkSession, "WindowOperator"))


def run(result, spread_of, fields: list, kinds: list) -> DataFrame | None:
    """The rows of ``kinds`` in ``fields`` (one kind: in its own only), replayed by the JVM
    operator; None when the window is not built from built-in parts or the JVM is out of
    reach. ``spread_of(values, sort=False)``: the columns ``values``, ``seq``, ``_ts``,
    ``_wm``, ``_pt``, spread over tasks by key (``WindowResult._spread``). The firings need
    only the keys and the aggregated columns; late elements and fates carry every column."""
    if len(kinds) == 1:   # its own columns only
        fields = [f for f in fields if f.name == "_kind" or f.name.startswith(f"_{kinds[0]}")]
    values, agg = result.values, getattr(result.spec.contents, "_agg", None)
    if kinds == ["firing"] and agg is not None:
        needed = {*result.keys, *(p.column for p in getattr(agg, "parts", ()))}
        values = [c for c in values if c in needed]
    config = settings(result, fields, kinds, values)
    if config is None or not jvm.available(result.stream.source.sparkSession, "WindowOperator"):
        return None
    spread = spread_of(values, sort=False)   # the JVM sorts each key's rows
    if result.spec.assigner.event_time or "continuous-event" in config:   # Flink rejects rows without a time
        where = F.concat(F.lit("seq="), F.col("seq").cast("string"))
        spread = spread.withColumn("_ts", F.when(F.col("_ts").isNull(), null_time_error(
            result.stream.time, where).cast("long")).otherwise(F.col("_ts")))
    return jvm.window_operator(spread, config, T.StructType(fields))   # window bounds in ms
