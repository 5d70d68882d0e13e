"""Continuous queries through kit.sql: plans, changelogs against real Flink 2.3, conversions,
options and the seed's definition (a snapshot at arrival k is the batch query over rows <= k)."""

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kit
from kit.sql.table import DynamicTable
from kit.errors import KitError

from changelogs import table_at
from goldens import load

T0 = pd.Timestamp("2024-01-01 12:00:00")


def clicks_stream(rows):
    """``rows`` of (user, url, 'YYYY-MM-DD HH:MM:SS') as a stream on cTime (delay 0)."""
    df = pd.DataFrame(rows, columns=["user", "url", "cTime"])
    df["cTime"] = pd.to_datetime(df["cTime"])
    return kit.stream(df, time="cTime")


def words_stream(words):
    df = pd.DataFrame({"word": words, "t": [T0 + pd.Timedelta(seconds=i) for i in range(len(words))]})
    return kit.stream(df, time="t")


def changes(table: DynamicTable) -> list:
    """The changelog as (kind, [values]) pairs, like the goldens'."""
    return [(r["op"], [r[c] for c in table.columns]) for r in table.changelog().collect()]


def golden(name, label=None, mode="streaming", query=None):
    runs = [r for r in load(name)["runs"] if r["mode"] == mode and (label is None or r.get("label") == label)
            and (query is None or r["query"].strip() == query.strip())]
    assert runs, f"no {mode} run {label or query!r} in {name}"
    return [(row["kind"], row["values"]) for row in runs[0]["rows"]], runs[0]


# ------------------------------------------------------------------ the goldens


@pytest.mark.parametrize("label", ["docs figure: first 4 clicks", "all 11 clicks"])
def test_group_by_user_count_is_flinks_changelog(spark, label):
    expected, run = golden("groupby_changelog.json", label)
    t = kit.sql(run["query"], clicks=clicks_stream(run["input"]))
    assert changes(t) == expected
    batch, _ = golden("groupby_changelog.json", label, mode="batch")
    assert sorted(map(tuple, t.final().collect())) == sorted(tuple(v) for _, v in batch)


def test_word_frequency_cascade_is_flinks_changelog(spark):
    data = load("word_freq_changelog.json")
    words = words_stream([row[0] for row in data["input"]])
    for run in data["runs"]:
        if run["mode"] != "streaming":
            continue
        t = kit.sql(run["query"], words=words)
        assert changes(t) == [(row["kind"], row["values"]) for row in run["rows"]], run["query"]


def test_the_cascade_without_retraction_counts_hello_twice(spark):
    """The seed's wrong answer: an engine that only appends counts Hello at frequency 1 and 2."""
    words = words_stream(["Hello", "World", "Hello"])
    inner = kit.sql("SELECT word, COUNT(*) AS cnt FROM words GROUP BY word", words=words)
    appended = [r["cnt"] for r in inner.changelog().where("op IN ('+I', '+U')").collect()]
    assert sorted(appended) == [1, 1, 2]     # an append-only sink's view: Hello at 1 and at 2
    outer = kit.sql("SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words "
                    "GROUP BY word) GROUP BY cnt", words=words)
    assert sorted(map(tuple, outer.final().collect())) == [(1, 1), (2, 1)]


