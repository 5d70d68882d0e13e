"""What a widget redraw costs in Spark jobs (each ~0.05–0.2 s here even on ten rows): the
same input replayed again is not ordered or scanned again, and the annotated stream is read
in one pass with no sort."""

import pytest
from pyspark.sql import functions as F

import kit
from kit import Duration


@pytest.fixture
def jobs(spark):
    """``jobs(fn)``: the Spark jobs ``fn()`` ran (all groups), and its result."""
    sc = spark.sparkContext

    def count(fn):
        group = "test-redraw-jobs"
        sc.setJobGroup(group, "counted")
        try:
            before = set(sc.statusTracker().getJobIdsForGroup(group))
            result = fn()
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
