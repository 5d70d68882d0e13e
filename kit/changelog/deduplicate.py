"""Deduplication: Flink's ``ROW_NUMBER() OVER (PARTITION BY keys ORDER BY time ASC|DESC) = 1``
over an insert-only changelog, as ``StreamExecDeduplicate`` runs it.

``deduplicate`` runs, per key and in arrival order (``kit.changelog.replay``), the function
Flink picks, or window functions giving the same rows (no state TTL). What each emits for
one input message (``-U`` only when ``Options.update_before``):

=========================  ============================================================
Flink function             a message emits
=========================  ============================================================
ProcTimeDeduplicate        keep first: ``+I`` the first row per key; keep last: ``+I``
KeepFirst/LastRow          first, then ``-U old, +U new`` (nothing when the new row
                           equals the old and no state TTL is set)
RowTimeDeduplicate         keep last: ``+I`` first, ``-U old, +U new`` when the row's time
Function                   is not smaller than the kept row's; keep first: ``+I`` once the
                           watermark passes the first row's time, late rows dropped
=========================  ============================================================

Every output row carries the ``seq`` and ``_pt`` of the message that caused it and
``_n = input _n + [j]``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import sparksql
from ..errors import KitError, fail
from ..live import per_key
from ..replay.keyed import KeyedOperator, ValueState, replay, spread
from ..spark import known_rows
from . import INSERT, INSERT_ONLY, UPDATE_AFTER, UPDATE_BEFORE, Changelog, Options
from .group_agg import NO_CLOCK
from .replay import Row, check_columns, clock, expirations, replay_per_key

__all__ = ["deduplicate", "late_rows", "FirstOnEventTime", "FirstAfterExpiry", "ProcTimeDeduplicateKeepFirstRowFunction",
           "ProcTimeDeduplicateKeepLastRowFunction", "RowTimeDeduplicateFunction"]


class _Deduplicate:
    """What the deduplicate functions share: the kept row (``row``), the processing time it
    was written at and the state TTL (``ttl_ms``: a key whose state is older starts afresh)."""
    row = written = forgot = None

    def __init__(self, update_before: bool, ttl_ms: int, time: int | None = None):
        self.update_before, self.ttl_ms, self.time = update_before, ttl_ms, time

    def process(self, kind: str, row: Row, pt: int | None) -> list:
        if self.ttl_ms:
            if self.written is not None and self.written + self.ttl_ms <= clock(pt):
                self.forgot, self.row, self.written = self.written, None, None
        return self.process_element(row, pt)

    def keep(self, row, pt):
        self.row, self.written = row, pt

    def updated(self, old, new) -> list:
        """``updateDeduplicateResult``: ``+I`` the first row, else ``-U`` old, ``+U`` new."""
        if old is None:
            return [(INSERT, new, None)]
        before = [(UPDATE_BEFORE, old, None)] if self.update_before else []
        return before + [(UPDATE_AFTER, new, None)]


class ProcTimeDeduplicateKeepFirstRowFunction(_Deduplicate):
    """The first row of each key, ``+I``; later rows emit nothing."""

    def process_element(self, row, pt):
        if self.row is not None:
            return []
        self.keep(row, pt)
        return [(INSERT, row, None)]


class ProcTimeDeduplicateKeepLastRowFunction(_Deduplicate):
    """The last row of each key: a row equal to the kept one emits nothing unless a state
    TTL is set (downstream state must be kept alive)."""

    def process_element(self, row, pt):
        old = self.row
        self.keep(row, pt)
        if old is not None and not self.ttl_ms and old.values == row.values:
            return []
        return self.updated(old, row)


class RowTimeDeduplicateFunction(_Deduplicate):
    """The row of the largest event time of each key (keep last: a time not smaller than
    the kept row's replaces it). Flink 2.3 keeps the first row on event time with another
    function, insert-only, on watermarks (``_first_on_event_time``)."""

    def process_element(self, row, pt):
        t = row.values[self.time]
        if t is None:
            raise KitError(f"row {row.values} has a NULL event time: a rowtime deduplicate "
                           "needs one in every row")
        old = self.row
        if old is not None:
            kept = old.values[self.time]
            if t < kept:
                return []
        self.keep(row, pt)
        return self.updated(old, row)



def deduplicate(log: Changelog, keys: list[str], keep: str, options: Options,
                time: str | None = None, engine: str = "auto", marks: DataFrame | None = None,
                watermark=None) -> Changelog:
    """Flink's deduplication (``ROW_NUMBER() OVER (PARTITION BY keys ORDER BY time ASC|DESC)
    = 1``): ``keep`` ``"first"`` or ``"last"`` row per key, by arrival (``time`` None:
    processing time) or by event time ``time`` (a rowtime column; keeping the first needs
    ``marks``, the input stream's ``seq``, ``watermark`` (and ``proctime``): ``_first_on_event_time``;
    live, ``watermark``, the stream's strategy: ``FirstOnEventTime``).
    ``engine``: ``"auto"`` takes Spark window functions when the state TTL is off,
    ``"replay"`` always replays."""
    check_columns(log, list(keys) + ([time] if time else []), "deduplicate")
    if keep not in ("first", "last"):
        raise KitError(f"keep must be 'first' or 'last', not {keep!r}")
    if not log.insert_only:
        raise KitError("deduplicate reads an insert-only input; over updates, use top_n(..., "
                       "strategy='retract')")
    last = keep == "last"
    if engine not in ("auto", "replay"):
        raise KitError(f"engine must be 'auto' or 'replay', not {engine!r}")
    if time is not None and not last and log.df.isStreaming:
        if watermark is None or options.ttl_ms:
            raise KitError("keeping the first row on event time live needs the stream's watermark strategy "
                           "(watermark=) and no state TTL")
        return Changelog(_first_on_event_time_live(log, list(keys), time, watermark), log.columns, INSERT_ONLY,
                         tuple(keys))
    if time is not None and not last:
        if marks is None:
            raise KitError("keeping the first row on event time needs the watermarks of the input's one "
                           "stream (marks=): it waits for the watermark to pass the row's time")
        df, expired = _first_on_event_time(log, list(keys), time, marks, options.tasks, max(0, options.ttl_ms))
        return Changelog(df, log.columns, INSERT_ONLY, tuple(keys), expired=expired)
    mode = INSERT_ONLY if not last else frozenset(
        {INSERT, UPDATE_AFTER} | ({UPDATE_BEFORE} if options.update_before else set()))
    if engine == "auto" and not options.ttl_ms and not log.df.isStreaming:   # live: the functions
        df = _deduplicate_fast(log, list(keys), last, time, options.update_before)
    else:
        ub, ttl = options.update_before, options.ttl_ms
        if time is None:
            function = ProcTimeDeduplicateKeepLastRowFunction if last else ProcTimeDeduplicateKeepFirstRowFunction
            make = lambda: function(ub, ttl)   # noqa: E731
        else:
            at = list(log.columns).index(time)
            make = lambda: RowTimeDeduplicateFunction(ub, ttl, at)   # noqa: E731
        df, expired = expirations(replay_per_key(log, list(keys), make, options, []), keys)
        return Changelog(df, log.columns, mode, tuple(keys), expired=expired)
    return Changelog(df, log.columns, mode, tuple(keys))


def _lateness(log: Changelog, time: str, marks: DataFrame) -> DataFrame:
    """``log``'s rows with ``_wm`` (the watermark at their arrival) and ``_late``: below it."""
    t = sparksql.name(time)
    null = fail(F.lit(f"a row has a NULL event time in {time!r}: a rowtime deduplicate needs one in every row"))
    rows = log.df.join(marks.selectExpr("seq", "watermark AS _wm"), "seq")
    return rows.withColumn("_late", F.when(F.col(t).isNull(), null.cast("boolean")).otherwise(F.expr(f"coalesce({t} < _wm, false)")))


def late_rows(log: Changelog, time: str, marks: DataFrame) -> DataFrame:
    """The rows keep-first on event time drops (Flink drops them without a trace): the
    input's columns, ``seq`` and ``watermark`` (the one each arrived at)."""
    return _lateness(log, time, marks).where("_late").selectExpr(*map(sparksql.name, log.columns), "seq",
                                                                 "_wm AS watermark")


def _first_on_event_time(log: Changelog, keys, time, marks: DataFrame, tasks: int = 1, ttl_ms: int = 0) -> DataFrame:
    """Keep first on event time (Flink 2.3's ``RowTimeDeduplicateKeepFirstRowFunction``,
    insert-only), as real Flink 2.3 runs it (``topn.json``): a row below the watermark it
    arrives at is dropped (one *at* it is kept); of the others, each key's row of the
    smallest time (ties: the earlier arrival) is emitted once, as ``+I``, by its timer: at
    the first rise of the watermark, at or after the row's arrival, to its time or past it
    (after the last arrival: the end of input). A later row cannot change it: one of a
    smaller time would be late by then. Emissions of one rise are in time order, then by
    arrival; ``_n = [place]``.

        k  ts  seq  watermark before     ->  seq  _op  k  ts
        a  2   0    NULL                     1    +I   a  2    (the watermark rises to 25 after seq 1)
        b  30  1    -3                       2    +I   b  30   (end of input)
        a  1   2    25 (late: dropped)

    With a state TTL (``ttl_ms``) only the mark "emitted" expires, the TTL after the timer
    wrote it (the processing time of the arrival whose rise fired it; the waiting row has
    no TTL in Flink): a key's first row after that waits and is emitted again
    (``ttl.json``). Each row's timer is then placed as if the row were kept (``_fired``),
    and each key replayed in arrival order (``FirstAfterExpiry``). Returns the changes and,
    with a TTL, the expirations (``kit.changelog.replay.expirations``'s columns).
    """
    cols = [sparksql.name(c) for c in log.columns]
    rows = _lateness(log, time, marks).where("NOT _late")
    expired = None
    if ttl_ms:
        replayed = _after_expiry(_fired(rows, time, log.columns, marks, tasks), marks, keys, ttl_ms, tasks)
        expired = replayed.where("_last_write IS NOT NULL").selectExpr(
            *[f"_row.{sparksql.name(k)} AS {sparksql.name(k)}" for k in keys], "seq", "_last_write AS last_write_pt",
            "_pt AS pt")
        fired = replayed.where("_last_write IS NULL")
    else:
        by_key = Window.partitionBy(*[sparksql.name(k) for k in keys]).orderBy(sparksql.name(time), "seq", "_n")
        fired = _fired(rows.withColumn("_r", F.row_number().over(by_key)).where("_r = 1"), time, log.columns, marks,
                       tasks)
        pt = "unix_millis(proctime)" if "proctime" in marks.columns else "CAST(NULL AS BIGINT)"
        fired = fired.join(marks.selectExpr("seq", f"{pt} AS _pt"), "seq")
    fired = fired.withColumn("_k", F.row_number().over(Window.partitionBy("seq").orderBy("_v", "_j")) - 1)
    return fired.selectExpr("'+I' AS _op", *(f"_row.{c}" for c in cols), "seq", "array(CAST(_k AS INT)) AS _n",
                            "_pt"), expired


def _fired(kept: DataFrame, time: str, columns, marks: DataFrame, tasks: int) -> DataFrame:
    """Where each of ``kept``'s rows (not late) would be emitted: ``seq``, the rise its
    timer fires at, ``max(_at, _next)`` (``_at`` the first rise to its time or past it,
    ``_next`` the first rise at or after its arrival), with ``_row`` (its values), ``_v``
    (its time), ``_j`` (its arrival) and ``_an`` (its ``_n``) and ``_apt`` (its ``_pt``).

    Both are searches over the rises, whose watermarks grow with their arrival: the
    arrivals are cut into ``tasks`` ranges of ``seq`` (buckets), each searched by a window
    of its own, and a bucket with no answer takes the first rise of the buckets after it (a
    small summary); a row is searched for in the one bucket whose range of rise watermarks
    holds its time. No window spans all rows, and each search is a running minimum in
    reverse order (Spark recomputes a frame that ends at UNBOUNDED FOLLOWING for every row:
    quadratic).
    """
    t, cols = sparksql.name(time), [sparksql.name(c) for c in columns]
    size = max(1, -(-(known_rows(marks) or marks.count()) // max(1, tasks)))   # arrivals per bucket
    # the watermark each arrival leaves (the one the next arrives at; the last's: the end of
    # input, NULL sorted last); a rise is a step a timer can fire at
    left = marks.selectExpr("seq - 1 AS seq", "watermark AS _w", "false AS _end")
    after = marks.selectExpr("seq", "watermark AS _met").join(left, "seq", "left").selectExpr(
        "seq", f"seq div {size} AS _b", "IF(_end IS NULL, NULL, _w) AS _v",
        "_end IS NULL OR (_w IS NOT NULL AND (_met IS NULL OR _w > _met)) AS _step")
    # _next: the first rise from each arrival on, inside its bucket or carried in from the buckets after
    firsts = after.groupBy("_b").agg(F.min(F.when(F.col("_step"), F.col("seq"))).alias("_first"))
    carry = firsts.selectExpr("_b", "min(_first) OVER (ORDER BY _b DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
                                    " AS _carry")
    nexts = after.join(F.broadcast(carry), "_b").selectExpr(
        "seq AS _j", "coalesce(min(IF(_step, seq, NULL)) OVER (PARTITION BY _b ORDER BY seq DESC ROWS BETWEEN UNBOUNDED "
        "PRECEDING AND CURRENT ROW), _carry) AS _next")
    # _at: each bucket's rises cover the watermarks (its predecessor's highest, its own highest]
    steps = after.where("_step")
    bounds = steps.groupBy("_b").agg(F.max("_v").alias("_hi"), F.max(F.col("_v").isNull()).alias("_inf"))
    bounds = bounds.selectExpr("_b", "IF(_inf, NULL, _hi) AS _hi", "lag(_hi) OVER (ORDER BY _b) AS _lo")
    placed = kept.join(F.broadcast(bounds), F.expr(f"(_lo IS NULL OR {t} > _lo) AND (_hi IS NULL OR {t} <= _hi)"))
    both = placed.selectExpr("_b", f"{t} AS _v", "0 AS _kind", "seq AS _j", f"struct({', '.join(cols)}) AS _row",
                             "_n AS _an", "_pt AS _apt") \
        .unionByName(steps.selectExpr("_b", "_v", "1 AS _kind", "seq AS _j"), allowMissingColumns=True)
    ahead = "(PARTITION BY _b ORDER BY _v DESC NULLS FIRST, _kind DESC, _j DESC ROWS UNBOUNDED PRECEDING)"
    fired = both.selectExpr("*", f"min(IF(_kind = 1, _j, NULL)) OVER {ahead} AS _at").where("_kind = 0")
    return fired.join(nexts, "_j").selectExpr("_row", "_v", "_j", "_an", "_apt", "greatest(_at, _next) AS seq")


def _after_expiry(fired: DataFrame, marks: DataFrame, keys, ttl_ms: int, tasks: int) -> DataFrame:
    """``_fired``'s rows, each key replayed in arrival order with the state TTL
    (``FirstAfterExpiry``): the rows it emits, ``_pt`` the processing time of their rise, and
    for each arrival that found the mark expired a row with ``_last_write`` (its time)."""
    if "proctime" not in marks.columns:
        raise KitError(NO_CLOCK)
    rows = fired.join(marks.selectExpr("seq", "unix_millis(proctime) AS _fpt"), "seq").selectExpr(
        *[f"_row.{sparksql.name(c)} AS {sparksql.name(c)}" for c in keys], "_row", "_v", "_j", "_an", "_apt", "seq",
        "_fpt")
    schema = T.StructType([rows.schema["_row"], T.StructField("_v", rows.schema["_v"].dataType),
                           T.StructField("_j", T.LongType()), T.StructField("seq", T.LongType()),
                           T.StructField("_pt", T.LongType()), T.StructField("_last_write", T.LongType())])
    return replay(spread(rows, keys, tasks, "_j", "_an"), keys, lambda key: FirstAfterExpiry(ttl_ms), schema,
                  ["_row", "_v", "_j", "_apt", "seq", "_fpt"])


class FirstAfterExpiry(KeyedOperator):
    """One key of keep-first on event time with a state TTL, its rows in arrival order, each
    ``(row, time, arrival, its processing time, the rise its timer would fire at, that
    rise's processing time)``: the row waiting for its timer (the smallest time so far) is
    emitted when a later arrival comes after its rise, or at the end of input; the mark
    "emitted" then holds the key until the TTL passed since the rise (an arrival that finds
    it expired outputs its own values, time, arrival and processing time with the mark's).

        t  arrival  pt     fires at (pt)     TTL 1000 ->  emitted
        1  0        0      1 (0)                          1, at rise 1
        2  1        0      2 (0)                          (held: emitted at 0)
        4  3        2500   4 (2500)                       4, at rise 4 (the mark expired at 1000)
    """
    state = (ValueState("waiting"), ValueState("emitted"))

    def __init__(self, ttl_ms: int):
        self.ttl_ms = ttl_ms

    def process_element(self, row, ctx):
        values, t, arrival, pt, fires, fire_pt = row
        waiting, emitted = ctx.state("waiting"), ctx.state("emitted")
        if waiting.value() is not None and waiting.value()[3] < arrival:   # its rise came before this arrival
            self._emit(ctx)
        if emitted.value() is not None:
            if emitted.value() + self.ttl_ms > pt:
                return
            ctx.output((values, t, arrival, arrival, pt, emitted.value()))
            emitted.clear()
        if waiting.value() is None or t < waiting.value()[1]:
            waiting.update((values, t, arrival, fires, fire_pt))

    def end_of_input(self, ctx):
        if ctx.state("waiting").value() is not None:
            self._emit(ctx)

    def _emit(self, ctx):
        values, t, arrival, fires, fire_pt = ctx.state("waiting").value()
        ctx.output((values, t, arrival, fires, fire_pt, None))
        ctx.state("waiting").clear()
        ctx.state("emitted").update(fire_pt)


class FirstOnEventTime(KeyedOperator):
    """Keep first on event time, one key at a time as its rows and watermarks come (the live
    driver's; ``_first_on_event_time`` gives the same rows as one computation): a row below
    the watermark it arrives at is dropped; of the others the row of the smallest time (ties:
    the earlier) is kept, and emitted by its timer once the watermark rises to its time;
    then the key emits nothing more. A row: the values (the time at ``time``), ``seq`` and
    ``_n``; an output: the values and the emission's order among one rise's (time, then
    arrival: the batch's time, ``seq``, ``_n``), as ints.

        rows (t) / watermark met    ->  emitted
        a 5 / -inf, a 3 / -inf          a 3, when the watermark reaches 3
        a 1 / 4                         (late: dropped)
    """
    state = (ValueState("kept"), ValueState("done"))

    def __init__(self, time: int):
        self.time = time

    def process_element(self, row, ctx):
        *values, seq, n = row
        t = values[self.time]
        if t is None:
            raise KitError(f"row {values} has a NULL event time: keeping the first row on event time needs one")
        kept = ctx.state("kept").value()
        if ctx.state("done").value() or t < ctx.watermark or (kept is not None and kept[0][self.time] <= t):
            return
        order = [*_ints(t), *_ints(ctx.processing_time or 0), *_ints(seq), *n]
        ctx.state("kept").update((tuple(values), order))
        ctx.register_event_time_timer(t)

    def on_timer(self, timestamp, ctx):
        kept = ctx.state("kept").value()
        if kept is not None and kept[0][self.time] <= timestamp:
            ctx.output(kept)
            ctx.state("kept").update(None)
            ctx.state("done").update(True)


def _ints(x: int) -> list:
    """``x`` (a 62-bit int) as two INTs that sort as it does."""
    return [x >> 31, x & 0x7FFFFFFF]


def _first_on_event_time_live(log: Changelog, keys: list, time: str, watermark) -> DataFrame:
    """``FirstOnEventTime`` per key on the live driver: its emissions, each with ``seq`` -1
    (it belongs to the rise of the watermark before the micro-batch's arrivals: the live
    query numbers it so) and ``_n`` its order among the rise's."""
    columns = list(log.columns)
    df = log.df.select(*[F.col(sparksql.name(c)) for c in columns], "_op", "seq", "_n", "_pt")
    fields = [df.schema[c] for c in columns] + [
        T.StructField("_op", T.StringType()), T.StructField("seq", T.LongType()),
        T.StructField("_n", T.ArrayType(T.IntegerType())), T.StructField("_pt", T.LongType())]

    def emitted(rows, out):
        for values, order in out:
            yield (*values, INSERT, -1, order, None)
    at = columns.index(time)
    return per_key(df, keys, lambda key: FirstOnEventTime(at), T.StructType(fields), [*columns, "seq", "_n"],
                   emitted, watermark=watermark)


def _deduplicate_fast(log, keys, last, time, update_before) -> DataFrame:
    """Deduplication with window functions: a row is kept when it is the key's first
    (by arrival) or, on event time, not older than every earlier row of its key; each kept
    row after the first updates the one kept before it."""
    cols = [sparksql.name(c) for c in log.columns]
    by_arrival = Window.partitionBy(*[F.col(sparksql.name(k)) for k in keys]).orderBy("seq", "_n")
    df = log.df.withColumn("_v", F.struct(*cols)).withColumn("_first", F.row_number().over(by_arrival) == 1)
    if time is not None:
        t = F.col(sparksql.name(time))
        earlier = by_arrival.rowsBetween(Window.unboundedPreceding, -1)
        null = fail(F.lit(f"a row has a NULL event time in {time!r}: a rowtime deduplicate needs one in every row"))
        df = df.withColumn("_bound", F.max(t).over(earlier)).where(
            F.when(t.isNull(), null.cast("boolean")).otherwise(F.col("_first") | (t >= F.col("_bound"))))
    elif not last:
        df = df.where("_first")
    df = df.withColumn("_old", F.lag("_v").over(by_arrival))
    first = F.array(F.struct(F.lit(INSERT).alias("k"), F.col("_v").alias("v")))
    after = F.struct(F.lit(UPDATE_AFTER).alias("k"), F.col("_v").alias("v"))
    before = F.struct(F.lit(UPDATE_BEFORE).alias("k"), F.col("_old").alias("v"))
    update = F.array(before, after) if update_before else F.array(after)
    if time is None:   # keep last by arrival: a row equal to the kept one changes nothing
        df = df.where(F.col("_first") | ~F.col("_old").eqNullSafe(F.col("_v")))
    df = df.select("*", F.posexplode(F.when(F.col("_first"), first).otherwise(update)).alias("_j", "_c"))
    return df.selectExpr(*[f"_c.v.{c}" for c in cols], "_c.k AS _op", "seq",
                         "concat(_n, array(_j)) AS _n", "_pt")

