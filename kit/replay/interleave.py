"""Two streams replayed as one two-input operator (a join) sees them.

A join reads two inputs at once; which row reaches it first depends, in Flink, on thread
timing. The replay fixes that *interleaving* once, then gives every arrival its merged
position ``pos`` and the operator watermark, which is the minimum of the two inputs'
watermarks (``Long.MIN_VALUE`` until both have sent one; ``Long.MAX_VALUE`` at the end of
input):

================  ==================================================================
``interleave=``   merged arrival order
================  ==================================================================
``"event_time"``  each input is read as far as its event time has come: by the running
                  maximum of event time, the right input first on ties (default)
``"proctime"``    by the inputs' processing times (both need ``proctime=``), right first
``"left_first"``  all of the left input, then all of the right one
``"right_first"``  all of the right input, then all of the left one
================  ==================================================================

Orders at 10:00 and 10:20, a rate at 10:10, both inputs ``for_sql_delay(0)``, interleaved
by event time::

    pos  side   time   watermark after (left, right -> operator)
    0    left   10:00  10:00, none  -> none
    1    right  10:10  10:00, 10:10 -> 10:00
    2    left   10:20  10:20, 10:10 -> 10:10

>>> arrivals, W = replay([(10, "o1"), (20, "o2")], [(15, "r1")], "LRL",
...                      WatermarkStrategy.for_sql_delay(Duration(0)), WatermarkStrategy.for_sql_delay(Duration(0)))
>>> [(a.pos, a.side, a.time) for a in arrivals]
[(0, 0, 10), (1, 1, 15), (2, 0, 20)]
>>> [W.after(p) for p in range(4)]  # doctest: +ELLIPSIS
[-9223372036854775808, 10, 15, 9223372036854775807]
>>> W.next_rise(0, 12)       # the first position whose watermark reaches 12
(2, 15, None)

Operators run per key, a step per arrival (``TwoInput``: a merged row as its ``Arrival``).
A key sees the operator watermark only at its own arrivals (the one in force, ``_Wb``),
which fires its timers; ``Watermarks`` tells a timer where, among every key's arrivals, the
watermark first reached it (``next_rise``): the position and watermark it fired at. On Spark,
``interleaved`` builds the merged rows and ``watermarks`` the rises, collected once (the
rises are at most one per arrival, usually far fewer). Inputs whose rows Spark knows to be
few (``kit.spark.replay_tasks``: one task) are merged and replayed in one partition, by
window functions with no shuffle, the task finding the rises in the rows it holds: a new
interleaving then costs only the job that reads the result. Larger inputs are merged by
scans over their partitions: beside the smaller one where it has at most ``SMALL_SIDE``
rows (each row of the larger placed by a search among its merge keys, ``flinkkit.Merge``:
no sort: ``benchmarks/growth.py``'s interval join of 10M events and 100K versions through
``kit.sql`` took 83 s, 129 s sorted), else by a sort of both.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, fields
from typing import Any

import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import sparksql
from ..arrow import python_values
from ..errors import KitError
from ..jvm import available, merge_counted
from ..spark import replay_tasks
from ..stream import Stream, prefix_scan, epoch_ms, null_time_error, prepared, rows_of
from ..time import Clock, Duration, WatermarkStrategy
from .keyed import KeyedOperator, replay as replay_keys, spread

__all__ = ["LEFT", "RIGHT", "MIN_TIME", "MAX_TIME", "INTERLEAVINGS", "Arrival", "Watermarks",
           "check_inputs", "replay", "interleaved", "watermarks", "TwoInput", "per_key"]

LEFT, RIGHT = 0, 1
MIN_TIME, MAX_TIME = -(1 << 63), (1 << 63) - 1
INTERLEAVINGS = ("event_time", "proctime", "left_first", "right_first")


@dataclass(frozen=True)
class Arrival:
    """One row reaching the operator: its merged position, input side (``LEFT``/``RIGHT``)
    and arrival ``seq`` on that side, event time (ms), values, whether it is late against
    its own input's watermark, processing time (ms or None) and changelog kind."""
    pos: int
    side: int
    seq: int
    time: int | None
    row: Any
    late: bool = False
    proctime: int | None = None
    op: str = "+I"


