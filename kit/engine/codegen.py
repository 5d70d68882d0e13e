"""The Java code Spark generates for a query: one class per whole-stage-codegen stage.

Flink's planner translates each physical node to a generated operator (the seed's Calc over
``t2``: ``id < 1000`` as Java); Spark fuses a chain of operators into one generated
iterator per *stage* (the ``*(n)`` of its plans): a scan's rows, the filter and the
projection run in one loop, with no call between operators.

``stages(df)`` gives each stage of a DataFrame's physical plan (planned anew without
adaptive execution, whose stages only exist once it runs) with its id, its operators and
its code, formatted by Spark's ``CodeFormatter``, with ``spark.sql.codegen.comments`` on:
each expression's code follows a comment with the expression, so the filter is found by
its condition.

    >>> stage = CodegenStage(1, ("FilterExec", "ColumnarToRowExec"), "*(1) Filter ...",
    ...                      "/* 001 */ ...\\n/* 042 */ // (id#8L < 1000)\\n/* 043 */ ...")
    >>> stage.lines_about("id#8L < 1000")
    ['/* 042 */ // (id#8L < 1000)']
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KitError
from ..jvm import bridge
from .batch import session_conf, fresh
from .plan import seq, user_names

__all__ = ["CodegenStage", "stages", "stage_of"]


@dataclass(frozen=True)
class CodegenStage:
    """One whole-stage-codegen stage: ``id`` (``codegenStageId``), the operators fused in it
    (classes, from the top), the stage's plan as Spark prints it, and its Java source."""

    id: int
    operators: tuple
    plan: str
    code: str

    def lines_about(self, text: str) -> list:
        """The lines of the code that mention ``text`` (an expression, a column)."""
        return [line for line in self.code.splitlines() if text in line]

    def __str__(self):
        return f"stage {self.id}: {' <- '.join(self.operators)}\n{self.plan}\n\n{self.code}"


def stages(frame) -> list:
    """The ``CodegenStage``s of ``frame``'s physical plan (read in the JVM: ``kit.jvm.bridge``)."""
    spark = frame.sparkSession
    bridge.require(spark, "generated code")
    jdf = bridge.dataset(frame)
    conf = {"spark.sql.adaptive.enabled": "false"}
    with session_conf(spark, conf):
        plan = fresh(spark, jdf.queryExecution().analyzed()).queryExecution().executedPlan()
        found = []
        for node in _walk(plan):
            if node.getClass().getSimpleName() == "WholeStageCodegenExec":
                code = node.doCodeGen()._2()
                text = bridge.jvm(spark).org.apache.spark.sql.catalyst.expressions.codegen.CodeFormatter.format(code, -1)
                found.append(CodegenStage(int(node.codegenStageId()), tuple(_fused(node.child())),
                                          user_names(node.treeString()), str(text)))
    return sorted(found, key=lambda s: s.id)


def stage_of(frame, operator: str = "FilterExec", mentioning: str | None = None) -> CodegenStage:
    """The stage in which ``operator`` runs (the first one, or the one whose plan mentions
    ``mentioning``, e.g. ``"< 1000"``)."""
    for stage in stages(frame):
        if operator in stage.operators and (mentioning is None or mentioning in stage.plan):
            return stage
    raise KitError(f"no whole-stage-codegen stage runs {operator}"
                   + (f" mentioning {mentioning!r}" if mentioning else ""))


def _walk(node):
    yield node
    for child in seq(node.children()):
        yield from _walk(child)


def _fused(node):
    """The operators of one stage, top down, to its inputs (``InputAdapter``: another stage)."""
    yield node.getClass().getSimpleName()
    for child in seq(node.children()):
        if child.getClass().getSimpleName() != "InputAdapter":
            yield from _fused(child)