@pytest.mark.parametrize("partitions", ["1", "3", "7"])
def test_final_and_snapshot_are_sorted_whatever_the_partitioning(spark, partitions):
    """A cluster or Connect session shuffles into other partitions than local mode: the
    table's rows come back in the same order all the same (by its columns)."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    try:
        words = words_stream(["Hello", "World", "Hello", "Flink", "Spark", "Spark", "Spark"])
        outer = kit.sql("SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words "
                        "GROUP BY word) GROUP BY cnt", words=words)
        assert list(map(tuple, outer.final().collect())) == [(1, 2), (2, 1), (3, 1)]
        assert list(map(tuple, outer.snapshot(at=2).collect())) == [(1, 1), (2, 1)]
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


@pytest.mark.parametrize("time", ["t", "ms", "int_ms"])
@pytest.mark.parametrize("mini_batch", [None, {"table.exec.mini-batch.enabled": "true",
                                                "table.exec.mini-batch.allow-latency": "1 s",
                                                "table.exec.mini-batch.size": "4"}])
@pytest.mark.parametrize("csv", [False, True])
def test_a_fused_cascades_changelog_carries_its_watermarks_in_order(spark, tmp_path, time, mini_batch, csv):
    """Over a stream of several chunks, the fused cascade gives each change the watermark its
    arrival met: ``changelog()`` is the operator's output as it is, with no join with the
    arrivals and no sort, and equals the changes joined with the stream's rows and sorted;
    event time as TIMESTAMP, BIGINT ms (both read off the column in the pass) and INT ms
    (computed in Spark SQL), with disorder; with mini-batch, whose bundles
    flush at arrivals of their own. From CSV files too (one chunk each), which a task parses
    once: a first job counts each chunk's rows and watermark for the next."""
    words = ["Hello", "World", "Hello", "Flink", "Spark", "Spark", "Spark", "Hello", "World"] * 3
    rows = [(w, (T0 + pd.Timedelta(seconds=i - 2 * (i % 3))).to_pydatetime(), i) for i, w in enumerate(words)]
    df = spark.createDataFrame(rows, "word string, t timestamp, i bigint").repartition(3, "i") \
        .sortWithinPartitions("i").selectExpr("word", "t", "unix_millis(t) AS ms",
                                              "CAST(unix_millis(t) - 1704067200000 AS INT) AS int_ms")
    if csv:
        df.write.csv(str(tmp_path / "words"))
        df = spark.read.schema(df.schema).csv(str(tmp_path / "words"))
        assert df.rdd.getNumPartitions() > 1
    t = kit.sql("SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word) "
                "GROUP BY cnt", words=kit.stream(df, time=time, watermark=kit.Duration.of_seconds(1)),
                config=mini_batch)
    got = t.changelog()
    plan = got._jdf.queryExecution().executedPlan().toString()
    assert not any(step in plan for step in ("Join", "Exchange", "Sort")), plan
    log = t.log.df.join(t.streams[0].df.select("seq", "watermark"), "seq", "left").orderBy("seq", "_n")
    assert got.collect() == log.selectExpr("seq", "_op AS op", "cnt", "freq", "watermark").collect()
    assert got.where("watermark IS NOT NULL").count() > 0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from("abcd"), min_size=1, max_size=16), parquet=st.booleans(),
       mini_batch=st.booleans())
def test_an_upsert_stream_is_the_changelog_without_its_update_befores(spark, tmp_path_factory, words, parquet,
                                                                       mini_batch):
    """``to_upsert_stream()`` of a group aggregate, planned without ``-U`` rows (the aggregate
    makes none), against ``changelog()`` less its ``-U`` rows: the same rows in the same
    order; the cascade fused over a Parquet file the pass reads and over a DataFrame, with
    mini-batch and without."""
    df = spark.createDataFrame([(w, i) for i, w in enumerate(words)], "word string, t bigint")
    if parquet:
        folder = str(tmp_path_factory.mktemp("words"))
        df.coalesce(1).write.mode("overwrite").parquet(folder)
        df = spark.read.parquet(folder)
    config = {"table.exec.mini-batch.enabled": "true", "table.exec.mini-batch.allow-latency": "1 s",
              "table.exec.mini-batch.size": "3"} if mini_batch else None
    t = kit.sql("SELECT cnt, COUNT(*) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word) "
                "GROUP BY cnt", words=kit.stream(df, time="t"), config=config)
    upserts = [tuple(r) for r in t.to_upsert_stream().collect()]
    assert upserts == [(r["seq"], r["op"] != "-D", r["cnt"], r["freq"], r["watermark"])
                       for r in t.changelog().collect() if r["op"] != "-U"]
    assert "-U" not in t._upserts[0].mode


