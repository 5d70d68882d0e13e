"""The continuous-query planner: Flink SQL over streams -> the operators a Flink job runs.

Entry points (the rest is the planner's inside):

- ``physical_plan(query, sink, config, **streams)``: Flink's physical plan of
  ``INSERT INTO <sink> <query>``, a tree of ``PhysicalNode``s, each with its changelog mode;
- ``table_plan(t)``: the same for ``kit.sql``'s ``DynamicTable`` ``t`` (``t.explain()``);
- ``explain_changelog_mode(...)``: the plan as Flink's ``EXPLAIN CHANGELOG_MODE`` prints it;
  ``parse_explain`` / ``compared``: such a text read back, and the normalization the kit's
  plans are compared with Flink's on;
- ``logical.plan(query, tables)``: the kit's own operator tree, which ``kit.sql.table`` runs.

One module per step, as Flink's planner programs and sqlglot's optimizer rules: ``rewrite``
(placeholders for the constructs outside dynamic tables), ``logical`` (SQL -> changelog
operators), ``physical`` (Flink's nodes, and the conversion to them), ``prune`` (projection
pushdown), ``optimize`` (mini-batch, local-global, split distinct), ``changelog_mode`` (what
each node emits; the update-before decision), ``program`` (the steps in order), ``explain``
(the text). The operators themselves are ``kit.changelog``'s.
"""

from .explain import compared, explain_changelog_mode, parse_explain
from .physical import PhysicalNode
from .program import SINK_KINDS, physical_plan, table_plan

__all__ = ["PhysicalNode", "SINK_KINDS", "physical_plan", "table_plan", "explain_changelog_mode", "parse_explain",
           "compared"]
