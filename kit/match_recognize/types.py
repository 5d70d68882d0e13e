"""The Spark type of each MEASURES expression, following Flink SQL's typing rules.

Spark needs the output schema before a partition is matched, so the types come from the
expressions and the input schema alone:

=====================================  ==========================================
expression                             type
=====================================  ==========================================
``A.price``, ``FIRST/LAST/PREV/NEXT``  the column's type
``COUNT(*)``                           BIGINT
``SUM(x)``                             the type of ``x``; DECIMAL(38, s)
``AVG(x)``                             ``flink-2.3``: the type of ``x`` (integers: truncated);
                                       ``flink`` (as documented) and ``standard``: DOUBLE
                                       for integers; DECIMAL(38, max(6, s)) (``standard``:
                                       the type of ``x``), else the type of ``x``
``MIN/MAX(x)``                         the type of ``x``
``a + b`` etc.                         the wider numeric type (INT / INT is INT, as in SQL);
                                       DECIMAL with FLOAT or DOUBLE: DOUBLE; DECIMAL with
                                       DECIMAL: Flink's DECIMAL(p, s) of the operator; a
                                       DECIMAL divided: as if the integer were DECIMAL(n, 0)
comparisons, AND/OR/NOT, IS NULL       BOOLEAN
``CLASSIFIER()``                       STRING
``MATCH_NUMBER()``                     BIGINT
``MATCH_ROWTIME()``, ``MATCH_PROCTIME()``  TIMESTAMP
=====================================  ==========================================

>>> from pyspark.sql import types as T
>>> schema = T.StructType([T.StructField("price", T.LongType())])
>>> measure_type(Aggregate("AVG", Column("price", "A")), schema, "flink-2.3").simpleString()
'bigint'

A DECIMAL that meets a FLOAT or DOUBLE in arithmetic or a comparison is cast to DOUBLE by
``coerce`` at planning, as Flink's planner casts it: on the workers a DECIMAL is Python's
``Decimal``, which does not mix with a float.
"""

from __future__ import annotations

import dataclasses
import re

from pyspark.sql import types as T

from ..errors import KitError
from .errors import MatchRecognizeError
from .format import to_sql
from .expressions import walk
from .spec import (Aggregate, Between, Binary, Call, Case, Cast, Classifier, Column, InList,
                   IsNull, Literal, MatchNumber, MatchProctime, MatchRowtime, Nav, Semantics,
                   Unary)

__all__ = ["measure_type", "spark_type", "check_types", "coerce", "coerce_spec", "MeasureTypeError"]


class MeasureTypeError(KitError):
    """A measure whose type cannot be known: names the expression and what to do."""


_NUMERIC_ORDER = [T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType,
                  T.FloatType, T.DoubleType]
_SIMPLE = {
    "TINYINT": T.ByteType(), "SMALLINT": T.ShortType(), "INT": T.IntegerType(),
    "INTEGER": T.IntegerType(), "BIGINT": T.LongType(), "FLOAT": T.FloatType(),
    "REAL": T.FloatType(), "DOUBLE": T.DoubleType(), "BOOLEAN": T.BooleanType(),
    "STRING": T.StringType(), "VARCHAR": T.StringType(), "CHAR": T.StringType(),
    "DATE": T.DateType(), "TIMESTAMP": T.TimestampType(), "TIMESTAMP_LTZ": T.TimestampType(),
    "NULL": T.NullType(), "INTERVAL": T.LongType(),
}
_BOOLEAN_OPS = {"=", "<>", "!=", "<", "<=", ">", ">=", "AND", "OR"}
_DOUBLE_FUNCS = {"POWER", "SQRT", "EXP", "LN", "LOG10", "LOG"}
_STRING_FUNCS = {"UPPER", "LOWER", "CONCAT", "TRIM", "LTRIM", "RTRIM", "SUBSTRING", "SUBSTR", "REPLACE",
                 "REVERSE", "CONCAT_WS"}
_INT_FUNCS = {"CHAR_LENGTH", "LENGTH", "CHARACTER_LENGTH"}
_BOOLEAN_FUNCS = {"LIKE"}


