"""MATCH_RECOGNIZE in the JVM: the settings of ``kit/jvm/Matcher.java`` for a query it runs.

The matcher in Python (``flink.run_blocks``, generated per pattern) is most of a large
query's time: a row costs a few Python bytecodes per partial match. ``Matcher`` runs the
same NFA (``flink.compile_nfa``'s states, ``flink.NFA``'s steps, AFTER MATCH and the step
budget) in Java, over the task's rows as Spark sorted them, with no Python worker. It takes
Flink's semantics (documented or 2.3), WITHIN included, DEFINE conditions made of the
current row's and FIRST/LAST's columns (numbers, strings, booleans), literals, ``+ - *``,
comparisons, AND, OR, NOT and IS [NOT] NULL, and MEASURES that are FIRST/LAST of a column
(``v.col`` being ``LAST(v.col)``) of the column's own type, or MATCH_ROWTIME(); ``settings``
gives None for anything else, and the query runs in Python. Property tests keep the two
equal (``tests/test_mr_jvm.py``).

    PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)      ->  states=0:1:-2:0:0|1:2:-2:0:0|1:2:3:1:0|2:-1:-2:0:0
    (element:take:proceed:not_take:ends; PRICE_DOWN+ is one mandatory state, then its loop)
    DEFINE PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
                                                  ->  define=|...|R2 A1,1,2 >   (START_ROW: none)
"""

from __future__ import annotations

import math
from decimal import Decimal

from pyspark.sql import types as T

from .flink import FINAL, reaches_final, compile_nfa, default_after_match, validate
from .spec import Binary, Column, IsNull, Literal, MatchRowtime, Nav, Semantics, Unary

__all__ = ["settings"]

