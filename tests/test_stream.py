"""The bounded-replay model: arrival order, watermarks, lateness, processing time."""

from datetime import datetime

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import kit
from kit import Clock, Duration, KitError, WatermarkStrategy

MIN = None  # the kit writes Flink's Long.MIN_VALUE watermark as NULL


def ms_stream(spark, times, partitions=1, **kw):
    """A stream of BIGINT millisecond timestamps, input order = list order."""
    df = spark.createDataFrame([(i, t) for i, t in enumerate(times)], "id long, ts long").coalesce(partitions)
    return kit.stream(df, time="ts", **kw)


def annotations(s, *cols):
    return [tuple(r) for r in s.df.select(*cols).collect()]


def test_equal_timestamps_are_never_late_but_older_ones_are(spark):
    # golden/README: with delay 0, after a@10 (watermark 9) an a@9 is late, a second a@10 is not
    s = ms_stream(spark, [10, 9, 10])
    assert annotations(s, "seq", "watermark", "late") == [(0, MIN, False), (1, 9, True), (2, 9, False)]


def test_bounded_out_of_orderness_subtracts_delay_and_one_millisecond(spark):
    s = ms_stream(spark, [1000, 3000, 1500, 1999, 2000, 5000, 2000],
                  watermark=WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(1000)))
    # max seen before each arrival: -, 1000, 3000, 3000, 3000, 3000, 5000
    assert annotations(s, "watermark", "late") == [
        (MIN, False), (-1, False), (1999, True), (1999, True), (1999, False), (1999, False), (3999, True)]


def test_sql_watermark_has_no_extra_millisecond(spark):
    s = ms_stream(spark, [10, 10, 7, 8], watermark=WatermarkStrategy.for_sql_delay(Duration.of_millis(2)))
    # watermark = max - 2: a tie with it is late (the CEP operator's rule in goldens)
    assert annotations(s, "watermark", "late") == [(MIN, False), (8, False), (8, True), (8, True)]


def test_duration_is_shorthand_for_bounded(spark):
    s = ms_stream(spark, [5, 1], watermark=Duration.of_millis(3))
    assert s.watermark == WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(3))
    assert annotations(s, "watermark", "late") == [(MIN, False), (1, True)]


def test_no_watermarks_makes_nothing_late(spark):
    s = ms_stream(spark, [5, 1, 3], watermark=WatermarkStrategy.no_watermarks())
    assert annotations(s, "watermark", "late") == [(MIN, False)] * 3


def test_punctuated_watermarks_from_a_column(spark):
    df = spark.createDataFrame([(1, 10, None), (2, 20, 15), (3, 14, None), (4, 16, 12), (5, 12, None)],
                               "id long, ts long, wm long")
    s = kit.stream(df, time="ts", watermark=WatermarkStrategy.from_column("wm"))
    assert annotations(s, "id", "watermark", "late") == [
        (1, MIN, False), (2, MIN, False), (3, 15, True), (4, 15, False), (5, 15, True)]


def test_clicks_hand_computed(spark):
    # seed 003's clicks (golden tumble_clicks.json input), arrival = file order
    clicks = kit.data.load("clicks")
    s = kit.stream(clicks, time="cTime", watermark=Duration.of_minutes(30))
    got = [(r.user, r.cTime.strftime("%H:%M:%S"), r.watermark and r.watermark.strftime("%H:%M:%S.%f")[:-3], r.late)
           for r in s.df.collect()]
    first = got[0][:2]
    assert first == ("Mary", "12:00:00")
    assert got[0][2:] == (None, False)
    # each later row sees max(earlier cTime) - 30 min - 1 ms; file order is time order: none late
    assert all(late is False for *_, late in got)
    assert [g[2] for g in got[1:4]] == ["11:29:59.999", "11:29:59.999", "11:31:59.999"]


def test_clicks_out_of_order_arrival_marks_late_rows(spark):
    # the same clicks arriving ordered by url: event time jumps back and forth
    clicks = kit.data.load("clicks")
    s = kit.stream(clicks, time="cTime", order="url", watermark=Duration.of_minutes(30))
    rows = s.df.toPandas()
    assert rows["url"].tolist() == sorted(rows["url"].tolist())
    # reference: a plain loop over arrival order
    wm, expect = None, []
    for t in rows["cTime"]:
        ms = int(t.timestamp() * 1000)
        expect.append((wm, wm is not None and ms <= wm))
        wm = max(wm if wm is not None else -(2**63), ms - 30 * 60_000 - 1)
    got = [(None if pd.isna(w) else int(w.timestamp() * 1000), late)
           for w, late in zip(rows["watermark"], rows["late"])]
    assert got == expect
    assert rows["late"].sum() > 0


