"""Live mode (issue 44): the same queries on Spark Structured Streaming, as a user runs them
-- ``kit.live`` over a folder of CSV files, ``start(path)`` -- against the same query
replayed by the kit (``kit.stream`` over the same files, to Spark's ``noop`` sink) and real
Flink 2.3 streaming SQL (parallelism 2, ``blackhole`` sink) reading the same folder.

Input: N Zipf words (``dynamic._words``) with ``t`` BIGINT epoch ms 1 ms apart, cut into
files of equal size in time order (each file's modification time after the last: Spark's
file source takes them in that order). Two queries: the word-frequency cascade and a
one-second tumbling count per word (the DataStream window live, Flink's TUMBLE TVF). A
third: the V-shape MATCH_RECOGNIZE of ``match_recognize.py`` over N rows of its ticker walk
(100 symbols), in the same number of files, watermark 1 ms behind (as its Flink run). A
fourth: the event-time temporal join of the words (left) with a versioned view by
deduplication of rates (every tenth word's row with a rate, in files of their own: a second
folder, the files of both landing together), LEFT JOIN ... FOR SYSTEM_TIME AS OF. A fifth:
the one-second tumbling count per word on processing time (``TumblingProcessingTimeWindows``
live, on Spark's processing-time mode, batches every 100 ms at most; the replay on a
``Clock`` of 1 ms a row; Flink's TUMBLE TVF on ``PROCTIME()``): its rows are the same, its
firings depend on the clock. A sixth: the regular LEFT JOIN of the words with the rates on word
and time (each rate row meets its one word row; state kept for every row of both).

- sustained: the folder read by one live run (``available_now``, ``maxFilesPerTrigger``
  files per micro-batch; on processing time, which ``available_now`` never ends, until
  ``process_all_available`` returns), rows / wall time from ``start`` to its end (the
  micro-batches' writes included);
- latency: a running query (default trigger) fed one file at a time, from the file's write
  to its changes committed in the query's table (``process_all_available`` returning):
  median and largest over the files;
- the kit's replay and Flink read the whole folder at once.

The machine's CPU pressure (``/proc/pressure/cpu``'s ``some`` share) is given for each run.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path

from pyspark.sql import functions as F

import kit
from kit.live.memory import land
from kit.time import Time
from kit.windows import Count, TumblingEventTimeWindows, TumblingProcessingTimeWindows

from .cascade import _stall_us
from .dynamic import CASCADE, _words
from .match_recognize import FLINK_PYTHON, QUERY as V_SHAPE, _flink_run

FILES = 20
PER_TRIGGER = 5
JOIN = ("WITH v AS (SELECT word, rate, t FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY word ORDER BY t DESC) "
        "AS rownum FROM rates) WHERE rownum = 1) "
        "SELECT o.word, o.t, v.rate FROM words AS o LEFT JOIN v FOR SYSTEM_TIME AS OF o.t ON o.word = v.word")
FLINK_JOIN = ("SELECT o.word, o.t, v.rate FROM words AS o LEFT JOIN v FOR SYSTEM_TIME AS OF o.ts "
              "ON o.word = v.word")
REGULAR = "SELECT o.word, o.t, r.rate FROM words AS o LEFT JOIN rates AS r ON o.word = r.word AND o.t = r.t"
WINDOW_SQL = ("SELECT word, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE words, DESCRIPTOR(ts), "
              "INTERVAL '1' SECOND)) GROUP BY word, window_start, window_end")
PROCTIME_TRIGGER = "100 milliseconds"


def _write(folder: Path, rows: int) -> Path:
    """The words as ``FILES`` CSV files (``word,t``) in time order, modification times 1 s apart."""
    out = folder / f"live_{rows}"
    if out.exists():
        return out
    words = kit.spark().read.parquet(str(_words(folder, rows)[0])).select("word", F.unix_millis("t").alias("t"))
    staging = folder / f"live_{rows}_staging"
    words.repartitionByRange(FILES, "t").sortWithinPartitions("t").write.mode("overwrite").csv(str(staging))
    out.mkdir()
    parts = sorted(staging.glob("part-*.csv"), key=lambda p: int(p.name.split("-")[1]))
    for i, part in enumerate(parts):
        target = out / f"{i:04d}.csv"
        shutil.move(str(part), target)
        os.utime(target, (1_700_000_000 + i, 1_700_000_000 + i))
    shutil.rmtree(staging)
    return out


def _rates(words: Path) -> Path:
    """Every tenth row of each file of ``words`` with a rate (``word,t,rate``), in a folder of
    its own (``<words>_rates``), a file per file of ``words``, with the same modification times."""
    out = words.with_name(words.name + "_rates")
    if out.exists():
        return out
    out.mkdir()
    for n, part in enumerate(sorted(words.glob("*.csv"))):
        lines = part.read_text().splitlines()[::10]
        target = out / part.name
        target.write_text("".join(f"{line},{(n + i) % 97}\n" for i, line in enumerate(lines)))
        os.utime(target, (part.stat().st_mtime, part.stat().st_mtime))
    return out


TICKER = "symbol STRING, rowtime TIMESTAMP, price BIGINT, tax BIGINT"
STAMPS = "yyyy-MM-dd HH:mm:ss.SSS"


def _write_ticker(folder: Path, rows: int) -> Path:
    """The ticker walk as ``FILES`` CSV files in arrival order (time, then symbol)."""
    out = folder / f"live_ticker_{rows}"
    if out.exists():
        return out
    staging = folder / f"live_ticker_{rows}_staging"
    (kit.data.ticker_walk(rows, symbols=100).repartitionByRange(FILES, "rowtime")
     .sortWithinPartitions("rowtime", "symbol").write.mode("overwrite").option("timestampFormat", STAMPS)
     .csv(str(staging)))
    out.mkdir()
    for i, part in enumerate(sorted(staging.glob("part-*.csv"), key=lambda p: int(p.name.split("-")[1]))):
        target = out / f"{i:04d}.csv"
        shutil.move(str(part), target)
        os.utime(target, (1_700_000_000 + i, 1_700_000_000 + i))
    shutil.rmtree(staging)
    return out


def _source(folder: Path, per_trigger: int, query: str = "cascade"):
    spark = kit.spark()
    if query == "match":
        return kit.live(spark.readStream.schema(TICKER).option("timestampFormat", STAMPS)
                        .option("maxFilesPerTrigger", per_trigger).csv(str(folder)), time="rowtime",
                        watermark=kit.Duration.of_millis(1))
    words = kit.live(spark.readStream.schema("word STRING, t BIGINT").option("maxFilesPerTrigger", per_trigger)
                     .csv(str(folder)), time="t")
    if query in ("join", "regular"):
        return {"words": words, "rates": kit.live(spark.readStream.schema("word STRING, t BIGINT, rate BIGINT")
                                                  .option("maxFilesPerTrigger", per_trigger)
                                                  .csv(str(folder.with_name(folder.name + "_rates"))), time="t")}
    return words


def _started(query: str, live, path: Path, trigger=None):
    if query == "cascade":
        return kit.sql(CASCADE, words=live).start(str(path), trigger=trigger)
    if query == "match":
        return kit.sql(V_SHAPE, Ticker=live).start(str(path), trigger=trigger)
    if query in ("join", "regular"):
        return kit.sql(JOIN if query == "join" else REGULAR, **live).start(str(path), trigger=trigger)
    if query == "proctime":   # available_now never ends on processing time
        return (live.key_by("word").window(TumblingProcessingTimeWindows.of(Time.seconds(1)))
                .aggregate(Count(alias="n")).start(str(path), trigger=PROCTIME_TRIGGER))
    return (live.key_by("word").window(TumblingEventTimeWindows.of(Time.seconds(1))).aggregate(Count(alias="n"))
            .start(str(path), trigger=trigger))


def _until_read(run):
    """Waits for ``run`` to end (``available_now``), or on processing time for every file to be
    read, then stops it."""
    if run.run is not None and run.run.processing:
        run.process_all_available()
        run.stop()
    else:
        run.await_termination()


def _pressure(run) -> tuple:
    stalled, start = _stall_us(), time.time()
    out = run()
    seconds = time.time() - start
    return out, seconds, (_stall_us() - stalled) / 1e4 / seconds


def _sustained(query: str, folder: Path, work: Path) -> tuple[float, float]:
    shutil.rmtree(work / query, ignore_errors=True)
    _, seconds, pressure = _pressure(lambda: _until_read(_started(query, _source(folder, PER_TRIGGER, query),
                                                                  work / query, "available_now")))
    return seconds, pressure


def _latency(query: str, folder: Path, work: Path, files: int = 5) -> list[float]:
    """Seconds from a file's write to its batch committed, for ``files`` files one at a time."""
    inbox, path = work / f"{query}_inbox", work / f"{query}_latency"
    pairs = [(folder, inbox)] + ([(folder.with_name(folder.name + "_rates"), inbox.with_name(inbox.name + "_rates"))]
                                 if query in ("join", "regular") else [])
    shutil.rmtree(path, ignore_errors=True)
    for _, box in pairs:
        shutil.rmtree(box, ignore_errors=True)
        box.mkdir(parents=True)
    run = _started(query, _source(inbox, 1, query), path)
    waits = []
    try:
        for i in range(files):
            start = time.time()
            for source, box in pairs:   # the i-th file of each folder
                part = sorted(source.glob("*.csv"))[i]
                land(box / part.name, lambda aside: shutil.copy(part, aside), 1_700_000_000 + i)
            run.process_all_available()
            waits.append(time.time() - start)
    finally:
        run.stop()
    return waits


