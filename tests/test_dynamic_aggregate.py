"""kit.changelog.aggregate: Flink's group aggregation against real Flink 2.3's changelogs,
the fast path against the reference replay, and snapshots against batch Spark SQL."""

import functools
import json
import math
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

import kit
from goldens import load
from kit.changelog.aggregate import group_aggregate
from kit.changelog.aggregate_compiled import chain
from kit.changelog import ALL, AggCall, Changelog, Options, from_stream, ordered, snapshot
from kit.changelog.minibatch import bucket, hash_code, map_order, row_hash, task_load
from kit.sql.options import dynamic_options
from kit.errors import KitError
from kit.time import Clock, Duration

GOLDEN = Path(__file__).parent / "golden" / "flink-2.3"
TYPES = {"user": "string", "url": "string", "word": "string", "v": "int", "bucket": "int", "ti": "tinyint",
         "dc": "decimal(10,2)", "f": "float", "x": "double"}


def C(function, arg, name, type_, distinct=False):
    return AggCall(function, arg, name, type_, distinct)


def count(name="c"):
    return C("COUNT", None, name, "bigint")


def changelog(spark, columns, rows, clock=None):
    """An insert-only changelog of ``rows`` (one arrival each)."""
    schema = ", ".join(f"`{c}` {TYPES[c]}" for c in columns) + ", t bigint"
    df = spark.createDataFrame([(*r, i) for i, r in enumerate(rows)], schema)
    return from_stream(kit.stream(df, time="t", proctime=clock), columns)


def rows_of(log):
    return [(r["_op"], [r[c] for c in log.columns]) for r in ordered(log.df).collect()]


def engines_rows(log, keys, calls, engines=("fast", "reference"), where=None, meta=False, **options):
    """``rows_of`` the aggregate run by each engine (``meta``: with ``seq``, ``_n``, ``_pt``),
    read in one Spark job."""
    outs = [run(log, keys, calls, engine, where, **options) for engine in engines]
    both = outs[0].df.selectExpr("0 AS _e", "*")
    for i, out in enumerate(outs[1:], 1):
        both = both.unionByName(out.df.selectExpr(f"{i} AS _e", "*"))
    collected = both.orderBy("_e", "seq", "_n").collect()
    return [[(r["_op"], [r[c] for c in outs[0].columns]) + ((r["seq"], r["_n"], r["_pt"]) if meta else ())
             for r in collected if r["_e"] == i]
            for i in range(len(outs))]


def expected(scenario):
    return [(r["kind"], r["values"]) for r in scenario["rows"]]


def scenarios(path):
    return {s["name"]: s for s in json.loads((GOLDEN / path).read_text())["scenarios"]}


def run(log, keys, calls, engine="auto", where=None, **options):
    if where:
        log = log.with_df(log.df.where(where))
    return group_aggregate(log, keys, calls, Options(**options), engine)[0]


# --- tests/golden/flink-2.3/group_agg.json: one aggregate over an insert-only input ---------------

GROUP_AGG = {
    "count_star": (["user"], [count()]),
    "count_col_nulls": (["user"], [C("COUNT", "url", "c", "bigint")]),
    "count_star_and_count_col_nulls": (["user"], [count("n"), C("COUNT", "url", "c", "bigint")]),
    "count_distinct": (["user"], [C("COUNT", "url", "d", "bigint", True)]),
    "sum_int": (["user"], [C("SUM", "v", "s", "int")]),
    "avg_int": (["user"], [C("AVG", "v", "a", "int")]),            # Flink's type: truncated
    "avg_double": (["user"], [C("AVG", "v", "a", "double")]),
    "max_smaller_value_no_emission": (["user"], [C("MAX", "v", "m", "int")]),
    "min": (["user"], [C("MIN", "v", "m", "int")]),
    "several_aggregates": (["user"], [count(), C("SUM", "v", "s", "int"), C("AVG", "v", "a", "int"),
                                      C("MIN", "v", "mn", "int"), C("MAX", "v", "mx", "int")]),
    "several_aggregates_no_count": (["user"], [C("MIN", "v", "mn", "int"), C("MAX", "v", "mx", "int")]),
    "max_with_state_ttl": (["user"], [C("MAX", "v", "m", "int")]),
    "count_col_nulls_with_state_ttl": (["user"], [C("COUNT", "url", "c", "bigint")]),
    "global_count": ([], [count()]),
    "global_count_no_rows": ([], [count(), C("SUM", "v", "s", "int")]),
    "global_max": ([], [C("MAX", "v", "m", "int")]),
    "null_group_key": (["user"], [count(), C("SUM", "v", "s", "int")]),
    "group_by_two_columns_and_expression": (["user", "bucket"], [count()]),
}


