"""``kit.explain(query, **tables)``: what Spark's optimizer did to a query, stage by stage.

The query is Flink SQL run as ``kit.sql`` runs it (the same views, rewrites and errors:
a bad table name or a syntax error is a ``SqlError`` at the line and column of ``query``),
then Catalyst's four plans are read as ``PlanNode`` trees -- parsed, analyzed, optimized
(with Catalyst's row and size estimates on every node) and physical (with the estimates of
the logical node each operator was planned from) -- together with the
optimizer rules that changed the plan, in order, each with the plan before and after
(``kit.engine.rules``: why they are replayed rather than read from Spark's log), and the
join strategy of each join with the statistics and the threshold that decided it.

    >>> e = kit.explain("SELECT id FROM t WHERE id < 2", t=pandas.DataFrame({"id": [0, 1, 2]}))  # doctest: +SKIP
    >>> e.rules.rules()                                                 # doctest: +SKIP
    ['Optimizer$FinishAnalysis', 'RemoveNoopOperators', 'ConvertToLocalRelation']
    >>> print(e.stages["optimized"])        # the filter ran on the local rows  # doctest: +SKIP
    LocalRelation [id#0L]  rows=2 size=32 B

``conf`` sets Spark options for the planning only (``{"spark.sql.autoBroadcastJoinThreshold":
-1}``: the join choice without broadcasts); the session's own are restored after.

The rule log covers the optimizer, where E.g.1's rewrites happen. The analyzer's rules are
not replayed (``Analyzer.execute`` keeps per-query context a replay would miss): the ones
Spark counted as effective are in ``rules.tracker_effective``, without order. Physical
planning is shown by its result and the join choice; the rules that prepare the physical
plan (``EnsureRequirements``, ``CollapseCodegenStages``) are not logged. ``conf`` changes the
session's options for the duration of the call, so two calls at once on one session
(threads) would see each other's.

The physical plan is the one Spark would start with: with adaptive execution on (Spark's
default) a sort-merge join may still become a broadcast at run time, once the shuffle has
measured the real sizes (``spark.sql.adaptive.autoBroadcastJoinThreshold``).

On Spark Connect the client has no JVM: on a server with the kit's plugin (``kit.jvm.bridge``;
the one ``kit.tools.cluster`` starts) ``explain`` reads the server's plans as above. On other
Connect servers it degrades to the text Connect returns (``DataFrame.explain(mode="extended")``
and ``mode="cost"`` for the estimates), one string per stage in ``texts``, ``stages`` and
``joins`` empty, ``rules`` None, and says so in ``notes``.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

from ..errors import KitError
from ..jvm import bridge
from .plan import read_plan, seq, user_names
from .rules import RuleLog, replay

__all__ = ["Explanation", "JoinChoice", "explain", "from_text", "STAGES", "JVM_CELL", "skip_jvm_cells"]

STAGES = ("parsed", "analyzed", "optimized", "physical")
_HEADERS = {"Parsed Logical Plan": "parsed", "Analyzed Logical Plan": "analyzed",
            "Optimized Logical Plan": "optimized", "Physical Plan": "physical"}


@dataclass
class JoinChoice:
    """How Spark planned one join: both sides' estimates against the broadcast threshold.

    ``strategy`` is the physical operator Spark chose (``BroadcastHashJoinExec``,
    ``SortMergeJoinExec``, ``ShuffledHashJoinExec``, ``BroadcastNestedLoopJoinExec``...);
    ``reason`` is Spark's size rule (``JoinSelection``) applied to the numbers, for an
    equi-join without hints: a side whose ``sizeInBytes`` is at most the threshold can be
    broadcast, the smaller such side is; else sort-merge (``spark.sql.join.preferSortMergeJoin``).
    """

    join_type: str
    condition: str
    left_rows: int | None
    left_bytes: int
    right_rows: int | None
    right_bytes: int
    threshold: int          # spark.sql.autoBroadcastJoinThreshold, bytes (-1: never broadcast)
    strategy: str | None
    build_side: str | None = None
    reason: str = ""


@dataclass
class Explanation:
    """The plans of one query at each stage, the rules that changed it and the join choices."""

    query: str | None
    stages: dict = field(default_factory=dict)   # stage -> PlanNode (where the JVM is reached)
    texts: dict = field(default_factory=dict)    # stage -> Spark's own text of that plan
    rules: RuleLog | None = None
    joins: list = field(default_factory=list)
    connect: bool = False      # Spark Connect without the kit's plugin: text only
    notes: list = field(default_factory=list)
    conf: dict = field(default_factory=dict)
    dataframe: DataFrame | None = field(default=None, repr=False)

    def __repr__(self):
        joins = ", ".join(str(j.strategy) for j in self.joins) or "none"
        rules = "not available" if self.rules is None else f"{len(self.rules)} rule applications"
        where = " of Spark Connect's plan text" if self.connect else ""
        return f"<Explanation{where}: {len(self.texts)} plans, {rules}, joins: {joins}; print() it>"

    def history(self) -> str:
        """The optimized plan's history as DataFusion's ``EXPLAIN VERBOSE`` prints one: the
        analyzed plan, then the whole plan after each rule that changed it (``SAME TEXT AS
        ABOVE`` when a rule changed the plan but not its text)."""
        if self.rules is None:
            return "\n\n".join(f"== {stage} ==\n{self.texts.get(stage, '')}" for stage in STAGES)
        parts, last = [], None
        for i, a in enumerate(self.rules):
            if i == 0:
                parts.append(f"== initial plan ==\n{a.before_text}")
                last = a.before_text
            text = "SAME TEXT AS ABOVE" if a.after_text == last else a.after_text
            parts.append(f"== after {a.rule} ({a.batch}, iteration {a.iteration}) ==\n{text}")
            last = a.after_text
        return "\n\n".join(parts)

    def __str__(self):
        parts = []
        for stage in STAGES:
            tree = self.stages.get(stage)
            parts.append(f"== {stage} ==\n" + (tree.render() if tree is not None else self.texts.get(stage, "")))
        if self.rules is not None:
            parts.append(f"== rules that changed the plan ({len(self.rules)}) ==\n" + str(self.rules))
        for join in self.joins:
            parts.append(f"== join: {join.strategy} ==\n{join.reason}")
        parts += [f"note: {n}" for n in self.notes]
        return "\n\n".join(parts)


def explain(query, conf: dict | None = None, **tables) -> Explanation:
    """The ``Explanation`` of Flink SQL ``query`` over ``tables`` (as ``kit.sql`` takes them),
    or of a Spark DataFrame; ``conf`` holds Spark options set while it is planned."""
    from .. import sql as kit_sql

    if isinstance(query, DataFrame) or _is_connect_frame(query):
        if tables:
            raise KitError("kit.explain of a DataFrame takes no tables: they are in its plan already")
        frame, text = query, None
    elif isinstance(query, str):
        frame, text = kit_sql(query, **tables), query
        if not isinstance(frame, DataFrame) and not _is_connect_frame(frame):
            raise KitError("kit.explain shows Spark's batch plans; this query runs as a continuous query "
                           f"over streams ({type(frame).__name__}): explain a query over DataFrames")
    else:
        raise KitError(f"kit.explain takes Flink SQL as a string or a Spark DataFrame; got {type(query).__name__}")
    spark = frame.sparkSession
    conf = {str(k): str(v) for k, v in (conf or {}).items()}
    if not bridge.reachable(spark):
        return _explain_connect(frame, text, conf)
    with session_conf(spark, conf):
        return _explain_classic(spark, frame, text, conf)


def _is_connect_frame(value) -> bool:
    return type(value).__module__.startswith("pyspark.sql.connect")


@contextlib.contextmanager
def session_conf(spark, conf: dict):
    """Spark options ``conf`` set for the block, the session's values restored after."""
    fixed = [key for key in conf if not spark.conf.isModifiable(key) and key.startswith("spark.sql.")]
    if fixed:
        raise KitError(f"{', '.join(fixed)}: a static Spark option, set only when the session starts")
    saved = {key: spark.conf.get(key, None) for key in conf}
    try:
        for key, value in conf.items():
            try:
                spark.conf.set(key, value)
            except Exception as error:   # Spark checks the value (IllegalArgumentException): say which
                reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise KitError(f"conf {key}={value!r}: Spark does not take this value ({reason})") from None
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def fresh(spark, analyzed):
    """A new JVM Dataset of the analyzed plan ``analyzed``: its optimizer and planner run
    anew, under the options in force now (a DataFrame keeps the plans it once made)."""
    jvm, session = bridge.jvm(spark), bridge.session(spark)
    try:
        return jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, analyzed)      # Spark 4
    except Exception:
        return jvm.org.apache.spark.sql.Dataset.ofRows(session, analyzed)


