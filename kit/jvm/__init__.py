"""Java classes the kit runs inside Spark, for the passes Spark SQL can only write with a
sort or with Python: folds over rows in arrival order.

=============================  ============================================  ========================
class                          what it computes                              Python twin
=============================  ============================================  ========================
``flinkkit.LateScan``          per input partition: smallest time, largest   ``asof._late_check``
                               watermark, any late row
``flinkkit.OrderScan``         per input partition: whether its rows are     ``stream._sorted_by``
                               sorted, its first and last
``flinkkit.ArrivalScan``       per input partition: the stream's arrival     ``stream._scan``,
                               order, watermarks and processing time;        ``placement.
                               the first arrival past each timer             first_at_least``
``flinkkit.WindowOperator``    per key: Flink's window operator over its     ``operator.run_key``
                               elements (built-in parts only, see
                               ``kit/windows/compiled.py``)
``flinkkit.Matcher``           per PARTITION BY key: MATCH_RECOGNIZE's NFA   ``flink.run_blocks``
                               over its sorted rows (a subset of queries,
                               ``kit/match_recognize/compiled.py``)
``flinkkit.IntervalJoin``      per key: Flink's event-time interval join     ``interval.
                               (insert-only inputs) over its merged          RowTimeIntervalJoin``
                               arrivals, cleanup timers at the operator
                               watermark's rises (broadcast)
``flinkkit.Merge``             per row of a join's larger input: how many   ``interleave.``
                               rows of the smaller one come before it        ``_interleaved``'s
                               (their merge keys broadcast): a merge of      sort
                               the two without a sort
``flinkkit.WindowScan``        per input partition: the fast path's partial  ``fast._pass_one``,
                               aggregates per key and window, and where its  ``fast._pass_two``
                               watermark passed each window end
``flinkkit.GroupAggregate``    per task: Flink's non-windowed group          ``aggregate._replay``
                               aggregation over changelog messages in
                               arrival order, each key's state in a
                               ``StateTable`` (a one-column BIGINT key by
                               open addressing, any other in a HashMap)
``flinkkit.MiniBatch``         in one task: Flink's mini-batch bundles       ``aggregate._minibatch``
``GroupAggregate``             (one phase, local-global, split distinct),
                               keys in its bundle map's order
``flinkkit.Chain``             per chunk of arrivals: group aggregates       ``aggregate.group_aggregate``,
                               chained, each over the one before, fused;     level by level
                               seeded with the earlier chunks' states; with
                               mini-batch (``Chain.MiniBatch``), in one task
``flinkkit.LineScan``          the rows of CSV and JSON-lines files, as      Spark's readers
                               the passes above read them: plain lines
                               parsed in Java, the others by Spark's parser
``flinkkit.LocalFileSystem``   Hadoop's local files, permissions set with    Hadoop's own (a ``chmod``
                               java.nio (a local session's ``file:``)        process each)
``flinkkit.Bridge``            on a Spark Connect server: py4j commands      none: without it, plan
                               from the client, as Connect relations         text (``kit.explain``)
                               (``kit.jvm.bridge``)
=============================  ============================================  ========================

``ArrivalScan``, ``WindowOperator``, ``WindowScan`` and ``GroupAggregate`` read and write Spark's internal rows
(``flinkkit.Internal``), not ``Row`` objects: a third of their time went to converting rows.

The sources (``kit/jvm/*.java``) are compiled on first use with Janino, the compiler Spark
ships for its own generated code (in pyspark's jars), run by the Java that runs Spark, into
a jar cached beside the kit's other files (``~/.cache/flink-kit/jvm-<sources>-<jar>.jar``:
a hash of the sources and the Spark version, then one of the jar's own bytes, checked before
each use -- a jar that no longer matches is built anew). A session the kit starts has it
(``spark.jars``: the driver's class path and every executor's). A session started elsewhere
gets it when the kit adopts it (``attach``: added to the driver's class loader and, with
``SparkContext.addJar``, fetched by every executor), and a one-task job checks that the
executors load it. On Spark Connect, whose client has no JVM, the classes run in the server's,
reached through the kit's relation plugin (``kit.jvm.bridge``), when the server was started
with this jar and the plugin (``kit.tools.cluster`` starts it so). A session without them -- a
Connect server without the plugin, or a cluster whose executors did not load the jar -- takes
the Python twins, which give the same rows (``kit.spark.adopt`` says so once).

Which sessions can run them is recorded per session (``attach``, ``attached``); a session
not recorded yet is first handed to the function registered with ``on_new_session``
(``kit.spark`` registers its ``adopt``, which records it), so that a session the kit did not
start is adopted when a fast path first asks about it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from ..java import cache_dir
from . import bridge

__all__ = ["jar", "available", "attach", "attached", "unavailable", "on_new_session", "FAST_PATHS", "late_scan",
           "order_scan", "arrival_scan", "window_operator", "window_scan", "interval_join", "merge_counted",
           "group_aggregate", "mini_batch_group_aggregate", "chain", "mini_batch_chain"]

_SOURCES = sorted(Path(__file__).parent.glob("*.java"))
_PACKAGE = "flinkkit"
# what runs a Python twin without the jar (the table above)
FAST_PATHS = ("the stream's arrival scan", "the windows' fast path and compiled operator",
              "the temporal join's late check", "the interval join", "the joins' merge of their inputs",
              "the group aggregate")
_UNAVAILABLE: dict[str, str | None] = {}   # by bridge.key: why a session cannot run the classes (None: it can)
_NEW_SESSION: list[Callable] = []   # on_new_session's function


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def jar(log: Callable[[], Path] | None = None) -> Path | None:
    """The jar of the kit's Java classes, compiled on first use; None when they cannot be
    built (the compiler's output appended to the file ``log()`` names, the session's log;
    without ``log``, to stderr): the kit then runs their Python twins."""
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for source in _SOURCES:
        digest.update(source.read_bytes())
    sources = digest.hexdigest()[:16]
    for cached in sorted(cache_dir().glob(f"jvm-{sources}-*.jar")):
        if cached.is_file() and not cached.is_symlink() and cached.name == f"jvm-{sources}-{_digest(cached)}.jar":
            return cached
        cached.unlink(missing_ok=True)   # changed since it was built, or not a file: built anew below
    jars = _pyspark_jars()
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else "java"
    with tempfile.TemporaryDirectory() as out:
        try:
            run = subprocess.run(
                [str(java), "-cp", str(jars / "*"), "org.codehaus.commons.compiler.samples.CompilerDemo",
                 "-d", out, "-classpath", os.pathsep.join(str(j) for j in sorted(jars.glob("*.jar"))),
                 *map(str, _SOURCES)], capture_output=True, text=True, timeout=300)
            failed = f"{run.stdout}{run.stderr}" if run.returncode else ""
        except (OSError, subprocess.TimeoutExpired) as e:
            failed = str(e)
        classes = sorted((Path(out) / _PACKAGE).glob("*.class"))
        if failed or not classes:
            why = f"flink-kit: the Java helpers did not compile; Python twins run instead.\n{failed}\n"
            if log is None:
                sys.stderr.write(why)
            else:
                with open(log(), "a") as out:
                    out.write(why)
            return None
        cache_dir().mkdir(parents=True, exist_ok=True)
        tmp = cache_dir() / f"jvm-{sources}.{os.getpid()}.tmp"
        with zipfile.ZipFile(tmp, "w") as z:
            for c in classes:
                z.write(c, f"{_PACKAGE}/{c.name}")
        target = cache_dir() / f"jvm-{sources}-{_digest(tmp)}.jar"
        tmp.replace(target)
    return target


def _digest(path: Path) -> str:
    """The first 16 hex digits of the SHA-256 of ``path``'s bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def available(spark, name: str) -> bool:
    """Whether ``spark`` runs in a JVM the kit reaches (classic Spark, or a Connect server
    with the kit's plugin: ``kit.jvm.bridge``) that has the class ``name`` (a session started
    with an older jar may lack it), and its executors load the jar (a session not adopted yet
    is adopted first: ``on_new_session``)."""
    if not bridge.reachable(spark) or unavailable(spark) is not None:
        return False
    from py4j.java_gateway import JavaClass

    return isinstance(getattr(getattr(bridge.jvm(spark), _PACKAGE), name), JavaClass)


