"""The fast path: the common window query as native Spark operations, equal to the operator.

Taken when the windows are event-time tumbling or sliding, the trigger is the default
``EventTimeTrigger``, there is no evictor and the function is a built-in aggregate
(``Count``, ``Sum``, ``Min``, ``Max``, ``Avg``, ``Aggregates``); any allowed lateness.
Then Flink's operator reduces to arithmetic on each element and its watermark:

- an element goes to window ``w`` unless ``max_timestamp(w) + lateness <= watermark``;
- the window's on-time firing happens after the first arrival whose watermark reaches
  ``max_timestamp(w)`` (``placement.first_at_least``; none: the end of input), with the
  elements that arrived up to it;
- every element accepted after that is a late firing with everything accepted so far
  (a running aggregate by arrival), only possible with allowed lateness.

    window [0, 10), lateness 5:  a@2 (seq 0), a@12 (seq 1: watermark 11 passes 9),
                                 a@5 (seq 2)
    -> on-time, pane 0, after seq 1: count 1;  late, pane 1, after seq 2: count 2

Without allowed lateness, on a stream without a processing-time column, no element needs
its own watermark: ``_in_input_order`` finds each window's first arrival past its end and
counts what arrived by then, with no sort and no scan of the stream -- in one pass in the
JVM, or two in Spark SQL. Otherwise the annotated stream
(``Stream.df``) is read.

The fast path takes event times and watermarks within ``±TIME_LIMIT`` ms (2**61, about
73 million years either side of 1970), where none of its sums can overflow a BIGINT;
a stream with a time beyond it (found by the first pass, which reads every row anyway)
runs the replay, which follows Flink's ``long`` arithmetic on the whole range. Only a
window that reads a processing-time column without allowed lateness makes no first pass:
there such a time fails the query, naming the row.

Property tests (tests/test_window_fast.py) check it against the reference replay.
"""

from __future__ import annotations

import functools
import threading
import weakref

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import jvm, sparksql
from ..aggregate_types import long_sum_sql
from ..errors import fail
from .assigners import MAX_TIME, MIN_TIME, SlidingEventTimeWindows, TumblingEventTimeWindows
from .functions import SqlAggregate
from .placement import first_at_least
from .triggers import EventTimeTrigger
from ..stream import CHUNK_BITS, epoch_ms, null_time_error

__all__ = ["eligible", "firings", "in_input_order", "kept_for", "TIME_LIMIT"]

TIME_LIMIT = 2 ** 61   # the event times and watermarks (ms, either sign) the fast path takes


def kept_for(owner, df: DataFrame) -> DataFrame:
    """``df``, kept (``persist``) once computed, until ``owner`` is garbage: then released
    (a DataFrame read from it that outlives ``owner`` computes it again)."""
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    weakref.finalize(owner, _release, df).atexit = False   # at exit the JVM may be gone
    return df


def holding(df: DataFrame, owner) -> DataFrame:
    """``df``, holding on to ``owner``: what ``owner`` keeps (``kept_for``) lives as long as
    ``df`` does, so ``result.df`` written after ``result`` is dropped reads what was kept."""
    df._kit_owner = owner
    return df


def _release(df: DataFrame) -> None:
    """``df.unpersist()`` in a thread of its own: a finalizer runs wherever the garbage
    collector does, maybe inside a py4j call of this thread, whose connection a call of its
    own would then cut into (the JVM's answers mixed up: "PythonUtils does not exist")."""
    threading.Thread(target=df.unpersist, name="kit-release", daemon=True).start()


class _Beyond(Exception):
    """A time beyond ``±TIME_LIMIT``: the replay takes the window."""


def _within(*times: Column) -> Column:
    """Whether every one of ``times`` (ms; NULL counts as within) lies in ``±TIME_LIMIT``."""
    inside = [F.coalesce(t.between(-TIME_LIMIT, TIME_LIMIT), F.lit(True)) for t in times]
    return functools.reduce(lambda a, b: a & b, inside)


def eligible(spec) -> bool:
    """Whether ``spec`` can run as native Spark operations."""
    return (type(spec.assigner) in (TumblingEventTimeWindows, SlidingEventTimeWindows)
            and type(spec.trigger) is EventTimeTrigger and spec.evictor is None
            and spec.function is None and spec.contents.kind == "aggregate"
            and isinstance(spec.contents._agg, SqlAggregate))


