"""Each operator family's cost as its input grows (issue 43): a line per family, through the
public API only, so a cost that grows faster than the input shows.

Input: N events ``key STRING, v BIGINT, t TIMESTAMP`` (``t`` 1 ms apart, ``key`` uniform over
K keys, ``v`` uniform in 0..999), one Parquet file per shape, written once; for the joins, a
versioned side of every 100th event (``key, rate, t``, primary key ``key``) and a dimension
of one row per key (all at the first event's time). The shapes: N = 1M, 10M and 30M over 10,000 keys (the growth line), and
10M over 100,000 keys and over 10,000 keys with half the events on one hot key. Every run
writes its result to Spark's ``noop`` sink: an updating query's ``changelog()``, a window's
or a join's rows. (Flink's OVER aggregate ordered by time is not planned by the kit yet: no
line for it.) ``--rows R`` runs R, 10 R and 30 R instead (a quick look).

Columns: seconds per shape (with ``/proc/pressure/cpu``'s ``some`` share of the run), then
the growth from 1M to 10M and from 10M to 30M (10 and 3 when the cost is linear). A run that
fails (a Python worker out of memory on the hot key) is a cell saying so; the others go on.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import functions as F

import kit
from kit.time import Duration, Time
from kit.windows import Count, EventTimeSessionWindows, TumblingEventTimeWindows

from .cascade import _run

KEYS, MANY_KEYS = 10_000, 100_000
EPOCH_MS = 1_704_067_200_000   # 2024-01-01
FAMILIES = {
    "group aggregate: GROUP BY key COUNT, SUM, changelog()":
        ("SELECT key, COUNT(*) AS c, SUM(v) AS s FROM e GROUP BY key", True, "e"),
    "cascade: COUNT of COUNTs, changelog()":
        ("SELECT c, COUNT(*) AS f FROM (SELECT key, COUNT(*) AS c FROM e GROUP BY key) GROUP BY c", True, "e"),
    "Top-3 per key (ROW_NUMBER), changelog()":
        ("SELECT * FROM (SELECT key, v, t, ROW_NUMBER() OVER (PARTITION BY key ORDER BY v DESC) AS rn FROM e) "
         "WHERE rn <= 3", True, "e"),
    "deduplicate, keep first per key (ROW_NUMBER), changelog()":
        ("SELECT * FROM (SELECT key, v, t, ROW_NUMBER() OVER (PARTITION BY key ORDER BY t) AS rn FROM e) "
         "WHERE rn = 1", True, "e"),
    "window TVF: TUMBLE 1 min COUNT per key":
        ("SELECT key, window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(t), "
         "INTERVAL '1' MINUTE)) GROUP BY key, window_start, window_end", False, "e"),
    "MATCH_RECOGNIZE: V-shape over v per key":
        ("SELECT * FROM e MATCH_RECOGNIZE (PARTITION BY key ORDER BY t MEASURES FIRST(A.t) AS a_t, "
         "LAST(C.t) AS c_t ONE ROW PER MATCH AFTER MATCH SKIP TO LAST C PATTERN (A B+ C) "
         "DEFINE B AS (LAST(B.v, 1) IS NULL AND B.v < A.v) OR B.v < LAST(B.v, 1), C AS C.v > LAST(B.v, 1))", False,
         "e"),
    "interval join: versions of the key within 10 s before":
        ("SELECT e.key, e.v, r.rate FROM e, r WHERE e.key = r.key AND r.t BETWEEN e.t - INTERVAL '10' SECOND "
         "AND e.t", False, "er"),
    "temporal join: FOR SYSTEM_TIME AS OF the event's time":
        ("SELECT e.key, e.v, r.rate FROM e LEFT JOIN r FOR SYSTEM_TIME AS OF e.t ON e.key = r.key", False, "er"),
    "regular join with a dimension, changelog()":
        ("SELECT e.key, e.v, d.name FROM e JOIN d ON e.key = d.key", True, "ed"),
}


def _shape(folder: Path, rows: int, keys: int, hot: bool) -> dict:
    """The events, their versioned side and the dimension for one shape, as Parquet paths."""
    stem = folder / f"growth_{rows}_{keys}{'_hot' if hot else ''}"
    paths = {name: Path(f"{stem}_{name}.parquet") for name in ("e", "r", "d")}
    spark = kit.spark()
    ids = spark.range(rows, numPartitions=max(1, rows // 2_000_000))
    key = F.pmod(F.xxhash64("id", F.lit(1)), F.lit(keys))
    if hot:
        key = F.when(F.pmod(F.xxhash64("id", F.lit(2)), F.lit(2)) == 0, F.lit(0)).otherwise(key)
    events = ids.select(F.concat(F.lit("k"), key.cast("string")).alias("key"),
                        F.pmod(F.xxhash64("id", F.lit(3)), F.lit(1000)).alias("v"),
                        F.timestamp_millis(F.col("id") + F.lit(EPOCH_MS)).alias("t"), "id")
    if not paths["e"].exists():
        # one file, so a read keeps the time order (Spark reads the files of a folder larger
        # first), in row groups of 16 MB, so its splits hold rows to read in parallel
        events.drop("id").coalesce(1).write.option("parquet.block.size", 16 << 20).parquet(str(paths["e"]))
    if not paths["r"].exists():
        events.where("id % 100 = 0").selectExpr("key", "v AS rate", "t").coalesce(1).write.parquet(str(paths["r"]))
    if not paths["d"].exists():
        spark.range(keys).selectExpr("concat('k', CAST(id AS STRING)) AS key", "concat('name ', CAST(id AS STRING)) AS name",
                                     f"timestamp_millis({EPOCH_MS}) AS t").coalesce(1).write.parquet(str(paths["d"]))
    return {name: str(path) for name, path in paths.items()}


def _workloads(paths: dict) -> dict:
    """Family -> a function building its result's DataFrame from the files."""
    spark = kit.spark()
    delay = Duration.of_seconds(5)

    def stream(name, **more):
        return kit.stream(spark.read.parquet(paths[name]), time="t", watermark=delay, **more)

    def sql(query, updating, names):
        tables = {n: stream(n, primary_key="key") if n == "r" else stream(n) for n in names}
        out = kit.sql(query, **tables)
        return out.changelog() if updating else getattr(out, "df", out)

    work = {name: (lambda q=q, u=u, n=n: sql(q, u, n)) for name, (q, u, n) in FAMILIES.items()}
    work["DataStream tumbling 1 min Count per key (fast path)"] = \
        lambda: stream("e").key_by("key").window(TumblingEventTimeWindows.of(Time.minutes(1))) \
        .aggregate(Count(alias="c")).df
    work["DataStream session gap 30 s Count per key (general path)"] = \
        lambda: stream("e").key_by("key").window(EventTimeSessionWindows.with_gap(Time.seconds(30))) \
        .aggregate(Count(alias="c")).df
    return work


