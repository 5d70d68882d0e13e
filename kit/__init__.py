"""flink-kit: Apache Flink's streaming semantics on PySpark, drawn in Jupyter.

>>> import kit
>>> clicks = kit.stream(kit.data.load("clicks"), time="cTime",
...                     watermark=kit.Duration.of_minutes(5))      # doctest: +SKIP
>>> kit.viz.stream_timeline(clicks, key="user")                   # doctest: +SKIP
"""

import importlib

from . import errors
from .errors import KitError
from .spark import preload as _preload, spark
from .sql import SqlError, sql
from .sql.explain_match import explain as explain_match
from .stream import Stream
from .time import Clock, Duration, Time, WatermarkStrategy
from .windows.datastream import DataStream
from .live.memory import MemoryStream
from .live.query import DbApiSink
from .windows.live import LiveDataStream

__all__ = ["KitError", "SqlError", "explain", "explain_match", "spark", "sql", "stream", "live", "DbApiSink",
           "MemoryStream", "Stream", "Clock", "Duration", "Time", "WatermarkStrategy", "data", "engine", "joins", "viz",
           "widgets"]
__version__ = "0.1.0"

stream = DataStream.of   # kit.stream(df, time=..., ...): a stream with the DataStream API
live = LiveDataStream.of   # kit.live(spark.readStream..., time=..., ...): the same API on Structured Streaming
errors.install()   # the kit's errors from running queries as KitErrors
_preload("kit.viz")   # the charts (altair, vl-convert: seconds) load while a local session's JVM starts
_LAZY = ("data", "engine", "joins", "viz", "widgets")


def __getattr__(name):
    """``kit.data``, ``kit.engine``, ``kit.joins``, ``kit.viz`` and ``kit.widgets`` load on
    first use, and ``kit.explain`` (``kit.engine.explain``) with ``kit.engine``."""
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    if name == "explain":
        return importlib.import_module(".engine", __name__).explain
    raise AttributeError(f"module 'kit' has no attribute {name!r}")