@pytest.mark.parametrize("name", sorted(GROUP_AGG))
def test_group_agg_golden(spark, name):
    scenario = scenarios("group_agg.json")[name]
    table = scenario["inputs"]["t"]
    columns, rows = table["columns"], table["rows"]
    if name == "group_by_two_columns_and_expression":   # GROUP BY v / 10
        columns, rows = columns + ["bucket"], [r + [r[1] // 10] for r in rows]
    ttl = 86_400_000 if scenario["config"].get("table.exec.state.ttl") == "1 d" else 0
    log = changelog(spark, columns, rows, Clock(datetime(2024, 1, 1)) if ttl else None)
    keys, calls = GROUP_AGG[name]
    where = "v > 100" if name == "global_count_no_rows" else None
    engines = ["reference"] if ttl else ["auto", "fast", "reference"]   # auto: compiled where it applies
    for engine, got in zip(engines, engines_rows(log, keys, calls, engines, where, ttl_ms=ttl)):
        assert got == expected(scenario), engine


# --- cascade.json, word_freq_changelog.json: an aggregate over an aggregate's changelog ---------

CASCADE = {   # name: input table, inner (keys, calls, filter), outer (keys, calls)
    "word_freq_back_to_zero": (["word"], [count("cnt")], None, ["cnt"], [C("COUNT", "cnt", "freq", "bigint")]),
    "word_freq_longer": (["word"], [count("cnt")], None, ["cnt"], [C("COUNT", "cnt", "freq", "bigint")]),
    "global_sum_avg_over_updates": (["user"], [C("SUM", "v", "s", "int")], None, [],
                                    [C("SUM", "s", "total", "int"), C("AVG", "s", "avg_s", "int"), count("n")]),
    "sum_of_counts_per_count": (["user"], [count()], None, ["c"], [count("users"), C("SUM", "c", "total", "bigint")]),
    "min_max_over_updates_retract_current": (["user"], [C("MAX", "v", "m", "int")], None, [],
                                             [C("MIN", "m", "lo", "int"), C("MAX", "m", "hi", "int")]),
    "min_over_updates_duplicates": (["user"], [C("MAX", "v", "m", "int")], None, [], [C("MIN", "m", "lo", "int")]),
    "count_distinct_over_updates": (["user"], [count()], None, [],
                                    [C("COUNT", "c", "distinct_counts", "bigint", True), count("users")]),
    "count_over_filtered_updates": (["user"], [count()], "c >= 2", [], [count("heavy_users")]),
    "max_over_updates_is_retract_agg": (["user"], [C("SUM", "v", "s", "int")], None, [], [C("MAX", "s", "best", "int")]),
}


@pytest.mark.parametrize("name", sorted(CASCADE))
def test_cascade_golden(spark, name):
    scenario = scenarios("cascade.json")[name]
    (table,) = scenario["inputs"].values()
    inner_keys, inner_calls, where, keys, calls = CASCADE[name]
    inner = run(changelog(spark, table["columns"], table["rows"]), inner_keys, inner_calls)
    for engine, got in zip(("auto", "reference"), engines_rows(inner, keys, calls, ("auto", "reference"), where)):
        assert got == expected(scenario), engine


def test_cascade_inner_goldens(spark):
    for name, keys, calls in [("word_freq_inner", ["word"], [count("cnt")]),
                              ("sum_inner", ["user"], [C("SUM", "v", "s", "int")]),
                              ("max_inner", ["user"], [C("MAX", "v", "m", "int")])]:
        scenario = scenarios("cascade.json")[name]
        (table,) = scenario["inputs"].values()
        assert rows_of(run(changelog(spark, table["columns"], table["rows"]), keys, calls)) == expected(scenario)


def test_shared_goldens(spark):
    """../shared/golden: the seed's clicks query and word-frequency cascade, streaming runs."""
    clicks = load("groupby_changelog.json")
    for r in (r for r in clicks["runs"] if r["mode"] == "streaming"):
        log = changelog(spark, ["user", "url"], [row[:2] for row in r["input"]])
        out = run(log, ["user"], [C("COUNT", "url", "EXPR$1", "bigint")])
        assert rows_of(out) == expected(r), r["label"]
    words = load("word_freq_changelog.json")
    inner_run, outer_run = [r for r in words["runs"] if r["mode"] == "streaming"]
    inner = run(changelog(spark, ["word"], words["input"]), ["word"], [count("cnt")])
    assert rows_of(inner) == expected(inner_run)
    outer = run(inner, ["cnt"], [C("COUNT", "cnt", "freq", "bigint")])
    assert rows_of(outer) == expected(outer_run)
    assert outer.mode == ALL and outer.upsert_key == ("cnt",)


# --- minibatch.json -------------------------------------------------------------------------------

MINIBATCH = json.loads((GOLDEN / "minibatch.json").read_text())["scenarios"]


def _minibatch_query(spark, sc, options):
    """A minibatch.json scenario through group_aggregate (the cascade: two of them)."""
    rows = list(sc["inputs"].values())[0]["rows"]
    if "url" in sc["query"]:
        log = changelog(spark, ["user", "url"], rows)
        return run(log, ["user"], [C("COUNT", "url", "d", "bigint", True), count("n")], **options)
    log = changelog(spark, ["word"], rows)
    if "GROUP BY" not in sc["query"]:
        return run(log, [], [count("c")], **options)
    inner = run(log, ["word"], [count("cnt")], **options)
    if "GROUP BY cnt" in sc["query"]:
        return run(inner, ["cnt"], [C("COUNT", "cnt", "freq", "bigint")], **options)
    return inner


@pytest.mark.parametrize("sc", MINIBATCH, ids=[sc["name"] for sc in MINIBATCH])
def test_minibatch_goldens(spark, sc):
    """Every minibatch.json scenario row for row: bundles per level, HashMap key order,
    ONE_PHASE, local-global (TWO_PHASE and AUTO), TWO_PHASE without mini-batch (one phase),
    split distinct with and without mini-batch."""
    options = vars(dynamic_options(sc.get("config") or {})[0])
    assert rows_of(_minibatch_query(spark, sc, options)) == expected(sc)


def test_flink_hashes():
    """BinaryRowData.hashCode() and HASH_CODE as Flink 2.3's jars compute them (values from
    Java: BinaryRowWriter over one STRING; SELECT HASH_CODE(url) in Flink 2.3)."""
    def signed(h):
        return h - (1 << 32) if h >= 1 << 31 else h
    string = [T.StringType()]
    assert [signed(row_hash((w,), string)) for w in ("a", "c", "Mary", "hello_world_long")] == [
        943281246, -2123423368, 1525322463, 909777757]
    assert [hash_code(w, T.StringType()) for w in ("a", "d", "Mary", "Bob")] == [97, 100, 2390779, 66965]
    assert [bucket(w, T.StringType(), 2) for w in "abcd"] == [1, 0, 1, 0]
    assert bucket(-3, T.IntegerType(), 2) == -1                        # Java's %
    assert map_order([("a",), ("b",), ("c",), ("d",)], string) == [("b",), ("a",), ("c",), ("d",)]
    assert map_order([("c",), ("a",)], string) == [("c",), ("a",)]     # one bucket: insertion order
    with pytest.raises(KitError, match="cast the key"):
        row_hash(([1],), [T.ArrayType(T.IntegerType())])


def test_minibatch_flushes(spark):
    """A bundle flushes at ``size`` records, when processing time enters a new latency
    interval (at the timer's time), and at the end of input; keys in HashMap order (b before
    a); -D when a key's count folds to 0."""
    clock = Clock(datetime(2024, 1, 1), Duration.of_seconds(1))
    log = changelog(spark, ["word"], [["a"], ["b"], ["a"], ["a"], ["b"], ["c"]], clock)
    out = run(log, ["word"], [count("cnt")], mini_batch=(2_000, 10), agg_phase="ONE_PHASE")
    start = int(datetime(2024, 1, 1).timestamp() * 1000)
    got = [(r["_op"], r["word"], r["cnt"], r["seq"], r["_n"], r["_pt"]) for r in ordered(out.df).collect()]
    assert got == [("+I", "b", 1, 1, [0], start + 2000), ("+I", "a", 1, 1, [1], start + 2000),
                   ("-U", "a", 1, 3, [0], start + 4000), ("+U", "a", 3, 3, [1], start + 4000),
                   ("-U", "b", 1, 5, [0], start + 5000), ("+U", "b", 2, 5, [1], start + 5000),
                   ("+I", "c", 1, 5, [2], start + 5000)]
    gone = run(out, [], [count("n")], mini_batch=(2_000, 10))
    assert [r[0] for r in rows_of(gone)] == ["+I", "-U", "+U"]


@settings(max_examples=4, deadline=None)
@given(words=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=14),
       size=st.integers(1, 6), phase=st.sampled_from(["ONE_PHASE", "TWO_PHASE", "AUTO"]),
       split=st.sampled_from([None, 2, 3]))
def test_minibatch_same_final_table(spark, words, size, phase, split):
    """With mini-batch (any phase, size, split distinct or not) the final table is the one
    without, and the changelog has no more rows (but for a split distinct in one phase: its
    PARTIAL aggregate's changes reach the FINAL one as transient values); the compiled bundles give the Python
    replay's changelog row for row (HashMap order, seq, _n)."""
    log = changelog(spark, ["user", "url"], [[w[0] < "e" and "x" or "y", w] for w in words])
    calls = [C("COUNT", "url", "d", "bigint", True), count("n")]
    plain = run(log, ["user"], calls)
    inner = run(log, ["user"], [count("cnt")])
    options = dict(mini_batch=(3_600_000, size), agg_phase=phase, distinct_split=split)
    compiled, reference = engines_rows(log, ["url"], calls, ("compiled", "reference"), meta=True, **options)
    assert compiled == reference
    mini = run(log, ["user"], calls, **options)
    cascade = run(run(log, ["user"], [count("cnt")], mini_batch=(3_600_000, size), agg_phase=phase),
                  ["cnt"], [count("f")], mini_batch=(3_600_000, size), agg_phase=phase)
    logs = (plain, mini, run(inner, ["cnt"], [count("f")]), cascade)
    parts = [snapshot(x).selectExpr(f"'{i}' AS part", "to_json(struct(*)) AS row") for i, x in enumerate(logs)]
    parts += [x.df.selectExpr(f"'changes {i}' AS part", "'' AS row") for i, x in enumerate(logs)]
    rows = {}   # one Spark job for the four tables and changelogs
    for r in functools.reduce(lambda a, b: a.unionByName(b), parts).collect():
        rows.setdefault(r.part, []).append(r.row)
    for a, b in ((0, 1), (2, 3)):
        assert sorted(rows.get(str(a), [])) == sorted(rows.get(str(b), []))
        if not (a == 0 and split and phase == "ONE_PHASE"):   # a split's partial level adds transient changes
            assert len(rows.get(f"changes {b}", [])) <= len(rows.get(f"changes {a}", []))


# --- state TTL ------------------------------------------------------------------------------------

def test_ttl_expires_idle_keys(spark):
    """An idle key's state is gone at ``_pt - last write >= ttl``: it starts again at +I, its
    retraction downstream is ignored, and each expiration is listed."""
    clock = Clock(datetime(2024, 1, 1), Duration.of_hours(1))
    log = changelog(spark, ["word"], [["a"], ["b"], ["a"], ["b"], ["b"], ["a"]], clock)
    out, expired = group_aggregate(log, ["word"], [count("cnt")], Options(ttl_ms=5 * 1_800_000))
    assert rows_of(out) == [("+I", ["a", 1]), ("+I", ["b", 1]), ("-U", ["a", 1]), ("+U", ["a", 2]),
                            ("-U", ["b", 1]), ("+U", ["b", 2]), ("-U", ["b", 2]), ("+U", ["b", 3]),
                            ("+I", ["a", 1])]
    pt = dict(out.df.select("seq", "_pt").distinct().collect())
    assert [tuple(r) for r in expired.collect()] == [("a", 5, pt[2], pt[5])]
    outer, expired = group_aggregate(out, ["cnt"], [count("freq")], Options(ttl_ms=3_600_000))
    assert rows_of(outer) == [("+I", [1, 1]), ("+I", [1, 1]), ("+I", [2, 1]), ("+I", [2, 1]), ("+I", [3, 1]),
                              ("+I", [1, 1])]   # every state expires an hour after its write
    assert sorted((r.cnt, r.seq) for r in expired.collect()) == [(1, 1), (1, 2), (2, 3), (2, 4)]


# --- errors ---------------------------------------------------------------------------------------

def test_errors(spark):
    log = changelog(spark, ["user", "v"], [["Mary", 1]])
    with pytest.raises(KitError, match="MEDIAN.*use one of COUNT, SUM, AVG, MIN, MAX"):
        group_aggregate(log, ["user"], [C("MEDIAN", "v", "m", "int")], Options())
    with pytest.raises(KitError, match="'nope' is not a column"):
        group_aggregate(log, ["nope"], [count()], Options())
    with pytest.raises(KitError, match="proctime=Clock"):
        group_aggregate(log, ["user"], [count()], Options(ttl_ms=1000))
    with pytest.raises(KitError, match="mini-batch is on"):
        group_aggregate(log, ["user"], [count()], Options(mini_batch=(1000, 10)), engine="fast")
    upsert = Changelog(log.df, log.columns, frozenset({"+I", "+U"}))
    with pytest.raises(KitError, match="update_before=True"):
        group_aggregate(upsert, ["user"], [count()], Options())
    updating = run(log, ["user"], [C("MAX", "v", "m", "int")])
    with pytest.raises(KitError, match="multiset"):
        group_aggregate(updating, [], [C("MIN", "m", "lo", "int")], Options(), engine="fast")


# --- properties -----------------------------------------------------------------------------------

inputs = st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.one_of(st.none(), st.integers(-3, 3))),
                  min_size=1, max_size=7)
