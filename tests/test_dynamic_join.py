"""The regular join of dynamic tables (kit/dynamic/join.py): real Flink 2.3's changelogs row
for row, the merged arrival order, state TTL, the fast path against the replay, and the
seed's definition: the changelog's snapshot at every arrival equals the batch join then."""

import functools
import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from hypothesis import given, settings
from hypothesis import strategies as st

import kit
from kit.changelog import Changelog, Options, mode_text, ordered, snapshot
from kit.changelog.join import HOWS, join, merge
from kit.errors import KitError
from kit.replay.interleave import interleaved
from kit.time import Clock, Duration, WatermarkStrategy

GOLDEN = json.loads((Path(__file__).parent / "golden" / "flink-2.3" / "joins.json").read_text())
SCENARIOS = {s["name"]: s for s in GOLDEN["scenarios"]}
PACED = [name for name, s in SCENARIOS.items() if s["stable"]]     # the others' interleaving is thread timing
SCHEMA = "_op string, k string, v int, seq bigint, _n array<int>, _pt bigint"


def rows_of(log: Changelog, columns=None) -> list:
    """``(kind, values)`` in changelog order (``columns``: a projection, as Flink's Calc)."""
    columns = list(log.columns if columns is None else columns)
    return [(r["_op"], [r[c] for c in columns]) for r in ordered(log.df).collect()]


def streams(ev: list, sides: tuple, names: tuple) -> list:
    """The golden's one paced source split by ``side``: each row's event time is its place in
    the file, so merging by event time replays the file order, as the paced job did."""
    out = []
    for side, (key, value) in zip(sides, names):
        df = pd.DataFrame([(i, k, v) for i, (s, k, v, _) in enumerate(ev) if s == side], columns=["t", key, value])
        out.append(kit.stream(df, time="t"))
    logs = merge(out)
    return [log.with_df(log.df.drop("t"), columns=log.columns[1:]) for log in logs]


def count_star(clicks: Changelog) -> Changelog:
    """``SELECT user, COUNT(*) AS c FROM clicks GROUP BY user`` as Flink's GroupAggFunction
    sends it to a retract consumer (+I first, then -U/+U), from an insert-only changelog."""
    counts, rows = Counter(), []
    for r in ordered(clicks.df).collect():
        user = r["user"]
        counts[user] += 1
        c = counts[user]
        if c == 1:
            rows.append(("+I", user, 1, r.seq, [0], r._pt))
        else:
            rows += [("-U", user, c - 1, r.seq, [0], r._pt), ("+U", user, c, r.seq, [1], r._pt)]
    df = clicks.df.sparkSession.createDataFrame(rows, "_op string, user string, c bigint, seq bigint, "
                                                      "_n array<int>, _pt bigint")
    return Changelog(df, ("user", "c"), frozenset({"+I", "-U", "+U"}), ("user",))


# -- real Flink 2.3 ---------------------------------------------------------------------------

def join_mode(explained: str) -> str:
    """The join's changelog mode in a golden's EXPLAIN CHANGELOG_MODE text."""
    line = next(line for line in explained.splitlines() if "Join(joinType" in line)
    return line.split("changelogMode=")[1].rstrip(")")


def golden_inputs(name: str) -> list:
    """The scenario's two join inputs (scenarios of the same rows share them)."""
    return _inputs(json.dumps(SCENARIOS[name]["inputs"]["ev"]["rows"]), "aggregate" in name)


@functools.cache
def _inputs(ev: str, aggregate: bool) -> list:
    ev = json.loads(ev)
    if aggregate:
        clicks, names = streams(ev, ("C", "N"), (("user", "url"), ("user", "fullname")))
        return [count_star(clicks), names]
    return streams(ev, ("L", "R"), (("k", "lv"), ("k", "rv")))


def golden_join(name: str, update_before: bool = True) -> Changelog:
    """The golden's query on the kit: the join (of the aggregate, for those scenarios)."""
    query = SCENARIOS[name]["query"]
    how = next((h for h in ("full", "right", "left") if f" {h.upper()} " in query), "inner")
    options = Options(update_before=update_before)
    if "aggregate" in name:
        agg, names = golden_inputs(name)
        if not update_before:      # Flink's aggregate then sends +U alone
            agg = agg.with_df(agg.df.where("_op <> '-U'"), mode=frozenset({"+I", "+U"}))
        if "FROM names" in query:
            return join(names, agg, how, ["user"], ["user"], None, options, right_names=["user0", "c"])
        return join(agg, names, how, ["user"], ["user"], None, options, right_names=["user0", "fullname"])
    return join(*golden_inputs(name), how, ["k"], ["k"], None, options, ["lk", "lv"], ["rk", "rv"])


