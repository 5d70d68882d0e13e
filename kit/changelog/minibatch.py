"""Flink's mini-batch group aggregation, one task, operator by operator: bundles, their key
order, local-global and split-distinct phases.

A bundle operator (Flink's ``AbstractMapBundleOperator``) keeps a ``HashMap`` from the group
key to what it folded; it is flushed (``finishBundle``) when its count trigger reaches
``table.exec.mini-batch.size`` **records of its own input**, when a mini-batch watermark
passes (processing time enters a new ``allow-latency`` interval) and at the end of input.
A watermark or the end of input flushes every level, upstream first.

============================  ===================================  ==========================
plan (Flink 2.3)              levels (key of the bundle map)        a flush emits
============================  ===================================  ==========================
ONE_PHASE                     MiniBatchGroupAgg (group key)         per key: the change of its
                                                                    result (first before ->
                                                                    last after)
TWO_PHASE, or AUTO with       Local (group key) -> Global (group    Local: one accumulator per
mini-batch on                 key)                                  key; Global: as ONE_PHASE
split distinct + mini-batch   Local (key, bucket) -> Incremental    Incremental: per group key
                              (key, bucket) -> Global (group key)   the bundle's new partials
============================  ===================================  ==========================

Accumulators are kept as the messages ``(w, args)`` they folded: merging two of them is
joining the lists, and a Global's result is the aggregate of all messages that reached it
(what Flink's mergeable accumulators compute). The Local's and Incremental's outputs are
insert-only records; each counts as one record of the next level's trigger.

Key order (``map_order``): a flush visits the bundle's keys in ``java.util.HashMap`` order:
by bucket ``(h ^ (h >>> 16)) & (capacity - 1)``, then by insertion; ``capacity`` starts at
16 and doubles when the map holds more than 3/4 of it, and a flush's ``clear()`` keeps it
(so it follows the largest bundle so far). Bins turned into trees (8+ keys in one bucket of a
64+ table) are not modelled. ``h`` is ``BinaryRowData.hashCode()`` of the key row
(``row_hash``): Flink's murmur3 variant (seed 42, ``MurmurHashUtils.hashBytesByWords``) over
the row's bytes:

=====================  ==================================================================
part                   bytes (little-endian)
=====================  ==================================================================
header                 8 bytes per 64 bits of (8 + arity): row kind (0, INSERT), then
                       a null bit per field
one slot per field     8 bytes: BIGINT, INT/DATE, SMALLINT, TINYINT, BOOLEAN, DOUBLE,
                       FLOAT, TIMESTAMP (epoch ms, precision <= 3), DECIMAL (unscaled,
                       precision <= 18) in place; a STRING of <= 7 UTF-8 bytes inline with
                       ``0x80 | length`` in its last byte; a longer one as ``offset << 32 |
                       length`` of its bytes in the variable part; NULL: zeros
variable part          the long strings' bytes, each padded with zeros to 8 bytes
=====================  ==================================================================

    >>> map_order([("a",), ("b",), ("c",)], [T.StringType()])   # buckets 7, 1, 7
    [('b',), ('a',), ('c',)]

Split distinct (``table.optimizer.distinct-agg.split.enabled``): the bucket of a row is
``MOD(HASH_CODE(x), bucket-num)`` (Java ``%``), where ``HASH_CODE`` (``hash_code``) is, as
real Flink 2.3 computes it, Java's ``hashCode()`` of the value (``String.hashCode`` for a
STRING: ``HASH_CODE('a') = 97``).
"""

from __future__ import annotations

import struct
from datetime import date, datetime, timedelta
from decimal import Decimal

from pyspark.sql import types as T

from ..errors import KitError

__all__ = ["row_hash", "hash_code", "bucket", "map_order", "HashMapOrder", "flushes", "run", "task_load"]

_M = 0xFFFFFFFF
_EPOCH = datetime(1970, 1, 1)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def _mix_k(k: int) -> int:
    return (_rotl((k * 0xCC9E2D51) & _M, 15) * 0x1B873593) & _M