def test_an_upsert_stream_deletes_what_a_filter_retracts(spark):
    """A filter over an aggregate's updates (HAVING) needs its -U rows, for an upsert sink too
    (Flink's plan: Calc [I,UB,UA] under the sink); the upsert stream has them as deletes, so
    applied by key it gives the final table (dropped, Mary's count of 1 stayed)."""
    s = clicks_stream([("Mary", "a", "2024-01-01 12:00:00"), ("Mary", "b", "2024-01-01 12:01:00"),
                       ("Bob", "c", "2024-01-01 12:02:00")])
    for sink in ("retract", "upsert"):
        t = kit.sql("SELECT user, COUNT(*) AS c FROM clicks GROUP BY user HAVING COUNT(*) < 2", clicks=s, sink=sink)
        upserts = [(r["flag"], r["user"], r["c"]) for r in t.to_upsert_stream().collect()]
        assert upserts == [(True, "Mary", 1), (False, "Mary", 1), (True, "Bob", 1)]
        table = {}
        for flag, user, c in upserts:
            if flag:
                table[user] = c
            else:
                table.pop(user)
        assert sorted(table.items()) == sorted(tuple(r) for r in t.final().collect())


@pytest.mark.parametrize("chunks, config", [(1, None), (3, None), (3, {"table.exec.mini-batch.enabled": "true",
                                                                   "table.exec.mini-batch.allow-latency": "1 s",
                                                                   "table.exec.mini-batch.size": "5"})])
def test_a_fused_cascades_final_table_is_folded_without_its_changes(spark, chunks, config):
    """``final()`` of fused group aggregates under a Calc: one pass folds every arrival in
    silently and gives the last table alone (a row per group, not a change per arrival),
    the rows of the changelog's snapshot and of the batch query; with mini-batch too, whose
    bundles change the changes, not the last table."""
    from kit.changelog import snapshot
    from kit.sql.table import PlanRun
    rows = [(f"w{(i * i) % 11}", i) for i in range(60)]
    df = spark.createDataFrame(rows, "word string, t bigint").repartition(chunks, "t").sortWithinPartitions("t")
    query = ("SELECT cnt, freq FROM (SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words "
             "GROUP BY word) GROUP BY cnt) WHERE freq > 1")
    t = kit.sql(query, words=kit.stream(df, time="t"), config=config)
    got = [tuple(r) for r in t.final().collect()]
    df.createOrReplaceTempView("words_batch")
    assert got == sorted(tuple(r) for r in spark.sql(query.replace("FROM words", "FROM words_batch")).collect())
    assert got == [tuple(r) for r in snapshot(t.log).collect()]
    top = t.root
    while not hasattr(top, "calls"):
        top = top.input
    folded = PlanRun(t, final=top).node(t.root, update_before=True)
    assert folded.df.count() == len(got) < t.log.df.count()


@pytest.mark.parametrize("query, clock, free", [
    ("SELECT word, COUNT(*) AS n, MAX(v) AS m, SUM(t) AS s FROM words GROUP BY word", False, True),
    ("SELECT word, COUNT(*) AS n, SUM(i) AS s FROM words GROUP BY word", False, False),
    ("SELECT n, COUNT(*) AS c FROM (SELECT word, COUNT(*) AS n FROM words GROUP BY word) GROUP BY n", True, False),
    ("SELECT word, SUM(v) AS s FROM words GROUP BY word", False, False),
    ("SELECT word, AVG(v * 3) AS a FROM words GROUP BY word", False, False),
    ("SELECT word, COUNT(*) AS n FROM words WHERE rand() < 2 GROUP BY word", False, False)])
def test_final_is_the_batch_query_where_no_order_of_arrivals_changes_it(spark, query, clock, free):
    """``final()`` runs the batch query over the source where group aggregates and Calcs alone
    make the table and their answer cannot depend on the arrivals' order; not over a
    processing-time stream, sums of DOUBLEs (their last digits go by the order of the
    additions), a SUM of INTs (an INT in Flink, a BIGINT in Spark) or a nondeterministic
    query. Either way: the changelog's last table."""
    from kit.changelog import snapshot
    rows = [(f"w{(i * i) % 7}", i, i * 0.1, i) for i in range(40)]
    df = spark.createDataFrame(rows, "word string, i int, v double, t bigint").repartition(2, "t").sortWithinPartitions("t")
    proctime = kit.Clock("2024-01-01 00:00:00", kit.Duration.of_seconds(1)) if clock else None
    t = kit.sql(query, words=kit.stream(df, time="t", proctime=proctime))
    assert t._order_free() is free
    got = [tuple(r) for r in t.final().collect()]
    assert got == [tuple(r) for r in snapshot(t.log).collect()] and len(got) > 1