class Watermarks:
    """The operator watermark after each merged position, kept as its rises: ``positions``
    (increasing) where it rose to ``values`` (increasing), with the processing time then.
    The end of input (position ``n``) raises it to ``MAX_TIME``, at the last arrival's
    processing time ``end``."""

    def __init__(self, positions, values, proctimes, n: int, end: int | None = None):
        self.positions = [int(p) for p in positions] + [n]       # plain ints: bisect, not numpy
        self.values = [int(v) for v in values] + [MAX_TIME]
        self.proctimes = list(proctimes) + [end]
        self.n = n

    def after(self, pos: int) -> int:
        """The watermark once arrival ``pos`` is processed (``pos >= n``: end of input)."""
        i = bisect_right(self.positions, pos) - 1
        return MIN_TIME if i < 0 else self.values[i]

    def before(self, pos: int) -> int:
        """The watermark in force when arrival ``pos`` comes."""
        return self.after(pos - 1)

    def next_rise(self, pos: int, threshold: int) -> tuple[int, int, int | None]:
        """``(position, watermark, proctime)`` of the first rise at or after arrival ``pos``
        to a watermark ``>= threshold``: when a timer at ``threshold`` registered while
        processing ``pos`` fires. ``(n, MAX_TIME, last proctime)`` at the end of input."""
        i = max(bisect_left(self.positions, pos), bisect_left(self.values, threshold))
        return self.positions[i], self.values[i], self.proctimes[i]


def replay(left: list, right: list, sides: str, left_watermark: WatermarkStrategy,
           right_watermark: WatermarkStrategy, clock: Clock | None = None):
    """Arrivals and watermarks of two small inputs, on the driver: ``left`` and ``right``
    are ``(time, row)`` or ``(time, row, op)`` in arrival order, ``sides`` the interleaving
    as a string of ``L`` and ``R`` (``"LRL"``). For tests, docs and explanations."""
    if sorted(sides) != sorted("L" * len(left) + "R" * len(right)):
        raise KitError(f"sides must hold {len(left)} L and {len(right)} R; got {sides!r}")
    inputs = {"L": (LEFT, iter(left), left_watermark), "R": (RIGHT, iter(right), right_watermark)}
    seen = {"L": [None, None, 0], "R": [None, None, 0]}      # max time, own watermark, count
    start = epoch_ms(clock.start) if clock else None
    arrivals, rises, level = [], [], None
    for pos, s in enumerate(sides):
        side, rows, strategy = inputs[s]
        time, row, *op = next(rows)
        state = seen[s]
        late = state[1] is not None and time <= state[1]
        proctime = None if clock is None else start + pos * clock.step.millis
        arrivals.append(Arrival(pos, side, state[2], time, row, late, proctime, *op))
        state[0] = time if state[0] is None else max(state[0], time)
        state[1] = strategy.watermark(state[0])
        state[2] += 1
        own = [seen["L"][1], seen["R"][1]]
        now = None if None in own else min(own)
        if now is not None and (level is None or now > level):
            level = now
            rises.append((pos, now, proctime))
    positions, values, proctimes = zip(*rises) if rises else ((), (), ())
    return arrivals, Watermarks(positions, values, proctimes, len(sides), arrivals[-1].proctime if arrivals else None)


def check_inputs(left, right, keys) -> None:
    """Both inputs are ``kit.stream``s and each ``(left column, right column)`` of ``keys``
    names a column of its side; else a KitError saying which."""
    for what, s in (("left", left), ("right", right)):
        if not isinstance(s, Stream):
            raise KitError(f"the {what} input must be a kit.stream(...); got {type(s).__name__}")
        s.require_own_names(f"a join (its {what} input)")
    for l, r in keys:
        if l not in left.source.columns:
            raise KitError(f"key {l!r} is not a column of the left input; columns are {left.source.columns}")
        if r not in right.source.columns:
            raise KitError(f"key {r!r} is not a column of the right input; columns are {right.source.columns}")


