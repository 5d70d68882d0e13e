"""The optimizer rules that changed a plan, in order, each with the plan before and after.

How: the kit runs Spark's own optimizer itself, batch by batch and rule by rule, through
py4j, as Catalyst's ``RuleExecutor.execute`` does -- each batch's rules in order, again
and again until an iteration leaves the plan unchanged (``fastEquals``) or the batch's
``maxIterations`` is reached (1 for ``Once`` batches) -- and keeps each application that
changed the plan. The batches and rule objects are the session's
(``sessionState.optimizer.batches``), so ``spark.sql.optimizer.excludedRules``, extensions
and the Spark version's own rule list all apply. The replay's last plan is compared with
the plan Spark itself optimized (``RuleLog.matches``): equal on every query the tests run.

Why not the alternatives:

- Spark's plan change log (``spark.sql.planChangeLog.level``) is text sent to log4j: it
  needs an appender added to the JVM's logging at run time, gives both plans side by
  side in one padded string that has to be split again, and no plan objects (so no
  statistics or node classes after each rule).
- ``QueryPlanningTracker.rules()`` says which rules were effective and how often, but not
  in what order nor what they did; ``RuleLog.tracker_effective`` reports it as a check.

One application costs a py4j round trip (about 0.3 ms): a query of a few joins replays its
~300 rule calls in a tenth of a second. Plans are read into ``PlanNode`` trees only when
asked for (``RuleApplication.before`` / ``after``).

    >>> app = RuleApplication("Operator Optimization", "ConstantFolding", 1,
    ...                       "Project [(1 + 2) AS x]", "Project [3 AS x]")
    >>> print(app.diff())
    ConstantFolding (Operator Optimization, iteration 1)
    - Project [(1 + 2) AS x]
    + Project [3 AS x]
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ..jvm import bridge
from .plan import read_plan, seq, user_names

__all__ = ["RuleApplication", "RuleLog", "replay", "short_rule"]


def short_rule(name: str) -> str:
    """A rule's class name without its package (``Optimizer$FinishAnalysis`` stays)."""
    return name.rsplit(".", 1)[-1]


@dataclass
class RuleApplication:
    """One rule that changed the plan: its batch, the batch's iteration, the plans' text."""

    batch: str
    rule: str               # short name, e.g. "ConstantFolding"
    iteration: int
    before_text: str
    after_text: str
    full_name: str = ""     # the rule's class, e.g. org.apache.spark...ConstantFolding
    _plans: tuple = field(default=(None, None), repr=False)

    @property
    def before(self):
        """The plan before the rule, as a ``PlanNode`` tree (with Catalyst's estimates)."""
        return read_plan(self._plans[0], stats=True) if self._plans[0] is not None else None

    @property
    def after(self):
        """The plan after the rule, as a ``PlanNode`` tree (with Catalyst's estimates)."""
        return read_plan(self._plans[1], stats=True) if self._plans[1] is not None else None

    def diff(self) -> str:
        """The rule's name and what it changed, as the changed lines of the two plans."""
        head = f"{self.rule} ({self.batch}, iteration {self.iteration})"
        lines = [line for line in difflib.ndiff(self.before_text.splitlines(), self.after_text.splitlines())
                 if line[:1] in "-+"]
        return "\n".join([head] + lines)


@dataclass
class RuleLog:
    """Every effective rule application of one optimizer run, in the order they happened."""

    applications: list
    matches: bool | None = None       # the replay's result equals Spark's optimized plan
    tracker_effective: tuple = ()     # rules Spark's QueryPlanningTracker saw change the plan
    calls: int = 0                    # rule calls made, effective or not

    def rules(self) -> list:
        """The short names of the rules that changed the plan, in order (repeats kept)."""
        return [a.rule for a in self.applications]

    def __iter__(self):
        return iter(self.applications)

    def __len__(self):
        return len(self.applications)

    def __getitem__(self, i):
        return self.applications[i]

    def __str__(self):
        return "\n\n".join(a.diff() for a in self.applications)


def replay(spark, query_execution) -> RuleLog:
    """Run the session's optimizer on ``query_execution``'s analyzed plan (with cached data
    substituted, as Spark does) one rule at a time, keeping the rules that changed it."""
    session = bridge.session(spark)
    bridge.jvm(spark).org.apache.spark.sql.SparkSession.setActiveSession(session)   # its conf for the rules
    optimizer = session.sessionState().optimizer()
    plan = query_execution.withCachedData().clone()
    applications, calls = [], 0
    for batch in seq(optimizer.batches()):
        rules = seq(batch.rules())
        most = batch.strategy().maxIterations()
        iteration = 1
        while True:
            start = plan
            for rule in rules:
                result = rule.apply(plan)
                calls += 1
                if not result.fastEquals(plan):
                    name = rule.ruleName()
                    applications.append(RuleApplication(
                        batch.name(), short_rule(name), iteration, user_names(plan.treeString()),
                        user_names(result.treeString()), name, (plan, result)))
                plan = result
            iteration += 1
            if iteration > most or plan.fastEquals(start):
                break
    spark_plan = query_execution.optimizedPlan()
    matches = bool(plan.fastEquals(spark_plan) or plan.sameResult(spark_plan))
    return RuleLog(applications, matches, _effective(query_execution), calls)


def _effective(query_execution) -> tuple:
    """The rules Spark's planning tracker counted as effective for this query (any phase)."""
    try:
        summary = query_execution.tracker().rules()
        names = seq(summary.keys().toSeq())
        return tuple(sorted(short_rule(str(n)) for n in names
                            if summary.apply(n).numEffectiveInvocations() > 0))
    except Exception:   # a Spark without the tracker's rule summary
        return ()
