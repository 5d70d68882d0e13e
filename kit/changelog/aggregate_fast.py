"""The group aggregate as Spark SQL window functions (``engine="fast"``): one shuffle by key,
each input message exploded into its 0-2 changes (the formulas: ``kit.changelog.aggregate``)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from .. import sparksql
from ..aggregate_types import long_sum_sql, wrapped_sql
from . import ADDS, DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, AggCall, Changelog

__all__ = ["not_fast", "fast", "kinds"]


def not_fast(log, calls, options, types) -> str | None:
    """Why the fast path cannot run this aggregate (None: it can)."""
    if options.ttl_ms > 0:
        return "the state TTL is on"
    if options.mini_batch is not None:
        return "mini-batch is on"
    for c in calls:
        if c.function.upper() == "SUM" and isinstance(types.get(c.arg), T.FloatType) and c.type == "float":
            return f"SUM({c.arg}) of FLOAT values adds in FLOAT, value after value"
    if log.insert_only:
        return None
    for c in calls:
        if c.function.upper() in ("MIN", "MAX"):
            return f"{c.function}({c.arg}) over retractions keeps a multiset of values"
        if c.function.upper() in ("SUM", "AVG") and isinstance(types[c.arg], (T.FloatType, T.DoubleType)):
            return f"{c.function}({c.arg}) of floating-point values over retractions is not exact as a running sum"
    return None


def fast(log: Changelog, keys, calls, options, types) -> DataFrame:
    """The changelog by window functions over ``(seq, _n)`` per key (module doc)."""
    ks = [sparksql.name(k) for k in keys]
    order, run = _over(ks), _over(ks, frame=True)
    args = sorted({c.arg for c in calls if c.arg is not None})
    arg = {a: f"_a{i}" for i, a in enumerate(args)}
    meta = ["seq", "_n", "_pt"]
    df = log.df.selectExpr(*ks, *(f"{sparksql.name(a)} AS {arg[a]}" for a in args), *meta,
                           f"IF(_op IN {kinds(ADDS)}, 1, -1) AS _w")
    if ks:
        df = df.repartition(*ks)           # the one shuffle: every window below is per key
    if log.insert_only:
        df = df.selectExpr("*", "false AS _ign", "1 AS _e", f"row_number() OVER {order} AS _c")
    else:
        df = df.selectExpr("*", f"sum(_w) OVER {run} AS _S")
        df = df.selectExpr("*", f"least(0, min(_S) OVER {run}) AS _M")
        df = df.selectExpr("*", f"_M < coalesce(lag(_M) OVER {order}, 0) AS _ign")
        df = df.selectExpr("*", "_S - _M AS _c", "IF(_ign, 0, _w) AS _e")
    distinct = sorted({c.arg for c in calls if c.distinct})
    if distinct:   # the 0->1 / 1->0 transitions of each value's running count
        df = df.selectExpr("*", *(f"sum(IF({arg[a]} IS NULL, 0, _e)) OVER {_over([*ks, _java_key(arg[a], types[a])], frame=True)} "
                                  f"AS _d{arg[a]}" for a in distinct))
        df = df.selectExpr("*", *(f"CASE WHEN _d{arg[a]} = 1 AND _d{arg[a]} - _e = 0 THEN 1 "
                                  f"WHEN _d{arg[a]} = 0 AND _d{arg[a]} - _e = 1 THEN -1 ELSE 0 END AS _t{arg[a]}"
                                  for a in distinct))
    news = [f"CAST({_running(c, arg, types, run)} AS {c.type}) AS _v{i}" for i, c in enumerate(calls)]
    df = df.selectExpr(*ks, *meta, "_ign", "_e", "_c", *news)
    values = [f"_v{i}" for i in range(len(calls))]
    df = df.selectExpr("*", *(f"lag({v}) OVER {order} AS _p{v}" for v in values))

    def change(op, prefix):
        fields = ", ".join(f"'{v}', {prefix}{v}" for v in values)
        return f"named_struct('_op', '{op}'{', ' + fields if fields else ''})"

    floats = {f"_v{i}" for i, c in enumerate(calls) if c.type in ("float", "double")}   # Java's ==: NaN is never the same
    same = " AND ".join(f"{v} <=> _p{v}" + (f" AND NOT isnan({v})" if v in floats else "") for v in values) or "true"
    update = ([change(UPDATE_BEFORE, "_p")] if options.update_before else []) + [change(UPDATE_AFTER, "")]
    out = (f"CASE WHEN _ign THEN array() WHEN _e = 1 AND _c = 1 THEN array({change(INSERT, '')}) "
           f"WHEN _c = 0 THEN array({change(DELETE, '_p')}) "
           f"WHEN {same} THEN array() ELSE array({', '.join(update)}) END")
    df = df.selectExpr(*ks, *meta, f"posexplode({out}) AS (_j, _o)")
    return df.selectExpr("_o._op AS _op", *ks, *(f"_o.{v} AS {sparksql.name(c.name)}" for v, c in zip(values, calls)),
                         "seq", "concat(_n, array(_j)) AS _n", "_pt")


def _java_key(x: str, dtype) -> str:
    """Spark SQL: column ``x`` as a key equal where Java's ``equals`` is (a FLOAT or DOUBLE
    as its text: one NaN, -0.0 apart from 0.0, which Spark's keys would merge)."""
    return f"CAST({x} AS STRING)" if isinstance(dtype, (T.FloatType, T.DoubleType)) else x