def tasks(merged: DataFrame) -> int:
    """How many tasks replay ``merged`` (``interleaved(...)``): ``kit.spark.replay_tasks`` of
    its rows when known (one for seed-sized inputs)."""
    return replay_tasks(merged.sparkSession, _ROWS.get(merged))


def running_in_one(df: DataFrame, running: dict[str, tuple[str, bool]], order: str) -> DataFrame:
    """``stream.prefix_scan`` for ``df`` in one partition: ``seq`` (dense, by ``order``, SQL) and
    the running maxima, by window functions over that partition (no shuffle)."""
    frame = "ROWS BETWEEN UNBOUNDED PRECEDING AND"
    return df.selectExpr("*", f"row_number() OVER (ORDER BY {order}) - 1 AS seq", *[
        f"max({c}) OVER (ORDER BY {order} {frame} {'CURRENT ROW' if inclusive else '1 PRECEDING'}) AS {name}"
        for name, (c, inclusive) in running.items()])


def side_rows(s: Stream, side: int, one: bool) -> DataFrame:
    """One input's rows with its arrival ``_seq``, event time, lateness, watermark after it
    (``_lw`` on the left, ``_rw`` on the right) and before it (``_lwb``, ``_rwb``), running
    maximum of event time and values as struct (``_vl``, ``_vr``); ``one``: in one partition.
    Built once per source DataFrame and stream settings (a widget that makes both streams
    anew and changes only one reuses the other's), the last ``_SIDES_KEPT`` per source (lazy
    plans: they keep no data)."""
    made = _SIDES.setdefault(s.source, {})
    key = (*(getattr(s, f.name) for f in fields(s) if f.name != "source"), side, one)
    if key not in made:
        made[key] = _side_of(s, side, one)
        while len(made) > _SIDES_KEPT:
            del made[next(iter(made))]
    return made[key]


def _side_of(s: Stream, side: int, one: bool) -> DataFrame:
    """``side_rows(...)``, computed."""
    df = prepared(s)
    running = {"_wmb": ("_g", False), "_wmi": ("_g", True), "_mx": ("_ts", True)}
    if "_p" in df.columns:
        running["_pi"] = ("_p", True)
    if one:     # the input's order: its partitions in order, rows in partition order
        df = running_in_one(df.withColumn("_id", F.monotonically_increasing_id()).coalesce(1), running, "_id")
    else:
        df = prefix_scan(df, running)
    if isinstance(s.proctime, Clock):
        pt = f"{epoch_ms(s.proctime.start)} + seq * {s.proctime.step.millis}"
    else:
        pt = "_pi" if isinstance(s.proctime, str) else "CAST(NULL AS BIGINT)"
    name = "left" if side == LEFT else "right"
    where = F.concat(F.lit(f"{name} input, seq="), F.col("seq").cast("string"))
    late = F.when(F.col("_ts").isNull(), null_time_error(s.time, where).cast("boolean")).otherwise(
        F.expr("coalesce(_ts <= _wmb, false)"))
    values = ", ".join(f"{sparksql.string(c)}, {sparksql.name(s.inner(c))}" for c in s.source.columns)
    return df.withColumn("_late", late).selectExpr(
        f"{side} AS _side", "seq AS _seq", "_ts", "_late", f"_wmi AS _{name[0]}w", f"_wmb AS _{name[0]}wb", "_mx",
        f"{pt} AS _spt", f"named_struct({values}) AS _v{name[0]}")


def interleaved(left: Stream, right: Stream, interleave: str = "event_time",
                clock: Clock | None = None, keys=()) -> DataFrame:
    """Both inputs as one DataFrame in merged arrival order, numbered ``_pos``, with
    ``_side``, ``_seq`` (arrival on its side), ``_ts``, ``_late`` (against its own input),
    ``_W`` (operator watermark after the row, NULL = none yet), ``_Wb`` (the one in force
    when the row comes: ``Watermarks.before``), ``_pt`` (processing time,
    ms: the ``clock`` over merged positions, else the inputs' own, never going back) and
    ``_vl``/``_vr`` (the row's values as a struct, NULL on the other side) and, for each
    ``(left column, right column)`` of ``keys``, the key ``_k0..`` (the right one cast to the
    left one's type). Kept (``localCheckpoint``): the watermarks and the replay both read
    it; when it fits one task, in one partition, kept when first read (no job of its own).

    The same streams interleaved again the same way (a widget redrawing a join whose
    inputs did not change) give what they gave the first time, kept while both streams
    live."""
    made = _INTERLEAVED.setdefault(left, {})
    args = (weakref.ref(right), interleave, clock, tuple(map(tuple, keys)))   # (right held, left never goes)
    if args not in made:
        made[args] = _interleaved(left, right, interleave, clock, keys)
    return made[args]