def test_order_ties_keep_input_order(spark):
    df = spark.createDataFrame([("a", 2, 1), ("b", 1, 2), ("c", 2, 3), ("d", 1, 4)], "k string, o int, ts long")
    s = kit.stream(df, time="ts", order="o")
    assert annotations(s, "k", "seq") == [("b", 0), ("d", 1), ("a", 2), ("c", 3)]


def test_clock_gives_each_arrival_a_processing_time(spark):
    s = ms_stream(spark, [1, 2, 3], proctime=Clock("2024-01-01 12:00:00", Duration.of_minutes(10)))
    assert [r.proctime for r in s.df.collect()] == [
        datetime(2024, 1, 1, 12, 0), datetime(2024, 1, 1, 12, 10), datetime(2024, 1, 1, 12, 20)]


def test_proctime_column_never_goes_back(spark):
    pdf = pd.DataFrame({"ts": [1, 2, 3], "wall": pd.to_datetime(
        ["2024-01-01 12:00:05", "2024-01-01 12:00:01", "2024-01-01 12:00:09"])})
    s = kit.stream(pdf, time="ts", proctime="wall")
    assert [r.proctime.second for r in s.df.collect()] == [5, 5, 9]


def test_pandas_input_and_timestamp_columns(spark):
    pdf = pd.DataFrame({"k": ["x", "y"], "t": pd.to_datetime(["2024-01-01 00:00:01", "2024-01-01 00:00:00"])})
    s = kit.stream(pdf, time="t")
    rows = s.df.collect()
    assert rows[1].watermark == datetime(2024, 1, 1, 0, 0, 0, 999000)
    assert rows[1].late is True
    assert s.df.columns == ["k", "t", "seq", "watermark", "late"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(time="nope"), "time column 'nope' is not a column"),
    (dict(time="k"), "must be TIMESTAMP or BIGINT"),
    (dict(time="ts", order=["zz"]), "order column 'zz' is not a column"),
    (dict(time="ts", watermark=5), r"kit.stream: watermark must be a WatermarkStrategy, Duration or timedelta, "
                                   r"e.g. Duration.of_seconds\(5\) or Duration.of_millis\(5\); not the int 5"),
    (dict(time="ts", proctime=3), "proctime must be a column name or a Clock"),
    (dict(time="ts", proctime="k"), "proctime column 'k' must be TIMESTAMP"),
    (dict(watermark=Duration.of_seconds(1)), "a watermark needs an event time: pass time="),
])
def test_bad_arguments_say_what_to_fix(spark, kwargs, message):
    df = spark.createDataFrame([("a", 1)], "k string, ts long")
    with pytest.raises(KitError, match=message):
        kit.stream(df, **kwargs)


RESERVED = ("seq", "watermark", "late", "proctime")


@pytest.mark.parametrize("name", RESERVED)
@pytest.mark.parametrize("jvm", [True, False], ids=["jvm-scan", "sql-scan"])
def test_input_columns_named_like_the_streams_own_keep_their_names(spark, name, jvm):
    """Flink reserves no names: the input's column stays, the stream's own is renamed
    ``kit_<name>`` (``s.kit_columns``), in both scans; ``unordered()`` keeps the stream's
    names for the operators, the input's under ``s.inner(name)``."""
    df = spark.createDataFrame([("x", 10), ("y", 9), ("z", 11)], f"{name} string, ts long").coalesce(1)
    s = kit.stream(df, time="ts", proctime=Clock("2024-01-01", Duration.of_seconds(1)))
    if not jvm:
        s.__dict__["arrivals"] = None
    own = {c: ("kit_" + c if c == name else c) for c in RESERVED}
    assert s.kit_columns == own and s.inner(name) == "__in_" + name
    assert s.df.columns == [name, "ts", *own.values()]
    rows = s.df.select(name, own["seq"], own["watermark"], own["late"]).collect()
    assert [tuple(r) for r in rows] == [("x", 0, MIN, False), ("y", 1, 9, True), ("z", 2, 9, False)]
    assert {"seq", "watermark", "late", "proctime", "__in_" + name} <= set(s.unordered().columns)