def spark_type(name: str) -> T.DataType:
    """A Flink SQL type name (``DECIMAL(10, 2)``, ``TIMESTAMP(3)``, ``VARCHAR(20)``) as a Spark type."""
    text = name.strip().upper()
    m = re.fullmatch(r"DECIMAL\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)", text)
    if m:
        return T.DecimalType(int(m.group(1)), int(m.group(2) or 0))
    if text in ("DECIMAL", "NUMERIC"):
        return T.DecimalType(10, 0)
    base = re.sub(r"\s*\(.*?\)", "", text).replace(" WITH LOCAL TIME ZONE", "_LTZ").strip()
    if base in _SIMPLE:
        return _SIMPLE[base]
    raise MeasureTypeError(f"unknown type {name!r}; use one of {sorted(_SIMPLE)} or DECIMAL(p, s)")


def _rank(t: T.DataType) -> int:
    for i, cls in enumerate(_NUMERIC_ORDER):
        if isinstance(t, cls):
            return i
    return -1


def _wider(a: T.DataType, b: T.DataType) -> T.DataType:
    if isinstance(a, T.NullType):
        return b
    if isinstance(b, T.NullType) or a == b:
        return a
    if _rank(a) < 0 or _rank(b) < 0:
        return a
    if isinstance(a, T.DecimalType) and isinstance(b, T.DecimalType):
        scale = max(a.scale, b.scale)
        return T.DecimalType(min(38, max(a.precision - a.scale, b.precision - b.scale) + scale + 1), scale)
    return a if _rank(a) >= _rank(b) else b


_INTEGER_DIGITS = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 19}


def _decimal_of(t: T.DataType) -> T.DecimalType:
    """``t`` as a DECIMAL: an integer type is DECIMAL(its digits, 0)."""
    return t if isinstance(t, T.DecimalType) else T.DecimalType(_INTEGER_DIGITS[type(t)], 0)


def _decimal_result(op: str, a: T.DecimalType, b: T.DecimalType) -> T.DecimalType:
    """Flink's type of ``a op b`` for two DECIMALs (``LogicalTypeMerging``): + and -
    ``s = max(s1, s2), p = max(p1 - s1, p2 - s2) + s + 1``; * ``s = s1 + s2, p = p1 + p2 + 1``;
    / ``s = max(6, s1 + p2 + 1), p = p1 - s1 + s2 + s``; % ``s = max(s1, s2),
    p = min(p1 - s1, p2 - s2) + s``. Past 38 digits the precision is 38 and the scale
    gives way down to ``min(s, 6)``."""
    (p1, s1), (p2, s2) = (a.precision, a.scale), (b.precision, b.scale)
    if op == "*":
        p, s = p1 + p2 + 1, s1 + s2
    elif op == "/":
        s = max(6, s1 + p2 + 1)
        p = p1 - s1 + s2 + s
    elif op == "%":
        s = max(s1, s2)
        p = min(p1 - s1, p2 - s2) + s
    else:
        s = max(s1, s2)
        p = max(p1 - s1, p2 - s2) + s + 1
    if p <= 38:
        return T.DecimalType(p, s)
    return T.DecimalType(38, max(38 - (p - s), min(s, 6)))


def _arithmetic(op: str, a: T.DataType, b: T.DataType) -> T.DataType:
    """The type of ``a op b`` for numbers ``a`` and ``b`` (see the table above)."""
    decimals = [isinstance(t, T.DecimalType) for t in (a, b)]
    if not any(decimals):
        return _wider(a, b)
    if any(isinstance(t, (T.FloatType, T.DoubleType)) for t in (a, b)):
        return T.DoubleType()
    if all(decimals) or op == "/":
        return _decimal_result(op, _decimal_of(a), _decimal_of(b))
    return _wider(a, b)


def _literal_type(lit: Literal) -> T.DataType:
    if lit.type == "DECIMAL":
        digits = str(lit.value).lstrip("-")
        scale = len(digits.split(".")[1]) if "." in digits else 0
        return T.DecimalType(max(len(digits.replace(".", "")), 1), scale)
    return spark_type(lit.type)