_INTERLEAVED: "weakref.WeakKeyDictionary[Stream, dict]" = weakref.WeakKeyDictionary()
_SIDES: "weakref.WeakKeyDictionary[DataFrame, dict]" = weakref.WeakKeyDictionary()
_SIDES_KEPT = 16
_WATERMARKS: "weakref.WeakKeyDictionary[DataFrame, Watermarks]" = weakref.WeakKeyDictionary()
_ROWS: "weakref.WeakKeyDictionary[DataFrame, int | None]" = weakref.WeakKeyDictionary()


def _interleaved(left: Stream, right: Stream, interleave: str, clock: Clock | None, keys) -> DataFrame:
    """``interleaved(...)``, computed."""
    for what, s in (("left", left), ("right", right)):
        s.require_own_names(f"a join (its {what} input)")
    if interleave not in INTERLEAVINGS:
        raise KitError(f"interleave={interleave!r} is not one of " + ", ".join(map(repr, INTERLEAVINGS)))
    if interleave == "proctime" and (left.proctime is None or right.proctime is None):
        raise KitError('interleave="proctime" needs both inputs with proctime= (a Clock or a column)')
    rows = rows_of([left, right])
    one = replay_tasks(left.source.sparkSession, rows) == 1
    out = None if one else _beside_small(left, right, interleave)
    if out is None:
        # each row carries both struct columns (the other side's NULL) and both watermarks
        merged = side_rows(left, LEFT, one).unionByName(side_rows(right, RIGHT, one), allowMissingColumns=True)
        first = {"event_time": ["_mx"], "proctime": ["_spt"], "left_first": [], "right_first": []}[interleave]
        order = [(c, False) for c in first] + [("_side", interleave != "left_first"), ("_seq", False)]
        running = {"_L": ("_lw", True), "_R": ("_rw", True), "_Lb": ("_lw", False), "_Rb": ("_rw", False),
                   "_P": ("_spt", True)}
        if one:
            out = running_in_one(merged.coalesce(1), running, ", ".join(c + " DESC" * desc for c, desc in order))
        else:
            merged = merged.orderBy(*[F.desc(c) if desc else c for c, desc in order]).localCheckpoint()  # read twice
            out = prefix_scan(merged, running).drop("_pos")
    pt = f"{epoch_ms(clock.start)} + seq * {clock.step.millis}" if clock else "_P"
    types = [{f.name: f.dataType for f in s.source.schema.fields} for s in (left, right)]
    q = sparksql.name
    key = [f"coalesce(_vl.{q(l)}, " + (f"_vr.{q(r)}" if types[0][l] == types[1][r] else
                                       f"CAST(_vr.{q(r)} AS {types[0][l].simpleString()})")
           + f") AS _k{i}" for i, (l, r) in enumerate(keys)]
    out = sparksql.select(out, "seq AS _pos", "_side", "_seq", "_ts", "_late",
                          "CAST(IF(_L IS NULL OR _R IS NULL, NULL, least(_L, _R)) AS BIGINT) AS _W",
                          "CAST(IF(_Lb IS NULL OR _Rb IS NULL, NULL, least(_Lb, _Rb)) AS BIGINT) AS _Wb",
                          f"CAST({pt} AS BIGINT) AS _pt", "_vl", "_vr", *key).localCheckpoint(eager=not one)
    _ROWS[out] = rows
    return out


SMALL_SIDE = 1_000_000   # rows of the smaller input up to which the larger one is merged beside it, unsorted

# the merge key of each interleaving: never decreasing along an input's arrivals
_MERGE_KEY = {"event_time": "_mx", "proctime": "_spt", "left_first": "CAST(_side AS BIGINT)",
              "right_first": "CAST(1 - _side AS BIGINT)"}


