"""The JVM a session runs in, from Python: py4j on classic Spark, the kit's plugin on Connect.

A classic session's objects are reached with py4j (``spark._jvm``, ``spark._jsparkSession``,
``df._jdf``). A Spark Connect client has no JVM of its own, and Connect's protocol carries
plans and rows, not objects; but a Connect server can load relation plugins. The kit's,
``flinkkit.Bridge`` (``kit/jvm/Bridge.java``), runs py4j's own command classes in the
server's driver, one py4j gateway per Connect session: here a py4j client whose connection
sends each command as a Connect relation and reads the answer from it. So the kit's code
that reads plans, rules, metrics, generated code and row bytes (``kit.engine``), and the one
that runs its Java helpers (``kit.jvm``), run unchanged on both.

=====================  =====================================  ======================================
                       classic Spark                          Spark Connect with the plugin
=====================  =====================================  ======================================
``jvm(spark)``         ``spark._jvm``                         the server's JVM view (py4j ``jvm``)
``session(spark)``     ``spark._jsparkSession``               the Connect session's SparkSession
``dataset(frame)``     ``frame._jdf``                         the frame's plan as a server Dataset
``frame(jdf, spark)``  ``DataFrame(jdf, spark)``              a Connect DataFrame of that Dataset
=====================  =====================================  ======================================

The plugin is there when the server was started with it: ``kit.tools.cluster`` starts its Connect
server so (``spark.connect.extensions.relation.classes=flinkkit.Bridge`` and the kit's jar);
on a Connect server without it ``reachable`` is False and the kit takes its Connect paths
(the plan text of ``kit.explain``; notebook cells that need the JVM are skipped).

Mind what it opens: every client of a server with the plugin can call any Java method in the
server's driver, as a classic PySpark program can in its own. Load it on servers whose users may
do that (one user's, or the kit's own local one), not on a shared server that isolates them.

One py4j command is one Connect round trip, about 2 ms on one machine (a classic py4j call
takes 0.1-0.3 ms): reading a plan of a few nodes takes tens of them. py4j's notices that
Python dropped an object go with the next command, not from the garbage collector's thread.
A Dataset made into a Connect DataFrame (``frame``) is kept for the session: every plan built
on that DataFrame names it.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import deque

from ..errors import KitError

__all__ = ["connect", "key", "reachable", "require", "jvm", "session", "dataset", "frame", "reason", "PLUGIN"]

PLUGIN = "flinkkit.Bridge"   # the relation plugin's class (spark.connect.extensions.relation.classes)
_TYPE = "type.googleapis.com/flinkkit."
_GATEWAYS: dict = {}         # by key: the Connect session's JavaGateway, or None without the plugin
_LOCK = threading.Lock()
_DATASETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # a Connect DataFrame's (dataset)


def connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def key(spark) -> str:
    """One key per Spark application (classic) or Connect session."""
    return f"connect:{spark.session_id}" if connect(spark) else spark.sparkContext.applicationId


def reachable(spark) -> bool:
    """Whether the kit reaches ``spark``'s JVM objects: classic Spark, or a Connect server
    that runs the kit's plugin."""
    return not connect(spark) or _gateway(spark) is not None


def require(spark, what: str) -> None:
    """A ``KitError`` saying that ``what`` (``"generated code"``) is read in the JVM, unless
    the kit reaches ``spark``'s."""
    if not reachable(spark):
        raise KitError(f"{what} is read in the JVM, and this Spark Connect server runs no {PLUGIN} plugin: "
                       f"start it with the kit's jar and spark.connect.extensions.relation.classes={PLUGIN} "
                       "(kit.tools.cluster does), or use a classic session")


def jvm(spark):
    """The py4j view of ``spark``'s driver JVM (``jvm.java.lang.System``...)."""
    return spark._jvm if not connect(spark) else _required(spark).jvm


def session(spark):
    """``spark``'s JVM SparkSession (on Connect, the server's session of this client)."""
    return spark._jsparkSession if not connect(spark) else _required(spark).entry_point


