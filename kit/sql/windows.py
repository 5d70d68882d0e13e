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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .cursor import Cursor
from .errors import SqlError
from .expressions import ExpressionParser
from .statement import Statement

__all__ = ["WindowCall", "find_group_window", "find_windows", "groups_by_window", "validate", "windowed"]

# the interval parameters of each window, in positional order
_KINDS = {"TUMBLE": ("size",), "HOP": ("slide", "size"), "CUMULATE": ("step", "size"), "SESSION": ("gap",)}
_LEGACY = {"TUMBLE": ("size",), "HOP": ("slide", "size"), "SESSION": ("gap",)}
_AUX = {"_START": "window_start", "_END": "window_end", "_ROWTIME": "window_time"}


@dataclass
class WindowCall:
    """One window: ``TABLE(KIND(TABLE table [PARTITION BY k], DESCRIPTOR(time), intervals...))``
    or a legacy ``GROUP BY KIND(time, intervals...)`` (whose table the FROM clause names)."""
    kind: str
    table: str
    time: str
    sizes: dict          # "size" / "slide" / "step" / "gap" -> ms
    offset: int
    partition: tuple
    table_token: object
    time_token: object
    partition_tokens: tuple = ()
    kind_token: object = field(default=None, repr=False)


def find_windows(statement: Statement) -> dict:
    """{index of ``TABLE``: (index after the closing parenthesis, WindowCall)} for each
    window TVF of the query; a window aggregation over HOP needs size a multiple of slide."""
    query, tokens = statement.text, statement.tokens
    found = {}
    for i, tok in enumerate(tokens[:-2]):
        nxt = tokens[i + 1]
        if tok.is_word("TABLE") and nxt.kind == "OP" and nxt.value == "(" and tokens[i + 2].is_word(*_KINDS):
            cur = Cursor(query, tokens, i)
            call = _parse(cur)
            found[i] = (cur.i, call)
    if groups_by_window(tokens):
        for _, call in found.values():
            if call.kind == "HOP" and call.sizes["size"] % call.sizes["slide"]:
                raise Cursor(query, tokens).error(
                    "a window aggregation over HOP needs size to be an integral multiple of slide (Flink's "
                    f"slicing window operator), but got size {call.sizes['size']} ms and slide "
                    f"{call.sizes['slide']} ms", call.kind_token, found=False)
    return found


def _parse(cur: Cursor) -> WindowCall:
    """``TABLE(KIND(args))``: arguments by position, then optionally by name (``NAME => value``)."""
    cur.expect("TABLE")
    cur.expect_op("(")
    kind_tok = cur.next()
    kind = kind_tok.value.upper()
    cur.expect_op("(")
    names = ["data", "timecol", *_KINDS[kind]] + ([] if kind == "SESSION" else ["offset"])
    args, position = {}, 0
    while True:
        name_tok = None
        if cur.peek().kind in ("IDENT", "KEYWORD") and cur.peek(1).kind == "OP" and cur.peek(1).value == "=" \
                and cur.peek(2).kind == "OP" and cur.peek(2).value == ">":
            name_tok = cur.next()
            cur.i += 2
            name = name_tok.value.lower()
            if name not in names:
                raise cur.error(f"{kind} has no parameter {name_tok.value}; its parameters are "
                                + ", ".join(n.upper() for n in names), name_tok, found=False)
            if name in args:
                raise cur.error(f"parameter {name.upper()} is given twice", name_tok, found=False)
        elif any(n in args for n in names[position:]) or position >= len(names):
            if position >= len(names):
                raise cur.error(f"{kind} takes at most {len(names)} arguments ("
                                + ", ".join(n.upper() for n in names) + ")", found=False)
            raise cur.error("a positional argument cannot follow a named one")
        else:
            name = names[position]
            position += 1
        args[name] = _argument(cur, kind, name, name_tok)
        if not cur.accept_op(","):
            break
    cur.expect_op(")")
    cur.expect_op(")")
    for name in names[:-1] if kind != "SESSION" else names:
        if name not in args:
            raise cur.error(f"{kind} needs its {name.upper()} argument ("
                            + ", ".join(n.upper() for n in names) + ")", kind_tok, found=False)
    table_tok, partition = args["data"]
    sizes = {name: args[name] for name in _KINDS[kind]}
    _check(cur, kind, sizes, kind_tok)
    return WindowCall(kind, table_tok.value, args["timecol"].value, sizes, args.get("offset", 0),
                      tuple(t.value for t in partition), table_tok, args["timecol"], tuple(partition), kind_tok)


