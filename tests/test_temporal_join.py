"""Temporal joins: the operators' rules (pure Python), the Flink 2.3 golden, SQL and its errors."""

import itertools
import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

import kit
from kit import Clock, Duration, WatermarkStrategy
from kit.replay.interleave import LEFT, MAX_TIME, RIGHT, Arrival, replay
from kit.joins.temporal import StateRetention, event_time_join, processing_time_join
from kit.joins.versioned import TemporalTableFunction, temporal_join
from kit.stream import epoch_ms

GOLDEN = json.loads((Path(__file__).parents[2] / "shared/golden/flink-2.3/temporal_join.json").read_text())
SQL0 = WatermarkStrategy.for_sql_delay(Duration(0))
NONE = WatermarkStrategy.no_watermarks()


def ms(text):
    return epoch_ms(datetime.fromisoformat(text))


def golden_inputs():
    rates = [(ms(t), (c, r)) for t, c, r in GOLDEN["rates_file_order"]]
    orders = [(ms(t), (oid, c)) for t, oid, c, _ in GOLDEN["orders_file_order"]]
    return orders, rates


def emitted(arrivals, W, how="left", key=lambda a: a.row[1] if a.side == 0 else a.row[0], **kw):
    """Every key's emissions in Flink's order: ``order_id=rate`` as the golden writes them."""
    rows = []
    for k in sorted({key(a) for a in arrivals}):
        for e in event_time_join([a for a in arrivals if key(a) == k], W, how, **kw).emitted:
            rows.append(((e.pos, e.timer, e.left.pos), f"{e.left.row[0]}={e.right.row[1] if e.right else None}"))
    return " ".join(r for _, r in sorted(rows))


def outcomes(delay_minutes):
    orders, rates = golden_inputs()
    found = Counter()
    for rights in itertools.combinations(range(len(orders) + len(rates)), len(rates)):
        sides = "".join("R" if p in rights else "L" for p in range(len(orders) + len(rates)))
        arrivals, W = replay(orders, rates, sides, SQL0, WatermarkStrategy.for_sql_delay(Duration.of_minutes(delay_minutes)))
        found[emitted(arrivals, W)] += 1
    return found


def test_golden_every_interleaving_gives_flinks_rows_when_the_delay_covers_the_disorder():
    expected = GOLDEN["repeats"][0]
    assert expected["rates_watermark_delay_min"] == "60"
    assert set(outcomes(60)) == set(expected["outcomes_order_id_eq_rate_in_emission_order"])


def test_golden_each_result_flink_gave_with_late_versions_comes_from_some_interleaving():
    expected = GOLDEN["repeats"][1]
    assert expected["rates_watermark_delay_min"] == "0"
    found = outcomes(0)
    for outcome in expected["outcomes_order_id_eq_rate_in_emission_order"]:
        assert found[outcome] > 0, outcome
    assert len(found) > len(expected["outcomes_order_id_eq_rate_in_emission_order"])   # and a few Flink did not hit


def test_the_version_at_the_left_time_counts_and_a_later_arrival_with_the_same_time_wins():
    arrivals, W = replay([(10, "l")], [(10, "a"), (10, "b"), (11, "c")], "RRRL", NONE, NONE)
    [e] = event_time_join(arrivals, W).emitted
    assert (e.right.row, e.pos, e.watermark) == ("b", 4, MAX_TIME)      # end of input
    fates = {f.arrival.row: f.fate for f in event_time_join(arrivals, W).fates}
    assert fates == {"l": "joined", "a": "replaced", "b": "cleaned", "c": "kept"}   # the end cleans too


def test_left_rows_wait_for_the_operator_watermark_then_leave_in_arrival_order():
    # left 20 and 15 wait; the right side's watermark (min of both) releases them at once
    arrivals, W = replay([(20, "x"), (15, "y"), (30, "z")], [(5, "v"), (25, "w")], "RLLLR", SQL0, SQL0)
    out = event_time_join(arrivals, W, "left").emitted
    assert [(e.left.row, e.right.row, e.pos, e.watermark) for e in out] == [
        ("x", "v", 4, 25), ("y", "v", 4, 25), ("z", "w", 5, MAX_TIME)]


def test_cleanup_keeps_the_newest_version_at_or_before_the_watermark_and_a_late_left_row_meets_that():
    # versions 10, 20, 30; watermark 25 cleans 10 (20 stays: newest <= 25); a late left row at 12
    # then finds no version <= 12 and is padded with NULL, though 10 was valid at 12
    arrivals, W = replay([(25, "a"), (12, "late")], [(10, "v10"), (20, "v20"), (30, "v30")], "RRRLL", SQL0, SQL0)
    result = event_time_join(arrivals, W, "left")
    assert [(e.left.row, e.right and e.right.row) for e in result.emitted] == [("a", "v20"), ("late", None)]
    fates = {f.arrival.row: (f.fate, f.at) for f in result.fates}
    assert fates["v10"] == ("cleaned", 25) and fates["late"] == ("no_version", MAX_TIME)
    assert fates["v20"][0] == "cleaned" and fates["v30"][0] == "kept"    # the end cleans up to 30 too
    assert event_time_join(arrivals, W, "inner").emitted[-1].left.row == "a"   # INNER drops it