@pytest.mark.parametrize("name", PACED)
def test_flink_golden(spark, name):
    """Row kinds and order as real Flink 2.3 gave them; the mode as its EXPLAIN says, for a
    retract sink (update-before) and without one."""
    s = SCENARIOS[name]
    out = golden_join(name)
    columns = [{"k": "lk"}.get(c, c) for c in s["columns"]]
    assert rows_of(out, columns) == [(r["kind"], r["values"]) for r in s["rows"]]
    assert mode_text(out.mode) == join_mode(s["explain_changelog_mode_print_sink"])
    assert mode_text(golden_join(name, update_before=False).mode) == join_mode(s["explain_changelog_mode"])
    assert out.upsert_key is None


def test_upsert_input_without_update_before(spark):
    """An aggregate sending +U alone (Flink's [I,UA] under a join whose key holds the
    aggregate's key): the join keeps one row per upsert key, so +U replaces the old row."""
    agg, names = golden_inputs("inner_join_aggregate_with_append")
    agg = agg.with_df(agg.df.where("_op <> '-U'"), mode=frozenset({"+I", "+U"}))
    out = join(agg, names, "inner", ["user"], ["user"], None, Options(update_before=False),
               right_names=["user0", "fullname"])
    assert rows_of(out, ["user", "c", "fullname"]) == [
        ("+I", ["Mary", 1, "Mary S."]), ("+U", ["Mary", 2, "Mary S."]), ("+I", ["Liz", 1, "Liz T."]),
        ("+I", ["Bob", 1, "Bob U."]), ("+U", ["Bob", 2, "Bob U."])]
    with pytest.raises(KitError, match="upsert key"):
        join(agg.with_df(agg.df, upsert_key=None), names, "inner", ["user"], ["user"], None, Options(),
             right_names=["user0", "fullname"])


# -- the merged arrival order -------------------------------------------------------------------

def test_merge_two_streams_is_the_joins_interleaving(spark):
    left = kit.stream(pd.DataFrame({"t": [0, 5, 5, 9], "a": [1, 2, 3, 4]}), time="t")
    right = kit.stream(pd.DataFrame({"t": [5, 1, 12], "b": ["x", "y", "z"]}), time="t")
    for interleave in ("event_time", "left_first", "right_first"):
        logs = merge([left, right], interleave)
        got = [(r.seq, 0, r.a) for r in logs[0].df.collect()] + [(r.seq, 1, r.b) for r in logs[1].df.collect()]
        pos = {(r._side, r._seq): r._pos for r in interleaved(left, right, interleave).collect()}
        want = [(pos[0, i], 0, a) for i, a in enumerate([1, 2, 3, 4])]
        want += [(pos[1, i], 1, b) for i, b in enumerate("xyz")]
        assert sorted(got) == sorted(want), interleave
    assert [r.seq for r in ordered(merge([left, right])[1].df).collect()] == [1, 2, 6]  # right first on the tie at 5


def test_an_input_made_anew_reuses_its_side(spark):
    """A widget makes both streams again on every redraw: the one whose source and settings
    did not change keeps its rows' plan; a changed setting builds its own."""
    from kit.replay.interleave import LEFT, side_rows

    df = spark.createDataFrame(pd.DataFrame({"t": [0, 5, 9], "a": [1, 2, 3]}))
    first = side_rows(kit.stream(df, time="t"), LEFT, True)
    assert side_rows(kit.stream(df, time="t"), LEFT, True) is first
    other = side_rows(kit.stream(df, time="t", watermark=WatermarkStrategy.for_sql_delay(Duration(5))), LEFT, True)
    assert other is not first
    assert [r._lw for r in other.orderBy("_seq").collect()] != [r._lw for r in first.orderBy("_seq").collect()]


