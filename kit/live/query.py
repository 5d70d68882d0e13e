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

import datetime as dt
import json
import time
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import KitError
from ..replay.keyed import MIN_TIME
from .driver import LiveRun, flink_watermark

__all__ = ["LiveQuery", "DbApiSink"]


class LiveQuery:
    """One live query (``start()`` has started it): ``tables[kind]`` names the columns of
    each kind of tagged row; ``table(kind)`` reads what its batches wrote. ``run``: the
    ``LiveRun`` of a query of one keyed operator (windows, MATCH_RECOGNIZE), whose record
    (``record``) a replay reads."""
    run: LiveRun | None = None

    def __init__(self, tagged: DataFrame, path: str, tables: dict, trigger: str | None = None,
                 query: dict | None = None, sink: "DbApiSink | None" = None):
        if trigger not in (None, "available_now") and not isinstance(trigger, str):
            raise KitError(f"trigger must be None (as fast as batches come), 'available_now' (what is there, "
                           f"then stop) or an interval like '10 seconds'; got {trigger!r}")
        if sink is not None and not isinstance(sink, DbApiSink):
            raise KitError(f"sink must be a kit.DbApiSink (a DB-API table); got {type(sink).__name__}")
        self.path, self.tables, self.spark, self.sink = Path(path), tables, tagged.sparkSession, sink
        _same_query(self.path, query or {})
        _forget_unplanned_files(self.path / "_checkpoint")
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
        if self.sink is not None:   # read back: the batch's rows as written, not the batch run again
            self.sink.write(self.batch_rows(batch), batch)

    def batch_rows(self, batch: int) -> DataFrame:
        """The query's output rows that micro-batch ``batch`` made, as a sink receives them
        (each kind of query says which: its firings, its changes)."""
        raise KitError(f"{type(self).__name__} sends no rows to a sink")

    def table(self, kind: str, batch: int | None = None) -> DataFrame:
        """The rows of ``kind`` that committed batches wrote (with their ``batch``), or that
        batch ``batch`` wrote (committed or not: a sink reads the batch it is in). Read by
        their partitions, never while a batch writes one (a read of the whole folder could
        list a partition being replaced)."""
        folder, columns = self.path / "rows", [*self.tables[kind], "batch"]
        wanted = self.committed() if batch is None else {batch}
        paths = [str(p) for p in sorted((folder / f"_kind={kind}").glob("batch=*"))
                 if int(p.name.split("=", 1)[1]) in wanted]
        if not paths:
            return self.spark.createDataFrame([], self.raw.select(*columns).schema)
        return self.spark.read.schema(self.raw.schema).option("basePath", str(folder)).parquet(*paths).select(
            *columns)

    def committed(self) -> set:
        """The ids of the batches Spark committed (its checkpoint's commit log)."""
        return {int(p.name) for p in (self.path / "_checkpoint" / "commits").glob("[0-9]*")}

    def process_all_available(self) -> "LiveQuery":
        """Waits until every row available now went through (Spark's ``processAllAvailable``,
        twice: it returns at the first trigger that finds no new data, and a trigger that
        looked at the source just before a file landed, finishing after the call, is one;
        the second call's first trigger looked after the file was there)."""
        try:
            if self.run is not None and self.run.processing:
                self._until_a_batch_finds_nothing()
            else:
                self.query.processAllAvailable()
                self.query.processAllAvailable()
        except StreamingQueryException as error:
            raise _stopped(error) from None
        return self

    def _until_a_batch_finds_nothing(self) -> None:
        """With processing-time timers Spark runs a batch at every trigger, so its
        ``processAllAvailable`` never returns: waits for a batch that started after the call
        and found no new rows (all rows there at the call went through before it)."""
        called = dt.datetime.now(dt.timezone.utc)
        while True:
            progress = self.query.lastProgress
            if progress is not None and progress["numInputRows"] == 0 and \
                    dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")) > called:
                return
            if not self.query.isActive:
                error = self.query.exception()
                if error is not None:
                    raise error
                raise KitError("the query stopped before the rows there went through")
            time.sleep(0.05)

    def await_termination(self, timeout: float | None = None):
        """Waits until the query stops (``timeout`` seconds at most: then whether it stopped);
        a query that failed raises a KitError saying why, in a line or two."""
        try:
            return self.query.awaitTermination(timeout)
        except StreamingQueryException as error:
            raise _stopped(error) from None

    def stop(self) -> None:
        self.query.stop()

    @property
    def status(self) -> dict:
        """Spark's status of the query and its last progress: batch, rows, state; with a keyed
        driver run (``run``), ``watermark``: Flink's for the next batch (None before any row)."""
        progress = self.query.lastProgress or {}
        state = progress.get("stateOperators") or [{}]
        status = {"active": self.query.isActive, "message": self.query.status.get("message"),
                  "batch": progress.get("batchId"), "rows": progress.get("numInputRows"),
                  "state_rows": state[0].get("numRowsTotal"), "state_bytes": state[0].get("memoryUsedBytes")}
        if self.run is not None:
            spark_ms = (progress.get("eventTime") or {}).get("watermark")
            if spark_ms is not None:   # an ISO time: ms since the epoch, exactly
                at = dt.datetime.fromisoformat(spark_ms.replace("Z", "+00:00"))
                spark_ms = (at - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)
            watermark = None if spark_ms is None else self.run.flink_watermark(spark_ms)
            status["watermark"] = None if watermark in (None, MIN_TIME) else watermark
        return status

    # ---------------------------------------------------- a keyed driver run's record

    @property
    def arrivals(self) -> DataFrame:
        """Every arrival so far, in arrival order (``batch``, then ``_arr``: its place in the
        batch), with ``_ts`` (event time, ms), ``_wm``, the watermark it met (ms) and, in a
        keyed driver run, ``_pt``, its batch's processing time (ms)."""
        return self.table("arrival").orderBy("batch", "_arr")

    @property
    def bad(self) -> DataFrame:
        """The rows no operator saw, with their ``reason`` (no event time, or malformed) and
        ``batch``; then each Parquet file of a committed batch that Spark could not read (a
        source read with ``.option("ignoreCorruptFiles", "true")`` skips it; without, the query
        stops), its columns NULL and its ``reason`` naming it."""
        rows = self.table("bad")
        files = [(*[None] * (len(rows.columns) - 3), None, f"malformed file (Spark could not read it: {why}): {path}",
                  batch) for batch, path, why in self.unreadable_files()]
        if files:
            rows = rows.unionByName(self.spark.createDataFrame(files, rows.schema))
        return rows.orderBy("batch", F.col("_arr").asc_nulls_last()).drop("_arr")

    def unreadable_files(self) -> list:
        """``(batch, path, why)`` of each Parquet file a committed batch's source listed (its
        file log in the checkpoint) whose footer cannot be read; local files only."""
        checkpoint, done = self.path / "_checkpoint", self.committed()
        listed = set()
        for log in (checkpoint / "sources").glob("*/[0-9]*"):
            for line in log.read_text().splitlines()[1:]:   # after the version: an entry per file
                entry = json.loads(line)
                if entry.get("batchId") in done:
                    listed.add((entry["batchId"], entry["path"]))
        checked = self.__dict__.setdefault("_checked", {})
        for _, path in listed - set(checked):
            checked[path] = _unreadable(path)
        return sorted((batch, path, checked[path]) for batch, path in listed if checked[path])

    def record(self, columns: list, timestamps: bool, upto: int | None = None) -> DataFrame:
        """The arrivals as a replay reads them: ``columns``, ``batch``, ``_arr`` (the arrival
        order) and ``_emits``, the watermark after each (typed as the time column: TIMESTAMP
        when ``timestamps``): the one the next arrival met, and after the last the one of the
        last committed micro-batch (``applied``: the live operators fired no timer past it).
        ``upto``: only the arrivals whose time is at or below it (ms)."""
        applied, arrivals = self.applied(), self.arrivals
        if upto is not None:
            arrivals = arrivals.where(F.col("_ts") <= upto)
        after = F.coalesce(F.lead("_wm").over(Window.orderBy("batch", "_arr")), F.lit(applied))
        emits = F.when(after != MIN_TIME, after)
        return arrivals.withColumn("_emits", F.timestamp_millis(emits) if timestamps else emits).select(
            *columns, "batch", "_arr", "_emits")

    def applied(self) -> int:
        """Flink's watermark in the last committed micro-batch (with data or not: Spark runs one
        without data when its watermark moved, and the timers it passed fire there), from
        Spark's offset log, which keeps each batch's watermark; ``MIN_TIME`` before any."""
        meta = self._last_batch()
        return MIN_TIME if meta is None else flink_watermark(self.watermark, int(meta.get("batchWatermarkMs", 0)))

    def applied_proctime(self) -> int | None:
        """The processing time (ms) of the last committed micro-batch (None before any), which
        the offset log keeps: the processing-time timers up to it fired."""
        meta = self._last_batch()
        return None if meta is None else int(meta["batchTimestampMs"])

    def _last_batch(self) -> dict | None:
        """The offset log's metadata of the last committed batch (None: none yet)."""
        done = self.committed()
        if not done:
            return None
        return json.loads((self.path / "_checkpoint" / "offsets" / str(max(done))).read_text().splitlines()[1])

    @property
    def watermark(self):
        """The stream's watermark strategy (the keyed run's)."""
        return self.run.watermark


