"""Flink windows on clicks (seed 000): the kit vs Spark's native window count and real Flink 2.3.

Input: ``kit.data.click_stream`` (1,000 users, bounded disorder of 5 s, 1 % late rows),
written once in arrival order, as one Parquet file of 4 MB row groups (so Spark splits it in
order over the cores, in halves within a row group: 16 MB ones split 10M rows 58/42) and as
CSV for Flink. The kit replays it as a stream (watermark
5 s behind) in file order -- and with ``order="arrival"``, once on that file (a pass finds it in
that order already) and once on a copy sorted by user (``kit.stream`` sorts it, once) -- and
runs each window query, and the tumbling and sliding ones as window TVFs through ``kit.sql`` too;
Spark's native ``groupBy(user, window(cTime, ...)).count()`` ignores arrival order and
watermarks. Every run writes its result to Spark's ``noop`` sink, so nothing is collected.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import functions as F

import kit
from kit.time import Duration, Time
from kit.windows.assigners import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows
from kit.windows.evictors import CountEvictor
from kit.windows.functions import Count
from kit.windows.triggers import CountTrigger

from .match_recognize import FLINK_PYTHON, _flink_run

QUERY = """SELECT `user`, window_start, window_end, COUNT(*) AS cnt
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' MINUTE))
GROUP BY `user`, window_start, window_end"""
HOP_QUERY = QUERY.replace("TUMBLE(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' MINUTE)",
                          "HOP(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' MINUTE, INTERVAL '10' MINUTE)")


def _inputs(folder: Path, rows: int):
    parquet, csv = folder / f"clicks_{rows}_rg4m.parquet", folder / f"clicks_{rows}_csv"
    if not parquet.exists():   # in arrival order, as a log would be
        (kit.data.click_stream(rows, users=1000).orderBy("arrival").coalesce(1).write
            .option("parquet.block.size", 4 << 20).parquet(str(parquet)))
    if not csv.exists() and FLINK_PYTHON.exists():
        (kit.spark().read.parquet(str(parquet)).orderBy("arrival").select("user", "url", "cTime").coalesce(1)
            .write.option("timestampFormat", "yyyy-MM-dd HH:mm:ss.SSS").csv(str(csv)))
    return parquet, csv


def _by_user(folder: Path, parquet: Path) -> Path:
    """The same clicks as ``parquet``, in another order (by user): order="arrival" must sort it."""
    out = folder / f"{parquet.stem}_by_user.parquet"
    if not out.exists():
        kit.spark().read.parquet(str(parquet)).orderBy("user", "cTime").write.parquet(str(out))
    return out


def _timed(make) -> float:
    """Seconds to build the DataFrame (the fast path runs its first pass then) and write it.
    Each run starts from a collected JVM heap with the previous run's shuffle files cleaned
    up, so a heavy run does not slow the one after it."""
    spark = kit.spark()
    spark.catalog.clearCache()   # the general path persists its firings: no reuse across runs
    spark._jvm.System.gc()       # Spark's cleaner removes unreferenced shuffles once collected
    time.sleep(1)
    start = time.time()
    make().write.format("noop").mode("overwrite").save()
    return time.time() - start


def _median(make, runs=3) -> float:
    return _side_by_side(make, runs=runs)[0]


def _side_by_side(*makes, runs=5) -> list:
    """Median seconds of each of ``makes``, run in turn round after round (after one
    warm-up round), so that a change in the machine's load falls on all of them alike."""
    for make in makes:
        _timed(make)
    times = [[] for _ in makes]
    for _ in range(runs):
        for seconds, make in zip(times, makes):
            seconds.append(_timed(make))
    return [sorted(seconds)[runs // 2] for seconds in times]


def windows(folder: Path, rows: int | None = None):
    """Rows of the results table."""
    folder.mkdir(parents=True, exist_ok=True)
    n = rows or 10_000_000
    parquet, csv = _inputs(folder, n)
    spark = kit.spark()

    def clicks(order=None):
        return kit.stream(spark.read.parquet(str(parquet)), time="cTime",
                          watermark=Duration.of_seconds(5), order=order)

    def native_tumbling():
        return spark.read.parquet(str(parquet)).groupBy("user", F.window("cTime", "1 minute")).count()

    native, tumbling = _side_by_side(
        native_tumbling,
        lambda: clicks().key_by("user").window(TumblingEventTimeWindows.of(Time.minutes(1))).aggregate(Count(alias="cnt")).df)
    label = f"tumbling 1 min COUNT per user, {n:,} clicks, 1,000 users (fast path)"
    yield [label, f"{tumbling:.2f} s", "Spark native groupBy(user, window(cTime, '1 minute')).count()",
           f"{native:.2f} s", f"{tumbling / native:.2f}", "not compared (no watermark in Spark)"]
    tvf_native, tvf = _side_by_side(native_tumbling, lambda: kit.sql(QUERY, clicks=clicks()), runs=3)
    yield [f"window TVF: kit.sql TUMBLE 1 min COUNT per user, {n:,} clicks, 1,000 users", f"{tvf:.2f} s",
           "Spark native, as above", f"{tvf_native:.2f} s", f"{tvf / tvf_native:.2f}", ""]
    ordered = _median(lambda: clicks("arrival").key_by("user").window(TumblingEventTimeWindows.of(Time.minutes(1)))
                      .aggregate(Count(alias="cnt")).df)
    yield [label.replace("(fast path)", "(fast path, order=\"arrival\", file in that order: checked)"),
           f"{ordered:.2f} s", "Spark native, as above", f"{native:.2f} s", f"{ordered / native:.2f}", ""]
    by_user = spark.read.parquet(str(_by_user(folder, parquet)))
    sorted_once = _median(lambda: kit.stream(by_user, time="cTime", watermark=Duration.of_seconds(5), order="arrival")
                          .key_by("user").window(TumblingEventTimeWindows.of(Time.minutes(1)))
                          .aggregate(Count(alias="cnt")).df)
    yield [label.replace("(fast path)", "(fast path, order=\"arrival\", file by user: sorted once)"),
           f"{sorted_once:.2f} s", "Spark native, as above", f"{native:.2f} s", f"{sorted_once / native:.2f}", ""]
    if FLINK_PYTHON.exists():
        ddl = ("CREATE TABLE clicks (`user` STRING, url STRING, cTime TIMESTAMP(3), "
               "WATERMARK FOR cTime AS cTime - INTERVAL '5' SECOND) "
               f"WITH ('connector' = 'filesystem', 'path' = '{csv.resolve()}', 'format' = 'csv')")
        flink = _flink_run(ddl, QUERY, parallelism=2, mode="streaming")
        yield [label, f"{tumbling:.2f} s", f"Flink 2.3 streaming SQL TUMBLE, parallelism 2 (JVM start "
               f"{flink['startup']:.1f} s apart)", f"{flink['seconds']:.2f} s", f"{tumbling / flink['seconds']:.2f}",
               f"{len(flink['rows']):,} rows"]
    sliding_native, sliding, hop = _side_by_side(
        lambda: spark.read.parquet(str(parquet)).groupBy("user", F.window("cTime", "10 minutes", "1 minute")).count(),
        lambda: clicks().key_by("user").window(SlidingEventTimeWindows.of(Time.minutes(10), Time.minutes(1)))
        .aggregate(Count(alias="cnt")).df,
        lambda: kit.sql(HOP_QUERY, clicks=clicks()), runs=3)
    yield [f"sliding 10 min / 1 min COUNT per user, {n:,} clicks (fast path)", f"{sliding:.2f} s",
           "Spark native groupBy(user, window(cTime, '10 minutes', '1 minute')).count()",
           f"{sliding_native:.2f} s", f"{sliding / sliding_native:.2f}", ""]
    yield [f"window TVF: kit.sql HOP 1 min / 10 min COUNT per user, {n:,} clicks", f"{hop:.2f} s",
           "Spark native, as above", f"{sliding_native:.2f} s", f"{hop / sliding_native:.2f}", ""]
    # the general path (the operator replayed per key, in the JVM for these built-in parts)
    def general(window):
        keyed = clicks().key_by("user")
        return window(keyed).df

    session = _median(lambda: general(lambda k: k.window(EventTimeSessionWindows.with_gap(Time.seconds(30)))
                                      .aggregate(Count(alias="cnt"))))
    yield [f"session gap 30 s COUNT per user, {n:,} clicks (general path)", f"{session:.2f} s",
           "events per second", f"{n / session:,.0f}", "", ""]
    custom = _median(lambda: general(lambda k: k.window(TumblingEventTimeWindows.of(Time.minutes(1)))
                                     .trigger(CountTrigger.of(5)).evictor(CountEvictor.of(3))
                                     .aggregate(Count(alias="cnt"))))
    yield [f"CountTrigger(5) + CountEvictor(3), tumbling 1 min, {n:,} clicks (general path)",
           f"{custom:.2f} s", "events per second", f"{n / custom:,.0f}", "", ""]
