"""Spark SQL text the kit writes (kit.sparksql) and the replay's task count (kit.spark)."""

import numpy as np
import pyarrow as pa
import pytest

from kit.spark import replay_tasks
from kit.sparksql import INLINE_ROWS, local_rows, name, string

SCHEMA = "kind string, t long, f long, x double"


@pytest.mark.parametrize("text", ["plain", "it's", "back\\slash", "`tick`", 'say "hi"', "ñ\nline", "''"])
def test_a_string_and_a_name_read_back_as_written(spark, text):
    row = spark.range(1).selectExpr(f"{string(text)} AS {name(text)}").first()
    assert row[0] == text and row.__fields__ == [text]


@pytest.mark.parametrize("count", [1, 3, INLINE_ROWS + 1])
def test_local_rows_give_the_rows_and_types_written_inline_or_sent(spark, count):
    some = [("a'b", 2**40, None, 0.5), (None, np.int64(-5), 7, None), ("c", 0, None, 1e-3)]
    rows = (some * count)[:count]
    expected = [tuple(int(v) if isinstance(v, np.integer) else v for v in r) for r in rows]
    table = pa.table({n: [r[i] for r in expected] for i, n in enumerate(["k", "t", "f", "x"])})   # names: the schema's
    for given in (rows, table):
        df = local_rows(spark, given, SCHEMA)
        assert df.schema.simpleString() == "struct<kind:string,t:bigint,f:bigint,x:double>"
        assert [tuple(r) for r in df.collect()] == expected
    typed = table.cast(pa.schema([("k", pa.string()), ("t", pa.int64()), ("f", pa.int64()), ("x", pa.float64())]))
    own = local_rows(spark, typed)   # an Arrow table's own names and types
    assert own.schema.simpleString() == "struct<k:string,t:bigint,f:bigint,x:double>"
    assert [tuple(r) for r in own.collect()] == expected


@pytest.mark.parametrize("count", [1, 3, INLINE_ROWS + 1])
def test_local_rows_take_any_spark_schema(spark, count):
    """A type with a comma in it (DECIMAL(20, 2)) and a quoted name with one: the schema is
    read as Spark reads it, not cut at every comma; a DECIMAL keeps all its digits."""
    from decimal import Decimal

    rows = ([(Decimal("1.25"), "x"), (None, "y"), (Decimal("-12345678901234567.89"), None)] * count)[:count]
    df = local_rows(spark, rows, "amount decimal(20,2), `a, b` string")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema] == [("amount", "decimal(20,2)"), ("a, b", "string")]
    assert [tuple(r) for r in df.collect()] == rows


@pytest.mark.parametrize("count", [1, INLINE_ROWS + 1])
def test_local_rows_are_a_local_relation_that_a_join_reads_with_no_python(spark, count):
    plan = local_rows(spark, [("a", 1, None, 0.0)] * count, SCHEMA)._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan" in plan


def test_a_small_replay_runs_as_one_task_and_a_big_one_spread(spark):
    spread = 4 * int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert replay_tasks(spark, 50) == 1
    assert replay_tasks(spark, None) == spread
    assert replay_tasks(spark, 25_000) == min(3, spread)
    assert replay_tasks(spark, 10**9) == 2_000, "never more than 500,000 rows a task"
