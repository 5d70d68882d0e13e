"""Top-N and deduplication (kit.changelog.rank) against real Flink 2.3, Flink's emission rules,
batch Spark SQL and the window-function fast path."""

import json
from functools import partial
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kit
from kit.changelog import ALL, Changelog, Options, from_stream, ordered, snapshot
from kit.changelog.deduplicate import deduplicate
from kit.changelog.rank import (AppendOnlyTopNFunction, FastTop1Function, RetractableTopNFunction,
                                UpdatableTopNFunction, rank_fanout, top_n)
from kit.changelog.replay import Row
from kit.errors import KitError

from changelogs import table_at
from goldens import load

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
OWN_GOLDEN = Path(__file__).parent / "golden" / "flink-2.3" / "topn.json"


def changelog_rows(log: Changelog) -> list:
    """``(kind, values)`` in changelog order."""
    return [(r["_op"], [r[c] for c in log.columns]) for r in ordered(log.df).collect()]


def stream_log(spark, columns: list, rows: list) -> Changelog:
    """``rows`` arriving in order (seq 0, 1, ...) as an insert-only changelog."""
    pdf = pd.DataFrame(rows, columns=columns).assign(_t=range(len(rows)))
    return from_stream(kit.stream(pdf, time="_t"), columns)


def updating_log(spark, columns: list, types: str, messages: list) -> Changelog:
    """A hand-written changelog: ``(seq, kind, *values)`` per message, ``_n`` its place."""
    rows, place = [], {}
    for seq, kind, *values in messages:
        place[seq] = place.get(seq, -1) + 1
        rows.append((kind, *values, seq, [place[seq]], None))
    df = spark.createDataFrame(rows, f"_op string, {types}, seq bigint, _n array<int>, _pt bigint")
    return Changelog(df, tuple(columns), mode=ALL)


# ------------------------------------------------------------------ real Flink 2.3

@pytest.mark.parametrize("run", [0, 1], ids=["row_number", "no_row_number"])
def test_golden_topn_changelog(spark, run):
    golden = load("topn_changelog.json")
    expected = golden["runs"][run]
    log = stream_log(spark, golden["input_columns"], golden["input"])
    number = "row_num" if "row_num" in expected["columns"] else None
    out = top_n(log, ["category"], [("sales", False, False)], 3, number, Options())
    assert list(out.columns) == expected["columns"]
    assert changelog_rows(out) == [(r["kind"], r["values"]) for r in expected["rows"]]
    assert out.mode == ({"+I", "-U", "+U"} if number else {"+I", "-D"})
    assert out.upsert_key == (("category", "row_num") if number else None)


def test_golden_batch_equals_final_table(spark):
    """Flink's batch answer is the streaming changelog's final table."""
    golden = load("topn_changelog.json")
    log = stream_log(spark, golden["input_columns"], golden["input"])
    for batch in (r for r in golden["runs"] if r["mode"] == "batch"):
        number = "row_num" if "row_num" in batch["columns"] else None
        out = top_n(log, ["category"], [("sales", False, False)], 3, number, Options())
        final = sorted(tuple(r) for r in snapshot(out).collect())
        assert final == sorted(tuple(r["values"]) for r in batch["rows"])


DESC, ASC = (False, False), (True, True)   # Flink's default NULL order per direction
SALES = dict(partition=["category"], order=[("sales", *DESC)])
OWN = {   # scenario of tests/golden/flink-2.3/topn.json -> the operator call the planner makes
    "top2_with_rownum": dict(SALES, n=2, row_number="rn"),
    "top2_without_rownum": dict(SALES, n=2),
    "top1_with_rownum": dict(SALES, n=1, row_number="rn"),
    "top1_without_rownum": dict(SALES, n=1),
    "top3_offset_rownum_2_to_3": dict(SALES, n=3, offset=2, row_number="rn"),
    "global_top2_no_partition": dict(partition=[], order=[("sales", *DESC)], n=2, row_number="rn",
                                     columns=["product_id", "sales"]),
    "top2_over_updating_input_with_rownum": dict(partition=[], order=[("c", *DESC)], n=2, row_number="rn",
                                                 strategy="update_fast"),
    "top2_over_updating_input_without_rownum": dict(partition=[], order=[("c", *DESC)], n=2,
                                                    strategy="update_fast"),
    "dedup_rowtime_top2": dict(partition=["k"], order=[("ts", *ASC)], n=2, row_number="rn"),
    "dedup_keep_last_rowtime": dict(keys=["k"], keep="last", time="ts"),
    "dedup_keep_first_proctime": dict(keys=["k"], keep="first"),
    "dedup_keep_last_proctime": dict(keys=["k"], keep="last"),
}


