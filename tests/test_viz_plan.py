"""kit.viz.plan: a batch stage as its tree (a box per plan node, an edge per input, the root at
the top, Catalyst's estimates); the optimizer rule by rule behind a slider (a step per rule
application, named, the changed nodes marked); a continuous query's physical plan with each
node's changelog mode and the messages each edge carries, retract beside upsert; errors."""

import re

import altair as alt
import pandas as pd
import pytest

import kit
from kit.sql import planner
from kit.changelog import mode_text
from kit.engine import STAGES, from_text
from kit.errors import KitError
from kit.viz.render import to_vega

from test_viz_jobs import jobs  # noqa: F401  (the fixture)

EG1 = "SELECT t1.id, 1 + 2 + t1.value AS v FROM t1, t2 WHERE t1.id = t2.id AND t2.id < 1000"
CASCADE = "SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word) GROUP BY cnt"


@pytest.fixture(scope="module")
def e(spark):
    return kit.explain(EG1, t1=pd.DataFrame({"id": [1, 2, 3], "value": [10, 20, 30]}),
                       t2=pd.DataFrame({"id": [1, 2]}))


@pytest.fixture(scope="module")
def words(spark):
    ws = ["Hello", "World", "Hello", "Hello"]
    return kit.stream(pd.DataFrame({"word": ws, "t": pd.date_range("2024-01-01", periods=len(ws), freq="s")}),
                      time="t")


def layers(chart):
    """{"edges", "labels", "nodes", "captions", "strip"}: the data of a tree chart's layers,
    told apart by their mark and the field of their text (labels: those drawn, in edge order)."""
    found = {}
    for layer in chart.layer:
        mark = layer.mark if isinstance(layer.mark, str) else layer.mark.type
        fields = {v.get("field") for v in layer.encoding.to_dict().values() if isinstance(v, dict)}
        name = "strip" if layer.name == "kit_steps" else {"rule": "edges", "rect": "nodes"}.get(mark) or (
            "labels" if "label" in fields else "captions" if "rule" in fields else None)
        if name == "labels":
            found["labels"] = layer.data
        elif name:
            found.setdefault(name, layer.data)
    return found


def renumbered(text):
    """``text`` with Spark's expression ids numbered 1, 2, ... in order, as a chart of it shows them."""
    ids = {}
    return re.sub(r"(?<=\w)#(\d+)", lambda m: "#" + str(ids.setdefault(m[1], len(ids) + 1)), text)


def parents(tree):
    """[(pre-order index of a node, of its parent)] of a PlanNode or PhysicalNode tree."""
    out, order = [], []

    def walk(node, parent):
        i = len(order)
        order.append(node)
        if parent is not None:
            out.append((i, parent))
        for child in getattr(node, "children", None) or getattr(node, "inputs", []):
            walk(child, i)
    walk(tree, None)
    return sorted(out)


def test_each_stage_is_its_tree(e):
    for stage in STAGES:
        tree = e.stages[stage]
        drawn = layers(kit.viz.plan(e, stage))
        nodes, edges = drawn["nodes"], drawn["edges"]
        assert nodes["name"].tolist() == [n.name for n in tree.walk()], stage
        assert sorted(zip(edges["from"], edges["to"])) == parents(tree), stage
        # the root at the top, each input below its consumer, leaves left to right in plan order
        assert (nodes["top"] > nodes["top"].min()).sum() == len(nodes) - 1
        for _, edge in edges.iterrows():
            assert nodes.loc[edge["from"], "top"] > nodes.loc[edge["to"], "bottom"]
        leaves = nodes[~nodes["id"].isin(edges["to"])]
        assert leaves["cx"].is_monotonic_increasing and leaves["cx"].is_unique
    optimized = layers(kit.viz.plan(e))["nodes"]          # the default stage
    assert optimized["name"].tolist() == ["Project", "Join", "LocalRelation", "LocalRelation"]
    assert optimized["info"].tolist()[2:] == ["rows=3 size=72 B", "rows=2 size=32 B"]   # Catalyst's estimates
    assert optimized["kind"].tolist() == ["filter / project", "join", "scan / relation", "scan / relation"]
    # arguments wrapped onto lines in the box (every box as tall), whole in the tooltip
    project = e.stages["optimized"]
    assert optimized["detail"][0] == "[id#1L, (value#2L + 3) AS\nv#3L]" == renumbered(project.args).replace(" v", "\nv")
    assert optimized["tip_node"][0] == renumbered(project.text)
    assert (optimized["bottom"] - optimized["top"]).tolist() == [68] * 4           # two detail lines of 12 px
    # past three lines a detail is cut (an ellipsis), and no box is taller than three lines
    from kit.engine import PlanNode
    long = PlanNode("Filter", "Filter", " AND ".join(f"(c{i} < {i})" for i in range(30)))
    drawn = layers(kit.viz.plan(PlanNode("Project", "Project", "[a]", children=(long,))))["nodes"]
    lines = drawn["detail"][1].split("\n")
    assert len(lines) == 3 and lines[-1].endswith(" …") and all(len(line) <= 31 for line in lines)
    assert " ".join(lines)[:-2] in long.args and (drawn["bottom"] - drawn["top"]).tolist() == [80, 80]
    # a chart composes with others (no top-level config), e.g. two stages side by side
    alt.hconcat(kit.viz.plan(e, "analyzed"), kit.viz.plan(e, "optimized")).to_dict()


