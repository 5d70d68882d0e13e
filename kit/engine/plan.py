"""Catalyst plans as trees of plain nodes a user can read, print and compare.

A ``PlanNode`` is one operator of a Spark plan, read once through py4j from the JVM tree:
its class (``kind``: ``Filter``, ``Join``, ``FileSourceScanExec``, ``BroadcastHashJoinExec``),
its one-line description as Spark prints it (``args``), its expressions, its output columns,
Catalyst's estimates for logical plans (``rows``, ``size_bytes``: ``plan.stats``, what the
join choice reads), a scan's metadata (``PushedFilters``, ``ReadSchema``), and its children.

    >>> leaf = PlanNode("LocalRelation", "LocalRelation", "[id#0L]", output=("id#0L: bigint",),
    ...                 rows=3, size_bytes=24)
    >>> print(PlanNode("Filter", "Filter", "(id#0L < 2)", children=(leaf,)).render())
    Filter (id#0L < 2)
    +- LocalRelation [id#0L]  rows=3 size=24 B

The internal view names ``kit.sql`` registers (``__kit_t1_<tag>_<n>``) print as the names
the query used (``t1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PlanNode", "read_plan", "user_names", "stable_ids"]

_VIEW = re.compile(r"__kit_(\w+?)_[0-9a-f]{8}_\d+")
_MAX_FIELDS = 25   # Spark's default spark.sql.debug.maxToStringFields


def user_names(text: str) -> str:
    """``text`` with kit.sql's internal view names put back as the query's table names.

    >>> user_names("UnresolvedRelation [__kit_t1_db8d6c77_0]")
    'UnresolvedRelation [t1]'
    """
    return _VIEW.sub(r"\1", text)


_EXPR_ID = re.compile(r"(?<=[\w`])#(\d+)")


def stable_ids(text: str, ids: dict | None = None) -> str:
    """``text`` with Spark's expression ids (``id#2671L``) numbered 1, 2, ... in order of
    appearance, so that it does not change with how many plans the session analysed before;
    ``ids`` (old -> new) carries one numbering over several texts.

    >>> stable_ids("Project [id#2671L, v#2672] +- Filter (id#2671L < 3)")
    'Project [id#1L, v#2] +- Filter (id#1L < 3)'
    """
    ids = {} if ids is None else ids
    return _EXPR_ID.sub(lambda m: "#" + str(ids.setdefault(m.group(1), len(ids) + 1)), text)


@dataclass(frozen=True)
class PlanNode:
    """One plan operator; ``kind`` is its JVM class's simple name, ``name`` Spark's node name."""

    kind: str
    name: str
    args: str = ""                  # its arguments: Spark's one-line text after the name
    expressions: tuple = ()
    output: tuple = ()
    rows: int | None = None         # Catalyst's estimate (logical plans), None when unknown
    size_bytes: int | None = None   # Catalyst's sizeInBytes (logical plans)
    metadata: dict = field(default_factory=dict)   # a scan's PushedFilters, ReadSchema, ...
    stage: int | None = None        # whole-stage-codegen stage id of a WholeStageCodegenExec
    children: tuple = ()
    text: str = ""                  # Spark's one-line text of the node (simpleString)

    def walk(self):
        """This node and every node below it, parents first (pre-order)."""
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, kind: str) -> list:
        """The nodes of class ``kind`` (``"Filter"``, ``"SortMergeJoinExec"``), pre-order."""
        return [node for node in self.walk() if node.kind == kind]

    def kinds(self) -> list:
        """Every node's ``kind``, pre-order."""
        return [node.kind for node in self.walk()]

    def line(self) -> str:
        """The node on one line: Spark's description, then the estimates when known."""
        text = self.text or f"{self.name} {self.args}".rstrip()
        stats = []
        if self.rows is not None:
            stats.append(f"rows={self.rows:,}")
        if self.size_bytes is not None:
            stats.append(f"size={_bytes(self.size_bytes)}")
        return text + ("  " + " ".join(stats) if stats else "")

    def render(self) -> str:
        """The tree as Spark draws it (``+-`` and ``:-`` branches), one node a line."""
        lines = []

        def draw(node, prefix, branch):
            lines.append(prefix + branch + node.line())
            below = prefix + ("" if not branch else (":  " if branch == ":- " else "   "))
            for i, child in enumerate(node.children):
                draw(child, below, ":- " if i < len(node.children) - 1 else "+- ")
        draw(self, "", "")
        return "\n".join(lines)

    def __str__(self):
        return self.render()


def _bytes(n: int) -> str:
    """``n`` bytes, short: ``24 B``, ``1.5 KiB``, ``8.0 EiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def seq(scala_seq) -> list:
    """A Scala ``Seq`` as a Python list (of py4j proxies)."""
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _option(value):
    """A Scala ``Option`` (py4j proxy) as its value or None; plain values pass through."""
    if value is None or isinstance(value, int):
        return value
    return value.get() if value.isDefined() else None


def _int(value):
    """A number py4j gave back (an int, or a Scala/Java big integer proxy) as an int."""
    return value if value is None or isinstance(value, int) else int(value.toString())


def _attribute(attr) -> str:
    return f"{attr.toString()}: {attr.dataType().simpleString()}"


def _children(jplan) -> list:
    """A node's children; adaptive plans and query stages show the plan they hold."""
    kind = jplan.getClass().getSimpleName()
    if kind == "AdaptiveSparkPlanExec":
        return [jplan.executedPlan()]
    if kind.endswith("QueryStageExec"):
        return [jplan.plan()]
    return seq(jplan.children())


def read_plan(jplan, stats: bool = False, physical: bool = False) -> PlanNode:
    """The JVM plan ``jplan`` (logical or, with ``physical``, physical) as a ``PlanNode``
    tree; with ``stats`` each node carries Catalyst's row and size estimates (a physical
    node those of the logical node it was planned from, when Spark kept the link)."""
    kind = jplan.getClass().getSimpleName()
    name = user_names(jplan.nodeName())
    line = user_names(jplan.simpleString(_MAX_FIELDS))
    bare = line.lstrip("'")                   # an unresolved node's mark
    args = bare[len(name):].strip() if bare.startswith(name) else bare
    try:
        output = tuple(_attribute(a) for a in seq(jplan.output()))
    except Exception:   # an unresolved plan has no output yet
        output = ()
    try:
        expressions = tuple(user_names(e.toString()) for e in seq(jplan.expressions()))
    except Exception:
        expressions = ()
    rows = size = None
    if stats:
        source = _option(jplan.logicalLink()) if physical else jplan
        if source is not None:
            estimate = source.stats()
            size = _int(estimate.sizeInBytes())
            rows = _int(_option(estimate.rowCount()))
    metadata = {}
    if kind.endswith("ScanExec") and kind != "LocalTableScanExec":
        try:
            found = jplan.metadata()
            metadata = {str(k): user_names(str(found.apply(k))) for k in seq(found.keys().toSeq())}
        except Exception:   # a scan without metadata
            metadata = {}
    stage = jplan.codegenStageId() if kind == "WholeStageCodegenExec" else None
    children = tuple(read_plan(c, stats, physical) for c in _children(jplan))
    return PlanNode(kind, name, args, expressions, output, rows, size, metadata, stage, children, line)