def test_a_proctime_column_named_proctime_is_the_streams_own(spark):
    df = spark.createDataFrame([(1, datetime(2024, 1, 1, 0, 0, 5)), (2, datetime(2024, 1, 1))], "ts long, proctime timestamp")
    s = kit.stream(df, time="ts", proctime="proctime")
    assert s.kit_columns["proctime"] == "proctime" and s.df.columns == ["ts", "seq", "watermark", "late", "proctime"]
    assert [r.proctime for r in s.df.collect()] == [datetime(2024, 1, 1, 0, 0, 5)] * 2   # never goes back


@pytest.mark.parametrize("name", RESERVED)
def test_time_columns_named_like_the_streams_own_say_what_to_rename(spark, name):
    df = spark.createDataFrame([(1, 2)], f"{name} long, w long")
    with pytest.raises(KitError, match=f"the time column '{name}' has the name of a column the stream adds"):
        kit.stream(df, time=name)
    if name != "proctime":
        with pytest.raises(KitError, match=f"the watermark column '{name}'"):
            kit.stream(df.withColumnRenamed("w", "ts").withColumnRenamed(name, name), time="ts",
                       watermark=WatermarkStrategy.from_column(name))


@pytest.mark.parametrize("name", RESERVED)
def test_operators_that_read_the_streams_own_columns_name_the_one_to_rename(spark, name):
    """SQL (and MATCH_RECOGNIZE, dynamic tables and temporal joins through it), joins and the
    stream's charts read ``seq``, ``watermark``, ... by name: they refuse such a stream,
    saying which input column to rename; windows take it (tests/test_window_flink_goldens.py)."""
    from kit.joins import interval_join
    from kit.joins.interval import IntervalBounds
    from kit.time import Time
    from kit.viz import stream_timeline

    df = spark.createDataFrame([("a", 1, 5)], f"{name} string, ts long, v long")
    s = kit.stream(df, time="ts", proctime=Clock("2024-01-01", Duration.of_seconds(1)))
    fix = rf"rename the input's first, e.g. df.withColumnRenamed\('{name}', '{name}_in'\)"
    for run in (lambda: kit.sql("SELECT * FROM t", t=s),
                lambda: kit.sql("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.v AS v PATTERN (A) "
                                "DEFINE A AS v > 0)", t=s),
                lambda: interval_join(s, s, on=[("v", "v")], bounds=IntervalBounds(Time.milliseconds(-1), Time.milliseconds(1))),
                lambda: stream_timeline(s)):
        with pytest.raises(KitError, match=rf"\[{name!r}\] by name.*kit_{name}.*" + fix):
            run()


@pytest.mark.parametrize("make, message", [
    (lambda: WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(-1)), ">= 0 ms"),
    (lambda: WatermarkStrategy.for_bounded_out_of_orderness(5), "max_out_of_orderness must be a Time, Duration"),
    (lambda: Clock("2024-01-01", Duration(0)), "step must be > 0 ms"),
])
def test_bad_time_parameters(make, message):
    with pytest.raises(KitError, match=message):
        make()


def test_null_event_time_is_an_error_naming_the_row(spark):
    df = spark.createDataFrame([(1,), (None,)], "ts long")
    with pytest.raises(Exception, match="row seq=1 has NULL event time in column 'ts'"):
        kit.stream(df, time="ts").df.collect()


