"""The regular join of two dynamic tables: Flink's ``StreamingJoinOperator`` on Spark.

A regular join (no time bounds, no versions) keeps every row of both inputs in state, per
join key: each side the multiset of its rows (Flink's ``JoinRecordStateView``; an input
with an upsert key keeps one row per key value), an outer side with each row's number of
matches on the other side (``OuterJoinRecordStateView``). Each input message, in merged
arrival order (``merge``), changes its side's state and emits, for each matching row of
the other side in state order:

==============================  ======================================================
input message                   output (``r`` the row, ``o`` each match, ``∅`` NULLs)
==============================  ======================================================
``+I``/``+U``, outer side       ``+I r∅`` if no match; else per match: ``-D ∅o`` if
                                ``o`` had no match before (other side outer), ``+I ro``
``+I``/``+U``, inner side       per match: ``-D ∅o`` if ``o`` had no match before
                                (other side outer), ``+I ro``; or, other side inner,
                                ``ro`` with the input's kind (``+I``/``+U``)
``-D``/``-U``, outer side       ``-D r∅`` if no match; else per match: ``-D ro``, then
                                ``+I ∅o`` if ``r`` was ``o``'s last match (other outer)
``-D``/``-U``, inner side       per match: ``ro`` with the input's kind (``-D``/``-U``),
                                then ``+I ∅o`` if ``r`` was ``o``'s last match
==============================  ======================================================

So a NULL-padded row is always retracted by ``-D`` and comes back as ``+I`` (Flink 2.3;
FLINK-17337 would make them ``-U``/``+U``), whatever the input's kind or
``Options.update_before``; only the rows of an inner side's message keep its kind.

A match is a row of the other side with equal keys (a NULL key matches nothing, as SQL's
``=``; no keys: every row) for which ``condition`` holds. Flink iterates its state in
hash order; the kit iterates it in the order the distinct rows came into state (a row
held twice is met twice in a row; a row taken out and back goes last). ``seq`` and
``_pt`` of an output are the input message's, ``_n`` its ``_n`` plus its side (0 left, 1
right) and the output's index among that message's outputs. Messages of one ``seq`` (a
self-join) are taken by ``_n``, then left before right, and their outputs keep that order.

Changelog mode (Flink's ``FlinkChangelogModeInferenceProgram``): an inner join forwards
its inputs' kinds (two insert-only inputs give an insert-only join); an outer join may
send any kind: ``[I,UB,UA,D]``, or ``[I,UA,D]`` when ``Options.update_before`` is False
and no input sends ``-U``. Upsert key: the left key with the right key when both inputs
have one, else (inner join) one side's key when the other side's upsert key lies within
its join keys, else None.

Orders ``l1`` at 0 and ``l2`` at 1 (key ``a``), a rate ``r1`` at 2 (key ``a``), LEFT JOIN::

    seq  _n      _op  left  right
    0    [0, 0]  +I   l1    NULL
    1    [0, 0]  +I   l2    NULL
    2    [1, 0]  -D   l1    NULL
    2    [1, 1]  +I   l1    r1
    2    [1, 2]  -D   l2    NULL
    2    [1, 3]  +I   l2    r1

An inner join of two insert-only inputs without state TTL takes a fast path: one Spark
join, each pair emitted by the later of its two messages, ``_n`` ranked as the replay does.
Over streaming inputs (live) the reference runs per key on the live driver
(``kit.live.per_key``), micro-batch after micro-batch; the pairs a condition lets match
come from Spark's stream-stream join, in the batch of the pair's later row.

State TTL (``Options.ttl_ms``): Flink's per-side state retention on processing time
(``StateTtlConfig`` on create and write, expired rows never returned): a row not written
for ``ttl_ms`` (its arrival, a change of its count or of its number of matches) is gone
from its side when a message comes at ``_pt >= written + ttl_ms``.

>>> from kit.changelog import INSERT_ONLY
>>> sorted(mode_of("left", INSERT_ONLY, INSERT_ONLY, update_before=False))
['+I', '+U', '-D']
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import sparksql
from ..errors import KitError
from ..live import per_key
from ..replay.interleave import INTERLEAVINGS, LEFT, RIGHT, running_in_one, side_rows
from ..replay.keyed import replay, spread
from ..spark import replay_tasks
from ..stream import Stream, prefix_scan, epoch_ms, rows_of
from ..time import Clock
from . import ADDS, ALL, DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, Changelog, Options
from .replay import Function

__all__ = ["HOWS", "merge", "join", "mode_of", "upsert_key_of"]

HOWS = ("inner", "left", "right", "full")
_OUTER = {"inner": (False, False), "left": (True, False), "right": (False, True), "full": (True, True)}
_PAIRS = 2      # the ``_side`` of the rows that list the pairs ``condition`` lets match


# -- one arrival order for several streams ------------------------------------------------

def merge(streams: list, interleave: str = "event_time", clock: Clock | None = None) -> list:
    """Each stream of ``streams`` as an insert-only changelog (``changelog.from_stream``: with
    ``proctime`` for a stream with a clock) whose ``seq`` is its place in ONE merged arrival
    order, and ``_pt`` the merged clock's
    time then (``clock``: its start plus ``seq`` steps; else the streams' own processing
    times, never going back; NULL without). ``interleave`` generalizes
    ``kit.replay.interleave``'s two-input orders to N streams:

    - ``"event_time"``: by each stream's running maximum of event time; on ties the later
      stream of the list first (two streams: the right one first, as ``interleaved``);
    - ``"proctime"``: by the streams' processing times (all need ``proctime=``), ties as above;
    - ``"left_first"``: the streams one after the other, in list order;
    - ``"right_first"``: the streams one after the other, last one first.

    Within a stream its own order is kept. The order depends on the rows only, not on
    Spark's partitioning; for two streams it is ``interleaved(left, right)``'s ``_pos``."""
    streams = list(streams)
    if not streams:
        raise KitError("merge needs at least one stream")
    for i, s in enumerate(streams):
        if not isinstance(s, Stream):
            raise KitError(f"stream {i} of merge must be a kit.stream(...); got {type(s).__name__}")
        s.require_own_names(f"merge (stream {i})")
    if interleave not in INTERLEAVINGS:
        raise KitError(f"interleave={interleave!r} is not one of " + ", ".join(map(repr, INTERLEAVINGS)))
    if interleave == "proctime" and any(s.proctime is None for s in streams):
        raise KitError('interleave="proctime" needs every stream with proctime= (a Clock or a column)')
    one = replay_tasks(streams[0].source.sparkSession, rows_of(streams)) == 1
    parts = []
    for i, s in enumerate(streams):     # replay's own sides: seq, running max of event time, proctime
        part = side_rows(s, i, one)
        parts.append(part.selectExpr("_side", "_seq", "_mx", "_spt",
                                     f"{'_vl' if i == LEFT else '_vr'} AS _v{i}"))
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.unionByName(part, allowMissingColumns=True)
    first = {"event_time": ["_mx"], "proctime": ["_spt"], "left_first": [], "right_first": []}[interleave]
    order = [(c, False) for c in first] + [("_side", interleave != "left_first"), ("_seq", False)]
    running = {"_P": ("_spt", True)}
    if one:
        merged = running_in_one(merged.coalesce(1), running, ", ".join(c + " DESC" * desc for c, desc in order))
    else:
        merged = prefix_scan(merged.orderBy(*[F.desc(c) if desc else c for c, desc in order]).localCheckpoint(), running)
    pt = f"{epoch_ms(clock.start)} + seq * {clock.step.millis}" if clock else "_P"
    values = [f"_v{i}" for i in range(len(streams))]
    merged = merged.selectExpr("_side", "seq", f"CAST({pt} AS BIGINT) AS _pt", "_spt", *values)
    logs = []
    for i, s in enumerate(streams):
        columns = [sparksql.name(c) for c in s.source.columns]
        clock = ["timestamp_millis(_spt) AS proctime"] if "proctime" not in s.source.columns and s.proctime else []
        df = merged.where(f"_side = {i}").selectExpr(
            "'+I' AS _op", *[f"_v{i}.{c} AS {c}" for c in columns], *clock,
            "seq", "CAST(array() AS ARRAY<INT>) AS _n", "_pt")
        logs.append(Changelog(df, tuple(df.columns[1:-3])))
    return logs


# -- the join -------------------------------------------------------------------------------

def mode_of(how: str, left_mode: frozenset, right_mode: frozenset, update_before: bool = True) -> frozenset:
    """The row kinds the join may send (see the module doc)."""
    if how == "inner":
        return frozenset(left_mode | right_mode)
    if update_before or UPDATE_BEFORE in left_mode | right_mode:
        return ALL
    return frozenset({INSERT, UPDATE_AFTER, DELETE})


def upsert_key_of(how: str, left: Changelog, right: Changelog, left_keys, right_keys,
                  left_names, right_names) -> tuple | None:
    """The output's upsert key, in output names (see the module doc)."""
    lk = None if left.upsert_key is None else tuple(left_names[left.columns.index(c)] for c in left.upsert_key)
    rk = None if right.upsert_key is None else tuple(right_names[right.columns.index(c)] for c in right.upsert_key)
    if lk is not None and rk is not None:
        return lk + rk
    if how == "inner" and lk is not None and right.upsert_key is not None and set(right.upsert_key) <= set(right_keys):
        return lk
    if how == "inner" and rk is not None and left.upsert_key is not None and set(left.upsert_key) <= set(left_keys):
        return rk
    return None


