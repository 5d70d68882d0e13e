"""The floor: a widget's input DataFrames emptied (or cut to one row), their plans kept."""

from __future__ import annotations


def inputs_of(fn, ns: dict) -> set[str]:
    """Names of the notebook's DataFrames (Spark or pandas) that ``fn`` reads, directly or
    through the notebook's own functions it calls."""
    import types

    seen, found, todo = set(), set(), [fn]
    while todo:
        f = todo.pop()
        codes = [getattr(f, "__code__", None)]
        while codes:
            code = codes.pop()
            if code is None or id(code) in seen:
                continue
            seen.add(id(code))
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            for name in code.co_names:
                value = ns.get(name)
                if value is None:
                    continue
                if _is_frame(value):
                    found.add(name)
                elif callable(value) and getattr(value, "__module__", None) == "__main__" \
                        and hasattr(value, "__code__"):
                    todo.append(value)
    return found


def _is_frame(value) -> bool:
    module = type(value).__module__
    return (module.startswith("pyspark.sql") and hasattr(value, "toPandas")) or \
        (module.startswith("pandas") and type(value).__name__ == "DataFrame")


def emptied(df, rows: int = 0):
    """``df`` with no rows (or its first row only), its schema and plan kept (see the
    module's doc); a pandas frame becomes a Spark DataFrame first (Spark cannot infer the
    schema of an empty pandas frame)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    if type(df).__module__.startswith("pandas"):
        df = SparkSession.getActiveSession().createDataFrame(df)
    row = F.xxhash64(*[F.col(f"`{c}`") for c in df.columns])
    if rows:
        first = df.select(row.alias("h")).first()
        kept = df.where(row == F.lit(first.h))
    else:
        kept = df.where(row == F.lit(0x5EED_0F_F100D))
    n = kept.count()
    if (rows == 0 and n) or (rows and not n):
        raise RuntimeError(f"the floor's filter kept {n} rows")
    return kept
