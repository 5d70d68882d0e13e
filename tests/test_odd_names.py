"""Column names with a backtick, a space, a comma, ``;`` or ``=`` run every continuous query
and DataStream window as plain names do: the same rows, the same changelog, under the
user's names (PySpark's ``F.col`` parses a name, and its ``mapInArrow`` and
``applyInPandas`` resolve their inputs unquoted). A dot is refused (``stream._check_columns``)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark.sql import functions as F

import kit
from kit.windows import (CountEvictor, CountTrigger, EventTimeSessionWindows, GlobalWindows, PurgingTrigger, Sum,
                         TumblingEventTimeWindows)

ODD = {"a": "a`b;k=1", "v": "v w,x", "t": "t`x;y=2"}
PLAIN = {"a": "a", "v": "v", "t": "t"}
ROWS = [("x", 1, "2024-01-01 00:00:01"), ("y", 2, "2024-01-01 00:00:07"), ("x", 3, "2024-01-01 00:00:12"),
        ("y", 5, "2024-01-01 00:00:04"), ("x", 4, "2024-01-01 00:00:21"), ("y", 6, "2024-01-01 00:00:30")]

W = "TABLE({kind}(TABLE s{by}, DESCRIPTOR({t}), {sizes}))"
QUERIES = {
    "group by": "SELECT {a}, COUNT(*) AS n, SUM({v}) AS total, MAX({v}) AS top FROM s GROUP BY {a}",
    "distinct": "SELECT DISTINCT {a} FROM s",
    "cascade": "SELECT n, COUNT(*) AS keys FROM (SELECT {a}, COUNT(*) AS n FROM s GROUP BY {a}) GROUP BY n",
    "top-n": "SELECT * FROM (SELECT {a}, {v}, ROW_NUMBER() OVER (PARTITION BY {a} ORDER BY {v} DESC) AS rn "
             "FROM s) WHERE rn <= 1",
    "dedup": "SELECT {a}, {v} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {a} ORDER BY {t}) AS rn FROM s) "
             "WHERE rn = 1",
    "over": "SELECT {a}, {v}, SUM({v}) OVER (PARTITION BY {a} ORDER BY {v}) AS total FROM s",
    "interval join": "SELECT l.{a}, l.{v}, r.{v} AS rv FROM s l JOIN s r ON l.{a} = r.{a} AND l.{t} BETWEEN "
                     "r.{t} - INTERVAL '10' SECOND AND r.{t} AND l.{v} < r.{v}",
    "tumble": "SELECT {a}, window_start, SUM({v}) AS total, AVG({v}) AS mean FROM "
              + W.format(kind="TUMBLE", by="", t="{t}", sizes="INTERVAL '10' SECOND") + " GROUP BY {a}, window_start, window_end",
    "hop": "SELECT {a}, window_start, MAX({v}) AS top FROM "
           + W.format(kind="HOP", by="", t="{t}", sizes="INTERVAL '5' SECOND, INTERVAL '10' SECOND")
           + " GROUP BY {a}, window_start, window_end",
    "cumulate": "SELECT window_start, window_end, COUNT({v}) AS n FROM "
                + W.format(kind="CUMULATE", by="", t="{t}", sizes="INTERVAL '5' SECOND, INTERVAL '10' SECOND")
                + " GROUP BY window_start, window_end",
    "session": "SELECT {a}, window_start, window_end, COUNT(*) AS n FROM "
               + W.format(kind="SESSION", by=" PARTITION BY {a}", t="{t}", sizes="INTERVAL '5' SECOND")
               + " GROUP BY {a}, window_start, window_end",
    "window top-n": "SELECT * FROM (SELECT {a}, {v}, window_start, ROW_NUMBER() OVER (PARTITION BY window_start, "
                    "window_end ORDER BY {v} DESC) AS rn FROM "
                    + W.format(kind="TUMBLE", by="", t="{t}", sizes="INTERVAL '10' SECOND") + ") WHERE rn <= 1",
    "group window": "SELECT {a}, TUMBLE_START({t}, INTERVAL '10' SECOND) AS ws, SUM({v}) AS total FROM s "
                    "GROUP BY {a}, TUMBLE({t}, INTERVAL '10' SECOND)",
    "match": "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY {a} ORDER BY {t} MEASURES A.{v} AS first_v, "
             "LAST(B.{t}) AS last_t ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.{v} < 4, B AS B.{v} > A.{v})",
}
CONFIGS = {"": {}, " with TTL": {"table.exec.state.ttl": "8 s"},
           " with mini-batch": {"table.exec.mini-batch.enabled": "true", "table.exec.mini-batch.allow-latency": "1 s",
                                "table.exec.mini-batch.size": "2"}}


def _stream(spark, names):
    df = spark.createDataFrame(ROWS, "a string, v int, t string").select(
        F.col("a").alias(names["a"]), F.col("v").alias(names["v"]), F.col("t").cast("timestamp").alias(names["t"]))
    return kit.stream(df, time=names["t"], watermark=kit.Duration.of_seconds(2),
                      proctime=kit.Clock("2024-01-01 00:00:00", kit.Duration.of_seconds(3)))


def _run(spark, query, names, config):
    quoted = {k: "`" + n.replace("`", "``") + "`" for k, n in names.items()}
    result = kit.sql(query.format(**quoted), s=_stream(spark, names), config=config)
    rows = result.collect() if hasattr(result, "collect") else result.df.collect()
    log = result.changelog().collect() if hasattr(result, "changelog") else []
    return result.columns if hasattr(result, "columns") else result.df.columns, rows, log


@pytest.mark.parametrize("config", CONFIGS, ids=list(CONFIGS))
@pytest.mark.parametrize("query", QUERIES.values(), ids=list(QUERIES))
def test_odd_column_names_give_the_plain_names_rows(spark, query, config):
    columns, rows, log = _run(spark, query, ODD, CONFIGS[config])
    plain_columns, plain_rows, plain_log = _run(spark, query, PLAIN, CONFIGS[config])
    renamed = {v: k for k, v in ODD.items()}
    assert [renamed.get(c, c) for c in columns] == plain_columns
    assert list(map(tuple, rows)) == list(map(tuple, plain_rows)) and rows
    assert list(map(tuple, log)) == list(map(tuple, plain_log))



WINDOWS = {   # each over the stream keyed by its first column, summing its second
    "fast path": lambda keyed, v: keyed.window(TumblingEventTimeWindows.of(kit.Time.seconds(10))).aggregate(Sum(v)),
    "count trigger and evictor": lambda keyed, v: keyed.window(GlobalWindows.create()).trigger(CountTrigger.of(2))
    .evictor(CountEvictor.of(3)).aggregate(Sum(v)),
    "session, a Python trigger": lambda keyed, v: keyed.window(EventTimeSessionWindows.with_gap(kit.Time.seconds(5)))
    .trigger(PurgingTrigger.of(CountTrigger.of(1))).aggregate(Sum(v)),
}


@pytest.mark.parametrize("window", WINDOWS.values(), ids=list(WINDOWS))
def test_odd_column_names_run_datastream_windows(spark, window):
    def run(names):
        result = window(_stream(spark, names).key_by(names["a"]), names["v"]).df
        return result.columns, result.collect()

    columns, rows = run(ODD)
    plain_columns, plain_rows = run(PLAIN)
    assert [c.replace(ODD["v"], "v") for c in columns] == plain_columns   # sum_v w: sum_v
    assert list(map(tuple, rows)) == list(map(tuple, plain_rows)) and rows


NAME = st.text(alphabet="ab`'\" ,;=()#é-", min_size=1, max_size=5).map(lambda text: "c" + text)


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(names=st.tuples(NAME, NAME, NAME).filter(lambda n: len({x.lower() for x in n}) == 3),
       query=st.sampled_from(["group by", "top-n", "tumble", "session", "match", "interval join"]))
def test_any_column_names_give_the_plain_names_rows(spark, names, query):
    odd = dict(zip("avt", names))
    columns, rows, log = _run(spark, QUERIES[query], odd, {})
    plain_columns, plain_rows, plain_log = _run(spark, QUERIES[query], PLAIN, {})
    renamed = {v: k for k, v in odd.items()}
    assert [renamed.get(c, c) for c in columns] == plain_columns
    assert list(map(tuple, rows)) == list(map(tuple, plain_rows)) and list(map(tuple, log)) == list(map(tuple, plain_log))