def join(left: Changelog, right: Changelog, how: str, left_keys: list, right_keys: list,
         condition: str | None, options: Options, left_names: list | None = None,
         right_names: list | None = None, *, engine: str = "auto") -> Changelog:
    """``left`` joined with ``right`` as Flink's streaming join: ``how`` (``inner``,
    ``left``, ``right``, ``full``), equi keys ``left_keys[i] = right_keys[i]`` (may be empty),
    ``condition`` a Spark SQL boolean over the output column names (per candidate pair),
    output columns ``left_names`` (default: left's) then ``right_names``. Both inputs'
    ``seq`` must be of one arrival order (``merge``). ``engine``: ``"reference"`` (the
    replay per key), ``"fast"`` (inner join of insert-only inputs only) or ``"auto"``."""
    spec = _Spec.of(left, right, how, left_keys, right_keys, condition, options, left_names, right_names)
    live = left.df.isStreaming   # live: the reference per key on the live driver, micro-batch after micro-batch
    fast_ok = how == "inner" and left.insert_only and right.insert_only and options.ttl_ms <= 0 and not live
    if engine not in ("auto", "reference", "fast"):
        raise KitError(f"engine={engine!r} is not one of 'auto', 'reference', 'fast'")
    if engine == "fast" and not fast_ok:
        raise KitError("the fast path joins two insert-only inputs of a replay by an inner join without state "
                       'TTL; use engine="reference" (or "auto")')
    df = _fast(spec) if fast_ok and engine != "reference" else _replayed(spec)
    mode = mode_of(how, left.mode, right.mode, options.update_before)
    key = upsert_key_of(how, left, right, spec.left_keys, spec.right_keys, spec.left_names, spec.right_names)
    return Changelog(df, tuple(spec.left_names + spec.right_names), mode, key)


