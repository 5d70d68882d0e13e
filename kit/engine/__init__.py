"""How the SQL engine works, shown on Spark's own: plans, rewrites, join choice, code, rows.

Seed 004, section 2 (logical planning, expression reduce, predicate and projection pushdown,
physical planning and the broadcast choice, code generation) and section 3.1 (BinaryRow),
made visible on the engine that runs the kit's queries:

- ``explain(query, **tables)`` (``batch``): Catalyst's plans at each stage as ``PlanNode``
  trees (``plan``), the optimizer rules that changed them in order (``rules``), the join
  choices with the statistics and threshold behind them;
- ``eg1``: the seed's E.g.1 on Parquet tables, each rewrite it names found on plan nodes,
  and each one's effect measured by running with it turned off;
- ``codegen``: the Java code of a whole-stage-codegen stage;
- ``rows``: one row as Spark's UnsafeRow and as Flink's BinaryRow, byte by byte.
"""

from . import codegen, eg1, rows
from .batch import JVM_CELL, JVM_CELLS, NO_JVM_CELLS, STAGES, Explanation, JoinChoice, explain, from_text, skip_jvm_cells
from .codegen import CodegenStage
from .plan import PlanNode, read_plan
from .rows import RowLayout, binary_row, unsafe_row
from .rules import RuleApplication, RuleLog

__all__ = ["JVM_CELL", "JVM_CELLS", "NO_JVM_CELLS", "STAGES", "CodegenStage", "Explanation", "JoinChoice", "PlanNode", "RowLayout", "RuleApplication",
           "RuleLog", "binary_row", "codegen", "eg1", "explain", "from_text", "read_plan", "rows", "skip_jvm_cells",
           "unsafe_row"]