def unavailable(spark) -> str | None:
    """Why ``spark``'s executors cannot run the kit's classes, or None when they can (a
    session not recorded yet is first handed to ``on_new_session``'s function)."""
    key = bridge.key(spark)
    if key not in _UNAVAILABLE:
        for adopt in _NEW_SESSION:
            adopt(spark)   # which calls attach() or attached()
    return _UNAVAILABLE.get(key, "the kit has not adopted this session (kit.spark.adopt)")


def on_new_session(adopt: Callable) -> None:
    """Have ``adopt(spark)`` record (``attach``, ``attached``) a session ``unavailable`` is
    asked about before either did: ``kit.spark`` registers its ``adopt``."""
    _NEW_SESSION[:] = [adopt]


def attached(spark, why: str | None) -> None:
    """Record that ``spark`` can run the kit's classes (``why`` None) or why not."""
    _UNAVAILABLE[bridge.key(spark)] = why


def attach(spark, log: Callable[[], Path] | None = None) -> None:
    """Give a classic session the jar: on the driver's class loader (the one PySpark's calls
    resolve classes with) and, with ``SparkContext.addJar``, to every executor, unless it has
    it (``spark.jars``); then check, with a two-task job, that the executors load it. A Spark
    Connect server with the kit's plugin must have been started with this very jar. Why the
    jar did not build goes to ``log`` (as ``jar``'s)."""
    from py4j.protocol import Py4JError

    helpers = jar(log)
    if helpers is None:
        return attached(spark, f"the Java helpers did not compile (why: {log() if log else 'on stderr'})")
    context, jvm = bridge.session(spark).sparkContext(), bridge.jvm(spark)
    added = str(context.listJars().mkString("\n")).splitlines()   # spark://host:port/jars/<name>.jar
    if not any(url.endswith(f"/{helpers.name}") for url in added):
        if bridge.connect(spark):
            return attached(spark, f"the Spark Connect server runs another build of the kit's Java helpers: "
                                   f"start it with --jars {helpers} (as kit.tools.cluster does)")
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        try:
            loader.addURL(jvm.java.io.File(str(helpers)).toURI().toURL())
        except Py4JError:
            return attached(spark, f"the driver's class loader ({loader.getClass().getName()}) takes no jar: "
                                   f"start the session with spark.jars={helpers}")
        context.addJar(str(helpers))
    try:
        late_scan(spark.range(0, 2, 1, 2), 0).collect()
    except Exception as e:
        return attached(spark, f"the executors did not load {helpers.name} ({bridge.reason(e)})")
    attached(spark, None)


