"""The non-time OVER aggregate (kit.changelog.over) against real Flink 2.3, Flink's emission
rules and batch Spark SQL's window functions."""

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kit
from kit.changelog.aggregate import group_aggregate
from kit.changelog import (ALL, UPDATE_BEFORE, AggCall, Changelog, Options, from_stream,
                                   ordered)
from kit.changelog.over import (NonTimeRangeUnboundedPrecedingFunction,
                              NonTimeRowsUnboundedPrecedingFunction, _Aggs, over_aggregate)
from kit.changelog.replay import Row
from kit.errors import KitError

from changelogs import table_at

SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
GOLDEN = Path(__file__).parent / "golden" / "flink-2.3"
TOPN, OVER = GOLDEN / "topn.json", GOLDEN / "over.json"
ASC = (True, True)   # Flink's default: ASC NULLS FIRST


def scenario(name: str, path: Path = TOPN) -> dict:
    return next(s for s in json.loads(path.read_text())["scenarios"] if s["name"] == name)


def changelog_rows(log: Changelog) -> list:
    """``(kind, values)`` in changelog order, timestamps as Flink's goldens print them."""
    return [(r["_op"], [str(r[c]) if hasattr(r[c], "isoformat") else r[c] for c in log.columns])
            for r in ordered(log.df).collect()]


def golden_rows(s: dict) -> list:
    return [(r["kind"], r["values"]) for r in s["rows"]]


def stream_log(columns: list, rows: list, time: str | None = None, dtypes: dict | None = None) -> Changelog:
    """``rows`` arriving in order (seq 0, 1, ...) as an insert-only changelog."""
    pdf = pd.DataFrame(rows, columns=columns).astype(dtypes or {})
    if time is None:
        pdf, time = pdf.assign(_t=range(len(rows))), "_t"
    else:
        pdf[time] = pd.to_datetime(pdf[time])
    return from_stream(kit.stream(pdf, time=time), columns)


# ------------------------------------------------------------------ real Flink 2.3

def test_golden_seed_rank_over_updating_input(spark):
    """The seed's RANK() OVER (ORDER BY lastAction) over a GROUP BY: Flink 2.3 runs it (an
    OverAggregate, RANGE), ties counted as rows so far: Mary moves to 2 as Bob enters at 2."""
    s = scenario("seed_rank_without_topn_filter")
    clicks = s["inputs"]["clicks"]
    log = stream_log(clicks["columns"], clicks["rows"], time="cTime")
    last, _ = group_aggregate(Changelog(log.df, ("user", "cTime")), ["user"],
                              [AggCall("MAX", "cTime", "lastAction", "timestamp")], Options())
    out = over_aggregate(last, [], [("lastAction", *ASC)], [("RANK", None, "EXPR$2")], "RANGE", Options())
    assert list(out.columns) == s["columns"]
    assert changelog_rows(out) == golden_rows(s)
    assert "RANGE BETWEEN UNBOUNDED PRECEDING" in s["explain_changelog_mode_print_sink"]
    assert "changelogMode=[I,UB,UA,D]" in s["explain_changelog_mode_print_sink"]
    assert out.mode == ALL and out.upsert_key == ("user",)


def test_golden_row_number_over_append_input(spark):
    s = scenario("row_number_without_filter_append_asc")
    given_ = s["inputs"]["s"]
    log = stream_log(given_["columns"], given_["rows"])
    out = over_aggregate(log, ["category"], [("sales", *ASC)], [("ROW_NUMBER", None, "rn")], "ROWS",
                         Options(tasks=2))
    assert list(out.columns) == s["columns"]
    assert changelog_rows(out) == golden_rows(s)
    assert "ROWS BETWEEN UNBOUNDED PRECEDING" in s["explain_changelog_mode"]