def test_a_late_version_still_serves_left_rows_not_yet_emitted():
    # the right input's own watermark is 30 when version 15 comes: late, yet left row 20, held
    # back by its own input's watermark, uses it
    arrivals, W = replay([(20, "l")], [(30, "v30"), (15, "v15")], "LRR", NONE, SQL0)
    assert arrivals[2].late
    [e] = event_time_join(arrivals, W).emitted
    assert e.right.row == "v15"


def test_a_deletion_as_version_means_no_version():
    arrivals, W = replay([(5, "l1"), (15, "l2")], [(0, "v0", "+I"), (10, "gone", "-D")], "RRLL", NONE, NONE)
    left = event_time_join(arrivals, W, "left")
    assert [(e.left.row, e.right and e.right.row) for e in left.emitted] == [("l1", "v0"), ("l2", None)]
    assert [f.fate for f in left.fates if f.arrival.side == 0] == ["joined", "deleted"]
    assert [e.left.row for e in event_time_join(arrivals, W, "inner").emitted] == ["l1"]


def test_the_join_condition_applies_to_the_version_met():
    arrivals, W = replay([(5, 1), (6, 100)], [(0, 50)], "RLL", NONE, NONE)
    out = event_time_join(arrivals, W, "left", condition=lambda l, r: l < r).emitted
    assert [(e.left.row, e.right and e.right.row) for e in out] == [(1, 50), (100, None)]


