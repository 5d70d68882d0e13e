"""The shared SparkSession: local by default, remote with ``SPARK_REMOTE``.

``spark()`` returns the active session when there is one. Otherwise it starts a local
one tuned for small, interactive jobs (the kit's typical input is a few thousand rows;
large inputs scale the same plans out):

=================================================  ==========================
setting                                            why
=================================================  ==========================
``spark.sql.session.timeZone = UTC``               timestamps mean what Flink's ``TIMESTAMP(3)`` means
``spark.sql.execution.arrow.pyspark.enabled``      pandas in and out through Arrow
``spark.sql.shuffle.partitions = <cores>``         a tiny job pays ~0.25 s with 2, ~0.42 s with 200
``spark.ui.enabled = false``, no progress bar      nothing to serve, nothing printed in cells
log4j at ERROR, JVM output to ``LOG_FILE``         no JVM warnings in notebook cells
PySpark's query-error loggers off                  no Java stack traces for a failed query
``spark.jars = <the kit's Java helpers>``          per-partition folds without a sort (``kit.jvm``)
the class archive, when built (``kit.archive``)    ~2 s off a session's start and first queries
``PYSPARK_PYTHON = sys.executable``                workers run on the same interpreter
=================================================  ==========================

Environment: ``SPARK_REMOTE`` (e.g. ``sc://host:15002``) connects to a Spark Connect
server instead; ``KIT_SPARK_MASTER`` (default ``local[*]``) and ``KIT_DRIVER_MEMORY``
(default ``4g``) tune the local session.

``LOG_FILE`` is the local session's log (the JVM's output, and why the Java helpers did not
build): a new file per session, ``spark-<date>-<time>-<random>.log``, in a directory only
the user can enter, ``<tmp>/flink-kit-<uid>`` (mode 0700; should that path be anything
else -- a link, another user's -- a fresh private directory instead). A new session
removes all but the newest 20 logs there.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path

from . import jvm
from .errors import KitError
from .java import ensure_java

__all__ = ["spark", "LOG_FILE", "log_file", "replay_tasks", "known_rows"]

LOG_FILE: Path | None = None   # the session's log, made by log_file()
_LOG4J = Path(__file__).with_name("log4j2.properties")


def _log_dir() -> Path:
    """``<tmp>/flink-kit-<uid>``, a directory of the user's that only they can enter (made
    mode 0700); when that path is something else, a new private directory beside it."""
    path = Path(tempfile.gettempdir()) / f"flink-kit-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)   # a link is not followed
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return Path(tempfile.mkdtemp(prefix=f"flink-kit-{os.getuid()}-"))
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def log_file() -> Path:
    """``LOG_FILE``, created (never an existing file, nor through a link) on first use."""
    global LOG_FILE
    if LOG_FILE is None:
        folder = _log_dir()
        for old in sorted(folder.glob("spark-*.log"))[:-_LOGS_KEPT]:   # the names sort by date
            if not _live(old):
                with contextlib.suppress(OSError):
                    old.unlink()
        fd, name = tempfile.mkstemp(prefix=time.strftime(f"spark-%Y%m%d-%H%M%S-p{os.getpid()}-"), suffix=".log",
                                    dir=folder)
        os.close(fd)
        LOG_FILE = Path(name)
    return LOG_FILE


_LOGS_KEPT = 20   # the newest session logs kept; older ones go when a session starts, but for live ones


def _live(log: Path) -> bool:
    """Whether the process that named ``log`` (``spark-<date>-<time>-p<pid>-...``) still runs:
    a session open in another notebook keeps its log however many sessions start after it."""
    found = re.match(r"spark-\d{8}-\d{6}-p(\d+)-", log.name)
    return found is not None and _alive(int(found.group(1)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):   # another user's process; a pid beyond range
        return True
    return True


def _conf() -> dict[str, str]:
    cores = os.cpu_count() or 2
    java_opts = f"-Dlog4j2.configurationFile=file:{_LOG4J}"
    return {
        "spark.app.name": "flink-kit",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.sql.shuffle.partitions": str(max(2, cores)),
        "spark.default.parallelism": str(max(2, cores)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": os.environ.get("KIT_DRIVER_MEMORY", "4g"),
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
    }


@contextlib.contextmanager
def _stderr_to(path: Path):
    """Send file descriptor 2 (what a child JVM inherits) to ``path`` for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _quiet_query_errors() -> None:
    """PySpark logs every failed query's Java stack trace to stderr as JSON; the exception
    itself still reaches the caller, so keep the log quiet."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _remote(url: str):
    from pyspark.sql import SparkSession

    try:
        session = SparkSession.builder.remote(url).getOrCreate()
    except ImportError as e:
        raise KitError(
            f"SPARK_REMOTE={url!r} needs the Spark Connect client: "
            f"pip install 'flink-kit[connect]' ({e})"
        ) from None
    session.conf.set("spark.sql.session.timeZone", "UTC")
    session.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    return session


def _local():
    from pyspark.sql import SparkSession

    from . import archive   # not imported with the kit: python -m kit.archive runs it

    ensure_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = os.environ.get("KIT_SPARK_MASTER", "local[*]")
    global LOG_FILE
    LOG_FILE = None   # a new session, a new log
    log = log_file()
    helpers = jvm.jar()   # why it did not build goes to the log
    conf = _conf()
    conf["spark.driver.extraJavaOptions"] += " " + archive.options(helpers)
    if helpers is not None:
        conf["spark.jars"] = str(helpers)
    if master.startswith("local"):   # workers run this interpreter: forked with the kit loaded
        conf["spark.python.daemon.module"] = "kit.daemon"
    builder = SparkSession.builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    _preload_charts()
    try:
        with _stderr_to(log):
            session = builder.getOrCreate()
    except Exception as e:
        raise KitError(
            f"Spark did not start ({type(e).__name__}). Last lines of {log}:\n"
            f"{_tail(log)}"
        ) from None
    session.sparkContext.setLogLevel("ERROR")
    return session


def _preload_charts() -> None:
    """Import the chart libraries (altair, vl-convert: seconds) in a thread while the JVM
    starts, so that the first chart does not wait for them."""
    import threading

    def load():
        try:
            importlib.import_module("kit.viz")
        except Exception:   # drawn later, the import raises again, where it is seen
            pass
    threading.Thread(target=load, name="kit-preload-charts", daemon=True).start()


def spark():
    """The kit's SparkSession: the active one, a Spark Connect one, or a new local one."""
    from pyspark.sql import SparkSession

    _quiet_query_errors()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    url = os.environ.get("SPARK_REMOTE")
    return _remote(url) if url else _local()


