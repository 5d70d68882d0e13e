"""``plan``: a query plan drawn as a tree -- Spark's batch plans stage by stage and rule by
rule, or a continuous query's physical plan with the changelog mode of every node and the
messages on every edge.

What it takes:

- ``kit.explain(query, **tables)`` (an ``Explanation``): one stage (``"parsed"``,
  ``"analyzed"``, ``"optimized"``, ``"physical"``) as a tree, each node with Spark's name,
  its arguments (on up to three lines, then cut; whole in the tooltip) and Catalyst's
  estimates (``rows``, ``size``); or ``stage="rules"``: the optimizer rule by rule, one step
  per rule application (step 0 the plan before the first rule, step k the plan after the
  k-th), the rule named above the tree, the nodes it made or changed (or whose inputs it
  changed) outlined thick. The step is chosen on a strip under the title (press a cell or
  drag along it) or in a number box under the chart (typed, or the arrow keys: JupyterLab
  keeps a focused slider's arrow keys to move between cells, a box's it leaves). Every
  step's tree is laid out in Python into one small table with a ``step`` column and the
  chart shows the rows of the chosen step: choosing redraws in the browser, with no Python
  or Spark. A ``RuleLog`` (``e.rules``) or a ``PlanNode`` alone draw
  the same way. On Spark Connect (an ``Explanation`` of text only) a stage is drawn from
  Spark's explain text (estimates from ``mode="cost"``); there is no rule log to step through.
- a continuous query: ``kit.sql(...)``'s ``DynamicTable`` or ``kit.sql.planner.physical_plan``'s
  ``PhysicalNode``: Flink's physical nodes, each with its changelog mode (``[I,UB,UA]``, as
  ``EXPLAIN CHANGELOG_MODE`` writes it) and filled by what it emits (inserts only; updates
  with update-before; updates without), each edge labelled with the row kinds it carries,
  counted (``+I 3 -U 2 +U 2 -D 1``) when ``messages`` are given (``DynamicTable.messages()``;
  for a ``DynamicTable`` they are counted unless ``messages=False``: one Spark job per
  operator). A list of them (the same query into a retract and an upsert sink) is drawn side
  by side, its legend below them, so the ``-U`` messages the upsert sink saves show at a glance.

Counts on edges the run did not count directly: an ``Exchange``, a ``WatermarkAssigner`` and
a ``Calc`` without a ``where`` send the rows they receive, one for one and of the same kind,
so their edge carries their input's counts (a scan's: its stream's rows); a filtering
``Calc`` shows the kinds only.

Layout (a tidy tree): leaves left to right in plan order, one column each, a parent centred
over its first and last child, one row per depth, the root at the top; pixel positions are
computed here and drawn with ``scale=None``, so nothing is rescaled between steps.

    >>> from kit.engine import PlanNode
    >>> leaf = PlanNode("LocalRelation", "LocalRelation", "[id#0L]", rows=3, size_bytes=24)
    >>> chart = plan(PlanNode("Filter", "Filter", "(id#0L < 2)", children=(leaf,)))
    >>> chart.layer[2].data[["name", "info"]].values.tolist()
    [['Filter', ''], ['LocalRelation', 'rows=3 size=24 B']]
"""

from __future__ import annotations

import itertools
import re
import textwrap
from collections import Counter
from dataclasses import dataclass, field

import altair as alt
import pandas as pd

from ..changelog import INSERT, KINDS as ROW_KINDS, UPDATE_AFTER, UPDATE_BEFORE, mode_text
from ..errors import KitError
from ..sql.planner import PhysicalNode, table_plan
from ..sql.table import DynamicTable
from .changelog import KINDS as CHANGE_KINDS, LABELS
from .marks import Kind, check_title, legend, title_params
from .render import SCRUB

__all__ = ["plan", "NODE_KINDS", "MODE_KINDS"]

RULES = "rules"     # the stage= that draws the optimizer step by step
STRIP, STEP_CELL = "kit_steps", 24  # the strip of steps atop a rules chart; its cells' widest (px)

