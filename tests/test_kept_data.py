"""What an operator keeps in Spark (a read order, a join's interleaving, a window's or a
match's kept rows) goes when its result goes, though the input DataFrame lives on; a
``Stream.holding`` block (a widget's redraw) keeps it for the next redraw to read."""

import gc
import importlib
import time

import pytest

import kit
from kit.windows import Sum, TumblingEventTimeWindows

stream_module = importlib.import_module("kit.stream")


@pytest.fixture(scope="module")
def frames(spark):
    rows = [(f"k{i % 5}", i, f"2024-01-01 00:00:{i % 60:02d}") for i in range(60)]
    df = spark.createDataFrame(rows, "k string, v int, t string").selectExpr("k", "v", "CAST(t AS TIMESTAMP) AS t")
    return {"df": df, "shuffled": df.repartition(3, "v")}


def _persisted(spark) -> set:
    return set(spark.sparkContext._jsc.getPersistentRDDs().keySet())


def _released(spark, ids: set) -> bool:
    """Whether the RDDs ``ids`` are gone once Python and the JVM collected their garbage
    (Spark's ContextCleaner unpersists an RDD the JVM no longer reaches)."""
    for _ in range(60):
        gc.collect()
        spark._jvm.System.gc()
        if not ids & _persisted(spark):
            return True
        time.sleep(0.25)
    return False


GROUP = "SELECT k, COUNT(*) AS n FROM s GROUP BY k"
FAMILIES = {
    "group by": lambda f: kit.sql(GROUP, s=kit.stream(f["df"], time="t")).changelog(),
    "an input read in order=": lambda f: kit.sql(GROUP, s=kit.stream(f["shuffled"], time="t", order="v")).changelog(),
    "a shuffled input": lambda f: kit.sql(GROUP, s=kit.stream(f["shuffled"], time="t")).changelog(),
    "Top-N": lambda f: kit.sql("SELECT * FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn "
                               "FROM s) WHERE rn <= 2", s=kit.stream(f["df"], time="t")).changelog(),
    "regular join": lambda f: kit.sql("SELECT l.k, r.v FROM s l JOIN s r ON l.k = r.k",
                                      s=kit.stream(f["df"], time="t")).changelog(),
    "interval join": lambda f: kit.sql("SELECT l.k FROM s l JOIN s r ON l.k = r.k AND l.t BETWEEN "
                                       "r.t - INTERVAL '1' SECOND AND r.t", s=kit.stream(f["df"], time="t")),
    "temporal join": lambda f: kit.sql("SELECT l.k, r.v FROM s l JOIN r FOR SYSTEM_TIME AS OF l.t ON l.k = r.k",
                                       s=kit.stream(f["df"], time="t"),
                                       r=kit.stream(f["df"], time="t", primary_key="k")),
    "MATCH_RECOGNIZE": lambda f: kit.sql(
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY t MEASURES A.v AS av ONE ROW PER MATCH "
        "PATTERN (A B) DEFINE B AS B.v > A.v)", s=kit.stream(f["df"], time="t")),
    "window TVF": lambda f: kit.sql("SELECT k, window_start, SUM(v) AS total FROM TABLE(TUMBLE(TABLE s, "
                                    "DESCRIPTOR(t), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end",
                                    s=kit.stream(f["df"], time="t")),
    "DataStream window": lambda f: kit.stream(f["df"], time="t").key_by("k").window(
        TumblingEventTimeWindows.of(kit.Time.seconds(10))).aggregate(Sum("v")).df,
}


@pytest.mark.parametrize("family", FAMILIES.values(), ids=list(FAMILIES))
def test_kept_data_goes_with_its_result(spark, frames, family):
    before = _persisted(spark)
    result = family(frames)
    assert result.count() > 0
    kept = _persisted(spark) - before
    del result
    assert _released(spark, kept)
    gc.collect()
    assert not any(stream_module._STREAMS.get(df) for df in frames.values()), "no Stream outlives its results"


def test_a_held_stream_keeps_its_read_order_for_the_next_redraw(spark, frames):
    before = _persisted(spark)
    with kit.Stream.holding() as held:
        first = kit.stream(frames["shuffled"], time="t", order="v")
    kept = _persisted(spark) - before
    assert held == [first] and kept, "the order read once, kept"
    del first
    gc.collect()
    again = kit.stream(frames["shuffled"], time="t", order="v")
    assert again is held[0] and _persisted(spark) - before == kept, "read again: no second sort"
    del again, held
    assert _released(spark, kept)
