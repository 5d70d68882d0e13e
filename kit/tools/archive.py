"""``python -m kit.tools.archive``: write the class archive of ``kit.java`` (Java's class data
sharing), which takes ~2 s off a session's start and first queries (the session 4.1 -> 2.2–2.8 s,
the first query 1.6 -> 0.8 s). Recording it costs its session ~3.5 s more, so no user session
records it: ``make lab`` runs this tool, which starts a session in a child process, runs a little
of the kit's work there, and its JVM writes the classes it loaded as it exits (~160 MB).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .. import jvm
from ..java import CLASS_ARCHIVE_RECORD, class_archive, ensure_java

__all__ = ["build"]

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


def build() -> Path | None:
    """Write the archive for this machine's Java, PySpark and kit, unless it is there; its
    path, or None when the JVM could not write it (the reason on stderr)."""
    ensure_java()
    archive = class_archive(jvm.jar())
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    part = archive.with_name(f"{archive.stem}.{os.getpid()}.part")
    try:
        done = subprocess.run([sys.executable, "-c", _WORKLOAD], env={**os.environ, CLASS_ARCHIVE_RECORD: str(part)},
                              capture_output=True, text=True, timeout=900)
        if done.returncode or not part.is_file():
            print(f"kit.tools.archive: no class archive written:\n{done.stderr[-2000:]}", file=sys.stderr)
            return None
        part.replace(archive)
        return archive
    finally:
        part.unlink(missing_ok=True)


if __name__ == "__main__":
    written = build()
    print(f"class archive: {written}" if written else "class archive: none (see above)")
