"""kit.spark(): one quiet local session with the kit's settings (Spark Connect with SPARK_REMOTE: test_cluster.py)."""

import gc
import importlib
import os
import stat
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

import kit


def test_spark_reuses_the_active_session(spark):
    assert kit.spark() is spark


def test_session_settings(spark):
    conf = spark.conf
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert int(conf.get("spark.sql.shuffle.partitions")) == max(2, os.cpu_count() or 2)
    assert conf.get("spark.sql.execution.arrow.maxBytesPerBatch") == "2147483647"   # no per-row size check
    assert conf.get("spark.ui.showConsoleProgress") == "false"
    assert spark.sparkContext.uiWebUrl is None
    heap = spark.sparkContext.getConf().get("spark.driver.memory")   # reserved at start
    assert f"-Xms{heap}" in spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    collectors = [b.getName() for b in spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()]
    assert set(collectors) == {"PS MarkSweep", "PS Scavenge"} or "GC" in os.environ.get("KIT_DRIVER_JAVA_OPTIONS", "")


@pytest.mark.parametrize("own, master, collector", [
    (None, "local[*]", True), ("-XX:TieredStopAtLevel=1", "local[2]", True),
    ("-XX:+UseG1GC -Xss4m", "local[*]", False), ("-XX:+UseZGC", "local[*]", False),
    (None, "spark://host:7077", False)])
def test_a_local_session_runs_the_throughput_collector_unless_told_another(monkeypatch, own, master, collector):
    if own is None:
        monkeypatch.delenv("KIT_DRIVER_JAVA_OPTIONS", raising=False)
    else:
        monkeypatch.setenv("KIT_DRIVER_JAVA_OPTIONS", own)
    options = sys.modules["kit.spark"]._conf(master)["spark.driver.extraJavaOptions"]
    assert ("-XX:+UseParallelGC" in options) == collector and (own or "") in options


def test_local_files_get_hadoops_permissions_through_java_nio(spark, tmp_path):
    """The local file system (``flinkkit.LocalFileSystem``) leaves the modes Hadoop's would,
    set through java.nio: a file, a directory made with a mode (under the umask), a mode
    set later; a sticky bit goes to Hadoop's own way (a ``chmod`` process)."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    assert fs.getClass().getName() == "flinkkit.LocalFileSystem"
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass").endswith(
        "FileSystemBasedCheckpointFileManager")
    path = jvm.org.apache.hadoop.fs.Path
    mode = jvm.org.apache.hadoop.fs.permission.FsPermission
    umask = os.umask(0)
    os.umask(umask)
    out = fs.create(path(str(tmp_path / "a" / "f")))
    out.write(b"x")
    out.close()
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "f").st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o777 & ~umask
    fs.mkdirs(path(str(tmp_path / "d")), mode(0o750))
    assert stat.S_IMODE(os.stat(tmp_path / "d").st_mode) == 0o750 & ~umask
    fs.setPermission(path(str(tmp_path / "a" / "f")), mode(0o604))
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "f").st_mode) == 0o604
    fs.setPermission(path(str(tmp_path / "d")), mode(0o1777))
    assert stat.S_IMODE(os.stat(tmp_path / "d").st_mode) == 0o1777
    assert (tmp_path / "a" / ".f.crc").is_file()   # checksums as before
    spark.range(3).write.parquet(str(tmp_path / "p"))   # Spark's writes go through it
    assert sorted(r.id for r in spark.read.parquet(str(tmp_path / "p")).collect()) == [0, 1, 2]


def test_python_workers_run_on_this_interpreter(spark):
    def where(pdf: pd.DataFrame) -> pd.DataFrame:
        import sys as worker_sys
        return pd.DataFrame({"exe": [worker_sys.executable]})

    got = spark.range(1).groupBy("id").applyInPandas(where, "exe string").collect()[0].exe
    assert Path(got).resolve() == Path(sys.executable).resolve()


def test_python_workers_import_the_installed_pyspark_not_sparks_zip(spark):
    """Spark puts its zips of PySpark and py4j first on a worker's path; their modules are
    compiled in every new process (~0.5 s): the workers run this interpreter through
    ``worker_python()``, which takes them off, and import the installed packages."""
    import pyspark

    def origin(pdf: pd.DataFrame) -> pd.DataFrame:
        import py4j as worker_py4j
        import pyspark as worker_pyspark
        return pd.DataFrame({"files": [f"{worker_pyspark.__file__} {worker_py4j.__file__}"]})

    got = spark.range(1).groupBy("id").applyInPandas(origin, "files string").collect()[0].files
    assert ".zip" not in got and got.split()[0] == pyspark.__file__, got


def test_the_worker_script_keeps_the_rest_of_the_path(tmp_path):
    """The script takes exactly Spark's two zips off PYTHONPATH; other entries stay, in order,
    whatever their characters."""
    import subprocess

    import pyspark

    from kit.spark import worker_python

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    odd = tmp_path / "a dir with 'quotes' and *"
    given = [str(lib / "pyspark.zip"), "/x/y", str(lib / "py4j-0.10.9.9-src.zip"), str(odd), str(lib / "other.zip")]
    out = subprocess.run([worker_python(), "-c", "import os; print(os.environ['PYTHONPATH'])"], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(given)})
    assert out.stdout.strip().split(os.pathsep) == ["/x/y", str(odd), str(lib / "other.zip")]
    assert stat.S_IMODE(os.stat(worker_python()).st_mode) == 0o700


def test_a_worker_script_removed_is_written_again(spark):
    """A long-lived kernel outlives what a temporary-file cleaner leaves: the next session
    (or live query) gets the script written again, not a path that runs nothing."""
    from kit.spark import worker_python

    path = worker_python()
    os.unlink(path)
    assert worker_python() == path and os.access(path, os.X_OK)


def test_python_workers_start_with_the_kit_loaded(spark):
    """Forked by kit.tools.daemon, which imported the kit's operators once: a worker that Spark
    started after stopping an idle one does not import them again."""
    assert spark.conf.get("spark.python.daemon.module") == "kit.tools.daemon"

    def loaded(batches):
        import sys as worker_sys
        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"ok": all(m in worker_sys.modules for m in PRELOADED)}])

    import pyarrow as pa

    from kit.tools.daemon import PRELOADED
    assert spark.range(2, numPartitions=2).mapInArrow(loaded, "ok boolean").collect() == [(True,), (True,)]


def test_what_workers_start_with_is_frozen_so_the_collection_after_each_task_skips_it(spark):
    """PySpark's daemon runs a full gc.collect() after every task of a reused worker: over the
    preloaded modules' objects that took ~25 ms a task; frozen (gc.freeze), it walks what the
    tasks made."""
    def frozen(batches):
        import gc as worker_gc
        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"frozen": worker_gc.get_freeze_count()}])

    import pyarrow as pa

    counts = [r.frozen for r in spark.range(2, numPartitions=2).mapInArrow(frozen, "frozen long").collect()]
    assert all(n > 50_000 for n in counts), counts
    importlib.import_module("kit.tools.daemon")
    assert gc.get_freeze_count() == 0, "importing the daemon's module freezes nothing in the driver"


def test_a_new_workers_cache_invalidation_leaves_sparks_archives_be(spark):
    """A new worker calls importlib.invalidate_caches(), which read the directories of
    Spark's archives on its path again (0.37 s a worker: spark-core's jar mostly): in the
    daemon's workers their finders keep what they read; other finders are invalidated."""
    def check(batches):
        import importlib as worker_importlib
        import sys as worker_sys
        import zipimport
        for _ in batches:
            archives = {k: (v, v._files) for k, v in worker_sys.path_importer_cache.items()
                        if isinstance(v, zipimport.zipimporter)}   # _files: the directory it read
            others = [v for v in worker_sys.path_importer_cache.values() if hasattr(v, "_path_mtime")]
            for finder in others:
                finder._path_mtime = 1   # what an invalidation resets
            worker_importlib.invalidate_caches()
            yield pa.RecordBatch.from_pylist([{
                "archives": len(archives),
                "kept": all(worker_sys.path_importer_cache.get(k) is v and v._files is files
                            for k, (v, files) in archives.items()),
                "others": len(others) > 0 and all(f._path_mtime == -1 for f in others)}])

    import pyarrow as pa

    got = spark.range(1, numPartitions=1).mapInArrow(check, "archives long, kept boolean, others boolean").collect()
    assert got[0].archives > 0 and got[0].kept and got[0].others, got


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