def _argument(cur: Cursor, kind: str, name: str, name_tok):
    """The value of parameter ``name``: ``TABLE t [PARTITION BY ...]`` -> (token, [tokens]),
    ``DESCRIPTOR(c)`` -> token, an interval -> ms."""
    if name == "data":
        cur.expect("TABLE")
        table_tok = cur.identifier("a table name")
        partition = []
        if cur.at("PARTITION"):
            if kind != "SESSION":
                raise cur.error(f"PARTITION BY is only allowed in SESSION windows, not {kind}", found=False)
            cur.next()
            cur.expect("BY")
            partition = [cur.identifier("a column name")]
            # PARTITION BY a, b: a comma followed by the next argument ends the list
            while cur.at_op(",") and not (cur.peek(1).is_word("DESCRIPTOR") or cur.peek(2).value == "="):
                cur.next()
                partition.append(cur.identifier("a column name"))
        return table_tok, partition
    if name == "timecol":
        cur.expect("DESCRIPTOR")
        cur.expect_op("(")
        time_tok = cur.identifier("the time column")
        if cur.at_op(","):
            raise cur.error("DESCRIPTOR of a window names one time column", found=False)
        cur.expect_op(")")
        return time_tok
    return _interval(cur, f"the {name}", positive=name != "offset")


def _interval(cur: Cursor, what: str, positive: bool = True) -> int:
    tok = cur.peek()
    if not cur.at("INTERVAL"):
        raise cur.error(f"expected {what} as an INTERVAL such as INTERVAL '1' HOUR")
    parser = ExpressionParser(cur.text, cur.tokens, cur.i)
    ms, _ = parser.interval()
    cur.i = parser.i
    if positive and ms <= 0:
        raise cur.error(f"{what} must be a positive interval, got {ms} ms", tok, found=False)
    return ms


def _check(cur: Cursor, kind: str, sizes: dict, tok) -> None:
    if kind == "CUMULATE" and sizes["size"] % sizes["step"]:
        raise cur.error(f"CUMULATE window requires size to be an integral multiple of step, but got size "
                        f"{sizes['size']} ms and step {sizes['step']} ms", tok, found=False)


def groups_by_window(tokens: list) -> bool:
    """Whether a GROUP BY of the query names both ``window_start`` and ``window_end``: Flink's
    window aggregation (grouping by one of them alone is a regular aggregation, which drops
    nothing)."""
    grouping, named = False, set()
    for k, tok in enumerate(tokens):
        if tok.is_word("GROUP") and tokens[k + 1].is_word("BY"):
            grouping, named = True, set()
        elif tok.is_word("SELECT", "FROM", "WHERE", "JOIN", "ON", "HAVING", "ORDER", "LIMIT", "WINDOW", "UNION"):
            grouping = False
        elif grouping and tok.kind == "IDENT" and tok.value.lower() in ("window_start", "window_end"):
            named.add(tok.value.lower())
            if len(named) == 2:
                return True
    return False


def validate(call: WindowCall, frame: DataFrame, stream, query: str) -> None:
    """SqlErrors for a DESCRIPTOR or PARTITION BY column ``frame`` lacks, and for a time column
    that is no time attribute (not TIMESTAMP or BIGINT epoch ms; for a ``kit.Stream`` ``stream``,
    not its event-time column)."""
    for col, tok in [(call.time, call.time_token)] + list(zip(call.partition, call.partition_tokens)):
        if col not in frame.columns:
            raise SqlError(f"column {col!r} is not in table {call.table}; columns are {list(frame.columns)}",
                           tok.line, tok.column, query)
    dtype = frame.schema[call.time].dataType
    tok = call.time_token
    if not isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.IntegralType)):
        raise SqlError(f"the DESCRIPTOR column {call.time!r} must be a time attribute (TIMESTAMP or BIGINT "
                       f"epoch milliseconds); it is {dtype.simpleString()}", tok.line, tok.column, query)
    if stream is not None and call.time != stream.time:
        raise SqlError(f"the DESCRIPTOR column {call.time!r} must be a time attribute; stream {call.table} "
                       f"has event time {stream.time!r}", tok.line, tok.column, query)


def windowed(df: DataFrame, call: WindowCall, drop_late: bool) -> tuple[DataFrame, DataFrame | None]:
    """``df`` with its windows (see the module doc); and, when ``drop_late`` and ``df`` has a
    ``watermark`` column (a stream), the rows dropped as late, else None."""
    dtype = df.schema[call.time].dataType
    is_ts = not isinstance(dtype, T.IntegralType)
    millis = (lambda c: F.unix_millis(c.cast("timestamp"))) if is_ts else (lambda c: c.cast("long"))
    out = df.withColumn("_kit_t", millis(F.col(call.time)))
    t = F.col("_kit_t")
    stream = drop_late and "watermark" in df.columns
    late = None
    if call.kind == "SESSION" and stream:
        out = _session_replay(out.withColumn("_kit_wm", millis(F.col("watermark"))), call)
    elif call.kind == "SESSION":
        gap = call.sizes["gap"]
        order = Window.partitionBy(*call.partition).orderBy("_kit_t")
        out = (out.withColumn("_kit_new", F.coalesce(t - F.lag(t).over(order) > gap, F.lit(True)).cast("int"))
                  .withColumn("_kit_s", F.sum("_kit_new").over(order.rowsBetween(Window.unboundedPreceding, 0))))
        session = Window.partitionBy(*call.partition, "_kit_s")
        out = (out.withColumn("_kit_start", F.min(t).over(session))
                  .withColumn("_kit_end", F.max(t).over(session) + gap).drop("_kit_new", "_kit_s"))
    else:
        out = out.withColumn("_kit_w", F.explode(_windows(call, t)))
        out = out.withColumn("_kit_start", F.col("_kit_w.s")).withColumn("_kit_end", F.col("_kit_w.e")).drop("_kit_w")
        if stream:
            out = out.withColumn("_kit_late", F.coalesce(F.col("_kit_end") - 1 <= millis(F.col("watermark")),
                                                         F.lit(False)))
    as_time = (lambda c: F.timestamp_millis(c).cast(dtype)) if is_ts else (lambda c: c)
    rowtime = dtype if is_ts else T.TimestampType()
    columns = [c for c in df.columns if c not in ("window_start", "window_end", "window_time")]
    window_cols = [as_time(F.col("_kit_start")).alias("window_start"), as_time(F.col("_kit_end")).alias("window_end"),
                   F.timestamp_millis(F.col("_kit_end") - 1).cast(rowtime).alias("window_time")]
    if stream:
        late = out.filter("_kit_late").select(*columns, *window_cols)
        out = out.filter(~F.col("_kit_late"))
    return out.select(*columns, *window_cols), late


