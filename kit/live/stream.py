"""A live stream: an unbounded Spark source, its event time and watermark strategy.

    live = kit.live(spark.readStream.schema("user string, cTime timestamp").json("clicks/"),
                    time="cTime", watermark=Duration.of_seconds(5))

Any streaming DataFrame is a source: a folder that files land in (CSV, JSON, Parquet), a
socket, Spark's rate source, a ``kit.MemoryStream``'s ``df`` (rows added from Python). Its
rows arrive micro-batch by micro-batch, in each batch in Spark's read order
(``driver.arrival_ids``); a folder's files come oldest first (by their modification time, as
Spark's file source takes them), ``maxFilesPerTrigger`` at a time: a file must land whole
(written aside, then moved in), as Spark may list the folder at any moment. A schema with
Spark's column of malformed records (``_corrupt_record STRING``, CSV and JSON in PERMISSIVE
mode) sends each row Spark could not
read aside (``bad``, with its text) instead of to the operators with NULLs. A Parquet file
Spark cannot read stops the query (a KitError names it), unless the source reads with
``.option("ignoreCorruptFiles", "true")``: then the query goes on past it, and ``bad`` lists
the file with the batch that met it (``LiveQuery.unreadable_files``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .. import sparksql
from ..errors import KitError
from ..time import Duration, WatermarkStrategy, to_duration
from .driver import check_watermark

__all__ = ["LiveStream"]


@dataclass(frozen=True)
class LiveStream:
    """A streaming DataFrame with its event time (``time``: TIMESTAMP or BIGINT epoch ms) and
    watermark strategy (a watermark that follows the largest time seen). ``source``: its
    columns as a query sees them; ``raw``: as read, with Spark's column of malformed records
    (``malformed``, named by ``spark.sql.columnNameOfCorruptRecord``) when the schema has one;
    ``primary_key``: the columns that make it a versioned table (temporal joins)."""
    source: DataFrame
    time: str
    watermark: WatermarkStrategy
    raw: DataFrame | None = field(default=None, repr=False)
    malformed: str | None = field(default=None, repr=False)
    primary_key: tuple = ()
    proctime = None    # no column: a row's processing time is its micro-batch's (kit.live.driver)

    @property
    def recorded(self) -> list:
        """The columns each arrival is recorded with: the source's, then the malformed text."""
        return [*self.source.columns, *([self.malformed] if self.malformed else [])]

    def reason(self, malformed: str | None) -> Column:
        """Why a row went aside (``bad``): its malformed text (recorded as ``malformed``), or
        no event time."""
        null = F.lit(f"NULL event time in column {self.time!r}: Flink rejects the row")
        if malformed is None:
            return null.alias("reason")
        text = F.concat(F.lit("malformed record (Spark could not read it): "), F.col(malformed))
        return F.when(F.col(malformed).isNotNull(), text).otherwise(null).alias("reason")

    @property
    def time_is_timestamp(self) -> bool:
        return not isinstance(self.source.schema[self.time].dataType, T.IntegralType)

    def columns_only(self, columns: list) -> DataFrame:
        """The source's ``columns`` (a query's analysis reads them: nothing runs)."""
        return sparksql.select(self.source, *map(sparksql.name, columns))

    @classmethod
    def of(cls, df: DataFrame, time: str, watermark: WatermarkStrategy | Duration | None = None,
           primary_key: str | list[str] | None = None, proctime: str | None = None) -> "LiveStream":
        """``kit.live(df, time=..., watermark=..., primary_key=..., proctime=...)``: ``df`` from
        ``spark.readStream``; ``watermark`` a ``WatermarkStrategy`` or a ``Duration`` (bounded
        out-of-orderness), default ``for_monotonous_timestamps()``; ``primary_key`` as
        ``kit.stream``'s: the stream is a versioned table, each row its key's version from its
        time on (an ``op`` column makes it an upsert changelog), for a temporal join;
        ``proctime``: the name of a TIMESTAMP column the kit adds, each row's processing time
        (its micro-batch's, as the processing-time timers have it), as Flink's ``pt AS
        PROCTIME()`` adds one: a query reads it, the record keeps it, the replay reads it back.

            kit.live(source, time="t", proctime="pt")   # + pt TIMESTAMP: 2026-12-04 10:31:07.120"""
        if not isinstance(df, DataFrame) or not df.isStreaming:
            raise KitError(f"kit.live() takes a streaming DataFrame (spark.readStream...); got "
                           f"{'a batch DataFrame: use kit.stream()' if isinstance(df, DataFrame) else type(df).__name__}")
        if time not in df.columns:
            raise KitError(f"time column {time!r} is not a column; columns are {df.columns}")
        kind = df.schema[time].dataType
        if not isinstance(kind, (T.TimestampType, T.TimestampNTZType, T.IntegralType)):
            raise KitError(f"time column {time!r} must be TIMESTAMP or BIGINT epoch milliseconds; "
                           f"it is {kind.simpleString()} (cast it first)")
        if watermark is None:
            watermark = WatermarkStrategy.for_monotonous_timestamps()
        elif not isinstance(watermark, WatermarkStrategy):
            watermark = WatermarkStrategy.for_bounded_out_of_orderness(
                to_duration(watermark, "kit.live", "watermark", like="Duration"))
        check_watermark(watermark)
        if proctime is not None:
            if not isinstance(proctime, str):
                raise KitError(f"proctime names the column kit.live adds with each row's processing time; got "
                               f"{proctime!r}")
            if proctime in df.columns:
                raise KitError(f"proctime column {proctime!r} is a column of the source already: live, a row's "
                               "processing time is its micro-batch's, which the kit adds as a new column; name "
                               "another")
            df = df.withColumn(proctime, F.current_timestamp())   # the micro-batch's time
        key = (primary_key,) if isinstance(primary_key, str) else tuple(primary_key or ())
        for c in key:
            if c not in df.columns:
                raise KitError(f"primary key {c!r} is not a column; columns are {df.columns}")
        malformed = df.sparkSession.conf.get("spark.sql.columnNameOfCorruptRecord", "_corrupt_record")
        if malformed in df.columns and malformed != time:   # a malformed row goes aside, with its text
            return cls(df.drop(malformed), time, watermark, df, malformed, key)
        return cls(df, time, watermark, df, None, key)