def _over(partition: list, frame: bool = False) -> str:
    """A window per ``partition`` in changelog order (``frame``: up to the current row)."""
    part = f"PARTITION BY {', '.join(partition)} " if partition else ""
    return f"({part}ORDER BY seq, _n{' ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW' if frame else ''})"


def kinds(row_kinds) -> str:
    return "(" + ", ".join(f"'{k}'" for k in row_kinds) + ")"


def _running(call: AggCall, arg: dict, types: dict, run: str) -> str:
    """A call's running value over ``run`` in Spark SQL, at the call's type as the reference
    gives it (``group_agg._Sum``: integers wrapped around, an AVG of integers truncated, one
    of decimals rounded once to the type's scale)."""
    function = call.function.upper()
    if call.arg is None:
        return f"sum(_e) OVER {run}"
    x, weight = arg[call.arg], f"_t{arg[call.arg]}" if call.distinct else "_e"
    if function in ("MIN", "MAX"):
        if isinstance(types[call.arg], (T.FloatType, T.DoubleType)):   # over inserts: Java's <, a first NaN stays
            first = f"first_value({x}, true) OVER {run}"
            return f"IF(isnan({first}), {first}, {function.lower()}(IF(isnan({x}), NULL, {x})) OVER {run})"
        return f"{function.lower()}({x}) OVER {run}"
    n = f"sum(IF({x} IS NULL, 0, {weight})) OVER {run}"
    if function == "COUNT":
        return n
    dtype, out = types[call.arg], T._parse_datatype_string(call.type)
    exact = isinstance(dtype, (T.IntegralType, T.DecimalType))
    v = x if function == "SUM" or exact else f"CAST({x} AS DOUBLE)"
    def summed(part: str) -> str:
        return f"sum(CASE {weight} WHEN 1 THEN {part} WHEN -1 THEN -{part} END) OVER {run}"
    # a BIGINT sum wraps around at 64 bits, as Java's long (Spark's own fails past the range)
    total = long_sum_sql(x, summed=summed) if isinstance(dtype, T.LongType) else summed(v)
    if function == "SUM":
        value = total
    elif isinstance(dtype, T.IntegralType) and isinstance(out, T.IntegralType):
        value = f"{total} DIV {n}"
    elif isinstance(dtype, T.DecimalType) and isinstance(out, T.DecimalType):
        value = f"CAST({total} AS DECIMAL(38, {out.scale})) / CAST({n} AS DECIMAL(20, 0))"
    else:
        value = f"CAST({total} AS DOUBLE) / {n}"
    return f"IF({n} = 0, NULL, {wrapped_sql(value, out) if function == 'SUM' else value})"