def _beside_small(left: Stream, right: Stream, interleave: str) -> DataFrame | None:
    """The merged rows as the sort's prefix scan gives them (``seq``, ``_side``, ``_seq``,
    ``_ts``, ``_late``, ``_L``, ``_R``, ``_Lb``, ``_Rb``, ``_P``, ``_vl``, ``_vr``), with no sort:
    each input's merge key never decreases along its arrivals, so a row of the larger input
    has its own seq plus the smaller input's rows before it (``flinkkit.Merge``: a binary
    search among their keys, broadcast), and a row of the smaller one its seq plus the larger
    input's rows that count it or fewer. The watermarks and processing time in force come from
    the other input's last row before. None (sort them) where the smaller input has more than
    ``SMALL_SIDE`` rows or the session lacks the class.

        left (larger) keys 1 3 5, right (smaller) keys 3, a tie puts the right row first
        left rows: right rows before them 0 1 1 -> pos 0, 2, 3
        right row 0: left rows with at most 0 right rows before them: 1 -> pos 1
    """
    streams = (left, right)
    if not available(left.source.sparkSession, "Merge"):
        return None
    small = LEFT if left.rows < right.rows else RIGHT
    if streams[small].rows > SMALL_SIDE:
        return None
    large, key = 1 - small, _MERGE_KEY[interleave]
    own = {side: ("_l", "_L") if side == LEFT else ("_r", "_R") for side in (LEFT, RIGHT)}

    def placed(df: DataFrame, side: int, before: str, other: str, other_pt: str) -> DataFrame:
        (w, W), (_, O) = own[side], own[1 - side]
        return df.selectExpr(f"_seq + {before} AS seq", "_side", "_seq", "_ts", "_late", f"{w}w AS {W}",
                             f"{w}wb AS {W}b", f"{other} AS {O}", f"{other} AS {O}b",
                             f"greatest(_spt, {other_pt}) AS _P", f"_v{w[1]}")

    lesser = side_rows(streams[small], small, False).withColumn("_k", F.expr(key))
    keys = lesser.selectExpr("_seq", "CAST(_k AS BIGINT)")
    # an equal key: the right input's row first, as the sort puts it. Read twice, not kept: its counts
    # need few of its columns, cheaper to compute again (9 s of a 10M side) than keeping it (12 s)
    larger = merge_counted(side_rows(streams[large], large, False).withColumn("_k", F.expr(key)), "_k", keys,
                           small == RIGHT)
    last = lesser.selectExpr("_seq + 1 AS _c", f"{own[small][0]}w AS _ow", "_spt AS _opt")   # before count _c
    rows_large = placed(larger.join(F.broadcast(last), "_c", "left"), large, "_c", "_ow", "_opt")
    counts = larger.groupBy("_c").agg(F.count(F.lit(1)).alias("_n"), F.max(f"{own[large][0]}w").alias("_mw"),
                                      F.max("_spt").alias("_mp"))
    upto = "OVER (ORDER BY _seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    rows_small = lesser.join(counts, F.col("_seq") == F.col("_c"), "left").coalesce(1).selectExpr(
        "*", f"sum(coalesce(_n, 0)) {upto} AS _before", f"max(_mw) {upto} AS _ow", f"max(_mp) {upto} AS _opt")
    return rows_large.unionByName(placed(rows_small, small, "_before", "_ow", "_opt"), allowMissingColumns=True)


def watermarks(merged: DataFrame) -> Watermarks:
    """The rises of ``_W`` over ``interleaved(...)`` rows, collected to the driver once."""
    if merged not in _WATERMARKS:
        _WATERMARKS[merged] = _watermarks(merged)
    return _WATERMARKS[merged]


def _watermarks(merged: DataFrame) -> Watermarks:
    if tasks(merged) == 1:
        merged = merged.coalesce(1)       # one partition: grouped with no shuffle
    # through Arrow: a watermark that rises at every arrival makes as many rises as arrivals
    table = merged.groupBy("_W").agg(*map(F.expr, ("min(_pos) AS p", "min_by(_pt, _pos) AS t", "count(1) AS n",
                                                   "max(_pt) AS end"))).toArrow()
    n = pc.sum(table["n"]).as_py() or 0
    end = pc.max(table["end"]).as_py()     # a clock never goes back
    rises = table.filter(pc.is_valid(table["_W"])).sort_by("_W")
    return Watermarks(rises["p"].to_pylist(), rises["_W"].to_pylist(), rises["t"].to_pylist(), n, end)