def test_state_retention_registers_at_now_plus_max_and_moves_only_when_now_plus_min_passes_it():
    # the seed's picture: ttl 2 h -> min 2 h, max 3 h; rows at 10:00, 10:30, 11:30 (processing time)
    hour = 3_600_000
    from kit.joins.temporal import _Retention
    ttl = _Retention(StateRetention(Duration.of_hours(2)))
    ttl.register(10 * hour)
    assert ttl.registered == 13 * hour
    ttl.register(10 * hour + hour // 2)                   # 10:30 + 2 h = 12:30 <= 13:00: stays
    assert ttl.registered == 13 * hour
    ttl.register(11 * hour + hour // 2)                   # 11:30 + 2 h = 13:30 > 13:00: moves to 14:30
    assert ttl.registered == 14 * hour + hour // 2 and ttl.timers == {ttl.registered}
    assert ttl.due(14 * hour) == [] and ttl.due(15 * hour) == [14 * hour + hour // 2]
    assert not _Retention(StateRetention(Duration(1))).on   # ttl must exceed 1 ms


def test_expired_state_loses_left_rows_that_were_waiting():
    # a clock of 1 min per arrival, ttl 2 min (max 3 min): the key's left row waits for a
    # watermark that other keys' rows raise only after the key's state expired
    clock = Clock(datetime(2024, 1, 1), Duration.of_minutes(1))
    arrivals, W = replay([(100, "l")], [(50, "v"), (60, "w"), (70, "x"), (80, "y"), (200, "z")], "LRRRRR",
                         SQL0, SQL0, clock=clock)
    mine = arrivals[:2]
    result = event_time_join(mine, W, "left", retention=StateRetention(Duration.of_minutes(2)))
    assert result.emitted == []
    assert [(f.arrival.row, f.fate) for f in result.fates] == [("l", "expired"), ("v", "expired")]
    assert result.expirations == [(epoch_ms(datetime(2024, 1, 1)) + 3 * 60_000, 5)]
    kept = event_time_join(mine, W, "left")
    assert [(e.left.row, e.right.row, e.pos) for e in kept.emitted] == [("l", "v", 5)]


def test_processing_time_join_misses_a_right_row_that_arrives_just_after():
    arrivals, _ = replay([(0, "l1"), (0, "l2")], [(0, "v1"), (0, "v2")], "LRLR", NONE, NONE)
    out = processing_time_join(arrivals, "left").emitted
    assert [(e.left.row, e.right and e.right.row, e.pos) for e in out] == [("l1", None, 0), ("l2", "v1", 2)]
    assert [e.left.row for e in processing_time_join(arrivals, "inner").emitted] == ["l2"]


def test_processing_time_join_forgets_on_deletion_and_on_expiry():
    clock = Clock(datetime(2024, 1, 1), Duration.of_minutes(1))
    arrivals, _ = replay([(0, "a"), (0, "b"), (0, "c")], [(0, "v", "+I"), (0, "v", "-D"), (0, "w", "+I")],
                         "RLRLRL", NONE, NONE, clock=clock)
    assert [(e.left.row, e.right and e.right.row) for e in processing_time_join(arrivals, "left").emitted] == [
        ("a", "v"), ("b", None), ("c", "w")]
    # ttl 30 min (max 45 min): the rate seen at 10:00 serves a left row at 10:40, not one at 10:50
    at = lambda m: epoch_ms(datetime(2024, 1, 1, 10)) + m * 60_000
    arrivals = [Arrival(0, RIGHT, 0, 0, "v", proctime=at(0)), Arrival(1, LEFT, 0, 0, "a", proctime=at(20)),
                Arrival(2, LEFT, 1, 0, "b", proctime=at(40)), Arrival(3, LEFT, 2, 0, "c", proctime=at(90))]
    result = processing_time_join(arrivals, "left", retention=StateRetention(Duration.of_minutes(30)))
    # 10:00 -> timer 10:45; 10:20 + 30 = 10:50 > 10:45 -> 11:05; 10:40 + 30 = 11:10 > 11:05 -> 11:25
    assert [(e.left.row, e.right and e.right.row) for e in result.emitted] == [("a", "v"), ("b", "v"), ("c", None)]
    assert result.expirations == [(at(85), 3)]


def test_bad_arguments_say_what_to_fix():
    with pytest.raises(kit.KitError, match="INNER or LEFT"):
        event_time_join([], None, "right")
    with pytest.raises(kit.KitError, match=r"StateRetention: ttl must be a Time, Duration or timedelta, "
                                           r"e.g. Duration.of_seconds\(5\) or Duration.of_millis\(5\); not the int 5"):
        StateRetention(5)
    with pytest.raises(kit.KitError, match="state_ttl must be a Duration >= 0"):
        StateRetention(Duration.of_millis(-1))
    with pytest.raises(kit.KitError, match="sides must hold 1 L and 0 R"):
        replay([(1, "a")], [], "R", NONE, NONE)


# -- on Spark -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def golden_streams(spark):
    rates = pd.DataFrame(GOLDEN["rates_file_order"], columns=GOLDEN["rates_columns"])
    rates["update_time"] = pd.to_datetime(rates.update_time)
    rates["rate"] = rates.rate.astype(float)
    orders = pd.DataFrame(GOLDEN["orders_file_order"], columns=GOLDEN["orders_columns"])
    orders["order_time"] = pd.to_datetime(orders.order_time)
    return spark.createDataFrame(orders), spark.createDataFrame(rates)


def rows_of(run):
    return sorted((o, t.replace(".000", ""), c, None if r is None else float(r)) for o, t, c, r in
                  (row["values"] for row in run["rows"]))


def collected(df):
    return sorted((r.order_id, str(r.order_time), r.currency, r.rate) for r in df.collect())


@pytest.mark.parametrize("run", [0, 2])
def test_golden_sql(golden_streams, run):
    orders, rates = golden_streams
    spec = GOLDEN["runs"][run]
    o = kit.stream(orders, time="order_time", watermark=SQL0)
    r = kit.stream(rates, time="update_time", watermark=WatermarkStrategy.for_sql_delay(Duration.of_minutes(60)),
                   primary_key="currency")
    result = kit.sql(spec["query"], orders=o, currency_rates=r)
    assert result.columns == spec["columns"]
    assert collected(result) == rows_of(spec)
    assert result.temporal_joins[0].fast                 # no late row: the as-of path


def test_golden_sql_with_late_versions_replays_the_interleaving_asked_for(golden_streams):
    orders, rates = golden_streams
    spec = GOLDEN["runs"][1]
    o = kit.stream(orders, time="order_time", watermark=SQL0)
    r = kit.stream(rates, time="update_time", watermark=SQL0, primary_key="currency")
    # every rate first: the run Flink gave when the rates' reader was ahead
    result = kit.sql(spec["query"], config={"kit.join.interleave": "right_first"}, orders=o, currency_rates=r)
    assert not result.temporal_joins[0].fast
    assert collected(result) == rows_of(GOLDEN["runs"][0])
    # by event time (the default), o3 misses the late 10:15 version and o5 the late 10:45 one
    by_time = {row[0]: row[3] for row in collected(kit.sql(spec["query"], orders=o, currency_rates=r))}
    assert (by_time["o3"], by_time["o5"]) == (1.1, 1.3)


def test_fast_path_and_replay_agree(golden_streams):
    orders, rates = golden_streams
    o = kit.stream(orders, time="order_time", watermark=SQL0)
    r = kit.stream(rates, time="update_time", watermark=WatermarkStrategy.for_sql_delay(Duration.of_minutes(60)),
                   primary_key="currency")
    fast = temporal_join(o, r, on="currency", how="left", engine="fast").df
    slow = temporal_join(o, r, on="currency", how="left", engine="replay")
    assert fast.collect() == slow.df.collect()
    assert fast.columns == ["order_time", "order_id", "currency", "amount", "update_time", "rate"]
    emitted = slow.emissions().collect()
    assert [row.left["order_id"] for row in emitted] == [f"o{i}" for i in range(1, 10)]
    assert [row.watermark for row in emitted][-2:] == [None, None]      # end of input


@pytest.mark.parametrize("name", ["_ts", "_g", "_seq", "_k0", "_vr", "_op"])
@pytest.mark.parametrize("engine", ["fast", "replay"])
def test_columns_named_like_the_joins_working_columns_join_by_their_values(spark, name, engine):
    """The join names its working columns with a ``_`` first (``_ts``, ``_g``, ``_k0``...): a
    key named like one joins by its own values (before: the fast path silently joined by the
    event time or the watermark, the replay could not resolve it)."""
    ms = lambda *t: pd.to_datetime(list(t), unit="ms")   # noqa: E731
    left = kit.stream(pd.DataFrame({name: ["a", "b", "a"], "t": ms(10, 20, 30), "v": [1, 2, 3]}), time="t",
                      watermark=Duration.of_millis(1))
    right = kit.stream(pd.DataFrame({name: ["a", "b", "a"], "t": ms(0, 0, 25), "rate": [10, 20, 11]}), time="t",
                       watermark=Duration.of_millis(1), primary_key=name)
    rows = temporal_join(left, right, on=name, how="left", engine=engine).df.collect()
    assert [(r[0], r.v, r.rate) for r in rows] == [("a", 1, 10), ("b", 2, 20), ("a", 3, 11)]


@pytest.mark.parametrize("query, at, message", [
    ("SELECT * FROM orders o RIGHT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency",
     "RIGHT", "Temporal table join currently only supports INNER and LEFT JOIN, not RIGHT JOIN"),
    ("SELECT * FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.amount AS r ON o.currency = r.currency",
     "o.amount", "Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's time attribute"),
    ("SELECT * FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.proctime AS r ON o.currency = r.currency",
     "o.proctime", "Processing-time temporal join is not supported yet. (FLINK-19830"),
    ("SELECT * FROM orders o JOIN nokey FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency",
     "nokey", "Temporal Table Join requires primary key in versioned table"),
    ("SELECT * FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.amount = r.rate",
     "ON", "Join key must be the same as temporal table's primary key in Event-time"),
    ("SELECT * FROM orders o JOIN plain FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency",
     "plain", "plain is not a versioned table"),
    ("SELECT * FROM plain p JOIN rates FOR SYSTEM_TIME AS OF p.update_time AS r ON p.currency = r.currency",
     "p.update_time", "Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's time "
     "attribute field: pass plain as kit.stream"),
    ("SELECT * FROM orders o, LATERAL TABLE (Rates(o.order_time)) r WHERE o.currency = r.currency",
     "Rates", "Rates is not a temporal table function"),
])
def test_sql_errors_are_flinks_at_the_place(golden_streams, query, at, message):
    orders, rates = golden_streams
    o = kit.stream(orders, time="order_time", watermark=SQL0, proctime=Clock(datetime(2024, 1, 1)))
    r = kit.stream(rates, time="update_time", watermark=SQL0, primary_key="currency")
    nokey = kit.stream(rates, time="update_time", watermark=SQL0)
    with pytest.raises(kit.SqlError) as error:
        kit.sql(query, orders=o, rates=r, nokey=nokey, plain=rates, Rates=r)
    assert f"line 1, column {query.index(at) + 1}: {message}" in str(error.value)


def test_batch_tables_get_flinks_batch_mode_error_and_what_to_pass(golden_streams):
    orders, rates = golden_streams
    spec = GOLDEN["runs"][3]
    assert spec["mode"] == "batch" and "unexpected correlate variable $cor0" in spec["error"][0]
    with pytest.raises(kit.SqlError) as error:
        kit.sql(spec["query"], orders=orders, currency_rates=rates)
    assert "unexpected correlate variable $cor0 in the plan" in str(error.value)
    assert "pass orders as kit.stream(df, time='order_time'" in str(error.value)


def test_temporal_table_function_join_by_processing_time(spark):
    at = pd.to_datetime
    o = kit.stream(spark.createDataFrame(pd.DataFrame({
        "t": at(["2024-01-01"] * 3), "id": ["a", "b", "c"], "cur": ["EUR"] * 3,
        "p": at(["2024-01-01 10:00", "2024-01-01 10:02", "2024-01-01 10:04"])})), time="t", proctime="p")
    r = kit.stream(spark.createDataFrame(pd.DataFrame({
        "t": at(["2024-01-01"] * 2), "cur": ["EUR"] * 2, "rate": [1.0, 2.0],
        "p": at(["2024-01-01 10:01", "2024-01-01 10:04"])})), time="t", proctime="p")
    result = kit.sql("SELECT o.id, r.rate FROM orders AS o, LATERAL TABLE (Rates(o.p)) AS r WHERE o.cur = r.cur",
                     orders=o, Rates=TemporalTableFunction(r, "p", "cur"))
    # a comes before any rate (INNER drops it); at 10:04 the rate arrives first (ties: right first)
    assert sorted(tuple(x) for x in result.collect()) == [("b", 1.0), ("c", 2.0)]


# -- properties: the replay against pandas' merge_asof, the fast path against the replay ----

from hypothesis import HealthCheck, example, given, settings, strategies as st   # noqa: E402


@st.composite
def two_streams(draw, delay=5):
    """Rows ``(time, (key, id))`` of two inputs in arrival order, never behind their own
    bounded watermark (``delay`` ms of disorder), and an interleaving."""
    def side(prefix):
        n = draw(st.integers(0, 12))
        top, rows = 0, []
        for i in range(n):
            top += draw(st.integers(0, 4))
            t = top - draw(st.integers(0, delay))          # within the allowed disorder
            rows.append((t, (draw(st.sampled_from("ab")), f"{prefix}{i}")))
            top = max(top, t)
        return rows
    left, right = side("l"), side("r")
    sides = draw(st.permutations("L" * len(left) + "R" * len(right)))
    return left, right, "".join(sides)


def merge_asof(left, right):
    """pandas' as-of join: each left row with the latest version at or before its time, the
    later arrival among versions with the same time."""
    l = pd.DataFrame([(t, k, i) for t, (k, i) in left], columns=["t", "k", "id"], dtype=object)
    r = pd.DataFrame([(t, k, i) for t, (k, i) in right], columns=["t", "k", "version"], dtype=object)
    if l.empty:
        return set()
    l["t"], r["t"] = l.t.astype("int64"), r.t.astype("int64")
    out = pd.merge_asof(l.sort_values("t", kind="mergesort"), r.sort_values("t", kind="mergesort"),
                        on="t", by="k", direction="backward", allow_exact_matches=True)
    return {(i, None if pd.isna(v) else v) for i, v in zip(out.id, out.version)}


def newest_so_far(right):
    """The rows a deduplicated view keeps: each at or after the newest earlier one of its key."""
    top, kept = {}, []
    for t, (k, i) in right:
        if k not in top or t >= top[k]:
            top[k] = t
            kept.append((t, (k, i)))
    return kept


@settings(max_examples=300, deadline=None)
@given(two_streams(), st.sampled_from([None, "last"]))
def test_without_late_rows_the_replay_equals_merge_asof_whatever_the_interleaving(streams, deduplicate):
    """... and a versioned view by deduplication joins like its newest-so-far rows."""
    left, right, sides = streams
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration(5))
    arrivals, W = replay(left, right, sides, bounded, bounded)
    assert not any(a.late for a in arrivals)
    got = set()
    for k in "ab":
        for e in event_time_join([a for a in arrivals if a.row[0] == k], W, "left", deduplicate=deduplicate).emitted:
            got.add((e.left.row[1], e.right and e.right.row[1]))
    assert got == merge_asof(left, newest_so_far(right) if deduplicate else right)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(two_streams(), st.sampled_from(["inner", "left"]), st.sampled_from([None, "last"]))
def test_fast_path_equals_the_replay_on_spark(spark, streams, how, deduplicate):
    left, right, _ = streams
    frame = lambda rows, name: spark.createDataFrame(
        [(t, k, i) for t, (k, i) in rows], f"t long, k string, {name} string")
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration(5))
    l = kit.stream(frame(left, "id"), time="t", watermark=bounded)
    r = kit.stream(frame(right, "version"), time="t", watermark=bounded, primary_key="k")
    fast = temporal_join(l, r, on="k", how=how, deduplicate=deduplicate)
    assert fast.fast                                       # no late row: auto picks the as-of path
    replayed = temporal_join(l, r, on="k", how=how, deduplicate=deduplicate, engine="replay")
    assert fast.df.collect() == replayed.df.collect()
    versions = newest_so_far(right) if deduplicate else right
    expected = {p for p in merge_asof(left, versions) if how == "left" or p[1] is not None}
    assert {(row.id, row.version) for row in fast.df.collect()} == expected


@pytest.mark.parametrize("interleave", ["event_time", "left_first", "right_first"])
def test_a_replay_in_one_partition_equals_one_spread_over_tasks(spark, golden_streams, interleave):
    """Inputs Spark knows to be small are interleaved and replayed in one partition; inputs
    of unknown size (an RDD's rows) by scans over their partitions, spread over tasks."""
    from kit.replay.interleave import tasks

    def join(orders, rates):
        o = kit.stream(orders, time="order_time", watermark=SQL0)
        r = kit.stream(rates, time="update_time", watermark=SQL0, primary_key="currency")
        return temporal_join(o, r, on="currency", how="left", engine="replay", interleave=interleave,
                             clock=Clock(datetime(2024, 1, 1, 10), Duration.of_minutes(10)),
                             state_ttl=Duration.of_minutes(30))

    small = join(*golden_streams)
    spread = join(*(spark.createDataFrame(df.rdd, df.schema) for df in golden_streams))
    assert tasks(small.merged) == 1 and tasks(spread.merged) > 1
    assert sorted(map(str, small.merged.collect())) == sorted(map(str, spread.merged.collect()))
    assert sorted(map(str, small.fates().collect())) == sorted(map(str, spread.fates().collect()))
    assert small.emissions().collect() == spread.emissions().collect()


def test_a_row_without_event_time_is_rejected_with_its_place(spark):
    orders = spark.createDataFrame([(1, "EUR", "a"), (None, "EUR", "b")], "t long, k string, id string")
    rates = spark.createDataFrame([(0, "EUR", 1.0)], "t long, k string, rate double")
    join = temporal_join(kit.stream(orders, time="t"), kit.stream(rates, time="t", primary_key="k"), on="k")
    with pytest.raises(Exception, match="row left input, seq=1 has NULL event time in column 't'"):
        join.df.collect()
    rates = spark.createDataFrame([(None, "EUR", 1.0)], "t long, k string, rate double")   # no time at all
    join = temporal_join(kit.stream(orders.limit(1), time="t"), kit.stream(rates, time="t", primary_key="k"), on="k")
    with pytest.raises(Exception, match="row right input, seq=0 has NULL event time in column 't'"):
        join.df.collect()


@pytest.mark.parametrize("times, late", [([20, 30, 40, 50], False), ([20, 30, 5, 40], True), ([30, 20, 40, 50], True)])
def test_the_late_check_carries_the_watermark_across_partitions(spark, times, late):
    from kit.joins.asof import has_late
    rows = spark.sparkContext.parallelize([(t,) for t in times], 2)     # [a, b] | [c, d]
    df = spark.createDataFrame(rows, "t long")
    assert df.rdd.getNumPartitions() == 2
    assert has_late(kit.stream(df, time="t")) is late
    # punctuated: each row's own watermark column (NULL: it emits none)
    marks = spark.createDataFrame(spark.sparkContext.parallelize([(t, None if t == 50 else t - 1) for t in times], 2),
                                  "t long, w long")
    assert has_late(kit.stream(marks, time="t", watermark=WatermarkStrategy.from_column("w"))) is late


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(times=st.lists(st.integers(0, 20), max_size=12), parts=st.integers(1, 3),
       null_at=st.none() | st.integers(0, 11), delay=st.integers(0, 4))
@example(times=[5, 4], parts=1, null_at=None, delay=0)     # 4 <= the watermark 5 - 0 - 1: late
def test_the_jvm_late_scan_equals_its_python_twin(spark, times, parts, null_at, delay):
    from kit import jvm
    from kit.joins import asof
    if null_at is not None and null_at < len(times):
        times[null_at] = None
    df = spark.createDataFrame(spark.sparkContext.parallelize([(t,) for t in times], parts), "t long")
    s = kit.stream(df, time="t", watermark=WatermarkStrategy.for_bounded_out_of_orderness(Duration(delay)))
    assert jvm.available(spark, "LateScan")                              # the suite runs the JVM scan
    in_jvm = sorted(asof._late_check(s).collect())
    with pytest.MonkeyPatch.context() as m:
        m.setattr(jvm, "available", lambda spark, name: False)
        in_python = sorted(asof._late_check(s).collect())
        python_says = asof.has_late(s)
    assert [r._part for r in in_jvm] == [r._part for r in in_python] == list(range(parts))
    for j, p in zip(in_jvm, in_python):
        assert j._late == p._late and (j._late or (j._min, j._max) == (p._min, p._max))
    assert asof.has_late(s) is python_says


# -- versioned views by deduplication --------------------------------------------------

def test_a_deduplicated_view_keeps_the_last_row_by_time_and_drops_older_ones():
    rates = [(10, ("EUR", "r0")), (30, ("EUR", "r1")), (20, ("EUR", "r2")), (30, ("EUR", "r3"))]
    orders = [(25, ("o1", "EUR")), (35, ("o2", "EUR"))]
    arrivals, W = replay(orders, rates, "RRRRLL", NONE, NONE)
    result = event_time_join(arrivals, W, "left", deduplicate="last")
    # r2 (20) is older than r1 (30): the view drops it; r3 (30, the same time) replaces r1
    assert {f.arrival.row[1]: f.fate for f in result.fates if f.arrival.side == RIGHT} == {
        "r0": "cleaned", "r1": "replaced", "r2": "deduplicated", "r3": "kept"}
    assert [(e.left.row[0], e.right.row[1]) for e in result.emitted] == [("o1", "r0"), ("o2", "r3")]
    # without the view, r2 is a version of its own and o1 meets it
    plain = event_time_join(arrivals, W, "left")
    assert [(e.left.row[0], e.right.row[1]) for e in plain.emitted] == [("o1", "r2"), ("o2", "r3")]
    # keeping the first row (ORDER BY time ASC): only a strictly earlier time passes
    first = event_time_join(arrivals, W, "left", deduplicate="first")
    assert [f.arrival.row[1] for f in first.fates if f.fate == "deduplicated"] == ["r1", "r2", "r3"]


def test_a_deduplicated_views_state_expires_ttl_after_its_last_write():
    rates = [(30, ("EUR", "r0")), (20, ("EUR", "r1")), (10, ("EUR", "r2"))]
    arrivals, W = replay([], rates, "RRR", NONE, NONE, clock=Clock(datetime(2024, 1, 1), Duration.of_minutes(1)))
    ttl = StateRetention(Duration.of_minutes(2))
    fates = {f.arrival.row[1]: f.fate for f in event_time_join(arrivals, W, "left", retention=ttl,
                                                               deduplicate="last").fates if f.fate != "expired"}
    # r1 comes 1 min after r0's write: dropped; r2 comes 2 min after: r0's state expired, r2 passes
    assert fates == {"r0": "kept", "r1": "deduplicated", "r2": "cleaned"}


VIEW = """WITH versioned_rates AS (
  SELECT currency, rate, update_time FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY update_time DESC) AS rownum
    FROM rates)
  WHERE rownum = 1)
SELECT o.order_id, r.* FROM orders AS o
LEFT JOIN versioned_rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"""


def test_sql_versioned_view_by_deduplication(golden_streams):
    orders, rates = golden_streams
    o = kit.stream(orders, time="order_time", watermark=SQL0)
    slow = WatermarkStrategy.for_sql_delay(Duration.of_minutes(60))
    view = kit.sql(VIEW, orders=o, rates=kit.stream(rates, time="update_time", watermark=slow))
    table = kit.sql(VIEW.split("\n", 5)[-1].replace("versioned_rates", "rates"), orders=o,
                    rates=kit.stream(rates, time="update_time", watermark=slow, primary_key="currency"))
    assert view.columns == ["order_id", "currency", "rate", "update_time"]
    join = view.temporal_joins[0]
    assert (join.deduplicate, join.right.primary_key) == ("last", ("currency",))
    # the rates file is out of order: the view drops the versions older than one it has seen
    dropped = [(r.right["currency"], r.right["update_time"].strftime("%H:%M")) for r in
               join.fates().where("fate = 'deduplicated'").orderBy("pos").collect()]
    assert dropped == [("EUR", "10:15"), ("GBP", "10:45")]
    met = {r.order_id: r.rate for r in view.collect()}
    assert (met["o3"], met["o5"]) == (1.10, 1.30)           # the versioned table gives 1.11 and 1.29
    assert {r.order_id: r.rate for r in table.collect()} == {**met, "o3": 1.11, "o5": 1.29}
    # ORDER BY ASC keeps the first row; rownum comes along with SELECT *
    first = kit.sql(VIEW.replace("DESC", "ASC").replace("SELECT currency, rate, update_time FROM", "SELECT * FROM"),
                    orders=o, rates=kit.stream(rates, time="update_time", watermark=slow))
    assert first.columns[-1] == "rownum" and {r.rownum for r in first.collect()} <= {1, None}
    assert first.temporal_joins[0].deduplicate == "first"
    # both as real Flink 2.3 gave them for these views (run on the golden's files)
    assert met == {"o1": None, "o2": 1.1, "o3": 1.1, "o4": 1.3, "o5": 1.3, "o6": 1.31, "o7": 1.12, "o8": 1.15,
                   "o9": None}
    assert {r.order_id: r.rate for r in first.collect()} == {
        "o1": None, "o2": 1.1, "o3": 1.1, "o4": 1.3, "o5": 1.3, "o6": 1.3, "o7": 1.1, "o8": 1.1, "o9": None}


@pytest.mark.parametrize("change, at, message", [
    (("ORDER BY update_time DESC", "ORDER BY rate DESC"), "rate DESC",
     "Event-Time Temporal Table Join requires both primary key and row time attribute"),
    (("WHERE rownum = 1", "WHERE rownum = 2"), "= 2", "a versioned view is a deduplication"),
    (("SELECT currency, rate, update_time FROM", "SELECT currency, rate FROM"), "rates)",
     "the versioned view must keep its primary key and time attribute; it drops ['update_time']"),
    (("FROM rates)", "FROM plain)"), "plain)", "plain is not a stream"),
])
def test_sql_versioned_view_errors(golden_streams, change, at, message):
    orders, rates = golden_streams
    query = VIEW.replace(*change)
    with pytest.raises(kit.SqlError) as error:
        kit.sql(query, orders=kit.stream(orders, time="order_time", watermark=SQL0), plain=rates,
                rates=kit.stream(rates, time="update_time", watermark=SQL0))
    assert message in str(error.value)
    before = query[:query.index(at)]
    assert f"line {before.count(chr(10)) + 1}, column {len(before) - before.rfind(chr(10))}" in str(error.value)


def test_a_null_key_is_a_key_as_in_flinks_keyed_state(spark):
    # real Flink 2.3: o2 (NULL currency) meets the rate with a NULL currency, INNER and LEFT;
    # its interval join does not (tests/test_interval_join.py)
    rates = spark.createDataFrame([(10, "EUR", 1.1), (10, None, 9.9)], "t long, currency string, rate double")
    orders = spark.createDataFrame([(30, "o1", "EUR"), (30, "o2", None), (60, "o3", "EUR")],
                                   "t long, id string, currency string")
    o, r = kit.stream(orders, time="t"), kit.stream(rates, time="t", primary_key="currency")   # no row late
    join = temporal_join(o, r, on="currency", how="inner", engine="replay")
    assert sorted((x.id, x.rate) for x in join.df.collect()) == [("o1", 1.1), ("o2", 9.9), ("o3", 1.1)]
    query = "SELECT o.id, r.rate FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.t AS r ON o.currency = r.currency"
    result = kit.sql(query, orders=o, rates=r)
    assert result.temporal_joins[0].fast                   # the as-of path groups NULL keys too
    assert sorted(map(tuple, result.collect())) == [("o1", 1.1), ("o2", 9.9), ("o3", 1.1)]
    # the key equality, wherever it stands among the conjuncts, gives way to the link alone
    query = query.replace("ON o.currency = r.currency", "ON r.rate > 5 AND r.currency = o.currency")
    result = kit.sql(query, orders=o, rates=r)
    assert sorted(map(tuple, result.collect()), key=str) == [("o1", None), ("o2", 9.9), ("o3", None)]
    plan = result._jdf.queryExecution().executedPlan().toString()
    assert re.search(r"HashJoin \[__kit_v#\d+L\], \[__kit_v#\d+L\]", plan), plan


@st.composite
def asof_cases(draw):
    """Several independent as-of problems stacked under a ``case`` key (one Spark job): left
    rows ``(case, k, ts, id)`` and versions ``(case, k, ts, seq, op)`` with NULL keys, equal
    times, deletions, and times bunched or spread."""
    left, right, seq = [], [], 0
    for case in range(draw(st.integers(1, 8))):
        spread = draw(st.sampled_from([1, 3, 50, 10_000]))
        keys = st.sampled_from(["a", "b", None])
        for _ in range(draw(st.integers(0, 12))):
            seq += draw(st.integers(1, 3))                    # grows with arrival, not dense
            right.append((case, draw(keys), draw(st.integers(0, spread)), seq,
                          draw(st.sampled_from(["+I", "+I", "+U", "-U", "-D"]))))
        for i in range(draw(st.integers(0, 8))):
            at = st.one_of(st.integers(-1, spread + 1), st.integers(spread, 4 * spread + 4))   # or past them all
            left.append((case, draw(keys), draw(at), f"{case}.{i}"))
    return left, right


def latest_version(left, right):
    """Brute force: each left row's latest version at or before its time (the later arrival
    among equal times); None when there is none or it is a deletion."""
    out = {}
    for case, k, t, i in left:
        found = max(((ts, s, op) for c, kk, ts, s, op in right if (c, kk) == (case, k) and ts <= t), default=None)
        out[i] = found[1] if found and found[2] in ("+I", "+U") else None
    return out


@pytest.mark.parametrize("strategy", ["one width", "each key's width", "no broadcast", "crowded: one window"])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(asof_cases())
def test_the_as_of_versions_equal_brute_force(spark, monkeypatch, strategy, case):
    from kit.joins import asof
    if strategy == "no broadcast":
        monkeypatch.setattr(asof, "BROADCAST_ROWS", -1)
    if strategy.startswith("crowded"):
        monkeypatch.setattr(asof, "CROWDED", -1)
    left, right = case
    l = spark.createDataFrame(left, "c long, k string, _ts long, id string")
    r = spark.createDataFrame(right, "_k0 long, _k1 string, _ts long, _seq long, _op string")
    shape = asof.spans_shape(r, 2, one_width=strategy != "each key's width")
    if right and strategy.endswith("width"):
        assert (shape.width is not None) == (strategy == "one width")   # one width: nothing here crowds
    if shape.width is not None:
        assert shape.total < 3 * len(right)
    got = {row.id: row._v for row in asof.versions(l, r, ["c", "k"], shape).collect()}
    assert got == latest_version(left, right)
