"""The kit's exceptions: each says what went wrong and what to change.

A ``KitError`` is raised where the kit is called: by ``kit.sql``, ``kit.stream``, an
operator's constructor. What goes wrong only while Spark runs the query (a lookup join's
database gone from the workers, a row Flink would fail the job on) happens after the call
has returned its lazy DataFrame, on the workers, when the user calls ``.collect()`` or
``.show()``: the kit's message then reaches the user as Spark's ``USER_RAISED_EXCEPTION``
(``pyspark.errors.SparkRuntimeException``, the error SQL's ``raise_error`` raises), which
PySpark shows without a Python or a Java stack trace. ``raising`` is the way there for
Python run on the workers: a task yields a row with the message instead of raising.
"""

__all__ = ["KitError", "raising"]


class KitError(Exception):
    """Base class of every error the kit raises on purpose."""


def raising(df, column: str):
    """``df`` without ``column``; the first row whose ``column`` is set fails the query with
    its text as the message (Spark's ``USER_RAISED_EXCEPTION``; module doc)."""
    from pyspark.sql import functions as F

    error = F.col(column)
    return df.filter(F.when(error.isNull(), F.lit(True)).otherwise(F.raise_error(error).cast("boolean"))).drop(column)