def test_golden_desc_is_flinks_error(spark):
    s = scenario("row_number_without_filter_append")
    log = stream_log(s["inputs"]["s"]["columns"], s["inputs"]["s"]["rows"])
    message = s["error"].split(": ", 1)[1]
    with pytest.raises(KitError, match=message.replace(".", r"\.")):
        over_aggregate(log, ["category"], [("sales", False, False)], [("ROW_NUMBER", None, "rn")], "ROWS", Options())


T_CALL = dict(partition=["k"], order=[("s", *ASC)])
COUNTS = dict(partition=[], order=[("c", *ASC)])
OWN = {   # scenario of tests/golden/flink-2.3/over.json (make_over.py) -> the call the planner makes
    "range_aggs_append": dict(T_CALL, frame="RANGE", calls=[
        ("SUM", "x", "sx"), ("COUNT", "x", "cx"), ("COUNT", None, "c"), ("MIN", "x", "mn"), ("MAX", "x", "mx"),
        ("AVG", "x", "av"), ("RANK", None, "r"), ("DENSE_RANK", None, "dr")]),
    "rows_aggs_append": dict(T_CALL, frame="ROWS", calls=[("ROW_NUMBER", None, "rn"), ("SUM", "x", "sx"),
                                                          ("MAX", "x", "mx")]),
    "rows_avg_append": dict(T_CALL, frame="ROWS", calls=[("AVG", "x", "av")]),
    "range_over_updating": dict(COUNTS, frame="RANGE", calls=[("SUM", "c", "sc"), ("RANK", None, "r")],
                                not_null={"c"}),
    "rows_over_updating": dict(COUNTS, frame="ROWS", calls=[("ROW_NUMBER", None, "rn")]),
    "range_duplicate_rows": dict(COUNTS, frame="RANGE", calls=[("RANK", None, "r")], select=["c", "r"]),
    "rows_duplicate_rows": dict(COUNTS, frame="ROWS", calls=[("ROW_NUMBER", None, "rn")], select=["c", "rn"]),
}


@pytest.mark.parametrize("name", list(OWN))
def test_own_golden(spark, name):
    """Flink rewrites SUM(x) of a nullable x as COUNT(x) and $SUM0(x) (AVG too, divided in a
    Calc): a 0 joining a sort key still updates its peers, with the same SUM."""
    s, call = scenario(name, OVER), dict(OWN[name])
    (table, given_), = s["inputs"].items()
    log = stream_log(given_["columns"], given_["rows"])
    if table == "u":
        log, _ = group_aggregate(log, ["user"], [AggCall("COUNT", None, "c", "bigint")], Options())
    select = call.pop("select", None)
    out = over_aggregate(log, options=Options(), **call)
    got = changelog_rows(out)
    if select:   # the Calc after Flink's OverAggregate drops the key column
        got = [(k, [v[list(out.columns).index(c)] for c in select]) for k, v in got]
    assert got == golden_rows(s)
    assert "changelogMode=[I,UB,UA,D]" in s["explain_changelog_mode_print_sink"]


def test_own_golden_two_order_columns(spark):
    s = scenario("two_order_columns", OVER)
    log = stream_log(s["inputs"]["t"]["columns"], s["inputs"]["t"]["rows"])
    with pytest.raises(KitError, match=s["error"].split(": ", 1)[1].replace(".", r"\.")):
        over_aggregate(log, ["k"], [("s", *ASC), ("x", *ASC)], [("SUM", "x", "sx")], "RANGE", Options())