_COMPARE = {"=": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_NUMBERS = (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType)
_MEASURED = _NUMBERS + (T.StringType, T.BooleanType, T.TimestampType, T.TimestampNTZType)
_TIMES = (T.TimestampType, T.TimestampNTZType, T.LongType, T.IntegerType, T.ShortType, T.ByteType)
_KEYS = (T.StringType, T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.BooleanType, T.DateType, T.TimestampType,
         T.TimestampNTZType)   # PARTITION BY columns the JVM groups by
_AFTER = {"PAST LAST ROW": "P", "TO NEXT ROW": "N", "TO FIRST": "F", "TO LAST": "L"}


class _Outside(Exception):
    """The query leaves what ``Matcher`` runs."""


def settings(spec, semantics: str, schema: T.StructType, partition_by: list, measure_types: list,
             step_budget: int | None, rowtime: str | None = None) -> str | None:
    """``Matcher``'s settings for ``spec`` (checked and coerced) over rows of ``schema`` (the
    sorted input: PARTITION BY, the columns read, arrival), or None when it leaves the subset
    the module docstring names. ``measure_types``: each measure's output type; ``rowtime``:
    WITHIN's time column (else ORDER BY's first), as ``matcher.Partition`` takes it."""
    if semantics not in ("flink", "flink-2.3"):
        return None
    elements = validate(spec, semantics)
    index = {var: k for k, (var, *_) in enumerate(elements)}
    try:
        keys = [_field(schema, c) for c in partition_by]
        if not all(isinstance(schema[k].dataType, _KEYS) for k in keys):
            raise _Outside
        define = dict(spec.define)
        programs = [" ".join(_Define(schema, index, var).truth(define[var])) if var in define else ""
                    for var, *_ in elements]
        measures = [_measure(schema, index, m.expr, dtype, rowtime) for m, dtype in zip(spec.measures, measure_types)]
        within = "-1:0:0"
        if spec.within_ms is not None:
            column = rowtime or (spec.order_by[0].column if spec.order_by else None)
            time = _field(schema, column) if column is not None else None
            if time is None or not isinstance(schema[time].dataType, _TIMES):
                raise _Outside
            within = f"{spec.within_ms}:{int(semantics == 'flink')}:{time}"
    except _Outside:
        return None
    states, start = compile_nfa(elements)
    table = "|".join(f"{index[var]}:{take}:{-2 if proceed in (None, FINAL) else proceed}:{int(not_take)}:"
                     f"{int(take != FINAL and reaches_final(states, take))}"
                     for var, take, proceed, not_take, _ in states)
    after = spec.after_match or default_after_match(semantics)
    kind = _AFTER[after.kind.upper()]
    return ";".join([f"keys={','.join(map(str, keys))}", f"states={table}", f"start={start}",
                     f"define={'|'.join(programs)}", f"measures={'|'.join(measures)}",
                     f"after={kind}:{index[after.var] if after.var is not None else -1}",
                     f"budget={-1 if step_budget is None else step_budget}", f"within={within}"])


def _field(schema: T.StructType, name: str) -> int:
    """The field ``name`` reads, as ``expressions.Env.column`` finds it: by name, else the first
    whose name is the same but for case."""
    names = schema.fieldNames()
    if name in names:
        return names.index(name)
    for i, n in enumerate(names):
        if n.lower() == name.lower():
            return i
    raise _Outside


def _measure(schema, index, expr, dtype, rowtime) -> str:
    """``A<element>,<n>,<field>`` (LAST) or ``B...`` (FIRST) for a measure of a column's value;
    MATCH_ROWTIME() of a TIMESTAMP time is the match's last row's (``A-1,0,<field>``)."""
    if isinstance(expr, MatchRowtime):
        column = expr.arg.name if isinstance(expr.arg, Column) else rowtime
        field = None if column is None else _field(schema, column)
        if field is None or schema[field].dataType != dtype or not isinstance(dtype, T.TimestampType):
            raise _Outside
        return f"A-1,0,{field}"
    if isinstance(expr, Column):
        expr = Nav("LAST", expr, 0)
    if not (isinstance(expr, Nav) and expr.kind.upper() in ("FIRST", "LAST") and isinstance(expr.arg, Column)
            and isinstance(expr.offset, int) and expr.offset >= 0):
        raise _Outside
    field = _field(schema, expr.arg.name)
    if not isinstance(schema[field].dataType, _MEASURED) or schema[field].dataType != dtype:
        raise _Outside
    var = -1 if expr.arg.var is None else index.get(expr.arg.var)
    if var is None:
        raise _Outside
    return f"{'A' if expr.kind.upper() == 'LAST' else 'B'}{var},{expr.offset},{field}"


class _Define:
    """A DEFINE condition of ``current`` as ``Matcher``'s postfix tokens, each node's kind
    (number, string, boolean) checked so that Java compares what Python compares."""

    def __init__(self, schema: T.StructType, index: dict, current: str):
        self.schema, self.index, self.current = schema, index, current

    def truth(self, e) -> list:
        tokens, kind = self.node(e)
        if kind not in ("bool", "null"):
            raise _Outside
        return tokens

    def node(self, e) -> tuple:
        if isinstance(e, Semantics) and e.kind.upper() == "RUNNING":
            return self.node(e.arg)
        if isinstance(e, Literal):
            return self.literal(e)
        if isinstance(e, Column):
            if e.var is None or e.var == self.current:
                field = _field(self.schema, e.name)
                return [f"R{field}"], self.kind(field)
            return self.nav("LAST", e, 0)
        if isinstance(e, Nav) and e.kind.upper() in ("FIRST", "LAST") and isinstance(e.arg, Column) \
                and isinstance(e.offset, int) and e.offset >= 0:
            return self.nav(e.kind.upper(), e.arg, e.offset)
        if isinstance(e, IsNull):
            tokens, _ = self.node(e.arg)
            return tokens + ["NOTNULL" if e.negated else "NULL"], "bool"
        if isinstance(e, Unary) and e.op in ("+", "-"):
            tokens, kind = self.node(e.arg)
            if kind not in ("number", "null"):
                raise _Outside
            return tokens + ["NEG"] * (e.op == "-"), "number"
        if isinstance(e, Binary) and e.op in ("+", "-", "*"):
            (a, ka), (b, kb) = self.node(e.left), self.node(e.right)
            if not {ka, kb} <= {"number", "null"}:
                raise _Outside
            return a + b + [e.op], "number"
        if isinstance(e, Unary) and e.op.upper() == "NOT":
            tokens, kind = self.node(e.arg)
            if kind not in ("bool", "null"):
                raise _Outside
            return tokens + ["NOT"], "bool"
        if isinstance(e, Binary) and e.op.upper() in ("AND", "OR"):
            return self.truth(e.left) + self.truth(e.right) + [e.op.upper()], "bool"
        if isinstance(e, Binary) and e.op in _COMPARE:
            (a, ka), (b, kb) = self.node(e.left), self.node(e.right)
            if "null" not in (ka, kb) and (ka != kb or (ka == "bool" and _COMPARE[e.op] not in ("=", "<>"))):
                raise _Outside
            return a + b + [_COMPARE[e.op]], "bool"
        raise _Outside

    def nav(self, kind: str, column: Column, offset: int) -> tuple:
        field = _field(self.schema, column.name)
        if column.var is None:
            var = -1
        elif column.var not in self.index:
            raise _Outside
        elif self.index[column.var] > self.index[self.current]:
            return ["N"], self.kind(field)   # a later variable: no rows yet
        else:
            var = self.index[column.var]
        return [f"{'A' if kind == 'LAST' else 'B'}{var},{offset},{field}"], self.kind(field)

    def kind(self, field: int) -> str:
        dtype = self.schema[field].dataType
        if isinstance(dtype, _NUMBERS):
            return "number"
        if isinstance(dtype, T.StringType):
            return "string"
        if isinstance(dtype, T.BooleanType):
            return "bool"
        raise _Outside

    @staticmethod
    def literal(e: Literal) -> tuple:
        v, t = e.value, e.type.upper()
        if v is None:
            return ["N"], "null"
        if isinstance(v, bool) and t == "BOOLEAN":
            return ["T" if v else "F"], "bool"
        if isinstance(v, str) and t in ("STRING", "VARCHAR", "CHAR"):
            return ["S" + v.encode().hex()], "string"
        if t in ("INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT") and isinstance(v, (int, Decimal)) \
                and int(v) == v and -2 ** 63 <= int(v) < 2 ** 63:
            return [f"I{int(v)}"], "number"
        if t in ("DOUBLE", "FLOAT") and isinstance(v, (int, float, Decimal)) and math.isfinite(float(v)):
            return [f"D{float(v)!r}"], "number"
        raise _Outside
