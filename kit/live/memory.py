"""A memory source for live queries: rows added from Python, each ``add_data`` one micro-batch.

Spark's Scala API has ``MemoryStream``; PySpark has none, and a Python data source's reader
runs in a process of Spark's, not the notebook's, so it cannot read the notebook's memory.
This one keeps each ``add_data`` as a Parquet file in a folder of its own, read by Spark's
file source one file a micro-batch, oldest first: the batches are the ``add_data`` calls,
in order, and a query restarted from its checkpoint goes on after the last it read.

    clicks = MemoryStream("user STRING, cTime TIMESTAMP")
    live = kit.live(clicks.df, time="cTime")
    clicks.add_data([("Mary", dt.datetime(2024, 1, 1, 12)), ("Bob", dt.datetime(2024, 1, 1, 12))])

    add_data   rows             micro-batch
    0          Mary, Bob        the first with rows
    1          Liz              the next
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from ..errors import KitError
from ..spark import spark as kit_spark

__all__ = ["MemoryStream", "land"]


class MemoryStream:
    """Rows of ``schema`` (a DDL string such as ``"user STRING, t BIGINT"``, or a
    ``StructType``) added with ``add_data``; ``df`` is the streaming DataFrame reading them.
    ``folder``: where the batches are kept (default: a new temporary folder, removed by
    ``close()``)."""

    def __init__(self, schema, folder: str | Path | None = None, spark: SparkSession | None = None):
        self.spark = spark or kit_spark()
        try:
            self.schema = self.spark.createDataFrame([], schema).schema
        except Exception as error:   # Spark's parse error, in a line
            raise KitError(f"schema must be a DDL string like 'user STRING, t BIGINT' or a StructType; "
                           f"{schema!r} does not parse: {str(error).splitlines()[0]}") from None
        self.own = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix="kit-memory-") if folder is None else folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._added = len(list(self.folder.glob("*.parquet")))   # a folder reused: go on after its batches
        self.df: DataFrame = (self.spark.readStream.schema(self.schema).option("maxFilesPerTrigger", 1)
                              .parquet(str(self.folder)))

    def add_data(self, rows) -> int:
        """``rows`` (tuples in the schema's order, or dicts by column) as the next micro-batch;
        its number among the ``add_data`` calls (0, 1, ...). Written aside and moved into the
        folder whole (Spark may list it at any moment), its modification time a second after
        the last: Spark's file source takes files by that time."""
        rows = [self._named(r) for r in rows]
        if not rows:
            raise KitError("add_data needs at least one row: an empty batch adds nothing to read")
        try:   # naive datetimes are UTC, as in the kit's session
            table = pa.Table.from_pylist(rows, schema=to_arrow_schema(self.schema, timezone="UTC"))
        except (pa.ArrowException, TypeError, ValueError) as error:
            raise KitError(f"add_data: the rows do not fit the schema {self.schema.simpleString()}: "
                           f"{str(error).splitlines()[0]}") from None
        with self._lock:
            n = self._added
            land(self.folder / f"{n:08d}.parquet", lambda aside: pq.write_table(table, aside), _FIRST + n)
            self._added += 1
        return n

    def _named(self, row) -> dict:
        names = self.schema.names
        if isinstance(row, dict):
            unknown = sorted(set(row) - set(names))
            if unknown:
                raise KitError(f"add_data: {unknown} are not columns; columns are {names}")
            return row
        if not isinstance(row, (tuple, list)) or len(row) != len(names):
            raise KitError(f"add_data: a row is a tuple of {len(names)} values ({', '.join(names)}) or a dict; "
                           f"got {row!r}")
        return dict(zip(names, row))

    def close(self) -> None:
        """Removes the folder when the stream made it (stop the queries that read it first)."""
        if self.own:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __repr__(self) -> str:
        return f"MemoryStream({self.schema.simpleString()}, {self._added} batches added)"


def land(path: Path, write, mtime: float) -> None:
    """A file made by ``write(aside)`` lands at ``path`` whole, modified at ``mtime`` (s):
    written aside (a name starting with ``.``, which Spark's file source skips), timed, then
    moved in, so a query watching the folder never lists it half written or with the time of
    its writing (Spark takes files by that time, and skips for good one older than a week
    before the newest)."""
    aside = path.with_name(f".{path.name}")
    write(aside)
    os.utime(aside, (mtime, mtime))
    os.replace(aside, path)


_FIRST = 1_600_000_000   # the first batch's file time (s); each next a second later
