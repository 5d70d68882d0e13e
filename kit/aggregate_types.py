"""Flink's built-in SUM and AVG: their result types and values, in Python and as Spark SQL.

Spark's batch SUM widens (the SUM of an INT is a BIGINT, of a DECIMAL(p, s) a
DECIMAL(p + 10, s)) and its AVG of an integer is a DOUBLE; Flink keeps the input's type and
computes in it, as Java does (measured on Flink 2.3: ``tests/golden/flink-2.3/types.json``)::

    function  TINYINT .. INT           BIGINT            FLOAT / DOUBLE  DECIMAL(p, s)
    SUM       the type, wrapped around  the same          the type        DECIMAL(38, s)
    AVG       the type: sum / n,        64-bit sum / n,   the type        DECIMAL(38, max(6, s)),
              truncated toward zero     truncated                         rounded HALF_UP
    COUNT BIGINT; MIN and MAX the column's type

    SUM(i) over INT 2147483647, 1  ->  -2147483648       AVG(i)  ->  1073741824 (a BIGINT sum)

That AVG is a group aggregate's and a window aggregate's (``AvgAggFunction``: the sum in a
BIGINT). A non-time OVER and a MATCH_RECOGNIZE measure are planned as ``$SUM0(x) / COUNT(x)``:
the sum wraps in the input's type before the division (``AVG`` of TINYINT 100, 100 is 100
in a window, -28 in an OVER).

``sum_sql`` and ``avg_sql`` write Flink's SUM and AVG of a group or a window over Spark's
own aggregates, for the SQL the kit hands to Spark.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["EXACT", "result_type", "wrap", "exact_average", "wrapped_sql", "long_sum_sql", "long_sum", "sum_sql",
           "sum_of_sql", "avg_sql", "avg_of_sql"]

EXACT = Context(prec=100)   # decimals of up to 38 digits, summed without rounding
_BITS = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}


def result_type(function: str, dtype: T.DataType) -> str:
    """Flink's result type of aggregate ``function`` over a column of ``dtype``, as Spark
    names it (the table of the module doc).

    >>> result_type("AVG", T.IntegerType()), result_type("SUM", T.DecimalType(10, 2))
    ('int', 'decimal(38,2)')
    """
    function = function.upper()
    if function == "COUNT":
        return "bigint"
    if function in ("SUM", "AVG") and isinstance(dtype, T.DecimalType):
        return f"decimal(38,{dtype.scale if function == 'SUM' else max(6, dtype.scale)})"
    return dtype.simpleString()


def wrap(v: int, dtype) -> int:
    """An integer in ``dtype``'s range as Java's arithmetic leaves it (wrapped around);
    ``v`` itself for a non-integer type.

    >>> wrap(200, T.ByteType()), wrap(2 ** 63, T.LongType())
    (-56, -9223372036854775808)
    """
    bits = _BITS.get(type(dtype))
    if bits is None:
        return v
    half = 1 << (bits - 1)
    return (v + half) % (1 << bits) - half


def exact_average(total, n: int, out):
    """Flink's AVG of exact values, ``total / n`` at its type ``out``: of integers the
    quotient truncated toward zero, of decimals rounded HALF_UP to ``out``'s scale.

    >>> exact_average(-15, 2, T.IntegerType()), exact_average(Decimal("9.15"), 3, T.DecimalType(38, 6))
    (-7, Decimal('3.050000'))
    """
    if isinstance(total, int):
        q = abs(total) // n
        return -q if total < 0 else q
    with localcontext(EXACT):
        return (total / n).quantize(Decimal(1).scaleb(-out.scale), ROUND_HALF_UP)


def wrapped_sql(value: str, out: T.DataType) -> str:
    """Spark SQL: integer ``value`` at TINYINT, SMALLINT or INT ``out`` as Java's arithmetic in
    that type leaves it (wrapped around), typed ``out``; ``value`` itself for a wider or
    non-integer ``out``."""
    bits = _BITS.get(type(out))
    if bits is None or bits == 64:
        return value
    half = 1 << (bits - 1)
    return f"CAST(pmod({value} + {half}, {1 << bits}) - {half} AS {out.simpleString()})"


def long_sum_sql(x: str, distinct: bool = False, summed=None) -> str:
    """Spark SQL: the SUM of BIGINT ``x`` wrapped around at 64 bits as Java's long (Spark's
    own SUM fails past the range): two exact BIGINT sums, of the high and the low 32 bits of
    each value, joined in DECIMAL(38, 0); a DISTINCT sum adds in DECIMAL(38, 0).
    ``summed(part)``: the SUM of a part (``sum(part)``; a running sum: ``sum(...) OVER w``)."""
    summed = summed or (lambda part: f"sum({part})")
    total = f"sum(DISTINCT CAST({x} AS DECIMAL(38, 0)))" if distinct else \
        f"CAST({summed(f'shiftright({x}, 32)')} AS DECIMAL(38, 0)) * 4294967296 + {summed(f'({x} & 4294967295)')}"
    return f"CAST(pmod({total} + {1 << 63}, {1 << 64}) - {1 << 63} AS BIGINT)"


def long_sum(x: Column, over=None) -> Column:
    """``long_sum_sql`` as a Column (``over``: a function that puts each SUM over a window)."""
    over = over or (lambda c: c)
    hi, lo = over(F.sum(F.shiftright(x, 32))), over(F.sum(x.bitwiseAND(F.lit(0xFFFFFFFF))))
    total = hi.cast("decimal(38,0)") * F.lit(1 << 32) + lo
    return (F.pmod(total + F.expr(str(1 << 63)), F.expr(str(1 << 64))) - F.expr(str(1 << 63))).cast("long")


def sum_sql(x: str, dtype: T.DataType, distinct: bool = False) -> str:
    """Spark SQL: Flink's ``SUM([DISTINCT] x)`` of a group or window, ``x`` of type ``dtype``
    (the module doc's table; a FLOAT is summed in DOUBLE and rounded once to FLOAT, where
    Flink adds in FLOAT row by row: the last bits can differ).

    >>> sum_sql("v", T.IntegerType())
    'CAST(pmod(sum(v) + 2147483648, 4294967296) - 2147483648 AS int)'
    """
    if isinstance(dtype, T.LongType):
        return long_sum_sql(x, distinct)
    return sum_of_sql(f"sum({'DISTINCT ' if distinct else ''}{x})", dtype)


def sum_of_sql(total: str, dtype: T.DataType) -> str:
    """Spark SQL: Flink's SUM of values of type ``dtype`` from their ``total`` as Spark sums
    them (a BIGINT for integers, wrapped around at 64 bits; a DECIMAL(p + 10, s); a DOUBLE)."""
    if isinstance(dtype, T.IntegralType):
        return wrapped_sql(total, dtype)
    if isinstance(dtype, (T.DecimalType, T.FloatType)):
        return f"CAST({total} AS {result_type('SUM', dtype)})"
    return total


def avg_sql(x: str, dtype: T.DataType, distinct: bool = False) -> str:
    """Spark SQL: Flink's ``AVG([DISTINCT] x)`` of a group or window, ``x`` of type ``dtype``
    (the module doc's table).

    >>> avg_sql("v", T.ShortType())
    'CAST(sum(v) DIV nullif(count(v), 0) AS smallint)'
    """
    d = "DISTINCT " if distinct else ""
    total = long_sum_sql(x, distinct) if isinstance(dtype, T.LongType) else f"sum({d}{x})"
    return avg_of_sql(total, f"count({d}{x})", dtype)


def avg_of_sql(total: str, n: str, dtype: T.DataType) -> str:
    """Spark SQL: Flink's AVG of values of type ``dtype`` from their ``total`` (a BIGINT for
    integers, wrapped around at 64 bits; a DECIMAL for decimals; a DOUBLE for floating
    point) and their count ``n``: NULL when ``n`` is 0."""
    n = f"nullif({n}, 0)"
    if isinstance(dtype, T.IntegralType):
        return f"CAST({total} DIV {n} AS {dtype.simpleString()})"
    if isinstance(dtype, T.DecimalType):
        out = result_type("AVG", dtype)
        return f"CAST(CAST({total} AS {out}) / CAST({n} AS DECIMAL(20, 0)) AS {out})"
    if isinstance(dtype, T.FloatType):
        return f"CAST({total} / {n} AS FLOAT)"
    return f"{total} / {n}"