def _windows(call: WindowCall, t):
    """The array of ``struct(s, e)`` windows of time ``t`` (ms) for TUMBLE, HOP, CUMULATE."""
    off = call.offset
    if call.kind == "TUMBLE":
        size = call.sizes["size"]
        start = t - F.pmod(t - off, F.lit(size))
        return F.array(F.struct(start.alias("s"), (start + size).alias("e")))
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

    grouped = df if call.partition else df.withColumn("_kit_all", F.lit(0))
    schema = T.StructType(grouped.schema.fields + schema.fields[len(df.schema.fields):])
    return grouped.groupBy(*(call.partition or ["_kit_all"])).applyInPandas(replay, schema).drop("_kit_all")


def find_group_window(statement: Statement):
    """The legacy group window of a query, ``GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), ...``
    (or ``HOP(time, slide, size)``, ``SESSION(time, gap)``): ``(WindowCall without its table,
    {index: (end index, replacement)})`` -- the call itself becomes ``window_start,
    window_end, window_time`` and ``TUMBLE_START(...)``, ``TUMBLE_END(...)``, ``TUMBLE_ROWTIME(...)``
    become ``window_start``, ``window_end``, ``window_time`` -- or None."""
    query, tokens = statement.text, statement.tokens
    call, replace, aux = None, {}, []
    grouping = False
    for i, tok in enumerate(tokens[:-1]):
        if tok.is_word("GROUP") and tokens[i + 1].is_word("BY"):
            grouping = True
            continue
        if tok.is_word("SELECT", "HAVING", "ORDER", "LIMIT"):
            grouping = False
        opens = tokens[i + 1].kind == "OP" and tokens[i + 1].value == "("
        word = tok.value.upper() if tok.kind in ("IDENT", "KEYWORD") and not tok.quoted else ""
        if not opens:
            continue
        if grouping and word in _LEGACY and not (i > 1 and tokens[i - 2].is_word("TABLE")):
            cur = Cursor(query, tokens, i + 2)
            found = _legacy_args(cur, word, tok)
            if call is not None and (call.kind, call.time, call.sizes) != (found.kind, found.time, found.sizes):
                raise cur.error("a query can group by one window only", tok, found=False)
            call = found
            replace[i] = (cur.i, "window_start, window_end, window_time")
        base, _, suffix = word.partition("_")
        if base in _LEGACY and "_" + suffix in _AUX:
            cur = Cursor(query, tokens, i + 2)
            aux.append((tok, _legacy_args(cur, base, tok)))
            replace[i] = (cur.i, _AUX["_" + suffix])
    if replace and call is None:
        first = min(replace)
        raise Cursor(query, tokens, first).error(
            f"{tokens[first].value.upper()} needs the query to GROUP BY its window, e.g. "
            "GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR)", found=False)
    for tok, used in aux:
        if (used.kind, used.time, used.sizes) != (call.kind, call.time, call.sizes):
            raise Cursor(query, tokens).error(
                f"{tok.value.upper()}(...) must name the window the query groups by, "
                f"{_describe(call)}", tok, found=False)
    return (call, replace) if call is not None else None


def _legacy_args(cur: Cursor, kind: str, tok) -> WindowCall:
    """``time, intervals...)`` of a legacy ``KIND(`` whose ``(`` is behind ``cur``."""
    time_tok = cur.identifier("the time column")
    sizes = {}
    for name in _LEGACY[kind]:
        cur.expect_op(",")
        sizes[name] = _interval(cur, f"the {name}")
    cur.expect_op(")")
    _check(cur, kind, sizes, tok)
    return WindowCall(kind, "", time_tok.value, sizes, 0, (), None, time_tok, (), tok)


def _describe(call: WindowCall) -> str:
    sizes = ", ".join(f"{name} {ms} ms" for name, ms in call.sizes.items())
    return f"{call.kind}({call.time}, {sizes})"