def _mix_h(h: int, k: int) -> int:
    return (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _M


def _murmur_words(data: bytes) -> int:
    """Flink's ``MurmurHashUtils.hashBytesByWords`` (seed 42) of ``data`` (a multiple of 4 bytes)."""
    h = 42
    for i in range(0, len(data), 4):
        h = _mix_h(h, _mix_k(int.from_bytes(data[i:i + 4], "little")))
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M
    return h ^ (h >> 16)


def _slot(v, dtype) -> tuple[bytes, bytes]:
    """A non-NULL field's 8-byte slot and its variable-part bytes (unpadded)."""
    if isinstance(dtype, T.StringType):
        b = v.encode("utf-8")
        if len(b) <= 7:
            return b.ljust(7, b"\0") + bytes([0x80 | len(b)]), b""
        return None, b
    if isinstance(dtype, T.BooleanType):
        return bytes([1 if v else 0]).ljust(8, b"\0"), b""
    if isinstance(dtype, T.DoubleType):
        return struct.pack("<d", v), b""
    if isinstance(dtype, T.FloatType):
        return struct.pack("<f", v).ljust(8, b"\0"), b""
    if isinstance(dtype, T.DateType):
        v = (v - date(1970, 1, 1)).days
    elif isinstance(dtype, T.TimestampType):
        v = (v - _EPOCH) // timedelta(milliseconds=1)
    elif isinstance(dtype, T.DecimalType) and dtype.precision <= 18:
        v = int(Decimal(v).scaleb(dtype.scale))
    elif not isinstance(dtype, T.IntegralType):
        raise KitError(f"a mini-batch group key of type {dtype.simpleString()} has no modelled Flink "
                       f"hash (STRING, integers, BOOLEAN, DOUBLE, FLOAT, DATE, TIMESTAMP(3), DECIMAL(<=18)): "
                       f"cast the key, or run without mini-batch")
    size = {T.ByteType: 1, T.ShortType: 2, T.IntegerType: 4, T.DateType: 4}.get(type(dtype), 8)
    return (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little").ljust(8, b"\0"), b""


def row_hash(values: tuple, dtypes: list) -> int:
    """``BinaryRowData.hashCode()`` (unsigned 32 bits) of the key row ``values`` of Spark
    types ``dtypes`` (module doc)."""
    arity = len(values)
    header = bytearray(((arity + 63 + 8) // 64) * 8)
    fixed = len(header) + 8 * arity
    slots, var = [], bytearray()
    for i, (v, t) in enumerate(zip(values, dtypes)):
        if v is None:
            header[(i + 8) >> 3] |= 1 << ((i + 8) & 7)
            slots.append(bytes(8))
            continue
        slot, tail = _slot(v, t)
        if slot is None:
            slot = ((fixed + len(var)) << 32 | len(tail)).to_bytes(8, "little")
            var += tail + bytes(-len(tail) % 8)
        slots.append(slot)
    return _murmur_words(bytes(header) + b"".join(slots) + bytes(var))


def hash_code(v, dtype) -> int | None:
    """Flink 2.3's ``HASH_CODE(v)``: Java's ``hashCode()`` of the value (signed 32 bits)."""
    if v is None:
        return None
    if isinstance(dtype, T.StringType):
        h = 0
        units = v.encode("utf-16-le")
        for i in range(0, len(units), 2):
            h = (31 * h + int.from_bytes(units[i:i + 2], "little")) & _M
    elif isinstance(dtype, T.BooleanType):
        h = 1231 if v else 1237
    elif isinstance(dtype, (T.LongType, T.DoubleType)):
        bits = struct.unpack("<q", struct.pack("<d", v))[0] if isinstance(dtype, T.DoubleType) else v
        bits &= (1 << 64) - 1
        h = (bits ^ (bits >> 32)) & _M
    elif isinstance(dtype, T.IntegralType):
        h = v & _M
    else:
        raise KitError(f"split distinct over a {dtype.simpleString()} column: HASH_CODE is modelled for "
                       f"STRING, integers, BOOLEAN and DOUBLE; cast the DISTINCT argument")
    return h - (1 << 32) if h & 0x80000000 else h


def bucket(v, dtype, buckets: int) -> int | None:
    """``MOD(HASH_CODE(v), buckets)`` with Java's ``%`` (the sign of the hash)."""
    h = hash_code(v, dtype)
    if h is None:
        return None
    r = abs(h) % buckets
    return -r if h < 0 else r


class HashMapOrder:
    """The iteration order of one ``java.util.HashMap`` that is filled and cleared again
    (a bundle map): its capacity only grows."""

    def __init__(self, dtypes: list):
        self.dtypes, self.capacity = dtypes, 16

    def order(self, keys: list) -> list:
        """``keys`` (in insertion order) as the map iterates them."""
        while len(keys) > self.capacity * 3 // 4:
            self.capacity *= 2
        spread = []
        for i, k in enumerate(keys):
            h = row_hash(k, self.dtypes)
            spread.append(((h ^ (h >> 16)) & (self.capacity - 1), i))
        return [keys[i] for _, i in sorted(spread)]


def map_order(keys: list, dtypes: list) -> list:
    """``keys`` as a fresh ``HashMap`` filled in this order iterates them."""
    return HashMapOrder(dtypes).order(list(keys))


class _Bundle:
    """One bundle operator: ``key -> [messages]`` in insertion order, its record count and
    its map's order."""

    def __init__(self, dtypes: list, size: int):
        self.map, self.count, self.size, self.order = {}, 0, size, HashMapOrder(dtypes)

    def add(self, key, messages) -> bool:
        self.map.setdefault(key, []).extend(messages)
        self.count += 1
        return self.count >= self.size

    def take(self) -> list:
        """The bundle's ``(key, messages)`` in flush order; the bundle is emptied."""
        out = [(k, self.map[k]) for k in self.order.order(list(self.map))]
        self.map, self.count = {}, 0
        return out


def flushes(records, latency: int, ticked: bool = False):
    """``records`` ``(key, message, seq, pt)`` in arrival order, each with the flushes due
    before it, ``[(seq, pt)]`` or ``[]``; then ``(None, None, None, None, [(seq, pt)])``, the
    end of input. ``ticked``: the records are a mini-batch aggregate's changes with its
    watermarks among them (``Changelog.ticks``: a record of key None), each of which flushes
    at its ``seq`` and ``pt``. Otherwise (a stream's arrivals) the record's time entering a
    new ``latency`` interval is a watermark: the bundles flush, with the last record's
    ``seq`` and the interval's start as ``pt``.

    >>> def due(records, ticked=False):   # (key, seq, pt), latency 1000
    ...     return [d for *_, d in flushes([(k, None, s, p) for k, s, p in records], 1000, ticked)]
    >>> due([("a", 1, 500), ("b", 2, 1000), ("c", 3, 1700)])
    [[], [(1, 1000)], [], [(3, 1700)]]
    >>> due([("a", 1, 500), ("b", 1, 1000), (None, 1, 1000), ("c", 2, 1700)], ticked=True)
    [[], [], [(1, 1000)], [], [(2, 1700)]]
    """
    last = None
    for key, message, seq, pt in records:
        if key is None:
            yield None, None, seq, pt, [(seq, pt)]
            continue
        interval = 0 if pt is None else pt - pt % latency
        due = [] if ticked or last is None or interval == last[2] else [(last[0], last[2] + latency)]
        yield key, message, seq, pt, due
        last = (seq, pt, interval)
    if last is not None:
        yield None, None, None, None, [last[:2]]


def run(records, phase: str, size: int, key_types: list, final_len: int, fold):
    """Replay ``records`` ``(key, (w, args), seq, pt, flushes)`` in arrival order through the
    plan's levels (module doc). ``flushes``: the ``(seq, pt)`` of each watermark flush due
    *before* the record (``flushes``; the record None for a watermark or the end of input).
    ``phase``: ``ONE_PHASE``, ``TWO_PHASE`` or ``SPLIT`` (keys are
    ``group key + (bucket,)``, ``final_len`` the group key's length). ``fold(key,
    messages, seq, pt, one_phase)`` is the Global's (or one-phase operator's) flush of one
    key; it yields the output rows, which ``run`` yields in order."""
    final_types = key_types[:final_len]
    levels = [_Bundle(key_types, size)]
    if phase == "SPLIT":
        levels.append(_Bundle(key_types, size))
    if phase != "ONE_PHASE":
        levels.append(_Bundle(final_types, size))

    def push(i, key, messages, seq, pt):
        """A record into level ``i``; a full bundle is flushed at once."""
        if levels[i].add(key, messages):
            yield from flush(i, seq, pt)

    def flush(i, seq, pt):
        taken = levels[i].take()
        if i == len(levels) - 1:
            for key, messages in taken:
                yield from fold(key, messages, seq, pt, phase == "ONE_PHASE")
        elif phase == "SPLIT" and i == 1:       # Incremental: per group key, in a fresh map's order
            grouped = {}
            for key, messages in taken:
                grouped.setdefault(key[:final_len], []).extend(messages)
            for key in map_order(list(grouped), final_types):
                yield from push(i + 1, key, grouped[key], seq, pt)
        else:
            for key, messages in taken:
                yield from push(i + 1, key, messages, seq, pt)

    def flush_all(seq, pt):
        for i in range(len(levels)):
            if levels[i].map:
                yield from flush(i, seq, pt)

    for key, message, seq, pt, due in records:
        for at in due:
            yield from flush_all(*at)
        if key is not None:
            yield from push(0, key, [message], seq, pt)


def task_load(log, keys: list, options):
    """Rows each Spark task handles per stage of the three plans of ``SELECT keys, ...
    GROUP BY keys`` over ``log``, on ``options.tasks`` partitions, bundles of
    ``options.mini_batch``'s size (1 without) and ``options.distinct_split`` buckets
    (``bucket_arg`` in ``options.extra``, default the first non-key column): a pandas
    DataFrame ``plan, stage, task, rows``.

    ==========  ===============================  ====================================
    plan        stage: what a task receives      partitioned by
    ==========  ===============================  ====================================
    ONE_PHASE   GroupAggregate: every row        hash of the keys
    TWO_PHASE   Local: every row                 round robin by arrival (``seq``)
                Global: one per (task, bundle,   hash of the keys
                key)
    SPLIT       Partial: every row               hash of (keys, bucket)
                Final: one per (bundle, key,     hash of the keys
                bucket)
    ==========  ===============================  ====================================

    On skewed keys the hottest task of ONE_PHASE gets all of the hot key's rows; the
    Global or Final stage gets at most one per bundle (and bucket). The results are the
    same (``group_aggregate`` with each plan)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from .. import sparksql

    tasks, size = max(options.tasks, 1), (options.mini_batch or (0, 1))[1]
    ks = [sparksql.name(k) for k in keys]
    arg = options.extra.get("bucket_arg") or next(c for c in log.columns if c not in keys)
    dtype = log.df.schema[arg].dataType
    buckets = options.distinct_split or 1
    hashed = F.udf(lambda v: bucket(v, dtype, buckets), T.IntegerType())
    df = log.df.select(*ks, "seq", "_n", hashed(F.col(sparksql.name(arg))).alias("_kit_bucket"))

    def load(frame, plan, stage, task=None):
        return (frame.groupBy((F.spark_partition_id() if task is None else F.col(task)).alias("task")).count()
                .select(F.lit(plan).alias("plan"), F.lit(stage).alias("stage"), "task", F.col("count").alias("rows")))

    def bundled(frame, by):
        order = "PARTITION BY _task ORDER BY seq, _n"
        frame = frame.selectExpr("*", f"(row_number() OVER ({order}) - 1) DIV {size} AS _b")
        return frame.select("_task", "_b", *by).distinct()

    # the input's tasks: round robin in arrival order (Spark's repartition(n) would deal rows by
    # the input's partitions, which differ between local mode, a cluster and Connect)
    local = df.withColumn("_task", (F.col("seq") % tasks).cast("int"))
    parts = [load(df.repartition(tasks, *ks), "ONE_PHASE", "GroupAggregate"),
             load(local, "TWO_PHASE", "Local", "_task"),
             load(bundled(local, ks).repartition(tasks, *ks), "TWO_PHASE", "Global"),
             load(df.repartition(tasks, *ks, "_kit_bucket"), "SPLIT", "Partial"),
             load(bundled(local, [*ks, "_kit_bucket"]).repartition(tasks, *ks), "SPLIT", "Final")]
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.toPandas().sort_values(["plan", "stage", "task"]).reset_index(drop=True)