@settings(max_examples=5, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=12), st.lists(st.integers(0, 60), min_size=1, max_size=12),
       st.sampled_from(["left_first", "right_first"]), st.integers(0, 5), st.integers(0, 5))
def test_the_watermarks_spark_finds_are_the_references(spark, left_times, right_times, order, left_delay, right_delay):
    """``watermarks`` (grouped in Spark, brought back through Arrow) gives the rises, their
    processing times and the end that the driver's reference ``replay`` gives for the same
    interleaving, a clock ticking with each arrival."""
    from kit.replay.interleave import replay, watermarks

    def stream(times, delay):
        return kit.stream(pd.DataFrame({"t": times, "i": range(len(times))}), time="t",
                          watermark=WatermarkStrategy.for_sql_delay(Duration(delay)))

    clock = Clock(datetime(2024, 1, 1), Duration(10))
    merged = interleaved(stream(left_times, left_delay), stream(right_times, right_delay), order, clock)
    sides = "L" * len(left_times) + "R" * len(right_times)
    got = watermarks(merged)
    _, want = replay([(t, i) for i, t in enumerate(left_times)], [(t, i) for i, t in enumerate(right_times)],
                     sides if order == "left_first" else sides[::-1],
                     WatermarkStrategy.for_sql_delay(Duration(left_delay)),
                     WatermarkStrategy.for_sql_delay(Duration(right_delay)), clock)
    assert (got.positions, got.values, got.proctimes, got.n) == (want.positions, want.values, want.proctimes, want.n)


def test_merge_spread_over_partitions(spark):
    """Inputs of unknown size are merged by scans over their partitions: the same order."""
    a = spark.range(30).selectExpr("id * 7 % 11 AS t", "id AS a").where("a % 3 <> 1").repartition(3, "a")
    b = spark.range(20).selectExpr("id * 5 % 13 AS t", "id AS b").where("b % 2 = 0")
    left, right = kit.stream(a, time="t", order="a"), kit.stream(b, time="t", order="b")
    logs = merge([left, right])
    got = sorted([(r.seq, 0, r.a) for r in logs[0].df.collect()] + [(r.seq, 1, r.b) for r in logs[1].df.collect()])
    assert [g[0] for g in got] == list(range(len(got)))
    small = merge([kit.stream(a.toPandas().sort_values("a"), time="t"), kit.stream(b.toPandas(), time="t")])
    assert sorted([(r.seq, 0, r.a) for r in small[0].df.collect()]
                  + [(r.seq, 1, r.b) for r in small[1].df.collect()]) == got


def test_merge_n_streams_rule_and_clock(spark):
    """Three streams: by running maximum of event time, the later stream first on ties,
    each stream's own order kept; a clock gives ``_pt`` by merged place."""
    a = kit.stream(pd.DataFrame({"t": [1, 4], "v": ["a0", "a1"]}), time="t")
    b = kit.stream(pd.DataFrame({"t": [4, 2], "v": ["b0", "b1"]}), time="t")
    c = kit.stream(pd.DataFrame({"t": [1], "v": ["c0"]}), time="t")
    clock = Clock(datetime(2024, 1, 1), Duration.of_seconds(1))
    logs = merge([a, b, c], clock=clock)
    got = sorted((r.seq, r.v, r._pt) for log in logs for r in log.df.collect())
    start = int(datetime(2024, 1, 1).timestamp() * 1000)
    # running max: a0 1, a1 4 | b0 4, b1 4 | c0 1  -> c0, a0 (tie at 1: later stream first), b0, b1, a1
    assert got == [(i, v, start + 1000 * i) for i, v in enumerate(["c0", "a0", "b0", "b1", "a1"])]
    assert [r.v for r in ordered(merge([a, b, c], "right_first")[0].df).collect()] == ["a0", "a1"]
    assert sorted(r.seq for r in merge([a, b, c], "right_first")[2].df.collect()) == [0]
    with pytest.raises(KitError, match="interleave"):
        merge([a, b], "random")


# -- state TTL -------------------------------------------------------------------------------

