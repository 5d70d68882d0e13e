"""The kit's exceptions: each says what went wrong and what to change.

A ``KitError`` is raised where the kit is called: by ``kit.sql``, ``kit.stream``, an
operator's constructor. What goes wrong only while Spark runs the query (a lookup join's
database gone from the workers, a row Flink would fail the job on) happens after the call
has returned its lazy DataFrame, on the workers, when the user calls ``.collect()`` or
``.show()``. The query then fails with the kit's message (``fail``: Spark's
``USER_RAISED_EXCEPTION``, the error SQL's ``raise_error`` raises, marked as the kit's), and
PySpark raises it as a ``KitRuntimeError``, a ``KitError``: ``import kit`` teaches PySpark's
exception converters (classic and Spark Connect) to, so no Python or Java stack trace comes
with it. ``raising`` is the way there for Python run on the workers: a task yields a row
with the message instead of raising (a KitError a worker raises anyway reaches the user as a
``KitRuntimeError`` with its message alone, unless it was raised while handling another
exception -- the user's function failing --, whose traceback the user needs).

    kit.stream(df, time="t").key_by("k").window(...).aggregate(Count()).df.collect()
    KitRuntimeError: row seq=1 has NULL event time in column 't'; Flink rejects such rows: ...
"""

import re

__all__ = ["KitError", "KitRuntimeError", "fail", "fail_sql", "raising"]

MARK = "flink-kit: "   # the kit's messages among USER_RAISED_EXCEPTIONs (kit/jvm/Internal.java too)


class KitError(Exception):
    """Base class of every error the kit raises on purpose."""


class KitRuntimeError(KitError):
    """The kit's error from a query Spark was running (module doc)."""


def fail(message):
    """A column that fails the query with ``message`` (a string column) as the kit's error."""
    from pyspark.sql import functions as F

    return F.raise_error(F.concat(F.lit(MARK), message))


def fail_sql(message: str) -> str:
    """``fail`` as Spark SQL text: ``message`` is a string expression's text."""
    return f"raise_error(concat('{MARK}', {message}))"


def raising(df, column: str):
    """``df`` without ``column``; the first row whose ``column`` is set fails the query with
    its text as the message (``fail``)."""
    from pyspark.sql import functions as F

    error = F.col(column)
    return df.filter(F.when(error.isNull(), F.lit(True)).otherwise(fail(error).cast("boolean"))).drop(column)


# the last exception of a Python worker's traceback, when it is one of the kit's
_RAISED = re.compile(r"^(kit(?:\.\w+)+): (.*)\Z", re.M | re.S)
_CHAINED = ("\nThe above exception was the direct cause", "\nDuring handling of the above exception")


def _kits(converted):
    """``converted`` (PySpark's exception for a failed query) as a ``KitRuntimeError`` when
    it is the kit's ``fail``, or a KitError a Python worker raised on its own (the kit's
    message, not the worker's traceback); else as it is -- an error of the user's own
    function keeps its traceback, and so does a KitError raised while handling one."""
    condition = getattr(converted, "getCondition", lambda: None)()
    if condition == "USER_RAISED_EXCEPTION":
        message = (converted.getMessageParameters() or {}).get("errorMessage") or ""
        if message.startswith(MARK):
            return KitRuntimeError(message[len(MARK):])
    from pyspark.errors import PythonException

    if isinstance(converted, PythonException):
        text = str(converted)
        last = text.rfind('\n  File "')
        found = _RAISED.search(text, last + 1) if last >= 0 and not any(c in text for c in _CHAINED) else None
        if found and _is_kits(found.group(1)):
            return KitRuntimeError(found.group(2).split("\nJVM stacktrace:")[0].rstrip())
    return converted


def _is_kits(name: str) -> bool:
    """Whether ``name`` (``kit.errors.KitError``) is one of the kit's error classes."""
    import importlib

    module, _, cls = name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), cls, None)
    except ImportError:
        return False
    return isinstance(found, type) and issubclass(found, KitError)


def install() -> None:
    """Wrap PySpark's exception converters with ``_kits``, once (``import kit`` does it)."""
    import importlib

    for name in ("pyspark.errors.exceptions.captured", "pyspark.errors.exceptions.connect",
                 "pyspark.sql.connect.client.core"):
        try:
            module = importlib.import_module(name)
        except ImportError:   # Spark Connect's client needs grpc, an extra
            continue
        convert = getattr(module, "convert_exception", None)
        if convert is not None and not getattr(convert, "_kit", False):
            def converted(*args, _convert=convert, **kwargs):
                return _kits(_convert(*args, **kwargs))
            converted._kit = True
            module.convert_exception = converted