INSERT_CALLS = [count("n"), C("COUNT", "v", "nv", "bigint"), C("COUNT", "v", "dv", "bigint", True),
                C("SUM", "v", "s", "bigint"), C("AVG", "v", "a", "double"), C("MIN", "v", "lo", "int"),
                C("MAX", "v", "hi", "int"), C("SUM", "v", "ds", "bigint", True)]
OUTER_CALLS = [count("n"), C("SUM", "s", "ss", "bigint"), C("AVG", "s", "a", "double"),
               C("COUNT", "s", "ds", "bigint", True), C("SUM", "nv", "snv", "bigint")]
BATCH = {"n": "COUNT(*)", "nv": "COUNT(v)", "dv": "COUNT(DISTINCT v)", "s": "SUM(v)", "a": "AVG(v)",
         "lo": "MIN(v)", "hi": "MAX(v)", "ds": "SUM(DISTINCT v)"}


@settings(max_examples=5, deadline=None)
@given(rows=inputs, update_before=st.booleans(), global_=st.booleans())
def test_fast_equals_reference(spark, rows, update_before, global_):
    """The compiled fold and the window functions against the replay, over insert-only and updating inputs (the cascade: the operator over its own output), with
    ``seq`` and ``_n``: the same rows in the same order."""
    log = changelog(spark, ["user", "v"], [list(r) for r in rows])
    engines = ("compiled", "fast", "reference")
    compiled, fast, reference = engines_rows(log, [] if global_ else ["user"], INSERT_CALLS, engines, meta=True,
                                             update_before=update_before)
    assert compiled == fast == reference
    updating = run(log, ["user"], [count("c"), C("SUM", "v", "s", "bigint"), C("COUNT", "v", "nv", "bigint")])
    calls = OUTER_CALLS + [C("MIN", "s", "lo", "bigint"), C("MAX", "nv", "hi", "bigint", True)]
    compiled, reference = engines_rows(updating, [] if global_ else ["c"], calls, ("compiled", "reference"),
                                       meta=True, update_before=update_before)
    assert compiled == reference
    fast, reference = engines_rows(updating, [] if global_ else ["c"], OUTER_CALLS, meta=True, update_before=update_before)
    assert fast == reference


