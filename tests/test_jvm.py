"""The kit's Java helpers (kit/jvm): built once, cached, and left out when they do not build."""

import hashlib
import zipfile

from kit import jvm


def test_the_java_helpers_are_built_once_and_cached(spark):
    built = jvm.jar()
    assert built is not None and built.exists() and jvm.jar() == built
    assert spark.conf.get("spark.jars") == str(built) and jvm.available(spark, "LateScan")


def test_a_cached_jar_whose_bytes_changed_is_built_anew(tmp_path, monkeypatch):
    """The jar is found by name, and its name ends with a hash of its bytes, checked."""
    monkeypatch.setattr(jvm, "cache_dir", lambda: tmp_path / "cache")
    built = jvm.jar()
    assert jvm.jar() == built   # cached
    built.write_bytes(built.read_bytes()[:-10] + b"tampered!!")   # same name, other bytes
    again = jvm.jar()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [again.name]
    assert again.name.endswith(f"-{hashlib.sha256(again.read_bytes()).hexdigest()[:16]}.jar")
    assert "flinkkit/WindowOperator.class" in zipfile.ZipFile(again).namelist()


def test_a_dangling_link_at_the_cached_jars_name_is_built_anew(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm, "cache_dir", lambda: tmp_path / "cache")
    built = jvm.jar()
    built.unlink()
    built.symlink_to(tmp_path / "gone.jar")   # dangling
    again = jvm.jar()
    assert again.is_file() and not again.is_symlink()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [again.name]


def test_the_java_helpers_that_do_not_compile_leave_the_python_twins(tmp_path, monkeypatch):
    broken = tmp_path / "Broken.java"
    broken.write_text("package flinkkit; public class Broken { int f() { return \"no\"; } }")
    monkeypatch.setattr(jvm, "_SOURCES", [broken])
    monkeypatch.setattr(jvm, "cache_dir", lambda: tmp_path / "cache")
    log = tmp_path / "spark.log"
    assert jvm.jar(lambda: log) is None
    assert "the Java helpers did not compile" in log.read_text() and "Broken.java" in log.read_text()
    assert not (tmp_path / "cache").exists()


def test_a_java_that_does_not_run_leaves_the_python_twins(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    monkeypatch.setattr(jvm, "cache_dir", lambda: tmp_path / "cache")
    log = tmp_path / "spark.log"
    monkeypatch.setattr(jvm, "_SOURCES", [tmp_path / "Changed.java"])   # a new hash: nothing cached
    (tmp_path / "Changed.java").write_text("package flinkkit; public class Changed {}")
    assert jvm.jar(lambda: log) is None
    assert "the Java helpers did not compile" in log.read_text() and "no-java" in log.read_text()


def test_without_a_log_why_the_java_helpers_did_not_compile_goes_to_stderr(tmp_path, monkeypatch, capsys):
    """As the tools (kit.tools.cluster, kit.tools.archive) call it; a session passes its log."""
    broken = tmp_path / "Broken.java"
    broken.write_text("package flinkkit; public class Broken { int f() { return \"no\"; } }")
    monkeypatch.setattr(jvm, "_SOURCES", [broken])
    monkeypatch.setattr(jvm, "cache_dir", lambda: tmp_path / "cache")
    assert jvm.jar() is None
    assert "the Java helpers did not compile" in capsys.readouterr().err