def _replay(query: str, folder: Path) -> float:
    spark = kit.spark()
    if query == "match":
        ticker = kit.stream(spark.read.schema(TICKER).option("timestampFormat", STAMPS).csv(str(folder)),
                            time="rowtime", watermark=kit.Duration.of_millis(1))
        start = time.time()   # kit.sql runs the matcher (its errors are raised there)
        kit.sql(V_SHAPE, Ticker=ticker).write.format("noop").mode("overwrite").save()
        return time.time() - start
    words = kit.stream(spark.read.schema("word STRING, t BIGINT").csv(str(folder)), time="t")
    if query in ("join", "regular"):
        rates = kit.stream(spark.read.schema("word STRING, t BIGINT, rate BIGINT").csv(
            str(folder.with_name(folder.name + "_rates"))), time="t")
        start = time.time()
        joined = kit.sql(JOIN if query == "join" else REGULAR, words=words, rates=rates)
        (joined if query == "join" else joined.changelog()).write.format("noop").mode("overwrite").save()
        return time.time() - start
    if query == "cascade":
        frame = kit.sql(CASCADE, words=words).changelog()
    elif query == "proctime":
        clock = kit.Clock("2024-01-01T00:00:00", kit.Duration.of_millis(1))
        words = kit.stream(spark.read.schema("word STRING, t BIGINT").csv(str(folder)), time="t", proctime=clock)
        frame = words.key_by("word").window(TumblingProcessingTimeWindows.of(Time.seconds(1))).aggregate(
            Count(alias="n")).df
    else:
        frame = words.key_by("word").window(TumblingEventTimeWindows.of(Time.seconds(1))).aggregate(Count(alias="n")).df
    start = time.time()
    frame.write.format("noop").mode("overwrite").save()
    return time.time() - start