def counts(spark, users: list) -> Changelog:
    """``SELECT user, COUNT(*) AS c ... GROUP BY user`` as Flink's GroupAggregate sends it to
    an UpdateFast Top-N: ``+I`` then ``+U`` alone (changelogMode=[I,UA])."""
    seen, messages = {}, []
    for seq, user in enumerate(users):
        seen[user] = seen.get(user, 0) + 1
        messages.append((seq, "+I" if seen[user] == 1 else "+U", user, seen[user]))
    log = updating_log(spark, ["user", "c"], "user string, c bigint", messages)
    return Changelog(log.df, log.columns, frozenset({"+I", "+U"}), ("user",))


@pytest.mark.skipif(not OWN_GOLDEN.is_file(), reason="tests/golden/flink-2.3/topn.json not generated yet")
@pytest.mark.parametrize("name", list(OWN))
def test_own_golden(spark, name):
    scenario = next(s for s in json.loads(OWN_GOLDEN.read_text())["scenarios"] if s["name"] == name)
    call = dict(OWN[name])
    (table, given), = scenario["inputs"].items()
    if table == "t":
        log = counts(spark, [user for user, _ in given["rows"]])
    else:
        rows = [[pd.Timestamp(v) if c == "ts" else v for c, v in zip(given["columns"], r)] for r in given["rows"]]
        log = stream_log(spark, given["columns"], rows)
    columns = call.pop("columns", None)
    if columns:
        log = Changelog(log.df, tuple(columns), log.mode)
    out = deduplicate(log, options=Options(), **call) if "keep" in call else top_n(log, options=Options(), **call)
    got = [(k, [str(v) if hasattr(v, "isoformat") else v for v in values]) for k, values in changelog_rows(out)]
    if "dedup_keep" in name:   # the planner projects the columns Flink selects
        got = [(k, [v[log.columns.index(c)] for c in scenario["columns"] if c in log.columns] + [1] * ("rn" in scenario["columns"]))
               for k, v in got]
    assert got == [(r["kind"], r["values"]) for r in scenario["rows"]]


def test_deduplicate_keep_first_on_rowtime_fires_on_watermark_rises(spark):
    """topn.json's dedup_keep_first_rowtime_late, with the arrival of each emission: the
    watermark timer fires at a rise of the watermark (a1 after b1's arrival; e0 and f0,
    which came *at* the watermark, only at the next rise, after a2, with b1); the rows it
    dropped as late are kept for the user; without the input's watermarks the kit says what it needs."""
    scenarios = json.loads(OWN_GOLDEN.read_text())["scenarios"]
    scenario = next(s for s in scenarios if s["name"] == "dedup_keep_first_rowtime_late")
    rows = [(k, v, pd.Timestamp(t).to_pydatetime()) for k, v, t in scenario["inputs"]["e"]["rows"]]
    e = kit.stream(spark.createDataFrame(rows, "k string, v string, ts timestamp"), time="ts",
                   watermark=kit.WatermarkStrategy.for_sql_delay(kit.Duration.of_seconds(5)))
    t = kit.sql(scenario["query"], e=e)
    got = [(r["seq"], r["op"], r["v"]) for r in t.changelog().collect()]
    assert got == [(2, "+I", "a1"), (8, "+I", "e0"), (8, "+I", "f0"), (8, "+I", "b1")]
    assert [(r["kind"], r["values"][1]) for r in scenario["rows"]] == [(op, v) for _, op, v in got]
    late = [(r["seq"], json.loads(r["row"])["v"], r["operator"].startswith("Deduplicate"))
            for r in t.late_rows().orderBy("seq").collect()]
    assert late == [(3, "a0 late", True), (4, "c1 late", True), (5, "d0 at wm", True)]
    assert kit.sql("SELECT k, COUNT(*) AS n FROM e GROUP BY k", e=e).late_rows() is None
    log = stream_log(spark, ["k", "ts"], [("a", 1)])
    with pytest.raises(KitError, match="watermark"):
        deduplicate(log, ["k"], "first", Options(), time="ts")



