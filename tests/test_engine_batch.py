"""kit.explain and kit.engine: the seed's E.g.1 (004, section 2) on Catalyst, asserted on plan
nodes (classes, attributes, the join's operator), the rules that changed the plan in order,
generated code, and one row as UnsafeRow and BinaryRow."""

import pytest

import kit
from kit.engine import STAGES, codegen, eg1, from_text, rows
from kit.engine.batch import explain
from kit.errors import KitError
from kit.sql.errors import SqlError


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    """E.g.1's t1 and t2, 8,000 rows each, as analyzed catalog tables over Parquet."""
    made = eg1.tables(spark, rows=8000, path=str(tmp_path_factory.mktemp("eg1")), analyze=True)
    yield made
    for table in spark.catalog.listTables():
        if table.name.startswith("kit_eg1_"):
            spark.sql(f"DROP TABLE IF EXISTS {table.name}")


@pytest.fixture(scope="module")
def e(tables):
    return kit.explain(eg1.QUERY, **tables)


def attribute(column: str) -> str:
    """``id#12: bigint`` -> ``id#12``: how an expression names the column."""
    return column.split(":")[0]


def sides(e):
    """The optimized Join's t1 and t2 inputs, and each one's relation."""
    join = e.stages["optimized"].find("Join")[0]
    left, right = join.children
    return join, (left, left.find("LogicalRelation")[0]), (right, right.find("LogicalRelation")[0])


def test_explain_has_every_stage_as_a_tree(e):
    assert tuple(e.stages) == STAGES and set(STAGES) <= set(e.texts)
    assert "UnresolvedRelation" in e.stages["parsed"].kinds()
    assert e.stages["analyzed"].kinds()[:3] == ["Project", "Filter", "Join"]
    optimized = e.stages["optimized"]
    assert optimized.kinds() == ["Project", "Join", "Project", "Filter", "LogicalRelation",
                                 "Project", "Filter", "LogicalRelation"]
    assert all(node.size_bytes is not None for node in optimized.walk())
    assert e.stages["optimized"].output == e.stages["analyzed"].output        # same columns, same ids
    assert "FileSourceScanExec" in e.stages["physical"].kinds()
    (join,) = e.stages["physical"].find("BroadcastHashJoinExec")
    assert join.size_bytes == optimized.find("Join")[0].size_bytes       # the estimate it was planned on
    assert "t1" in e.texts["parsed"] and "__kit_" not in e.texts["parsed"]   # the query's names
    assert e.connect is False and e.rules.matches


def test_explain_of_a_dataframe(tables):
    e = kit.explain(tables["t1"].filter("id < 3").select("name"))
    assert e.query is None and e.stages["parsed"].kind == "Project"
    assert e.stages["optimized"].kinds() == ["Project", "Filter", "LogicalRelation"] and not e.joins
    with pytest.raises(KitError, match="no such join"):
        eg1.rewrites(e)


def test_constant_folding(e):
    analyzed = e.stages["analyzed"].find("Project")[0].expressions[-1]
    optimized = e.stages["optimized"].find("Project")[0].expressions[-1]
    assert "(1 + 2)" in analyzed and "(1 + 2)" not in optimized and " 3)" in optimized
    folding = [a for a in e.rules if a.rule == "ConstantFolding"][0]
    assert "(1 + 2)" in folding.before.find("Project")[0].expressions[-1]
    assert "(1 + 2)" not in folding.after.find("Project")[0].expressions[-1]


def test_filter_pushed_below_the_join_and_inferred_on_t1(e):
    join, (left, t1), (right, t2) = sides(e)
    t1_id, t2_id = attribute(t1.output[0]), attribute(t2.output[0])
    assert not [f for f in e.stages["optimized"].find("Filter") if f.find("Join")]   # none above the join
    assert t1_id in join.args and t2_id in join.args                               # the equi-join key
    (t2_filter,) = right.find("Filter")
    assert f"({t2_id} < 1000)" in t2_filter.args and f"isnotnull({t2_id})" in t2_filter.args
    (t1_filter,) = left.find("Filter")       # not in the seed: Spark infers t1.id < 1000 from t1.id = t2.id
    assert f"({t1_id} < 1000)" in t1_filter.args and f"isnotnull({t1_id})" in t1_filter.args


def test_column_pruning_and_parquet_scan_pushdown(e):
    _, (left, t1), (right, t2) = sides(e)
    assert [left.kind, right.kind] == ["Project", "Project"]
    assert [c.split("#")[0] for c in left.output] == ["id", "value"] and len(t1.output) == 3
    assert [c.split("#")[0] for c in right.output] == ["id"] and len(t2.output) == 2
    scans = {s.metadata["Location"].rstrip("]").rsplit("/", 1)[-1]: s
             for s in e.stages["physical"].find("FileSourceScanExec")}
    assert [c.split("#")[0] for c in scans["t1"].output] == ["id", "value"]
    assert [c.split("#")[0] for c in scans["t2"].output] == ["id"]
    assert scans["t2"].metadata["ReadSchema"] == "struct<id:bigint>"
    for scan in scans.values():
        assert "LessThan(id,1000)" in scan.metadata["PushedFilters"]
        assert "IsNotNull(id)" in scan.metadata["PushedFilters"]


