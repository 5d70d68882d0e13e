"""Run one query on real Apache Flink (PyFlink) and print its timing as JSON.

Runs inside the benchmark's own environment (``.venv-flink``, apache-flink from PyPI):
``python flink_job.py <ddl> <query> <parallelism> <batch|streaming> [<sink> [<options as JSON> [again]]]``
(``ddl``: statements separated by ``;``). The query's
rows go to a CSV filesystem sink (every column cast to STRING), so the time is the job's own,
from submission until the sink has committed, not a per-row round trip to Python
(``TableResult.collect()``). Prints ``{"seconds": job time, "startup": environment start,
"rows": [...]}``; the rows are read back from the sink's files afterwards. With ``again``, the
job runs a second time in the same JVM once the first is done (its code compiled by then, as
in a session cluster that has run it before): ``"warm"`` is that run's seconds, its rows
discarded. With ``sink``
``blackhole`` (an updating query: a file sink takes inserts only) they go to Flink's
``blackhole`` sink, which takes every change and keeps none: ``rows`` is empty.
"""

import csv
import json
import sys
import tempfile
import time
from pathlib import Path

started = time.time()
from pyflink.table import EnvironmentSettings, TableEnvironment  # noqa: E402

ddl, query, parallelism, mode = sys.argv[1:5]
sink = sys.argv[5] if len(sys.argv) > 5 else "filesystem"
options = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
again = len(sys.argv) > 7 and sys.argv[7] == "again"
settings = EnvironmentSettings.in_batch_mode() if mode == "batch" else EnvironmentSettings.in_streaming_mode()
env = TableEnvironment.create(settings)
env.get_config().set("parallelism.default", parallelism)
for name, value in options.items():
    env.get_config().set(name, str(value))
if mode == "streaming":   # a streaming file sink commits its files on checkpoints (the last one at end of input)
    env.get_config().set("execution.checkpointing.interval", "1 s")
for statement in ddl.split(";"):   # the tables (and views) the query reads
    if statement.strip():
        env.execute_sql(statement)
names = env.sql_query(query).get_schema().get_field_names()
out = Path(tempfile.mkdtemp(prefix="flink-kit-bench-"))
options = f"'connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv'" if sink == "filesystem" else \
    "'connector' = 'blackhole'"
env.execute_sql(f"CREATE TABLE kit_sink ({', '.join(f'`{n}` STRING' for n in names)}) WITH ({options})")
columns = ", ".join(f"CAST(`{n}` AS STRING)" for n in names)
insert = f"INSERT INTO kit_sink SELECT {columns} FROM ({query})"
ready = time.time()
env.execute_sql(insert).wait()
done = time.time()
rows = [row for f in sorted(out.rglob("*")) if f.is_file() and not f.name.startswith(".")
        for row in csv.reader(f.open())]
result = {"seconds": done - ready, "startup": ready - started, "rows": rows}
if again:
    start = time.time()
    env.execute_sql(insert).wait()
    result["warm"] = time.time() - start
print(json.dumps(result))