@settings(max_examples=4, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([f"u{i}" for i in range(24)]),
                               st.sampled_from([0, 1, -1, 7, 16, -16, 2**30, -2**30, 2**31 - 1, -2**31])),
                     min_size=20, max_size=70))
def test_bigint_keys_that_come_and_go(spark, rows):
    """An aggregate keyed by one BIGINT, which the compiled fold keeps in a table of its own
    (``kit/jvm/StateTable.java``: open addressing, a key's slot freed at its last
    retraction), against the replay: keys made, dropped and made again, past the table's
    first 16 slots, negative and far apart."""
    sums = run(changelog(spark, ["user", "v"], rows), ["user"], [C("SUM", "v", "s", "bigint")])
    compiled, reference = engines_rows(sums, ["s"], [count("n"), C("COUNT", "user", "u", "bigint")],
                                       ("compiled", "reference"), meta=True, update_before=True)
    assert compiled == reference


FLINK_CALLS = [C("SUM", "ti", "s_ti", "tinyint"), C("AVG", "ti", "a_ti", "tinyint"), C("SUM", "v", "s", "int"),
               C("AVG", "v", "a", "int"), C("SUM", "dc", "s_dc", "decimal(38,2)"), C("AVG", "dc", "a_dc", "decimal(38,6)"),
               C("SUM", "f", "s_f", "float"), C("AVG", "f", "a_f", "float")]


@settings(max_examples=6, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.one_of(st.none(), st.integers(-128, 127)),
                               st.one_of(st.none(), st.integers(-9, 9)), st.sampled_from([None, "-1.05", "0.10", "3.33"]),
                               st.sampled_from([None, 0.1, -2.5, 0.7])), min_size=1, max_size=8),
       global_=st.booleans())
@example(rows=[("a", 100, -7, "0.10", 0.1), ("a", 100, -8, "0.10", 0.1), ("a", None, None, None, 0.1)], global_=False)
def test_flinks_result_types_in_every_engine(spark, rows, global_):
    """At Flink's result types (``kit.aggregate_types.result_type``) the engines agree: a TINYINT
    SUM wraps around (100 + 100 = -56), an AVG of integers truncates (-7.5 -> -7), one of
    decimals rounds once to six places, a FLOAT SUM adds in FLOAT; over an insert-only input
    and, for the exact ones, over the changelog of a SUM per key."""
    from decimal import Decimal
    log = changelog(spark, ["user", "ti", "v", "dc", "f"],
                    [[u, ti, v, None if d is None else Decimal(d), f] for u, ti, v, d, f in rows])
    keys = [] if global_ else ["user"]
    compiled, reference = engines_rows(log, keys, FLINK_CALLS[:4:2], ("compiled", "reference"), meta=True)
    assert compiled == reference
    fast, reference = engines_rows(log, keys, FLINK_CALLS[:6] + FLINK_CALLS[7:], meta=True)
    assert fast == reference
    (reference,) = engines_rows(log, ["user"], [C("SUM", "ti", "s_ti", "tinyint"), C("AVG", "v", "a", "int")],
                                ("reference",))
    seen, last, want = {}, {}, []
    for user, ti, v, *_ in rows:
        seen.setdefault(user, []).append((ti, v))
        tis, vs = [x for x, _ in seen[user] if x is not None], [y for _, y in seen[user] if y is not None]
        now = [user, (sum(tis) + 128) % 256 - 128 if tis else None,
               (abs(sum(vs)) // len(vs)) * (-1 if sum(vs) < 0 else 1) if vs else None]
        if last.get(user) != now:
            last[user] = now
            want.append(now)
    assert [values for kind, values in reference if kind != "-U"] == want
    updating = run(log, ["user"], [C("SUM", "v", "s", "int"), C("SUM", "dc", "d", "decimal(38,2)")])
    outer = [C("AVG", "s", "a", "int"), C("SUM", "s", "t", "int"), C("AVG", "d", "a_d", "decimal(38,6)")]
    fast, reference = engines_rows(updating, [], outer, meta=True)
    assert fast == reference


SPECIALS = [None, float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1.5, -2.5]
FLOAT_CALLS = [count("n"), C("COUNT", "x", "nx", "bigint"), C("COUNT", "x", "dx", "bigint", True),
               C("SUM", "x", "s", "double"), C("AVG", "x", "a", "double"), C("MIN", "x", "lo", "double"),
               C("MAX", "x", "hi", "double"), C("SUM", "x", "ds", "double", True)]


def _exact(rows: list) -> list:
    """Rows with each float as its text: NaN equal to NaN, -0.0 apart from 0.0."""
    return [(kind, [repr(v) if isinstance(v, float) else v for v in values], *meta) for kind, values, *meta in rows]


def _java_compare_key(v):
    return (1, 0.0) if v != v else (0, v, math.copysign(1.0, v))


def _java_equal(v):
    """``v``, equal to another where Java's ``==`` says so (-0.0 == 0.0), but NaN kept apart."""
    return "NaN" if v is not None and v != v else v


@settings(max_examples=8, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(SPECIALS)), min_size=1, max_size=8),
       global_=st.booleans())