def test_rewrites_found(e):
    found = {r.name: r for r in eg1.rewrites(e)}
    assert list(found) == list(eg1.REWRITES) and all(r.found for r in found.values())
    assert found["expression reduce"].rules == ("ConstantFolding", "ReorderAssociativeOperator")
    assert [a.rule for a in found["predicate pushdown"].applications] == ["PushDownPredicates"] * 2
    assert "(1 + 2)" in found["expression reduce"].applications[0].before_text
    plans = eg1.logical_plans(e)          # the seed's Flink plan next to Spark's, before optimization
    assert plans["Flink (seed)"].startswith("LogicalProject") and "Join Inner" in plans["Spark analyzed"]


def test_rule_log_in_order(e):
    order = [r for r in e.rules.rules() if r in ("PushDownPredicates", "ColumnPruning", "ConstantFolding",
                                                  "InferFiltersFromConstraints")]
    assert order == ["PushDownPredicates", "ColumnPruning", "ConstantFolding", "InferFiltersFromConstraints",
                     "PushDownPredicates"]
    for before, after in zip(e.rules, e.rules[1:]):   # one chain of plans, each rule changed it
        assert before.after_text == after.before_text
    assert all(a.before_text != a.after_text for a in e.rules)
    assert set(e.rules.rules()) - {"Optimizer$FinishAnalysis"} <= set(e.rules.tracker_effective)
    assert "ConstantFolding" in str(e.rules)
    history = e.history()
    assert history.count("== after ") == len(e.rules) and history.endswith(e.rules[-1].after_text)
    assert "rule applications" in repr(e)


def test_join_strategy_follows_the_threshold_and_the_estimates(tables, e):
    join = e.joins[0]              # both sides fit: Spark broadcasts the smaller
    assert join.strategy == "BroadcastHashJoinExec"
    assert join.build_side == ("BuildRight" if join.right_bytes <= join.left_bytes else "BuildLeft")
    assert "BroadcastHashJoinExec" in e.stages["physical"].kinds()
    never = kit.explain(eg1.QUERY, conf={"spark.sql.autoBroadcastJoinThreshold": -1}, **tables)
    assert never.joins[0].strategy == "SortMergeJoinExec" and "SortMergeJoinExec" in never.stages["physical"].kinds()
    # t2 after `id < 1000`: Spark's plain estimate ignores the filter, the cost-based one has its rows
    plain, costed = eg1.join_choice(tables, cbo=False), eg1.join_choice(tables, cbo=True)
    assert costed.right_rows == 1001 and plain.right_rows is None
    assert costed.right_bytes < plain.right_bytes
    between = (costed.right_bytes + plain.right_bytes) // 2
    assert eg1.join_choice(tables, between, cbo=True).strategy == "BroadcastHashJoinExec"
    chosen = eg1.join_choice(tables, between, cbo=False)
    assert chosen.strategy == "SortMergeJoinExec" and chosen.threshold == between
    assert f"{between:,}" in chosen.reason


def test_measure_with_rules_excluded(tables):
    base = eg1.measure(eg1.QUERY, tables)
    assert base.rows_out == 1000 and base.rows_into_joins == 2000 and base.rows_read > 0
    off = eg1.measure(eg1.QUERY_ON, tables, exclude=eg1.REWRITES["predicate pushdown"][0] + ("ConvertToCatalyst",))
    assert off.rows_out == 1000
    assert off.rows_into_joins == 16_000 and off.rows_read == 16_000    # every row of both tables
    assert off.not_excludable == ("ConvertToCatalyst",)


def test_effects_of_turning_each_rewrite_off(tables):
    table = eg1.effects(tables).set_index("turned off")
    base = table.iloc[0]
    assert list(table.index[1:]) == list(eg1.REWRITES) and (table.rows_out == 1000).all()
    assert table.loc["broadcast join", "join"] == "SortMergeJoinExec" and base.join == "BroadcastHashJoinExec"
    assert table.loc["predicate pushdown", "rows_into_join"] > base.rows_into_join
    assert table.loc["inferred filters", "rows_into_join"] > base.rows_into_join   # all of t1 reaches the join
    # without constant folding `id < cast(1000 as bigint)` is no filter Parquet takes: every row is read
    assert table.loc["expression reduce", "rows_read"] == table.loc["scan pushdown", "rows_read"] == 16_000


def test_errors(tables, spark):
    with pytest.raises(SqlError) as error:
        kit.explain("SELECT id\nFROM t1, nowhere", **tables)
    assert (error.value.line, error.value.column) == (2, 10) and "nowhere" in error.value.message
    with pytest.raises(SqlError) as error:
        kit.explain("SELECT id FROM t1\nWHERE id <", **tables)
    assert error.value.line == 2
    with pytest.raises(KitError, match="string or a Spark DataFrame"):
        kit.explain(42)
    with pytest.raises(KitError, match="no tables"):
        kit.explain(tables["t1"], t2=tables["t2"])
    with pytest.raises(KitError, match="static"):
        kit.explain("SELECT 1", conf={"spark.sql.codegen.comments": "true"})
    with pytest.raises(KitError, match="row kind"):
        rows.binary_row((1,), ("BIGINT",), kind="+X")
    with pytest.raises(KitError, match="TIMESTAMP"):
        rows.binary_row((1,), ("TIMESTAMP",))


