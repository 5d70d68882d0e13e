"""The class archive: Java's class data sharing for the kit's Spark sessions.

A Spark session's JVM loads and checks thousands of classes as it starts and runs its
first queries. Mapped from an archive written once, they take ~2 s less here (the session
4.1 -> 2.2–2.8 s, the first query 1.6 -> 0.8 s). Recording the archive costs its session
~3.5 s more, so no user session records it: ``python -m kit.archive`` (``make lab`` runs
it) starts a session in a child process, runs a little of the kit's work there, and its
JVM writes the classes it loaded as it exits.

    <cache>/classes-<key>.jsa     key: the Java, PySpark and the kit's jar it fits

``options`` gives a session's driver JVM the archive that fits it, if there is one; the JVM
checks it (CRC) and runs without it when it does not fit. Archives of other keys are
removed when a session starts. ~160 MB on disk.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .java import _cache_dir, ensure_java

__all__ = ["path", "options", "build"]

_RECORD = "KIT_CLASS_ARCHIVE_RECORD"   # set by build() for its child: where the JVM writes the classes
_QUIET = "-Xlog:disable -Xlog:all=warning:stderr"   # the JVM's warnings (classes it skips) to the log

_WORKLOAD = """
import kit
from kit import Duration, Time
from kit.windows import Count, EventTimeSessionWindows, TumblingEventTimeWindows
from pyspark import SparkContext

spark = kit.spark()
clicks = kit.data.load("clicks")
clicks.toPandas()
stream = kit.stream(clicks, time="cTime", watermark=Duration.of_minutes(5))
stream.df.toPandas()
keyed = stream.key_by("user")
keyed.window(TumblingEventTimeWindows.of(Time.hours(1))).aggregate(Count()).df.toPandas()
keyed.window(EventTimeSessionWindows.with_gap(Time.minutes(30))).process(
    lambda user, ctx, xs: [(len(list(xs)),)], output_type="n bigint").df.toPandas()
kit.sql('''SELECT `user`, window_start, COUNT(url) AS n
           FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' HOUR))
           GROUP BY `user`, window_start, window_end''', clicks=stream).toPandas()
jvm = SparkContext._gateway.proc
spark.stop()
jvm.stdin.close()   # the JVM exits, writing the archive
jvm.wait(timeout=600)
"""


def path(helpers: Path | None) -> Path:
    """Where the archive for this Java (``JAVA_HOME`` as ``ensure_java`` set it), PySpark and
    the kit's jar ``helpers`` lives."""
    java = os.path.realpath(os.environ.get("JAVA_HOME") or shutil.which("java") or "java")
    import pyspark

    key = hashlib.sha256(f"{java}|{pyspark.__version__}|{helpers}".encode()).hexdigest()[:16]
    return _cache_dir() / f"classes-{key}.jsa"


def options(helpers: Path | None) -> str:
    """The driver JVM's options: map the archive that fits, when there is one (archives of
    other keys removed), or record one where ``build`` asks to; else none (also where the
    cache cannot be read or written)."""
    record = os.environ.get(_RECORD)
    if record:
        return f"-XX:ArchiveClassesAtExit={record} -XX:+VerifySharedSpaces {_QUIET}"
    try:
        archive = path(helpers)
        for other in archive.parent.glob("classes-*.jsa"):
            if other != archive:
                other.unlink(missing_ok=True)
        fits = archive.is_file()
    except OSError:
        return ""
    return f"-XX:SharedArchiveFile={archive} -XX:+VerifySharedSpaces -Xshare:auto {_QUIET}" if fits else ""


def build() -> Path | None:
    """Write the archive for this machine's Java, PySpark and kit, unless it is there; its
    path, or None when the JVM could not write it (the reason on stderr)."""
    from . import jvm

    ensure_java()
    archive = path(jvm.jar())
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    part = archive.with_name(f"{archive.stem}.{os.getpid()}.part")
    try:
        done = subprocess.run([sys.executable, "-c", _WORKLOAD], env={**os.environ, _RECORD: str(part)},
                              capture_output=True, text=True, timeout=900)
        if done.returncode or not part.is_file():
            print(f"kit.archive: no class archive written:\n{done.stderr[-2000:]}", file=sys.stderr)
            return None
        part.replace(archive)
        return archive
    finally:
        part.unlink(missing_ok=True)


if __name__ == "__main__":
    written = build()
    print(f"class archive: {written}" if written else "class archive: none (see above)")