def late_scan(df, shift: int):
    """``LateScan`` over ``df``'s one column (event times in ms, in arrival order), each row
    emitting the watermark ``time - shift``: one row per input partition,
    ``_part int, _min long, _max long, _late boolean``."""
    spark = df.sparkSession
    jvm = bridge.jvm(spark)
    encoders = jvm.org.apache.spark.sql.Encoders
    times = getattr(bridge.dataset(df), "as")(encoders.LONG())
    out = times.mapPartitions(jvm.flinkkit.LateScan(shift),
                              encoders.tuple(encoders.INT(), encoders.LONG(), encoders.LONG(), encoders.BOOLEAN()))
    return bridge.frame(out.toDF(), spark).toDF("_part", "_min", "_max", "_late")


def order_scan(df, schema):
    """``OrderScan`` over ``df`` (the ``order`` columns of a stream's source): one row per
    non-empty input partition of ``schema`` (``part``, ``ok``, ``first``, ``last``)."""
    return _map_partitions(df, bridge.jvm(df.sparkSession).flinkkit.OrderScan(_schema(df)), schema)


def arrival_scan(df, settings: str, schema):
    """``ArrivalScan(settings)`` over ``df`` (a stream's prepared rows, input partitions in
    arrival order): rows of ``schema`` (a StructType), see ``kit.stream.Arrivals``."""
    return _map_partitions(df, bridge.jvm(df.sparkSession).flinkkit.ArrivalScan(settings), schema)


def window_operator(df, settings: str, schema):
    """``WindowOperator(settings)`` over ``df`` (each task's rows sorted by key and arrival):
    rows of ``schema`` (a StructType), as ``kit.windows.compiled`` lays them out."""
    return _map_partitions(df, bridge.jvm(df.sparkSession).flinkkit.WindowOperator(settings, _schema(df)), schema)


def matcher(df, settings: str, schema):
    """``Matcher(settings)`` over ``df`` (each task's rows sorted by PARTITION BY, ORDER BY,
    arrival): rows of ``schema``, as ``kit.match_recognize.compiled`` lays them out."""
    return _map_partitions(df, bridge.jvm(df.sparkSession).flinkkit.Matcher(settings, _schema(df)), schema)


def interval_join(df, settings: str, grouped, schema):
    """``IntervalJoin(settings)`` over ``df`` (a task's merged arrivals sorted by key, then
    position), the operator watermark's rises read from ``grouped`` (``IntervalJoin.rises``)
    and broadcast: rows of ``schema``, as ``kit.joins.interval`` lays them out."""
    join = bridge.jvm(df.sparkSession).flinkkit.IntervalJoin
    return _map_partitions(df, join(settings, _schema(df), join.rises(bridge.dataset(grouped))), schema)


def merge_counted(large, key: str, small, ties: bool):
    """``Merge.counted``: ``large`` with ``_c``, how many of ``small``'s rows (``seq``, merge
    key; collected and broadcast) come before each row, by its merge key column ``key``;
    ``ties``: an equal key puts ``small``'s row first."""
    spark = large.sparkSession
    return bridge.frame(bridge.jvm(spark).flinkkit.Merge.counted(bridge.dataset(large), key, bridge.dataset(small),
                                                                 ties), spark)


def window_scan(df, settings: str, schema):
    """``WindowScan(settings)`` over ``df`` (a stream's source rows, input partitions in
    arrival order): rows of ``schema`` (a StructType), as ``kit.windows.fast`` lays them out."""
    return _map_partitions(df, bridge.jvm(df.sparkSession).flinkkit.WindowScan(settings, _schema(df)), schema)