def test_errors_say_what_to_fix(spark):
    log = stream_log(["k", "s", "x"], [("a", 1, 2)])
    call = [("SUM", "x", "sx")]
    with pytest.raises(KitError, match="single time column"):
        over_aggregate(log, [], [("s", *ASC), ("x", *ASC)], call, "RANGE", Options())
    with pytest.raises(KitError, match="pass frame='ROWS'"):
        over_aggregate(log, [], [("s", *ASC)], [("ROW_NUMBER", None, "rn")], "RANGE", Options())
    with pytest.raises(KitError, match="pass frame='RANGE'"):
        over_aggregate(log, [], [("s", *ASC)], [("RANK", None, "r")], "ROWS", Options())
    with pytest.raises(KitError, match="already a column"):
        over_aggregate(log, [], [("s", *ASC)], [("SUM", "x", "x")], "RANGE", Options())
    with pytest.raises(KitError, match=r"not in the input"):
        over_aggregate(log, ["nope"], [("s", *ASC)], call, "RANGE", Options())
    with pytest.raises(Exception, match="no processing-time clock"):   # a state TTL on a stream without proctime
        over_aggregate(log, [], [("s", *ASC)], call, "RANGE", Options(ttl_ms=1000)).df.collect()


def test_ttl_cleanup_timer():
    """A state TTL forgets a partition whole once the TTL passed since its last message
    (Flink's cleanup timer, moved on by every message): rows 600 ms apart keep it, a gap of
    2.5 s starts it afresh (Flink 2.3: ttl.json non_time_over_*)."""
    from kit.changelog.replay import Function
    from kit.replay.keyed import run_key

    aggs = _Aggs([("SUM0", "v", "s")], [0])
    make = lambda: NonTimeRangeUnboundedPrecedingFunction([0], [ASC], aggs, False)   # noqa: E731
    pts = [0, 600, 1200, 3700, 3700]
    rows = [(v, "+I", pt) for v, pt in zip([5, 3, 4, 1, 7], pts)]
    out = run_key(Function(make, 1000), ["a"], rows)
    assert [(o[0][0], o[0][1].values[0], o[0][2][0]) if o[0][0] else ("forgot", o[1], o[0][2]) for o in out] == [
        ("+I", 5, 5), ("+I", 3, 3), ("+U", 5, 8), ("+I", 4, 7), ("+U", 5, 12),   # kept: 600 ms apart
        ("forgot", 3, 1200),                         # message 3 finds it forgotten: its last message was at 1200
        ("+I", 1, 1), ("+I", 7, 8)]                                              # afresh after 2.5 s


def test_no_update_before(spark):
    s = scenario("row_number_without_filter_append_asc")
    log = stream_log(s["inputs"]["s"]["columns"], s["inputs"]["s"]["rows"])
    out = over_aggregate(log, ["category"], [("sales", *ASC)], [("ROW_NUMBER", None, "rn")], "ROWS",
                         Options(update_before=False))
    assert changelog_rows(out) == [r for r in golden_rows(s) if r[0] != "-U"]
    assert UPDATE_BEFORE not in out.mode


# ------------------------------------------------------------------ Flink's rules, by hand

def run(cls, calls: list, messages: list) -> list:
    """``(kind, values, aggregates)`` of every output over ``(kind, (s, x))`` messages,
    ordered by column 0; ``calls``' arguments index the values."""
    f = cls([0], [ASC], _Aggs(calls, [a for _, a, _ in calls]), True)
    return [(k, r.values, v) for i, (kind, values) in enumerate(messages)
            for k, r, v in f.process(kind, Row(i, values))]


def test_range_unchanged_accumulator_sends_the_row_alone():
    """MAX over RANGE: a smaller value joining a sort key leaves its accumulator as it was, so
    only the new row is sent and the later keys are not revisited."""
    out = run(NonTimeRangeUnboundedPrecedingFunction, [("MAX", 1, "m")],
              [("+I", (1, 5)), ("+I", (2, 7)), ("+I", (1, 3))])
    assert out == [("+I", (1, 5), (5,)), ("+I", (2, 7), (7,)), ("+I", (1, 3), (5,))]