@example(rows=[("a", float("nan")), ("b", 1.5)], global_=False)
@example(rows=[("a", -0.0), ("b", 0.0)], global_=False)
def test_nan_infinities_and_signed_zeros_in_every_engine(spark, rows, global_):
    """NaN, +-Infinity and -0.0 stay what Flink makes them, in every engine: never NULL; over
    inserts MIN and MAX compare as Java's < (a first NaN stays, a later one changes nothing);
    DISTINCT counts one NaN and -0.0 apart from 0.0 (Java's equals); a result that is NaN
    again is sent again (Java's ==). Over the changelog of a MIN per key, the retracting MAX
    ranks NaN above every number and -0.0 below 0.0 (Java's compareTo); the row it sends last
    is that value up to Java's ``==`` (0.0 after -0.0 is not sent: the same result)."""
    log = changelog(spark, ["user", "x"], [list(r) for r in rows])
    keys = [] if global_ else ["user"]
    fast, reference = engines_rows(log, keys, FLOAT_CALLS, meta=True)
    assert _exact(fast) == _exact(reference)
    final, groups = {}, {}
    for kind, values, *_ in reference:
        final[tuple(values[:len(keys)])] = values[len(keys):]
    for user, x in rows:
        groups.setdefault(() if global_ else (user,), []).append(x)
    for key, xs in groups.items():
        seen, lo, hi = [x for x in xs if x is not None], None, None
        for x in seen:   # Java's <: only a strictly smaller (larger) value replaces
            lo = x if lo is None or x < lo else lo
            hi = x if hi is None or x > hi else hi
        n, nx, dx, s, a, got_lo, got_hi, _ = final[key]
        assert (repr(got_lo), repr(got_hi)) == (repr(lo), repr(hi)), xs
        assert (n, nx, dx) == (len(xs), len(seen), len({"NaN" if x != x else (x, math.copysign(1.0, x)) for x in seen}))
        assert (s is None, a is None) == (not seen, not seen)
    if not global_:   # a retracting MAX and MIN over the MIN per key
        inner = run(log, ["user"], [C("MIN", "x", "m", "double")])
        (outer,) = engines_rows(inner, [], [C("MAX", "m", "hi", "double"), C("MIN", "m", "lo", "double")], ("reference",))
        mins = [v for v in (final[k][5] for k in groups) if v is not None]
        want = [max(mins, key=_java_compare_key), min(mins, key=_java_compare_key)] if mins else [None] * 2
        # the last row sent: a result == to the one before (0.0 after -0.0) is not sent again
        assert [_java_equal(v) for v in outer[-1][1]] == [_java_equal(v) for v in want]


@settings(max_examples=8, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.one_of(st.none(), st.integers(-3, 3))),
                     min_size=1, max_size=12),
       chunks=st.integers(1, 6), depth=st.integers(1, 3), update_before=st.booleans(), clock=st.booleans(),
       calls=st.sampled_from(["any", "tallies", "one tally", "one tally of rows"]), tasks=st.integers(1, 3))
@example(rows=[("a", 1), ("b", 2), ("a", 3), ("c", None), ("a", 1)], chunks=1, depth=2, update_before=True, clock=False,
         calls="any", tasks=2)
@example(rows=[("a", 1), ("b", 2), ("a", 3), ("c", None), ("a", 1), ("b", 0), ("a", 2)], chunks=6, depth=2,
         update_before=True, clock=True, calls="any", tasks=2)
@example(rows=[("a", 1), ("b", None), ("a", -1), ("b", 2), ("c", None), ("a", 1), ("c", 5), ("b", -2)], chunks=2,
         depth=3, update_before=True, clock=False, calls="one tally", tasks=2)
