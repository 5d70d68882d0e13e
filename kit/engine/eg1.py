"""The seed's E.g.1 on Spark: each rewrite the seed names, found on Catalyst's plan nodes.

    SELECT t1.id, 1 + 2 + t1.value AS v FROM t1, t2 WHERE t1.id = t2.id AND t2.id < 1000

``tables(spark, rows=...)`` writes ``t1(id, value, name)`` and ``t2(id, name)`` as Parquet
(sorted by ``id``, small row groups, so a pushed filter can skip row groups), optionally as
catalog tables with column statistics (``analyze=True``: what Spark's cost-based estimates
need). ``rewrites(explain(QUERY, **t))`` says where each rewrite shows in the plans:

=======================  ==========================================  =======================
seed (section 2)         Catalyst                                    found on
=======================  ==========================================  =======================
expression reduce        ConstantFolding, ReorderAssociativeOperator  the Project's ``v``
predicate pushdown       PushDownPredicates (PushPredicateThroughJoin  a Filter on t2's ``id``
                         / ...ThroughNonJoin)                         below the Join
(not in the seed)        InferFiltersFromConstraints                 ``isnotnull(t1.id)``,
                                                                     ``t1.id < 1000`` on t1
projection pushdown      ColumnPruning                               a Project per side
scan pushdown            planner (FileSourceStrategy), no rule:       the scans'
                         ``spark.sql.parquet.filterPushdown``         PushedFilters, ReadSchema
broadcast join           planner (JoinSelection): sizeInBytes vs      the join's class
                         ``spark.sql.autoBroadcastJoinThreshold``
=======================  ==========================================  =======================

``effects(t)`` runs the query once as Spark plans it and once with each rewrite turned
off (its rules in ``spark.sql.optimizer.excludedRules``, or its option), measuring the rows
the scans return, the bytes read from files, the rows reaching the join and the time.
Turning one rewrite off does not always undo it: Spark keeps near-twins of some rules
(``PushDownPredicates`` is also there as ``PushPredicateThroughJoin`` and
``...ThroughNonJoin``; ``ReorderAssociativeOperator`` folds ``1 + 2`` as well), so a
rewrite's rules are all excluded together; and some rules cannot be excluded at all
(``Optimizer.nonExcludableRules``, e.g. ``FinishAnalysis``, ``RewriteDistinctAggregates``:
Spark ignores them in the option; ``Measurement.not_excludable`` lists those asked for).
E.g.1's own rules are all excludable. Bytes are the run's stages' input bytes as the driver
aggregates them from its tasks' metrics (Hadoop's filesystem read counters in each task) --
the figure Spark's UI shows as a stage's Input -- so they count on a cluster too, where the
executors read. Read them as Spark's figure, not as the size of the column chunks: on
local Parquet files (the kit's Spark and Hadoop, measured) they counted fewer bytes with the scan's filter
pushdown off than on.

Statistics: without cost-based optimization Spark does not shrink an estimate by a filter
-- ``t2``'s estimate after ``id < 1000`` is its file size scaled by the columns kept -- so
"t2 is small after the filter", the seed's reason for the broadcast, is what Spark sees only
with ``spark.sql.cbo.enabled`` and column statistics (``analyze=True``): then the filter's
selectivity comes from ``id``'s min and max.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from dataclasses import dataclass, field

import pandas

from ..errors import KitError
from ..jvm import bridge
from .batch import session_conf, explain, fresh
from .plan import seq
from .rules import short_rule

__all__ = ["QUERY", "QUERY_ON", "FLINK_LOGICAL_PLAN", "REWRITES", "Measurement", "Rewrite", "effects",
           "join_choice", "logical_plans", "measure", "rewrites", "tables"]

QUERY = "SELECT t1.id, 1 + 2 + t1.value AS v FROM t1, t2 WHERE t1.id = t2.id AND t2.id < 1000"
# The same query with the join's equality in ON: what "predicate pushdown off" measures (module doc).
QUERY_ON = "SELECT t1.id, 1 + 2 + t1.value AS v FROM t1 JOIN t2 ON t1.id = t2.id WHERE t2.id < 1000"

# The seed's plan of E.g.1 after Calcite's validation, before Flink's optimizer ran.
FLINK_LOGICAL_PLAN = """\
LogicalProject(id=[$0], v=[+(+(1, 2), $1)])
+- LogicalFilter(condition=[AND(=($0, $3), <($3, 1000))])
   +- LogicalJoin(condition=[true], joinType=[inner])
      :- LogicalTableScan(table=[[default_catalog, default, t1]])
      +- LogicalTableScan(table=[[default_catalog, default, t2]])"""

_OPT = "org.apache.spark.sql.catalyst.optimizer."

# rewrite -> (how it is turned off: optimizer rules to exclude, Spark options to set, query run)
REWRITES = {
    "expression reduce": ((_OPT + "ConstantFolding", _OPT + "ReorderAssociativeOperator"), {}, QUERY),
    "predicate pushdown": ((_OPT + "PushDownPredicates", _OPT + "PushPredicateThroughJoin",
                            _OPT + "PushPredicateThroughNonJoin", _OPT + "InferFiltersFromConstraints"), {},
                           QUERY_ON),
    "inferred filters": ((_OPT + "InferFiltersFromConstraints",), {}, QUERY),
    "column pruning": ((_OPT + "ColumnPruning",), {}, QUERY),
    "scan pushdown": ((), {"spark.sql.parquet.filterPushdown": "false"}, QUERY),
    "broadcast join": ((), {"spark.sql.autoBroadcastJoinThreshold": "-1",
                            "spark.sql.adaptive.autoBroadcastJoinThreshold": "-1"}, QUERY),
}


def tables(spark, rows: int = 10_000, t2_rows: int | None = None, path: str | None = None,
           analyze: bool = False, row_group_bytes: int = 64 * 1024) -> dict:
    """``{"t1": ..., "t2": ...}``: E.g.1's tables as Parquet under ``path`` (a new temporary
    directory by default), ``rows`` rows in t1 and ``t2_rows`` (default ``rows``) in t2,
    ``id`` 0, 1, 2, ...; with ``analyze`` they are catalog tables with statistics (rows, size, and
    ``id``'s min, max and distinct count: what a cost-based estimate of ``id < 1000`` reads)."""
    t2_rows = rows if t2_rows is None else t2_rows
    path = path or tempfile.mkdtemp(prefix="kit-eg1-")
    out = {}
    specs = {"t1": (rows, ["id", "id * 7 % 1000 AS value", "concat('name-', id) AS name"]),
             "t2": (t2_rows, ["id", "concat('other-', id) AS name"])}
    tag = uuid.uuid4().hex[:8]
    for name, (n, columns) in specs.items():
        where = f"{path}/{name}"
        (spark.range(0, n, 1, 1).selectExpr(*columns).write.mode("overwrite")
         .option("parquet.block.size", row_group_bytes).parquet(where))
        if analyze:
            table = f"kit_eg1_{name}_{tag}"
            spark.sql(f"CREATE TABLE {table} USING parquet LOCATION '{where}'")
            spark.sql(f"ANALYZE TABLE {table} COMPUTE STATISTICS FOR COLUMNS id")
            out[name] = spark.table(table)
        else:
            out[name] = spark.read.parquet(where)
    return out


# ------------------------------------------------------------------------------ rewrites

@dataclass
class Rewrite:
    """One rewrite of E.g.1: whether the plans show it, and the nodes that do."""

    name: str
    rules: tuple            # the optimizer rules of the rule log that made it (short names)
    found: bool
    evidence: dict = field(default_factory=dict)
    applications: tuple = ()   # those rules' RuleApplications: the plan before and after each

    def __str__(self):
        head = f"{self.name}: {'found' if self.found else 'NOT found'}" + (
            f" ({', '.join(self.rules)})" if self.rules else "")
        lines = [head] + [f"  {k}: {v}" for k, v in self.evidence.items()]
        return "\n".join(lines + [a.diff() for a in self.applications])


def rewrites(explanation) -> list:
    """E.g.1's rewrites (module table) found on ``explanation``'s plan nodes."""
    if not explanation.stages:
        raise KitError("rewrites need the plan nodes; this explanation has Spark's plan text only (a Spark "
                       f"Connect server without the kit's {bridge.PLUGIN} plugin)")
    optimized, physical = explanation.stages["optimized"], explanation.stages["physical"]
    if not optimized.find("Join") or not optimized.find("Project") or not explanation.joins:
        raise KitError("rewrites() reads E.g.1's plans (a projection over a join of two tables): "
                       "this plan has no such join")
    applied = explanation.rules.rules()
    found = []

    def made(*rules) -> tuple:
        return tuple(r for r in rules if r in applied)

    v = optimized.find("Project")[0].expressions[-1]      # the query's last column, v
    folded = "1 + 2" not in v and "3" in v
    found.append(Rewrite("expression reduce", made("ConstantFolding", "ReorderAssociativeOperator"),
                         folded, {"analyzed": explanation.stages["analyzed"].find("Project")[0].expressions[-1],
                                  "optimized": v}))

    join = optimized.find("Join")[0]
    left, right = join.children
    right_filters = [f.args for f in right.find("Filter")]
    left_filters = [f.args for f in left.find("Filter")]
    above = [f.args for f in optimized.find("Filter") if f.find("Join")]
    found.append(Rewrite("predicate pushdown", made("PushDownPredicates", "PushPredicateThroughJoin",
                                                        "PushPredicateThroughNonJoin"),
                         any("< 1000" in f for f in right_filters) and not above,
                         {"t2 side filters": right_filters, "filters above the join": above,
                          "join condition": join.args}))
    found.append(Rewrite("inferred filters", made("InferFiltersFromConstraints"),
                         any("isnotnull" in f for f in left_filters) and any("< 1000" in f for f in left_filters),
                         {"t1 side filters": left_filters}))

    widths = {}
    for side, node in (("t1", left), ("t2", right)):
        relation = [n for n in node.walk() if n.kind == "LogicalRelation"][0]
        kept = node.output if node.kind == "Project" else relation.output
        widths[side] = (len(relation.output), len(kept))
    found.append(Rewrite("column pruning", made("ColumnPruning"),
                         all(kept < total for total, kept in widths.values()),
                         {f"{side} columns (table, read)": w for side, w in widths.items()}))

    scans = physical.find("FileSourceScanExec")
    pushed = {s.metadata.get("Location", "").rsplit("/", 1)[-1].rstrip("]"): s.metadata for s in scans}
    found.append(Rewrite("scan pushdown", (), bool(scans) and all(
        "LessThan(id,1000)" in m.get("PushedFilters", "") for m in pushed.values()),
        {side: {"PushedFilters": m.get("PushedFilters"), "ReadSchema": m.get("ReadSchema")}
         for side, m in pushed.items()}))

    for rewrite in found:
        rewrite.applications = tuple(a for a in explanation.rules if a.rule in rewrite.rules)
    choice = explanation.joins[0]
    found.append(Rewrite("broadcast join", (), choice.strategy == "BroadcastHashJoinExec",
                         {"strategy": choice.strategy, "t2 sizeInBytes": choice.right_bytes,
                          "t2 rows": choice.right_rows, "threshold": choice.threshold, "reason": choice.reason}))
    return found


def join_choice(tables: dict, threshold: int | None = None, cbo: bool = False):
    """The ``JoinChoice`` of E.g.1 over ``tables`` with ``spark.sql.autoBroadcastJoinThreshold``
    = ``threshold`` bytes (None: the session's) and cost-based estimates on or off: with
    ``cbo`` and analyzed tables (``tables(..., analyze=True)``) t2's estimate after the filter
    is its rows below 1000 times the row size, without it t2's size whatever the filter."""
    conf = {"spark.sql.cbo.enabled": str(cbo).lower()}
    if threshold is not None:
        conf["spark.sql.autoBroadcastJoinThreshold"] = str(threshold)
    return explain(QUERY, conf=conf, **tables).joins[0]


def logical_plans(explanation) -> dict:
    """E.g.1's plan before optimization as the seed gives Flink's and as Spark has it."""
    return {"Flink (seed)": FLINK_LOGICAL_PLAN, "Spark parsed": explanation.texts["parsed"],
            "Spark analyzed": explanation.texts["analyzed"]}


# --------------------------------------------------------------------------- measurement

@dataclass
class Measurement:
    """One run of a query: what its scans returned and read, what reached its joins, time."""

    excluded: tuple             # rules asked to be excluded (short names)
    not_excludable: tuple       # of those, the ones Spark refuses to exclude
    conf: dict
    rows_read: int              # rows the scans returned (after row groups a filter skipped)
    bytes_read: int             # Spark's input bytes counter over the run (module doc)
    rows_into_joins: int        # rows reaching the joins' inputs
    rows_out: int
    seconds: float              # fastest of the runs
    plan: list                  # the physical operators run (classes, pre-order)


def measure(query: str, tables: dict, exclude=(), conf: dict | None = None, repeat: int = 1) -> Measurement:
    """Run ``query`` over ``tables`` with the optimizer rules ``exclude`` (class names, full
    or short) left out and the Spark options ``conf`` set: rows, bytes and time."""
    from .. import sql as kit_sql

    frame = kit_sql(query, **tables)             # checks the query, gives its analyzed plan
    spark = frame.sparkSession
    bridge.require(spark, "what measure reports (Spark's metrics)")
    optimizer = bridge.session(spark).sessionState().optimizer()
    full = {short_rule(r.ruleName()): r.ruleName() for b in seq(optimizer.batches()) for r in seq(b.rules())}
    names = tuple(full.get(r, r) for r in exclude)
    refused = set(str(r) for r in seq(optimizer.nonExcludableRules()))
    settings = {str(k): str(v) for k, v in (conf or {}).items()}
    if names:
        settings["spark.sql.optimizer.excludedRules"] = ",".join(names)
    analyzed = bridge.dataset(frame).queryExecution().analyzed()
    best, result = None, None
    with session_conf(spark, settings):
        for _ in range(max(1, repeat)):
            jdf = fresh(spark, analyzed)
            before = _stage_input_bytes(spark)
            start = time.perf_counter()
            count = jdf.queryExecution().toRdd().count()      # runs this plan, so its metrics count
            took = time.perf_counter() - start
            read = sum(b for stage, b in _stage_input_bytes(spark).items() if stage not in before)
            if best is None or took < best:
                best, result = took, (jdf.queryExecution().executedPlan(), read, count)
    plan, read, count = result
    final = _final(plan)
    return Measurement(tuple(short_rule(n) for n in names), tuple(short_rule(n) for n in names if n in refused),
                       settings, _scan_rows(final), read, _join_input_rows(final), int(count),
                       best, _kinds(final))


def effects(tables: dict, repeat: int = 1) -> pandas.DataFrame:
    """A row per E.g.1 rewrite turned off (``REWRITES``), and one as Spark plans it: rows and
    bytes read, rows reaching the join, seconds (fastest of ``repeat``), the joins' operators."""
    rows = []
    for name, (rules, conf, query) in [("none (as Spark plans it)", ((), {}, QUERY))] + list(REWRITES.items()):
        m = measure(query, tables, rules, conf, repeat)
        rows.append({"turned off": name, "rows_read": m.rows_read, "bytes_read": m.bytes_read,
                     "rows_into_join": m.rows_into_joins, "rows_out": m.rows_out, "seconds": round(m.seconds, 3),
                     "join": ", ".join(k for k in m.plan if "Join" in k or k == "CartesianProductExec"),
                     "not excludable": ", ".join(m.not_excludable)})
    return pandas.DataFrame(rows)


def _stage_input_bytes(spark) -> dict:
    """Each stage attempt the driver knows, ``(stage, attempt)``: its input bytes, the sum of
    its tasks' metrics (executors send them to the driver; its listener bus drained first)."""
    sc, jvm = bridge.session(spark).sparkContext(), bridge.jvm(spark)
    sc.listenerBus().waitUntilEmpty()
    stages = sc.statusStore().stageList(None, False, False, jvm.java.lang.reflect.Array.newInstance(
        jvm.java.lang.Double.TYPE, 0), jvm.java.util.ArrayList())
    return {(int(s.stageId()), int(s.attemptId())): int(s.inputBytes()) for s in seq(stages)}


def _final(jplan):
    """The plan an adaptive plan ended on (its current plan), else the plan itself."""
    if jplan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        return jplan.executedPlan()
    return jplan


def _nodes(jplan):
    """Every node of a physical plan, pre-order, through query stages and reused exchanges."""
    yield jplan
    kind = jplan.getClass().getSimpleName()
    if kind.endswith("QueryStageExec"):
        children = [jplan.plan()]
    elif kind == "ReusedExchangeExec":
        children = [jplan.child()]
    elif kind == "AdaptiveSparkPlanExec":
        children = [jplan.executedPlan()]
    else:
        children = seq(jplan.children())
    for child in children:
        yield from _nodes(child)


def _kinds(jplan) -> list:
    return [n.getClass().getSimpleName() for n in _nodes(jplan)]


def _metric(node, name):
    metrics = node.metrics()
    return int(metrics.apply(name).value()) if metrics.contains(name) else None


def _scan_rows(jplan) -> int:
    return sum(_metric(n, "numOutputRows") or 0 for n in _nodes(jplan)
               if n.getClass().getSimpleName().endswith("ScanExec"))


def _join_input_rows(jplan) -> int:
    """Rows into every join: per input, the nearest node below it that counts its output."""
    total = 0
    for node in _nodes(jplan):
        kind = node.getClass().getSimpleName()
        if kind.endswith("JoinExec") or kind == "CartesianProductExec":
            for child in seq(node.children()):
                for below in _nodes(child):
                    count = _metric(below, "numOutputRows")
                    if count is not None:
                        total += count
                        break
    return total