def test_range_retraction_deletes_with_the_old_value_and_updates_its_peers():
    """A -U is sent on as -D (with the row's old value); its peers and the later keys update;
    the +U that follows is a lone +U."""
    out = run(NonTimeRangeUnboundedPrecedingFunction, [("SUM", 1, "s")],
              [("+I", (1, 5)), ("+I", (1, 2)), ("+I", (3, 1)), ("-U", (1, 5)), ("+U", (2, 4))])
    assert out == [("+I", (1, 5), (5,)),
                   ("-U", (1, 5), (5,)), ("+U", (1, 5), (7,)), ("+I", (1, 2), (7,)),
                   ("+I", (3, 1), (8,)),
                   ("-D", (1, 5), (7,)), ("-U", (1, 2), (7,)), ("+U", (1, 2), (2,)),
                   ("-U", (3, 1), (8,)), ("+U", (3, 1), (3,)),
                   ("+U", (2, 4), (6,)), ("-U", (3, 1), (3,)), ("+U", (3, 1), (7,))]


def test_range_equal_rows_are_all_left_out_of_a_retraction():
    """Flink's ``reAccumulateIdsAndGetRemoveIndex`` skips every row equal to the retracted
    one and removes the last: with two equal rows, the one left is counted 0 (followed from
    the code; Flink's planner keeps a key column in the input where it has one)."""
    out = run(NonTimeRangeUnboundedPrecedingFunction, [("RANK", None, "r")],
              [("+I", (1, 0)), ("+I", (1, 0)), ("-D", (1, 0))])
    assert out[4:] == [("-U", (1, 0), (2,)), ("+U", (1, 0), (0,)), ("-D", (1, 0), (2,))]


def test_rows_retraction_renumbers_the_rows_after_it():
    out = run(NonTimeRowsUnboundedPrecedingFunction, [("ROW_NUMBER", None, "rn")],
              [("+I", (1, "a")), ("+I", (1, "b")), ("+I", (2, "c")), ("-D", (1, "a"))])
    assert out[3:] == [("-D", (1, "a"), (1,)), ("-U", (1, "b"), (2,)), ("+U", (1, "b"), (1,)),
                       ("-U", (2, "c"), (3,)), ("+U", (2, "c"), (2,))]


# ------------------------------------------------------------------ batch Spark SQL

@st.composite
def scored(draw):
    """Insert-only rows ``(p, s, x, id)``: two partitions, few sort keys (ties, NULLs), NULL x."""
    n = draw(st.integers(1, 10))
    value = st.one_of(st.none(), st.integers(-3, 3))
    return [(draw(st.sampled_from("ab")), draw(value), draw(value), i) for i in range(n)]


RANGE = [("RANK", None, "r"), ("DENSE_RANK", None, "dr"), ("COUNT", None, "c"), ("COUNT", "x", "cx"),
         ("SUM", "x", "sx"), ("MIN", "x", "mn"), ("MAX", "x", "mx"), ("AVG", "x", "av")]
ROWS = [("ROW_NUMBER", None, "rn"), ("COUNT", "x", "cx"), ("SUM", "x", "sx"), ("MIN", "x", "mn"), ("MAX", "x", "mx")]