def _flink(query: str, folder: Path) -> float | None:
    if not FLINK_PYTHON.exists():
        return None
    if query == "match":
        ddl = (f"CREATE TABLE Ticker ({TICKER.replace('TIMESTAMP', 'TIMESTAMP(3)')}, WATERMARK FOR rowtime AS "
               f"rowtime - INTERVAL '0.001' SECOND) WITH ('connector' = 'filesystem', 'path' = "
               f"'{folder.resolve()}', 'format' = 'csv')")
        return _flink_run(ddl, V_SHAPE, parallelism=2, mode="streaming", sink="blackhole")["seconds"]
    ddl = (f"CREATE TABLE words (word STRING, t BIGINT, ts AS TO_TIMESTAMP_LTZ(t, 3), pt AS PROCTIME(), "
           f"WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', 'path' = '{folder.resolve()}', "
           f"'format' = 'csv')")
    if query in ("join", "regular"):
        rates = folder.with_name(folder.name + "_rates").resolve()
        ddl += (f"; CREATE TABLE rates (word STRING, t BIGINT, rate BIGINT, ts AS TO_TIMESTAMP_LTZ(t, 3), "
                f"WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', 'path' = '{rates}', 'format' = 'csv')")
        if query == "regular":   # its state outgrows the 5 MB a checkpoint may keep in the JobManager's memory
            storage = {"execution.checkpointing.storage": "filesystem",
                       "execution.checkpointing.dir": (folder.parent / "flink_checkpoints").resolve().as_uri()}
            return _flink_run(ddl, REGULAR, parallelism=2, mode="streaming", sink="blackhole",
                              options=storage)["seconds"]
        ddl += ("; CREATE VIEW v AS SELECT word, rate, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY word "
                "ORDER BY ts DESC) AS rownum FROM rates) WHERE rownum = 1")
        return _flink_run(ddl, FLINK_JOIN, parallelism=2, mode="streaming", sink="blackhole")["seconds"]
    sql = {"cascade": CASCADE,
           "proctime": WINDOW_SQL.replace("DESCRIPTOR(ts)", "DESCRIPTOR(pt)")}.get(query, WINDOW_SQL)
    return _flink_run(ddl, sql, parallelism=2, mode="streaming", sink="blackhole")["seconds"]


