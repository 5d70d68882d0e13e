"""V-shape MATCH_RECOGNIZE (seed 001) on random-walk tickers: the kit vs real Flink 2.3.

The same rows (``kit.data.ticker_walk``: N rows, 100 symbols, 1 s apart) go to both as
files; each runs the seed's V-shape query; the kit's time covers reading the Parquet
input through collecting the matches on the driver, Flink's from job submission to its
last result row (its JVM start-up is reported apart). Results are compared row for row.
Each engine is timed twice over: as it first runs the query (the kit after a warm-up on 1 %
of the rows, Flink in a new JVM) and warm, its JIT having compiled the code (the kit's runs
after three full ones; Flink's job run again in the same JVM, as a session cluster that ran
it before would): Flink's first run also pays for what its JVM does once (loading classes,
JIT compiling, starting its local cluster at the first job).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import kit
from kit.java import java_home

FLINK_PYTHON = Path(__file__).resolve().parent.parent / ".venv-flink" / "bin" / "python"   # the repository's, wherever run from
MEASURES = """START_ROW.rowtime AS start_tstamp,
            LAST(PRICE_DOWN.rowtime) AS bottom_tstamp,
            LAST(PRICE_UP.rowtime) AS end_tstamp"""
QUERY = """SELECT * FROM Ticker MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            """ + MEASURES + """
        ONE ROW PER MATCH
        AFTER MATCH SKIP TO LAST PRICE_UP
        PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
        DEFINE
            PRICE_DOWN AS
                (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price) OR
                    PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
            PRICE_UP AS
                PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
    ) MR"""


def _write_inputs(folder: Path, rows: int) -> tuple[Path, Path]:
    parquet, csv = folder / f"ticker_{rows}.parquet", folder / f"ticker_{rows}_csv"
    if not parquet.exists():
        walk = kit.data.ticker_walk(rows, symbols=100)
        walk.write.parquet(str(parquet))
        # one file in arrival order (time, then symbol), as a streaming source would see it
        (kit.spark().read.parquet(str(parquet)).orderBy("rowtime", "symbol").coalesce(1).write
            .option("timestampFormat", "yyyy-MM-dd HH:mm:ss.SSS").csv(str(csv)))
    return parquet, csv


def _kit(parquet: Path) -> tuple[float, float, list]:
    """The median of three runs, then of the three after them (warm), each from reading the
    Parquet file to the matches on the driver, fetched as Arrow (``toPandas``): ``collect()``
    would add ~0.7 s of PySpark's per-row conversion for 37,612 rows."""
    ticker = kit.spark().read.parquet(str(parquet))
    # warm up: every task of the plan runs once, so each core has its Python worker started
    kit.sql(QUERY, Ticker=ticker.sample(0.01, seed=1)).toPandas()
    times = []
    for _ in range(6):
        start = time.time()
        rows = kit.sql(QUERY, Ticker=ticker).toPandas()
        times.append(time.time() - start)
    return sorted(times[:3])[1], sorted(times[3:])[1], sorted([str(v) for v in r] for r in rows.itertuples(index=False))


def _flink(csv: Path, parallelism: int, mode: str) -> dict | None:
    """Flink's run; in streaming mode the watermark trails by 1 ms, so rows of other symbols
    with the same timestamp are not late (a tie with the watermark is late in Flink's CEP)."""
    if not FLINK_PYTHON.exists():
        return None
    watermark = ", WATERMARK FOR rowtime AS rowtime - INTERVAL '0.001' SECOND" if mode == "streaming" else ""
    ddl = (f"CREATE TABLE Ticker (symbol STRING, rowtime TIMESTAMP(3), price BIGINT, tax BIGINT{watermark}) "
           f"WITH ('connector' = 'filesystem', 'path' = '{csv.resolve()}', 'format' = 'csv')")
    result = _flink_run(ddl, QUERY, parallelism, mode, again=True)
    result["rows"] = sorted([_flink_value(v) for v in r] for r in result["rows"])
    return result


def _flink_run(ddl: str, query: str, parallelism: int, mode: str, sink: str = "filesystem",
               options: dict | None = None, again: bool = False) -> dict:
    """One query on real Flink (``flink_job.py`` in ``.venv-flink``): seconds, startup, rows
    (``sink="blackhole"``: none kept, for an updating query); ``options``: Flink's, by name;
    ``again``: also ``warm``, the seconds of the job run again in the same JVM."""
    env = dict(os.environ)
    if java_home():
        env["JAVA_HOME"] = java_home()
    run = subprocess.run([str(FLINK_PYTHON), str(Path(__file__).with_name("flink_job.py")), ddl, query,
                          str(parallelism), mode, sink, json.dumps(options or {}), *["again"] * again],
                         capture_output=True, text=True, env=env, timeout=3600)
    if run.returncode != 0:
        raise RuntimeError(f"Flink failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _flink_value(text: str) -> str:
    """Flink's CAST(TIMESTAMP(3) AS STRING) gives 2024-01-01 00:00:05.000; Spark's str()
    2024-01-01 00:00:05."""
    return text[:19] if len(text) == 23 and text[10] == " " and text.endswith(".000") else text


def vshape(folder: Path, rows: int | None = None):
    """Rows of the results table: 1,000,000 rows against Flink, then 10,000,000 (kit only,
    with peak memory); ``rows`` runs that size against Flink instead."""
    folder.mkdir(parents=True, exist_ok=True)
    sizes = [(rows, True)] if rows else [(1_000_000, True), (10_000_000, False)]
    for n, against_flink in sizes:
        parquet, csv = _write_inputs(folder, n)
        kit_seconds, kit_warm, kit_rows = _kit(parquet)
        label = f"V-shape MATCH_RECOGNIZE, {n:,} rows, 100 symbols ({len(kit_rows):,} matches)"
        mine = f"{kit_seconds:.2f} s (peak {peak_memory_mb():,} MB)"
        if not against_flink or not FLINK_PYTHON.exists():
            yield [label, mine, "none run", "", "", ""]
            yield [f"{label}, warm", f"{kit_warm:.2f} s", "none run", "", "", ""]
            continue
        for mode in ("streaming", "batch"):
            flink = _flink(csv, parallelism=2, mode=mode)
            same = "yes" if flink["rows"] == kit_rows else f"NO ({len(flink['rows'])} rows)"
            yield [label, mine, f"Flink 2.3 {mode}, parallelism 2 (its JVM start, {flink['startup']:.1f} s, apart)",
                   f"{flink['seconds']:.2f} s", f"{kit_seconds / flink['seconds']:.2f}", same]
            yield [f"{label}, warm", f"{kit_warm:.2f} s", f"Flink 2.3 {mode}, the job again in the same JVM",
                   f"{flink['warm']:.2f} s", f"{kit_warm / flink['warm']:.2f}", same]


def peak_memory_mb() -> int:
    """Peak resident memory of this process plus Spark's JVM and its Python workers (Linux)."""
    def status(pid, key):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(key):
                    return int(line.split()[1])
        except OSError:
            return 0
        return 0

    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            children.setdefault(status(entry.name, "PPid:"), []).append(int(entry.name))
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += status(pid, "VmHWM:")
        todo += children.get(pid, [])
    return total // 1024
