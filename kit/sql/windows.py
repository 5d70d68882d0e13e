"""Flink SQL's window table-valued functions and legacy group windows, on Spark.

A window TVF in a FROM clause becomes a view of its input with three more columns,
``window_start``, ``window_end`` and ``window_time`` (``window_end - 1 ms``), one row per
window a row belongs to (arguments by position, or by name: ``DATA => TABLE t``,
``TIMECOL => DESCRIPTOR(c)``, ``SIZE =>``, ``SLIDE =>``, ``STEP =>``, ``GAP =>``, ``OFFSET =>``):

    TUMBLE(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' HOUR [, offset])
    HOP(TABLE t, DESCRIPTOR(c), slide, size [, offset])
    CUMULATE(TABLE t, DESCRIPTOR(c), step, size [, offset])   size a multiple of step
    SESSION(TABLE t [PARTITION BY k], DESCRIPTOR(c), gap)

    user  cTime     window_start  window_end  window_time
    Mary  12:02:00  12:00:00      13:00:00    12:59:59.999

Windows, as Flink assigns them (``ts`` the row's time in ms, ``%`` non-negative):

- TUMBLE: ``[ts - (ts - offset) % size, ... + size)``;
- HOP: ``[s, s + size)`` for ``s = last, last - slide, ...`` while ``s > ts - size``, with
  ``last = ts - (ts - offset) % slide`` (a row is in no window when ``slide > size`` leaves
  a gap there);
- CUMULATE: ``[first, first + k * step)`` for each ``k`` in ``1 .. size / step`` whose window
  holds ``ts``, with ``first = ts - (ts - offset) % size``;
- SESSION: per partition, ``[t1, tn + gap)`` for rows in time order where each is at most
  ``gap`` after the one before (Flink merges windows that touch).

A window aggregation (a GROUP BY naming ``window_start`` and ``window_end``) over a
``kit.Stream`` drops what Flink's window operator drops: a row for a window that has fired
(``window_end - 1 ms <= watermark`` when the row arrived; HOP and CUMULATE judge each of the
row's windows apart); those rows come back in ``result.late_rows`` with the window they
missed. Over a stream, SESSION windows replay Flink's merging per partition in arrival
order: a window fires once the watermark passes its end, and a row that arrives after is
a new session (or late, if its own window has passed). The TVF alone drops nothing, as in
Flink. Flink's slicing operator needs HOP's size to be a multiple of slide for a window
aggregation; the TVF alone takes any.

Legacy group windows -- ``GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), user`` with
``TUMBLE_START``/``TUMBLE_END``/``TUMBLE_ROWTIME(cTime, INTERVAL '1' HOUR)``,
``HOP(time, slide, size)``, ``SESSION(time, gap)`` -- group by the same window views.

``find_windows`` and ``find_group_window`` read them from the query's tree
(``Statement.tree``: a window TVF is a table whose ``TABLE(...)`` call holds the window's
call, its ``TABLE t`` a ``dialect.TableArgument``); their errors name the user's line and
column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sqlglot import exp

from ..arrow import unquoted
from .. import sparksql

from .dialect import TableArgument, first_token, span
from .errors import error_at
from .intervals import interval_ms
from .statement import Statement

__all__ = ["WindowCall", "find_group_window", "find_windows", "groups_by_window", "validate", "windowed"]

# the interval parameters of each window, in positional order
_KINDS = {"TUMBLE": ("size",), "HOP": ("slide", "size"), "CUMULATE": ("step", "size"), "SESSION": ("gap",)}
_LEGACY = {"TUMBLE": ("size",), "HOP": ("slide", "size"), "SESSION": ("gap",)}
_AUX = {"_START": "window_start", "_END": "window_end", "_ROWTIME": "window_time"}


@dataclass
class WindowCall:
    """One window: ``TABLE(KIND(TABLE table [PARTITION BY k], DESCRIPTOR(time), intervals...))``
    or a legacy ``GROUP BY KIND(time, intervals...)`` (whose table the FROM clause names);
    ``*_at``: the offsets where the names are written, ``node`` the window TVF's table
    source in the tree (None for a legacy window)."""
    kind: str
    table: str
    time: str
    sizes: dict          # "size" / "slide" / "step" / "gap" -> ms
    offset: int
    partition: tuple
    table_at: int | None
    time_at: int
    partition_at: tuple = ()
    kind_at: int | None = field(default=None, repr=False)
    node: exp.Expression | None = field(default=None, repr=False)


def find_windows(statement: Statement) -> dict:
    """{offset of ``TABLE``: (offset after its closing parenthesis, WindowCall)} for each
    window TVF of the query's tree; a window aggregation over HOP needs size a multiple of slide.

    >>> q = "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL '1' HOUR)) w"
    >>> end, call = find_windows(Statement(q))[14]
    >>> q[14:end], call.sizes
    ("TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL '1' HOUR))", {'size': 3600000})
    """
    tree, found = statement.tree, {}
    calls = [] if tree is None else [node for node in tree.find_all(exp.Anonymous) if node.name.upper() == "TABLE"
                                     and node.expressions and isinstance(node.expressions[0], exp.Anonymous)
                                     and node.expressions[0].name.upper() in _KINDS]
    for table in sorted(calls, key=lambda node: node.meta["start"]):
        start, end = span(table)
        found[start] = (end, _parse(statement.text, table))
    if groups_by_window(statement):
        for _, call in found.values():
            if call.kind == "HOP" and call.sizes["size"] % call.sizes["slide"]:
                raise error_at(statement.text, "a window aggregation over HOP needs size to be an integral multiple "
                               f"of slide (Flink's slicing window operator), but got size {call.sizes['size']} ms "
                               f"and slide {call.sizes['slide']} ms", call.kind_at)
    return found


def _parse(text: str, table: exp.Anonymous) -> WindowCall:
    """``TABLE(KIND(args))``: arguments by position, then optionally by name (``NAME => value``)."""
    if len(table.expressions) > 1:
        comma = table.expressions[1].meta["comma"]
        raise error_at(text, "expected ')'", comma, comma)
    call = table.expressions[0]
    kind = call.name.upper()
    kind_at = call.meta["start"]
    names = ["data", "timecol", *_KINDS[kind]] + ([] if kind == "SESSION" else ["offset"])
    if not call.expressions:
        raise error_at(text, "expected 'TABLE'", call.meta["close"], call.meta["close"])
    args, count = {}, 0
    for arg in call.expressions:
        value = arg
        if isinstance(arg, exp.Kwarg):
            name, value = arg.this.name.lower(), arg.expression
            if name not in names:
                raise error_at(text, f"{kind} has no parameter {arg.this.name}; its parameters are "
                               + ", ".join(n.upper() for n in names), arg.this.meta["start"])
            if name in args:
                raise error_at(text, f"parameter {name.upper()} is given twice", arg.this.meta["start"])
        elif count >= len(names):
            raise error_at(text, f"{kind} takes at most {len(names)} arguments ("
                           + ", ".join(n.upper() for n in names) + ")", span(arg)[0])
        elif any(n in args for n in names[count:]):
            raise error_at(text, "a positional argument cannot follow a named one", *first_token(arg))
        else:
            name = names[count]
            count += 1
        args[name] = _argument(text, kind, name, value)
    for name in names[:-1] if kind != "SESSION" else names:
        if name not in args:
            raise error_at(text, f"{kind} needs its {name.upper()} argument ("
                           + ", ".join(n.upper() for n in names) + ")", kind_at)
    (table_name, table_at), partition = args["data"]
    time, time_at = args["timecol"]
    sizes = {name: args[name] for name in _KINDS[kind]}
    _check(text, kind, sizes, kind_at)
    return WindowCall(kind, table_name, time, sizes, args.get("offset", 0), tuple(c for c, _ in partition),
                      table_at, time_at, tuple(p for _, p in partition), kind_at, table.parent)


def _argument(text: str, kind: str, name: str, value: exp.Expression):
    """The value of parameter ``name``: ``TABLE t [PARTITION BY ...]`` -> ((name, offset),
    [(name, offset)...]), ``DESCRIPTOR(c)`` -> (name, offset), an interval -> ms."""
    if name == "data":
        if not isinstance(value, TableArgument):
            raise error_at(text, "expected 'TABLE'", *first_token(value))
        partition = value.args.get("partition_by")
        if partition is not None and kind != "SESSION":
            raise error_at(text, f"PARTITION BY is only allowed in SESSION windows, not {kind}",
                           value.meta["partition"])
        return _name(text, value.this, "a table name"), [_name(text, c, "a column name") for c in partition or ()]
    if name == "timecol":
        if not (isinstance(value, exp.Anonymous) and value.name.upper() == "DESCRIPTOR"):
            raise error_at(text, "expected 'DESCRIPTOR'", *first_token(value))
        if not value.expressions:
            raise error_at(text, "expected the time column", value.meta["close"], value.meta["close"])
        if len(value.expressions) > 1:
            raise error_at(text, "DESCRIPTOR of a window names one time column",
                           value.expressions[1].meta["comma"])
        return _name(text, value.expressions[0], "the time column")
    return _interval(text, value, f"the {name}", positive=name != "offset")


def _name(text: str, node: exp.Expression, what: str, then: str = "')'") -> tuple[str, int]:
    """(name, offset) of a table or column written as one name; a SqlError for another
    expression (at the dot of a qualified name: ``then`` was expected there)."""
    if not (isinstance(node, (exp.Table, exp.Column)) and isinstance(node.this, exp.Identifier)):
        raise error_at(text, f"expected {what}", *first_token(node))
    if len(node.parts) > 1:
        dot = text.index(".", node.parts[0].meta["end"] + 1)
        raise error_at(text, f"expected {then}", dot, dot)
    return node.name, node.this.meta["start"]


def _interval(text: str, node: exp.Expression, what: str, positive: bool = True) -> int:
    if not isinstance(node, exp.Interval):
        raise error_at(text, f"expected {what} as an INTERVAL such as INTERVAL '1' HOUR", *first_token(node))
    ms = interval_ms(node, text)
    if positive and ms <= 0:
        raise error_at(text, f"{what} must be a positive interval, got {ms} ms", node.meta["start"])
    return ms


def _check(text: str, kind: str, sizes: dict, at: int) -> None:
    if kind == "CUMULATE" and sizes["size"] % sizes["step"]:
        raise error_at(text, f"CUMULATE window requires size to be an integral multiple of step, but got size "
                       f"{sizes['size']} ms and step {sizes['step']} ms", at)


def groups_by_window(statement: Statement) -> bool:
    """Whether a GROUP BY of the query names both ``window_start`` and ``window_end``: Flink's
    window aggregation (grouping by one of them alone is a regular aggregation, which drops
    nothing).

    >>> groups_by_window(Statement("SELECT 1 FROM w GROUP BY window_start, window_end"))
    True
    """
    tree = statement.tree
    return tree is not None and any(
        {"window_start", "window_end"} <= {c.name.lower() for c in group.find_all(exp.Column)}
        for group in tree.find_all(exp.Group))


def validate(call: WindowCall, frame: DataFrame, stream, query: str) -> None:
    """SqlErrors for a DESCRIPTOR or PARTITION BY column ``frame`` lacks, and for a time column
    that is no time attribute (not TIMESTAMP or BIGINT epoch ms; for a ``kit.Stream`` ``stream``,
    not its event-time column)."""
    for col, at in [(call.time, call.time_at)] + list(zip(call.partition, call.partition_at)):
        if col not in frame.columns:
            raise error_at(query, f"column {col!r} is not in table {call.table}; columns are {list(frame.columns)}", at)
    dtype = frame.schema[call.time].dataType
    if not isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.IntegralType)):
        raise error_at(query, f"the DESCRIPTOR column {call.time!r} must be a time attribute (TIMESTAMP or BIGINT "
                       f"epoch milliseconds); it is {dtype.simpleString()}", call.time_at)
    if stream is not None and stream.time is None:
        flink_type = "BIGINT" if isinstance(dtype, T.IntegralType) else "TIMESTAMP(3)"
        raise error_at(query, f"Window aggregate can only be defined over a time attribute column, but "
                       f"{flink_type} encountered: stream {call.table} has no time attribute "
                       f"(kit.stream(df, time={call.time!r}, ...) makes {call.time!r} one)", call.time_at)
    if stream is not None and call.time != stream.time:
        raise error_at(query, f"the DESCRIPTOR column {call.time!r} must be a time attribute; stream {call.table} "
                       f"has event time {stream.time!r}", call.time_at)


def windowed(df: DataFrame, call: WindowCall, drop_late: bool) -> tuple[DataFrame, DataFrame | None]:
    """``df`` with its windows (see the module doc); and, when ``drop_late`` and ``df`` has a
    ``watermark`` column (a stream), the rows dropped as late, else None."""
    dtype = df.schema[call.time].dataType
    is_ts = not isinstance(dtype, T.IntegralType)
    millis = (lambda c: F.unix_millis(c.cast("timestamp"))) if is_ts else (lambda c: c.cast("long"))
    out = df.withColumn("_kit_t", millis(sparksql.col(call.time)))
    t = F.col("_kit_t")
    stream = drop_late and "watermark" in df.columns
    late = None
    if call.kind == "SESSION" and stream:
        out = _session_replay(out.withColumn("_kit_wm", millis(F.col("watermark"))), call)
    elif call.kind == "SESSION":
        gap = call.sizes["gap"]
        partition = [sparksql.col(c) for c in call.partition]
        order = Window.partitionBy(*partition).orderBy("_kit_t")
        out = (out.withColumn("_kit_new", F.coalesce(t - F.lag(t).over(order) > gap, F.lit(True)).cast("int"))
                  .withColumn("_kit_s", F.sum("_kit_new").over(order.rowsBetween(Window.unboundedPreceding, 0))))
        session = Window.partitionBy(*partition, "_kit_s")
        out = (out.withColumn("_kit_start", F.min(t).over(session))
                  .withColumn("_kit_end", F.max(t).over(session) + gap).drop("_kit_new", "_kit_s"))
    else:
        if call.kind == "TUMBLE":   # one window per row: no array to explode
            start = t - F.pmod(t - call.offset, F.lit(call.sizes["size"]))
            out = out.withColumn("_kit_start", start).withColumn("_kit_end", start + call.sizes["size"])
        else:
            out = out.withColumn("_kit_w", F.explode(_windows(call, t)))
            out = (out.withColumn("_kit_start", F.col("_kit_w.s")).withColumn("_kit_end", F.col("_kit_w.e"))
                   .drop("_kit_w"))
        if stream:
            out = out.withColumn("_kit_late", F.coalesce(F.col("_kit_end") - 1 <= millis(F.col("watermark")),
                                                         F.lit(False)))
    as_time = (lambda c: F.timestamp_millis(c).cast(dtype)) if is_ts else (lambda c: c)
    rowtime = dtype if is_ts else T.TimestampType()
    columns = [sparksql.col(c) for c in df.columns if c not in ("window_start", "window_end", "window_time")]
    window_cols = [as_time(F.col("_kit_start")).alias("window_start"), as_time(F.col("_kit_end")).alias("window_end"),
                   F.timestamp_millis(F.col("_kit_end") - 1).cast(rowtime).alias("window_time")]
    if stream:
        late = out.filter("_kit_late").select(*columns, *window_cols)
        out = out.filter(~F.col("_kit_late"))
    return out.select(*columns, *window_cols), late


def _windows(call: WindowCall, t):
    """The array of ``struct(s, e)`` windows of time ``t`` (ms) for HOP and CUMULATE."""
    off = call.offset
    if call.kind == "HOP":
        slide, size = call.sizes["slide"], call.sizes["size"]
        last = t - F.pmod(t - off, F.lit(slide))
        starts = F.transform(F.sequence(F.lit(0), F.lit(-(-size // slide) - 1)), lambda k: last - k * slide)
        starts = F.filter(starts, lambda s: s > t - size)
        return F.transform(starts, lambda s: F.struct(s.alias("s"), (s + size).alias("e")))
    step, size = call.sizes["step"], call.sizes["size"]
    first = t - F.pmod(t - off, F.lit(size))
    ends = F.sequence(F.floor((t - first) / step).cast("long") + 1, F.lit(size // step))
    return F.transform(ends, lambda k: F.struct(first.alias("s"), (first + k * step).alias("e")))


def _session_replay(df: DataFrame, call: WindowCall) -> DataFrame:
    """Session windows of a stream as Flink's merging window operator makes them: per
    partition, in arrival order (``seq``), windows fire when the watermark (``_kit_wm``)
    passes their end; a row's window ``[t, t + gap)`` merges with the pending windows it
    touches; if the merged window has fired already the row is late (``_kit_late``)."""
    gap = call.sizes["gap"]
    schema = T.StructType(df.schema.fields + [T.StructField("_kit_start", T.LongType()),
                                              T.StructField("_kit_end", T.LongType()),
                                              T.StructField("_kit_late", T.BooleanType())])

    def replay(pdf):
        pdf = pdf.sort_values("seq", kind="stable").reset_index(drop=True)
        times = pdf["_kit_t"].to_numpy(dtype="int64")
        marks = pdf["_kit_wm"].astype("Float64").to_numpy(dtype="float64", na_value=np.nan)
        start, end = times.copy(), times + gap
        late = np.zeros(len(pdf), dtype=bool)
        pending = []                                    # [start, end, rows]

        def close(window):
            for r in window[2]:
                start[r], end[r] = window[0], window[1]

        for i, (ts, wm) in enumerate(zip(times, marks)):
            if not np.isnan(wm):                        # the watermark fires what it passed
                for window in [w for w in pending if w[1] - 1 <= wm]:
                    close(window)
                    pending.remove(window)
            s, e, rows, rest = ts, ts + gap, [i], []
            for window in pending:
                if window[0] <= e and window[1] >= s:   # touching windows merge
                    s, e, rows = min(s, window[0]), max(e, window[1]), rows + window[2]
                else:
                    rest.append(window)
            if e - 1 <= wm:
                late[i] = True                          # its window [ts, ts + gap) has fired
            else:
                pending = rest + [[s, e, rows]]
        for window in pending:                          # end of input: the final watermark
            close(window)
        return pdf.assign(_kit_start=start, _kit_end=end, _kit_late=late)

    inner, names = unquoted(df)
    partition = [inner.columns[names.index(c)] for c in call.partition]
    grouped = inner if partition else inner.withColumn("_kit_all", F.lit(0))
    schema = T.StructType(grouped.schema.fields + schema.fields[len(df.schema.fields):])
    out = grouped.groupBy(*(partition or ["_kit_all"])).applyInPandas(replay, schema).drop("_kit_all")
    return out.toDF(*names, *out.columns[len(names):])


def find_group_window(statement: Statement):
    """The legacy group window of a query, ``GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), ...``
    (or ``HOP(time, slide, size)``, ``SESSION(time, gap)``): ``(WindowCall without its table,
    {offset: (end offset, replacement)})`` -- the call itself becomes ``window_start,
    window_end, window_time`` and ``TUMBLE_START(...)``, ``TUMBLE_END(...)``, ``TUMBLE_ROWTIME(...)``
    become ``window_start``, ``window_end``, ``window_time`` -- or None.

    >>> call, replace = find_group_window(Statement("SELECT COUNT(*) FROM t GROUP BY SESSION(t, INTERVAL '1' SECOND)"))
    >>> call.kind, call.sizes, replace
    ('SESSION', {'gap': 1000}, {32: (63, 'window_start, window_end, window_time')})
    """
    text, tree = statement.text, statement.tree
    call, replace, aux = None, {}, []
    for node in sorted(tree.find_all(exp.Anonymous) if tree is not None else (), key=lambda n: n.meta["start"]):
        word = node.name.upper()
        start, end = span(node)
        if word in _LEGACY and isinstance(node.parent, exp.Group):
            found = _legacy_args(text, node, word)
            if call is not None and (call.kind, call.time, call.sizes) != (found.kind, found.time, found.sizes):
                raise error_at(text, "a query can group by one window only", start)
            call = found
            replace[start] = (end, "window_start, window_end, window_time")
        base, _, suffix = word.partition("_")
        if base in _LEGACY and "_" + suffix in _AUX:
            aux.append((node, _legacy_args(text, node, base)))
            replace[start] = (end, _AUX["_" + suffix])
    if replace and call is None:
        first = aux[0][0]
        raise error_at(text, f"{first.name.upper()} needs the query to GROUP BY its window, e.g. "
                       "GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR)", first.meta["start"])
    for node, used in aux:
        if (used.kind, used.time, used.sizes) != (call.kind, call.time, call.sizes):
            raise error_at(text, f"{node.name.upper()}(...) must name the window the query groups by, "
                           f"{_describe(call)}", node.meta["start"])
    return (call, replace) if call is not None else None


def _legacy_args(text: str, node: exp.Anonymous, kind: str) -> WindowCall:
    """``KIND(time, intervals...)``, a legacy group window's call or its ``KIND_START(...)``."""
    args, close = node.expressions, node.meta["close"]
    if not args:
        raise error_at(text, "expected the time column", close, close)
    time, time_at = _name(text, args[0], "the time column", then="','")
    sizes = {}
    for k, name in enumerate(_LEGACY[kind], 1):
        if k >= len(args):
            raise error_at(text, "expected ','", close, close)
        sizes[name] = _interval(text, args[k], f"the {name}")
    if len(args) > len(_LEGACY[kind]) + 1:
        comma = args[len(_LEGACY[kind]) + 1].meta["comma"]
        raise error_at(text, "expected ')'", comma, comma)
    _check(text, kind, sizes, node.meta["start"])
    return WindowCall(kind, "", time, sizes, 0, (), None, time_at, (), node.meta["start"])


def _describe(call: WindowCall) -> str:
    sizes = ", ".join(f"{name} {ms} ms" for name, ms in call.sizes.items())
    return f"{call.kind}({call.time}, {sizes})"