def test_state_ttl_on_processing_time(spark):
    """A row is gone once ``ttl`` passed since it was last written (its arrival, a new match)."""
    left = kit.stream(pd.DataFrame({"t": [0, 4], "k": ["a", "a"], "lv": ["l1", "l2"]}), time="t")
    right = kit.stream(pd.DataFrame({"t": [1, 2, 3], "k": ["a", "b", "a"], "rv": ["r1", "x", "r2"]}), time="t")
    clock = Clock(datetime(1970, 1, 1), Duration.of_seconds(1))      # seq i at i s
    l, r = merge([left, right], clock=clock)
    l, r = (x.with_df(x.df.drop("t"), columns=x.columns[1:]) for x in (l, r))
    out = join(l, r, "left", ["k"], ["k"], None, Options(ttl_ms=2500), ["lk", "lv"], ["rk", "rv"])
    assert [(k, v[1], v[3]) for k, v in rows_of(out)] == [
        ("+I", "l1", None),                       # 0 s
        ("-D", "l1", None), ("+I", "l1", "r1"),   # 1 s: l1 written again (one match)
        ("+I", "l1", "r2"),                       # 3 s: l1 alive (1 s + 2.5 s > 3 s)
        ("+I", "l2", "r2")]                       # 4 s: r1 gone (1 s + 2.5 s <= 4 s)
    no_clock = merge([left, right])
    with pytest.raises(KitError, match="processing time"):
        join(*no_clock, "left", ["k"], ["k"], None, Options(ttl_ms=10), ["lk", "t", "lv"],
             ["rk", "rt", "rv"]).df.collect()


def test_errors_say_what_to_fix(spark):
    l, r = golden_inputs("left_join")
    with pytest.raises(KitError, match="appear twice"):
        join(l, r, "inner", ["k"], ["k"], None, Options())
    with pytest.raises(KitError, match="how="):
        join(l, r, "semi", ["k"], ["k"], None, Options(), ["lk", "lv"], ["rk", "rv"])
    with pytest.raises(KitError, match="not a column of the right"):
        join(l, r, "inner", ["k"], ["kk"], None, Options(), ["lk", "lv"], ["rk", "rv"])
    with pytest.raises(KitError, match="condition"):
        join(l, r, "left", ["k"], ["k"], "nope > 1", Options(), ["lk", "lv"], ["rk", "rv"])
    with pytest.raises(KitError, match="fast path"):
        join(l, r, "left", ["k"], ["k"], None, Options(), ["lk", "lv"], ["rk", "rv"], engine="fast")


# -- properties --------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", None])
VALUES = st.integers(0, 2)


@st.composite
def changelogs(draw, updating: bool):
    """Two inputs over one arrival order: each arrival is a left or right message; with
    ``updating``, the left side also deletes (-D) or updates (-U, +U) a row it holds."""
    n = draw(st.integers(1, 14))
    logs, held = {0: [], 1: []}, []
    for seq in range(n):
        side = draw(st.integers(0, 1))
        what = draw(st.sampled_from(["+I", "-D", "U"])) if updating and side == 0 and held else "+I"
        if what == "+I":
            row = (draw(KEYS), draw(VALUES))
            logs[side].append(("+I", *row, seq, [], seq))
            if side == 0:
                held.append(row)
        else:
            old = held.pop(draw(st.integers(0, len(held) - 1)))
            if what == "-D":
                logs[0].append(("-D", *old, seq, [], seq))
            else:
                new = (draw(KEYS), draw(VALUES))
                held.append(new)
                logs[0] += [("-U", *old, seq, [0], seq), ("+U", *new, seq, [1], seq)]
    return n, logs


def as_changelogs(spark, logs) -> tuple:
    out = []
    for side in (0, 1):
        kinds = frozenset(r[0] for r in logs[side]) | {"+I"}
        out.append(Changelog(spark.createDataFrame(logs[side], SCHEMA), ("k", "v"), kinds))
    return out