def test_a_slider_steps_through_the_rule_applications(e, jobs):  # noqa: F811
    n, _, chart = jobs(lambda: kit.viz.plan(e, "rules"))
    assert n == 0, "the plans come from the JVM, no Spark job"
    drawn = layers(chart)
    nodes, captions = drawn["nodes"], drawn["captions"]
    assert captions["step"].tolist() == list(range(len(e.rules) + 1))
    assert [c.split(": ", 1)[1] for c in captions["rule"][1:]] == e.rules.rules()
    assert captions["rule"][0] == f"step 0 of {len(e.rules)}: the plan before the optimizer"
    # step k draws the plan after the k-th rule
    trees = [e.rules[0].before] + [a.after for a in e.rules]
    for step, tree in enumerate(trees):
        assert nodes.loc[nodes["step"] == step, "name"].tolist() == [n.name for n in tree.walk()], step
        assert (drawn["edges"]["step"] == step).sum() == len(list(tree.walk())) - 1
    # what ConstantFolding changed: the Project's 1 + 2 and the Filter's cast of 1000
    folded = 1 + e.rules.rules().index("ConstantFolding")
    changed = nodes[(nodes["step"] == folded) & (nodes["changed"] != "no")]
    assert changed["name"].tolist() == ["Project", "Filter"]
    assert (nodes.loc[nodes["step"] == 0, "changed"] == "no").all()
    n = len(e.rules)
    spec = chart.to_dict()
    (param,) = spec["params"]
    assert param == {"name": "step", "value": 0, "bind": {"input": "number", "name": f"rule application (0 to {n}) "}}
    shown = {"filter": f"datum.step === clamp(step, 0, {n})"}    # a step typed out of range: the nearest
    assert all(layer["transform"] == [shown] for layer in spec["layer"] if "transform" in layer)
    assert sum("transform" in layer for layer in spec["layer"]) == len(spec["layer"]) - 2   # not the strip, its hint
    # the strip under the title: a cell per step, pressed or dragged over to choose it
    strip = drawn["strip"]
    assert strip["step"].tolist() == list(range(n + 1)) and strip["top"].max() < nodes["top"].min()
    assert (strip["right"] < strip["left"].shift(-1)).iloc[:-1].all()
    vega = to_vega(spec)       # compiles offline: the box bounded, the strip's events on the step
    (signal,) = [s for s in vega["signals"] if s["name"] == "step"]
    assert signal["bind"] == {"input": "number", "name": f"rule application (0 to {n}) ", "min": 0, "max": n,
                              "step": 1}
    assert [h["events"] for h in signal["on"]] == [
        "@kit_steps_marks:mousedown", "[@kit_steps_marks:mousedown, window:mouseup] > @kit_steps_marks:mouseover"]
    assert all(h["update"] == "datum.step" for h in signal["on"])
    assert any(m["name"] == "kit_steps_marks" for m in vega["marks"])
    # the rule log alone draws the same steps
    assert layers(kit.viz.plan(e.rules))["captions"]["rule"].tolist() == captions["rule"].tolist()


