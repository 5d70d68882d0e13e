"""A started live run: its rows written micro-batch by micro-batch, exactly once.

``LiveQuery`` runs one Structured Streaming query over the live driver's tagged rows
(``driver.LiveRun.process``) and writes them, each micro-batch in one Spark job, to one
Parquet table under ``path`` partitioned by ``_kind`` (``arrival``, and what the operator
makes) and ``batch``. A batch that runs again after a restart (the query died before
committing it) overwrites its own partitions: nothing doubled, nothing lost. The query's
checkpoint is ``path/_checkpoint``: start it again on the same ``path`` and it goes on
from the last committed batch; ``table(kind)`` reads one kind's rows, in its columns.

    path/rows/_kind=arrival/batch=0/...   every arrival: its columns, ``_arr``, ``_ts``, ``_wm``
    path/rows/_kind=<kind>/batch=0/...    the operator's rows of that kind
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..errors import KitError

__all__ = ["LiveQuery"]


class LiveQuery:
    """One live query (``start()`` has started it): ``tables[kind]`` names the columns of
    each kind of tagged row; ``table(kind)`` reads what its batches wrote."""

    def __init__(self, tagged: DataFrame, path: str, tables: dict, trigger: str | None = None,
                 query: dict | None = None):
        if trigger not in (None, "available_now") and not isinstance(trigger, str):
            raise KitError(f"trigger must be None (as fast as batches come), 'available_now' (what is there, "
                           f"then stop) or an interval like '10 seconds'; got {trigger!r}")
        self.path, self.tables, self.spark = Path(path), tables, tagged.sparkSession
        _same_query(self.path, query or {})
        # the table's columns: the tagged rows', then the partition columns
        self.raw = self.spark.createDataFrame([], tagged.drop("_kind").withColumn("_kind", F.lit("")).withColumn(
            "batch", F.lit(0)).schema)
        writer = tagged.writeStream.foreachBatch(self._write).option(
            "checkpointLocation", str(self.path / "_checkpoint"))
        if trigger == "available_now":
            writer = writer.trigger(availableNow=True)
        elif trigger is not None:
            writer = writer.trigger(processingTime=trigger)
        self.query = writer.start()

    def _write(self, df: DataFrame, batch: int) -> None:
        (df.withColumn("batch", F.lit(batch)).write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
         .partitionBy("_kind", "batch").parquet(str(self.path / "rows")))

    def table(self, kind: str) -> DataFrame:
        """The rows of ``kind`` that committed batches wrote (with their ``batch``)."""
        folder, columns = self.path / "rows", [*self.tables[kind], "batch"]
        if not any(folder.glob(f"_kind={kind}/batch=*")):
            return self.spark.createDataFrame([], self.raw.select(*columns).schema)
        return self.spark.read.schema(self.raw.schema).parquet(str(folder)).where(F.col("_kind") == kind).select(
            *columns)

    def process_all_available(self) -> "LiveQuery":
        """Waits until every row available now went through (Spark's ``processAllAvailable``)."""
        self.query.processAllAvailable()
        return self

    def await_termination(self, timeout: float | None = None):
        return self.query.awaitTermination(timeout)

    def stop(self) -> None:
        self.query.stop()

    @property
    def status(self) -> dict:
        """Spark's status of the query and its last progress: batch, rows, watermark, state."""
        progress = self.query.lastProgress or {}
        state = progress.get("stateOperators") or [{}]
        return {"active": self.query.isActive, "message": self.query.status.get("message"),
                "batch": progress.get("batchId"), "rows": progress.get("numInputRows"),
                "state_rows": state[0].get("numRowsTotal"), "state_bytes": state[0].get("memoryUsedBytes")}


def _same_query(path: Path, query: dict) -> None:
    """Refuses to go on from a checkpoint that another query left: its state was made by
    other operators (Spark cannot tell: the kit keeps it as one pickled value per key).
    ``query``: what makes the query (text per part), kept in ``path/_query.json``."""
    import json
    saved = path / "_query.json"
    if saved.exists():
        before = json.loads(saved.read_text())
        changed = [f"{k}: {before.get(k)!r} -> {query.get(k)!r}" for k in sorted({*before, *query})
                   if before.get(k) != query.get(k)]
        if changed:
            raise KitError(f"{path} holds the checkpoint of another query ({'; '.join(changed)}): its state "
                           f"cannot go on under this one. Start on a new path, or delete {path} to start over")
        return
    path.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(query, indent=1))
