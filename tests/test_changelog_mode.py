"""The changelog mode of every node, against real Flink 2.3's ``EXPLAIN CHANGELOG_MODE``.

``tests/golden/flink-2.3/changelog_mode.json`` (``tests/golden/make_changelog_mode.py``) holds
Flink's optimized physical plan of each query of a corpus into each kind of sink, and the
planner's errors. ``kit.sql.planner.physical_plan`` must give the same nodes with the same
changelog modes, node for node, on the normalization ``kit.sql.planner.explain.compared``
documents (Calc nodes left out of both: where Flink puts them depends on its projection
pushdown; a Calc passes its input's mode on). Plans only: no Spark job, except the one test that counts messages.
"""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

import kit
from kit import Duration, KitError, WatermarkStrategy
from kit.changelog import mode_text
from kit.sql import planner

GOLDEN = json.loads((Path(__file__).parent / "golden" / "flink-2.3" / "changelog_mode.json").read_text())
SINKS = {"select": None, "retract": "retract", "upsert": "upsert", "append": "append",
         "retract_pk": "retract", "upsert_pk": "upsert"}
PLANS = [(q["name"], kind) for q in GOLDEN["queries"] for kind in q["plans"]]
QUERIES = {q["name"]: q for q in GOLDEN["queries"]}


def _stream(spec):
    """A one-row kit.Stream with the golden table's columns, event time, watermark delay
    (Flink SQL's ``ts - INTERVAL '5' SECOND``) and processing-time attribute."""
    row = {}
    for column, kind in spec["columns"]:
        row[column] = [pd.Timestamp("2024-01-01")] if kind.startswith("TIMESTAMP") else [1] if kind == "INT" else ["a"]
    if spec.get("proctime"):
        row[spec["proctime"]] = [pd.Timestamp("2024-01-01")]
    return kit.stream(pd.DataFrame(row), time=spec["rowtime"],
                      watermark=WatermarkStrategy.for_sql_delay(Duration.of_seconds(GOLDEN["watermark_delay_seconds"])),
                      proctime=spec.get("proctime"), primary_key=spec.get("primary_key"))


@pytest.fixture(scope="module")
def streams(spark):
    return {name: _stream(spec) for name, spec in GOLDEN["tables"].items()}


def _flink_message(error: str) -> str:
    """Flink's message without its exception class, the sink's table name and the node's details."""
    text = error.splitlines()[-1] if error.splitlines()[-1].startswith("Caused by") else error.splitlines()[0]
    text = re.sub(r"^(Caused by: )?[\w.]+(Exception|Error): ", "", text)
    text = re.sub(r"Table sink '[^']*'", "Table sink", text)
    return text.split(" which is produced by node ")[0] + (
        " which is produced by node " + text.split(" which is produced by node ")[1].split("(")[0]
        if " which is produced by node " in text else "")


def _kit_message(error: KitError) -> str:
    return re.sub(r"Table sink '[^']*'", "Table sink", str(error))


@pytest.mark.parametrize("name, kind", PLANS, ids=[f"{n}-{k}" for n, k in PLANS])
def test_every_node_has_flinks_changelog_mode(streams, name, kind):
    q, flink = QUERIES[name], QUERIES[name]["plans"][kind]
    tables = {t: streams[t] for t in q["tables"]}
    if "error" in flink:
        with pytest.raises(KitError) as raised:
            planner.physical_plan(q["query"], SINKS[kind], **tables)
        assert _flink_message(flink["error"]) in _kit_message(raised.value)
        return
    kit_plan = planner.explain_changelog_mode(q["query"], SINKS[kind], **tables)
    assert planner.compared(kit_plan) == planner.compared(flink["plan"]), f"kit:\n{kit_plan}\nflink:\n{flink['plan']}"


@pytest.mark.parametrize("error", GOLDEN["errors"], ids=[e["name"] for e in GOLDEN["errors"]])
def test_what_flink_cannot_run_continuously_fails_with_its_message(streams, error):
    q = error["query"]
    tables = {t: s for t, s in streams.items() if re.search(rf"\b{t}\b", q)}
    with pytest.raises(KitError) as raised:
        planner.physical_plan(q, SINKS[error["sink"]], **tables)
    assert _flink_message(error["error"]) in _kit_message(raised.value)
    assert "(Flink 2.3's planner" in str(raised.value)      # and why