def _unreadable(uri: str) -> str | None:
    """Why the local Parquet file at ``uri`` cannot be read (its footer), or None: it can, or
    it is no Parquet file (not named so, no magic bytes), or not local."""
    address = urlparse(uri)
    if address.scheme not in ("", "file"):
        return None
    path = unquote(address.path)
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
        if not (path.endswith(".parquet") or magic == b"PAR1"):
            return None
        pq.read_metadata(path)
    except FileNotFoundError:
        return None     # gone since (Spark's own cleanup, or the user's)
    except Exception as error:   # what pyarrow says of it: the reason shown
        return (str(error).splitlines() or [type(error).__name__])[0]
    return None


def _stopped(error: Exception) -> KitError:
    """A failed query's error (Spark's, with its Java and Python traces) as the kit's, in a
    line or two: a file Spark could not read (and how to go on past it), the kit's own error
    raised inside the query, or the first line of Spark's."""
    lines = [line.strip() for line in str(error).splitlines()]
    read = next((line for line in lines if "[FAILED_READ_FILE" in line), None)
    if read is not None:
        path = read.split("reading file ", 1)[-1].split()[0].rstrip(".")
        cause = next((line.split(": ", 1)[-1] for line in lines if line.startswith("Caused by:")), "")
        return KitError(f"the live query stopped: Spark could not read {path} ({cause}). Read the folder with "
                        f".option('ignoreCorruptFiles', 'true'): the query then goes on past such a file, and "
                        f"`bad` lists it")
    own = [line.split(": ", 1)[1] for line in lines if line.startswith(("kit.errors.KitError: ", "KitError: "))]
    return KitError(f"the live query stopped: {own[-1] if own else lines[0][:500]}")