def group_aggregate(df, settings: str, schema):
    """``GroupAggregate(settings)`` over ``df`` (each task's changelog messages in ``(seq, _n)``
    order, a key's all in one task): rows of ``schema``, as ``kit.changelog.aggregate`` lays them out."""
    return _map_partitions(df, bridge.jvm(df.sparkSession).flinkkit.GroupAggregate(settings, _schema(df)), schema)


def mini_batch_group_aggregate(df, settings: str, schema):
    """``MiniBatchGroupAggregate(settings)`` over ``df`` (the whole changelog in one partition
    in ``(seq, _n)`` order): rows of ``schema``, as ``kit.changelog.aggregate`` lays them out."""
    return _map_partitions(df, bridge.jvm(df.sparkSession).flinkkit.MiniBatchGroupAggregate(settings, _schema(df)),
                           schema)


def chain(df, chunks: int, settings: str, schema, limit: int, prefixes: bool = False):
    """``Chain.run``: the chained group aggregates of ``settings`` over ``df`` (its ``chunks``
    partitions a stream's chunks, in arrival order), each task seeded from the inputs of the
    chunks before its own (``prefixes``: read by the task itself); rows of ``schema``, or None
    when those inputs, counted per chunk, have more than ``limit`` rows."""
    spark = df.sparkSession
    out = bridge.jvm(spark).flinkkit.Chain.run(bridge.dataset(df), chunks, settings, _type(spark, schema), limit,
                                               prefixes)
    return None if out is None else bridge.frame(out, spark)


def parses_rows(df) -> bool:
    """``Internal.parsesRows``: whether ``df`` reads files parsed row by row (CSV, JSON), again at every read."""
    return bool(bridge.jvm(df.sparkSession).flinkkit.Internal.parsesRows(bridge.dataset(df)))


def read_by_lines(df) -> bool:
    """``LineScan.reads``: whether the kit's passes read ``df``'s CSV or JSON-lines files
    themselves, their plain lines parsed in Java (read again, they cost little; Spark's
    parse costs 3-10x as much); False where the session lacks the class."""
    return available(df.sparkSession, "LineScan") and bool(
        bridge.jvm(df.sparkSession).flinkkit.LineScan.reads(bridge.dataset(df)))


def count(df) -> int:
    """``df``'s rows: where the kit reads its files (``read_by_lines``), the count of its own
    read (Spark's count of JSON lines parses every one with Jackson: 3x as long), else Spark's."""
    if not read_by_lines(df):
        return df.count()
    spark = df.sparkSession
    return bridge.frame(bridge.jvm(spark).flinkkit.LineScan.read(bridge.dataset(df)), spark).count()


def reckon(df) -> int:
    """About ``df``'s rows, to split work among tasks (never to count them), from its files'
    bytes with no job: where the kit reads them (``read_by_lines``), ``LineScan.reckon``;
    Parquet files, ``Internal.reckonParquet``; else ``count``."""
    classes, ds = bridge.jvm(df.sparkSession).flinkkit, bridge.dataset(df)
    guess = classes.LineScan.reckon(ds) if read_by_lines(df) else classes.Internal.reckonParquet(ds)
    return guess if guess >= 0 else count(df)


def order_free(df) -> bool:
    """``Internal.orderFree``: whether ``df``'s answer is the same whatever order its input
    rows come in (deterministic; no sum or average of FLOAT or DOUBLE values)."""
    return bool(bridge.jvm(df.sparkSession).flinkkit.Internal.orderFree(bridge.dataset(df)))


def mini_batch_chain(df, settings: str, schema):
    """``Chain.miniBatch``: the chained mini-batch group aggregates of ``settings`` over the
    whole of ``df`` in one task (its partitions a stream's chunks, read in turn); rows of ``schema``."""
    spark = df.sparkSession
    return bridge.frame(bridge.jvm(spark).flinkkit.Chain.miniBatch(bridge.dataset(df), settings, _type(spark, schema)),
                        spark)


def _map_partitions(df, function, schema):
    """``function`` (a Java ``MapPartitionsFunction`` over Spark's internal rows) over each
    partition of ``df``: a DataFrame of ``schema`` (``kit/jvm/Internal.java``)."""
    spark = df.sparkSession
    return bridge.frame(bridge.jvm(spark).flinkkit.Internal.mapPartitions(bridge.dataset(df), function,
                                                                          _type(spark, schema)), spark)


def _schema(df):
    """``df``'s schema as a JVM StructType."""
    return bridge.dataset(df).schema()


def _type(spark, schema):
    """The PySpark type ``schema`` as a JVM DataType."""
    return bridge.session(spark).parseDataType(schema.json())