def _connect_without_plugin():
    """A Connect session whose server answers none of the kit's plugin's requests."""
    class Client:
        def schema(self, plan):
            raise RuntimeError("[INVALID_PLAN_INPUT] No handler found for extension type")

    session = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    session.session_id, session.client = "no-plugin", Client()
    return session


def test_spark_connect_degrades_to_explain_text(spark, tables):
    frame = tables["t1"].filter("id < 3")
    jvm = spark._jvm.org.apache.spark.sql.api.python.PythonSQLUtils
    text = {mode: jvm.explainString(frame._jdf.queryExecution(), mode) for mode in ("extended", "cost")}

    class Frame:            # what kit.explain sees of a DataFrame of a Connect server without the kit's plugin
        sparkSession = _connect_without_plugin()

        def _explain_string(self, mode):
            return text[mode]
    Frame.__module__ = "pyspark.sql.connect.dataframe"

    e = explain(Frame())
    assert e.connect and e.rules is None and not e.stages and not e.joins
    assert set(STAGES) <= set(e.texts) and "Statistics(sizeInBytes" in e.texts["optimized_cost"]
    assert "Connect" in e.notes[0]
    assert from_text(text["extended"]).texts["physical"] == e.texts["physical"]


def test_on_spark_connect_a_notebook_skips_the_cells_that_need_the_jvm(spark):
    """Notebook 05 on Connect: a cell marked ``JVM_CELL`` prints why it is skipped instead of
    failing on plan nodes the client cannot reach; other cells run; classic Spark skips none."""
    from IPython.core.interactiveshell import InteractiveShell

    from kit.engine import JVM_CELL, JVM_CELLS, NO_JVM_CELLS, skip_jvm_cells
    from kit.engine.batch import _skip_jvm_cell

    connect = _connect_without_plugin()
    shell = InteractiveShell.instance()
    try:
        assert skip_jvm_cells(spark) is False and _skip_jvm_cell not in shell.input_transformers_cleanup
        assert skip_jvm_cells(connect) is True and skip_jvm_cells(connect) is True
        assert shell.input_transformers_cleanup.count(_skip_jvm_cell) == 1
        assert shell.run_cell(f"{JVM_CELL} (Spark Connect skips this cell)\n{{}}['analyzed']").success
        assert not shell.run_cell("{}['analyzed']").success
        assert shell.run_cell(f"{JVM_CELLS} to the next marker\n{{}}['analyzed']").success
        assert shell.run_cell("{}['analyzed']").success, "skipped: after JVM_CELLS"
        assert not shell.run_cell(f"{NO_JVM_CELLS}\n{{}}['analyzed']").success, "run again"
        assert not shell.run_cell("{}['analyzed']").success
    finally:
        InteractiveShell.clear_instance()


def test_codegen_of_the_filter_stage(e):
    stage = codegen.stage_of(e.dataframe, "FilterExec", "< 1000)")
    assert stage.operators[0] == "FilterExec" and isinstance(stage.id, int)
    assert f"GeneratedIteratorForCodegenStage{stage.id}" in stage.code
    assert stage.lines_about("< 1000L") and "filter_value" in stage.lines_about("< 1000L")[0]


def test_unsafe_row_and_binary_row(spark, tables):
    t1 = tables["t1"]
    spark_row = rows.unsafe_row(t1)
    assert spark_row.size == spark_row.measured == 8 + 3 * 8 + 8          # 'name-0': 6 bytes, padded to 8
    table = spark_row.table()
    assert list(table.field) == ["nulls", "id", "value", "name", "name data"]
    assert list(table.offset) == [0, 8, 16, 24, 32] and table.content.iloc[-1] == "'name-0'"
    flink_row = rows.binary_row(list(t1.first()), ("BIGINT", "BIGINT", "STRING"))
    assert flink_row.size == 32 and flink_row.data[0] == 0 and flink_row.data[31] == 0x86   # inline 'name-0'
    both = rows.compare(t1)
    assert both.attrs["sizes"] == {"Spark UnsafeRow": 40, "Flink BinaryRowData": 32}

    values = (1, None, "a much longer name", 2.5)
    frame = spark.sql("SELECT 1L AS id, CAST(NULL AS BIGINT) AS value, 'a much longer name' AS name, "
                      "2.5D AS x")     # made in the JVM: no Python worker to start
    long_spark = rows.unsafe_row(frame)
    long_flink = rows.binary_row(values, ("BIGINT", "BIGINT", "STRING", "DOUBLE"), kind="-U")
    assert long_spark.size == long_spark.measured == 8 + 4 * 8 + 24
    assert long_flink.size == 8 + 4 * 8 + 24
    assert long_spark.data[0] == 0b10                   # bit 1: value is NULL
    assert long_flink.data[0] == 1 and long_flink.data[1] == 0b10   # row kind -U; null bit 1 + 8