def _forget_unplanned_files(checkpoint: Path) -> None:
    """Makes a restart take a folder's files in the batches an uninterrupted run would have.
    Spark's file source writes the files it picks for the next batch to its own log
    (``sources/<n>/<id>``) before the batch is planned (``offsets/<id>``); a run killed in
    between leaves an entry no batch reads, and the restarted source reads it together with
    the next file it picks: two files in one batch, whose rows all meet one watermark (a late
    row may be on time). Such entries are removed (their files are then picked again, one
    batch at a time); a compaction of the log (``<id>.compact``, every tenth) stays as it is.

        offsets/1: {"logOffset": 1}    sources/0/2 (file 002.json): removed, read in batch 2
    """
    planned = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    if not planned:
        return
    offsets = planned[-1].read_text().splitlines()[2:]   # after the version and the batch metadata
    for n, line in enumerate(offsets):
        try:
            last = json.loads(line)["logOffset"]   # a file source's (another source's offset has none)
        except (ValueError, TypeError, KeyError):
            continue
        for entry in (checkpoint / "sources" / str(n)).glob("[0-9]*"):
            if entry.name.isdigit() and int(entry.name) > last:
                entry.unlink()
                entry.with_name(f".{entry.name}.crc").unlink(missing_ok=True)


def _same_query(path: Path, query: dict) -> None:
    """Refuses to go on from a checkpoint that another query left: its state was made by
    other operators (Spark cannot tell: the kit keeps it as one pickled value per key).
    ``query``: what makes the query (text per part), kept in ``path/_query.json``."""
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