@pytest.mark.parametrize("header", [False, True])
def test_final_over_csv_files_the_kit_reads_is_folded_not_the_batch_query(spark, tmp_path, header):
    """Over CSV or JSON files that the kit's passes read themselves (``LineScan``), ``final()``
    is the fused cascade's fold, not Spark's batch query (whose parse of the files costs
    more): no file scan of Spark's in its plan; the rows are the batch query's. Files the kit
    leaves to Spark's reader (CSV read with ``multiLine``) still get the batch query."""
    rows = [(f"w{(i * i) % 11}", i) for i in range(60)]
    df = spark.createDataFrame(rows, "word string, t bigint").repartition(3, "t").sortWithinPartitions("t")
    query = "SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word) GROUP BY cnt"
    df.createOrReplaceTempView("words_batch")
    batch = sorted(tuple(r) for r in spark.sql(query.replace("FROM words", "FROM words_batch")).collect())
    for fmt, options, kit_reads in (("csv", {}, True), ("json", {}, True), ("csv", {"multiLine": True}, False)):
        folder = str(tmp_path / f"{fmt}{len(options)}")
        getattr(df.write.option("header", header), fmt)(folder)
        reader = spark.read.schema("word string, t bigint").option("header", header).options(**options)
        t = kit.sql(query, words=kit.stream(getattr(reader, fmt)(folder), time="t"))
        final = t.final()
        plan = final._jdf.queryExecution().executedPlan().toString()
        assert ("FileScan" not in plan) is kit_reads, plan
        assert [tuple(r) for r in final.collect()] == batch


def test_the_tables_dataframe_methods_read_one_final_table(spark, monkeypatch):
    """``t.count()``, ``t.columns``, ``t.final()``: planned once, one DataFrame; an attribute
    of the table's own that fails with an AttributeError raises that error (not a DataFrame's
    "no attribute")."""
    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "word string, t bigint")
    t = kit.sql("SELECT word, COUNT(*) AS c FROM words GROUP BY word", words=kit.stream(df, time="t"))
    planned = []
    monkeypatch.setattr(DynamicTable, "_order_free", lambda self: planned.append(1) or True)
    assert t.count() == 2 and t.columns == ["word", "c"] and t.final() is t.final()
    assert len(planned) == 1

    def failing(self):
        raise AttributeError("the table's own")

    monkeypatch.setattr(DynamicTable, "mode", property(failing))
    with pytest.raises(AttributeError, match="the table's own"):
        t.mode


def _shop(rows):
    df = pd.DataFrame(rows, columns=["product_id", "category", "sales"])
    df["t"] = [T0 + pd.Timedelta(seconds=i) for i in range(len(df))]
    return kit.stream(df, time="t")


@pytest.mark.parametrize("query", ["SELECT COUNT(*) AS n FROM clicks WHERE user = 'Bob'",
                                   "SELECT n, COUNT(*) AS c FROM (SELECT user, COUNT(*) AS n FROM clicks "
                                   "WHERE user <> 'Mary' GROUP BY user) GROUP BY n"])
def test_a_filter_under_fused_aggregates_drops_its_rows(spark, query):
    """Group aggregates over a filtered stream in two chunks: the filter's rows stay out, as
    in the batch query (a fused pass that read the source straight once counted them all)."""
    rows = [("Mary", 0), ("Bob", 1), ("Mary", 2), ("Liz", 3), ("Bob", 4)]
    df = spark.sparkContext.parallelize(rows, 2).toDF("user string, t bigint")
    got = kit.sql(query, clicks=kit.stream(df, time="t")).final().collect()
    df.createOrReplaceTempView("clicks_batch")
    assert sorted(got) == sorted(spark.sql(query.replace("FROM clicks", "FROM clicks_batch")).collect())


