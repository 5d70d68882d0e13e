"""The headline workloads on each deployment, and how they scale with executor cores.

``python -m benchmarks deployments [--rows N]`` writes two tables:

1. **Deployments**: each workload's seconds in local mode (``local[2]``), on a standalone
   cluster of two workers with one core each (executors in their own JVMs, the kit and its
   jar shipped by adoption) and on Spark Connect (a server on ``local[2]`` that ``kit.tools.cluster``
   starts with the kit's jar and plugin: the Java fast paths run in the server, reached
   through ``kit.jvm.bridge``). Inputs:
   N clicks (default 1M) and orders, N / 5 ticker rows, as Parquet files all three read.
2. **Scaling**: the fast paths on 10M clicks and orders (``--rows`` too) on the standalone
   cluster (two workers of two cores), its driver taking 1, 2 and 4 executor cores
   (``spark.cores.max``; the kit sets the shuffle partitions to them).

Each deployment's driver is a child process (``python -m benchmarks.deployments child``);
each workload runs once on 20,000 rows to warm up (Python workers started, jars fetched) and
is then timed once, from reading its Parquet files to Spark's ``noop`` sink. ``/proc/pressure/cpu`` (the
share of time some task waited for a CPU, last 10 s) is read after each deployment: other
work on the machine shows there.

What stays serial: a key's replay runs in one task (one hot key is one core's work: spread
it with a finer key, e.g. key and day, where the semantics allow); ``window_all`` and the
mini-batch group aggregate run in one task; a stream's arrival scan combines one small row
per input partition on the driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD_TIMEOUT = 3600   # seconds for one deployment's driver to run every workload
WARM_ROWS = 20_000     # the warm-up's inputs


def _pressure() -> str:
    """``some avg10`` of /proc/pressure/cpu: % of the last 10 s some task waited for a CPU."""
    try:
        return Path("/proc/pressure/cpu").read_text().split()[1].split("=")[1] + " %"
    except (OSError, IndexError):
        return "n/a"


def _inputs(folder: Path, rows: int) -> dict:
    """The workloads' Parquet files for ``rows`` clicks and orders (ticker: rows / 5), written
    once by a local session."""
    import kit

    from . import joins

    clicks, ticker = folder / f"deploy_clicks_{rows}.parquet", folder / f"deploy_ticker_{rows // 5}.parquet"
    if not clicks.exists():   # in arrival order, as a log would be
        (kit.data.click_stream(rows, users=1000).orderBy("arrival").coalesce(1).write
            .option("parquet.block.size", 4 << 20).parquet(str(clicks)))
    if not ticker.exists():
        kit.data.ticker_walk(rows // 5, symbols=100).write.parquet(str(ticker))
    orders, rates = joins._inputs(folder, rows)
    return {"clicks": str(clicks.resolve()), "ticker": str(ticker.resolve()), "orders": str(orders.resolve()),
            "rates": str(rates.resolve())}


def _workloads(spark, inputs: dict) -> dict:
    """Name -> a function building the workload's DataFrame."""
    import kit
    from kit.time import Duration, Time, WatermarkStrategy
    from kit.windows import Count, CountEvictor, CountTrigger, GlobalWindows, TumblingEventTimeWindows

    from .joins import QUERY as JOIN
    from .match_recognize import QUERY as VSHAPE

    def clicks():
        return kit.stream(spark.read.parquet(inputs["clicks"]), time="cTime", watermark=Duration.of_seconds(5))

    def join():
        delay = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
        orders = kit.stream(spark.read.parquet(inputs["orders"]), time="order_time", watermark=delay)
        rates = kit.stream(spark.read.parquet(inputs["rates"]), time="update_time", watermark=delay,
                           primary_key="currency")
        return kit.sql(JOIN, orders=orders, rates=rates)

    return {
        "windows: tumbling 1 min COUNT per user (fast path)":
            lambda: clicks().key_by("user").window(TumblingEventTimeWindows.of(Time.minutes(1)))
            .aggregate(Count(alias="cnt")).df,
        "windows: CountTrigger(100) + CountEvictor(10) per user (compiled operator)":
            lambda: clicks().key_by("user").window(GlobalWindows.create()).trigger(CountTrigger.of(100))
            .evictor(CountEvictor.of(10)).aggregate(Count(alias="cnt")).df,
        "temporal join, orders x 100,000 rate versions": join,
        "MATCH_RECOGNIZE V-shape, ticker (rows / 5)":
            lambda: kit.sql(VSHAPE, Ticker=spark.read.parquet(inputs["ticker"])),
        "dynamic table: GROUP BY user changelog":
            lambda: kit.sql("SELECT `user`, COUNT(*) AS c FROM clicks GROUP BY `user`", clicks=clicks()).changelog(),
    }


SCALED = ("windows: tumbling 1 min COUNT per user (fast path)",
          "windows: CountTrigger(100) + CountEvictor(10) per user (compiled operator)",
          "temporal join, orders x 100,000 rate versions")