def keep_first_timers(rows: list, delay: int) -> list:
    """Keep first on event time as Flink's timers run it, arrival by arrival: ``rows`` of
    ``(key, time)`` arriving in order under the watermark ``max(time) - delay`` of the rows
    before; ``(seq, place, key, time)`` of each emission."""
    met, top = [], None
    for _, t in rows:
        met.append(None if top is None else top - delay)
        top = t if top is None else max(top, t)
    pending, done, out = {}, set(), []
    for j, (key, t) in enumerate(rows):
        if (met[j] is None or t >= met[j]) and key not in done and (key not in pending or t < pending[key][0]):
            pending[key] = (t, j)
        left = met[j + 1] if j + 1 < len(rows) else None   # the watermark this arrival leaves (last: the end)
        if j + 1 == len(rows) or (left is not None and (met[j] is None or left > met[j])):
            due = sorted((v, k) for k, v in pending.items() if j + 1 == len(rows) or v[0] <= left)
            for place, ((time, _), key) in enumerate(due):
                out.append((j, place, key, time))
                done.add(key)
                del pending[key]
    return out


@settings(SETTINGS, max_examples=6)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 12)), min_size=1, max_size=25),
       st.integers(0, 4), st.integers(2, 5))
def test_keep_first_on_event_time_equals_flink_timers(spark, rows, delay, tasks):
    """The window-per-bucket search gives the emissions of Flink's timers, in one bucket or several."""
    pdf = pd.DataFrame(rows, columns=["k", "ts"])
    s = kit.stream(pdf, time="ts", watermark=kit.WatermarkStrategy.for_sql_delay(kit.Duration.of_millis(delay)))
    log, marks = from_stream(s, ["k", "ts"]), s.df.select("seq", "watermark")
    expected = keep_first_timers(rows, delay)
    for n in (1, tasks):
        got = deduplicate(log, ["k"], "first", Options(tasks=n), time="ts", marks=marks)
        assert sorted((r["seq"], r["_n"][0], r["k"], r["ts"]) for r in got.df.collect()) == expected


# ------------------------------------------------------------------ Flink's rules, by hand

def run(function, messages: list) -> list:
    """``(kind, values, rank)`` of every output of ``function`` over ``(kind, values)``."""
    out = []
    for i, (kind, values) in enumerate(messages):
        out += [(k, r.values, rank) for k, r, rank in function.process(kind, Row(i, values))]
    return out


def topn(cls, n, start=1, rank=True, update_before=True):
    return cls([1], [(False, False)], start, n, rank, update_before)   # ORDER BY column 1 DESC


def test_offset_without_row_number_sends_updates():
    """``rn BETWEEN 2 AND 3`` without the row number: Flink's with-number algorithm, so a
    row moving inside the range is an update, not a delete and insert."""
    f = topn(AppendOnlyTopNFunction, 3, start=2, rank=False)
    out = run(f, [("+I", ("a", 10)), ("+I", ("b", 20)), ("+I", ("c", 15))])
    assert out == [("+I", ("a", 10), None), ("-U", ("a", 10), None), ("+U", ("c", 15), None),
                   ("+I", ("a", 10), None)]


def test_ties_keep_the_earlier_arrival_and_do_not_enter_a_full_top_n():
    f = topn(AppendOnlyTopNFunction, 2)
    out = run(f, [("+I", ("a", 10)), ("+I", ("b", 10)), ("+I", ("c", 10)), ("+I", ("d", 20))])
    assert out == [("+I", ("a", 10), 1), ("+I", ("b", 10), 2),
                   ("-U", ("a", 10), 1), ("+U", ("d", 20), 1), ("-U", ("b", 10), 2), ("+U", ("a", 10), 2)]