NODE_KINDS = [Kind("scan / relation", "#1f77b4", "square", fill="#dbe9f6"),
              Kind("filter / project", "#2ca02c", "square", fill="#e0f3db"),
              Kind("join", "#9467bd", "square", fill="#ece2f3"),
              Kind("aggregate / sort / limit", "#ff7f0e", "square", fill="#fde6cf"),
              Kind("exchange", "#8c564b", "square", fill="#efe3df"),
              Kind("other", "#7f7f7f", "square", fill="#eeeeee")]
_COLOR = {op: next(k.color for k in CHANGE_KINDS if k.label == label) for op, label in LABELS.items()}
MODE_KINDS = [Kind("emits inserts only", _COLOR[INSERT], "square", fill="#e0f3db"),
              Kind("emits updates with update-before (-U)", _COLOR[UPDATE_BEFORE], "square", fill="#fadbd8"),
              Kind("emits updates without -U", _COLOR[UPDATE_AFTER], "square", fill="#dbe9f6"),
              Kind("sink", "#555555", "square", fill="#eeeeee")]
_RETRACTING = _COLOR[UPDATE_BEFORE]   # an edge that carries -U
_EDGE = "#888888"

BOX_H, ROW_GAP, PAD = 56, 40, 8
DETAIL_LINES, LINE_H = 3, 12     # a node's arguments: wrapped onto at most 3 lines of 12 px
_PASS_THROUGH = ("Exchange", "WatermarkAssigner")


@dataclass
class _Box:
    """One node as drawn: its name, a line of detail (both cut to the box when laid out), a
    line of facts, its legend kind, the tooltip's texts; ``carried``: the label and colour of
    the edge up to its parent."""

    name: str
    detail: str
    info: str
    kind: str
    tips: dict
    children: list = field(default_factory=list)
    carried: str = ""
    edge_color: str = _EDGE
    line: str = ""          # what a rule step compares: the node's own text


def plan(source, stage: str | None = None, messages=None, column_width: int = 200,
         title: str | None = None) -> alt.TopLevelMixin:
    """Draw a plan as a tree (module doc).

        e = kit.explain("SELECT t1.id, 1 + 2 + t1.value AS v FROM t1, t2 WHERE ...", t1=t1, t2=t2)
        kit.viz.plan(e, "physical")     # a stage; "rules": the optimizer step by step
        kit.viz.plan([kit.sql(q, words=s, sink="retract"), kit.sql(q, words=s, sink="upsert")])

    ``source``: an ``Explanation``, ``RuleLog`` or ``PlanNode`` (batch), a ``DynamicTable`` or
    ``PhysicalNode`` (streaming), or a list of streaming ones; ``stage``: for an
    ``Explanation``, one of ``parsed``, ``analyzed``, ``optimized`` (the default),
    ``physical``, ``rules``; ``messages``: ``DynamicTable.messages()``'s list (or ``False``:
    do not count them for a ``DynamicTable``); ``column_width``: pixels per leaf column
    (arguments are cut to fit); ``title``: the chart's title instead of the default.
    """
    from ..engine import Explanation, PlanNode, RuleLog

    check_title("plan", title)
    if not isinstance(column_width, int) or isinstance(column_width, bool) or column_width < 100:
        raise KitError(f"plan: column_width must be an int of at least 100 (pixels); got {column_width!r}")
    streaming = (DynamicTable, PhysicalNode)
    if isinstance(source, (list, tuple)):
        if not source or not all(isinstance(s, streaming) for s in source):
            raise KitError("plan: a list is drawn side by side when it holds continuous queries "
                           "(DynamicTables or PhysicalNodes, e.g. one query into a retract and an upsert sink)")
        return _streaming(list(source), stage, messages, column_width, title)
    if isinstance(source, streaming):
        return _streaming([source], stage, messages, column_width, title)
    if messages is not None:
        raise KitError("plan: messages are counted for a continuous query's plan (a DynamicTable or a "
                       "PhysicalNode), not for a batch plan")
    if isinstance(source, Explanation):
        return _explanation(source, stage, column_width, title)
    if stage is not None:
        raise KitError(f"plan: stage is for an Explanation (kit.explain's result); got it with a "
                       f"{type(source).__name__}")
    if isinstance(source, RuleLog):
        return _steps(source, column_width, title)
    if isinstance(source, PlanNode):
        return _batch_tree(source, column_width, title, "The plan")
    raise KitError("plan draws kit.explain(...)'s Explanation (or its RuleLog or a PlanNode), a continuous "
                   "query's DynamicTable (kit.sql over kit.stream) or a kit.sql.planner.physical.PhysicalNode, "
                   f"or a list of those two; got {type(source).__name__}")


