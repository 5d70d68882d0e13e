"""kit.spark(): one quiet local session with the kit's settings; Spark Connect with SPARK_REMOTE."""

import importlib
import os
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

import kit
from kit.java import java_home


def test_spark_reuses_the_active_session(spark):
    assert kit.spark() is spark


def test_session_settings(spark):
    conf = spark.conf
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert int(conf.get("spark.sql.shuffle.partitions")) == max(2, os.cpu_count() or 2)
    assert conf.get("spark.ui.showConsoleProgress") == "false"
    assert spark.sparkContext.uiWebUrl is None


def test_python_workers_run_on_this_interpreter(spark):
    def where(pdf: pd.DataFrame) -> pd.DataFrame:
        import sys as worker_sys
        return pd.DataFrame({"exe": [worker_sys.executable]})

    got = spark.range(1).groupBy("id").applyInPandas(where, "exe string").collect()[0].exe
    assert Path(got).resolve() == Path(sys.executable).resolve()


def test_python_workers_start_with_the_kit_loaded(spark):
    """Forked by kit.daemon, which imported the kit's operators once: a worker that Spark
    started after stopping an idle one does not import them again."""
    assert spark.conf.get("spark.python.daemon.module") == "kit.daemon"

    def loaded(batches):
        import sys as worker_sys
        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"ok": all(m in worker_sys.modules for m in PRELOADED)}])

    import pyarrow as pa

    from kit.daemon import _PRELOADED as PRELOADED
    assert spark.range(2, numPartitions=2).mapInArrow(loaded, "ok boolean").collect() == [(True,), (True,)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def connect_server(tmp_path):
    import pyspark

    port = free_port()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    if java_home():
        env["JAVA_HOME"] = java_home()
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    log = open(tmp_path / "connect.log", "w")
    server = subprocess.Popen(
        [str(submit), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--master", "local[1]", "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
         "spark-internal"], env=env, stdout=log, stderr=log, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert server.poll() is None, (tmp_path / "connect.log").read_text()[-2000:]
        time.sleep(0.5)
    else:
        pytest.fail("Spark Connect server did not listen within 120 s")
    yield f"sc://127.0.0.1:{port}"
    os.killpg(server.pid, 15)
    server.wait(30)
    log.close()


def test_spark_remote_connects_and_streams_run_there(connect_server):
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["SPARK_REMOTE"] = connect_server
    code = textwrap.dedent("""\
        import kit
        s = kit.spark()
        assert type(s).__module__.startswith("pyspark.sql.connect"), type(s)
        df = s.createDataFrame([(10,), (9,), (10,)], "ts long")
        rows = kit.stream(df, time="ts").df.collect()
        print([(r.seq, r.watermark, r.late) for r in rows])
        from kit import jvm
        from kit.joins.asof import has_late
        assert not jvm.available(s, "LateScan") and has_late(kit.stream(df, time="ts"))   # the Python twin
        shuffled = s.range(300).selectExpr("id AS arr", "id * 10 AS t").repartition(3)
        rows = kit.stream(shuffled, time="t", order="arr").df.collect()   # sorted and kept once
        assert [(r.seq, r.arr) for r in rows] == [(i, i) for i in range(300)]
        in_order = s.range(300).selectExpr("id AS arr", "id AS t")
        assert kit.stream(in_order, time="t", order="arr").source is in_order   # checked through Arrow
        from kit.errors import KitRuntimeError
        try:
            kit.stream(s.createDataFrame([(1,), (None,)], "ts long"), time="ts").df.collect()
            raise AssertionError("a NULL time went through")
        except KitRuntimeError as e:
            assert str(e).startswith("row seq=1 has NULL event time"), str(e)
        """)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "[(0, None, False), (1, 9, True), (2, 9, False)]"


def test_failed_queries_print_no_java_stack_trace(spark, capfd):
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN"):
        kit.spark().sql("SELECT nope FROM range(1)")
    out, err = capfd.readouterr()
    assert "at org.apache.spark" not in out + err


def test_the_session_log_is_a_new_file_in_a_private_directory(spark):
    """No predictable name in the shared /tmp to be truncated or redirected by a link."""
    log = importlib.import_module("kit.spark").LOG_FILE
    assert log is not None and log.is_file() and not log.is_symlink()
    assert log.parent.name == f"flink-kit-{os.getuid()}" and log.parent.parent == Path(tempfile.gettempdir())
    assert stat.S_IMODE(os.lstat(log.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(log).st_mode) == 0o600


def test_each_session_logs_to_a_file_of_its_own(tmp_path, monkeypatch):
    module = importlib.import_module("kit.spark")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / f"flink-kit-{os.getuid()}").mkdir(mode=0o755)   # too open: made private
    logs = []
    for _ in range(2):
        monkeypatch.setattr(module, "LOG_FILE", None)
        logs.append(module.log_file())
    assert logs[0] != logs[1] and logs[0].parent == logs[1].parent == tmp_path / f"flink-kit-{os.getuid()}"
    assert stat.S_IMODE(os.lstat(logs[0].parent).st_mode) == 0o700


def test_a_link_at_the_log_directory_is_not_followed(tmp_path, monkeypatch):
    """Someone's link at <tmp>/flink-kit-<uid>: the log goes to a fresh private directory."""
    module = importlib.import_module("kit.spark")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    elsewhere.chmod(0o777)
    (tmp_path / f"flink-kit-{os.getuid()}").symlink_to(elsewhere)
    monkeypatch.setattr(module, "LOG_FILE", None)
    log = module.log_file()
    assert list(elsewhere.iterdir()) == [] and stat.S_IMODE(elsewhere.stat().st_mode) == 0o777
    assert log.parent.parent == tmp_path and log.parent.name.startswith(f"flink-kit-{os.getuid()}-")
    assert stat.S_IMODE(os.lstat(log.parent).st_mode) == 0o700


def test_old_session_logs_go_when_a_session_starts(tmp_path, monkeypatch):
    module = importlib.import_module("kit.spark")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"flink-kit-{os.getuid()}"
    folder.mkdir(mode=0o700)
    old = [folder / f"spark-2026010{d}-000000-x.log" for d in range(1, 10)] + [
        folder / f"spark-202602{d:02}-000000-x.log" for d in range(1, 20)]
    live = folder / f"spark-20250101-000000-p{os.getpid()}-x.log"     # the oldest, but its session runs
    dead = folder / "spark-20250101-000001-p999999999-x.log"         # no such process
    for log in old + [live, dead]:
        log.write_text("old")
    (folder / "notes.txt").write_text("not a log")
    monkeypatch.setattr(module, "_LOGS_KEPT", 20)
    monkeypatch.setattr(module, "LOG_FILE", None)
    new = module.log_file()
    left = sorted(p.name for p in folder.glob("spark-*.log"))
    assert left == sorted([p.name for p in old[-20:]] + [live.name, new.name]) and (folder / "notes.txt").exists()
    assert f"-p{os.getpid()}-" in new.name


def test_a_session_maps_the_class_archive_that_fits_it(spark, tmp_path, monkeypatch):
    """No archive: no options (a session never records one: that costs it ~3.5 s). The
    archive of this Java, PySpark and jar: mapped, and those of other keys removed.
    build()'s child records one where it is told to."""
    from kit import archive

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("KIT_CLASS_ARCHIVE_RECORD", raising=False)
    jar = Path("/jars/a.jar")
    assert archive.options(jar) == ""
    fits, other = archive.path(jar), archive.path(Path("/jars/b.jar"))
    assert fits.parent == tmp_path / "flink-kit" and fits != other
    fits.parent.mkdir()
    fits.write_bytes(b"classes")
    other.write_bytes(b"classes of another jar")
    used = archive.options(jar)
    assert f"-XX:SharedArchiveFile={fits} " in used and "-Xshare:auto" in used and not other.exists()
    assert "-Xlog:all=warning:stderr" in used, "the JVM's warnings go to the session's log"
    monkeypatch.setenv("KIT_CLASS_ARCHIVE_RECORD", str(tmp_path / "part"))
    assert archive.options(jar).startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'part'} ")
    assert "-XX:SharedArchiveFile" in spark.conf.get("spark.driver.extraJavaOptions") or not archive.path(
        importlib.import_module("kit.jvm").jar()).exists()