def test_chain_equals_level_by_level(spark, rows, chunks, depth, update_before, clock, calls, tasks):
    """The fused chain (kit/jvm/Chain.java) over a stream of ``chunks`` input partitions,
    each task seeded with the rows before its own, reading the stream's arrivals (a task per
    chunk) or its source straight (``tasks`` tasks of spans of the arrivals, whatever the
    chunks: one chunk spread over two tasks in the example; above ``PREFIX_CHUNKS`` chunks a
    task per chunk, numbering its arrivals from the rows its first job counted in the
    chunks before, in the second example), against the replay of one
    aggregate after the other: the same changes,
    ``seq``, ``_n`` and processing time. ``calls``: any functions; only COUNTs and SUMs, which
    ``GroupAggregate`` keeps as long tallies; one such call per level, whose changes the chain
    passes up as longs (``Chain``'s tallies): a SUM that is NULL and keys the level above
    (in the third example), a COUNT of a string key, a global SUM. Read from the source, each
    change also carries the watermark its arrival met (``_wm``), the stream's own."""
    df = spark.sparkContext.parallelize([(u, v, i) for i, (u, v) in enumerate(rows)], chunks) \
        .toDF("user string, v int, t bigint")
    s = kit.stream(df, time="t", proctime=Clock(datetime(2024, 1, 1), Duration.of_seconds(1)) if clock else None)
    log = from_stream(s, ["user", "v"])
    tallied = [count("n"), C("COUNT", "v", "nv", "bigint"), C("SUM", "v", "s", "bigint")]
    if calls.startswith("one tally"):
        levels = [(["user"], [count("n") if calls.endswith("rows") else C("SUM", "v", "n", "bigint")], None),
                  (["k"], [C("COUNT", "u", "f", "bigint")], {"k": "n", "u": "user"}),
                  ([], [C("SUM", "f", "sf", "bigint")], {"f": "f"})][:depth]
    else:
        levels = [(["user"], tallied if calls == "tallies" else INSERT_CALLS, None),
                  (["k"], [count("f"), C("SUM", "s", "ss", "bigint"), C("MIN", "s", "lo", "bigint"),
                           C("COUNT", "s", "ds", "bigint", True), C("AVG", "nv", "a", "double")],
                   {"k": "n", "s": "s", "nv": "nv"}),
                  ([], [count("g"), C("SUM", "f", "sf", "bigint") if calls == "tallies" else C("MAX", "f", "mf", "bigint")],
                   {"f": "f"})][:depth]
    expected = log
    for i, (keys, calls, inputs) in enumerate(levels):
        if inputs:
            expected = Changelog(expected.df.selectExpr("_op", *(f"{c} AS {name}" for name, c in inputs.items()),
                                                        "seq", "_n", "_pt"), tuple(inputs), expected.mode)
        expected, _ = group_aggregate(expected, keys, calls, Options(update_before=update_before or i < depth - 1),
                                      engine="reference")
    want = [(r["_op"], [r[c] for c in expected.columns], r["seq"], list(r["_n"]), r["_pt"])
            for r in ordered(expected.df).collect()]
    marks = dict(s.df.select("seq", "watermark").collect())
    for source in (None, (s, {"user": "user", "v": "v"})):
        fused = chain(log, levels, Options(update_before=update_before, tasks=tasks), source)
        if fused is None:   # one chunk for several tasks, and no spans: the keyed fold instead
            assert source is None and chunks == 1 and tasks > 1
            continue
        assert fused.columns == expected.columns and fused.mode == expected.mode
        got = fused.df.collect()   # in order as it is: no sort
        assert [(r["_op"], [r[c] for c in fused.columns], r["seq"], list(r["_n"]), r["_pt"]) for r in got] == want
        assert fused.marked == (source is not None)
        if fused.marked:
            assert [r["_wm"] for r in got] == [marks[seq] for _, _, seq, _, _ in want]


@settings(max_examples=6, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", None]), st.one_of(st.none(), st.integers(-3, 3))),
                     min_size=1, max_size=20),
       split=st.booleans(), depth=st.integers(1, 2), star=st.booleans(), prefixes=st.booleans())
@example(rows=[("a", 1), ("b", 1), ("a", 1), ("b", 1), ("c", 1), ("b", 1)], split=False, depth=1, star=False,
         prefixes=False)
@example(rows=[("a", 1), ("a", 2), ("b", 3)] * 4, split=True, depth=2, star=True, prefixes=False)
@example(rows=[("a", 1), ("a", 2), ("b", 3)] * 4, split=True, depth=2, star=False, prefixes=True)
def test_chain_over_parquet_dictionaries(spark, rows, split, depth, star, prefixes):
    """The fused chain reading a Parquet source straight: the rows in a file whose keys are
    in a dictionary per row group of 3 rows (the pass and the count of each chunk's inputs
    look a key up once per dictionary id, ``Internal.Memo``), then again in a plain file; in
    one chunk or split in several; the same changes as the replay of one aggregate after the
    other. ``star``: the first level counts rows alone, so each chunk's inputs are its keys.
    ``prefixes``: each task reads the chunks before its own itself, else a first job counts
    them. (The examples: ids a b, then b c; keys met again in a row group of each chunk.)"""
    from kit.changelog import aggregate_compiled
    with tempfile.TemporaryDirectory() as folder:
        paths = [f"{folder}/dictionary", f"{folder}/plain"]
        for path, dictionary in zip(paths, ("true", "false")):
            (spark.createDataFrame([(u, v, i) for i, (u, v) in enumerate(rows)], "user string, v int, t bigint")
             .coalesce(1).write.option("parquet.block.row.count.limit", 3)
             .option("parquet.enable.dictionary", dictionary).parquet(path))
        files = {"spark.sql.files.maxPartitionBytes": "400" if split else "1g", "spark.sql.files.openCostInBytes": "0",
                 "spark.sql.files.minPartitionNum": "1"}
        before = {k: spark.conf.get(k, None) for k in files}
        for k, v in files.items():
            spark.conf.set(k, v)
        limit, aggregate_compiled.PREFIX_CHUNKS = aggregate_compiled.PREFIX_CHUNKS, 1000 if prefixes else 0
        try:
            s = kit.stream(spark.read.parquet(*paths), time="t")
            log = from_stream(s, ["user", "v"])
            firsts = [count("n")] + ([] if star else [C("SUM", "v", "s", "bigint"), C("MAX", "v", "m", "int")])
            levels = [(["user"], firsts, None),
                      (["k"], [count("f"), C("SUM", "n2", "sn", "bigint")], {"k": "n", "n2": "n"})][:depth]
            expected = log
            for keys, calls, inputs in levels:
                if inputs:
                    expected = Changelog(expected.df.selectExpr("_op", *(f"{c} AS {n}" for n, c in inputs.items()),
                                                                "seq", "_n", "_pt"), tuple(inputs), expected.mode)
                expected, _ = group_aggregate(expected, keys, calls, Options(), engine="reference")
            tasks = s.source.rdd.getNumPartitions()
            assert tasks > 1 if split else tasks == 1
            fused = chain(log, levels, Options(tasks=tasks), (s, {"user": "user", "v": "v"}))
            assert [(r["_op"], [r[c] for c in fused.columns], r["seq"], list(r["_n"]))
                    for r in ordered(fused.df).collect()] == \
                [(r["_op"], [r[c] for c in expected.columns], r["seq"], list(r["_n"]))
                 for r in ordered(expected.df).collect()]
        finally:
            aggregate_compiled.PREFIX_CHUNKS = limit
            for k, v in before.items():
                spark.conf.unset(k) if v is None else spark.conf.set(k, v)