@pytest.mark.parametrize("time_type", ["timestamp", "bigint"])
def test_null_event_time_fails_every_query_over_the_stream(spark, time_type):
    """Flink fails the job on a row without an event time; so does every query over the
    stream, naming the user's column, whichever columns it reads (issue 47 item 2)."""
    first = "2024-01-01 00:00:01" if time_type == "timestamp" else "1000"
    df = spark.createDataFrame([("Mary", "/a", first), ("Bob", "/b", None)], "user string, url string, t string")
    s = kit.stream(df.selectExpr("user", "url", f"CAST(t AS {time_type}) AS t"), time="t")
    queries = ["SELECT user, COUNT(url) AS c FROM s GROUP BY user", "SELECT DISTINCT user FROM s", "SELECT user, url FROM s",
               "SELECT * FROM (SELECT user, url, ROW_NUMBER() OVER (PARTITION BY user ORDER BY url) AS rn FROM s) "
               "WHERE rn <= 1",
               "SELECT * FROM (SELECT user, url, t, ROW_NUMBER() OVER (PARTITION BY user ORDER BY t) AS rn FROM s) "
               "WHERE rn = 1",
               "SELECT a.user FROM s a JOIN s b ON a.user = b.user",
               "SELECT user, COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(t), INTERVAL '1' SECOND)) "
               "GROUP BY user, window_start, window_end"]
    for query in queries:
        with pytest.raises(KitError, match="has NULL event time in column 't'; Flink rejects such rows"):
            result = kit.sql(query, s=s)   # (a window's fast path reads the stream here)
            (result.changelog() if hasattr(result, "changelog") else result).collect()


def test_reprs_read_like_constructor_calls():
    assert repr(Duration.of_minutes(90)) == "Duration.of_minutes(90)"
    assert repr(kit.Time.hours(-8)) == "Duration.of_hours(-8)"
    assert repr(WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))) == \
        "WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))"
    assert repr(WatermarkStrategy.for_monotonous_timestamps()) == "WatermarkStrategy.for_monotonous_timestamps()"


def reference(times, delay):
    """The watermark each arrival sees, by a plain loop (Flink: max - delay - 1)."""
    out, top = [], None
    for t in times:
        wm = None if top is None else top - delay - 1
        out.append((wm, wm is not None and t <= wm))
        top = t if top is None else max(top, t)
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(times=st.lists(st.integers(-50, 200), min_size=1, max_size=40),
       delay=st.integers(0, 30), partitions=st.integers(1, 5))
def test_parallel_scan_equals_sequential_loop(spark, times, delay, partitions):
    # input order = id order whatever the partitioning: the scan must not depend on it
    df = (spark.range(0, len(times), numPartitions=partitions)
               .withColumn("ts", F.element_at(F.array(*[F.lit(t) for t in times]), F.col("id").cast("int") + 1)))
    s = kit.stream(df, time="ts", watermark=Duration.of_millis(delay))
    assert annotations(s, "seq", "id", "watermark", "late") == [
        (i, i, *r) for i, r in enumerate(reference(times, delay))]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(times=st.lists(st.integers(0, 100), min_size=2, max_size=30), partitions=st.integers(1, 4))
def test_explicit_order_survives_repartitioning(spark, times, partitions):
    df = spark.createDataFrame(list(enumerate(times)), "arrival long, ts long").repartition(partitions)
    s = kit.stream(df, time="ts", order="arrival", watermark=Duration.of_millis(5))
    assert annotations(s, "arrival", "watermark", "late") == [(i, *r) for i, r in enumerate(reference(times, 5))]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(times=st.lists(st.integers(-50, 200), min_size=0, max_size=30),
       partitions=st.integers(1, 4),
       watermark=st.sampled_from(["bounded", "sql", "column", "monotonous", "none"]),
       proctime=st.sampled_from([None, "clock", "column"]),
       own=st.lists(st.integers(-60, 210), max_size=6), pts=st.lists(st.integers(0, 60), max_size=6))
def test_the_jvm_arrival_scan_equals_the_sql_scan(spark, times, partitions, watermark, proctime, own, pts):
    """``Stream.arrivals``: seq, watermark met and processing time of every row, and the
    first arrival at or above each threshold, as Spark SQL's scan and the Python lookup give
    them, over input partitions in order (some empty), NULL watermarks (a NULL time fails the
    query: test_null_event_time_fails_every_query_over_the_stream)."""
    from kit.windows.placement import first_at_least
    at = F.col("id").cast("int") + 1
    df = (spark.range(0, len(times), numPartitions=partitions)
          .withColumn("ts", F.element_at(F.array(F.lit(None).cast("long"), *[F.lit(t) for t in times]), at + 1))
          .withColumn("wm", F.when(F.col("id") % 3 == 0, F.col("ts") - 4))
          .withColumn("p", F.timestamp_millis(F.when(F.col("id") % 4 != 1, (F.col("id") * 7) % 50))))
    strategies = {"bounded": Duration.of_millis(3), "sql": WatermarkStrategy.for_sql_delay(Duration.of_millis(2)),
                  "column": WatermarkStrategy.from_column("wm"), "monotonous": None,
                  "none": WatermarkStrategy.no_watermarks()}
    clock = {"clock": Clock(datetime(2024, 1, 1), Duration.of_millis(5)), "column": "p", None: None}[proctime]
    s = kit.stream(df, time="ts", watermark=strategies[watermark], proctime=clock)
    scan = s.arrivals
    assert scan is not None and scan.count == len(times)
    pt = F.unix_millis("proctime") if clock is not None else F.lit(None).cast("long")
    sql = s.unordered().select("id", "seq", F.col("ts").alias("_ts"), F.col("watermark").alias("_wm"), pt.alias("_pt"))
    assert scan.rows(["id"]).orderBy("seq").collect() == sql.orderBy("seq").collect()
    start = 1704067200000 if proctime == "clock" else 0
    grids = {"own": own, "pt": [start + t for t in pts]}
    by_sql = s.unordered().select("seq", s.own_watermark().alias("own"), s.millis("watermark").alias("before"),
                                  pt.alias("pt"))
    assert first_at_least(scan, grids) == first_at_least(by_sql, grids)