def _explain_classic(spark, frame, text, conf) -> Explanation:
    original = bridge.dataset(frame).queryExecution()
    qe = fresh(spark, original.analyzed()).queryExecution()
    parsed = original.logical()
    stages = {"parsed": read_plan(parsed), "analyzed": read_plan(qe.analyzed(), stats=True),
              "optimized": read_plan(qe.optimizedPlan(), stats=True), "physical": read_plan(qe.executedPlan(), stats=True, physical=True)}
    texts = {"parsed": user_names(parsed.treeString()), "analyzed": user_names(qe.analyzed().treeString()),
             "optimized": user_names(qe.optimizedPlan().treeString()),
             "physical": user_names(qe.executedPlan().treeString())}
    log = replay(spark, qe)
    notes = []
    if not log.matches:
        notes.append("the rule-by-rule replay ended on a plan other than Spark's optimized plan "
                     "(a rule that is not deterministic): the optimized stage is Spark's own")
    if _adaptive(qe.executedPlan()):
        notes.append("adaptive execution is on: the physical plan is the one Spark starts with; "
                     "a join may change strategy at run time from the measured shuffle sizes")
    joins = join_choices(spark, qe)
    return Explanation(text, stages, texts, log, joins, False, notes, conf, frame)


def _adaptive(jplan) -> bool:
    return jplan.getClass().getSimpleName() == "AdaptiveSparkPlanExec"