def test_the_update_before_decision_follows_the_seed(streams):
    """Seed 004, 2.4.2 on E.g.2: into an upsert sink the outer aggregate sends [UA] only; it
    still needs [UB,UA] from the inner one (it is COUNT_RETRACT), which therefore sends UB."""
    q = QUERIES["word_freq"]["query"]
    upsert = planner.physical_plan(q, "upsert", words=streams["words"])
    retract = planner.physical_plan(q, "retract", words=streams["words"])
    aggs = [n for n in upsert.walk() if n.name == "GroupAggregate"]
    assert [mode_text(n.mode) for n in aggs] == ["[I,UA,D]", "[I,UB,UA]"]
    assert "COUNT_RETRACT" in aggs[0].detail and "COUNT_RETRACT" not in aggs[1].detail
    assert [mode_text(n.mode) for n in retract.walk() if n.name == "GroupAggregate"] == [
        "[I,UB,UA,D]", "[I,UB,UA]"]


# Where Flink puts a Calc the kit cannot: two scans of one table that Flink plans as one reused
# scan (its Calc of the shared columns under the WatermarkAssigner), and the CAST of a COUNT
# (BIGINT NOT NULL) to the nullable type of the UNION's column (the kit has no nullability).
CALCS_DIFFER = {"join_two_aggregates", "union_all"}


def test_the_plans_equal_flinks_with_their_calcs(streams):
    """With every node, Calcs included (the kit's projection pushdown, ``kit.sql.planner.prune``)."""
    differ = set()
    for name, kind in PLANS:
        q, flink = QUERIES[name], QUERIES[name]["plans"][kind]
        if "plan" in flink:
            kit_plan = planner.explain_changelog_mode(q["query"], SINKS[kind], **{t: streams[t] for t in q["tables"]})
            if planner.compared(kit_plan, drop=()) != planner.compared(flink["plan"], drop=()):
                differ.add(name)
    assert differ == CALCS_DIFFER


def test_a_dynamic_table_explains_itself_as_flink_does(streams):
    q = QUERIES["word_freq"]
    t = kit.sql(q["query"], words=streams["words"], sink="upsert")
    assert planner.compared(t.explain()) == planner.compared(q["plans"]["upsert"]["plan"])
    assert t.explain(physical=False).startswith("Calc(")


def test_the_upsert_sink_saves_the_top_aggregates_update_before(spark):
    """The cascade run into both sinks: the outer aggregate sends no -U into the upsert sink;
    the inner one sends its -U in both, as the outer one needs them."""
    words = ["Hello", "World", "Hello", "Hello", "World", "Flink"]
    s = kit.stream(pd.DataFrame({"word": words, "ts": pd.date_range("2024-01-01", periods=len(words), freq="s")}),
                   time="ts")
    q = QUERIES["word_freq"]["query"]
    retract = kit.sql(q, words=s, sink="retract").messages()
    upsert = kit.sql(q, words=s, sink="upsert").messages()
    assert [m["changelogMode"] for m in retract] == ["[I,UB,UA,D]", "[I,UB,UA]", "[I]"]
    assert [m["changelogMode"] for m in upsert] == ["[I,UA,D]", "[I,UB,UA]", "[I]"]
    outer_r, inner_r, scan_r = retract
    outer_u, inner_u, scan_u = upsert
    assert scan_r == scan_u and scan_u["node"].startswith("TableSourceScan(") and (
        [scan_u[k] for k in ("+I", "-U", "+U", "-D")] == [len(words), 0, 0, 0])    # the source's rows, inserted
    assert outer_r["-U"] > 0 and outer_u["-U"] == 0                       # the messages saved
    assert {k: outer_u[k] for k in ("+I", "+U", "-D")} == {k: outer_r[k] for k in ("+I", "+U", "-D")}
    assert inner_u == inner_r and inner_u["-U"] == 3                      # Hello twice, World once