def _watermarks_of(pos: list, W: list, pt: list) -> Watermarks:
    """``watermarks`` from every merged row's ``_pos``, ``_W`` and ``_pt`` (in any order), in
    the task that holds them all."""
    first = {}
    for p, w, t in sorted(zip(pos, W, pt), key=lambda r: r[0]):
        if w is not None:
            first.setdefault(w, (p, t))
    rises = sorted(first.items())
    end = max((t for t in pt if t is not None), default=None)
    return Watermarks([p for _, (p, _) in rises], [w for w, _ in rises], [t for _, (_, t) in rises], len(pos), end)


class TwoInput(KeyedOperator):
    """A two-input operator over the merged rows (``_ARRIVAL``'s columns): each row becomes
    its ``Arrival`` (``op`` from the row of a side that is a changelog, ``changelog[side]``)
    for ``operator.process_element``; state, timers and the end of input are the operator's.
    Without ``values`` (rows of ``_ARRIVAL[:6]``: two insert-only inputs) an ``Arrival``'s
    ``row`` is None."""

    def __init__(self, operator: KeyedOperator, changelog: dict, values: bool = True):
        self.state, self.on_timer, self.end_of_input = operator.state, operator.on_timer, operator.end_of_input
        self.step, self.changelog = operator.process_element, changelog
        if not values:
            self.process_element = self._without_values

    def process_element(self, row, ctx):
        pos, side, seq, ts, late, pt, vl, vr = row
        value = vl if side == LEFT else vr
        self.step(Arrival(pos, side, seq, ts, value, late, pt,
                          (value.get("op") or "+I") if self.changelog[side] else "+I"), ctx)

    def _without_values(self, row, ctx):
        pos, side, seq, ts, late, pt = row
        self.step(Arrival(pos, side, seq, ts, None, late, pt), ctx)


_ARRIVAL = ["_pos", "_side", "_seq", "_ts", "_late", "_pt", "_vl", "_vr"]


def per_key(merged: DataFrame, keys: list, operator, schema, output=None, marks: bool = False,
            values: bool = True) -> DataFrame:
    """``operator(key values, watermarks)``, a two-input ``KeyedOperator`` over one key's
    ``Arrival``s, run on the replay driver (``keyed.replay``) for each key of ``merged``
    (``interleaved(...)``): the keys spread over ``tasks(merged)`` tasks (one without keys:
    then with no shuffle), each task sorted by key and merged position. With ``marks`` the
    operator gets the operator watermark's rises (``watermarks(merged)``; a task that holds
    every row finds them there unless they were collected before: no job of their own) and
    each row the watermark in force (``_Wb``), which fires its event-time timers; else None.
    ``output``: as ``keyed.replay``'s (default: the outputs are tuples in ``schema``'s order).
    ``values`` False: the rows' values stay in the JVM (for an operator that reads none of them:
    making them Python values was a third of an interval join's time), unless an input is a
    changelog (its rows' ``op`` is among them)."""
    changelog = {LEFT: "op" in merged.schema["_vl"].dataType.names, RIGHT: "op" in merged.schema["_vr"].dataType.names}
    n = tasks(merged) if keys else 1
    W = (_WATERMARKS.get(merged) if n == 1 else watermarks(merged)) if marks else None

    def rises(table):   # the task holds every row
        return _watermarks_of(*(python_values(table.column(c)) for c in ("_pos", "_W", "_pt")))

    values = values or any(changelog.values())

    def two_input(key, found=W):
        return TwoInput(operator(key, found), changelog, values)

    return replay_keys(spread(merged, keys, n, "_pos"), keys, two_input, schema, _ARRIVAL if values else _ARRIVAL[:6],
                       output, "_Wb" if marks else None, task=rises if marks and W is None else None)