@pytest.mark.parametrize("number", [True, False])
def test_top_n_is_flinks_changelog(spark, number):
    data = load("topn_changelog.json")
    runs = [r for r in data["runs"] if r["mode"] == "streaming" and ("row_num" in r["columns"]) == number]
    run = runs[0]
    t = kit.sql(run["query"], shop_sales=_shop(data["input"]))
    got = [(r["op"], [r[c] for c in run["columns"]]) for r in t.changelog().collect()]   # not the stream's t
    assert got == [(row["kind"], row["values"]) for row in run["rows"]]


# ------------------------------------------------------------------ the seed's definition

QUERIES = [
    "SELECT user, COUNT(url) AS c FROM clicks GROUP BY user",
    "SELECT user, COUNT(*) AS c, COUNT(DISTINCT url) AS d, MIN(url) AS lo, MAX(url) AS hi FROM clicks GROUP BY user",
    "SELECT user, COUNT(*) AS c FROM clicks WHERE url <> 'b' GROUP BY user HAVING COUNT(*) >= 2",
    "SELECT c, COUNT(*) AS f FROM (SELECT user, COUNT(*) AS c FROM clicks GROUP BY user) GROUP BY c",
    "SELECT c, MAX(user) AS m, MIN(user) AS n FROM (SELECT user, COUNT(*) AS c FROM clicks GROUP BY user) GROUP BY c",
    "SELECT user, url FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user ORDER BY url DESC) AS rn FROM clicks) "
    "WHERE rn <= 2",
    "SELECT * FROM (SELECT user, c, ROW_NUMBER() OVER (ORDER BY c DESC, user) AS rn FROM "
    "(SELECT user, COUNT(*) AS c FROM clicks GROUP BY user)) WHERE rn <= 2",
    "SELECT COUNT(*) AS n FROM clicks",
    "SELECT DISTINCT url FROM clicks",
    "SELECT a.user, a.url, b.url AS other FROM clicks a LEFT JOIN clicks b ON a.user = b.user AND a.url < b.url",
    "SELECT a.user, c FROM clicks a FULL JOIN (SELECT url, COUNT(*) AS c FROM clicks GROUP BY url) b "
    "ON a.url = b.url AND c > 1",
]

rows = st.lists(st.tuples(st.sampled_from(["Mary", "Bob", "Liz"]), st.sampled_from(["a", "b", "c"])),
                min_size=1, max_size=8)


@pytest.mark.parametrize("query", QUERIES)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows, at=st.data())
def test_a_snapshot_is_the_batch_query_over_the_rows_so_far(spark, query, data, at):
    """At arrival k, applying the changelog up to k gives the same query run as batch Spark
    SQL over the input rows with seq <= k (seed 003's definition): at the first arrival, the
    last and one drawn between."""
    s = clicks_stream([(u, url, T0 + pd.Timedelta(seconds=i)) for i, (u, url) in enumerate(data)])
    t = kit.sql(query, clicks=s)
    log = t.changelog().collect()
    for k in sorted({0, at.draw(st.integers(0, len(data) - 1)), len(data) - 1}):
        so_far = s.df.where(f"seq <= {k}").select("user", "url", "cTime")
        batch = kit.sql(query, clicks=so_far)
        assert table_at(t.columns, log, k, kind="op") == sorted(map(tuple, batch.collect()), key=repr), (query, k)


# ------------------------------------------------------------------ API and errors


def test_conversions_follow_flinks_rules(spark):
    s = clicks_stream([("Mary", "a", "2024-01-01 12:00:00"), ("Mary", "b", "2024-01-01 12:01:00")])
    counted = kit.sql("SELECT user, COUNT(*) AS c FROM clicks GROUP BY user", clicks=s)
    with pytest.raises(KitError, match="doesn't support consuming update changes"):
        counted.to_append_stream()
    retract = [(r["flag"], r["user"], r["c"]) for r in counted.to_retract_stream().collect()]
    assert retract == [(True, "Mary", 1), (False, "Mary", 1), (True, "Mary", 2)]
    assert counted.upsert_key == ("user",)
    upsert = [(r["flag"], r["user"], r["c"]) for r in counted.to_upsert_stream().collect()]
    assert upsert == [(True, "Mary", 1), (True, "Mary", 2)]
    joined = kit.sql("SELECT a.user, b.url FROM clicks a JOIN clicks b ON a.user = b.user AND a.url = 'a'", clicks=s)
    assert joined.mode == frozenset({"+I"})          # an inner join of appends only appends
    assert [tuple(r) for r in joined.to_append_stream().select("user", "url").collect()] == [
        ("Mary", "a"), ("Mary", "b")]
    with pytest.raises(KitError, match="no unique key"):
        joined.to_upsert_stream()


