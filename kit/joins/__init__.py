"""Flink's joins over time (seed 002), replayed on Spark: their operators run per key on the
replay driver (``kit.replay.keyed``), a two-input one's over both inputs interleaved
(``kit.replay.interleave``):

- ``temporal_join`` / ``FOR SYSTEM_TIME AS OF o.rowtime``: the event-time temporal join
  against a versioned table, and by processing time the temporal table function join
  (``TemporalTableFunction``, ``LATERAL TABLE (Rates(o.proctime))``); ``versioned.py`` runs
  them, ``temporal.py`` holds Flink's operators, ``asof.py`` the as-of fast path;
- ``lookup_join`` / ``FOR SYSTEM_TIME AS OF o.proctime`` against a ``LookupTable`` (SQLite or
  any DB-API database, with Flink's lookup cache);
- ``interval_join`` / ``o.t BETWEEN s.t - INTERVAL ... AND s.t``: the event-time interval
  join.

In SQL (``kit.sql``) all of them take Flink's syntax.
"""

from .interval import IntervalBounds, IntervalJoin, interval_join
from .lookup import LookupCache, LookupTable, lookup_join
from ..replay.interleave import INTERLEAVINGS
from .temporal import StateRetention
from .versioned import TemporalJoin, TemporalTableFunction, temporal_join

__all__ = ["INTERLEAVINGS", "IntervalBounds", "IntervalJoin", "LookupCache", "LookupTable", "StateRetention",
           "TemporalJoin", "TemporalTableFunction", "interval_join", "lookup_join", "temporal_join"]