def _child(where: str, inputs: dict, warm: dict, names: list, cores: int | None) -> None:
    """A driver on ``where`` (``local[2]``, ``spark://...``, ``sc://...``): each workload's
    seconds on ``inputs``, after a run on the small ``warm`` inputs, as JSON on stdout."""
    import warnings

    import kit

    warnings.simplefilter("ignore")
    if where.startswith("spark://"):
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master(where).config("spark.executor.memory", "1g")
        if cores:
            builder = builder.config("spark.cores.max", str(cores))
        builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false") \
            .getOrCreate()
    spark = kit.spark(master=where)
    workloads, warm_up = _workloads(spark, inputs), _workloads(spark, warm)
    seconds = {}
    for name in names:
        warm_up[name]().write.format("noop").mode("overwrite").save()   # Python workers started, jars fetched
        start = time.time()
        workloads[name]().write.format("noop").mode("overwrite").save()
        seconds[name] = round(time.time() - start, 2)
        print(f"  {where} {cores or ''}: {name}: {seconds[name]} s", file=sys.stderr, flush=True)
    print(json.dumps({"seconds": seconds, "partitions": spark.conf.get("spark.sql.shuffle.partitions")}))


def _run(where: str, inputs: dict, warm: dict, names, cores: int | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_MASTER", "KIT_SPARK_MASTER")}
    env["PYSPARK_PYTHON"] = sys.executable
    if where.startswith("local"):
        env["KIT_SPARK_MASTER"] = where
    done = subprocess.run([sys.executable, "-m", "benchmarks.deployments", "child", where, json.dumps(inputs),
                           json.dumps(warm), json.dumps(list(names)), str(cores or 0)], env=env, stdout=subprocess.PIPE, text=True,
                          timeout=CHILD_TIMEOUT, cwd=Path(__file__).parent.parent)
    if done.returncode:
        return {"seconds": {}, "error": f"exit {done.returncode}", "pressure": _pressure()}
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["pressure"] = _pressure()
    return report


def deployments(folder: Path, rows: int | None = None) -> str:
    """The two tables, as markdown."""
    from kit.tools.cluster import Cluster

    folder.mkdir(parents=True, exist_ok=True)
    n = rows or 1_000_000
    inputs, warm = _inputs(folder, n), _inputs(folder, WARM_ROWS)
    names = list(_workloads(None, inputs))
    with tempfile.TemporaryDirectory(prefix="kit-bench-cluster-") as tmp:
        with Cluster(Path(tmp) / "a", workers=2, cores=1, memory="2g", connect_master="local[2]") as cluster:
            runs = {"local (local[2])": _run("local[2]", inputs, warm, names),
                    "standalone, 2 workers x 1 core": _run(cluster.master_url, inputs, warm, names),
                    "Spark Connect (server on local[2])": _run(cluster.connect_url, inputs, warm, names)}
        lines = [f"### Deployments ({n:,} clicks and orders, {n // 5:,} ticker rows; seconds, one timed run)", "",
                 "| workload | " + " | ".join(runs) + " |", "|---|" + "---|" * len(runs)]
        for name in names:
            lines.append(f"| {name} | " + " | ".join(f"{r['seconds'][name]:.2f}" if name in r["seconds"]
                                                     else r.get("error", "-") for r in runs.values()) + " |")
        lines.append("| /proc/pressure/cpu some avg10 after | " + " | ".join(r["pressure"] for r in runs.values())
                     + " |")
        big = rows * 10 if rows else 10_000_000
        scaled = _inputs(folder, big)
        with Cluster(Path(tmp) / "b", workers=2, cores=2, memory="3g", connect=False) as cluster:
            scaling = {cores: _run(cluster.master_url, scaled, warm, SCALED, cores) for cores in (1, 2, 4)}
    lines += ["", f"### Scaling ({big:,} clicks and orders; standalone, 2 workers x 2 cores; seconds)", "",
              "| workload | " + " | ".join(f"{c} core{'s' * (c > 1)}" for c in scaling) + " | 1 → 4 cores |",
              "|---|" + "---|" * (len(scaling) + 1)]
    for name in SCALED:
        times = [r["seconds"].get(name) for r in scaling.values()]
        speedup = f"{times[0] / times[-1]:.2f}x" if times[0] and times[-1] else "-"
        lines.append(f"| {name} | " + " | ".join(f"{t:.2f}" if t else "-" for t in times) + f" | {speedup} |")
    lines.append("| /proc/pressure/cpu some avg10 after | " + " | ".join(r["pressure"] for r in scaling.values())
                 + " | |")
    lines += ["", f"Machine: {os.cpu_count()} CPUs; the 4-core run has more executor cores than the machine CPUs.",
              "Serial parts: a key's replay is one task; `window_all` and the mini-batch aggregate one task; "
              "a stream's arrival scan combines a row per input partition on the driver."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    _child(sys.argv[2], *map(json.loads, sys.argv[3:6]), int(sys.argv[6]) or None)