def test_an_upsert_sink_gets_no_update_before(spark):
    s = clicks_stream([("Mary", "a", "2024-01-01 12:00:00"), ("Mary", "b", "2024-01-01 12:01:00")])
    t = kit.sql("SELECT user, COUNT(*) AS c FROM clicks GROUP BY user", clicks=s, sink="upsert")
    assert changes(t) == [("+I", ["Mary", 1]), ("+U", ["Mary", 2])]
    assert "[I,UA]" in t.explain().splitlines()[1]      # under the Sink


def test_the_result_stands_for_its_final_table(spark):
    s = clicks_stream([("Mary", "a", "2024-01-01 12:00:00"), ("Bob", "b", "2024-01-01 12:01:00")])
    t = kit.sql("SELECT user, COUNT(*) AS c FROM clicks GROUP BY user", clicks=s)
    assert t.columns == ["user", "c"]
    assert sorted(map(tuple, t.collect())) == [("Bob", 1), ("Mary", 1)]
    assert sorted(map(tuple, t.snapshot(at=0).collect())) == [("Mary", 1)]


def test_the_plan_reads_like_flinks(spark):
    words = words_stream(["Hello"])
    t = kit.sql("SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word) "
                "GROUP BY cnt", words=words)
    lines = t.explain().splitlines()          # Flink's EXPLAIN CHANGELOG_MODE INSERT INTO a retract sink
    assert [line.split("(")[0].strip(" +-:") for line in lines] == [
        "Sink", "GroupAggregate", "Exchange", "Calc", "GroupAggregate", "Exchange", "Calc", "WatermarkAssigner",
        "TableSourceScan"]
    assert "changelogMode=[I,UB,UA,D]" in lines[1] and "changelogMode=[I,UB,UA]" in lines[4]
    lines = t.explain(physical=False).splitlines()     # the kit's own operators
    assert [line.split("(")[0].strip(" +-:") for line in lines] == [
        "Calc", "GroupAggregate", "Calc", "Calc", "GroupAggregate", "Calc", "Source"]
    assert "changelogMode=[I,UB,UA,D]" in lines[1] and "changelogMode=[I,UB,UA]" in lines[4]


@pytest.mark.parametrize("query, message", [
    ("SELECT user, COUNT(*) FROM clicks GROUP BY user ORDER BY user", "ORDER over a stream"),
    ("SELECT *, ROW_NUMBER() OVER (ORDER BY url DESC) AS rn FROM clicks", "ordered in ASCENDING mode"),
    ("SELECT user, COUNT(*) FROM clicks WHERE url IN (SELECT url FROM clicks) GROUP BY user", "subquery in WHERE"),
    ("SELECT user, STDDEV(1) FROM clicks GROUP BY user", "STDDEV"),
    ("SELECT user, url FROM clicks GROUP BY user", "line 1, column 14: .*MISSING_AGGREGATION"),
])
def test_what_cannot_run_continuously_says_why(spark, query, message):
    s = clicks_stream([("Mary", "a", "2024-01-01 12:00:00")])
    with pytest.raises(KitError, match=message):
        kit.sql(query, clicks=s).changelog()


def test_unknown_options_name_the_known_ones(spark):
    s = clicks_stream([("Mary", "a", "2024-01-01 12:00:00")])
    with pytest.raises(KitError, match="table.exec.mini-batch.enabled"):
        kit.sql("SELECT user FROM clicks", clicks=s, config={"table.exec.mini-batch.enable": True})
    with pytest.raises(KitError, match="needs table.exec.mini-batch.allow-latency and table.exec.mini-batch.size"):
        kit.sql("SELECT user FROM clicks", clicks=s, config={"table.exec.mini-batch.enabled": True})
    with pytest.raises(KitError, match="sink='append' is not one of"):
        kit.sql("SELECT user FROM clicks", clicks=s, sink="append")