SMALL_TASK_ROWS = 10_000    # rows one Python task replays in well under a second
BIG_TASK_ROWS = 500_000     # rows one task may hold in memory


def replay_tasks(session, rows: int | None) -> int:
    """How many tasks a replay of ``rows`` input rows (None: not known) is spread over:
    one per ``SMALL_TASK_ROWS`` up to a few per core (``4 × spark.sql.shuffle.partitions``:
    groups differ in size, and a whole group goes to one task), and never more than
    ``BIG_TASK_ROWS`` per task. A task costs a Python worker's start and its share of the
    stage (~0.03 s here), so seed-sized data runs as one task.

        rows   None  50  25_000  10_000_000     (2 shuffle partitions)
        tasks     8   1       3          20
    """
    spread = 4 * int(session.conf.get("spark.sql.shuffle.partitions"))
    if rows is None:
        return spread
    return max(1, min(spread, -(-rows // SMALL_TASK_ROWS)), -(-rows // BIG_TASK_ROWS))


def known_rows(df) -> int | None:
    """The rows of ``df`` when Spark knows them without a job (the optimizer's row count:
    exact for local data), else None (also on Spark Connect, which does not say)."""
    jdf = getattr(df, "_jdf", None)
    count = jdf.queryExecution().optimizedPlan().stats().rowCount() if jdf is not None else None
    return int(count.get()) if count is not None and count.isDefined() else None
