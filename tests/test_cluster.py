"""The kit beyond one machine: one pipeline of each kind on a standalone cluster (a master
and two workers, executors in their own JVMs) and on Spark Connect gives local mode's rows.

The cluster's executors and the Connect server run a Python that has the kit's dependencies
but not the kit, as a cluster's would: the kit ships itself (kit.spark.adopt). The standalone
leg starts its session the way a cluster user does (``SparkSession.builder.master(...)``), so
the kit's jar reaches the executors by adoption; the Connect leg gets ``kit.spark("sc://...")``.
Both drivers run in child processes, next to the local reference in this one. Each also reads
the SQL engine's view of E.g.1 (kit.engine): on Connect through the kit's relation plugin,
which the Connect server kit.tools.cluster starts loads (kit.jvm.bridge).
"""

import importlib
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

import kit
from kit.tools.cluster import Cluster
from kit.errors import KitError

DRIVER_TIMEOUT = 240   # seconds for a child driver to run every pipeline


def pipelines() -> dict:
    """One pipeline of each kind, by name: its rows, each as JSON, sorted."""
    from kit import Duration, WatermarkStrategy
    from kit.windows import Count, CountEvictor, CountTrigger, GlobalWindows, TumblingEventTimeWindows
    from kit.windows.state import ValueStateDescriptor
    from kit.windows.triggers import Trigger, TriggerResult

    class EveryOtherOrEnd(Trigger):   # a user's trigger: the general (Python) path
        """FIRE on every second element, and FIRE_AND_PURGE at the window's end."""
        seen = ValueStateDescriptor("seen")

        def on_element(self, element, timestamp, window, ctx):
            state = ctx.get_partitioned_state(self.seen)
            state.update((state.value() or 0) + 1)
            ctx.register_event_time_timer(window.max_timestamp())
            return TriggerResult.FIRE if state.value() % 2 == 0 else TriggerResult.CONTINUE

        def on_event_time(self, time, window, ctx):
            return TriggerResult.FIRE_AND_PURGE if time == window.max_timestamp() else TriggerResult.CONTINUE

        def clear(self, window, ctx):
            ctx.get_partitioned_state(self.seen).clear()

    def rows(df):
        return sorted(json.dumps(r.asDict(recursive=True), default=str, sort_keys=True) for r in df.collect())

    clicks = kit.stream(kit.data.load("clicks"), time="cTime", watermark=Duration.of_minutes(5))
    by_user = clicks.key_by("user")
    orders = kit.stream(kit.data.load("orders"), time="order_time",
                        watermark=WatermarkStrategy.for_sql_delay(Duration(0)))
    rates = kit.stream(kit.data.load("currency_rates"), time="update_time",
                       watermark=WatermarkStrategy.for_sql_delay(Duration.of_minutes(60)), primary_key="currency")
    return {
        "windows: CountTrigger + CountEvictor (compiled)": rows(
            by_user.window(GlobalWindows.create()).trigger(CountTrigger.of(2)).evictor(CountEvictor.of(3))
            .aggregate(Count()).df),
        "windows: a user's trigger + CountEvictor (Python)": rows(
            by_user.window(TumblingEventTimeWindows.of(kit.Time.hours(1))).trigger(EveryOtherOrEnd())
            .evictor(CountEvictor.of(2)).aggregate(Count()).df),
        "MATCH_RECOGNIZE": rows(kit.sql("""
            SELECT * FROM Ticker MATCH_RECOGNIZE (
                PARTITION BY symbol ORDER BY rowtime
                MEASURES START_ROW.rowtime AS start_tstamp, LAST(PRICE_UP.rowtime) AS end_tstamp
                AFTER MATCH SKIP TO LAST PRICE_UP
                PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
                DEFINE PRICE_DOWN AS (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price)
                                     OR PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
                       PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
            ) MR""", Ticker=kit.data.load("ticker"))),
        "temporal join": rows(kit.sql("""
            SELECT o.order_id, o.order_time, r.rate FROM orders o
            LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency""",
                                      orders=orders, rates=rates)),
        "dynamic table: GROUP BY changelog": rows(kit.sql(
            "SELECT `user`, COUNT(url) AS cnt FROM clicks GROUP BY `user`", clicks=clicks).changelog()),
    }


def engine(session, folder: Path) -> dict:
    """The SQL engine's view of E.g.1 (kit.engine), read in ``session``'s JVM: on Spark Connect
    through the kit's plugin (kit.jvm.bridge), which the Connect server kit.tools.cluster starts runs."""
    from kit.engine import codegen, eg1, rows
    from kit.engine.plan import stable_ids

    tables = eg1.tables(session, 2000, path=str(folder))
    e = kit.explain(eg1.QUERY, **tables)
    measured = eg1.measure(eg1.QUERY, tables)
    return {"text only": e.connect, "rules": e.rules.rules(), "optimized": stable_ids(e.stages["optimized"].render()),
            "physical": e.stages["physical"].kinds(), "joins": [j.strategy for j in e.joins],
            "rewrites missing": [r.name for r in eg1.rewrites(e) if not r.found],
            "codegen": list(codegen.stage_of(e.dataframe, "FilterExec", "< 1000)").operators),
            "row sizes": rows.compare(tables["t1"]).attrs["sizes"],
            "measured": [measured.rows_read, measured.rows_into_joins, measured.rows_out, measured.bytes_read > 0]}