def test_the_distinct_split_takes_flinks_default_bucket_count():
    """Enabled alone, the split has Flink's 1024 buckets (it failed asking for bucket-num)."""
    from kit.sql.options import dynamic_options
    split = "table.optimizer.distinct-agg.split.enabled"
    assert dynamic_options({split: True})[0].distinct_split == 1024
    assert dynamic_options({split: "true", "table.optimizer.distinct-agg.split.bucket-num": 8})[0].distinct_split == 8
    with pytest.raises(KitError, match="bucket-num set but"):
        dynamic_options({"table.optimizer.distinct-agg.split.bucket-num": 8})


def test_the_seeds_idle_state_retention_is_the_ttl(spark):
    from kit.sql.options import idle_state_retention
    assert idle_state_retention(kit.Duration.of_hours(12), kit.Duration.of_hours(24)) == {
        "table.exec.state.ttl": 24 * 3_600_000}
    with pytest.raises(KitError, match="below the minimum"):
        idle_state_retention("2 h", "1 h")


@pytest.mark.parametrize("name", ["seq", "_op", "_wm", "op", "Flag", "watermark"])
def test_a_result_column_named_like_the_changelogs_own_says_what_to_rename(spark, name):
    """The changelog keeps ``seq``, ``_op``, ``_n``, ``_pt`` and ``_wm`` beside the result's
    columns and adds ``op``, ``watermark``, ``proctime``, ``flag``, ``after_expiry``: a result
    column of one of those names (in any case) fails at kit.sql with what to do (before:
    Spark's AMBIGUOUS_REFERENCE when read, or two ``op`` columns)."""
    clicks = kit.stream(pd.DataFrame({name: ["a", "b", "a"], "t": [1, 2, 3]}), time="t")
    with pytest.raises(KitError, match=rf"result has column\(s\) \['{name}'\] named like the changelog's own"):
        kit.sql(f"SELECT `{name}`, COUNT(*) AS c FROM clicks GROUP BY `{name}`", clicks=clicks)
    renamed = kit.sql(f"SELECT `{name}` AS k, COUNT(*) AS c FROM clicks GROUP BY `{name}`", clicks=clicks)
    assert sorted(map(tuple, renamed.final().collect())) == [("a", 2), ("b", 1)]


def test_every_conversion_names_each_column_once():
    """Each conversion's columns: ``seq``, the row kind (``op``) or ``flag``, the query's
    columns, ``watermark``; none twice (issue 47 item 5)."""
    s = clicks_stream([("Mary", "./home", "2024-01-01 12:00:00"), ("Bob", "./cart", "2024-01-01 12:00:05"),
                       ("Mary", "./prod?id=1", "2024-01-01 12:01:00")])
    counts = kit.sql("SELECT user, COUNT(url) AS cnt FROM clicks GROUP BY user", clicks=s)
    rows = kit.sql("SELECT a.user, b.url FROM clicks a JOIN clicks b ON a.user = b.user", clicks=s)   # inserts only
    assert counts.changelog().columns == counts.to_changelog_stream().columns == ["seq", "op", "user", "cnt", "watermark"]
    assert counts.to_retract_stream().columns == counts.to_upsert_stream().columns == \
        ["seq", "flag", "user", "cnt", "watermark"]
    assert rows.to_append_stream().columns == ["seq", "user", "url", "watermark"]
    assert [r.flag for r in counts.to_retract_stream().collect()] == [True, True, False, True]


