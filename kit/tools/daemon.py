"""The Python daemon of the kit's local Spark session: PySpark's own (``pyspark.daemon``),
with what the kit's tasks use imported once, before it forks a worker per task.

A forked worker starts with numpy, pandas, pyarrow and the kit's operators already
loaded, so the first task after Spark stopped an idle worker (it does after a minute)
does not spend a second importing them: a widget moved after a pause redraws as fast as
one moved at once. Spark runs it (``python -m kit.tools.daemon``) for the local sessions
``kit.spark`` starts (``spark.python.daemon.module = kit.spark.DAEMON``), whose workers run
this interpreter.

What it loaded is then frozen (``gc.freeze``): a reused worker runs a full ``gc.collect()``
after every task (PySpark's daemon does), which walked all of it again, ~25 ms a task here;
frozen, the collection walks only what the tasks made.
"""

import gc
import importlib

__all__ = ["PRELOADED"]

PRELOADED = ("numpy", "pandas", "pyarrow", "pyarrow.compute", "pyspark.worker", "pyspark.sql.pandas.serializers",
             "kit.windows.operator", "kit.match_recognize.operator", "kit.replay.interleave")


def preload() -> None:
    """Import ``PRELOADED`` and freeze what is loaded: the daemon's workers fork from it.
    Only the daemon runs it, not an import: a driver that froze its objects so kept what
    finished results held in Spark (tests/test_kept_data.py failed after importing this)."""
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:   # a task that needs it imports it again, and fails there, where it is seen
            pass
    gc.freeze()   # in the permanent generation: the collections after each task skip it


if __name__ == "__main__":
    from pyspark.daemon import manager

    preload()
    manager()