@dataclass(frozen=True)
class _Spec:
    """A join's checked arguments."""
    left: Changelog
    right: Changelog
    how: str
    left_keys: list
    right_keys: list
    condition: str | None
    options: Options
    left_names: list
    right_names: list

    @classmethod
    def of(cls, left, right, how, left_keys, right_keys, condition, options, left_names, right_names):
        if how not in HOWS:
            raise KitError(f"how={how!r} is not one of " + ", ".join(map(repr, HOWS)))
        left_keys, right_keys = list(left_keys), list(right_keys)
        if len(left_keys) != len(right_keys):
            raise KitError(f"left_keys {left_keys} and right_keys {right_keys} must pair up: give as many of each")
        for what, log, keys in (("left", left, left_keys), ("right", right, right_keys)):
            for k in keys:
                if k not in log.columns:
                    raise KitError(f"key {k!r} is not a column of the {what} input; columns are {list(log.columns)}")
            if UPDATE_AFTER in log.mode and UPDATE_BEFORE not in log.mode and log.upsert_key is None:
                raise KitError(f"the {what} input sends +U without -U but has no upsert key: the join cannot "
                               "tell which row a +U replaces; send -U (Options.update_before) or give its upsert_key")
        names = []
        for what, log, given in (("left", left, left_names), ("right", right, right_names)):
            given = list(log.columns if given is None else given)
            if len(given) != len(log.columns):
                raise KitError(f"{what}_names has {len(given)} names for the {what} input's "
                               f"{len(log.columns)} columns {list(log.columns)}")
            names.append(given)
        clash = sorted({n for n in names[0] + names[1] if (names[0] + names[1]).count(n) > 1})
        if clash:
            raise KitError(f"output columns {clash} appear twice: rename them with left_names= / right_names=")
        return cls(left, right, how, left_keys, right_keys, condition, options, *names)

    def sides(self) -> list:
        """Each input's rows as ``_side``, ``_op``, keys ``_k0..`` (the right one cast to the
        left one's type), ``seq``, ``_n``, ``_pt`` and values as struct ``_vl`` / ``_vr``."""
        q = sparksql.name
        types = [{f.name: f.dataType for f in log.df.schema.fields} for log in (self.left, self.right)]
        out = []
        for side, log, keys in ((LEFT, self.left, self.left_keys), (RIGHT, self.right, self.right_keys)):
            cast = [types[0][lk].simpleString() if types[0][lk] != types[1][rk] and side == RIGHT else None
                    for lk, rk in zip(self.left_keys, self.right_keys)]
            key = [f"CAST({q(k)} AS {c}) AS _k{i}" if c else f"{q(k)} AS _k{i}"
                   for i, (k, c) in enumerate(zip(keys, cast))]
            values = ", ".join(q(c) for c in log.columns)
            out.append(log.df.selectExpr(f"{side} AS _side", "_op", *key, "seq", "_n", "_pt",
                                         f"struct({values}) AS _v{'l' if side == LEFT else 'r'}"))
        return out

    @property
    def keys(self) -> list:
        return [f"_k{i}" for i in range(len(self.left_keys))]

    def pairs(self, left: DataFrame, right: DataFrame) -> DataFrame:
        """The distinct (left row, right row) of equal keys for which ``condition`` holds."""
        cols = [f"_vl.{sparksql.name(c)} AS {sparksql.name(n)}" for c, n in zip(self.left.columns, self.left_names)]
        cols += [f"_vr.{sparksql.name(c)} AS {sparksql.name(n)}" for c, n in zip(self.right.columns, self.right_names)]
        keys = self.keys
        l = left.select(*keys, "_vl").distinct()
        r = right.select(*[F.col(k).alias(f"_r{k}") for k in keys], "_vr").distinct()
        on = [F.col(k) == F.col(f"_r{k}") for k in keys]
        both = l.join(r, on) if on else l.crossJoin(r)
        return self.where(both.selectExpr(*keys, "_vl", "_vr", *cols)).select(*keys, "_vl", "_vr")

    def where(self, df: DataFrame) -> DataFrame:
        """``df`` (with the output columns) where ``condition`` holds."""
        try:
            return df.where(self.condition)
        except AnalysisException as e:
            raise KitError(f"join condition {self.condition!r} is not a boolean over the output columns "
                           f"{self.left_names + self.right_names}: {e}") from None