def test_no_update_before():
    f = topn(AppendOnlyTopNFunction, 2, update_before=False)
    out = run(f, [("+I", ("a", 10)), ("+I", ("b", 20))])
    assert out == [("+I", ("a", 10), 1), ("+U", ("b", 20), 1), ("+I", ("a", 10), 2)]


def test_retract_with_row_number_moves_the_rows_below_up():
    f = topn(RetractableTopNFunction, 2)
    out = run(f, [("+I", ("a", 30)), ("+I", ("b", 20)), ("+I", ("c", 10)), ("-D", ("a", 30))])
    assert out[-4:] == [("-U", ("a", 30), 1), ("+U", ("b", 20), 1), ("-U", ("b", 20), 2), ("+U", ("c", 10), 2)]


def test_retract_without_row_number_deletes_then_lets_the_next_row_in():
    f = topn(RetractableTopNFunction, 2, rank=False)
    out = run(f, [("+I", ("a", 30)), ("+I", ("b", 20)), ("+I", ("c", 10)), ("-U", ("b", 20)), ("+U", ("b", 5))])
    assert out == [("+I", ("a", 30), None), ("+I", ("b", 20), None),
                   ("-D", ("b", 20), None), ("+I", ("c", 10), None)]


def _apply(table: list, out: list):
    for kind, values, rank in out:
        row = values + ((rank,) if rank is not None else ())
        if kind in ("+I", "+U"):
            table.append(row)
        else:
            table.remove(row)   # fails when Flink would retract a row it never sent


@st.composite
def retractions(draw):
    """A valid changelog of (kind, (id, score)): adds, and retractions of present rows."""
    present, messages = [], []
    for i in range(draw(st.integers(1, 25))):
        if present and draw(st.booleans()):
            row = present.pop(draw(st.integers(0, len(present) - 1)))
            messages.append((draw(st.sampled_from(["-U", "-D"])), row))
        else:
            row = (i, draw(st.integers(0, 4)))
            present.append(row)
            messages.append((draw(st.sampled_from(["+I", "+U"])), row))
    return messages


@SETTINGS
@given(retractions(), st.integers(1, 4), st.integers(1, 3), st.booleans())
def test_retractable_keeps_the_top_n(messages, n, start, rank):
    """After every message, the emitted table is the rows ranked start..n (ties by the
    arrival of their add), with their row numbers when output."""
    start = min(start, n)
    f = topn(RetractableTopNFunction, n, start=start, rank=rank)
    table, present = [], []
    for i, (kind, values) in enumerate(messages):
        _apply(table, [(k, r.values, x) for k, r, x in f.process(kind, Row(i, values))])
        present = present + [values] if kind in ("+I", "+U") else [p for p in present if p != values]
        top = sorted(present, key=lambda v: -v[1])   # stable: arrival among ties
        expected = [v + ((r,) if rank else ()) for r, v in enumerate(top, 1) if start <= r <= n]
        assert sorted(table) == sorted(expected)


# ------------------------------------------------------------------ on Spark

