"""What a widget redraw costs in Spark jobs (each ~0.05–0.2 s here even on ten rows): the
same input replayed again is not ordered or scanned again, and the annotated stream is read
in one pass with no sort."""

import pytest
from pyspark.sql import functions as F

import kit
from kit import Duration


@pytest.fixture
def jobs(spark):
    """``jobs(fn)``: the Spark jobs ``fn()`` ran (all groups), and its result; the Streams it
    read are held until the next call, as a widget holds its last redraw's."""
    sc = spark.sparkContext
    last = []

    def count(fn):
        group = "test-redraw-jobs"
        sc.setJobGroup(group, "counted")
        try:
            before = set(sc.statusTracker().getJobIdsForGroup(group))
            with kit.Stream.holding() as made:
                result = fn()
            last[:] = made
            return len(set(sc.statusTracker().getJobIdsForGroup(group)) - before), result
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
    return count


@pytest.fixture
def network(spark):
    """Notebook 00's clicks that arrive out of order (``arrived``): ordered by a sort."""
    clicks = kit.data.load("clicks")
    lag = F.expr("CASE user WHEN 'Mary' THEN INTERVAL 0 MINUTES WHEN 'Bob' THEN INTERVAL 2 MINUTES "
                 "ELSE INTERVAL 45 MINUTES END")
    return clicks.withColumn("arrived", F.col("cTime") + lag)


def replay(df, minutes):
    return kit.stream(df, time="cTime", order="arrived", proctime="arrived",
                      watermark=Duration.of_minutes(minutes))


def test_the_same_input_and_arguments_give_the_same_stream(network):
    first = replay(network, 5)
    assert replay(network, 5) is first
    assert replay(network, 6) is not first
    assert replay(network, 6).source is first.source, "ordered once for both"


def test_a_new_watermark_costs_two_jobs_and_a_known_one_one(jobs, network):
    n, first = jobs(lambda: replay(network, 0).df.toPandas())           # the sort happens here, once
    assert n >= 2
    n, rows = jobs(lambda: replay(network, 10).df.toPandas())
    assert n <= 2, "a new watermark: the arrival summary, then one read of the rows"
    n, again = jobs(lambda: replay(network, 10).df.toPandas())
    assert n == 1 and again.equals(rows)
    assert list(rows["seq"]) == list(range(len(rows))), "in arrival order with no sort"
    assert rows["arrived"].is_monotonic_increasing


def test_the_annotated_rows_read_through_a_union_keep_their_arrival_order(spark, network):
    """Read after another frame's partitions, each chunk of the stream is still its own
    (its tasks' numbers are the union's, not the input's)."""
    s = replay(network, 5)
    before = spark.range(3, numPartitions=3).selectExpr("id AS seq")
    rows = before.union(s.df.select("seq")).collect()
    assert [r.seq for r in rows] == [0, 1, 2] + list(range(s.df.count()))


def test_a_join_redrawn_with_new_options_interleaves_its_inputs_once(jobs):
    from datetime import datetime

    from kit import Clock, WatermarkStrategy
    from kit.joins import temporal_join

    def join(ttl, orders_df, rates_df):
        orders = kit.stream(orders_df, time="order_time", watermark=WatermarkStrategy.for_sql_delay(Duration(0)))
        rates = kit.stream(rates_df, time="update_time", primary_key="currency",
                           watermark=WatermarkStrategy.for_sql_delay(Duration.of_minutes(60)))
        j = temporal_join(orders, rates, on="currency", how="left", engine="replay",
                          clock=Clock(datetime(2024, 1, 1, 10), Duration.of_minutes(10)),
                          state_ttl=Duration.of_minutes(ttl) if ttl else None)
        return j.merged, j.emissions().toPandas()

    inputs = kit.data.load("orders"), kit.data.load("currency_rates")
    n, (merged, first) = jobs(lambda: join(0, *inputs))
    assert n == 1, "seed-sized: interleaved and replayed in one partition as the emissions are read"
    n, (again_merged, again) = jobs(lambda: join(0, *inputs))
    assert again.equals(first) and n == 1 and again_merged is merged
    n, (expiring_merged, expiring) = jobs(lambda: join(20, *inputs))
    assert n == 1 and expiring_merged is merged, "a new state TTL replays the kept interleaving"
    _, fresh = join(20, kit.data.load("orders"), kit.data.load("currency_rates"))   # new inputs: interleaved anew
    assert expiring.equals(fresh) and not expiring.equals(first)