def _drive(where: str) -> None:
    """A child driver: a session on ``where``, every pipeline, a JSON report on stdout."""
    import warnings

    from pyspark.sql import SparkSession

    from kit import jvm
    from kit.spark import ClusterWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ClusterWarning)
        if where.startswith("spark://"):   # the user's session, then the kit
            SparkSession.builder.master(where).config("spark.executor.memory", "512m") \
                .config("spark.ui.enabled", "false").getOrCreate()
        session = kit.spark(master=where)
        found = pipelines()
    report = {"rows": found, "warnings": [str(w.message) for w in caught if w.category is ClusterWarning],
              "jvm": jvm.unavailable(session), "partitions": session.conf.get("spark.sql.shuffle.partitions"),
              "batch bytes": session.conf.get("spark.sql.execution.arrow.maxBytesPerBatch")}
    if where.startswith("spark://"):
        report["shipped"] = [Path(p).name for p in session.sparkContext._python_includes]
    leg = "standalone" if where.startswith("spark://") else "connect"   # on the cluster, executors read the files
    report["engine"] = engine(session, Path(f"eg1-{leg}").resolve())
    print(json.dumps(report))


def _python_without_the_kit(folder: Path) -> str:
    """A virtual environment that sees this one's packages (a ``.pth`` line: its own ``.pth``
    files, the kit's editable install among them, are not read) but not the kit."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    check = subprocess.run([str(python), "-c", "import pandas, pyarrow, sqlglot\ntry:\n import kit\nexcept "
                            "ImportError:\n print('no kit')"], capture_output=True, text=True, cwd=folder, timeout=120)
    assert check.stdout.strip() == "no kit", check.stderr
    return str(python)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Its master listening; its workers and Connect server starting (``ready()``); one for
    the module."""
    folder = tmp_path_factory.mktemp("cluster")
    python = _python_without_the_kit(folder / "venv")
    cluster = Cluster(folder / "spark", workers=2, cores=1, memory="1g", connect_master="local[2]", python=python)
    try:
        yield cluster.start(wait=False)
    finally:
        cluster.stop()