def test_the_warehouse_is_in_the_kits_private_directory_not_the_working_one(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spark.sql("CREATE TABLE IF NOT EXISTS kit_test_warehouse (x INT) USING parquet")
    try:
        log = importlib.import_module("kit.spark").LOG_FILE
        assert spark.conf.get("spark.sql.warehouse.dir").endswith(f"{log.parent}/spark-warehouse")
        assert list(tmp_path.iterdir()) == []
    finally:
        spark.sql("DROP TABLE IF EXISTS kit_test_warehouse")


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
    kit.tools.archive's child records one where it is told to."""
    from kit import java

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(java.CLASS_ARCHIVE_RECORD, raising=False)
    jar = Path("/jars/a.jar")
    assert java.class_archive_options(jar) == ""
    fits, other = java.class_archive(jar), java.class_archive(Path("/jars/b.jar"))
    assert fits.parent == tmp_path / "flink-kit" and fits != other
    fits.parent.mkdir()
    fits.write_bytes(b"classes")
    other.write_bytes(b"classes of another jar")
    used = java.class_archive_options(jar)
    assert f"-XX:SharedArchiveFile={fits} " in used and "-Xshare:auto" in used and not other.exists()
    assert "-Xlog:all=warning:stderr" in used, "the JVM's warnings go to the session's log"
    monkeypatch.setenv("KIT_CLASS_ARCHIVE_RECORD", str(tmp_path / "part"))
    assert java.class_archive_options(jar).startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'part'} ")
    assert "-XX:SharedArchiveFile" in spark.conf.get("spark.driver.extraJavaOptions") or not java.class_archive(
        importlib.import_module("kit.jvm").jar()).exists()


def test_what_preload_names_is_imported_in_the_background_as_a_session_starts(tmp_path, monkeypatch):
    """kit/__init__.py names the charts (kit.viz), which kit.spark may not import itself."""
    import threading

    module = importlib.import_module("kit.spark")
    (tmp_path / "kit_preload_probe.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(module, "_PRELOAD", [])
    module.preload("kit_preload_probe", "kit_preload_probe", "kit_no_such_module")
    assert module._PRELOAD == ["kit_preload_probe", "kit_no_such_module"]
    module._preload()
    for thread in threading.enumerate():
        if thread.name == "kit-preload":
            thread.join(30)
    assert sys.modules.pop("kit_preload_probe").LOADED