def test_notebook_03s_explorer_redraws_in_one_job(jobs):
    """Seed-sized inputs are interleaved and replayed in one partition, with no shuffle, the
    replay's task finding the watermark's rises in its rows: a new watermark delay or a new
    state TTL on the same streams runs only the chart's collect."""
    from datetime import datetime

    from kit import Clock, WatermarkStrategy
    from kit.joins import temporal_join

    orders_df, rates_df = kit.data.load("orders"), kit.data.load("currency_rates")

    def chart(delay, ttl):
        orders = kit.stream(orders_df, time="order_time",
                            watermark=WatermarkStrategy.for_sql_delay(Duration.of_minutes(delay)))
        rates = kit.stream(rates_df, time="update_time", primary_key="currency",
                           watermark=WatermarkStrategy.for_sql_delay(Duration(0)))
        join = temporal_join(orders, rates, on="currency", how="left", engine="replay",
                             clock=Clock(datetime(2024, 1, 1, 10), Duration.of_minutes(10)),
                             state_ttl=Duration.of_minutes(ttl) if ttl else None)
        return kit.viz.version_timeline(join, watermark_panel=False)

    jobs(lambda: chart(0, 0))                     # the inputs' first read
    assert jobs(lambda: chart(15, 0))[0] == 1, "a new delay: interleaved and replayed as the chart reads it"
    assert jobs(lambda: chart(15, 20))[0] == 1, "a new TTL: the chart, replaying the kept interleaving"


def test_match_recognize_reads_its_kept_matches_in_one_job_each(jobs):
    ticker = kit.data.load("ticker")
    query = """SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
               MEASURES FIRST(rowtime) AS s, LAST(rowtime) AS e ONE ROW PER MATCH
               AFTER MATCH SKIP PAST LAST ROW PATTERN (A+ C) DEFINE A AS SUM(A.price) < 30)"""
    n, result = jobs(lambda: kit.sql(query, Ticker=ticker))
    assert n == 1, "the matches kept (one task, no shuffle) and checked for errors in one job"
    n, rows = jobs(result.toPandas)
    assert n == 1 and len(rows) > 0
    n, details = jobs(result.match_details.toPandas)
    assert n == 1 and len(details) == ticker.count(), "kept with the matches: the matcher runs no more"


def test_notebook_02_pattern_explorer_redraws_in_three_jobs(jobs):
    """Notebook 02's widget: kit.sql, its rows, its details, and the chart drawn from them."""
    ticker = kit.data.load("ticker_after_match")

    def redraw(pattern):
        result = kit.sql(f"""SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
            MEASURES FIRST(rowtime) AS startTime, LAST(rowtime) AS endTime, COUNT(*) AS n ONE ROW PER MATCH
            AFTER MATCH SKIP TO NEXT ROW PATTERN ({pattern}) DEFINE A AS SUM(A.price) < 30)""", Ticker=ticker)
        found, details = result.toPandas(), result.match_details.toPandas()
        return found, kit.viz.match_timeline(details, value="price", time="rowtime", partition="symbol").to_dict()

    redraw("A+ C")
    for pattern in ("A B", "A+? C"):
        n, (found, _) = jobs(lambda: redraw(pattern))
        assert n == 3 and len(found) > 0


def test_the_same_pandas_frame_is_the_same_stream_until_it_changes(spark):
    import pandas as pd

    pdf = pd.DataFrame({"user": ["Mary", "Bob"], "t": [1, 2]})
    first = kit.stream(pdf, time="t")
    assert kit.stream(pdf, time="t") is first
    assert kit.stream(pdf.copy(), time="t") is not first, "another object"
    pdf.loc[1, "t"] = 5                                     # changed in place: read anew
    changed = kit.stream(pdf, time="t")
    assert changed is not first and [r.t for r in changed.df.collect()] == [1, 5]
    cells = pd.DataFrame({"t": [1], "tags": [["a"]]})      # unhashable cells: converted each time
    assert kit.stream(cells, time="t").df.count() == 1


def test_notebook_01_explorer_redraws_a_small_replay_in_one_job(jobs):
    """Notebook 01's widget: a small keyed stream replayed in Python in one operator (one
    task, no shuffle, its timer firings placed by the replay: no jobs to place them), then
    the chart's one collect of the kept replay and the arrivals, planned without adaptive
    execution (``sparksql.small_pandas``; with it, a job per branch reading the kept rows
    came first: three in all)."""
    from kit import Time
    from kit.windows import TumblingEventTimeWindows

    clicks = kit.data.load("clicks").toPandas()

    def redraw(size):
        stream = kit.stream(clicks, time="cTime", watermark=Duration.of_minutes(5))
        windowed = stream.key_by("user").window(TumblingEventTimeWindows.of(Time.minutes(size)))
        return kit.viz.window_timeline(windowed.process(lambda user, ctx, xs: [(len(list(xs)),)],
                                                        output_type="clicks bigint")).to_dict()

    redraw(60)
    for size in (45, 75):
        n, chart = jobs(lambda: redraw(size))
        assert n == 1 and chart["vconcat"]