@pytest.mark.parametrize("name", ["rank_top_n", "dense_rank_top_n", "row_number_desc_without_filter",
                                  "over_rank_desc_over_updates"])
def test_kit_sql_refuses_them_with_flinks_message_too(streams, name):
    """The continuous queries kit.sql itself plans (dynamic tables) fail as Flink's planner does."""
    error = next(e for e in GOLDEN["errors"] if e["name"] == name)
    tables = {t: s for t, s in streams.items() if re.search(rf"\b{t}\b", error["query"])}
    with pytest.raises(KitError) as raised:
        kit.sql(error["query"], **tables)
    assert _flink_message(error["error"]) in str(raised.value)


def test_kit_sql_refuses_a_sort_on_a_non_time_column_of_updates(streams):
    with pytest.raises(KitError, match=re.escape("Sort on a non-time-attribute field is not supported.")):
        kit.sql("SELECT word, COUNT(*) AS cnt FROM words GROUP BY word ORDER BY word", words=streams["words"])


def _scenarios():
    """The plans the dynamic-table goldens recorded (``explain_changelog_mode``: the bare
    SELECT; ``..._print_sink``: into a print sink) for plain SELECTs over CSV tables."""
    out = []
    for group in ("cascade", "filters", "group_agg", "topn", "over", "minibatch"):
        doc = json.loads((Path(__file__).parent / "golden" / "flink-2.3" / f"{group}.json").read_text())
        for sc in doc["scenarios"]:
            planned = not sc.get("config") or group == "minibatch"   # mini-batch, local-global, split distinct
            if planned and "SELECT *" not in sc["query"].upper() and sc["query"].upper().startswith("SELECT"):
                out += [(sc, key) for key in ("explain_changelog_mode", "explain_changelog_mode_print_sink")]
    return out


def _ddl_stream(ddl: str):
    """A one-row kit.Stream of a golden's CREATE TABLE: its columns, its event time (or an
    ``_t`` column the query never reads, for a table with none: every kit.Stream has one)."""
    name, body = re.match(r"CREATE TEMPORARY TABLE (\w+) \(\s*(.*?)\n\) WITH", ddl, re.S).groups()
    row, time = {}, None
    for part in (p.strip() for p in re.split(r",(?![^()]*\))", body)):
        if part.upper().startswith("WATERMARK"):
            time = re.search(r"FOR `?(\w+)`?", part).group(1)
        elif " AS " not in part.upper():
            column, kind = part.split()[0].strip("`"), part.split()[1].split("(")[0].upper()
            row[column] = [pd.Timestamp("2024-01-01")] if kind.startswith("TIMESTAMP") else \
                [1] if kind in ("INT", "BIGINT", "DOUBLE") else ["a"]
    if time is None:
        row["_t"], time = [pd.Timestamp("2024-01-01")], "_t"
    return name, kit.stream(pd.DataFrame(row), time=time)


SCENARIOS = _scenarios()


@pytest.mark.parametrize("scenario, key", SCENARIOS, ids=[f"{s['name']}-{k[-10:]}" for s, k in SCENARIOS])
def test_the_dynamic_goldens_plans_have_the_same_modes(spark, scenario, key):
    """A second corpus: the plans recorded beside the changelogs, mini-batch, local-global and
    split distinct included. Their tables have no watermark, the kit's streams do:
    WatermarkAssigner is left out of this comparison too."""
    streams = dict(_ddl_stream(ddl) for ddl in scenario["ddl"])
    flink, sink = scenario[key], "retract" if key.endswith("print_sink") else None
    query = scenario["query"].replace("`user`", "user")
    config = scenario.get("config") or {}
    if flink.startswith("EXPLAIN failed"):
        with pytest.raises(KitError):
            planner.physical_plan(query, sink, config, **streams)
        return
    drop = ("Calc", "WatermarkAssigner")
    assert planner.compared(planner.explain_changelog_mode(query, sink, config, **streams), drop) == \
        planner.compared(flink, drop)
