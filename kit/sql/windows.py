"""Flink SQL's window table-valued functions: ``TABLE(TUMBLE | HOP | CUMULATE | SESSION (...))``.

Each call in a FROM clause becomes a view of its input with three more columns,
``window_start``, ``window_end`` and ``window_time`` (``window_end - 1 ms``), one row per
window a row belongs to:

    TUMBLE(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' HOUR [, offset])
    HOP(TABLE t, DESCRIPTOR(c), slide, size [, offset])       size a multiple of slide
    CUMULATE(TABLE t, DESCRIPTOR(c), step, size [, offset])   size a multiple of step
    SESSION(TABLE t [PARTITION BY k], DESCRIPTOR(c), gap)     rows gap or less apart share

    user  cTime     window_start  window_end  window_time
    Mary  12:02:00  12:00:00      13:00:00    12:59:59.999

A window aggregation (the query groups by ``window_start``/``window_end``) over a
``kit.Stream`` drops what Flink's window operator drops: a row for a window whose end has
passed (``window_end - 1 ms <= watermark`` when the row arrived); those rows come back in
``result.late_rows`` with the window they missed. The TVF alone drops nothing, as in Flink.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .cursor import Cursor
from .expressions import ExpressionParser

__all__ = ["WindowCall", "find_windows", "windowed", "groups_by_window"]

_KINDS = {"TUMBLE": ("size",), "HOP": ("slide", "size"), "CUMULATE": ("step", "size"), "SESSION": ("gap",)}


@dataclass
class WindowCall:
    """One ``TABLE(KIND(TABLE table [PARTITION BY k], DESCRIPTOR(time), intervals...))``."""
    kind: str
    table: str
    time: str
    sizes: dict          # "size" / "slide" / "step" / "gap" -> ms
    offset: int
    partition: tuple
    table_token: object
    time_token: object
    partition_tokens: tuple = ()


def find_windows(query: str, tokens: list) -> dict:
    """{index of ``TABLE``: (index after the closing parenthesis, WindowCall)}."""
    found = {}
    for i, tok in enumerate(tokens[:-2]):
        nxt = tokens[i + 1]
        if tok.is_word("TABLE") and nxt.kind == "OP" and nxt.value == "(" and tokens[i + 2].is_word(*_KINDS):
            cur = Cursor(query, tokens, i)
            call = _parse(cur)
            found[i] = (cur.i, call)
    return found


def _parse(cur: Cursor) -> WindowCall:
    cur.expect("TABLE")
    cur.expect_op("(")
    kind_tok = cur.next()
    kind = kind_tok.value.upper()
    cur.expect_op("(")
    cur.expect("TABLE")
    table_tok = cur.identifier("a table name")
    partition = []
    if cur.accept("PARTITION"):
        if kind != "SESSION":
            raise cur.error(f"PARTITION BY is only allowed in SESSION windows, not {kind}", found=False)
        cur.expect("BY")
        names = [cur.identifier("a column name")]
        while cur.accept_op(","):
            if cur.at("DESCRIPTOR"):
                cur.i -= 1
                break
            names.append(cur.identifier("a column name"))
        partition = names
    cur.expect_op(",")
    cur.expect("DESCRIPTOR")
    cur.expect_op("(")
    time_tok = cur.identifier("the time column")
    cur.expect_op(")")
    sizes = {}
    for name in _KINDS[kind]:
        cur.expect_op(",")
        sizes[name] = _interval(cur, f"the {name}")
    offset = 0
    if kind != "SESSION" and cur.accept_op(","):
        offset = _interval(cur, "the offset", positive=False)
    cur.expect_op(")")
    cur.expect_op(")")
    _check(cur, kind, sizes, kind_tok)
    return WindowCall(kind, table_tok.value, time_tok.value, sizes, offset, tuple(t.value for t in partition),
                      table_tok, time_tok, tuple(partition))


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
    if kind == "HOP" and sizes["size"] % sizes["slide"]:
        raise cur.error(f"HOP window requires size to be an integral multiple of slide, but got size "
                        f"{sizes['size']} ms and slide {sizes['slide']} ms", tok, found=False)
    if kind == "CUMULATE" and sizes["size"] % sizes["step"]:
        raise cur.error(f"CUMULATE window requires size to be an integral multiple of step, but got size "
                        f"{sizes['size']} ms and step {sizes['step']} ms", tok, found=False)


def groups_by_window(tokens: list) -> bool:
    """Whether a GROUP BY of the query names ``window_start`` or ``window_end``."""
    grouping = False
    for k, tok in enumerate(tokens):
        if tok.is_word("GROUP") and tokens[k + 1].is_word("BY"):
            grouping = True
        elif tok.is_word("SELECT", "HAVING", "ORDER", "LIMIT", "WINDOW"):
            grouping = False
        elif grouping and tok.kind == "IDENT" and tok.value.lower() in ("window_start", "window_end"):
            return True
    return False


def windowed(df: DataFrame, call: WindowCall, time_is_timestamp: bool,
             drop_late: bool) -> tuple[DataFrame, Optional[DataFrame]]:
    """``df`` with its windows (see the module doc); and, when ``drop_late`` and ``df`` has a
    ``watermark`` column (a stream), the rows dropped as late, else None."""
    ts = F.unix_millis(F.col(call.time).cast("timestamp")) if time_is_timestamp else F.col(call.time).cast("long")
    out = df.withColumn("_kit_t", ts)
    t = F.col("_kit_t")
    if call.kind == "SESSION":
        gap = call.sizes["gap"]
        order = Window.partitionBy(*call.partition).orderBy("_kit_t")
        out = (out.withColumn("_kit_new", F.coalesce(t - F.lag(t).over(order) > gap, F.lit(True)).cast("int"))
                  .withColumn("_kit_s", F.sum("_kit_new").over(order.rowsBetween(Window.unboundedPreceding, 0))))
        session = Window.partitionBy(*call.partition, "_kit_s")
        out = (out.withColumn("_kit_start", F.min(t).over(session))
                  .withColumn("_kit_end", F.max(t).over(session) + gap).drop("_kit_new", "_kit_s"))
    else:
        if call.kind == "TUMBLE":
            step, size = call.sizes["size"], call.sizes["size"]
            starts = F.array(t - F.pmod(t - call.offset, F.lit(size)))
            ends = None
        elif call.kind == "HOP":
            step, size = call.sizes["slide"], call.sizes["size"]
            last = t - F.pmod(t - call.offset, F.lit(step))
            starts = F.transform(F.sequence(F.lit(0), F.lit(size // step - 1)), lambda k: last - k * step)
            ends = None
        else:   # CUMULATE: windows [start, start + k * step) of the size-long period holding t
            step, size = call.sizes["step"], call.sizes["size"]
            first = t - F.pmod(t - call.offset, F.lit(size))
            ends = F.transform(F.sequence(F.floor((t - first) / step).cast("long") + 1, F.lit(size // step)),
                               lambda k: first + k * step)
            starts = F.transform(ends, lambda e: first)
        if ends is None:
            out = out.withColumn("_kit_start", F.explode(starts)).withColumn("_kit_end", F.col("_kit_start") + size)
        else:
            out = (out.withColumn("_kit_w", F.explode(F.arrays_zip(starts.alias("s"), ends.alias("e"))))
                      .withColumn("_kit_start", F.col("_kit_w.s")).withColumn("_kit_end", F.col("_kit_w.e"))
                      .drop("_kit_w"))
    as_time = (lambda c: F.timestamp_millis(c)) if time_is_timestamp else (lambda c: c)
    columns = [c for c in df.columns if c not in ("window_start", "window_end", "window_time")]
    window_cols = [as_time(F.col("_kit_start")).alias("window_start"), as_time(F.col("_kit_end")).alias("window_end"),
                   F.timestamp_millis(F.col("_kit_end") - 1).alias("window_time")]
    late = None
    if drop_late and "watermark" in df.columns:
        wm = F.unix_millis(F.col("watermark").cast("timestamp")) if time_is_timestamp else F.col("watermark")
        is_late = F.coalesce(F.col("_kit_end") - 1 <= wm, F.lit(False))
        late = out.filter(is_late).select(*columns, *window_cols)
        out = out.filter(~is_late)
    return out.select(*columns, *window_cols), late


def time_is_timestamp(df: DataFrame, column: str) -> bool:
    return not isinstance(df.schema[column].dataType, T.IntegralType)


_AUX = {"_START": "window_start", "_END": "window_end", "_ROWTIME": "window_time"}


def find_group_window(query: str, tokens: list):
    """The legacy group window of a query, ``GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR), ...``
    (or ``HOP(time, slide, size)``, ``SESSION(time, gap)``): ``(WindowCall without its table,
    {index: (end index, replacement)})`` -- the call itself becomes ``window_start,
    window_end`` and ``TUMBLE_START(...)``, ``TUMBLE_END(...)``, ``TUMBLE_ROWTIME(...)``
    become ``window_start``, ``window_end``, ``window_time`` -- or None."""
    call, replace = None, {}
    grouping = False
    for i, tok in enumerate(tokens[:-1]):
        if tok.is_word("GROUP") and tokens[i + 1].is_word("BY"):
            grouping = True
            continue
        if tok.is_word("SELECT", "HAVING", "ORDER", "LIMIT"):
            grouping = False
        opens = tokens[i + 1].kind == "OP" and tokens[i + 1].value == "("
        word = tok.value.upper() if tok.kind in ("IDENT", "KEYWORD") and not getattr(tok, "quoted", False) else ""
        if not opens:
            continue
        if grouping and word in ("TUMBLE", "HOP", "SESSION") and not (i > 1 and tokens[i - 2].is_word("TABLE")):
            cur = Cursor(query, tokens, i + 2)
            time_tok = cur.identifier("the time column")
            sizes = {}
            for name in {"TUMBLE": ("size",), "HOP": ("slide", "size"), "SESSION": ("gap",)}[word]:
                cur.expect_op(",")
                sizes[name] = _interval(cur, f"the {name}")
            cur.expect_op(")")
            _check(cur, word, sizes, tok)
            found = WindowCall(word, "", time_tok.value, sizes, 0, (), None, time_tok)
            if call is not None and (call.kind, call.time, call.sizes) != (found.kind, found.time, found.sizes):
                raise cur.error("a query can group by one window only", tok, found=False)
            call = found
            replace[i] = (cur.i, "window_start, window_end")
        for base in ("TUMBLE", "HOP", "SESSION"):
            for suffix, column in _AUX.items():
                if word == base + suffix:
                    cur = Cursor(query, tokens, i + 1)
                    depth = 0
                    while True:
                        t = cur.next()
                        if t.kind == "OP" and t.value == "(":
                            depth += 1
                        elif t.kind == "OP" and t.value == ")":
                            depth -= 1
                            if depth == 0:
                                break
                        elif t.kind == "EOF":
                            raise cur.error(f"unclosed {word}(", tok, found=False)
                    replace[i] = (cur.i, column)
    if replace and call is None:
        first = min(replace)
        raise Cursor(query, tokens, first).error(
            f"{tokens[first].value.upper()} needs the query to GROUP BY its window, e.g. "
            "GROUP BY TUMBLE(cTime, INTERVAL '1' HOUR)", found=False)
    return (call, replace) if call is not None else None