def test_updating_input_top2(spark):
    """Top-2 over a COUNT per user (the updates of a group aggregate), retract strategy."""
    log = updating_log(spark, ["user", "cnt"], "user string, cnt bigint", [
        (0, "+I", "Mary", 1), (1, "+I", "Bob", 1), (2, "-U", "Mary", 1), (2, "+U", "Mary", 2),
        (3, "+I", "Liz", 1), (4, "-U", "Bob", 1), (4, "+U", "Bob", 2), (5, "-U", "Bob", 2), (5, "+U", "Bob", 3)])
    out = top_n(log, [], [("cnt", False, False)], 2, "rn", Options())
    rows = [(r["_op"], r["user"], r["cnt"], r["rn"], r["seq"], r["_n"]) for r in ordered(out.df).collect()]
    assert rows == [
        ("+I", "Mary", 1, 1, 0, [0, 0]), ("+I", "Bob", 1, 2, 1, [0, 0]),
        # Mary's -U: Bob moves up to rank 1, rank 2 empties
        ("-U", "Mary", 1, 1, 2, [0, 0]), ("+U", "Bob", 1, 1, 2, [0, 1]), ("-D", "Bob", 1, 2, 2, [0, 2]),
        # Mary's +U: she takes rank 1, Bob comes back at 2 (an insert: the rank was empty)
        ("-U", "Bob", 1, 1, 2, [1, 0]), ("+U", "Mary", 2, 1, 2, [1, 1]), ("+I", "Bob", 1, 2, 2, [1, 2]),
        # Liz ties Bob after him: outside the top 2, nothing
        ("-U", "Bob", 1, 2, 4, [0, 0]), ("+U", "Liz", 1, 2, 4, [0, 1]),
        ("-U", "Liz", 1, 2, 4, [1, 0]), ("+U", "Bob", 2, 2, 4, [1, 1]),
        ("-U", "Bob", 2, 2, 5, [0, 0]), ("+U", "Liz", 1, 2, 5, [0, 1]),
        ("-U", "Mary", 2, 1, 5, [1, 0]), ("+U", "Bob", 3, 1, 5, [1, 1]),
        ("-U", "Liz", 1, 2, 5, [1, 2]), ("+U", "Mary", 2, 2, 5, [1, 3])]
    assert out.mode == ALL and out.upsert_key == ("rn",)
    assert sorted(snapshot(out, at=4).collect()) == [("Bob", 2, 2), ("Mary", 2, 1)]


def test_update_fast_top1_and_topn(spark):
    log = updating_log(spark, ["user", "cnt"], "user string, cnt bigint", [
        (0, "+I", "Mary", 1), (1, "+I", "Bob", 1), (2, "-U", "Mary", 1), (2, "+U", "Mary", 2),
        (3, "-U", "Bob", 1), (3, "+U", "Bob", 2), (4, "-U", "Bob", 2), (4, "+U", "Bob", 3)])
    log = Changelog(log.df, log.columns, frozenset({"+I", "-U", "+U"}), ("user",))
    top1 = top_n(log, [], [("cnt", False, False)], 1, None, Options(), strategy="update_fast")
    assert changelog_rows(top1) == [("+I", ["Mary", 1]), ("-U", ["Mary", 1]), ("+U", ["Mary", 2]),
                                    ("-U", ["Mary", 2]), ("+U", ["Bob", 3])]
    top2 = top_n(log, [], [("cnt", False, False)], 2, "rn", Options(), strategy="update_fast")
    retract = top_n(log, [], [("cnt", False, False)], 2, "rn", Options(), strategy="retract")
    fast_rows, retract_rows = top2.df.collect(), retract.df.collect()
    assert table_at(top2.columns, fast_rows, 4) == [("Bob", 3, 1), ("Mary", 2, 2)]
    for k in range(5):
        assert table_at(top2.columns, fast_rows, k) == table_at(retract.columns, retract_rows, k)


@st.composite
def scored(draw):
    """Insert-only rows ``(p, s, id)``: two partitions, few distinct scores (ties), NULLs."""
    n = draw(st.integers(1, 14))
    return [(draw(st.sampled_from("ab")), draw(st.one_of(st.none(), st.integers(0, 4))), i) for i in range(n)]