def measure_type(expr, schema: T.StructType, semantics: str = "flink",
                 aggregates: dict | None = None) -> T.DataType:
    """The Spark type of ``expr`` over rows of ``schema``."""
    def of(e):
        return measure_type(e, schema, semantics, aggregates)

    if isinstance(expr, Column):
        if expr.name not in schema.fieldNames():
            raise MeasureTypeError(f"column {expr.name!r} is not in the input; columns are {schema.fieldNames()}")
        return schema[expr.name].dataType
    if isinstance(expr, Literal):
        return _literal_type(expr)
    if isinstance(expr, (Nav, Semantics)):
        return of(expr.arg)
    if isinstance(expr, Aggregate):
        func = expr.func.upper()
        if func == "COUNT":
            return T.LongType()
        if func in ("MAX_BY", "MIN_BY") and isinstance(expr.arg, tuple) and len(expr.arg) == 2:
            return of(expr.arg[0])
        if func in ("ARBITRARY", "ANY_VALUE"):
            return of(expr.arg)
        if func == "ARRAY_AGG":
            return T.ArrayType(of(expr.arg), True)
        if func not in ("SUM", "AVG", "MIN", "MAX"):
            agg = (aggregates or {}).get(expr.func) or (aggregates or {}).get(func)
            if agg is None or not getattr(agg, "result_type", None):
                raise MeasureTypeError(
                    f"user aggregate {expr.func} needs a result_type attribute (a Spark DDL type "
                    "such as 'DOUBLE') so the output schema is known")
            return spark_type(agg.result_type)
        arg = of(expr.arg)
        if func in ("MIN", "MAX"):
            return arg
        integral = isinstance(arg, T.IntegralType)
        if isinstance(arg, T.DecimalType) and (func == "SUM" or semantics != "standard"):
            return T.DecimalType(38, arg.scale if func == "SUM" else max(6, arg.scale))   # result_type's
        if func == "SUM":
            return arg
        return arg if semantics == "flink-2.3" or not integral else T.DoubleType()
    if isinstance(expr, Binary):
        op = expr.op.upper()
        if op in _BOOLEAN_OPS:
            return T.BooleanType()
        if op == "||":
            return T.StringType()
        left, right = of(expr.left), of(expr.right)
        if isinstance(left, T.TimestampType) or isinstance(right, T.TimestampType):
            return T.TimestampType() if op in "+-" and not (
                isinstance(left, T.TimestampType) and isinstance(right, T.TimestampType)) else T.LongType()
        if op in _ARITHMETIC and _rank(left) >= 0 and _rank(right) >= 0:
            return _arithmetic(op, left, right)
        return _wider(left, right)
    if isinstance(expr, Unary):
        return T.BooleanType() if expr.op.upper() == "NOT" else of(expr.arg)
    if isinstance(expr, (IsNull, Between, InList)):
        return T.BooleanType()
    if isinstance(expr, Case):
        result = T.NullType()
        for _, then in expr.whens:
            result = _wider(result, of(then))
        if expr.else_ is not None:
            result = _wider(result, of(expr.else_))
        return result
    if isinstance(expr, Cast):
        return spark_type(expr.type)
    if isinstance(expr, Classifier):
        return T.StringType()
    if isinstance(expr, MatchNumber):
        return T.LongType()
    if isinstance(expr, (MatchRowtime, MatchProctime)):
        return T.TimestampType()
    if isinstance(expr, Call):
        func = expr.func.upper()
        if func in _DOUBLE_FUNCS:
            return T.DoubleType()
        if func in _STRING_FUNCS:
            return T.StringType()
        if func in _INT_FUNCS:
            return T.IntegerType()
        if func in _BOOLEAN_FUNCS:
            return T.BooleanType()
        if func == "ARRAY":
            element = T.NullType()
            for arg in expr.args:
                element = _wider(element, of(arg))
            return T.ArrayType(element, True)
        if func == "CONCAT_WS":
            return T.StringType()
        if func == "COALESCE":
            result = T.NullType()
            for arg in expr.args:
                result = _wider(result, of(arg))
            return result
        if expr.args:
            return of(expr.args[0])
    raise MeasureTypeError(f"cannot tell the type of measure {expr!r}; wrap it in CAST(... AS type)")