def _output_schema(spec: _Spec) -> T.StructType:
    fields = [T.StructField("_op", T.StringType())]
    for log, names in ((spec.left, spec.left_names), (spec.right, spec.right_names)):
        types = {f.name: f.dataType for f in log.df.schema.fields}
        fields += [T.StructField(n, types[c], True) for c, n in zip(log.columns, names)]
    meta = [("seq", T.LongType()), ("_n", T.ArrayType(T.IntegerType())), ("_pt", T.LongType())]
    return T.StructType(fields + [T.StructField(name, dtype) for name, dtype in meta])


# -- the fast path: inner join of insert-only inputs --------------------------------------

def _fast(spec: _Spec) -> DataFrame:
    """Each matching pair once, emitted by the later of its two messages (by ``seq``,
    ``_n``, left before right), ``_n`` that message's plus the partner's rank in the
    partner side's state: by the first arrival of its value, then its own arrival."""
    keys, q = spec.keys, sparksql.name
    left, right = spec.sides()
    first = lambda v: f"min(struct(seq, _n)) OVER (PARTITION BY {', '.join(keys + [v])})"   # noqa: E731
    left = left.selectExpr(*keys, "_vl", "seq AS _ls", "_n AS _ln", "_pt AS _lpt", f"{first('_vl')} AS _lf")
    right = right.selectExpr(*[f"{k} AS _r{k}" for k in keys], "_vr", "seq AS _rs", "_n AS _rn", "_pt AS _rpt",
                             f"{first('_vr')} AS _rf")
    on = [F.col(k) == F.col(f"_r{k}") for k in keys]
    both = left.join(right, on) if on else left.crossJoin(right)
    values = ([f"_vl.{q(c)} AS {q(n)}" for c, n in zip(spec.left.columns, spec.left_names)]
              + [f"_vr.{q(c)} AS {q(n)}" for c, n in zip(spec.right.columns, spec.right_names)])
    names = [q(n) for n in spec.left_names + spec.right_names]
    later = "(_rs > _ls OR (_rs = _ls AND _rn >= _ln))"     # the right message comes after the left one
    both = both.selectExpr(*values, "_ls", "_ln", "_lpt", "_lf", "_rs", "_rn", "_rpt", "_rf", f"{later} AS _rr")
    if spec.condition is not None:
        both = spec.where(both)
    j = ("row_number() OVER (PARTITION BY _rr, IF(_rr, _rs, _ls), IF(_rr, _rn, _ln) "
         "ORDER BY IF(_rr, _lf, _rf), IF(_rr, _ls, _rs), IF(_rr, _ln, _rn)) - 1")
    return both.selectExpr("'+I' AS _op", *names, "IF(_rr, _rs, _ls) AS seq",
                           f"concat(IF(_rr, _rn, _ln), array(IF(_rr, {RIGHT}, {LEFT}), CAST({j} AS INT))) AS _n",
                           "IF(_rr, _rpt, _lpt) AS _pt")