def test_inputs_that_are_clear_errors(spark):
    """What Flink or Spark would refuse deep inside is refused where it is given, saying what
    to change (issue 47 items 8-13)."""
    import numpy as np
    s = words_stream(["a", "b", "a"])
    count = "SELECT word, COUNT(*) AS c FROM words GROUP BY word"
    for latency in (0, -5, "0 ms"):
        with pytest.raises(KitError, match="allow-latency=.*must be above 0 ms"):
            kit.sql(count, config={"table.exec.mini-batch.enabled": True, "table.exec.mini-batch.allow-latency": latency,
                                   "table.exec.mini-batch.size": 5}, words=s)
    with pytest.raises(KitError, match="config takes a mapping of option names to values.*got list"):
        kit.sql(count, config=[("table.exec.state.ttl", "1 h")], words=s)
    t = kit.sql(count, words=s)
    assert [tuple(r) for r in t.snapshot(at=np.int64(0)).collect()] == [("a", 1)]
    for at, said in ((True, "takes an arrival number"), (-1, "arrivals are numbered from 0"), (1.5, "takes an arrival")):
        with pytest.raises(KitError, match=said):
            t.snapshot(at=at)
    with pytest.raises(KitError, match=r"conf spark.sql.shuffle.partitions='abc': Spark does not take this value"):
        kit.explain("SELECT word FROM w", conf={"spark.sql.shuffle.partitions": "abc"}, w=s.source)
    with pytest.raises(KitError, match=r"FILTER \(WHERE \.\.\.\) is not run in continuous queries"):
        kit.sql("SELECT COUNT(*) FILTER (WHERE word = 'a') AS n FROM words", words=s)
    early = spark.createDataFrame([("a", "0001-01-01 00:00:00")], "word string, t string")
    with pytest.raises(KitError, match="has event time on 0001-01-01 in column 't': PySpark cannot give back"):
        kit.stream(early.selectExpr("word", "CAST(t AS TIMESTAMP) AS t"), time="t").df.collect()


def test_a_global_aggregate_over_no_rows_sends_nothing(spark):
    """Flink's global aggregate over an empty stream emits nothing: its changelog, snapshot and
    final table are empty, where the batch query gives one row (COUNT(*) = 0) (issue 47 item 7)."""
    empty = kit.stream(spark.createDataFrame([], "word string, t long"), time="t")
    t = kit.sql("SELECT COUNT(*) AS n, SUM(t) AS s FROM words", words=empty)
    assert t.changelog().count() == t.snapshot().count() == t.final().count() == 0
    assert [tuple(r) for r in kit.sql("SELECT COUNT(*) AS n, SUM(t) AS s FROM words", words=empty.source).collect()] == \
        [(0, None)]



@pytest.mark.parametrize("cores", [0, 10**6])
def test_final_over_parquet_on_few_cores_is_folded_not_the_batch_query(spark, tmp_path, monkeypatch, cores):
    """On a session of at most ``FOLD_CORES`` cores, an order-free ``final()`` over Parquet
    files is the fused cascade's fold (one pass, no shuffle); on more, Spark's batch query;
    the same rows. A query the fold does not take (a non-retracting MAX) or takes over the
    arrivals rather than the source (a filter below it: all its changes) gets the batch query."""
    from kit.sql import table
    monkeypatch.setattr(table, "FOLD_CORES", cores)
    rows = [(f"w{(i * i) % 11}", i) for i in range(60)]
    folder = str(tmp_path / "words")
    spark.createDataFrame(rows, "word string, t bigint").coalesce(2).write.parquet(folder)
    spark.read.parquet(folder).createOrReplaceTempView("words_batch")
    for query, fused in (("SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words "
                          "GROUP BY word) GROUP BY cnt", True),
                         ("SELECT m, COUNT(*) AS c FROM (SELECT word, MAX(t) AS m FROM words GROUP BY word) "
                          "GROUP BY m", True),
                         ("SELECT word, MAX(n) AS top FROM (SELECT word, COUNT(*) AS n FROM words GROUP BY word) "
                          "GROUP BY word", False),
                         ("SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words "
                          "WHERE word <> 'w4' GROUP BY word) GROUP BY cnt", False)):
        batch = sorted(tuple(r) for r in spark.sql(query.replace("FROM words", "FROM words_batch")).collect())
        final = kit.sql(query, words=kit.stream(spark.read.parquet(folder), time="t")).final()
        plan = final._jdf.queryExecution().executedPlan().toString()
        assert ("HashAggregate" not in plan) is (fused and cores > 0), plan
        assert [tuple(r) for r in final.collect()] == batch