def check_types(spec, schema: T.StructType, semantics: str = "flink", aggregates: dict | None = None):
    """Raise, at planning, what Flink's planner rejects in DEFINE and MEASURES: a DEFINE that
    is not a BOOLEAN condition (``A AS A.price + 1``, ``A AS 'true'``) and operands of the
    wrong type (``A.price > 'abc'``, ``NOT A.price``, ``'x' * 2``), each at its line and
    column. An expression whose type cannot be told (a user aggregate without
    ``result_type``) is not judged."""
    def type_of(e):
        try:
            return measure_type(e, schema, semantics, aggregates)
        except KitError:
            return None

    for clause, exprs in (("DEFINE", [e for _, e in spec.define]), ("MEASURES", [m.expr for m in spec.measures])):
        for expr in exprs:
            walk(expr, lambda e, clause=clause: _check_operands(e, type_of, clause))
    for var, expr in spec.define:
        kind = _family(type_of(expr))
        if kind not in (None, "BOOLEAN"):
            hint = (f"compare it, e.g. {to_sql(expr)} > 0" if kind == "NUMERIC" else
                    "write a comparison or a predicate (=, <, IS NULL, LIKE ...)")
            raise MatchRecognizeError("DEFINE", f"the condition of {var}, {to_sql(expr)}, is "
                                                f"{_name(type_of(expr))}, not BOOLEAN: {hint}", _start(expr))


_ARITHMETIC = {"+", "-", "*", "/", "%"}
_COMPARISONS = {"=", "<>", "!=", "<", "<=", ">", ">="}


def coerce_spec(spec, schema: T.StructType, semantics: str = "flink", aggregates: dict | None = None):
    """``spec`` with its DEFINE and MEASURES expressions through ``coerce``."""
    def fix(e):
        return coerce(e, schema, semantics, aggregates)
    return dataclasses.replace(spec, define=tuple((var, fix(e)) for var, e in spec.define),
                               measures=tuple(dataclasses.replace(m, expr=fix(m.expr)) for m in spec.measures))


def coerce(expr, schema: T.StructType, semantics: str = "flink", aggregates: dict | None = None):
    """``expr`` with every DECIMAL operand of arithmetic, a comparison, BETWEEN or IN cast to
    DOUBLE where another operand is FLOAT or DOUBLE (a DECIMAL literal becomes a DOUBLE one),
    as Flink's planner casts it: ``A.price + A.ratio`` (DECIMAL, DOUBLE) is
    ``CAST(A.price AS DOUBLE) + A.ratio``; and each SUM and AVG told its argument's type
    (``Aggregate.arg_type``; not under ``standard``): Flink adds in it (wrapped around). The
    types are told at planning, so the workers check nothing per row."""
    def type_of(e):
        try:
            return measure_type(e, schema, semantics, aggregates)
        except KitError:
            return None

    def fix(e):
        if isinstance(e, Aggregate) and e.func.upper() in ("SUM", "AVG") and semantics != "standard" \
                and isinstance(t := type_of(e.arg), T.NumericType):
            return dataclasses.replace(e, arg_type=t)    # Flink adds in that type
        if isinstance(e, Binary) and e.op in _ARITHMETIC | _COMPARISONS:
            left, right = _doubled((e.left, e.right), type_of)
            return dataclasses.replace(e, left=left, right=right)
        if isinstance(e, Between):
            arg, low, high = _doubled((e.arg, e.low, e.high), type_of)
            return dataclasses.replace(e, arg=arg, low=low, high=high)
        if isinstance(e, InList):
            arg, *items = _doubled((e.arg, *e.items), type_of)
            return dataclasses.replace(e, arg=arg, items=tuple(items))
        return e
    return _rewrite(expr, fix)


