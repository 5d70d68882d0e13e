"""Spark SQL text the kit writes: a projection written as text costs a few py4j calls
(``select``), where one built from ``Column`` objects costs one per function, column
and literal (thousands per widget redraw, ~0.1–0.8 ms each).

    name("a`b")        -> `a``b`
    col("a`b")         -> the Column of that name (F.col("a`b") fails: it parses)
    string("it's")     -> 'it\\'s'
"""

import decimal
import functools
import numbers
import weakref

__all__ = ["name", "col", "string", "local_rows", "small_pandas", "select", "made_when_read"]

INLINE_ROWS = 1_000   # rows written into the query text as VALUES, beyond: a scan of sent rows


def name(column: str) -> str:
    """``column`` as a Spark SQL identifier."""
    return "`" + column.replace("`", "``") + "`"


def col(column: str):
    """The Column named ``column`` as written (``F.col`` parses dots and backticks)."""
    from pyspark.sql import functions as F

    return F.col(name(column))


def string(text: str) -> str:
    """``text`` as a Spark SQL string literal (backslash escapes: Spark reads ``'a''b'`` as
    two literals)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def local_rows(session, rows, schema: str | None = None):
    """``rows`` (tuples of integers, floats, strings and None; or an Arrow table) as a
    DataFrame of ``schema`` (``"name type, ..."``, columns in Spark SQL's words; an Arrow
    table's own when not given). Up to
    ``INLINE_ROWS`` as a ``VALUES`` list in the query: a local relation, which a join
    broadcasts with no Spark job (``createDataFrame`` of a list gives a scan of Python rows,
    whose broadcast runs Python tasks); more (a million timers to place) sent as an Arrow
    table, a local relation too, whose size the planner knows."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    struct = from_arrow_schema(rows.schema) if schema is None else _struct(schema)
    if isinstance(rows, pa.Table) and rows.num_rows <= INLINE_ROWS:
        rows = [tuple(r.values()) for r in rows.to_pylist()]
    if isinstance(rows, pa.Table) or not rows or len(rows) > INLINE_ROWS:   # sent as Arrow
        arrow = to_arrow_schema(struct, timezone="UTC")
        if not isinstance(rows, pa.Table):
            columns = zip(*rows) if rows else [()] * len(struct)
            rows = pa.Table.from_arrays([pa.array([int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                                   else v for v in c], type=f.type) for c, f in zip(columns, arrow)],
                                        schema=arrow)
        return session.createDataFrame(rows.rename_columns(arrow.names).cast(arrow), struct)
    first = "(" + ", ".join(f"CAST({_value(v)} AS {f.dataType.simpleString()})" for v, f in zip(rows[0], struct)) + ")"
    rest = ["(" + ", ".join(map(_value, r)) + ")" for r in rows[1:]]
    names = ", ".join(name(f.name) for f in struct)
    return session.sql(f"SELECT * FROM VALUES {', '.join([first, *rest])} AS rows({names})")


@functools.lru_cache(maxsize=64)
def _struct(schema: str):
    """``schema`` (``"name type, ..."``) as Spark reads it: a StructType, parsed once (the
    parse is a call to Spark; callers pass a few fixed schemas, on hot paths)."""
    from pyspark.sql import types as T

    return T._parse_datatype_string(schema)


def _value(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return string(v)
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, numbers.Integral):
        return f"{int(v)}L" if abs(v) >= 2**31 else str(int(v))
    if isinstance(v, decimal.Decimal):
        return f"{v}BD"   # exact: a float's text would keep 17 digits
    return repr(float(v))


def small_pandas(df):
    """``df.toPandas()`` in one Spark job, for a small result read once (a chart's rows).
    With adaptive execution on, a plan that needs one partition (a window function with no
    PARTITION BY) over a cached relation runs each scan of the cache as a job of its own
    first (~0.05-0.1 s each); planned without it, the cache is built and read inside the one
    job. The setting is the session's, restored after."""
    conf, key = df.sparkSession.conf, "spark.sql.adaptive.enabled"
    before = conf.get(key, "true")
    conf.set(key, "false")
    try:
        return df.toPandas()
    finally:
        conf.set(key, before)


def select(df, *exprs: str):
    """``df.selectExpr(*exprs)`` in three py4j calls however many expressions there are:
    PySpark hands a list to the JVM an element a call (~0.3 ms each), so the expressions go
    as one string, split in the JVM. On Spark Connect (no py4j) it is ``selectExpr``."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None or not exprs or any("\0" in e for e in exprs):
        return df.selectExpr(*exprs)
    gateway = df.sparkSession.sparkContext._gateway
    if gateway not in _SPLIT:
        jvm = gateway.jvm
        _SPLIT[gateway] = (jvm.java.util.regex.Pattern.compile("\0", 16),    # 16: LITERAL
                           jvm.scala.collection.immutable.ArraySeq)
    nul, array_seq = _SPLIT[gateway]
    return type(df)(jdf.selectExpr(array_seq.unsafeWrapArray(nul.split("\0".join(exprs), -1))), df.sparkSession)


_SPLIT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # per py4j gateway: (pattern, ArraySeq)


def made_when_read(df, **makers):
    """``df`` with attributes made at their first read (``makers``: name -> a function of no
    argument), once: what a result may give besides its rows, planned only if asked for (a
    plan costs py4j calls). ``df`` stays a DataFrame of its own class.

        out = made_when_read(df, late_rows=plan_late_rows)   # nothing planned
        out.late_rows                                        # plan_late_rows() now, then kept
    """
    kind = next(k for k in type(df).__mro__ if "_kit_made" not in k.__dict__)
    made = {**df.__dict__.get("_kit_made", {}), **makers}
    df._kit_made = made
    df.__class__ = _made_class(kind, tuple(sorted(made)))
    return df


@functools.cache
def _made_class(kind: type, names: tuple) -> type:
    """``kind`` whose attributes ``names`` come from the instance's ``_kit_made`` makers."""
    def attribute(name):
        def make(self):
            maker = self.__dict__.get("_kit_made", {}).get(name)
            if maker is None:
                raise AttributeError(name)
            return maker()
        return functools.cached_property(make)
    own = {"__module__": kind.__module__, "__qualname__": kind.__qualname__}   # what code that checks the class sees
    return type(kind.__name__, (kind,), {**own, "_kit_made": None, **{n: attribute(n) for n in names}})