def test_expression_ids_are_numbered_by_the_chart_not_by_the_session(e, spark):
    drawn = layers(kit.viz.plan(e, "rules"))["nodes"]
    texts = " ".join(drawn["tip_node"]) + " ".join(drawn["detail"])
    numbers = {int(n) for n in re.findall(r"(?<=\w)#(\d+)", texts)}
    assert numbers == set(range(1, len(numbers) + 1)) and "id#1L" in texts and "value#2L" in texts
    for _ in range(3):     # more plans analysed in the session: Spark's ids grow, the chart's do not
        spark.range(3).selectExpr("id + 1 AS x").where("x > 1").collect()
    again = kit.explain(EG1, t1=pd.DataFrame({"id": [1, 2, 3], "value": [10, 20, 30]}),
                        t2=pd.DataFrame({"id": [1, 2]}))
    assert str(again.stages["analyzed"]) != str(e.stages["analyzed"])
    assert kit.viz.plan(again, "rules").to_dict() == kit.viz.plan(e, "rules").to_dict()


def test_explain_text_alone_is_drawn_as_spark_connect_gives_it(e):
    extended = "\n\n".join(f"== {header} ==\n{e.texts[stage]}" for header, stage in (
        ("Parsed Logical Plan", "parsed"), ("Analyzed Logical Plan", "analyzed"),
        ("Optimized Logical Plan", "optimized"), ("Physical Plan", "physical")))
    cost = ("== Optimized Logical Plan ==\n"
            "Project [id#1L, (value#2L + 3) AS v#3L], Statistics(sizeInBytes=1.7 KiB)\n"
            "+- LocalRelation [id#1L, value#2L], Statistics(sizeInBytes=72.0 B, rowCount=3)")
    text_only = from_text(extended, cost)
    for stage in ("parsed", "analyzed", "physical"):
        nodes = layers(kit.viz.plan(text_only, stage))["nodes"]
        assert nodes["name"].tolist() == [n.name for n in e.stages[stage].walk()], stage
    nodes = layers(kit.viz.plan(text_only))["nodes"]
    assert nodes["info"].tolist() == ["size=1.7 KiB", "rows=3 size=72 B"]
    assert "Spark Connect" in kit.viz.plan(text_only).to_dict()["title"]["subtitle"][0]
    with pytest.raises(KitError, match="no rule log.*draw a stage instead: parsed, analyzed, optimized, physical"):
        kit.viz.plan(text_only, "rules")


def test_each_streaming_node_shows_its_changelog_mode(words, jobs):  # noqa: F811
    for sink in ("retract", "upsert", None):
        root = planner.physical_plan(CASCADE, sink, words=words)
        n, _, chart = jobs(lambda: kit.viz.plan(root))
        assert n == 0, "a plan without messages runs nothing"
        drawn = layers(chart)
        nodes, edges = drawn["nodes"], drawn["edges"]
        walked = list(root.walk())
        assert nodes["name"].tolist() == [n.name for n in walked]
        assert nodes["info"].tolist() == [mode_text(n.mode) if n.mode is not None else "[NONE]" for n in walked]
        assert sorted(zip(edges["from"], edges["to"])) == parents(root)
        # uncounted, an edge names the kinds it may carry; red when -U among them
        carried = dict(zip(edges["from"], zip(edges["label"], edges["color"])))
        aggregates = nodes.index[nodes["name"] == "GroupAggregate"].tolist()
        if sink == "retract":
            assert carried[aggregates[0]] == ("+I -U +U -D", "#d62728")
        if sink is not None:
            assert nodes["kind"][0] == "sink"
        assert carried[aggregates[1]][0] == "+I -U +U"            # the inner one sends -U for every sink
        assert carried[len(nodes) - 1] == ("+I", "#888888")       # the scan
    upsert = layers(kit.viz.plan(planner.physical_plan(CASCADE, "upsert", words=words)))
    assert upsert["nodes"]["info"][1] == "[I,UA,D]" and upsert["nodes"]["kind"][1] == "emits updates without -U"
    assert upsert["labels"]["label"].tolist()[0] == "+I +U -D"