class DbApiSink:
    """A table of a DB-API database that a live query's output goes to, micro-batch by
    micro-batch, idempotently by batch id: each batch's rows replace the rows of the same
    ``batch`` in one transaction, so a batch run again after a restart (its query died
    before Spark committed it) is there once. ``connect()`` opens a connection (``sqlite3``'s
    or any DB-API driver's, with ``?`` parameters unless ``paramstyle`` says ``format``);
    the table is made at the first batch, its columns the rows' (``batch`` among them).

        sink = DbApiSink(lambda: sqlite3.connect("counts.db"), "counts")
        run = kit.sql(query, s=live).start("runs/counts", sink=sink)

    The batch's rows are collected on the driver: a sink for results of notebook size."""

    def __init__(self, connect, table: str, paramstyle: str = "qmark"):
        if not callable(connect):
            raise KitError(f"connect must be a function that opens a DB-API connection; got {type(connect).__name__}")
        if not isinstance(table, str) or not table.replace("_", "a").isalnum():
            raise KitError(f"table must be a plain SQL name (letters, digits, _); got {table!r}")
        if paramstyle not in ("qmark", "format"):
            raise KitError(f"paramstyle must be 'qmark' (?) or 'format' (%s); got {paramstyle!r}")
        self.connect, self.table, self.mark = connect, table, "?" if paramstyle == "qmark" else "%s"

    def write(self, frame: DataFrame, batch: int) -> None:
        columns = [f.name for f in frame.schema.fields]
        rows = [tuple(r) for r in frame.collect()]
        con = self.connect()
        try:
            plain = type(con).__module__ == "sqlite3"   # sqlite3 stores numbers and text: the rest as text
            cur = con.cursor()
            types = ", ".join(f"{_quoted(f.name)} {_sql_type(f.dataType)}" for f in frame.schema.fields)
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self.table} ({types})")
            cur.execute(f"DELETE FROM {self.table} WHERE batch = {self.mark}", (batch,))
            if rows:
                marks = ", ".join([self.mark] * len(columns))
                cur.executemany(f"INSERT INTO {self.table} ({', '.join(map(_quoted, columns))}) VALUES ({marks})",
                                [tuple(map(_plain, r)) for r in rows] if plain else rows)
            con.commit()
        finally:
            con.close()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_type(dtype) -> str:
    """The SQL type of a column of Spark type ``dtype`` (TEXT for what has no plain one)."""
    if isinstance(dtype, T.DecimalType):
        return f"DECIMAL({dtype.precision}, {dtype.scale})"
    for kinds, name in _SQL_TYPES:
        if isinstance(dtype, kinds):
            return name
    return "TEXT"


_SQL_TYPES = ((T.IntegralType, "BIGINT"), ((T.FloatType, T.DoubleType), "DOUBLE"), (T.BooleanType, "BOOLEAN"),
              ((T.TimestampType, T.TimestampNTZType), "TIMESTAMP"), (T.DateType, "DATE"))


def _plain(value):
    """A value as sqlite3 stores it: numbers and text as they are, times ISO text, decimals text."""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return value
