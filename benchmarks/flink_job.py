"""Run one query on real Apache Flink (PyFlink) and print its timing as JSON.

Runs inside the benchmark's own environment (``.venv-flink``, apache-flink from PyPI):
``python flink_job.py <ddl> <query> <parallelism> <batch|streaming>``. Prints ``{"seconds": query time,
"startup": environment start, "rows": [...]}``; the query time runs from submission to
the last result row.
"""

import json
import sys
import time

started = time.time()
from pyflink.table import EnvironmentSettings, TableEnvironment  # noqa: E402

ddl, query, parallelism, mode = sys.argv[1:5]
settings = EnvironmentSettings.in_batch_mode() if mode == "batch" else EnvironmentSettings.in_streaming_mode()
env = TableEnvironment.create(settings)
env.get_config().set("parallelism.default", parallelism)
env.execute_sql(ddl)
ready = time.time()
rows = [list(map(str, row)) for row in env.execute_sql(query).collect()]
done = time.time()
print(json.dumps({"seconds": done - ready, "startup": ready - started, "rows": rows}))