def test_the_edges_carry_the_messages_retract_beside_upsert(words):
    tables = [kit.sql(CASCADE, words=words, sink=sink) for sink in ("retract", "upsert")]
    chart = kit.viz.plan(tables)
    retract, upsert = (layers(panel) for panel in chart.hconcat)
    assert [p.title.text for p in chart.hconcat] == [
        "into a retract sink: its operators sent 18 messages, 4 of them -U",
        "into an upsert sink: its operators sent 16 messages, 2 of them -U"]

    def on_edges(drawn):
        names = drawn["nodes"]["name"]
        return [(names[f], label) for f, label in zip(drawn["labels"]["from"], drawn["labels"]["label"])]
    # Hello, World, Hello, Hello: the outer COUNT's -U to the sink is what the upsert sink saves
    assert on_edges(retract)[:4] == [("GroupAggregate", "+I 3 -U 2 +U 2 -D 1"), ("Exchange", "+I 2 -U 2 +U 2"),
                                     ("Calc", "+I 2 -U 2 +U 2"), ("GroupAggregate", "+I 2 -U 2 +U 2")]
    assert on_edges(upsert)[:2] == [("GroupAggregate", "+I 3 +U 2 -D 1"), ("Exchange", "+I 2 -U 2 +U 2")]
    assert on_edges(upsert)[-4:] == [(name, "+I 4") for name in ("Exchange", "Calc", "WatermarkAssigner",
                                                                 "TableSourceScan")]   # the four words, passed on
    assert chart.hconcat[0].layer[3].to_dict()["encoding"]["fill"]["legend"]["orient"] == "bottom"   # below, as wide
    # the same counts given by hand (as DynamicTable.messages() gives them), on the plan modes made
    root = planner.table_plan(tables[1])
    outer, inner = (n.flink_label() for n in root.walk() if n.name == "GroupAggregate")
    scan = next(n.flink_label() for n in root.walk() if n.name == "TableSourceScan")
    messages = [{"node": outer, "changelogMode": "[I,UA,D]", "+I": 3, "-U": 0, "+U": 2, "-D": 1},
                {"node": inner, "changelogMode": "[I,UB,UA]", "+I": 2, "-U": 2, "+U": 2, "-D": 0},
                {"node": scan, "changelogMode": "[I]", "+I": 4, "-U": 0, "+U": 0, "-D": 0}]
    one = layers(kit.viz.plan(root, messages=messages))
    assert one["labels"]["label"].tolist() == upsert["labels"]["label"].tolist()
    assert layers(kit.viz.plan(tables[1], messages=False))["labels"]["label"][0] == "+I +U -D"
    stray = {**messages[0], "node": "GroupAggregate(groupBy=[x])"}
    with pytest.raises(KitError, match="not in this plan: GroupAggregate\\(groupBy=\\[x\\]"):
        kit.viz.plan(root, messages=messages + [stray])
    with pytest.raises(KitError, match="messages must be DynamicTable.messages"):
        kit.viz.plan(root, messages=[{"node": "x"}])


def test_bad_input_says_what_it_takes(e, words):
    with pytest.raises(KitError, match="stage='logical' is not a stage; the known ones are: parsed, analyzed, "
                                       "optimized, physical, rules"):
        kit.viz.plan(e, "logical")
    with pytest.raises(KitError, match="plan draws kit.explain"):
        kit.viz.plan("SELECT 1")
    with pytest.raises(KitError, match="stage is for an Explanation"):
        kit.viz.plan(planner.physical_plan(CASCADE, "retract", words=words), "optimized")
    with pytest.raises(KitError, match="stage is for an Explanation"):
        kit.viz.plan(e.stages["optimized"], "physical")
    with pytest.raises(KitError, match="messages are counted for a continuous query"):
        kit.viz.plan(e, messages=[])
    with pytest.raises(KitError, match="column_width must be an int of at least 100"):
        kit.viz.plan(e, column_width=50)
    with pytest.raises(KitError, match="a list is drawn side by side when it holds continuous queries"):
        kit.viz.plan([e])
    with pytest.raises(KitError, match="title must be a str"):
        kit.viz.plan(e, title=3)