def test_a_source_that_changes_between_the_jvm_scans_passes_is_an_error(spark, tmp_path):
    log = tmp_path / "clicks.csv"
    log.write_text("".join(f"{i}\n" for i in range(200)))
    scan = kit.stream(spark.read.csv(str(log), schema="ts long"), time="ts").arrivals
    log.write_text("".join(f"{i}\n" for i in range(150)))   # the file changes under the stream
    with pytest.raises(Exception, match="input partition 0 changed between the stream's passes"):
        scan.rows([]).collect()


@pytest.mark.parametrize("name", RESERVED)
def test_windows_read_the_streams_own_columns_beside_the_inputs(spark, name):
    """A processing-time window keyed by an input column named like one the stream adds:
    the window's clock is the stream's own ``proctime`` (``kit_proctime`` in ``df``), its
    key the input's column."""
    from kit.time import Time
    from kit.windows.assigners import TumblingProcessingTimeWindows
    from kit.windows.functions import Count

    df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3), ("a", 4)], f"{name} string, ts long").coalesce(1)
    s = kit.stream(df, time="ts", proctime=Clock("2024-01-01", Duration.of_seconds(1)))
    result = s.key_by(name).window(TumblingProcessingTimeWindows.of(Time.seconds(2))).aggregate(Count())
    start = 1_704_067_200_000   # the clock's 2024-01-01, epoch ms (the stream's time is BIGINT ms)
    rows = [(r.key, (r.window_start - start) // 1000, r["count"]) for r in result.df.collect()]
    assert rows == [("a", 0, 1), ("b", 0, 1)]   # [2 s, 4 s) is pending: the clock stops at the end
    assert [r[name] for r in result.elements().collect()] == ["a", "b", "a", "a"]


def test_a_stream_without_event_time(spark):
    """``kit.stream(df)``: arrival order alone, as a Flink table without a time attribute: no
    watermark, nothing late; continuous queries run on it, what needs event time says so."""
    from kit.joins.interval import IntervalBounds, interval_join
    from kit.windows import TumblingEventTimeWindows

    df = spark.createDataFrame([("a", 2), ("b", 1), ("a", 3)], "k string, v long")
    s = kit.stream(df, order="v")
    assert annotations(s, "k", "seq", "watermark", "late") == [("b", 0, MIN, False), ("a", 1, MIN, False),
                                                                ("a", 2, MIN, False)]
    counts = kit.sql("SELECT k, COUNT(*) AS c FROM s GROUP BY k", s=s)
    assert counts.changelog().columns == ["seq", "op", "k", "c"]   # no watermark: the stream has none
    assert [tuple(r) for r in counts.changelog().collect()] == [
        (0, "+I", "b", 1), (1, "+I", "a", 1), (2, "-U", "a", 1), (2, "+U", "a", 2)]
    with pytest.raises(KitError, match="Record has Long.MIN_VALUE timestamp"):
        s.key_by("k").window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
    with pytest.raises(KitError, match="the left stream has none"):
        interval_join(s, s, "k", IntervalBounds(Duration.of_seconds(-1), Duration.of_seconds(0)))
    with pytest.raises(KitError, match="stream_timeline draws rows by event time"):
        kit.viz.stream_timeline(s)
