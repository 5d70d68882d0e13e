"""Dynamic tables (issue 21): changelogs of non-windowed aggregations, the kit vs real Flink 2.3
and vs Spark's own cheapest way to the same changes.

- The word-frequency cascade (seed 004) on 10,000,000 words drawn from 100,000 distinct ones
  with Zipf's law (rank ``r`` with probability ~ 1/r: ``r = floor(100000^u)`` for a uniform
  ``u``), the full changelog of the outer aggregate written to a no-op sink; real Flink 2.3
  streaming SQL at parallelism 2 into its ``blackhole`` sink (JVM start not counted), and its
  batch run for the final table the two must share. Again with mini-batch on (Flink too, with
  the same options), with the number of changelog rows.
- ``GROUP BY user COUNT(*)`` over 10,000,000 clicks: its changelog vs Spark's batch
  ``groupBy().count()`` and a running count per user (``count(*) OVER (PARTITION BY user
  ORDER BY arrival)``: one row per change, the cheapest native way to the same updates).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import functions as F

import kit

from .match_recognize import FLINK_PYTHON, _flink_run
from .windows import _inputs as _clicks, _median, _side_by_side

CASCADE = ("SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word) "
           "GROUP BY cnt")
MINI_BATCH = {"table.exec.mini-batch.enabled": "true", "table.exec.mini-batch.allow-latency": "1 s",
              "table.exec.mini-batch.size": "1000"}


def _words(folder: Path, rows: int, distinct: int = 100_000):
    """Parquet (in arrival order, with a time column) and CSV (the words) of ``rows`` Zipf words."""
    parquet, csv = folder / f"words_{rows}_{distinct}.parquet", folder / f"words_{rows}_{distinct}_csv"
    spark = kit.spark()
    if not parquet.exists():
        rank = F.floor(F.pow(F.lit(float(distinct)), F.rand(seed=7)))
        (spark.range(rows).select(F.concat(F.lit("w"), rank.cast("long").cast("string")).alias("word"),
                                  F.timestamp_millis(F.col("id") + F.lit(1_704_067_200_000)).alias("t"))
            .coalesce(1).write.option("parquet.block.size", 4 << 20).parquet(str(parquet)))
    if not csv.exists() and FLINK_PYTHON.exists():
        spark.read.parquet(str(parquet)).select("word").coalesce(1).write.csv(str(csv))
    return parquet, csv


def _noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def dynamic(folder: Path, rows: int | None = None):
    """Rows of the results table."""
    folder.mkdir(parents=True, exist_ok=True)
    n = rows or 10_000_000
    spark = kit.spark()
    parquet, csv = _words(folder, n)

    def cascade(config=None):
        words = kit.stream(spark.read.parquet(str(parquet)), time="t")
        return kit.sql(CASCADE, words=words, config=config)

    seconds = _median(lambda: cascade().changelog(), runs=3)
    final = sorted((int(r[0]), int(r[1])) for r in cascade().final().collect())
    changes = cascade().changelog().count()
    label = f"word-frequency cascade, {n:,} Zipf words (100,000 distinct), full changelog to a no-op sink"
    if FLINK_PYTHON.exists():
        ddl = f"CREATE TABLE words (word STRING) WITH ('connector' = 'filesystem', 'path' = '{csv.resolve()}', " \
              "'format' = 'csv')"
        flink = _flink_run(ddl, CASCADE, parallelism=2, mode="streaming", sink="blackhole")
        batch = _flink_run(ddl, CASCADE, parallelism=2, mode="batch")
        same = sorted((int(a), int(b)) for a, b in batch["rows"]) == final
        yield [label, f"{seconds:.2f} s ({changes:,} changes)",
               f"Flink 2.3 streaming SQL, parallelism 2, blackhole sink (JVM start {flink['startup']:.1f} s apart)",
               f"{flink['seconds']:.2f} s", f"{seconds / flink['seconds']:.2f}",
               f"final table {'equal to' if same else 'DIFFERENT from'} Flink batch ({len(final):,} rows)"]
    else:
        yield [label, f"{seconds:.2f} s ({changes:,} changes)", "none run (no .venv-flink)", "", "", ""]
    minibatched = _median(lambda: cascade(MINI_BATCH).changelog(), runs=3)
    same = sorted(map(tuple, cascade(MINI_BATCH).final().collect())) == final
    label = f"the cascade with mini-batch (size 1,000, allow-latency 1 s), {n:,} words"
    kit_cell = f"{minibatched:.2f} s ({cascade(MINI_BATCH).changelog().count():,} changes)"
    if FLINK_PYTHON.exists():
        flink = _flink_run(ddl, CASCADE, parallelism=2, mode="streaming", sink="blackhole", options=MINI_BATCH)
        yield [label, kit_cell, "Flink 2.3 streaming SQL with the same options, parallelism 2, blackhole sink",
               f"{flink['seconds']:.2f} s", f"{minibatched / flink['seconds']:.2f}",
               f"final table {'equal to' if same else 'DIFFERENT from'} the kit's without mini-batch"]
    yield [label, kit_cell, "the kit without mini-batch", f"{seconds:.2f} s ({changes:,} changes)",
           f"{minibatched / seconds:.2f}", f"final table {'equal' if same else 'DIFFERENT'}"]

    clicks_parquet, _ = _clicks(folder, n)
    clicks = spark.read.parquet(str(clicks_parquet))
    native, running, changelog = _side_by_side(
        lambda: clicks.groupBy("user").count(),
        lambda: clicks.selectExpr("user", "count(*) OVER (PARTITION BY user ORDER BY arrival "
                                  "ROWS UNBOUNDED PRECEDING) AS c"),
        lambda: kit.sql("SELECT user, COUNT(*) AS c FROM clicks GROUP BY user",
                        clicks=kit.stream(clicks, time="cTime")).changelog(), runs=3)
    label = f"GROUP BY user COUNT(*) changelog, {n:,} clicks, 1,000 users"
    yield [label, f"{changelog:.2f} s", "Spark groupBy(user).count()", f"{native:.2f} s",
           f"{changelog / native:.2f}", ""]
    yield [label, f"{changelog:.2f} s", "Spark running count per user (window function)", f"{running:.2f} s",
           f"{changelog / running:.2f}", ""]