# -- the reference: a replay per join key ---------------------------------------------------

class JoinFunction(Function):
    """Flink's ``StreamingJoinOperator`` for one key, its one state the key's ``_Join``
    (``make()``). A row is ``(_side, _op, seq, _n, _pt, _vl, _vr)``: a pair
    ``condition`` lets match (``_PAIRS``), or a message of one side."""

    def __init__(self, make, null_key: bool):
        super().__init__(make)
        self.null_key = null_key

    def process_element(self, row, ctx):
        op = self.function(ctx)
        side, kind, seq, n, pt, vl, vr = row
        if side == _PAIRS:
            op.allowed.add((_frozen(vl), _frozen(vr)))
            return
        output, values = ctx.output, vl if side == LEFT else vr
        values = tuple(values.values() if isinstance(values, dict) else values)   # the replay's dict, live a Row
        for j, (out, values) in enumerate(op.process(side, kind, values, pt, self.null_key)):
            output((out, *values, seq, [*n, side, j], pt))


def _replayed(spec: _Spec) -> DataFrame:
    """Both inputs spread over ``options.tasks`` tasks by key, sorted by key and arrival,
    each key replayed by ``JoinFunction``; the pairs ``condition`` lets match (if any)
    come first in each key."""
    keys, options = spec.keys, spec.options
    left, right = spec.sides()
    rows = left.unionByName(right, allowMissingColumns=True)
    if spec.condition is not None:
        pairs = spec.pairs(left, right).selectExpr(f"{_PAIRS} AS _side", "CAST(NULL AS STRING) AS _op", *keys,
                                                   "CAST(-1 AS BIGINT) AS seq", "CAST(array() AS ARRAY<INT>) AS _n",
                                                   "CAST(NULL AS BIGINT) AS _pt", "_vl", "_vr")
        rows = rows.unionByName(pairs)
    outer = _OUTER[spec.how]
    unique = [_unique_key(spec.left), _unique_key(spec.right)]
    ttl, has_condition = options.ttl_ms, spec.condition is not None
    width = [len(spec.left.columns), len(spec.right.columns)]

    def make():
        return _Join(outer, unique, ttl, width, None if not has_condition else set())

    operator, columns = (lambda key: JoinFunction(make, any(k is None for k in key))), \
        ["_side", "_op", "seq", "_n", "_pt", "_vl", "_vr"]
    if rows.isStreaming:   # live: the pairs of a batch come from Spark's stream-stream join, seq -1: first
        return per_key(rows, keys, operator, _output_schema(spec), columns, order=("seq", "_n", "_side"))
    return replay(spread(rows, keys, options.tasks, "seq", "_n", "_side"), keys, operator, _output_schema(spec),
                  columns)


def _unique_key(log: Changelog) -> list | None:
    """The places of ``log``'s upsert key in its rows (Flink's ``JoinInputSideSpec`` unique
    key: state by it, a ``+U`` replacing the row of its key), or None."""
    return None if log.upsert_key is None else [log.columns.index(c) for c in log.upsert_key]


_NAN = object()