def live(folder: Path, rows: int | None = None) -> str:
    """The table as a markdown section."""
    folder.mkdir(parents=True, exist_ok=True)
    n = rows or 200_000
    inputs = {"cascade": _write(folder, n), "window": _write(folder, n), "match": _write_ticker(folder, n)}
    inputs["join"] = inputs["proctime"] = inputs["regular"] = _write(folder, n)
    _rates(inputs["join"])
    work = folder / "live_runs"
    lines = [f"### Live mode: {n:,} Zipf words (ticker rows for MATCH_RECOGNIZE) in {FILES} CSV files, "
             f"{PER_TRIGGER} files a micro-batch", "",
             "| query | kit live: s (CPU pressure) | kit live events/s | latency per file: median / max s "
             "| kit replay s | Flink 2.3 streaming p=2 s | live / replay | live / Flink |",
             "|---|---|---|---|---|---|---|---|"]
    for query, name in (("cascade", "cascade"), ("tumbling count", "window"), ("V-shape MATCH_RECOGNIZE", "match"),
                        ("temporal join (versioned view)", "join"), ("processing-time tumbling count", "proctime"),
                        ("regular LEFT JOIN", "regular")):
        files = inputs[name]
        seconds, pressure = _sustained(name, files, work)
        waits = _latency(name, files, work)
        replay = _replay(name, files)
        flink = _flink(name, files)
        lines.append(f"| {query} | {seconds:.1f} ({pressure:.0f} %) | {n / seconds:,.0f} | "
                     f"{statistics.median(waits):.2f} / {max(waits):.2f} | {replay:.1f} | "
                     f"{'-' if flink is None else f'{flink:.1f}'} | {seconds / replay:.1f}x | "
                     f"{'-' if flink is None else f'{seconds / flink:.1f}x'} |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"