def batch(left: Changelog, right: Changelog, n: int, condition) -> dict:
    """The batch Spark SQL join, each join type, over each side's rows as of every arrival
    ``at`` (in one query): ``{(how, at): Counter of rows}``."""
    spark = left.df.sparkSession
    for name, log in (("L", left), ("R", right)):
        log.df.createOrReplaceTempView(f"dj_{name}_log")
        weight = "sum(IF(_op IN ('+I', '+U'), 1, -1))"
        spark.sql(f"SELECT at, k, v FROM (SELECT at, k, v, {weight} AS c FROM range({n}) AS ks (at) "
                  f"JOIN dj_{name}_log ON seq <= at GROUP BY at, k, v) "
                  "LATERAL VIEW explode(array_repeat(0, CAST(c AS INT))) AS _one"
                  ).createOrReplaceTempView(f"dj_{name}")
    on = "L.at = R.at AND L.k = R.k"
    if condition:
        on += f" AND {condition.replace('lv', 'L.v').replace('rv', 'R.v')}"
    query = " UNION ALL ".join(f"SELECT '{how}' AS how, coalesce(L.at, R.at) AS at, L.k, L.v, R.k, R.v FROM dj_L AS L "
                               f"{how.upper()} {'OUTER ' * (how != 'inner')}JOIN dj_R AS R ON {on}" for how in HOWS)
    out = {(how, at): Counter() for how in HOWS for at in range(n)}
    for r in spark.sql(query).collect():
        out[r[0], r[1]][tuple(r[2:])] += 1
    return out


def prefix_snapshots(rows: list, n: int) -> dict:
    """A changelog's ``(seq, kind, values)`` applied up to every arrival (``snapshot``'s rule)."""
    tables, now = {}, Counter()
    for k in range(n):
        for seq, op, values in rows:
            if seq == k:
                now[values] += 1 if op in ("+I", "+U") else -1
        assert all(c >= 0 for c in now.values()), (k, now)     # never takes away a row it lacks
        tables[k] = +now
    return tables


def tagged(outs: dict) -> DataFrame:
    """Several changelogs as one DataFrame (one Spark job), each row tagged with its name."""
    return functools.reduce(DataFrame.unionByName, [o.df.withColumn("_tag", F.lit(t)) for t, o in outs.items()])


@settings(max_examples=3, deadline=None)
@given(changelogs(updating=True), st.sampled_from([None, "lv <= rv"]), st.data())
def test_snapshot_is_the_batch_join_at_every_arrival(spark, inputs, condition, data):
    n, logs = inputs
    left, right = as_changelogs(spark, logs)
    outs = {how: join(left, right, how, ["k"], ["k"], condition, Options(), ["lk", "lv"], ["rk", "rv"])
            for how in HOWS}
    rows = {how: [] for how in HOWS}
    for r in tagged(outs).collect():
        rows[r._tag].append((r.seq, r._op, (r.lk, r.lv, r.rk, r.rv)))
    want = batch(left, right, n, condition)
    for how in HOWS:
        got = prefix_snapshots(rows[how], n)
        assert all(got[k] == want[how, k] for k in range(n)), how
    how, at = data.draw(st.sampled_from(HOWS)), data.draw(st.integers(0, n - 1))
    assert Counter(tuple(r) for r in snapshot(outs[how], at=at).collect()) == want[how, at]


@settings(max_examples=5, deadline=None)
@given(changelogs(updating=False), st.sampled_from([None, "lv <= rv"]), st.booleans())
def test_fast_path_equals_the_replay(spark, inputs, condition, keyed):
    _, logs = inputs
    left, right = as_changelogs(spark, logs)
    keys = ["k"] if keyed else []
    outs = {engine: join(left, right, "inner", keys, keys, condition, Options(), ["lk", "lv"], ["rk", "rv"],
                         engine=engine) for engine in ("fast", "reference")}
    rows = {engine: [] for engine in outs}
    for r in tagged(outs).collect():
        rows[r._tag].append((r.seq, r._n, r._op, r.lk, r.lv, r.rk, r.rv, r._pt))
    assert sorted(rows["fast"]) == sorted(rows["reference"])
    assert len({(r[0], tuple(r[1])) for r in rows["fast"]}) == len(rows["fast"])     # (seq, _n) tells rows apart


def test_spread_over_tasks_equals_one_task(spark):
    rows = [("L", k, f"l{i}", 0) for i, k in enumerate("abcabca")]
    rows += [("R", k, f"r{i}", 0) for i, k in enumerate("cab")]
    left, right = streams(rows, ("L", "R"), (("k", "lv"), ("k", "rv")))
    one, spread = (join(left, right, "full", ["k"], ["k"], None, Options(tasks=t), ["lk", "lv"], ["rk", "rv"])
                   for t in (1, 3))
    assert rows_of(one) == rows_of(spread)
