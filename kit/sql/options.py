"""Flink's table options for continuous queries, read from ``kit.sql(..., config={...})``.

==============================================  =========================  ===================
option                                          value                      default
==============================================  =========================  ===================
``table.exec.state.ttl``                        ``'1 h'``, ms, ``Duration``  0 (kept forever)
``table.exec.mini-batch.enabled``               ``True`` / ``'true'``        false
``table.exec.mini-batch.allow-latency``         like the TTL                 none: required
``table.exec.mini-batch.size``                  rows per bundle (> 0)        none: required
``table.optimizer.agg-phase-strategy``          AUTO, ONE_PHASE, TWO_PHASE   AUTO
``table.optimizer.distinct-agg.split.enabled``  ``True`` / ``'true'``        false
``table.optimizer.distinct-agg.split.bucket-num``  buckets (> 0)             1024
==============================================  =========================  ===================

The legacy ``withIdleStateRetentionTime(min, max)`` of the seed is
``idle_state_retention(min, max)``: Flink 1.x kept an idle key's state at least ``min``
and at most ``max``; Flink 2.3 has only the TTL, which is what the kit runs (``max``;
``min`` must not exceed it).

A duration (the TTL, the mini-batch latency, a temporal join's retention) is written as
Flink writes it, ``'2 h'``, ``'30 min'``, ``'10 s'``, ``'500 ms'``, or given as a Duration, a
timedelta or milliseconds: ``duration_option``.

Local-global aggregation (``TWO_PHASE``, and ``AUTO``) needs mini-batches: without them Flink
2.3 keeps the plan one-phase, and so does the kit.
"""

from __future__ import annotations

from ..errors import KitError
from ..changelog import Options
from ..time import Duration, to_duration

__all__ = ["DYNAMIC_OPTIONS", "dynamic_options", "idle_state_retention", "duration_option"]

TTL = "table.exec.state.ttl"
MINI_BATCH = "table.exec.mini-batch.enabled"
LATENCY = "table.exec.mini-batch.allow-latency"
SIZE = "table.exec.mini-batch.size"
PHASE = "table.optimizer.agg-phase-strategy"
SPLIT = "table.optimizer.distinct-agg.split.enabled"
BUCKETS = "table.optimizer.distinct-agg.split.bucket-num"
DYNAMIC_OPTIONS = (MINI_BATCH, LATENCY, SIZE, PHASE, SPLIT, BUCKETS)
PHASES = ("AUTO", "ONE_PHASE", "TWO_PHASE")


def dynamic_options(config: dict, ttl_ms: int = 0) -> tuple[Options, dict]:
    """``config``'s dynamic-table options as ``Options`` (``ttl_ms``: the TTL as the temporal
    joins read it) and the rest of ``config``."""
    rest = {k: v for k, v in config.items() if k not in DYNAMIC_OPTIONS}
    mini_batch = None
    if _flag(config, MINI_BATCH):
        missing = [k for k in (LATENCY, SIZE) if k not in config]
        if missing:
            raise KitError(f"{MINI_BATCH} needs {' and '.join(missing)} too (Flink: 'allow-latency' "
                           f"like '5 s', 'size' a number of rows)")
        size, latency = _positive(config, SIZE), _millis(config[LATENCY], LATENCY)
        if latency <= 0:   # Flink: "must be > 0"
            raise KitError(f"{LATENCY}={config[LATENCY]!r}: the latency must be above 0 ms, e.g. '5 s'")
        mini_batch = (latency, size)
    else:
        stray = [k for k in (LATENCY, SIZE) if k in config]
        if stray:
            raise KitError(f"{stray} set but {MINI_BATCH} is not true: set it to use mini-batches")
    phase = str(config.get(PHASE, "AUTO")).upper()
    if phase not in PHASES:
        raise KitError(f"{PHASE}={config[PHASE]!r} is not one of {list(PHASES)}")
    split = None
    if _flag(config, SPLIT):   # Flink's default: 1024 buckets
        split = _positive(config, BUCKETS) if BUCKETS in config else 1024
    elif BUCKETS in config:
        raise KitError(f"{BUCKETS} set but {SPLIT} is not true")
    return Options(ttl_ms=ttl_ms, mini_batch=mini_batch, agg_phase=phase, distinct_split=split), rest


def idle_state_retention(minimum, maximum) -> dict:
    """The config of the seed's ``withIdleStateRetentionTime(min, max)``: ``{TTL: max}``."""
    lo, hi = _millis(minimum, "minimum"), _millis(maximum, "maximum")
    if hi < lo:
        raise KitError(f"idle_state_retention: the maximum ({hi} ms) is below the minimum ({lo} ms)")
    if hi and hi - lo < 300_000:
        raise KitError("idle_state_retention: Flink 1.x wanted the maximum at least 5 minutes above the minimum")
    return {TTL: hi}


_UNITS = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_option(value, key: str):
    """A duration option of ``kit.sql``'s config (Flink's ``'2 h'``, ``'30 min'``, ``'10 s'``,
    ``'500 ms'``; a Duration, a timedelta or an int of milliseconds) as a ``Duration``."""
    if isinstance(value, str):
        number, _, unit = value.strip().partition(" ")
        if not number.isdigit() or unit.strip() not in _UNITS:
            raise KitError(f"{key}={value!r}: write a number and a unit of {list(_UNITS)}, e.g. '2 h'")
        return Duration(int(number) * _UNITS[unit.strip()])
    # an int is milliseconds, as a unit-less value of a Flink option is
    return to_duration(value, "kit.sql config", key, bare_ms=True, like="Duration",
                       kinds="a Duration, a timedelta, an int of milliseconds or a string such as '2 h'")


def _flag(config: dict, key: str) -> bool:
    value = config.get(key, False)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise KitError(f"{key}={value!r}: write True or False")
    return value


def _positive(config: dict, key: str) -> int:
    value = config.get(key)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise KitError(f"{key}={value!r}: write a whole number above 0")
    return value


def _millis(value, key: str) -> int:
    """``value`` (Flink's ``'5 s'``, a Duration, a timedelta or ms) in milliseconds."""
    return duration_option(value, key).to_milliseconds()