def threshold(spark) -> int:
    """``spark.sql.autoBroadcastJoinThreshold`` in bytes (-1: no broadcast by size)."""
    return int(bridge.session(spark).sessionState().conf().autoBroadcastJoinThreshold())


def _joins(jplan, physical: bool) -> list:
    """The join nodes of a JVM plan, pre-order."""
    found = []

    def walk(node):
        kind = node.getClass().getSimpleName()
        if (physical and (kind.endswith("JoinExec") or kind == "CartesianProductExec")) or (not physical and kind == "Join"):
            found.append(node)
        for child in seq(node.children()):
            walk(child)
    walk(jplan)
    return found


def join_choices(spark, qe) -> list:
    """A ``JoinChoice`` per join of ``qe``'s optimized plan, matched with the planner's joins
    (``sparkPlan``, before adaptive execution) in tree order."""
    limit = threshold(spark)
    logical = _joins(qe.optimizedPlan(), physical=False)
    physical = _joins(qe.sparkPlan(), physical=True)
    choices = []
    for i, join in enumerate(logical):
        left, right = join.left().stats(), join.right().stats()
        chosen = physical[i] if i < len(physical) else None
        strategy = chosen.getClass().getSimpleName() if chosen is not None else None
        build = None
        if chosen is not None and strategy in ("BroadcastHashJoinExec", "ShuffledHashJoinExec",
                                               "BroadcastNestedLoopJoinExec"):
            build = str(chosen.buildSide().toString())
        condition = join.condition()
        choice = JoinChoice(
            join_type=str(join.joinType().toString()),
            condition=user_names(condition.get().toString()) if condition.isDefined() else "",
            left_rows=_count(left.rowCount()), left_bytes=int(str(left.sizeInBytes())),
            right_rows=_count(right.rowCount()), right_bytes=int(str(right.sizeInBytes())),
            threshold=limit, strategy=strategy, build_side=build)
        choice.reason = _reason(choice)
        choices.append(choice)
    return choices


def _count(option):
    return int(str(option.get())) if option.isDefined() else None


def _reason(c: JoinChoice) -> str:
    """Spark's size rule for an equi-join without hints, in the numbers of ``c``."""
    def side(name, size, rows):
        return f"{name} sizeInBytes={size:,}" + (f" (rows={rows:,})" if rows is not None else "")
    sides = f"{side('left', c.left_bytes, c.left_rows)}, {side('right', c.right_bytes, c.right_rows)}"
    limit = f"spark.sql.autoBroadcastJoinThreshold={c.threshold:,}"
    small = [n for n, s in (("left", c.left_bytes), ("right", c.right_bytes)) if 0 <= s <= c.threshold]
    if c.threshold < 0:
        rule = f"{limit}: no side is broadcast by size"
    elif small:
        rule = f"{' and '.join(small)} <= {limit}: broadcastable"
    else:
        rule = f"both sides > {limit}: none broadcastable"
    return f"{sides}; {rule}; Spark chose {c.strategy}" + (f" ({c.build_side})" if c.build_side else "")


# ---------------------------------------------------------------------------- Spark Connect