@settings(SETTINGS, max_examples=5)
@given(scored(), st.integers(1, 3), st.integers(1, 2), st.booleans())
def test_snapshot_equals_batch_row_number(spark, rows, n, start, number):
    """At every arrival k, the Top-N changelog applied up to k is batch Spark SQL's
    ROW_NUMBER() ... WHERE rn BETWEEN start AND n over the rows with seq <= k (ties by arrival)."""
    start = min(start, n)
    log = stream_log(spark, ["p", "s", "id"], rows)
    out = top_n(log, ["p"], [("s", False, False)], n, "rn" if number else None, Options(), offset=start)
    got = out.df.collect()
    log.df.createOrReplaceTempView("topn_input")
    batch = spark.sql(f"""
        SELECT k, p, s, id, rn FROM (
          SELECT k.k, i.*, ROW_NUMBER() OVER (PARTITION BY k.k, i.p ORDER BY i.s DESC NULLS LAST, i.seq) AS rn
          FROM topn_input i JOIN (SELECT seq AS k FROM topn_input) k ON i.seq <= k.k)
        WHERE rn BETWEEN {start} AND {n}""").collect()
    for k in range(len(rows)):
        expected = [tuple(r[1:] if number else r[1:-1]) for r in batch if r["k"] == k]
        assert table_at(out.columns, got, k) == sorted(expected, key=repr)


@st.composite
def timed(draw):
    """Insert-only rows ``(key, t, v)`` of a few keys, with repeated values and times out of order."""
    n = draw(st.integers(1, 30))
    return [(draw(st.sampled_from("abcdef")), draw(st.integers(0, 5)), draw(st.integers(0, 1))) for _ in range(n)]


def tagged(logs: dict):
    """The changelogs ``{tag: log}`` as one DataFrame (one Spark job for them all)."""
    from functools import reduce

    from pyspark.sql import functions as F
    return reduce(lambda a, b: a.unionByName(b), [log.df.withColumn("_tag", F.lit(tag)) for tag, log in logs.items()])


@settings(SETTINGS, max_examples=3)
@given(timed(), st.booleans())
def test_deduplicate_fast_equals_replay(spark, rows, ub):
    log = stream_log(spark, ["key", "t", "v"], rows)
    variants = [("first", None, ub), ("last", None, ub), ("last", "t", ub)]
    fast, replay = ({v: deduplicate(log, ["key"], v[0], Options(update_before=v[2]), time=v[1], engine=e)
                     for v in variants} for e in ("auto", "replay"))
    assert [(f.name, f.dataType) for f in fast[variants[0]].df.schema] == [
        (f.name, f.dataType) for f in replay[variants[0]].df.schema]
    by_tag = [sorted(tagged({str(v): d[v] for v in variants}).collect(), key=repr) for d in (fast, replay)]
    assert by_tag[0] == by_tag[1]


def test_deduplicate_rules(spark):
    rows = [("a", 5, 1), ("a", 3, 1), ("a", 3, 2), ("a", 9, 2), ("a", 9, 2)]
    log = stream_log(spark, ["key", "t", "v"], rows)
    o = Options()
    assert changelog_rows(deduplicate(log, ["key"], "first", o)) == [("+I", ["a", 5, 1])]
    # keep last by arrival: an equal row emits nothing
    assert changelog_rows(deduplicate(log, ["key"], "last", o)) == [
        ("+I", ["a", 5, 1]), ("-U", ["a", 5, 1]), ("+U", ["a", 3, 1]), ("-U", ["a", 3, 1]), ("+U", ["a", 3, 2]),
        ("-U", ["a", 3, 2]), ("+U", ["a", 9, 2])]
    # keep last on rowtime: a time not smaller replaces
    assert changelog_rows(deduplicate(log, ["key"], "last", Options(update_before=False), time="t")) == [
        ("+I", ["a", 5, 1]), ("+U", ["a", 9, 2]), ("+U", ["a", 9, 2])]
    assert deduplicate(log, ["key"], "first", o).mode == {"+I"}


def test_deduplicate_ttl(spark):
    """A key idle for the TTL starts afresh (+I again); keep last then also sends equal rows."""
    pdf = pd.DataFrame({"key": ["a"] * 4, "v": [1, 1, 1, 2], "_t": range(4),
                        "pt": pd.to_datetime([0, 500, 2000, 2100], unit="ms")})
    log = from_stream(kit.stream(pdf, time="_t", proctime="pt"), ["key", "v"])
    o = Options(ttl_ms=1000)
    assert changelog_rows(deduplicate(log, ["key"], "first", o)) == [("+I", ["a", 1]), ("+I", ["a", 1])]
    assert changelog_rows(deduplicate(log, ["key"], "last", o)) == [
        ("+I", ["a", 1]), ("-U", ["a", 1]), ("+U", ["a", 1]), ("+I", ["a", 1]), ("-U", ["a", 1]), ("+U", ["a", 2])]


