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

A new worker adds the application's files folder to its path and calls
``importlib.invalidate_caches()``, which in Python 3.11 reads the directory of every archive
an import looked in again: Spark's ``pyspark.zip``, py4j's zip and spark-core's jar, first
on the path, 0.37 s a worker here. They do not change while Spark runs: in the daemon's
workers the call leaves them be (``ARCHIVES``).
"""

import gc
import importlib
import os
import sys
import zipimport

__all__ = ["PRELOADED", "ARCHIVES"]

ARCHIVES = ("pyspark.zip", "py4j-", "spark-core")   # how Spark's archives on the workers' path are named

PRELOADED = ("numpy", "pandas", "pyarrow", "pyarrow.compute", "pyspark.worker", "pyspark.sql.pandas.serializers",
             "kit.windows.operator", "kit.match_recognize.operator", "kit.replay.interleave")


def invalidate_caches(invalidate=importlib.invalidate_caches) -> None:
    """``importlib.invalidate_caches()`` but for the finders of Spark's ``ARCHIVES``."""
    kept = {path: finder for path, finder in sys.path_importer_cache.items()
            if isinstance(finder, zipimport.zipimporter) and os.path.basename(finder.archive).startswith(ARCHIVES)}
    for path in kept:
        del sys.path_importer_cache[path]
    try:
        invalidate()
    finally:
        sys.path_importer_cache.update(kept)


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

    importlib.invalidate_caches = invalidate_caches   # in this daemon and the workers it forks only
    preload()
    manager()