def _doubled(operands: tuple, type_of) -> tuple:
    """``operands``, the DECIMAL ones cast to DOUBLE when one of the others is FLOAT or DOUBLE."""
    types = [type_of(x) for x in operands]
    if not any(isinstance(t, (T.FloatType, T.DoubleType)) for t in types):
        return operands
    return tuple((Literal(None if x.value is None else float(x.value), "DOUBLE", x.pos)
                  if isinstance(x, Literal) else Cast(x, "DOUBLE", _start(x)))
                 if isinstance(t, T.DecimalType) else x for x, t in zip(operands, types))


def _rewrite(expr, fix):
    """``fix`` applied to every node of ``expr``, children first (tuples of nodes included)."""
    if isinstance(expr, (tuple, list)):
        return type(expr)(_rewrite(x, fix) for x in expr)
    if not dataclasses.is_dataclass(expr):
        return expr
    changes = {f.name: _rewrite(getattr(expr, f.name), fix) for f in dataclasses.fields(expr) if f.name != "pos"}
    return fix(dataclasses.replace(expr, **changes))


def _check_operands(e, type_of, clause):
    """Raise when node ``e`` compares operands of different kinds, or applies AND, OR, NOT
    or arithmetic to an operand that is not BOOLEAN, or NUMERIC (or TIMESTAMP)."""
    if isinstance(e, Binary) and e.op.upper() in ("AND", "OR") or isinstance(e, Unary) and e.op.upper() == "NOT":
        operands, allowed = (e.arg,) if isinstance(e, Unary) else (e.left, e.right), {"BOOLEAN"}
    elif isinstance(e, Binary) and e.op in _ARITHMETIC or isinstance(e, Unary) and e.op == "-":
        operands, allowed = (e.arg,) if isinstance(e, Unary) else (e.left, e.right), {"NUMERIC", "TIMESTAMP"}
    else:
        known = [(x, kind) for x in _compared(e) if (kind := _family(type_of(x))) is not None]
        for x, kind in known[1:]:
            if kind != known[0][1]:
                a = known[0][0]
                raise MatchRecognizeError(clause, f"cannot compare {to_sql(a)} ({_name(type_of(a))}) with "
                                                  f"{to_sql(x)} ({_name(type_of(x))}) in {to_sql(e)}: CAST "
                                                  "one side to the other's type", _start(e))
        return
    for x in operands:
        kind = _family(type_of(x))
        if kind is not None and kind not in allowed:
            raise MatchRecognizeError(clause, f"{e.op.upper()} needs {' or '.join(sorted(allowed))} operands, "
                                              f"not {to_sql(x)} ({_name(type_of(x))}), in {to_sql(e)}",
                                      _start(e))


def _compared(e) -> tuple:
    """The operands node ``e`` compares with one another (none if it compares nothing)."""
    if isinstance(e, Binary) and e.op in _COMPARISONS:
        return e.left, e.right
    if isinstance(e, Between):
        return e.arg, e.low, e.high
    if isinstance(e, InList):
        return (e.arg, *e.items)
    return ()


def _family(t) -> str | None:
    """The kind of values of type ``t`` that compare with one another; None for NULL or an
    unknown type (neither is judged)."""
    if t is None or isinstance(t, T.NullType):
        return None
    if isinstance(t, T.BooleanType):
        return "BOOLEAN"
    if isinstance(t, T.NumericType):
        return "NUMERIC"
    if isinstance(t, T.StringType):
        return "STRING"
    if isinstance(t, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return "TIMESTAMP"
    if isinstance(t, T.ArrayType):   # arrays compare when their items do
        return f"ARRAY<{_family(t.elementType)}>"
    return t.simpleString().upper()


def _name(t: T.DataType) -> str:
    """A Spark type by its Flink SQL name (``BIGINT``, ``STRING`` ...)."""
    names = {v.simpleString(): k for k, v in reversed(_SIMPLE.items())}
    return names.get(t.simpleString(), t.simpleString().upper())


def _start(expr):
    """The line and column where ``expr``'s text begins: the first position in it."""
    found = []
    walk(expr, lambda e: found.append(e.pos) if getattr(e, "pos", None) else None)
    return min(found, default=None)