def test_rank_fanout(spark):
    """RANK() over an updating input: a message re-ranks its row and every row below it."""
    log = updating_log(spark, ["user", "last"], "user string, last bigint", [
        (0, "+I", "Mary", 1), (1, "+I", "Bob", 2), (2, "+I", "Liz", 3), (3, "-U", "Mary", 1), (3, "+U", "Mary", 4)])
    rows = ordered(rank_fanout(log, [], [("last", True, True)])).collect()
    assert [(r["_op"], r["updated"], r["size"]) for r in rows] == [
        ("+I", 1, 1), ("+I", 1, 2), ("+I", 1, 3), ("-U", 3, 2), ("+U", 1, 3)]


@given(bursts=st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=6), min_size=1, max_size=4),
       n=st.integers(1, 3), number=st.booleans())
@settings(max_examples=80, deadline=None)
def test_a_partition_idle_for_the_ttl_starts_afresh(bursts, n, number):
    """Bursts of rows further apart than the state TTL (each burst's rows at one processing
    time): with the TTL each burst is ranked as if it came alone, by the same function
    without a TTL, whatever the cache and the entries (Flink forgets without retracting)."""
    args = ([0], [(False, False)], 1, n, number, True)
    updatable = partial(UpdatableTopNFunction, row_key=[1])
    for function in (AppendOnlyTopNFunction, RetractableTopNFunction, updatable, FastTop1Function)[:4 if n == 1 else 3]:
        kept, got, alone = function(*args, 1000), [], []
        for b, burst in enumerate(bursts):
            fresh = function(*args)
            rows = [Row(i, (v, i)) for i, v in enumerate(burst)]   # (value, row key)
            messages = [("+I", r) for r in rows] + [("-U", rows[0])] * (function is RetractableTopNFunction)
            for kind, row in messages:
                got += kept.process(kind, row, b * 5000)
                alone += fresh.process(kind, row, None)
        assert got == alone


def test_ttl_entries_expire_on_their_own():
    """Top-2 DESC, TTL 1 s: the buffer is reloaded from state once the cache loaded at 0 is
    1 s old; the sort key written at 0 is gone, the one written at 600 kept (Flink 2.3:
    ttl.json top2_entries_expire_apart); a Top-1's row goes 1 s after it became first."""
    top2 = AppendOnlyTopNFunction([0], [(False, False)], 1, 2, True, True, 1000)
    out = [(k, r.values[0], n) for pt, v in ((0, 5), (0, 3), (600, 4), (1200, 1))
           for k, r, n in top2.process("+I", Row(0, (v,)), pt)]
    assert out == [("+I", 5, 1), ("+I", 3, 2), ("-U", 3, 2), ("+U", 4, 2), ("+I", 1, 2)]
    top1 = FastTop1Function([0], [(False, False)], 1, 1, False, True, 1000)
    out = [(k, r.values[0]) for pt, v in ((0, 5), (600, 3), (1200, 2), (1200, 1))
           for k, r, _ in top1.process("+I", Row(0, (v,)), pt)]
    assert out == [("+I", 5), ("+I", 2)]


def test_errors(spark):
    log = stream_log(spark, ["p", "s"], [("a", 1)])
    with pytest.raises(Exception, match="no processing-time clock"):   # a stream without proctime
        top_n(log, ["p"], [("s", False, False)], 3, None, Options(ttl_ms=10)).df.collect()
    with pytest.raises(KitError, match="rank range"):
        top_n(log, ["p"], [("s", False, False)], 1, None, Options(), offset=2)
    with pytest.raises(KitError, match="not in the input"):
        top_n(log, ["q"], [("s", False, False)], 1, None, Options())
    with pytest.raises(KitError, match="insert-only"):
        deduplicate(Changelog(log.df, log.columns, ALL), ["p"], "first", Options())
