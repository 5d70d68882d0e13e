"""The planner's program: a continuous query over streams to Flink's physical plan into a sink.

``physical_plan(query, sink, config, **streams)`` returns the physical plan Flink 2.3 makes
for ``INSERT INTO <sink> <query>`` over ``kit.Stream``s, each node with its changelog mode,
by the steps of Flink's ``FlinkStreamProgram``, one module each:

1. ``rewrite``: the constructs outside dynamic tables become placeholders (``Special``);
2. ``logical``: the query as the kit's tree of changelog operators;
3. ``physical``: that tree as Flink's physical nodes (``Converter``);
4. ``prune``: projection pushdown (``Pruner``);
5. ``optimize``: mini-batch, local-global, split distinct, as ``config`` asks;
6. the ``Sink``, then ``changelog_mode``: what every node emits, and the update-before decision.

``sink``: ``"retract"`` (Flink's ``print``: every row kind), ``"upsert"`` (``blackhole``, or a
sink with a primary key: no ``UB``), ``"append"`` (``filesystem``: inserts only; an updating
query fails there with Flink's message) or ``None`` (the bare SELECT: no Sink node, no ``UB``
at the top). ``table_plan(t)`` is the plan of ``kit.sql``'s ``DynamicTable`` ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...errors import KitError
from ...changelog import Options
from ..options import dynamic_options
from ..statement import Statement
from . import logical as P
from .changelog_mode import infer
from .optimize import optimize
from .physical import Converter, PhysicalNode
from .prune import Pruner
from .rewrite import Special, TimeOver, flink_error, time_over

__all__ = ["SINK_KINDS", "Planned", "physical_plan", "table_plan"]

SINK_KINDS = ("retract", "upsert", "append", None)


@dataclass
class Planned:
    """``query`` (a ``Statement``, or its text) over ``streams`` planned to Flink's physical
    nodes (no sink yet)."""
    query: Statement | str
    streams: dict
    node: PhysicalNode = None
    names: list = None

    def __post_init__(self):
        self.query = Statement.of(self.query)
        special = Special(self.query, self.streams, lambda query, streams: Planned(query, streams).node)
        spliced = special.rewrite()
        try:
            root, names = P.plan(spliced, special.tables)
        except KitError as error:
            raise flink_error(error, spliced, special) from None
        converter = Converter(special.builders, special.windows)
        node, _, _ = converter.node(root)
        node = Pruner().prune(node, list(root.columns))     # the sink reads every column
        self.names = list(names)
        if special.sort:
            node = PhysicalNode("TemporalSort", f"orderBy=[{special.sort}]", [PhysicalNode(
                "Exchange", "distribution=[single]", [node])], attrs={"pass": True, "needs": []})
        self.node = node


def physical_plan(query: Statement | str, sink: str | None = "retract", config=None, **streams) -> PhysicalNode:
    """The physical plan of ``INSERT INTO <sink> query`` (``sink`` None: the bare query) over
    ``streams`` (``kit.Stream``s by the names the query uses), each node with the changelog
    mode Flink 2.3 gives it (``changelog_mode``); ``config``: Flink's options by name, as
    ``kit.sql`` takes them (mini-batch, agg-phase strategy, split distinct: ``optimize``).
    Raises ``KitError`` with Flink's message where Flink's planner refuses the query."""
    if sink not in SINK_KINDS:
        raise KitError(f"sink={sink!r} is not one of {list(SINK_KINDS)}")
    options = config if isinstance(config, Options) else dynamic_options(config or {})[0]
    statement = Statement.of(query)               # text: read here, once
    try:
        planned = Planned(statement, streams)
        node, fields = optimize(planned.node, options), ", ".join(planned.names)
    except TimeOver as route:
        node = time_over(route.statement, route.special)
        fields = _fields(statement)
    if sink is not None:
        node = PhysicalNode("Sink", f"table=[default_catalog.default_database.{sink}_sink], fields=[{fields}]",
                            [node])
    infer(node, sink)
    return node


def _fields(statement: Statement) -> str:
    """The sink's field names: the SELECT list's (only a label: empty where there is none)."""
    tree = statement.tree
    return ", ".join(e.alias_or_name for e in tree.expressions) if isinstance(tree, exp.Select) else ""


def table_plan(table) -> PhysicalNode:
    """The physical plan of a ``DynamicTable`` (``kit.sql``'s result) into its sink."""
    streams = {}

    def walk(n):
        if isinstance(n, P.Source):
            streams[n.table] = n.stream
        for child in n.inputs:
            walk(child)
    walk(table.root)
    return physical_plan(table.statement, table.sink, table.options, **streams)