_ENTRY = "array<struct<tag:int,at:bigint>>"
_MAX_PASSED = 256   # window ends one arrival may pass before it counts as a jump


def _on_time_only(result, rows: DataFrame, keys, size, slide) -> DataFrame:
    """Without allowed lateness every accepted element is in its window's on-time firing,
    so one aggregation does it all: the windows' aggregates and -- from the same arrivals --
    where the watermark passed each window's end. An arrival moves the watermark from
    ``_wmb`` to ``max(_wmb, _own)``, passing the window ends (every ``slide``) in between;
    the arrival that sets the first watermark passes every end below it."""
    a, agg = result.spec.assigner, result.spec.contents._agg
    beyond = fail(F.concat(
        F.lit("row seq="), F.col("seq").cast("string"), F.lit(f" has event time or watermark beyond ±{TIME_LIMIT} ms, "
                                                             "the range of the fast path, which this window (a "
                                                             "processing-time column, no allowed lateness) cannot "
                                                             "leave once running: filter such rows first")))
    rows = rows.withColumn("_ts", F.when(_within(F.col("_ts"), F.col("_own")), F.col("_ts"))
                           .otherwise(beyond.cast("long")))
    ts, wmb, own = F.col("_ts"), F.col("_wmb"), F.col("_own")
    after = F.greatest(wmb, own)
    last_start = ts - F.pmod(ts - F.lit(a.offset), F.lit(slide))
    starts = F.filter(F.transform(F.sequence(F.lit(0), F.lit(-(-size // slide) - 1)),
                                  lambda k: last_start - k * F.lit(slide)),
                      lambda st: (st > ts - F.lit(size)) & (st + F.lit(size - 1) > wmb))   # accepted
    first_end = wmb + 1 + F.pmod(F.lit((a.offset + size - 1) % slide) - (wmb + 1), F.lit(slide))
    moved = (wmb != MIN_TIME) & own.isNotNull() & (after >= first_end)
    # a jump over more than _MAX_PASSED window ends (a gap in the data) is one row (tag 3,
    # at = the watermark before it): windows ending inside it are found by a range join
    small = (after - first_end) < F.lit(_MAX_PASSED * slide)
    entries = F.concat(
        F.transform(starts, lambda st: F.struct(F.lit(0).alias("tag"), st.alias("at"))),
        F.transform(F.when(moved & small, F.sequence(first_end, after, F.lit(slide)))
                     .otherwise(F.array().cast("array<long>")),
                    lambda t: F.struct(F.lit(1).alias("tag"), t.alias("at"))),
        F.when((wmb == MIN_TIME) & own.isNotNull(), F.array(F.struct(F.lit(2).alias("tag"), own.alias("at"))))
         .when(moved & ~small, F.array(F.struct(F.lit(3).alias("tag"), wmb.alias("at"))))
         .otherwise(F.array().cast(_ENTRY)))
    tagged = rows.withColumn("_e", F.explode(entries))
    is_element = F.col("_e.tag") == 0
    hit = F.struct(F.col("seq"), after.alias("after"), F.col("_pt").alias("pt"))
    grouped = tagged.groupBy(
        F.col("_e.tag").alias("_tag"), *[F.when(is_element, sparksql.col(k)).alias(k) for k in keys],
        F.col("_e.at").alias("_at")).agg(
        *[c.alias(n) for n, c in agg.to_spark(result.stream.source.schema, F.col("seq"), mask=is_element)],
        F.count(F.when(is_element, 1)).alias("contents"),
        F.min(F.when(~is_element, hit)).alias("_hit"))
    windows = grouped.filter(F.col("_tag") == 0).drop("_hit")
    passes = grouped.filter(F.col("_tag") == 1).select(F.col("_at").alias("_max"), "_hit")
    first = (grouped.filter(F.col("_tag") == 2)
             .agg(F.min(F.struct(F.col("_hit.seq").alias("seq"), F.col("_at").alias("wm"), F.col("_hit").alias("hit")))
                  .alias("_f"))
             .select(F.col("_f.wm").alias("_first_wm"), F.col("_f.hit").alias("_first_hit")))
    jumps = grouped.filter(F.col("_tag") == 3).select(F.col("_at").alias("_from"), F.col("_hit").alias("_jump"))
    out = (windows.withColumn("_max", F.col("_at") + F.lit(size - 1))
           .join(F.broadcast(passes), "_max", "left").crossJoin(F.broadcast(first))
           .join(F.broadcast(jumps), (F.col("_max") > F.col("_from")) & (F.col("_max") <= F.col("_jump.after")), "left")
           .withColumn("_hit", F.coalesce(F.col("_hit"), F.col("_jump"),
                                          F.when(F.col("_max") <= F.col("_first_wm"), F.col("_first_hit")))))
    key = ([sparksql.col(keys[0]).alias("key")] if len(keys) == 1
           else [F.struct(*map(sparksql.col, keys)).alias("key")] if keys else [])
    return out.select(*key, F.col("_at").alias("window_start"), (F.col("_at") + F.lit(size)).alias("window_end"),
                      *[p.alias for p in agg.parts], F.lit("on-time").alias("firing"),
                      F.lit(0).cast("long").alias("pane"), F.lit("event-time timer").alias("cause"),
                      F.col("_max").alias("timer"), F.col("_hit.after").alias("watermark"),
                      F.col("_hit.pt").alias("proctime"), F.col("_hit.seq").alias("fired_after"), "contents",
                      F.struct(F.coalesce("_hit.seq", F.lit(MAX_TIME)).alias("a"), F.lit(1).alias("phase"),
                               F.col("_max").alias("t"), (-F.col("_at")).alias("s")).alias("_order"))


def _in_input_order(result, keys, size, slide) -> DataFrame:
    """``_on_time_only`` for a stream read in its source's order, from its source rows:
    no sort, no scan of the annotated stream. The watermark only grows, so window ``w``
    accepts exactly the elements that arrive up to and with ``A(w)``, the first arrival
    whose own watermark reaches ``max_timestamp(w)``; the firing happens right after
    ``A(w)``, under the watermark ``A(w)`` left (its own: every earlier one is below
    ``max_timestamp(w)``).

        delay 0, window [0, 10):  a@2 (arrival 0), a@12 (1: own watermark 11), a@5 (2)
        -> A = arrival 1: a@2 is in, a@5 came after A; fires after arrival 1, watermark 11

    In the JVM (``_scanned``) that is one pass over the rows; else two in Spark SQL
    (``_pass_one``, ``_pass_two``). Both find ``A`` for every window maximum (``_fired``)
    from the first arrival at each grid value of the maxima in each input partition.
    """
    s = result.stream
    agg = result.spec.contents._agg
    scanned = _scanned(result, keys, size, slide)
    if scanned is None:
        plain = s.source.select("*", F.monotonically_increasing_id().alias("_in"), s.millis(s.time).alias("_ts"))
        where = F.concat(F.col("_in").bitwiseAND((1 << CHUNK_BITS) - 1).cast("string"),
                         F.lit(" of input partition "), F.shiftright("_in", CHUNK_BITS).cast("string"))
        checked = plain.withColumn("_ts", F.when(F.col("_ts").isNull(), null_time_error(s.time, where).cast("long"))
                                   .otherwise(F.col("_ts")))
    fired = scanned[0] if scanned else _pass_one(result, checked, size, slide)
    fields = _looked_up(fired, slide)   # _a, _after, _seq by _max; None: joined
    first = None if fields else sparksql.local_rows(
        s.source.sparkSession, fired, "_max long, _a long, _after long, _seq long").hint("broadcast")
    windows = scanned[1] if scanned else _pass_two(result, plain, keys, size, slide, fields, first)
    # Spark SQL text: a few py4j calls per step, where Columns cost one per function and literal
    out = sparksql.select(windows, "*", f"_at + {size - 1} AS _max")
    out = (sparksql.select(out, "*", f"{fields['_after']} AS _after", f"{fields['_seq']} AS _seq") if fields
           else out.join(first.drop("_a"), "_max"))
    clock = s.proctime
    pt = f"{epoch_ms(clock.start)} + _seq * {clock.step.millis}" if clock is not None else "CAST(NULL AS BIGINT)"
    key = ([f"{sparksql.name(keys[0])} AS key"] if len(keys) == 1
           else [f"struct({', '.join(map(sparksql.name, keys))}) AS key"] if keys else [])
    return sparksql.select(
        out, *key, "_at AS window_start", f"_at + {size} AS window_end", *[sparksql.name(p.alias) for p in agg.parts],
        "'on-time' AS firing", "CAST(0 AS BIGINT) AS pane", "'event-time timer' AS cause", "_max AS timer",
        "_after AS watermark", f"{pt} AS proctime", "_seq AS fired_after", "contents",
        f"named_struct('a', coalesce(_seq, {MAX_TIME}), 'phase', 1, 't', _max, 's', -_at) AS _order")


def _pass_one(result, checked: DataFrame, size, slide) -> list:
    """``_fired`` from one aggregation in Spark SQL, run at once, with a small result brought
    to the driver: per input partition, grid value ``g`` of the own watermark and maximum of
    the element's last window, the first arrival, its watermark and the row count (about one
    row per partition and window end). It fails on a NULL time, so pass 2 need not check."""
    s, a = result.stream, result.spec.assigner
    own, ts = s.own_watermark(), F.col("_ts")
    within = _within(ts, own)
    base = (a.offset + size - 1) % slide
    last = ts - F.pmod(ts - F.lit(a.offset), F.lit(slide)) + F.lit(size - 1)
    summary = (checked.groupBy(F.shiftright("_in", CHUNK_BITS).alias("chunk"),
                               F.when(within, own - F.pmod(own - F.lit(base), F.lit(slide))).alias("g"),
                               F.when(within, last).alias("last"))
               .agg(F.min("_in").alias("first"), F.min_by(own, F.col("_in")).alias("after"),
                    F.count(F.lit(1)).alias("n"), F.count(F.when(~within, 1)).alias("beyond"))).collect()
    if any(r.beyond for r in summary):
        raise _Beyond()
    counts = {}
    for r in summary:
        counts[r.chunk] = counts.get(r.chunk, 0) + r.n
    return _fired(counts, [(r.g, r.first, r.after) for r in summary if r.g is not None],
                  {r.last - k * slide for r in summary for k in range(-(-size // slide))}, slide)


def _pass_two(result, plain: DataFrame, keys, size, slide, fields, first) -> DataFrame:
    """The windows' aggregates in Spark SQL, lazy like any DataFrame: every element with its
    windows, kept when it arrived by ``A`` (``fields["_a"]``, or joined from ``first``)."""
    a, agg = result.spec.assigner, result.spec.contents._agg
    ts = F.col("_ts")
    last_start = ts - F.pmod(ts - F.lit(a.offset), F.lit(slide))
    per_element = -(-size // slide)
    inputs = sorted({p.column for p in agg.parts if p.column is not None})
    rows = plain.select(*map(sparksql.col, keys), *[sparksql.col(c) for c in inputs if c not in keys], "_in", "_ts")
    if size <= slide:   # one window at most; none when the element falls in a gap between windows
        rows = rows.withColumn("_at", last_start)
        rows = rows if size == slide else rows.filter(F.col("_at") > ts - F.lit(size))
    else:
        starts = F.filter(F.transform(F.sequence(F.lit(0), F.lit(per_element - 1)),
                                      lambda k: last_start - k * F.lit(slide)),
                          lambda st: st > ts - F.lit(size))
        rows = rows.withColumn("_at", F.explode(starts))
    rows = rows.withColumn("_max", F.col("_at") + F.lit(size - 1))
    if fields:
        rows = rows.filter(F.col("_in") <= F.expr(fields["_a"]))
    else:
        rows = rows.join(first.select("_max", "_a"), "_max").filter(
            F.col("_a").isNull() | (F.col("_in") <= F.col("_a")))
    return rows.groupBy(*map(sparksql.col, keys), "_at").agg(*[c.alias(n) for n, c in agg.to_spark(result.stream.source.schema,
                                                                                F.col("_in"))],
                                          F.count(F.lit(1)).alias("contents"))


_FLUSH = 1 << 20   # the partial aggregates one JVM task holds before it writes them out
_RING = 16         # the most windows a key keeps open in one JVM task (a power of two)
_PLAIN_KEYS = (T.StringType, T.NumericType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType)


def _scanned(result, keys, size, slide):
    """``(fired, windows)`` from one pass in the JVM (``kit/jvm/WindowScan.java``), run at
    once by the small part brought to the driver, its whole result kept for the windows
    (``kept_for`` the result, filled by that first read): each input partition's partial
    aggregates per key and window over the elements its own watermark left on time, and
    where that watermark reached each grid value of window maxima. A partial counts when
    no partition before its own passed the window's maximum; the rest merge per window.
    None when an aggregate is not built in (``compiled.aggregate_kind``) or the JVM is
    out of reach."""
    from .compiled import aggregate_kind

    s, a = result.stream, result.spec.assigner
    parts = result.spec.contents._agg.parts
    inputs = sorted({p.column for p in parts if p.column is not None})
    spark = s.source.sparkSession
    types = {f.name: f.dataType for f in s.source.schema.fields}
    kinds = [aggregate_kind(p.function, None if p.column is None else types[p.column]) for p in parts]
    if None in kinds or not jvm.available(spark, "WindowScan"):
        return None
    # The source's own columns where they serve as they are (a file scan's batches are then
    # read in place: kit/jvm/Internal.java), in its order: one key of an atomic type, the
    # aggregated columns, the time and watermark columns as TIMESTAMP (microseconds) or BIGINT
    # (ms); a struct of several keys, and the time and watermark in ms otherwise.
    plain = len(keys) == 1 and isinstance(types[keys[0]], _PLAIN_KEYS)
    extra = {"__key": F.struct(*map(sparksql.col, keys))} if keys and not plain else {}

    def as_is(column, name):
        """``(column, units per ms)``: TIMESTAMP (microseconds) and BIGINT as they are,
        others in ms as ``name``."""
        if isinstance(types[column], (T.TimestampType, T.LongType)):
            return column, 1000 if isinstance(types[column], T.TimestampType) else 1
        extra[name] = s.millis(column)
        return name, 1

    wm = s.watermark
    key = keys[0] if plain else "__key" if keys else None
    ts, ts_unit = as_is(s.time, "__ts")
    own, own_unit = as_is(wm.column, "__own") if wm.kind == "column" else (None, 1)
    names = sorted({n for n in (key, *inputs, ts, own) if n is not None and n not in extra},
                   key=s.source.columns.index) + list(extra)
    rows = s.source.select(*[extra[n].alias(n) if n in extra else sparksql.col(n) for n in names])
    at = {c: i for i, c in enumerate(names)}
    nan_parts = [p for p, part in enumerate(parts) if part.function in ("min", "max") and kinds[p] == 1]
    # a key's open windows: those within the window size and the watermark delay of its newest
    ring = min(_RING, 1 << (-(-(size + wm.delay.millis) // slide)).bit_length())
    settings = ";".join(f"{k}={v}" for k, v in {
        "size": size, "slide": slide, "offset": a.offset, "key": at.get(key, -1), "key_width": len(keys),
        "ts": at[ts], "ts_unit": ts_unit, "ts_name": s.time, "own": at.get(own, -1), "own_unit": own_unit,
        "own_kind": "shift" if wm.kind in ("bounded", "sql") else "column",
        "own_shift": wm.delay.millis + (wm.kind == "bounded"), "flush": _FLUSH, "ring": ring,
        "limit": TIME_LIMIT,
        "agg_functions": ",".join(p.function for p in parts),
        "agg_columns": ",".join(str(-1 if p.column is None else at[p.column]) for p in parts),
        "agg_kinds": ",".join(map(str, kinds)), "nan_parts": ",".join(map(str, nan_parts))}.items())
    fields = [T.StructField(n, t) for n, t in [("_tag", T.IntegerType()), ("_chunk", T.IntegerType()),
                                               ("_start", T.LongType()), ("_i", T.LongType()),
                                               ("_own", T.LongType()), ("_contents", T.LongType())]]
    fields += [T.StructField("_key", rows.schema[key].dataType)] if keys else []   # NULL in tags 1-3
    for p, part in enumerate(parts):
        acc = (T.LongType() if part.function == "count" or kinds[p] == 0 else T.DoubleType()) \
            if part.function in ("count", "sum", "avg") else types[part.column]
        fields += [T.StructField(f"_c{p}", T.LongType()), T.StructField(f"_a{p}", acc)]
    fields += [T.StructField(f"_{name}{p}", t) for p in nan_parts
               for name, t in (("f", T.LongType()), ("z", T.BooleanType()))]
    scan = kept_for(result, jvm.window_scan(rows, settings, T.StructType(fields)))
    counts, highs, cells, maxima = {}, {}, [], set()
    base = (a.offset + size - 1) % slide
    marks = scan.filter(F.col("_tag") != 0).select("_tag", "_chunk", "_start", "_i", "_own").toArrow()   # not Rows:
    for tag, chunk, start, i, own in zip(*(c.to_pylist() for c in marks.columns)):   # ~2 per window and chunk
        if tag == 1:
            cells.append((own - (own - base) % slide, i, own))
        elif tag == 2:
            counts[chunk], highs[chunk] = i, own
        elif tag == 3:
            maxima.add(start + size - 1)
        else:   # 4: a time beyond TIME_LIMIT
            raise _Beyond()
    before, high = [], MIN_TIME   # per partition (all, numbered from 0), the watermark the ones before it left
    for chunk in sorted(highs):
        before.append(high)
        high = high if highs[chunk] is None else max(high, highs[chunk])
    passed = ""
    if any(b != MIN_TIME for b in before):
        passed = f" AND _start + {size - 1} > element_at(array({', '.join(map(str, before))}), _chunk + 1)"
    partials = scan.where(f"_tag = 0{passed}").coalesce(1)
    merged = []   # Spark SQL text: a few py4j calls each, where Columns cost one per function
    for p, part in enumerate(parts):
        count, acc = f"sum(_c{p})", f"_a{p}"
        if part.function in ("sum", "avg"):   # a sum of integers wraps around at 64 bits, as Java's long
            total = long_sum_sql(acc) if kinds[p] == 0 else f"sum({acc})"
            value = total if part.function == "sum" else f"CASE WHEN {count} > 0 THEN {total} / {count} END"
        else:
            value = {"count": count, "min": f"min({acc})", "max": f"max({acc})"}[part.function]
        if p in nan_parts:   # NaN when the first value (by arrival) was: see SqlAggregate.to_spark
            value = (f"CASE WHEN min_by(_z{p}, _f{p}) THEN CAST('NaN' AS {types[part.column].simpleString()}) "
                     f"ELSE {value} END")
        merged.append(F.expr(f"{value} AS {sparksql.name(part.alias)}"))
    grouped = partials.groupBy(*(["_key"] if keys else []), "_start").agg(*merged, F.expr("sum(_contents) AS contents"))
    windows = sparksql.select(grouped, *([f"_key AS {sparksql.name(keys[0])}"] if plain else
                                         [f"_key.{sparksql.name(k)} AS {sparksql.name(k)}" for k in keys]),
                              "_start AS _at", *[sparksql.name(p.alias) for p in parts], "contents")
    return _fired(counts, cells, maxima, slide), windows


_LOOKUP = 100_000   # the longest grid of window maxima looked up in array literals


def _looked_up(fired: list, slide: int) -> dict | None:
    """``_a``, ``_after`` and ``_seq`` of the window whose maximum is ``_max`` (``_a``:
    ``MAX_TIME`` when it fires at the end of input), as Spark SQL text, each looked up in one
    array over the grid of window maxima (a folded literal), so neither the elements nor the
    windows need a join; None when the grid is longer than ``_LOOKUP`` (data with long gaps)."""
    if not fired:
        return {"_a": str(MAX_TIME), "_after": "CAST(NULL AS BIGINT)", "_seq": "CAST(NULL AS BIGINT)"}
    low = min(m for m, *_ in fired)
    length = (max(m for m, *_ in fired) - low) // slide + 1
    if length > _LOOKUP:
        return None
    grids = [[MAX_TIME] * length, ["NULL"] * length, ["NULL"] * length]
    for m, a, after, seq in fired:
        i = (m - low) // slide
        grids[0][i] = MAX_TIME if a is None else a
        grids[1][i], grids[2][i] = ("NULL", "NULL") if a is None else (after, seq)
    at = f"CAST((_max - {low}) / {slide} AS INT) + 1"
    return {name: f"element_at(CAST(array({', '.join(map(str, grid))}) AS ARRAY<BIGINT>), {at})"
            for name, grid in zip(("_a", "_after", "_seq"), grids)}


def _fired(counts: dict, cells: list, maxima, slide: int) -> list:
    """``(max, A, watermark, seq)`` for every window maximum in ``maxima``, ``A`` the first
    arrival (``_in``) whose own watermark reaches the maximum (None: the end of input) and
    ``seq`` its place in the stream, from each input partition's row count (``counts``) and
    the first arrivals at grid values ``g`` of their own watermark (``cells``: ``(g, _in,
    own watermark)``, at least the first per partition and ``g``)."""
    offset, total = {}, 0
    for chunk in sorted(counts):
        offset[chunk], total = total, total + counts[chunk]
    grid = {}
    for g, first, after in cells:
        if g not in grid or first < grid[g][0]:
            grid[g] = (first, after)
    cells = sorted(grid.items(), reverse=True)
    out, best, i = [], None, 0
    for m in sorted(maxima, reverse=True):   # descending: the first arrival over the grid values >= m
        while i < len(cells) and cells[i][0] >= m:
            if best is None or cells[i][1][0] < best[0]:
                best = cells[i][1]
            i += 1
        if best is None:
            out.append((m, None, None, None))
        else:
            out.append((m, best[0], best[1], offset[best[0] >> CHUNK_BITS] + (best[0] & ((1 << CHUNK_BITS) - 1))))
    return out


def in_input_order(result) -> bool:
    """Whether ``firings`` reads the source rows in input order (``_in_input_order``): no
    allowed lateness, no processing-time column (a stream with ``order=`` is in input order:
    ``kit.stream`` sorted it). Its last stage is then a
    small aggregation, which one task can finish."""
    s = result.stream
    return result.spec.allowed_lateness == 0 and not isinstance(s.proctime, str)


def firings(result) -> DataFrame:
    """The firings of ``result`` (a ``WindowResult``), times in ms, with a sort key ``_order``;
    None when a time lies beyond ``TIME_LIMIT`` (the replay then takes the window)."""
    a, spec = result.spec.assigner, result.spec
    slide = getattr(a, "slide", a.size)
    if _MAX_PASSED * slide + a.size + result.stream.watermark.delay.millis + spec.allowed_lateness > TIME_LIMIT:
        return None   # windows too long for the fast path's sums
    try:
        return _firings(result, list(result.keys), a.size, slide)
    except _Beyond:
        return None


def _firings(result, keys, size, slide) -> DataFrame:
    """``firings``, raising ``_Beyond`` when its first pass meets a time beyond the limit."""
    s, spec, a = result.stream, result.spec, result.spec.assigner
    lateness = spec.allowed_lateness
    if in_input_order(result):
        return _in_input_order(result, keys, size, slide)   # no annotated stream needed
    aggs = spec.contents._agg.to_spark(s.source.schema, F.col("seq"))   # [(alias, column)]
    inputs = sorted({p.column for p in spec.contents._agg.parts if p.column is not None})
    has_clock = s.proctime is not None
    pt = F.unix_millis("proctime") if has_clock else F.lit(None).cast("long")
    rows = s.unordered().select(*map(sparksql.col, keys), *[sparksql.col(c) for c in inputs if c not in keys], "seq",
                       s.millis(s.time).alias("_ts"),
                       F.coalesce(s.millis("watermark"), F.lit(MIN_TIME)).alias("_wmb"),
                       pt.alias("_pt"), s.own_watermark().alias("_own"))
    if lateness == 0:
        return _on_time_only(result, rows, keys, size, slide)
    # the windows of each element: starts last_start, last_start - slide, ... > ts - size;
    # a row beyond the limit keeps one, NULL, which the windows' maxima below reveal
    beyond = ~_within(F.col("_ts"), F.col("_own"))
    ts = F.when(~beyond, F.col("_ts"))
    last_start = ts - F.pmod(ts - F.lit(a.offset), F.lit(slide))
    per_element = -(-size // slide)
    rows = (rows.withColumn("_beyond", beyond)
                .withColumn("_k", F.explode(F.sequence(F.lit(0), F.lit(per_element - 1))))
                .withColumn("_start", last_start - F.col("_k") * F.lit(slide))
                .filter(F.col("_beyond") & (F.col("_k") == 0) | (F.col("_start") > ts - F.lit(size)))
                .withColumn("_max", F.col("_start") + F.lit(size - 1)))
    cleanup = F.when(F.col("_max") > F.lit(MAX_TIME - lateness), F.lit(MAX_TIME)).otherwise(
        F.col("_max") + F.lit(lateness))
    accepted = rows.filter(F.col("_beyond") | (cleanup > F.col("_wmb")))

    # when did the watermark pass each window's end?
    arrivals = s.unordered().select("seq", s.own_watermark().alias("own"), F.greatest(
        F.coalesce(s.millis("watermark"), F.lit(MIN_TIME)), s.own_watermark()).alias("after"), pt.alias("pt"))
    maxima = accepted.select("_max").distinct().toArrow()["_max"].to_pylist()   # a window each: not as Rows
    if None in maxima:
        raise _Beyond()
    hits = first_at_least(arrivals, {"own": maxima})
    passed = sparksql.local_rows(
        s.source.sparkSession,
        [(t, None, None, None) if h is None else (t, h.seq, h.after, h.pt) for (_, t), h in hits.items()],
        "_max long, _j long, _jwm long, _jpt long").hint("broadcast")
    accepted = accepted.join(passed, "_max", "left").withColumn(
        "_on_time", F.col("_j").isNull() | (F.col("seq") <= F.col("_j")))

    window_cols = [*keys, "_start"]
    on_time = (accepted.filter("_on_time").groupBy(*window_cols)
               .agg(*[c.alias(n) for n, c in aggs], F.count(F.lit(1)).alias("contents"), F.first("_max").alias("_max"),
                    F.first("_j").alias("fired_after"), F.first("_jwm").alias("watermark"),
                    F.first("_jpt").alias("proctime"))
               .select(*window_cols, *[c.alias for c in spec.contents._agg.parts], "contents",
                       F.lit("on-time").alias("firing"), F.lit(0).cast("long").alias("pane"),
                       F.lit("event-time timer").alias("cause"), F.col("_max").alias("timer"),
                       "watermark", "proctime", "fired_after",
                       F.struct(F.coalesce("fired_after", F.lit(MAX_TIME)).alias("a"), F.lit(1).alias("phase"),
                                F.col("_max").alias("t"), (-F.col("_start")).alias("s")).alias("_order")))
    out = on_time
    if lateness > 0:
        by_arrival = Window.partitionBy(*window_cols).orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
        running = [c.alias(n) for n, c in spec.contents._agg.to_spark(s.source.schema, F.col("seq"),
                                                                         window=by_arrival)]
        late_rank = Window.partitionBy(*window_cols, "_on_time").orderBy("seq")
        late = (accepted
                .withColumn("_has_on_time", F.max(F.col("_on_time").cast("int")).over(Window.partitionBy(*window_cols)))
                .select(*window_cols, *running, F.count(F.lit(1)).over(by_arrival).alias("contents"),
                        "_on_time", "_has_on_time", "seq", "_wmb", "_pt",
                        F.row_number().over(late_rank).alias("_rank"))
                .filter(~F.col("_on_time"))
                .select(*window_cols, *[c.alias for c in spec.contents._agg.parts], "contents",
                        F.lit("late").alias("firing"),
                        (F.col("_rank") - 1 + F.col("_has_on_time")).cast("long").alias("pane"),
                        F.lit("element").alias("cause"), F.lit(None).cast("long").alias("timer"),
                        F.when(F.col("_wmb") == MIN_TIME, None).otherwise(F.col("_wmb")).alias("watermark"),
                        F.col("_pt").alias("proctime"), F.col("seq").alias("fired_after"),
                        F.struct(F.col("seq").alias("a"), F.lit(0).alias("phase"), F.lit(None).cast("long").alias("t"),
                                 (-F.col("_start")).alias("s")).alias("_order")))
        out = out.unionByName(late)
    key = ([sparksql.col(keys[0]).alias("key")] if len(keys) == 1
           else [F.struct(*map(sparksql.col, keys)).alias("key")] if keys else [])
    return out.select(*key, F.col("_start").alias("window_start"), (F.col("_start") + F.lit(size)).alias("window_end"),
                      *[c.alias for c in spec.contents._agg.parts], "firing", "pane", "cause", "timer",
                      "watermark", "proctime", "fired_after", "contents", "_order")
