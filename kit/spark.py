"""The shared SparkSession: local by default, a cluster or Spark Connect when asked.

``spark()`` returns the active session when there is one (adopted, below). Otherwise it
starts one: on Spark Connect with ``master="sc://..."`` or ``SPARK_REMOTE``; on a cluster
with ``master="spark://..."`` (or ``yarn``, ``k8s://...``) or ``SPARK_MASTER``; else a local
one tuned for small, interactive jobs (the kit's typical input is a few thousand rows;
large inputs scale the same plans out):

=================================================  ==========================
setting                                            why
=================================================  ==========================
``spark.sql.session.timeZone = UTC``               timestamps mean what Flink's ``TIMESTAMP(3)`` means
``spark.sql.execution.arrow.pyspark.enabled``      pandas in and out through Arrow
``spark.sql.shuffle.partitions = <cores>``         a tiny job pays ~0.25 s with 2, ~0.42 s with 200
``spark.sql.execution.arrow.maxBytesPerBatch``     Arrow batches to Python bounded by rows alone
``= 2147483647`` (no bound)                        (10,000), as before Spark 4.0: its 64 MB bound
                                                   measures the batch at every row, ~20 % of a
                                                   task's JVM time into ``mapInArrow``
``spark.ui.enabled = false``, no progress bar      nothing to serve, nothing printed in cells
log4j at ERROR, JVM output to ``LOG_FILE``         no JVM warnings in notebook cells
PySpark's query-error loggers off                  no Java stack traces for a failed query
``spark.jars = <the kit's Java helpers>``          per-partition folds without a sort (``kit.jvm``)
the class archive, when built (``kit.java``)       ~2 s off a session's start and first queries
``PYSPARK_PYTHON = sys.executable``                workers run on the same interpreter; a local
                                                   session's through ``worker_python()``
``spark.sql.warehouse.dir`` in the log's folder    no ``spark-warehouse/`` beside the notebooks
``_LOCAL_FILES``, a local session's                no ``chmod`` process per file made, no
                                                   ``readlink`` per checkpoint rename
the driver's heap reserved at start (``-Xms``)     as Flink's TaskManagers: a full GC does not
                                                   shrink it for the next big job to regrow
a local session's JVM on ``-XX:+UseParallelGC``    the throughput collector: on a few cores the
(unless ``KIT_DRIVER_JAVA_OPTIONS`` names one)     kit's JVM passes ran ~10 % faster than on G1
                                                   (10M-word cascade 3.1-3.3 s -> 2.8-3.0 s)
=================================================  ==========================

Environment: ``SPARK_REMOTE`` (e.g. ``sc://host:15002``) connects to a Spark Connect
server instead; ``SPARK_MASTER`` (or ``KIT_SPARK_MASTER``; default ``local[*]``) is the
master of a session the kit starts, ``KIT_DRIVER_MEMORY`` (default ``4g``) its driver's memory,
``KIT_DRIVER_JAVA_OPTIONS`` more options for its driver's JVM (``make test`` sets
``-XX:TieredStopAtLevel=1``: short jobs spend less CPU compiling than they gain).
A cluster session gets the same settings but the shuffle partitions (set on adoption, from
the executors' cores) and the local-only ones (the Python daemon, the executors' log4j file).

A session the kit did not start locally is *adopted* once (``adopt``), as a cluster user needs:

- its SQL settings: UTC and Arrow as above; ``spark.sql.shuffle.partitions`` to the executors'
  cores (at least 2; those registered once the check below ran) when it is still Spark's
  default of 200, and Arrow's batches to Python bounded by rows alone when their byte bound is
  still Spark's default -- a value the user chose is kept;
- its executors' Python is checked by a small job: without pandas, numpy, pyarrow or sqlglot
  it raises ``KitError`` saying to set ``PYSPARK_PYTHON``; without the kit (or another version
  of it) the kit ships itself, a zip of its modules (``addPyFile``; on Connect ``addArtifacts``);
- the kit's Java helpers reach the executors (``kit.jvm.attach``; on Spark Connect, the
  server's, through the kit's plugin: ``kit.jvm.bridge``); where they cannot -- a Connect
  server without the plugin -- one ``ClusterWarning`` says which fast paths run their Python
  twins instead (the same rows, slower).

``LOG_FILE`` is the local session's log (the JVM's output, and why the Java helpers did not
build): a new file per session, ``spark-<date>-<time>-<random>.log``, in a directory only
the user can enter, ``<tmp>/flink-kit-<uid>`` (mode 0700; should that path be anything
else -- a link, another user's -- a fresh private directory instead). A new session
removes all but the newest 20 logs there.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from pathlib import Path

from . import jvm
from .errors import KitError
from .java import cache_dir, class_archive_options, ensure_java
from .jvm.bridge import connect as _connect
from .jvm.bridge import key as _key
from .jvm.bridge import reason as _reason

__all__ = ["spark", "adopt", "preload", "ClusterWarning", "LOG_FILE", "log_file", "replay_tasks", "known_rows"]

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


def _initial_heap(memory: str) -> str:
    """The JVM option that reserves Spark's ``memory`` (``4g``, ``512m``, ``2gb``; a bare
    number is MiB) at start; none for a size the JVM has no unit for (Spark then says what
    is wrong with it).

    >>> _initial_heap("4g"), _initial_heap("4096"), _initial_heap("2GB"), _initial_heap("1p"), _initial_heap("64b")
    (' -Xms4g', ' -Xms4096m', ' -Xms2g', '', '')
    """
    size = re.fullmatch(r"\s*(\d+)\s*(?:([kmgt])b?)?\s*", memory.lower())
    return f" -Xms{size[1]}{size[2] or 'm'}" if size else ""


# Local files without a process per permission or rename: Hadoop, lacking its native library,
# starts ``chmod`` for every file and directory it makes (``flinkkit.LocalFileSystem`` sets
# them through java.nio) and, renaming through Hadoop's FileContext (Spark's default for
# streaming checkpoints), ``readlink`` twice a rename (FileSystem's rename is a plain atomic
# rename there). A live micro-batch made 40-75 such processes, ~0.1 s of ~0.5.
_LOCAL_FILES = {
    "spark.hadoop.fs.file.impl": "flinkkit.LocalFileSystem",
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
}


_NO_BYTE_BOUND = 2**31 - 1   # Spark skips the per-row size check at exactly this bound


def _conf(master: str = "local[*]") -> dict[str, str]:
    cores = os.cpu_count() or 2
    java_opts, memory = f"-Dlog4j2.configurationFile=file:{_LOG4J}", os.environ.get("KIT_DRIVER_MEMORY", "4g")
    own = os.environ.get("KIT_DRIVER_JAVA_OPTIONS")
    collector = master.startswith("local") and not re.search(r"-XX:[+-]Use\w*GC\b", own or "")
    conf = {
        "spark.app.name": "flink-kit",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.sql.shuffle.partitions": str(max(2, cores)),
        "spark.sql.execution.arrow.maxBytesPerBatch": str(_NO_BYTE_BOUND),
        "spark.default.parallelism": str(max(2, cores)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": memory,
        "spark.driver.extraJavaOptions": " ".join(filter(None, [java_opts + _initial_heap(memory),
                                                                "-XX:+UseParallelGC" * collector, own])),
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.warehouse.dir": str(_log_dir() / "spark-warehouse"),
    }
    if not master.startswith("local"):   # the executors' cores, known once they run (adopt); their own logs,
        for key in ("spark.sql.shuffle.partitions", "spark.default.parallelism", "spark.executor.extraJavaOptions",
                    "spark.sql.warehouse.dir"):   # the cluster's warehouse
            del conf[key]
    return conf


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
        return SparkSession.builder.remote(url).getOrCreate()
    except ImportError as e:
        raise KitError(
            f"SPARK_REMOTE={url!r} needs the Spark Connect client: "
            f"pip install 'flink-kit[connect]' ({e})"
        ) from None


def _local(master: str):
    from pyspark.sql import SparkSession

    ensure_java()
    if os.environ.get("PYSPARK_PYTHON") in (None, sys.executable, _WORKER_PYTHON.get("path")):   # this interpreter
        os.environ["PYSPARK_PYTHON"] = worker_python() if master.startswith("local") else sys.executable
    global LOG_FILE
    LOG_FILE = None   # a new session, a new log
    log = log_file()
    helpers = jvm.jar(log_file)   # why it did not build goes to the log
    conf = _conf(master)
    conf["spark.driver.extraJavaOptions"] += " " + class_archive_options(helpers)
    if helpers is not None:
        conf["spark.jars"] = str(helpers)
    if master.startswith("local"):   # workers run this interpreter: forked with the kit loaded
        conf["spark.python.daemon.module"] = DAEMON
        # Python workers talk to the JVM over Unix sockets, not TCP on localhost: there a
        # task's few small Arrow batches waited 20-40 ms for TCP's delayed acknowledgements
        if hasattr(socket, "AF_UNIX"):
            conf["spark.python.unix.domain.socket.enabled"] = "true"
        if helpers is not None:   # (on the JVM's own class path: Hadoop loads the file system before spark.jars)
            conf.update(_LOCAL_FILES, **{"spark.driver.extraClassPath": str(helpers)})
    builder = SparkSession.builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    _preload()
    try:
        with _stderr_to(log):
            session = builder.getOrCreate()
    except Exception as e:
        raise KitError(
            f"Spark did not start ({type(e).__name__}). Last lines of {log}:\n"
            f"{_tail(log)}"
        ) from None
    session.sparkContext.setLogLevel("ERROR")
    if master.startswith("local"):   # executors in this JVM, workers on this interpreter: nothing to check
        _MADE_LOCALLY.add(_key(session))
        jvm.attached(session, None if helpers is not None else f"the Java helpers did not compile (why: {log})")
    return session


DAEMON = "kit.tools.daemon"   # the local session's Python daemon (spark.python.daemon.module)
_WORKER_PYTHON: dict[str, str] = {}   # "path": what worker_python() chose


def worker_python() -> str:
    """What a local session's Python workers run: this interpreter, through a script (in the
    log's private directory) that takes Spark's copies of PySpark and py4j, ``pyspark.zip``
    and py4j's zip, off the ``PYTHONPATH`` Spark gives them, so that they import the
    packages installed with this interpreter. A zip's modules are compiled again in every
    new process (zipimport keeps no bytecode), ~0.5 s here; the installed ones were compiled
    once. Spark starts such a process for its Python daemon (a session's first Python task)
    and for each ``transformWithState`` of a streaming query (its driver-side worker: every
    live query's first micro-batch waits for it). ``sys.executable`` itself where those
    packages are not installed as directories, on a system without ``/bin/sh``, or where the
    script does not run (a temporary directory mounted ``noexec``).

        PYTHONPATH given:  <pyspark>/python/lib/pyspark.zip:<pyspark>/python/lib/py4j-*-src.zip:<others>
        PYTHONPATH run:    <others>
    """
    if "path" not in _WORKER_PYTHON or not os.path.exists(_WORKER_PYTHON["path"]):   # e.g. a tmp cleaner took it
        _WORKER_PYTHON["path"] = _worker_script() or sys.executable
    return _WORKER_PYTHON["path"]


def _worker_script() -> str | None:
    """``worker_python()``'s script, written and tried once; None where it cannot serve."""
    import py4j
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    installed = all(Path(m.__file__).parent.is_dir() for m in (pyspark, py4j))
    if os.name != "posix" or not Path("/bin/sh").exists() or not installed or not (lib / "pyspark.zip").exists():
        return None
    text = _WORKER_SCRIPT.format(zip=_sh_quoted(str(lib / "pyspark.zip")), py4j=_sh_quoted(str(lib / "py4j-")),
                                 python=_sh_quoted(sys.executable))
    path = _log_dir() / f"python-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    if not path.exists():   # written whole, then renamed: a session starting beside it reads all or none
        fd, name = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(name, 0o700)
        os.replace(name, path)
    try:
        subprocess.run([str(path), "-S", "-c", ""], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return str(path)


_WORKER_SCRIPT = """#!/bin/sh
# flink-kit (kit.spark.worker_python): Spark's Python workers on this interpreter, importing
# its own PySpark and py4j (compiled once) rather than Spark's zips of them
set -f
IFS=:
kept=
for p in $PYTHONPATH; do
  case "$p" in
    {zip}|{py4j}*-src.zip) ;;
    *) kept="${{kept:+$kept:}}$p" ;;
  esac
done
unset IFS
PYTHONPATH=$kept
export PYTHONPATH
exec {python} "$@"
"""


def _sh_quoted(text: str) -> str:
    """``text`` as one word of /bin/sh, taken literally (no pattern, no expansion)."""
    return "'" + text.replace("'", "'\\''") + "'"


_PRELOAD: list[str] = []   # modules preload() names


def preload(*modules: str) -> None:
    """Have each local session the kit starts import ``modules`` in a thread while its JVM
    starts, so that their first use does not wait for them: the face (``kit/__init__.py``)
    names the charts (``kit.viz``: altair, vl-convert, seconds)."""
    _PRELOAD.extend(m for m in modules if m not in _PRELOAD)


def _preload() -> None:
    def load():
        for name in list(_PRELOAD):
            try:
                importlib.import_module(name)
            except Exception:   # used later, the import raises again, where it is seen
                pass
    if _PRELOAD:
        threading.Thread(target=load, name="kit-preload", daemon=True).start()


def spark(master: str | None = None):
    """The kit's SparkSession: the active one (adopted), or a new one on ``master``
    (``sc://...``: Spark Connect; default ``SPARK_REMOTE``, ``SPARK_MASTER``, ``local[*]``)."""
    from pyspark.sql import SparkSession

    _quiet_query_errors()
    active = SparkSession.getActiveSession()
    if active is not None:
        if master is not None and not _on(active, master):
            raise KitError(f"a Spark session on {_master(active)} is active; stop it (spark.stop()) "
                           f"before asking for one on {master}")
        return adopt(active)
    if master is None:
        master = (os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_MASTER")
                  or os.environ.get("KIT_SPARK_MASTER") or "local[*]")
    if master.startswith("sc://"):
        return adopt(_remote(master))
    return adopt(_local(master))


def _master(session) -> str:
    """``local[*]``, ``spark://host:7077``, or ``Spark Connect``."""
    return "Spark Connect" if _connect(session) else session.sparkContext.master


def _on(session, master: str) -> bool:
    """Whether ``session`` runs on ``master`` (any ``sc://`` URL for a Connect session)."""
    return master.startswith("sc://") if _connect(session) else session.sparkContext.master == master


class ClusterWarning(UserWarning):
    """A fast path that cannot run on this session: its Python twin runs instead."""


ADOPT_TIMEOUT = 180   # seconds for the executors to run adopt()'s check: a cluster's first executors start
_DEPENDENCIES = ("numpy", "pandas", "pyarrow", "sqlglot")   # what `import kit` needs on an executor
_ADOPTED: set[str] = set()   # sessions adopted, by _key
_MADE_LOCALLY: set[str] = set()   # local sessions _local started: the jar on their class path, workers on this Python
_ADOPTING = threading.RLock()

# Run on the executors (pickled by value: it is not a module the executors can import) and,
# for its fingerprint, on the driver too.
_PROBE = '''
def fingerprint(folder):
    """The kit's Python modules under ``folder``: a hash of their names and bytes."""
    import hashlib, os
    digest = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(folder)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def probe(_):
    """This executor's Python: its path, version, which of DEPENDENCIES it lacks, its kit."""
    import importlib, importlib.util, json, sys
    missing = []
    for name in DEPENDENCIES:
        try:
            importlib.import_module(name)
        except Exception:
            missing.append(name)
    try:
        spec = importlib.util.find_spec("kit")
        kit = fingerprint(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None
    except Exception:
        kit = None
    return json.dumps({"python": sys.executable, "version": "%d.%d" % sys.version_info[:2],
                       "missing": missing, "kit": kit})
'''
_probe_namespace = {"__name__": "__kit_probe__", "DEPENDENCIES": _DEPENDENCIES}
exec(compile(_PROBE, "<kit adopt probe>", "exec"), _probe_namespace)


def adopt(session):
    """``session`` with the kit's settings, its executors checked and given the kit and its
    Java helpers (module doc); once per application or Connect session. Returns ``session``."""
    key = _key(session)
    if key in _ADOPTED:
        return session
    with _ADOPTING:
        if key in _ADOPTED:
            return session
        session.conf.set("spark.sql.session.timeZone", "UTC")
        session.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
        connect = _connect(session)
        if key not in _MADE_LOCALLY:
            _check_executors(session, _cores(session))
            _unless_chosen(session, connect, "spark.sql.shuffle.partitions", "200",
                           lambda: max(2, _cores(session)))   # the executors registered by now
            _unless_chosen(session, connect, "spark.sql.execution.arrow.maxBytesPerBatch", "67108864b",
                           lambda: _NO_BYTE_BOUND)
        if connect and not jvm.bridge.reachable(session):
            jvm.attached(session, "Spark Connect's client has no JVM to call them in, and this server runs no "
                                  f"{jvm.bridge.PLUGIN} plugin (kit.jvm.bridge) to reach its own")
        elif key not in _MADE_LOCALLY:   # whose jar _local recorded
            jvm.attach(session, log_file)
        if connect:
            # The server's warning for a window over one partition (the kit numbers a stream's
            # arrivals so, on purpose), which Connect turns into a Python warning per query.
            warnings.filterwarnings("ignore", "WARN WindowExpression: No Partition Defined", UserWarning)
        why = jvm.unavailable(session)
        if why is not None:
            warnings.warn(ClusterWarning(
                f"the kit's Java fast paths ({', '.join(jvm.FAST_PATHS)}) cannot run on this session: {why}. "
                "Their Python twins run instead: the same rows, slower."), stacklevel=3)
        _ADOPTED.add(key)
    return session


def _unless_chosen(session, connect: bool, key: str, spark_default: str, value) -> None:
    """Set ``key`` to ``value()`` where it is still Spark's default, not one the user chose."""
    if session.conf.get(key) == spark_default and (connect or not session.sparkContext.getConf().contains(key)):
        session.conf.set(key, str(value()))


def _cores(session) -> int:
    """The executors' cores: what ``spark.range`` splits into (Spark's default parallelism)."""
    if not _connect(session):
        return session.sparkContext.defaultParallelism
    from pyspark.sql import functions as F

    return session.range(1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0] + 1


def _check_executors(session, tasks: int) -> None:
    """Run ``probe`` in ``tasks`` tasks (one per executor core, as far as Spark spreads them):
    a ``KitError`` saying what to set when the executors' Python cannot run the kit; the kit
    shipped to executors without it."""
    from pyspark.sql import functions as F

    probe = F.udf(_probe_namespace["probe"], "string", useArrow=False)
    df = session.range(0, max(2, tasks), 1, max(2, tasks)).select(probe("id").alias("found"))
    tag = f"flink-kit-adopt-{os.getpid()}-{time.monotonic_ns()}"
    timer = threading.Timer(ADOPT_TIMEOUT, session.interruptTag, [tag])
    session.addTag(tag)
    timer.start()
    try:
        found = [json.loads(row.found) for row in df.collect()]
    except Exception as e:
        if not timer.is_alive():
            raise KitError(
                f"the Spark executors ran none of the kit's first tasks within {ADOPT_TIMEOUT} s: does "
                f"the cluster ({_master(session)}) have a worker with free cores and the memory "
                "spark.executor.memory asks (default 1g)?") from None
        raise KitError(
            f"the Spark executors cannot run Python for the kit: {_reason(e)}. Set PYSPARK_PYTHON (or "
            f"spark.pyspark.python) to a Python {sys.version_info[0]}.{sys.version_info[1]} with the kit's "
            "dependencies on every executor before the session starts, e.g. "
            f"PYSPARK_PYTHON={sys.executable}") from None
    finally:
        timer.cancel()
        session.removeTag(tag)
    for executor in found:
        if executor["missing"]:
            raise KitError(
                f"the Spark executors' Python ({executor['python']}) lacks {', '.join(executor['missing'])}, "
                "which the kit's operators run on. Set PYSPARK_PYTHON (or spark.pyspark.python) to an "
                "interpreter that has them before the session starts, e.g. "
                f"PYSPARK_PYTHON={sys.executable}, or install them there: "
                f"pip install {' '.join(executor['missing'])}")
    ours = _kit_fingerprint()
    if any(executor["kit"] != ours for executor in found):
        _ship_kit(session)


def _kit_fingerprint() -> str:
    return _probe_namespace["fingerprint"](str(Path(__file__).parent))


def kit_zip() -> Path:
    """A zip of the kit's Python modules, each with its bytecode for this Python (which the
    executors' must be, as Spark requires), cached by their fingerprint: what ``adopt`` ships
    to executors that lack the kit. ``zipfile.PyZipFile`` writes the bytecode where zipimport
    looks first, so a Python worker does not compile the kit each time it imports it."""
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    target = cache_dir() / f"kit-{_kit_fingerprint()}-{tag}.zip"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    package = Path(__file__).parent
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    with zipfile.PyZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writepy(str(package), filterfunc=lambda path: "__pycache__" not in Path(path).parts)   # kit/**/*.pyc
        for path in sorted(package.rglob("*.py")):   # the sources, for tracebacks
            if "__pycache__" not in path.parts:
                z.write(path, Path("kit") / path.relative_to(package))
    tmp.replace(target)
    return target


def _ship_kit(session) -> None:
    """The kit's modules to every executor, ahead of any other kit there (Spark puts a
    session's Python files first on the workers' path)."""
    path = str(kit_zip())
    if _connect(session):
        session.addArtifacts(path, pyfile=True)
    else:
        session.sparkContext.addPyFile(path)


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


jvm.on_new_session(adopt)   # a session a fast path asks about first is adopted then
