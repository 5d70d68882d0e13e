"""The word-frequency cascade (seed 004) through the front door (issue 43): the kit as a user
runs it -- ``kit.sql`` over ``kit.stream`` of a file, a public entry point to Spark's ``noop``
sink -- against real Flink 2.3 streaming SQL (parallelism 2, ``blackhole`` sink) reading the
same file.

The matrix: input (CSV, JSON, Parquet; one file or eight; event time as TIMESTAMP or as
BIGINT epoch ms) x entry point (``changelog()``, ``final()``, ``to_retract_stream()``,
``to_upsert_stream()``) x mini-batch (off; size 1,000, 1 s). Each format has both time types
and both file counts among its two inputs. Every input holds the same N Zipf words (100,000
distinct; ``dynamic._words``) in arrival order, ``t`` 1 ms apart. Flink's PyPI package reads
CSV and JSON, not Parquet (its Parquet format is a Maven jar, out of reach here): a Parquet
input's baseline is Flink's fastest run over the CSV and JSON inputs. Each cell's time is
one run (after a warm-up on 1 % of the rows), reading the file included; its CPU pressure is
``/proc/pressure/cpu``'s ``some`` share of the run's wall time (the run's own two busy cores
count too). Flink runs each input twice: its event time and watermark declared as the
kit's stream has them, and the time column read and left alone (the query needs no time);
each of these jobs runs again in the same JVM (warm: its code compiled, as in a session
cluster that ran it before), and the ratio is against the fastest of the four. Flink's final
table (batch mode) is checked against the kit's for every input.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import functions as F

import kit

from .dynamic import CASCADE, MINI_BATCH, _words
from .match_recognize import FLINK_PYTHON, _flink_run

ENTRY_POINTS = ("changelog", "final", "to_retract_stream", "to_upsert_stream")
# name: (format, files, time type)
INPUTS = {"parquet, one file, TIMESTAMP": ("parquet", 1, "TIMESTAMP"),
          "parquet, 8 files, BIGINT": ("parquet", 8, "BIGINT"),
          "csv, one file, BIGINT": ("csv", 1, "BIGINT"),
          "csv, 8 files, TIMESTAMP": ("csv", 8, "TIMESTAMP"),
          "json, one file, TIMESTAMP": ("json", 1, "TIMESTAMP"),
          "json, 8 files, BIGINT": ("json", 8, "BIGINT")}
TEXT_TIME = "yyyy-MM-dd HH:mm:ss.SSS"   # a TIMESTAMP in CSV and JSON, as Flink's TIMESTAMP(3) reads it


def _write(folder: Path, rows: int, name: str) -> Path:
    """Input ``name`` of ``INPUTS``, written once from the words' Parquet file, in arrival order."""
    fmt, files, kind = INPUTS[name]
    out = folder / f"cascade_{rows}_{fmt}_{files}_{kind.lower()}"
    if out.exists():
        return out
    words = kit.spark().read.parquet(str(_words(folder, rows)[0]))
    words = words.select("word", F.unix_millis("t").alias("t") if kind == "BIGINT" else F.col("t"))
    # files=8: contiguous ranges of t, one per file, each in order
    words = words.coalesce(1) if files == 1 else words.repartitionByRange(files, "t").sortWithinPartitions("t")
    getattr(words.write.option("timestampFormat", TEXT_TIME), fmt)(str(out))
    return out


def _read(path: Path, name: str):
    fmt, _, kind = INPUTS[name]
    reader = kit.spark().read
    if fmt != "parquet":
        reader = reader.schema(f"word STRING, t {kind}").option("timestampFormat", TEXT_TIME)
    return getattr(reader, fmt)(str(path))


def _flink_ddl(path: Path, name: str, watermark: bool = True) -> str:
    """Flink's table over input ``name``: its event time and watermark declared as the kit's
    stream has them, or (``watermark=False``) the time column read and left alone."""
    fmt, _, kind = INPUTS[name]
    time_columns = f"t {'TIMESTAMP(3)' if kind == 'TIMESTAMP' else 'BIGINT'}"
    if watermark:
        time_columns = "t TIMESTAMP(3), WATERMARK FOR t AS t" if kind == "TIMESTAMP" else \
            "t BIGINT, ts AS TO_TIMESTAMP_LTZ(t, 3), WATERMARK FOR ts AS ts"
    return (f"CREATE TABLE words (word STRING, {time_columns}) WITH ('connector' = 'filesystem', "
            f"'path' = '{path.resolve()}', 'format' = '{fmt}')")