def _explain_connect(frame, text, conf) -> Explanation:
    """What Connect exposes: Spark's explain text, per stage, and the estimates as text."""
    if conf:
        with session_conf(frame.sparkSession, conf):
            extended, cost = frame._explain_string(mode="extended"), frame._explain_string(mode="cost")
    else:
        extended, cost = frame._explain_string(mode="extended"), frame._explain_string(mode="cost")
    result = from_text(extended, cost)
    result.query, result.conf, result.dataframe = text, conf, frame
    return result


def from_text(extended: str, cost: str | None = None) -> Explanation:
    """An ``Explanation`` from Spark's explain text alone (Spark Connect): ``extended`` is
    ``explain(mode="extended")``, ``cost`` is ``explain(mode="cost")`` (its optimized plan
    has the ``Statistics(sizeInBytes=...)`` of each node, kept as ``texts["optimized_cost"]``).

    >>> e = from_text("== Parsed Logical Plan ==\\n'Project [*]\\n\\n== Physical Plan ==\\n*(1) Range (0, 3)")
    >>> e.texts["physical"], e.connect, e.rules is None
    ('*(1) Range (0, 3)', True, True)
    """
    texts = _sections(extended)
    if cost:
        optimized = _sections(cost).get("optimized")
        if optimized:
            texts["optimized_cost"] = optimized
    notes = ["Spark Connect: the client has no JVM plans, so each stage is Spark's explain text "
             "(no plan nodes; estimates only as text, in texts['optimized_cost']), and neither the "
             "rules that changed the plan nor the join statistics can be read"]
    return Explanation(None, {}, texts, None, [], True, notes)


def _sections(text: str) -> dict:
    """``== Parsed Logical Plan ==`` ... blocks of an explain text, by stage."""
    found, current = {}, None
    for line in text.splitlines():
        header = re.fullmatch(r"== (.+) ==", line.strip())
        if header and header.group(1) in _HEADERS:
            current = _HEADERS[header.group(1)]
            found[current] = []
        elif current is not None:
            found[current].append(line)
    return {k: user_names("\n".join(v).strip("\n")) for k, v in found.items()}


# ---------------------------------------------------------------------------- notebooks on Connect

# A notebook cell's first line, where the JVM is out of reach (skip_jvm_cells): JVM_CELL skips
# the cell; JVM_CELLS ("# needs the JVM from here ...") it and every later one, up to a cell
# whose first line starts with NO_JVM_CELLS.
JVM_CELL, JVM_CELLS, NO_JVM_CELLS = "# needs the JVM", "# needs the JVM from here", "# no JVM needed from here"
_SKIPPING = [False]   # between JVM_CELLS and NO_JVM_CELLS
_SKIPPED = ("Skipped: this cell reads JVM objects (plan nodes, optimizer rules, metrics, generated code or row "
            f"bytes), and this Spark Connect server does not let a client reach them (it runs no {bridge.PLUGIN} "
            "plugin; the Connect server kit.tools.cluster starts does). kit.explain gives Spark's plan text here "
            "(Explanation.texts). Use that server or a local or standalone-cluster session to see this cell.")


def skip_jvm_cells(spark) -> bool:
    """On a Spark Connect server whose JVM the kit cannot reach (``kit.jvm.bridge``), have
    IPython skip every later cell whose first line starts with ``JVM_CELL`` (or that follows
    ``JVM_CELLS`` and comes before ``NO_JVM_CELLS``), printing why
    instead, so a notebook runs top to bottom; elsewhere (classic Spark, a Connect server with
    the kit's plugin, or outside IPython) do nothing. True when cells are skipped."""
    if bridge.reachable(spark):
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return True
    shell = get_ipython()
    if shell is not None and _skip_jvm_cell not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(_skip_jvm_cell)
    return True


def _skip_jvm_cell(lines: list) -> list:
    """An IPython input transformer: a cell marked ``JVM_CELL``, or after ``JVM_CELLS`` and
    before ``NO_JVM_CELLS``, becomes a print of why it is skipped.

    >>> _skip_jvm_cell(["# needs the JVM: plan nodes\\n", "e.stages\\n"])[0][:31]
    'print("Skipped: this cell reads'
    >>> _skip_jvm_cell(["x = 1\\n"])
    ['x = 1\\n']
    """
    first = lines[0] if lines else ""
    if first.startswith(NO_JVM_CELLS):
        _SKIPPING[0] = False
    elif first.startswith(JVM_CELLS):
        _SKIPPING[0] = True
    if _SKIPPING[0] or first.startswith(JVM_CELL):
        return [f"print({_SKIPPED!r})\n"]
    return lines