def growth(folder: Path, rows: int | None = None) -> str:
    """The table as a markdown section."""
    folder.mkdir(parents=True, exist_ok=True)
    base = rows or 1_000_000
    shapes = [(base, KEYS, False), (10 * base, KEYS, False), (30 * base, KEYS, False),
              (10 * base, MANY_KEYS, False), (10 * base, KEYS, True)]
    times = {}
    for shape in shapes:
        paths = _shape(folder, *shape)
        small = _workloads(_shape(folder, 20_000, shape[1], shape[2]))
        for name, make in _workloads(paths).items():
            try:
                small[name]().write.format("noop").mode("overwrite").save()   # warm-up: workers, JIT
                times[name, shape] = _run(make)
            except Exception as exc:   # a cell of the table, not the end of the run
                times[name, shape] = _failure(exc)
            print(name, shape, _cell(times[name, shape]), flush=True)
    heads = [f"{n:,} rows, {k:,} keys{', one hot key' if hot else ''}" for n, k, hot in shapes]
    lines = ["### Growth per operator family (seconds, CPU pressure)", "",
             "| family | " + " | ".join(heads) + f" | {heads[1].split(',')[0]} / {heads[0].split(',')[0]} | "
             f"{heads[2].split(',')[0]} / {heads[1].split(',')[0]} |", "|---" * (len(shapes) + 3) + "|"]
    for name in _workloads(_shape(folder, 20_000, KEYS, False)):
        cells = [_cell(times[name, s]) for s in shapes]
        grow = [_ratio(times[name, shapes[1]], times[name, shapes[0]]), _ratio(times[name, shapes[2]], times[name, shapes[1]])]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {grow[0]} | {grow[1]} |")
    return "\n".join(lines) + "\n"


def _failure(exc: Exception) -> str:
    """What a failed run's cell says: its error's first line (a Python worker killed for
    memory shows as Spark's "Python worker exited unexpectedly")."""
    text = str(exc).strip()
    crash = "Python worker exited unexpectedly"
    first = crash if crash in text else (text.splitlines() or [type(exc).__name__])[0][:120]
    return f"failed: {first}"


def _cell(time) -> str:
    return time if isinstance(time, str) else f"{time[0]:.2f} ({time[1]:.0f} %)"


def _ratio(later, earlier) -> str:
    return "-" if isinstance(later, str) or isinstance(earlier, str) else f"{later[0] / earlier[0]:.1f}"