@settings(SETTINGS)
@given(scored())
def test_snapshot_equals_batch_window_functions(spark, rows):
    """At every arrival k the changelog applied up to k is Spark SQL's window over the rows so
    far: RANGE aggregates as SQL's (peers included), ROWS ones ordered by (s, arrival). Flink's
    RANK and DENSE_RANK are SQL's COUNT(*) over RANGE: SQL's RANK where the row's s has no tie
    so far, never SQL's DENSE_RANK once an earlier s is tied. AVG of a BIGINT is Flink's: a
    BIGINT, the quotient truncated toward zero."""
    log = stream_log(["p", "s", "x", "id"], rows, dtypes={"s": "Int64", "x": "Int64"})
    ranged = over_aggregate(log, ["p"], [("s", *ASC)], RANGE, "RANGE", Options(tasks=2))
    by_row = over_aggregate(log, ["p"], [("s", *ASC)], ROWS, "ROWS", Options())
    got_range, got_rows = ranged.df.collect(), by_row.df.collect()
    log.df.createOrReplaceTempView("over_input")
    w = "PARTITION BY k.k, i.p ORDER BY i.s ASC NULLS FIRST"
    batch = spark.sql(f"""
        SELECT k.k, i.p, i.s, i.x, i.id,
               COUNT(*) OVER ({w}) AS r, COUNT(*) OVER ({w}) AS dr, COUNT(*) OVER ({w}) AS c,
               COUNT(i.x) OVER ({w}) AS cx, SUM(i.x) OVER ({w}) AS sx, MIN(i.x) OVER ({w}) AS mn,
               MAX(i.x) OVER ({w}) AS mx,
               IF(COUNT(i.x) OVER ({w}) = 0, NULL, SUM(i.x) OVER ({w}) div COUNT(i.x) OVER ({w})) AS av,
               ROW_NUMBER() OVER ({w}, i.seq) AS rn,
               COUNT(i.x) OVER ({w}, i.seq ROWS UNBOUNDED PRECEDING) AS rcx,
               SUM(i.x) OVER ({w}, i.seq ROWS UNBOUNDED PRECEDING) AS rsx,
               MIN(i.x) OVER ({w}, i.seq ROWS UNBOUNDED PRECEDING) AS rmn,
               MAX(i.x) OVER ({w}, i.seq ROWS UNBOUNDED PRECEDING) AS rmx,
               RANK() OVER ({w}) AS sql_rank, COUNT(*) OVER (PARTITION BY k.k, i.p, i.s) AS peers
        FROM over_input i JOIN (SELECT seq AS k FROM over_input) k ON i.seq <= k.k""").collect()
    for k in range(len(rows)):
        now = [r for r in batch if r["k"] == k]
        assert table_at(ranged.columns, got_range, k) == sorted(
            [(r.p, r.s, r.x, r.id, r.r, r.dr, r.c, r.cx, r.sx, r.mn, r.mx, r.av) for r in now], key=repr)
        assert table_at(by_row.columns, got_rows, k) == sorted(
            [(r.p, r.s, r.x, r.id, r.rn, r.rcx, r.rsx, r.rmn, r.rmx) for r in now], key=repr)
        assert all(r.r == r.sql_rank for r in now if r.peers == 1)


@st.composite
def clicks(draw):
    return [draw(st.sampled_from(["Mary", "Bob", "Liz", "Tom"])) for _ in range(draw(st.integers(1, 9)))]


@settings(SETTINGS, max_examples=4)
@given(clicks())
def test_snapshot_over_updating_input_equals_batch(spark, users):
    """Over a GROUP BY's changelog (-U/+U), the table at every k is the window over the
    GROUP BY's table at k."""
    log = stream_log(["user"], [(u,) for u in users])
    counted, _ = group_aggregate(log, ["user"], [AggCall("COUNT", None, "c", "bigint")], Options())
    calls = [("RANK", None, "r"), ("SUM", "c", "sc"), ("MIN", "user", "mu")]
    out = over_aggregate(counted, [], [("c", *ASC)], calls, "RANGE", Options())
    got = out.df.collect()
    spark.createDataFrame(pd.DataFrame({"user": users, "k": range(len(users))})).createOrReplaceTempView("over_clicks")
    batch = spark.sql("""
        SELECT k, user, c, COUNT(*) OVER w AS r, SUM(c) OVER w AS sc, MIN(user) OVER w AS mu FROM (
          SELECT k.k, i.user, COUNT(*) AS c FROM over_clicks i JOIN (SELECT k FROM over_clicks) k
          ON i.k <= k.k GROUP BY k.k, i.user)
        WINDOW w AS (PARTITION BY k ORDER BY c)""").collect()
    for k in range(len(users)):
        assert table_at(out.columns, got, k) == sorted([tuple(r)[1:] for r in batch if r["k"] == k], key=repr)