# ---------------------------------------------------------------------------- batch plans


def _explanation(e, stage, column_width, title):
    from ..engine import STAGES

    stage = "optimized" if stage is None else stage
    if stage not in STAGES + (RULES,):
        raise KitError(f"plan: stage={stage!r} is not a stage; the known ones are: "
                       f"{', '.join(STAGES + (RULES,))}")
    if stage == RULES:
        if e.rules is None:
            raise KitError(f"plan: this Explanation has no rule log ({'; '.join(e.notes) or 'no JVM plans'}); "
                           f"draw a stage instead: {', '.join(STAGES)}")
        return _steps(e.rules, column_width, title)
    tree = e.stages.get(stage)
    facts = None
    if tree is None:
        text = e.texts.get("optimized_cost") if stage == "optimized" else None
        text = text or e.texts.get(stage)
        if not text:
            raise KitError(f"plan: this Explanation has no {stage} plan; it has: {', '.join(e.texts) or 'none'}")
        tree = _from_text(text)
        facts = "drawn from Spark's explain text (Spark Connect: no plan objects)"
    return _batch_tree(tree, column_width, title, f"The {stage} plan", facts)


def _family(name: str) -> str:
    """A node's legend kind from Spark's node name (logical or physical)."""
    if re.search(r"Scan|Relation|Range|^View$", name):
        return "scan / relation"
    if re.search(r"Join|CartesianProduct", name):
        return "join"
    if re.search(r"Exchange|Shuffle|Repartition", name):
        return "exchange"
    if re.search(r"^(Filter|Project)$", name):
        return "filter / project"
    if re.search(r"Aggregate|Sort|Limit|Window|Expand|Distinct|Deduplicate|TopN|Tail", name):
        return "aggregate / sort / limit"
    return "other"


def _batch_box(node) -> _Box:
    """A ``PlanNode`` and its subtree as boxes: the name, the arguments cut short, the
    estimates as ``PlanNode.line`` writes them (``rows=3 size=72 B``)."""
    text = node.text or f"{node.name} {node.args}".rstrip()
    estimates = node.line()[len(text):].strip()
    tips = {"node": _one_line(text, 400), "class": node.kind, "estimate": estimates or "-",
            "output": _one_line(", ".join(node.output), 300) or "-"}
    scan = [f"{key}: {_one_line(value, 200)}" for key, value in sorted(node.metadata.items())
            if key in ("Format", "PartitionFilters", "PushedFilters", "ReadSchema")]
    if scan:
        tips["scan"] = "; ".join(scan)
    return _Box(node.name, node.args, estimates, _family(node.name), tips,
                [_batch_box(c) for c in node.children], line=text)


def _batch_tree(tree, column_width, title, default, facts=None):
    box = _batch_box(tree)
    _renumber([box])
    nodes, edges = _layout(box, column_width, PAD)
    facts = facts or f"{len(nodes)} nodes; rows and size: Catalyst's estimates where it has them"
    chart = _draw(nodes, edges, NODE_KINDS, set(nodes["kind"]), "node kind", column_width)
    return chart.properties(title=title_params(default, facts, title))