def test_pipelines_give_local_rows_on_a_standalone_cluster_and_on_connect(spark, cluster, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_MASTER", "KIT_SPARK_MASTER")}
    env["PYSPARK_PYTHON"] = cluster.python
    drivers = {}

    def drive(where):   # its session starts while the workers (and the Connect server) do
        drivers[where] = subprocess.Popen([sys.executable, __file__, where], env=env, cwd=tmp_path, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        drive(cluster.master_url)
        cluster.ready()
        drive(cluster.connect_url)
        local = pipelines()   # meanwhile, in this process's local session
        local_engine = engine(spark, tmp_path / "local-eg1")
        reports = {}
        deadline = time.monotonic() + DRIVER_TIMEOUT
        for where, driver in drivers.items():
            out, err = driver.communicate(timeout=max(1, deadline - time.monotonic()))
            assert driver.returncode == 0, f"driver on {where} failed:\n{err[-4000:]}"
            reports[where] = json.loads(out.strip().splitlines()[-1])
    finally:
        for driver in drivers.values():
            driver.kill()
            driver.wait()
    standalone, connect = reports[cluster.master_url], reports[cluster.connect_url]
    for name, expected in local.items():
        assert expected, name
        assert standalone["rows"][name] == expected, f"standalone: {name}"
        assert connect["rows"][name] == expected, f"Spark Connect: {name}"
    # the jar reached the executors; the kit went to Python workers that lacked it; 2 cores, 2 partitions
    assert standalone["jvm"] is None and standalone["warnings"] == []
    assert [p for p in standalone["shipped"] if p.startswith("kit-")] and standalone["partitions"] == "2"
    assert standalone["batch bytes"] == connect["batch bytes"] == "2147483647"   # no bound: rows alone
    # the engine's plans, rules, code, rows and metrics: read in the cluster's driver and, through the
    # kit's plugin, in the Connect server's, as locally (bytes read count where executors read the files)
    assert local_engine["measured"][-1] and not local_engine["text only"] and local_engine["rules"]
    assert standalone["engine"] == local_engine and connect["engine"] == local_engine
    # Connect: the kit's Java helpers ran in the server (through its plugin: kit.jvm.bridge), nothing to warn of
    assert connect["jvm"] is None and connect["warnings"] == [] and connect["partitions"] == "2"


def test_spark_remote_connects_and_streams_run_there(cluster):
    """SPARK_REMOTE: kit.spark() is a Connect session; streams run there, with the kit's Java
    scans (through its plugin) and, on a session that takes the server for one without the
    plugin, with their Python twins; their errors are the kit's either way."""
    cluster.ready()
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["SPARK_REMOTE"] = cluster.connect_url
    code = textwrap.dedent("""\
        import sys, warnings
        import kit
        from kit import jvm
        from kit.errors import KitRuntimeError
        from kit.joins.asof import has_late
        from kit.spark import ClusterWarning

        def check(s, java):
            assert type(s).__module__.startswith("pyspark.sql.connect"), type(s)
            assert jvm.available(s, "LateScan") is java and jvm.available(s, "ArrivalScan") is java
            df = s.createDataFrame([(10,), (9,), (10,)], "ts long")
            rows = kit.stream(df, time="ts").df.collect()
            print([(r.seq, r.watermark, r.late) for r in rows])
            assert has_late(kit.stream(df, time="ts"))
            shuffled = s.range(300).selectExpr("id AS arr", "id * 10 AS t").repartition(3)
            rows = kit.stream(shuffled, time="t", order="arr").df.collect()   # sorted and kept once
            assert [(r.seq, r.arr) for r in rows] == [(i, i) for i in range(300)]
            in_order = s.range(300).selectExpr("id AS arr", "id AS t")
            assert kit.stream(in_order, time="t", order="arr").source is in_order   # checked in order
            try:
                kit.stream(s.createDataFrame([(1,), (None,)], "ts long"), time="ts").df.collect()
                raise AssertionError("a NULL time went through")
            except KitRuntimeError as e:
                assert str(e).startswith("row seq=1 has NULL event time"), str(e)

        java = sys.argv[1] == "java"
        if not java:   # as on a server without the plugin
            jvm.bridge.reachable = lambda s: not jvm.bridge.connect(s)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ClusterWarning)
            check(kit.spark(), java)
        said = [str(w.message) for w in caught]
        assert said == [] if java else len(said) == 1 and "no flinkkit.Bridge plugin" in said[0], said
        """)
    runs = {how: subprocess.Popen([sys.executable, "-c", code, how], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for how in ("java", "twins")}
    for how, run in runs.items():
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, f"{how}: {err[-3000:]}"
        assert out.strip() == "[(0, None, False), (1, 9, True), (2, 9, False)]", how


# ------------------------------------------------------------------ adoption, on this process's local session


def test_executors_without_the_kits_dependencies_say_what_to_set(spark, monkeypatch):
    module = importlib.import_module("kit.spark")
    monkeypatch.setitem(module._probe_namespace, "DEPENDENCIES", ("pandas", "no_such_module_here"))
    with pytest.raises(KitError, match=r"the Spark executors' Python \(.+\) lacks no_such_module_here, .*"
                                       r"Set PYSPARK_PYTHON .* pip install no_such_module_here"):
        module._check_executors(spark, 2)


def test_executors_with_another_kit_get_this_one(spark, monkeypatch):
    module = importlib.import_module("kit.spark")
    shipped = []
    monkeypatch.setattr(module, "_ship_kit", shipped.append)
    module._check_executors(spark, 2)   # the same kit: nothing to ship
    assert shipped == []
    monkeypatch.setattr(module, "_kit_fingerprint", lambda: "another kit")
    module._check_executors(spark, 2)
    assert shipped == [spark]


def test_the_shipped_kit_is_its_modules_with_their_bytecode():
    names = set(zipfile.ZipFile(importlib.import_module("kit.spark").kit_zip()).namelist())
    assert {"kit/__init__.py", "kit/__init__.pyc", "kit/windows/operator.py", "kit/windows/operator.pyc"} <= names
    assert not [n for n in names if "__pycache__" in n or not n.endswith((".py", ".pyc"))]


def test_a_session_on_another_master_is_not_taken_for_the_one_asked(spark):
    with pytest.raises(KitError, match=r"a Spark session on local\[.*\] is active; stop it \(spark.stop\(\)\) "
                                       r"before asking for one on spark://nowhere:7077"):
        kit.spark(master="spark://nowhere:7077")
    assert kit.spark(master=spark.sparkContext.master) is spark


def test_demo_compares_a_run_with_the_stored_outputs_as_nbval_does():
    """``make demo CLUSTER=1``'s check: split streams are one text, stderr (a ClusterWarning)
    and NBVAL_IGNORE_OUTPUT cells are not compared, the first line apart is named."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from kit.tools.demo import differences

    def notebook(*outputs):
        return new_notebook(cells=[new_code_cell("print(rows)", outputs=list(outputs[0])),
                                   new_code_cell("# NBVAL_IGNORE_OUTPUT\nseconds", outputs=list(outputs[1]))])

    stored = notebook([new_output("stream", name="stdout", text="a\nb\n")],
                      [new_output("execute_result", data={"text/plain": "0.25"}, execution_count=1)])
    ran = notebook([new_output("stream", name="stdout", text="a\n"), new_output("stream", name="stderr", text="w"),
                    new_output("stream", name="stdout", text="b\n")],
                   [new_output("execute_result", data={"text/plain": "0.41"}, execution_count=2)])
    assert differences(stored, ran) == {}
    ran.cells[0].outputs[2].text = "c\n"
    assert differences(stored, nbformat.from_dict(ran)) == {0: "'b' != 'c'"}


if __name__ == "__main__":
    _drive(sys.argv[1])