@settings(max_examples=8, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.one_of(st.none(), st.integers(-3, 3))),
                     min_size=1, max_size=14),
       chunks=st.integers(1, 3), depth=st.integers(1, 3), phase=st.sampled_from(["ONE_PHASE", "TWO_PHASE", "SPLIT"]),
       size=st.integers(1, 4), clock=st.booleans(), star=st.booleans(), update_before=st.booleans(),
       single=st.booleans())
@example(rows=[("a", 1)] * 3 + [("b", 1), ("a", 2)], chunks=2, depth=2, phase="TWO_PHASE", size=3, clock=False,
         star=True, update_before=True, single=False)
@example(rows=[("a", None)] * 4 + [("b", 1)] * 4, chunks=1, depth=3, phase="ONE_PHASE", size=2, clock=True, star=False,
         update_before=False, single=False)
@example(rows=[("a", 1), ("b", None), ("a", -1), ("b", 2), ("c", None), ("a", 1), ("c", 5), ("b", -2)], chunks=2,
         depth=3, phase="TWO_PHASE", size=2, clock=False, star=False, update_before=True, single=True)
def test_mini_batch_chain_equals_level_by_level(spark, rows, chunks, depth, phase, size, clock, star, update_before,
                                                single):
    """With mini-batch, the fused chain (``Chain.MiniBatch``: one task, each level's changes
    read by the next as its bundles flush, the first level on a thread of its own) reading
    the stream's arrivals or its source straight, against the Python replay of one
    mini-batch aggregate after the other: the same changes, ``seq``, ``_n`` and processing
    time, each level above the first flushing at the watermarks that passed the one below
    (``Changelog.ticks``). ``star``: the first level counts rows alone (its bundle key made once per value,
    and a key's repeated arrivals in a bundle held as one message; the first example: a three
    times). ``SPLIT``: local-global phases with split distinct. (The second example: watermarks
    every 2.5 arrivals, which reach the levels above.) ``single``: one COUNT or SUM per level,
    whose value the fold compares as a long (the third example: a SUM that turns NULL and keys
    the level above, a COUNT of a string key, a global SUM)."""
    df = spark.sparkContext.parallelize([(u, v, i) for i, (u, v) in enumerate(rows)], chunks) \
        .toDF("user string, v int, t bigint")
    s = kit.stream(df, time="t", proctime=Clock(datetime(2024, 1, 1), Duration.of_seconds(1)) if clock else None)
    log = from_stream(s, ["user", "v"])
    firsts = [count("n")] if star else [count("n"), C("SUM", "v", "s", "bigint"), C("MAX", "v", "m", "int"),
                                        C("COUNT", "v", "dv", "bigint", True)]
    levels = [(["user"], firsts, None),
              (["k"], [count("f"), C("SUM", "n2", "sn", "bigint"), C("COUNT", "n2", "dn", "bigint", True)],
               {"k": "n", "n2": "n"}),
              ([], [count("g"), C("MIN", "f", "lo", "bigint")], {"f": "f"})][:depth]
    if single:
        levels = [(["user"], [count("n") if star else C("SUM", "v", "n", "bigint")], None),
                  (["k"], [C("COUNT", "u", "f", "bigint")], {"k": "n", "u": "user"}),
                  ([], [C("SUM", "f", "sf", "bigint")], {"f": "f"})][:depth]
    options = Options(update_before=update_before, tasks=chunks, mini_batch=(2_500, size),
                      agg_phase="ONE_PHASE" if phase == "ONE_PHASE" else "TWO_PHASE",
                      distinct_split=2 if phase == "SPLIT" else None)
    def level_by_level(engine):
        out = log
        for i, (keys, calls, inputs) in enumerate(levels):
            if inputs:
                out = Changelog(out.df.selectExpr("_op", *(f"{c} AS {name}" for name, c in inputs.items()),
                                                  "seq", "_n", "_pt"), tuple(inputs), out.mode,
                                ticks=out.ticks)   # the Calc passes the mini-batch watermarks on
            out, _ = group_aggregate(out, keys, calls, replace(options, update_before=update_before or i < depth - 1),
                                     engine=engine)
        return out, [(r["_op"], [r[c] for c in out.columns], r["seq"], list(r["_n"]), r["_pt"])
                     for r in ordered(out.df).collect()]
    expected, want = level_by_level("reference")
    assert level_by_level("compiled")[1] == want   # MiniBatchGroupAggregate, one level at a time
    for source in (None, (s, {"user": "user", "v": "v"})):
        fused = chain(log, levels, options, source)
        assert fused.columns == expected.columns and fused.mode == expected.mode and fused.in_order
        assert [(r["_op"], [r[c] for c in fused.columns], r["seq"], list(r["_n"]), r["_pt"])
                for r in ordered(fused.df).collect()] == want


@pytest.mark.parametrize("mini_batch", [None, (1000, 2)])
def test_chain_counts_the_rows_below(spark, mini_batch):
    """A level that reads no column of the one below (``SELECT COUNT(*) FROM (... GROUP BY
    word)``): fused, the same changes as one aggregate after the other."""
    df = spark.sparkContext.parallelize([(w, i) for i, w in enumerate("abcab")], 2).toDF("word string, t bigint")
    s = kit.stream(df, time="t")
    log, options = from_stream(s, ["word"]), Options(mini_batch=mini_batch, tasks=2)
    levels = [(["word"], [count("c")], None), ([], [count("n")], {})]
    inner, _ = group_aggregate(log, ["word"], [count("c")], replace(options, update_before=True), engine="reference")
    expected, _ = group_aggregate(inner, [], [count("n")], options, engine="reference")
    for source in (None, (s, {"word": "word"})):
        fused = chain(log, levels, options, source).df
        assert [tuple(r) for r in ordered(fused.select(*expected.df.columns)).collect()] == \
            [tuple(r) for r in ordered(expected.df).collect()]