def _steps(log, column_width, title):
    """The plan before the first rule and after each rule of ``log``, one step each, chosen on
    the strip atop the chart or in the number box under it (module doc)."""
    if not len(log):
        raise KitError("plan: no optimizer rule changed this plan, so there are no steps to show; "
                       "draw a stage instead (stage='optimized')")
    first = log[0]
    trees = [_tree_of(first.before, first.before_text)] + [_tree_of(a.after, a.after_text) for a in log]
    all_nodes, all_edges, captions = [], [], []
    top = PAD + 66      # room for the strip of steps, the rule's name and its batch
    boxes = [_batch_box(tree) for tree in trees]
    _renumber(boxes)
    lines = _detail_lines(boxes, column_width)
    for step, box in enumerate(boxes):
        if step:     # a node is changed when its text or its inputs' names are not as in any node before
            before = Counter(_signature(b) for b in _walk(boxes[step - 1]))
            for b in _walk(box):
                made = before[_signature(b)] <= 0
                b.tips["changed"] = "yes: the rule made it, or changed it or its inputs" if made else "no"
                before[_signature(b)] -= 1
        nodes, edges = _layout(box, column_width, top, lines)
        all_nodes.append(nodes.assign(step=step))
        all_edges.append(edges.assign(step=step))
        if step == 0:
            captions.append((f"step 0 of {len(log)}: the plan before the optimizer",
                             "the analyzed plan (cached data substituted), as the first rule gets it"))
        else:
            a = log[step - 1]
            captions.append((f"step {step} of {len(log)}: {a.rule}", f"batch {a.batch!r}, iteration {a.iteration}"))
    nodes = pd.concat(all_nodes, ignore_index=True)
    edges = pd.concat(all_edges, ignore_index=True)
    nodes["changed"] = nodes.get("changed", pd.Series(dtype=object)).fillna("no")
    n = len(log)
    step = alt.param(name="step", value=0, bind=alt.binding(input="number", name=f"rule application (0 to {n}) "))
    shown = f"datum.step === clamp(step, 0, {n})"      # a box typed out of range shows the nearest step
    chart = _draw(nodes, edges, NODE_KINDS, set(nodes["kind"]), "node kind", column_width, shown=shown)
    width = max(chart.width, int(7.5 * max(len(t) for c in captions for t in c)) + 2 * PAD)
    cell = min(STEP_CELL, max(4, (width - 2 * PAD) // (n + 1)))
    hint_text = f"steps 0 to {n}: press or drag here, or use the box below the chart"
    width = max(width, cell * (n + 1) + 8 + int(6.2 * len(hint_text)) + 2 * PAD)   # the strip and its hint (11 px)
    steps = pd.DataFrame({"step": range(n + 1), "rule": [c[0] for c in captions], "batch": [c[1] for c in captions],
                          "x": PAD, "y": PAD + 30, "y_batch": PAD + 48})
    steps["left"] = PAD + steps["step"] * cell
    steps["right"], steps["top"], steps["bottom"] = steps["left"] + cell - 1, PAD, PAD + 14
    strip = alt.Chart(steps, name=STRIP).mark_rect(cursor="pointer").encode(
        x=alt.X("left:Q", scale=None, axis=None), x2="right:Q", y=alt.Y("top:Q", scale=None, axis=None), y2="bottom:Q",
        color=alt.condition(shown, alt.value("#333333"), alt.value("#d0d0d0")),
        tooltip=[alt.Tooltip("rule:N", title="step"), alt.Tooltip("batch:N", title="batch")])
    caption = alt.Chart(steps).transform_filter(shown).encode(x=alt.X("x:Q", scale=None, axis=None))
    rule = caption.mark_text(align="left", baseline="middle", fontSize=13, fontWeight="bold").encode(
        y=alt.Y("y:Q", scale=None, axis=None), text="rule:N")
    batch = caption.mark_text(align="left", baseline="middle", fontSize=11, color="#444444").encode(
        y=alt.Y("y_batch:Q", scale=None, axis=None), text="batch:N")
    hint = alt.Chart(pd.DataFrame({"x": [PAD + cell * (n + 1) + 8], "y": [PAD + 7],
                                   "text": [hint_text]})
                     ).mark_text(align="left", baseline="middle", fontSize=11, color="#444444").encode(
        x=alt.X("x:Q", scale=None, axis=None), y=alt.Y("y:Q", scale=None, axis=None), text="text:N")
    facts = (f"{n} rules changed the plan, in the order they ran; thick outline: the nodes the rule made or changed "
             "(or whose inputs it changed)")
    return alt.layer(strip, hint, *chart.layer, rule, batch, width=width, height=chart.height,
                     view=alt.ViewBackground(stroke=None),
                     usermeta={SCRUB: {"step": {"mark": STRIP, "min": 0, "max": n}}}).add_params(step).properties(
        title=title_params("The optimizer, rule by rule", facts, title))


def _renumber(roots: list) -> None:
    """Spark's expression ids in ``roots``' texts renumbered 1, 2, ... in order of appearance
    (``stable_ids``), one numbering for all: the same attribute keeps one number, and a chart
    does not change with how many plans the session analysed before."""
    from ..engine.plan import stable_ids

    ids: dict = {}

    def stable(text: str) -> str:
        return stable_ids(text, ids)

    for root in roots:
        for box in _walk(root):
            box.detail, box.line = stable(box.detail), stable(box.line)
            box.tips = {k: stable(v) if isinstance(v, str) else v for k, v in box.tips.items()}


def _signature(box: _Box) -> tuple:
    return box.line, tuple(c.name for c in box.children)


def _tree_of(node, text):
    """A rule step's plan: the ``PlanNode`` when the JVM plan was kept, else parsed from its text."""
    return node if node is not None else _from_text(text)


_STATS = re.compile(r",?\s*Statistics\(sizeInBytes=([0-9.]+)\s*([KMGTPE]i)?B(?:,\s*rowCount=([0-9.Ee+]+))?\)\s*$")


def _from_text(text: str):
    """A ``PlanNode`` tree from Spark's text of a plan (its ``treeString``): depth from the
    ``+-``/``:-`` prefix, the name up to the first space, estimates from ``Statistics(...)``."""
    from ..engine import PlanNode

    rows = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        prefix = re.match(r"^[ :|+\-]*", raw).group(0)
        line = raw[len(prefix):]
        line = re.sub(r"^\*\(\d+\)\s+", "", line.lstrip("'"))
        count = size = None
        m = _STATS.search(line)
        if m:
            size = int(float(m.group(1)) * 1024 ** " KMGTPE".index(m.group(2)[0] if m.group(2) else " "))
            count = int(float(m.group(3))) if m.group(3) else None
            line = line[:m.start()]
        name, _, args = line.partition(" ")
        rows.append((len(prefix) // 3, name, args.strip(), count, size, line.strip()))
    if not rows:
        raise KitError("plan: the plan text is empty")

    def build(i):
        depth = rows[i][0]
        children, j = [], i + 1
        while j < len(rows) and rows[j][0] > depth:
            child, j = build(j)
            children.append(child)
        _, name, args, count, size, line = rows[i]
        return PlanNode(name, name, args, rows=count, size_bytes=size, children=tuple(children), text=line), j

    return build(0)[0]


# ---------------------------------------------------------------------------- continuous queries


def _streaming(sources, stage, messages, column_width, title):
    if stage is not None:
        raise KitError("plan: stage is for an Explanation (kit.explain's batch plans); a continuous query has "
                       "one physical plan")
    if messages is not None and messages is not False and len(sources) > 1:
        raise KitError("plan: messages= goes with one plan; for a list, pass DynamicTables (their messages are "
                       "counted each)")
    panels = []
    for source in sources:
        if isinstance(source, DynamicTable):
            root = table_plan(source)
            counted = source.messages() if messages is None else (None if messages is False else messages)
            name = f"into {_a(source.sink)} sink"
        else:
            root = source
            counted = None if messages is False else messages
            name = _sink_name(root)
        panels.append((name, root, _check_messages(counted)))
    laid = []
    for name, root, counted in panels:
        carried = _carried(root, counted)
        box = _stream_box(root, carried)
        nodes, edges = _layout(box, column_width, PAD)
        laid.append((name, nodes, edges, counted))
    present = set().union(*[set(nodes["kind"]) for _, nodes, _, _ in laid])
    charts = []
    below = {"orient": "bottom", "columns": 2} if len(laid) > 1 else {}   # side by side: as wide as the panels
    for name, nodes, edges, counted in laid:
        chart = _draw(nodes, edges, MODE_KINDS, present, "what the node emits", column_width, **below)
        if len(laid) > 1:
            chart = chart.properties(title=alt.TitleParams(f"{name}: {_total(counted)}", anchor="start",
                                                           fontSize=12))
        charts.append(chart)
    counted_any = any(c is not None for *_, c in laid)
    facts = f"on each edge the row kinds it carries{', counted' if counted_any else ''}; red: it carries -U"
    if len(laid) == 1:
        name, _, _, counted = laid[0]
        facts = f"{name}{': ' + _total(counted) if counted is not None else ''}; {facts}"
        chart = charts[0]
    else:
        chart = alt.hconcat(*charts, spacing=30)
    return chart.properties(title=title_params("A continuous query's plan: the changelog mode of each node", facts,
                                               title))


def _sink_name(root) -> str:
    """Where ``physical_plan``'s result goes: ``into a retract sink`` (its sink table's name)."""
    if root.name != "Sink":
        return "a bare SELECT (no sink)"
    m = re.search(r"(\w+)_sink\]", root.detail)
    return f"into {_a(m.group(1))} sink" if m else "into a sink"


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _total(counted) -> str:
    if counted is None:
        return "messages not counted"
    n = sum(m[k] for m in counted for k in ROW_KINDS)
    ub = sum(m[UPDATE_BEFORE] for m in counted)
    return f"its operators sent {n} messages, {ub} of them -U"


def _check_messages(counted):
    if counted is None:
        return None
    if not isinstance(counted, (list, tuple)) or not all(
            isinstance(m, dict) and isinstance(m.get("node"), str) and all(
                isinstance(m.get(k), int) for k in ROW_KINDS) for m in counted):
        raise KitError("plan: messages must be DynamicTable.messages()'s list: one dict per operator with "
                       f"'node' (Flink's label) and the count of each row kind {list(ROW_KINDS)}; got {counted!r:.200}")
    return list(counted)


def _carried(root, counted) -> dict:
    """{id(node): counts of what it sends}: the counted operators, matched by Flink's label in
    plan order, and the nodes that pass their input's rows on one for one (module doc)."""
    found = {}
    if counted is not None:
        pending = list(counted)
        for node in root.walk():
            for j, m in enumerate(pending):
                if m["node"] == node.flink_label():
                    found[id(node)] = m
                    del pending[j]
                    break
        if pending:
            raise KitError("plan: messages name operators that are not in this plan: "
                           f"{', '.join(m['node'] for m in pending)}; its nodes are: "
                           f"{', '.join(n.flink_label() for n in root.walk())}")

    def fill(node):
        for child in node.inputs:
            fill(child)
        passes = node.name in _PASS_THROUGH or (node.name == "Calc" and "where=[" not in node.detail)
        if id(node) not in found and passes and len(node.inputs) == 1 and id(node.inputs[0]) in found:
            found[id(node)] = found[id(node.inputs[0])]
    fill(root)
    return found


def _mode_kind(mode) -> str:
    if mode is None:
        return "sink"
    if mode == {INSERT}:
        return "emits inserts only"
    return "emits updates with update-before (-U)" if UPDATE_BEFORE in mode else "emits updates without -U"


def _stream_box(node, carried: dict) -> _Box:
    mode = "[NONE]" if node.mode is None else mode_text(node.mode)
    counts = carried.get(id(node))
    kinds = [k for k in ROW_KINDS if (node.mode and k in node.mode) or (counts and counts[k])]
    label = " ".join(f"{k} {counts[k]}" for k in kinds) if counts else " ".join(kinds)
    tips = {"node": _one_line(node.label(), 400), "changelog mode": mode,
            "messages": label if counts else (f"kinds {label} (not counted)" if label else "-")}
    children = [_stream_box(c, carried) for c in node.inputs]
    detail = node.detail.replace("default_catalog.default_database.", "").replace(
        "default_catalog, default_database, ", "")      # the default names, left out of the box (not the tooltip)
    return _Box(node.name, detail, mode, _mode_kind(node.mode), tips, children,
                carried=label, edge_color=_RETRACTING if UPDATE_BEFORE in kinds else _EDGE, line=node.label())


# ---------------------------------------------------------------------------- layout and marks


def _walk(box: _Box):
    yield box
    for child in box.children:
        yield from _walk(child)


def _chars(column_width: int) -> tuple[int, int]:
    """How many characters fit a box's width: of its name (12 px bold), of its detail (10 px)."""
    return int((column_width - 24) / 7.6), int((column_width - 24) / 5.8)


def _wrapped(text: str, width: int, lines: int = DETAIL_LINES) -> list[str]:
    """``text`` on lines of at most ``width`` characters, at most ``lines`` of them (an
    ellipsis ends the last when the text goes on)."""
    return textwrap.wrap(" ".join(str(text).split()), width, max_lines=lines, placeholder=" …",
                         break_on_hyphens=False) or [""]


def _detail_lines(roots: list, column_width: int) -> int:
    """The detail lines every box of ``roots`` gets: as many as the longest detail needs, at
    most ``DETAIL_LINES`` (one height for all boxes, and for every step of a slider)."""
    width = _chars(column_width)[1]
    return max(len(_wrapped(b.detail, width)) for root in roots for b in _walk(root))


def _layout(root: _Box, column_width: int, top: int, lines: int | None = None):
    """(nodes, edges) frames in pixels: a tidy tree, leaves in order one column each, a parent
    centred over its first and last child, one row per depth, the root at the top; each
    box's detail on ``lines`` lines (``_detail_lines`` of this tree by default)."""
    nodes, edges, leaves = [], [], itertools.count()
    lines = _detail_lines([root], column_width) if lines is None else lines
    box_h = BOX_H + LINE_H * (lines - 1)
    row = box_h + ROW_GAP
    name_chars, detail_chars = _chars(column_width)

    def place(box, depth, parent):
        i = len(nodes)
        nodes.append(None)
        xs = [place(child, depth + 1, i) for child in box.children]
        col = next(leaves) if not xs else (xs[0] + xs[-1]) / 2
        nodes[i] = {"id": i, "parent": parent, "depth": depth, "col": col, "name": _one_line(box.name, name_chars),
                    "detail": "\n".join(_wrapped(box.detail, detail_chars, lines)),
                    "info": box.info, "kind": box.kind, "carried": box.carried, "edge_color": box.edge_color,
                    **{f"tip_{k}": v for k, v in box.tips.items()}}
        return col

    place(root, 0, -1)
    frame = pd.DataFrame(nodes)
    frame["cx"] = PAD + frame["col"] * column_width + (column_width - 16) / 2
    frame["left"], frame["right"] = frame["cx"] - (column_width - 16) / 2, frame["cx"] + (column_width - 16) / 2
    frame["top"] = top + frame["depth"] * row
    frame["bottom"] = frame["top"] + box_h
    frame["y_name"], frame["y_detail"] = frame["top"] + 14, frame["top"] + 24
    frame["y_info"] = frame["top"] + 45 + LINE_H * (lines - 1)
    if "tip_changed" in frame:
        frame = frame.rename(columns={"tip_changed": "changed"})
    for i, node in frame[frame["parent"] >= 0].iterrows():
        parent = frame.loc[node["parent"]]
        edges.append({"from": i, "to": int(node["parent"]), "x": node["cx"], "y": node["top"], "x2": parent["cx"],
                      "y2": parent["bottom"], "label": node["carried"], "color": node["edge_color"],
                      "side": "left" if node["cx"] < parent["cx"] else "right",     # of the line, its label
                      "lx": (node["cx"] + parent["cx"]) / 2 + (-6 if node["cx"] < parent["cx"] else 6),
                      "ly": (node["top"] + parent["bottom"]) / 2})
    edges = pd.DataFrame(edges, columns=["from", "to", "x", "y", "x2", "y2", "label", "color", "side", "lx", "ly"])
    frame = frame.drop(columns=["carried", "edge_color"])
    frame.attrs["size"] = (PAD * 2 + (frame["col"].max() + 1) * column_width, int(frame["bottom"].max()) + PAD)
    return frame, edges


def _draw(nodes, edges, kinds, present, legend_title, column_width, shown=None, **legend_options):
    """The layers of a tree: edges, their labels, boxes, and three texts per box (the name,
    the detail on its lines, the facts); ``legend_options``: ``alt.Legend``'s."""
    def pixels(field):
        return alt.X(f"{field}:Q", scale=None, axis=None)

    def pixels_y(field):
        return alt.Y(f"{field}:Q", scale=None, axis=None)

    def chart(data):
        c = alt.Chart(data)
        return c.transform_filter(shown) if shown is not None else c

    colours = legend("kind", kinds, present, title=legend_title, **legend_options)
    tips = [alt.Tooltip(f"{c}:N", title=c[4:]) for c in nodes.columns if c.startswith("tip_")]
    if "changed" in nodes:
        tips.append(alt.Tooltip("changed:N", title="changed"))
    stroke_width = (alt.condition("datum.changed !== 'no'", alt.value(3), alt.value(1))
                    if "changed" in nodes else alt.value(1))
    labels = [chart(edges).transform_filter(f"datum.side === '{side}'").mark_text(
        align="right" if side == "left" else "left", baseline="middle", fontSize=10).encode(
        x=pixels("lx"), y=pixels_y("ly"), text="label:N", color=alt.Color("color:N", scale=None))
        for side in ("right", "left") if (edges["label"] != "").any()]   # beside the line, away from it
    layers = [
        chart(edges).mark_rule(strokeWidth=1.5).encode(x=pixels("x"), y=pixels_y("y"), x2="x2:Q", y2="y2:Q",
                                                       color=alt.Color("color:N", scale=None)),
        *labels,
        chart(nodes).mark_rect(cornerRadius=4).encode(
            x=pixels("left"), x2="right:Q", y=pixels_y("top"), y2="bottom:Q", fill=colours["fill"],
            stroke=colours["stroke"], strokeWidth=stroke_width, tooltip=tips),
        chart(nodes).mark_text(fontSize=12, fontWeight="bold", baseline="middle").encode(
            x=pixels("cx"), y=pixels_y("y_name"), text="name:N", tooltip=tips),
        chart(nodes).mark_text(fontSize=10, baseline="top", lineBreak="\n", lineHeight=LINE_H).encode(
            x=pixels("cx"), y=pixels_y("y_detail"), text="detail:N", tooltip=tips),
        chart(nodes).mark_text(fontSize=10, baseline="middle", color="#444444").encode(
            x=pixels("cx"), y=pixels_y("y_info"), text="info:N", tooltip=tips),
    ]
    if shown is not None:     # every step's tree: the largest decides the size
        width = int(PAD * 2 + (nodes.groupby("step")["col"].max().max() + 1) * column_width)
        height = int(nodes["bottom"].max()) + PAD
    else:
        width, height = nodes.attrs["size"]
    return alt.layer(*layers, width=int(width), height=int(height), view=alt.ViewBackground(stroke=None))


def _one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters (an ellipsis marks the cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"