def _frozen(value):
    """``value`` (a row as Arrow gives it) as a hashable value equal for equal rows (NaN
    equals NaN, as Flink compares rows by their bytes)."""
    if isinstance(value, dict):
        return tuple(_frozen(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return _NAN
    return value


class _State:
    """One side's rows of one join key, in order of first arrival: ``id -> [row, times,
    matches, written]`` (``id``: the row, or its upsert key values; ``matches``: the number
    of matching rows on the other side, kept for an outer side)."""

    def __init__(self, unique: list | None, ttl: int):
        self.rows, self.unique, self.ttl = {}, unique, ttl

    def _id(self, row: tuple):
        return _frozen(row) if self.unique is None else tuple(_frozen(row[i]) for i in self.unique)

    def _live(self, key, now):
        entry = self.rows.get(key)
        if self.ttl > 0 and now is None:
            raise KitError(f"state TTL ({self.ttl} ms) runs on processing time, but an input message has none "
                           "(_pt NULL): give the streams proctime= or merge(..., clock=Clock(...))")
        if entry is not None and self.ttl > 0 and entry[3] + self.ttl <= now:
            del self.rows[key]
            return None
        return entry

    def add(self, row: tuple, matches: int, now) -> None:
        key = self._id(row)
        entry = self._live(key, now)
        if entry is None or self.unique is not None:
            self.rows[key] = [row, 1, matches, now]
        else:
            entry[1] += 1
            entry[2:] = [matches, now]

    def retract(self, row: tuple, now) -> None:
        key = self._id(row)
        entry = self._live(key, now)
        if entry is None:
            return
        if self.unique is None and entry[1] > 1:
            entry[1] -= 1
            entry[3] = now
        else:
            del self.rows[key]

    def set_matches(self, row: tuple, matches: int, now) -> None:
        key = self._id(row)
        entry = self._live(key, now)
        if entry is None:       # Flink: "compatible for state ttl"
            self.rows[key] = [row, 1, matches, now]
        else:
            entry[2:] = [matches, now]

    def entries(self, now) -> list:
        """``(row, matches)`` of each row held, as many times as it is held (live rows only)."""
        out = []
        for key in list(self.rows):
            entry = self._live(key, now)
            if entry is not None:
                out.extend([(entry[0], entry[2])] * entry[1])
        return out


class _Join:
    """Flink's ``StreamingJoinOperator.processElement`` for one join key."""

    def __init__(self, outer: tuple, unique: list, ttl: int, width: list, allowed: set | None):
        self.outer, self.width, self.allowed = outer, width, allowed
        self.state = [_State(unique[LEFT], ttl), _State(unique[RIGHT], ttl)]

    def _joined(self, side: int, row: tuple, other: tuple) -> tuple:
        return row + other if side == LEFT else other + row

    def _padded(self, side: int, row: tuple) -> tuple:
        nulls = (None,) * self.width[1 - side]
        return row + nulls if side == LEFT else nulls + row

    def _matches(self, side: int, row: tuple, now, null_key: bool) -> list:
        if null_key:
            return []
        entries = self.state[1 - side].entries(now)
        if self.allowed is None:
            return entries
        mine = _frozen(row)
        return [(o, m) for o, m in entries
                if ((mine, _frozen(o)) if side == LEFT else (_frozen(o), mine)) in self.allowed]

    def process(self, side: int, op: str, row: tuple, now, null_key: bool) -> list:
        """The ``(kind, values)`` one input message emits, in Flink's order."""
        other_side = 1 - side
        mine, theirs = self.state[side], self.state[other_side]
        input_outer, other_outer = self.outer[side], self.outer[other_side]
        out = []
        if op in ADDS:
            if not input_outer:
                mine.add(row, -1, now)
            matches = self._matches(side, row, now, null_key)
            if input_outer and not matches:
                out.append((INSERT, self._padded(side, row)))
            for other, count in matches:
                if other_outer:
                    if count == 0:
                        out.append((DELETE, self._padded(other_side, other)))
                    theirs.set_matches(other, count + 1, now)
                out.append((INSERT if input_outer or other_outer else op, self._joined(side, row, other)))
            if input_outer:
                mine.add(row, len(matches), now)
            return out
        mine.retract(row, now)
        matches = self._matches(side, row, now, null_key)
        if input_outer and not matches:
            out.append((DELETE, self._padded(side, row)))
        for other, count in matches:
            out.append((DELETE if input_outer else op, self._joined(side, row, other)))
            if other_outer:
                if count == 1:
                    out.append((INSERT, self._padded(other_side, other)))
                theirs.set_matches(other, count - 1, now)
        return out