def test_mini_batch_chain_stops_its_thread_when_read_in_part(spark):
    """A fused mini-batch chain read only in part (``limit``): the task ends while its first
    level's thread still has changes to hand on; that thread stops with it."""
    df = spark.range(200_000).selectExpr("concat('w', CAST(id % 1000 AS STRING)) AS word", "id AS t")
    s = kit.stream(df, time="t")
    log = from_stream(s, ["word"])
    levels = [(["word"], [count("c")], None), (["k"], [count("f")], {"k": "c"})]
    fused = chain(log, levels, Options(mini_batch=(1000, 100)))
    assert len(fused.df.limit(3).collect()) == 3

    def pipes():
        threads = spark._jvm.java.lang.Thread.getAllStackTraces().keySet().toArray()
        return sum(1 for t in threads if t.getName() == "flink-kit pipe")
    for _ in range(50):
        if pipes() == 0:
            break
        time.sleep(0.1)
    assert pipes() == 0


def test_chain_falls_back_past_the_summary_limit(spark, monkeypatch):
    """More distinct first-level inputs before the last chunk than ``SUMMARY_LIMIT``: no fused
    pass (the per-level one runs); the count of each chunk stops past the limit."""
    from kit.changelog import aggregate_compiled
    df = spark.sparkContext.parallelize([(u, i) for i, u in enumerate("abcdab")], 2).toDF("user string, t bigint")
    s = kit.stream(df, time="t")
    log, levels = from_stream(s, ["user"]), [(["user"], [count("n")], None)]
    monkeypatch.setattr(aggregate_compiled, "PREFIX_CHUNKS", 0)   # no task reads the chunks before its own: counted first
    for limit, fused in ((2, False), (3, True)):   # chunk 0 holds a, b, c
        monkeypatch.setattr(aggregate_compiled, "SUMMARY_LIMIT", limit)
        assert (chain(log, levels, Options(tasks=2), (s, {"user": "user"})) is not None) == fused


@pytest.mark.parametrize("mini_batch", [None, (1000, 10)])
def test_a_compiled_fold_stops_on_messages_out_of_order(spark, mini_batch):
    """A changelog said to be ``in_order`` (read without a sort) that is not: the Java fold
    stops with an internal error rather than give a wrong changelog."""
    log = changelog(spark, ["user", "v"], [["a", 1], ["b", 2], ["a", 3]])
    backwards = log.with_df(log.df.orderBy(log.df.seq.desc()).coalesce(1), in_order=True)
    out, _ = group_aggregate(backwards, ["user"], [count("n")], Options(mini_batch=mini_batch), engine="compiled")
    with pytest.raises(Exception, match="not in arrival order"):
        out.df.collect()
    right, _ = group_aggregate(log.with_df(log.df.orderBy(log.df.seq.desc())), ["user"], [count("n")],
                               Options(mini_batch=mini_batch), engine="compiled")
    assert sorted(snapshot(right).collect()) == [("a", 2), ("b", 1)]   # not said in order: sorted first
    if mini_batch:   # the fused levels: the first one's error, on its own thread, stops the task
        fused = chain(backwards, [(["user"], [count("n")], None), ([], [count("m")], {"n": "n"})],
                      Options(mini_batch=mini_batch))
        with pytest.raises(Exception, match="not in arrival order"):
            fused.df.collect()


@settings(max_examples=4, deadline=None)
@given(rows=inputs)
def test_snapshot_equals_batch(spark, rows):
    """``snapshot(out, at=k)`` is the batch GROUP BY over the input rows with ``seq <= k``, at
    every k (all k in one query: the changelog and the input repeated per k)."""
    log = changelog(spark, ["user", "v"], [list(r) for r in rows])
    ks = spark.range(len(rows)).withColumnRenamed("id", "k")
    for engine in ("fast", "reference"):
        out = run(log, ["user"], INSERT_CALLS, engine)
        at_k = Changelog(out.df.join(ks, out.df.seq <= ks.k), ("k", *out.columns))
        log.df.join(ks, log.df.seq <= ks.k).createOrReplaceTempView("t_upto_k")
        batch = spark.sql("SELECT k, user, " + ", ".join(f"{BATCH[c.name]} AS {c.name}" for c in INSERT_CALLS)
                          + " FROM t_upto_k GROUP BY k, user")
        assert sorted(map(repr, snapshot(at_k).collect())) == sorted(map(repr, batch.select(*at_k.columns).collect()))


def test_task_load_on_skewed_keys(spark):
    """Local-global and split distinct on a skewed input: the hottest task's load drops
    (measured on Spark partitions); the results are the same."""
    rows = [["hot", f"u{i % 7}"] for i in range(60)] + [[f"k{i}", "u0"] for i in range(6)]
    log = changelog(spark, ["user", "url"], rows)
    load = task_load(log, ["user"], Options(mini_batch=(3_600_000, 10), tasks=4, distinct_split=4))
    hottest = load.groupby(["plan", "stage"])["rows"].max()
    assert hottest["ONE_PHASE", "GroupAggregate"] >= 60
    assert hottest["TWO_PHASE", "Global"] < 30 and hottest["SPLIT", "Partial"] < 60
    assert set(load.groupby(["plan", "stage"])["rows"].sum()) >= {66}
    calls = [C("COUNT", "url", "d", "bigint", True), count("n")]
    finals = [sorted(map(tuple, snapshot(run(log, ["user"], calls, mini_batch=(3_600_000, 10), agg_phase=phase,
                                             distinct_split=split)).collect()))
              for phase, split in (("ONE_PHASE", None), ("TWO_PHASE", None), ("TWO_PHASE", 4))]
    assert finals[0] == finals[1] == finals[2]


def test_task_load_is_the_same_whatever_the_inputs_partitions(spark):
    """Connect or a cluster hands the stream over in other partitions than local mode: each
    task's load is the same (the input's tasks deal rows round robin by arrival)."""
    rows = [["hot", f"u{i % 7}"] for i in range(60)] + [[f"k{i}", "u0"] for i in range(6)]
    log = changelog(spark, ["user", "url"], rows)
    options = Options(mini_batch=(3_600_000, 10), tasks=4, distinct_split=4)
    loads = [task_load(log.with_df(log.df.repartition(n)), ["user"], options) for n in (1, 3, 5)]
    assert loads[0].equals(loads[1]) and loads[0].equals(loads[2])
    assert set(loads[0].query("stage == 'Local'")["rows"]) == {17, 16}   # 66 rows dealt over 4 tasks