def dataset(frame):
    """``frame``'s JVM Dataset (on Connect, its plan analysed on the server, once per frame)."""
    if not connect(frame.sparkSession):
        return frame._jdf
    from py4j.java_gateway import JavaObject

    if frame not in _DATASETS:
        gateway = _required(frame.sparkSession)
        _DATASETS[frame] = JavaObject(_ask(frame.sparkSession, "Frame", child=frame._plan), gateway._gateway_client)
    return _DATASETS[frame]


def frame(jdf, spark):
    """A DataFrame of ``spark`` over the JVM Dataset ``jdf``."""
    if not connect(spark):
        from pyspark.sql import DataFrame

        return DataFrame(jdf, spark)
    from pyspark.sql.connect.dataframe import DataFrame

    _required(spark)._kit_pinned.append(jdf)   # kept for the session: every plan built on the frame names it
    return DataFrame(_request("Plan", jdf._target_id.encode()), spark)


def reason(error: Exception) -> str:
    """The line of an error from Spark's JVM that says what went wrong: no Java stack trace.

    >>> reason(RuntimeError("Job aborted.\\nNoClassDefFoundError: flinkkit/LateScan\\n\\tat flinkkit.X(X.java:1)"))
    'NoClassDefFoundError: flinkkit/LateScan'
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip() and not line.startswith("\tat ")]
    errors = [line for line in lines if re.match(r"\w+(Error|Exception)\b", line)]
    return (errors[-1] if errors else lines[0] if lines else type(error).__name__)[:400]


def _required(spark):
    require(spark, "this")
    return _gateway(spark)


def _gateway(spark):
    name = key(spark)
    with _LOCK:
        if name not in _GATEWAYS:
            _GATEWAYS[name] = _open(spark)
        return _GATEWAYS[name]


def _open(spark):
    """A py4j gateway over ``spark``'s Connect session, or None when its server has no plugin."""
    import warnings

    from py4j.java_gateway import JavaGateway

    client = _client(spark)
    try:
        client.send_command("m\nd\n-\ne\n")   # a notice of nothing dropped: only the plugin answers it
    except Exception:
        return None
    with warnings.catch_warnings():   # py4j calls a gateway_client argument deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        gateway = JavaGateway(gateway_client=client, auto_convert=True)
    gateway._kit_pinned = []   # the Datasets Connect DataFrames were made of (frame)
    return gateway


def _request(kind: str, value: bytes = b"", child=None):
    """A Connect plan whose relation is the plugin's ``kind`` with ``value`` (or ``child``'s relation)."""
    from pyspark.sql.connect.plan import LogicalPlan

    class Request(LogicalPlan):
        def plan(self, client):
            relation = self._create_proto_relation()
            relation.extension.type_url = _TYPE + kind
            relation.extension.value = value if child is None else child.plan(client).SerializeToString()
            return relation

    return Request(None)


def _ask(spark, kind: str, value: bytes = b"", child=None) -> str:
    """The plugin's answer to ``kind``: the name of its relation's one column (Connect's
    schema call, which only analyses the relation, is ~10x faster than running it)."""
    return spark.client.schema(_request(kind, value, child).to_proto(spark.client)).fields[0].name


def _client(spark):
    """py4j's gateway client for ``JavaGateway``, each command sent as a Connect relation."""
    from py4j.java_gateway import GatewayClient

    class Client(GatewayClient):
        def __init__(self):
            super().__init__()
            self._dropped = deque()   # ids Python let go of, told with the next command

        def send_command(self, command, retry=True, binary=False):
            notices = []
            while self._dropped:
                notices.append(f"m\nd\n{self._dropped.popleft()}\ne\n")
            answer = _ask(spark, "Py4J", ("".join(notices) + command).encode())
            return answer[1:] if answer.startswith("!") else answer   # as py4j's own connection reads it

        def garbage_collect_object(self, target_id):
            if target_id not in ("t", "GATEWAY_SERVER"):
                self._dropped.append(target_id)

        def close(self):
            self.is_connected = False

        def shutdown_gateway(self):
            self.close()

    return Client()