def _stall_us() -> int:
    """Microseconds some task has waited for a CPU since boot (0 where not known)."""
    try:
        return int(Path("/proc/pressure/cpu").read_text().split()[4].split("=")[1])
    except (OSError, IndexError, ValueError):
        return 0


def _run(make) -> tuple[float, float]:
    """Seconds to build and write ``make()``'s DataFrame to the ``noop`` sink, and the share
    (%) of them some task waited for a CPU."""
    kit.spark()._jvm.System.gc()   # a collected heap and the last run's shuffle files cleaned up
    time.sleep(1)
    stalled, start = _stall_us(), time.time()
    make().write.format("noop").mode("overwrite").save()
    seconds = time.time() - start
    return seconds, (_stall_us() - stalled) / 1e4 / seconds


def _flink(path: Path, name: str, options: dict | None) -> tuple[float, float, float, float, float]:
    """Flink's seconds with the watermark declared and without (the query needs none), each
    first in a new JVM and then again in it (warm), and the CPU pressure of those runs."""
    runs, pressure = [], []
    for watermark in (True, False):
        stalled, start = _stall_us(), time.time()
        run = _flink_run(_flink_ddl(path, name, watermark), CASCADE, parallelism=2, mode="streaming",
                         sink="blackhole", options=options, again=True)
        runs.append((run["seconds"], run["warm"]))
        pressure.append((_stall_us() - stalled) / 1e4 / (time.time() - start))
    return runs[0][0], runs[1][0], runs[0][1], runs[1][1], max(pressure)


def cascade(folder: Path, rows: int | None = None) -> str:
    """The matrix as a markdown section."""
    folder.mkdir(parents=True, exist_ok=True)
    n = rows or 10_000_000
    paths = {name: _write(folder, n, name) for name in INPUTS}
    flink_reads = [name for name in INPUTS if INPUTS[name][0] != "parquet"]
    if FLINK_PYTHON.exists():
        truth = sorted((int(a), int(b)) for a, b in _flink_run(_flink_ddl(paths[flink_reads[0]], flink_reads[0]),
                                                                CASCADE, parallelism=2, mode="batch")["rows"])
    lines = [f"### Word-frequency cascade through the public API, {n:,} Zipf words (100,000 distinct)", "",
             "| input | mini-batch | Flink 2.3 streaming, p=2: watermark declared / not; warm: each again in its JVM "
             "(CPU pressure) | entry point "
             "| kit (CPU pressure) | kit M rows/s | kit / Flink's fastest | final table = Flink batch |",
             "|---|---|---|---|---|---|---|---|"]
    for mini_batch in (None, MINI_BATCH):
        flink = {name: _flink(paths[name], name, mini_batch) for name in flink_reads} if FLINK_PYTHON.exists() else {}
        for name, path in paths.items():
            def query():
                return kit.sql(CASCADE, words=kit.stream(_read(path, name), time="t"), config=mini_batch)

            warm = _read(path, name).sample(0.01, seed=1)
            kit.sql(CASCADE, words=kit.stream(warm, time="t"), config=mini_batch).changelog().count()
            same = sorted((int(a), int(b)) for a, b in query().final().collect()) == truth if flink else "n/a"
            base = flink.get(name) or min(flink.values(), key=lambda f: min(f[:4]), default=None)
            flink_cell = "none run (no .venv-flink)" if base is None else \
                f"{base[0]:.2f} s / {base[1]:.2f} s; warm {base[2]:.2f} s / {base[3]:.2f} s ({base[4]:.0f} %)" + (
                    "" if name in flink else ", its fastest input")
            for entry in ENTRY_POINTS:
                seconds, pressure = _run(lambda: getattr(query(), entry)())
                fastest = None if base is None else min(base[:4])
                ratio = "" if base is None else f"{seconds / fastest:.2f} ({fastest / seconds:.1f}x faster)"
                lines.append(f"| {name} | {'on' if mini_batch else 'off'} | {flink_cell} | {entry}() | "
                             f"{seconds:.2f} s ({pressure:.0f} %) | {n / seconds / 1e6:.2f} | {ratio} | {same} |")
                print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"
