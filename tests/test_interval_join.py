"""The event-time interval join (kit/joins/interval.py): the reference semantics without Spark,
finding it in SQL (kit/sql/interval.py), then a few small runs on Spark."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kit
from kit.errors import KitError
from kit.joins.interval import HOWS, IntervalBounds, merge_order, run_key
from kit.replay.interleave import MAX_TIME, MIN_TIME, replay
from kit.time import Duration, Time, WatermarkStrategy

ms = Time.milliseconds   # sizes, gaps and bounds are Times: these tests' are in milliseconds
NONE = WatermarkStrategy.no_watermarks()
SQL0 = WatermarkStrategy.for_sql_delay(Duration(0))
B = IntervalBounds(ms(-4), ms(0))   # o.time BETWEEN s.time - 4 AND s.time


def pairs(result):
    return [(o.left, o.right) for o in result.outputs if o.kind == "joined"]


def run(left, right, sides, bounds=B, how="inner", wm=(NONE, NONE), key=None, **kw):
    """Replay, then run the join over the arrivals whose row starts with ``key`` (all if None):
    the other keys' rows only move the watermark."""
    arrivals, W = replay(left, right, sides, *wm)
    mine = [a for a in arrivals if key is None or a.row.startswith(key)]
    return run_key(mine, W, bounds, how, **kw)


# -- bounds ---------------------------------------------------------------------------

def test_bounds_relative_sizes_and_strict_edges():
    b = IntervalBounds(ms(-4), ms(0))
    assert (b.left_relative_size, b.right_relative_size, b.output_delay) == (4, 0, 4)
    strict = IntervalBounds(ms(-4), ms(0), lower_inclusive=False, upper_inclusive=False)
    assert (strict.left_lower, strict.left_upper) == (-3, -1)     # Flink: `<` is `<=` 1 ms in
    assert (strict.left_relative_size, strict.right_relative_size) == (3, -1)
    assert IntervalBounds(Duration.of_seconds(-1), Duration(0)).lower == -1000
    assert b.contains(96, 100) and b.contains(100, 100)
    assert not b.contains(95, 100) and not b.contains(101, 100)


@pytest.mark.parametrize("args, kwargs, word", [
    ((ms(5), ms(4)), {}, "lower must be <= upper"),
    ((ms(4), ms(4)), {"lower_inclusive": False}, "lower_inclusive"),
    ((ms(3), ms(4)), {"lower_inclusive": False, "upper_inclusive": False}, "upper_inclusive"),
    ((1.5, ms(4)), {}, "lower"),
    ((ms(1), "4"), {}, "upper"),
    ((ms(1), ms(4)), {"upper_inclusive": 1}, "upper_inclusive"),
    ((-4, ms(0)), {}, r"IntervalBounds: lower must be a Time, Duration or timedelta, e\.g\. Time\.seconds\(-4\) or "
                      r"Time\.milliseconds\(-4\); not the int -4"),
])
def test_bounds_validation_names_the_parameter(args, kwargs, word):
    with pytest.raises(KitError, match=word):
        IntervalBounds(*args, **kwargs)


def test_bounds_are_frozen():
    with pytest.raises(Exception):
        B.lower = 3


def test_run_key_validation():
    arrivals, W = replay([(1000, "o")], [(1000, "s")], "LR", NONE, NONE)
    with pytest.raises(KitError, match="how="):
        run_key(arrivals, W, B, "outer")
    with pytest.raises(KitError, match="bounds"):
        run_key(arrivals, W, (-4, 0), "inner")
    with pytest.raises(KitError, match="increasing"):
        run_key(arrivals[::-1], W, B, "inner")
    no_time = [dataclasses.replace(arrivals[0], time=None)]
    with pytest.raises(KitError, match="no event time"):
        run_key(no_time, W, B, "inner")
    upd, W3 = replay([(1000, "o", "-U")], [(1000, "s")], "LR", NONE, NONE)
    with pytest.raises(KitError, match="insert-only"):
        run_key(upd, W3, B, "inner")



def test_the_operator_steps_one_arrival_at_a_time_on_the_replay_driver():
    """``RowTimeIntervalJoin`` stepped by ``kit.replay.keyed.run_key``, each arrival with the
    watermark in force: a probe outputs its pairs at once; a cleanup timer fires before the
    first arrival whose watermark passed it, its outputs placed at the rise that did."""
    from kit.joins.interval import RowTimeIntervalJoin
    from kit.replay import keyed

    arrivals, W = replay([(10, "o1"), (20, "o2"), (40, "o3")], [(12, "s1"), (30, "s2")], "LRLRL", SQL0, SQL0)
    out, log = [], []

    class Logged(RowTimeIntervalJoin):
        def process_element(self, a, ctx):
            n = len(out)
            super().process_element(a, ctx)
            log.append((a.row, ctx.watermark, [(o.left, o.right, o.emitted_pos, o.watermark) for o in out[n:]]))

        def on_timer(self, timestamp, ctx):
            n = len(out)
            super().on_timer(timestamp, ctx)
            log.append((f"timer {timestamp}", ctx.watermark,
                        [(o.left, o.right, o.emitted_pos, o.watermark) for o in out[n:]]))

    keyed.run_key(Logged(B, "left", W), ["k"], arrivals, [W.before(a.pos) for a in arrivals], out=out)
    assert log == [
        ("o1", MIN_TIME, []),                          # cached, left-cache timer 10 + 4 + 1 = 15
        ("s1", MIN_TIME, [("o1", "s1", 1, MIN_TIME)]),  # joins o1; right-cache timer 13
        ("o2", 10, []),
        ("s2", 12, []),
        ("timer 13", 20, []),                          # o3 comes under 20: timers 13, 15 fire first
        ("timer 15", 20, []),                          # o1 removed (joined); timer 25 for o2
        ("o3", 20, []),
        ("timer 25", MAX_TIME, [("o2", None, 4, 30)]),  # end of input: placed at the rise to 30 (pos 4)
        ("timer 31", MAX_TIME, []),
        ("timer 45", MAX_TIME, [("o3", None, 5, MAX_TIME)]),
    ]
    assert [(o.left, o.right) for o in out] == pairs_and_pads(run(
        [(10, "o1"), (20, "o2"), (40, "o3")], [(12, "s1"), (30, "s2")], "LRLRL", how="left", wm=(SQL0, SQL0)))


def pairs_and_pads(result):
    return [(o.left, o.right) for o in result.outputs]


# -- joining ---------------------------------------------------------------------------

def test_inner_inclusive_edges():
    left = [(995, "o-5"), (996, "o-4"), (998, "o-2"), (1000, "o0"), (1001, "o+1")]
    r = run(left, [(1000, "s")], "LLLLLR")
    assert sorted(pairs(r)) == [("o-2", "s"), ("o-4", "s"), ("o0", "s")]


@pytest.mark.parametrize("lower_inclusive, upper_inclusive, expected", [
    (False, True, ["o-1", "o-2", "o-3", "o0"]),   # o.time >  s.time - 4
    (True, False, ["o-1", "o-2", "o-3", "o-4"]),  # o.time <  s.time
    (False, False, ["o-1", "o-2", "o-3"]),
])
def test_inner_exclusive_edges(lower_inclusive, upper_inclusive, expected):
    left = [(995, "o-5"), (996, "o-4"), (997, "o-3"), (998, "o-2"), (999, "o-1"), (1000, "o0"),
            (1001, "o+1")]
    bounds = IntervalBounds(ms(-4), ms(0), lower_inclusive, upper_inclusive)
    r = run(left, [(1000, "s")], "R" + "L" * len(left), bounds)
    assert sorted(pairs(r)) == sorted((o, "s") for o in expected)


@pytest.mark.parametrize("sides", ["LR", "RL"])
def test_rows_join_whichever_comes_first(sides):
    r = run([(998, "o")], [(1000, "s")], sides, wm=(SQL0, SQL0))
    assert pairs(r) == [("o", "s")]
    assert r.outputs[0].emitted_pos == 1 and r.outputs[0].kind == "joined"
    assert (r.outputs[0].left_seq, r.outputs[0].right_seq) == (0, 0)
    assert (r.outputs[0].left_time, r.outputs[0].right_time) == (998, 1000)
    assert r.dropped == []


def test_extra_condition():
    left = [(1000, "o1"), (1000, "o2")]
    right = [(1000, "s1"), (1001, "s2")]
    cond = lambda l, r: l[-1] == r[-1]       # noqa: E731
    r = run(left, right, "LRRL", how="left", condition=cond)
    assert sorted(pairs(r)) == [("o1", "s1"), ("o2", "s2")]
    r = run(left, right, "LRRL", how="full", condition=lambda l, r: l == "o1" and r == "s1")
    kinds = sorted((o.kind, o.left, o.right) for o in r.outputs)
    assert kinds == [("joined", "o1", "s1"), ("left_unmatched", "o2", None),
                     ("right_unmatched", None, "s2")]


# -- state cleanup, late rows, outer joins -----------------------------------------------
# key "k" rows; the "x" rows belong to another key and only move the watermark.
#   pos 0  R s k 1000   (right cache timer 1000 + 0 + 1 = 1001)
#   pos 1  L x 1003     watermark -> 1000
#   pos 2  R x 1002     watermark -> 1002: the timer 1001 fires, s is gone
#   pos 3  L o k 1000   in bounds with s, but s was cleaned up
CLEANUP = dict(left=[(1003, "x-o"), (1000, "k-o")], right=[(1000, "k-s"), (1002, "x-s")],
               sides="RLRL", wm=(SQL0, SQL0), key="k")


def test_old_row_no_longer_joins_after_watermark_passes():
    r = run(**CLEANUP)
    assert pairs(r) == [] and r.outputs == [] and r.dropped == []
    # same rows, but o comes before the watermark passes 1001: they join
    early = dict(CLEANUP, sides="RLLR")
    assert pairs(run(**early)) == [("k-o", "k-s")]
    # no watermark at all: they join
    assert pairs(run(**dict(CLEANUP, wm=(NONE, NONE)))) == [("k-o", "k-s")]


def test_unmatched_rows_of_outer_joins_are_padded_when_they_expire():
    right = run(**CLEANUP, how="right").outputs
    assert [(o.left, o.right, o.kind, o.emitted_pos, o.watermark) for o in right] == \
        [(None, "k-s", "right_unmatched", 2, 1002)]            # on the rise that fired the timer
    assert right[0].order == (2, 1, 1001, 0)
    left = run(**CLEANUP, how="left").outputs
    assert [(o.left, o.right, o.kind, o.emitted_pos, o.watermark) for o in left] == \
        [("k-o", None, "left_unmatched", 4, MAX_TIME)]          # at the end of input
    full = run(**CLEANUP, how="full").outputs
    assert [(o.kind, o.emitted_pos) for o in full] == [("right_unmatched", 2), ("left_unmatched", 4)]


def test_matched_rows_are_never_padded():
    for how in HOWS:
        r = run(**dict(CLEANUP, sides="RLLR"), how=how)
        assert [o.kind for o in r.outputs] == ["joined"], how


#   pos 0  L x 1003; pos 1  R x 1002 (watermark -> 1002); pos 2  L o k 990: 990 + 4 <= 1002
LATE = dict(left=[(1003, "x-o"), (990, "k-o")], right=[(1002, "x-s")], sides="LRL",
            wm=(SQL0, SQL0), key="k")


@pytest.mark.parametrize("time", [990, 998])   # 998 + 4 == 1002: the edge is late too
def test_too_late_row_is_dropped_for_inner_and_padded_at_once_for_outer(time):
    late = dict(LATE, left=[(1003, "x-o"), (time, "k-o")])
    r = run(**late)
    assert r.outputs == []
    [(arrival, reason)] = r.dropped
    assert (arrival.row, arrival.pos) == ("k-o", 2) and "too late" in reason
    for how in ("left", "full"):
        out = run(**late, how=how)
        assert [(o.left, o.right, o.kind, o.emitted_pos, o.watermark) for o in out.outputs] == \
            [("k-o", None, "left_unmatched", 2, 1002)]
        assert out.dropped == []
    assert [a.row for a, _ in run(**late, how="right").dropped] == ["k-o"]


def test_row_one_ms_inside_is_cached_not_late():
    r = run(**dict(LATE, left=[(1003, "x-o"), (999, "k-o")]), how="left")
    assert r.dropped == []
    assert [(o.kind, o.emitted_pos, o.watermark) for o in r.outputs] == \
        [("left_unmatched", 3, MAX_TIME)]


def test_row_at_the_expiration_time_is_kept():
    # watermark stays at 1000 (= s + rrs): s expires only when it passes 1000 (E = W - 0 - 1)
    r = run([(1001, "x-o"), (1003, "k-o1"), (1000, "k-o2")], [(1000, "k-s")], "RLLL",
            wm=(SQL0, SQL0), key="k")
    assert pairs(r) == [("k-o2", "k-s")]


def test_expired_row_is_removed_while_probing():
    # s2 (1000) is cached after s1 (1010), so the only timer is s1's (1011); the watermark
    # reaches 1001, so E_right = 1000 and the probe of o-a removes s2; the late o-b misses it
    r = run([(1001, "x-o"), (1005, "k-oa"), (1000, "k-ob")], [(1010, "k-s1"), (1000, "k-s2")],
            "RRLLL", wm=(SQL0, SQL0), key="k")
    assert pairs(r) == []
    assert [a.row for a, _ in r.dropped] == ["k-ob"]
    r = run([(1001, "x-o"), (1005, "k-oa"), (1000, "k-ob")], [(1010, "k-s1"), (1000, "k-s2")],
            "RRLLL", wm=(SQL0, SQL0), key="k", how="right")
    assert [(o.right, o.kind, o.emitted_pos, o.order[1]) for o in r.outputs] == \
        [("k-s2", "right_unmatched", 3, 0), ("k-s1", "right_unmatched", 5, 1)]


def test_very_late_row_does_not_probe_the_cache():
    # o-a's probe sets E_right = 1001 - 0 - 1 = 1000; o-c (window end 994 <= 1000) skips
    # the right cache, so s2 (1003, no timer of its own) is not removed there and is padded
    # at the end, by s1's timer; Flink drops o-a and o-c without a trace
    r = run([(1001, "x-o"), (995, "k-oa"), (1006, "x-o2"), (990, "k-oc")],
            [(1010, "k-s1"), (1003, "k-s2")], "RRLLLL", wm=(SQL0, SQL0), key="k", how="right")
    assert [(o.right, o.kind, o.emitted_pos) for o in r.outputs] == \
        [("k-s2", "right_unmatched", 6), ("k-s1", "right_unmatched", 6)]
    assert [a.row for a, _ in r.dropped] == ["k-oa", "k-oc"]


def test_a_row_sees_the_watermark_from_before_it():
    # l.time BETWEEN r.time + 1 AND r.time + 5: a left row reaches 1 ms *back* (lrs = -1).
    # o is processed under the watermark before it (none), so it is cached with a timer at
    # 1000 - 1 + 1; the rise to 1000 that o itself causes fires that timer right after it.
    bounds = IntervalBounds(ms(1), ms(5))
    r = run([(1000, "k-o")], [(1005, "x-s"), (997, "k-s")], "RLR", bounds, wm=(SQL0, SQL0),
            key="k", how="left")
    assert [(o.left, o.kind, o.emitted_pos, o.watermark, o.order) for o in r.outputs] == \
        [("k-o", "left_unmatched", 1, 1000, (1, 1, 1000, 0))]
    assert r.dropped == []          # k-s is cached (1000 < 997 + 5), then expires unmatched


def test_late_row_still_joins_cached_rows_and_is_not_dropped():
    # right row at 995 is kept until 995 + 10 + 1; the late left row at 997 still finds it
    bounds = IntervalBounds(ms(-4), ms(10))
    r = run([(1003, "x-o"), (997, "k-o")], [(995, "k-s"), (1002, "x-s")], "RLRL",
            bounds, wm=(SQL0, SQL0), key="k")
    assert pairs(r) == [("k-o", "k-s")] and r.dropped == []
    r = run([(1003, "x-o"), (997, "k-o")], [(995, "k-s"), (1002, "x-s")], "RLRL",
            bounds, how="left", wm=(SQL0, SQL0), key="k")
    assert [o.kind for o in r.outputs] == ["joined"]


def test_timer_fires_at_the_rise_of_another_key_and_orders_merge():
    W_rows = dict(left=[(1000, "a-o"), (1000, "b-o"), (1010, "x-o")],
                  right=[(1010, "x-s")], sides="LLLR", wm=(SQL0, SQL0))
    outs = []
    for key in "ab":
        outs += [(key, o) for o in run(**W_rows, how="left", key=key).outputs]
    # both left rows expire at the rise to 1010 (pos 3), timers at 1000 + 4 + 1
    assert [(k, o.emitted_pos, o.watermark, o.order[:3]) for k, o in outs] == \
        [("a", 3, 1010, (3, 1, 1005)), ("b", 3, 1010, (3, 1, 1005))]
    merged = sorted(outs, key=lambda ko: merge_order(*ko))
    assert [k for k, _ in merged] == ["a", "b"]


def test_watermark_of_output_is_min_time_before_any():
    r = run([(1000, "o")], [(1000, "s")], "LR", wm=(SQL0, SQL0))
    assert r.outputs[0].watermark == MIN_TIME


# -- properties ---------------------------------------------------------------------------

@st.composite
def inputs(draw, max_rows=7):
    n_left = draw(st.integers(0, max_rows))
    n_right = draw(st.integers(0, max_rows))
    times = st.integers(1000, 1040)
    left = [(draw(times), f"L{i}") for i in range(n_left)]
    right = [(draw(times), f"R{i}") for i in range(n_right)]
    sides = list("L" * n_left + "R" * n_right)
    sides = "".join(draw(st.permutations(sides)))
    lower = draw(st.integers(-15, 15))
    upper = lower + draw(st.integers(0, 15))
    li, ui = draw(st.booleans()), draw(st.booleans())
    if lower == upper:
        li = ui = True
    elif lower + 1 == upper and not li and not ui:
        ui = True
    use_condition = draw(st.booleans())
    return left, right, sides, IntervalBounds(ms(lower), ms(upper), li, ui), use_condition


def _condition(l, r):
    return (int(l[1:]) + int(r[1:])) % 3 != 0


def brute_force(left, right, bounds, condition):
    return sorted((lv, rv) for lt, lv in left for rt, rv in right
                  if bounds.contains(lt, rt) and (condition is None or condition(lv, rv)))


@settings(max_examples=300, deadline=None)
@given(inputs())
def test_without_watermarks_the_join_is_the_definition(case):
    left, right, sides, bounds, use_condition = case
    condition = _condition if use_condition else None
    arrivals, W = replay(left, right, sides, NONE, NONE)
    expected = brute_force(left, right, bounds, condition)
    matched_l = {lv for lv, _ in expected}
    matched_r = {rv for _, rv in expected}
    un_l = sorted(lv for _, lv in left if lv not in matched_l)
    un_r = sorted(rv for _, rv in right if rv not in matched_r)
    got = {how: run_key(arrivals, W, bounds, how, condition) for how in HOWS}
    for how, res in got.items():
        assert sorted(pairs(res)) == expected, how
        assert res.dropped == []
        assert [o.order for o in res.outputs] == sorted(o.order for o in res.outputs)
    assert [o for o in got["inner"].outputs if o.kind != "joined"] == []
    assert sorted(o.left for o in got["left"].outputs if o.kind == "left_unmatched") == un_l
    assert sorted(o.right for o in got["right"].outputs if o.kind == "right_unmatched") == un_r
    full = got["full"].outputs
    assert sorted(o.left for o in full if o.kind == "left_unmatched") == un_l
    assert sorted(o.right for o in full if o.kind == "right_unmatched") == un_r
    assert {o.kind for o in got["left"].outputs} <= {"joined", "left_unmatched"}
    # nothing expires before the end: padded rows come out at the end of input
    assert all(o.emitted_pos == len(sides) for res in got.values() for o in res.outputs
               if o.kind != "joined")


@settings(max_examples=300, deadline=None)
@given(inputs(), st.integers(0, 12), st.integers(0, 12))
def test_with_watermarks_every_row_is_accounted_for(case, delay_l, delay_r):
    left, right, sides, bounds, use_condition = case
    condition = _condition if use_condition else None
    wm = (WatermarkStrategy.for_sql_delay(Duration(delay_l)),
          WatermarkStrategy.for_sql_delay(Duration(delay_r)))
    arrivals, W = replay(left, right, sides, *wm)
    expected = set(brute_force(left, right, bounds, condition))
    got = {how: run_key(arrivals, W, bounds, how, condition) for how in HOWS}
    joined = sorted(pairs(got["inner"]))
    assert set(joined) <= expected                       # never a wrong pair
    assert len(set(joined)) == len(joined)               # never twice
    for how, res in got.items():
        assert sorted(pairs(res)) == joined, how          # padding never changes the pairs
        assert [o.order for o in res.outputs] == sorted(o.order for o in res.outputs)
        for o in res.outputs:
            assert o.watermark == (W.before(o.emitted_pos) if o.order[1] == 0 else W.after(o.emitted_pos))
    full = got["full"]
    in_pairs = {v for p in joined for v in p}
    padded = [o.left or o.right for o in full.outputs if o.kind != "joined"]
    dropped = [a.row for a, _ in full.dropped]
    for _, v in left + right:                            # every row: joined, padded once, or dropped
        assert (v in in_pairs) + padded.count(v) + dropped.count(v) == 1, v
    inner_dropped = {a.row for a, _ in got["inner"].dropped}
    assert not inner_dropped & in_pairs


# -- finding interval joins in SQL (no Spark) ---------------------------------------------

class _Src:
    def __init__(self, columns):
        self.columns = columns


class _FakeStream:
    def __init__(self, time, columns):
        self.time, self.source = time, _Src(columns)


def _found(query):
    from kit.sql.interval import find_interval_joins
    from kit.sql.statement import Statement
    streams = {"orders": _FakeStream("t", ["t", "oid", "id"]), "ships": _FakeStream("st", ["st", "sid", "id"])}
    return list(find_interval_joins(Statement(query), lambda n: streams.get(n.lower())).values())


@pytest.mark.parametrize("query, how, keys, bounds", [
    ("SELECT * FROM Orders o, Ships s WHERE o.id = s.id AND o.t BETWEEN s.st - INTERVAL '4' SECOND AND s.st",
     "inner", (("id", "id"),), IntervalBounds(Time.seconds(-4), Time.seconds(0))),
    ("SELECT * FROM Orders AS o LEFT OUTER JOIN Ships AS s ON o.id = s.id AND o.t >= s.st - INTERVAL '4' SECOND "
     "AND o.t < s.st", "left", (("id", "id"),),
     IntervalBounds(Time.seconds(-4), Time.seconds(0), upper_inclusive=False)),
    # the right time in front, bounds flipped; the tighter of two lower bounds; no key
    ("SELECT * FROM Orders o FULL JOIN Ships s ON s.st BETWEEN o.t AND o.t + INTERVAL '1' MINUTE "
     "AND o.t > s.st - INTERVAL '30' SECOND", "full", (),
     IntervalBounds(Time.seconds(-30), Time.seconds(0), lower_inclusive=False)),
    ("SELECT * FROM Orders o RIGHT JOIN Ships s ON o.id = s.id AND s.st < o.t + INTERVAL '1' SECOND "
     "AND INTERVAL '1' SECOND + s.st >= o.t", "right", (("id", "id"),),
     IntervalBounds(Time.seconds(-1), Time.seconds(1), lower_inclusive=False)),
])
def test_sql_interval_join_forms_are_found(query, how, keys, bounds):
    [call] = _found(query)
    assert (call.how, call.keys, call.bounds) == (how, keys, bounds)


@pytest.mark.parametrize("query", [
    "SELECT * FROM Orders o JOIN Ships s ON o.id = s.id",                                # no bound
    "SELECT * FROM Orders o JOIN Ships s ON o.id = s.id AND o.t <= s.st",                # one bound
    "SELECT * FROM Orders o JOIN Plain p ON o.id = p.id AND o.t BETWEEN p.st AND p.st",  # not a stream
    "SELECT * FROM Orders o JOIN Ships s ON o.id = s.id AND o.oid BETWEEN s.sid AND s.sid",  # not the times
    "SELECT * FROM Orders o, Ships s WHERE o.t NOT BETWEEN s.st AND s.st + INTERVAL '1' SECOND",
])
def test_sql_joins_without_a_time_bound_stay_plain(query):
    assert _found(query) == []


def test_sql_bounds_that_hold_no_time_point_at_the_condition():
    query = "SELECT *\nFROM Orders o JOIN Ships s\n  ON o.t BETWEEN s.st AND s.st - INTERVAL '1' SECOND"
    with pytest.raises(kit.SqlError, match="line 3, column 3: the interval join of Orders and Ships"):
        _found(query)


# -- on Spark (few and small) -------------------------------------------------------------

S = 1000


def _at(seconds):
    import pandas as pd
    return pd.Timestamp("2024-01-01") + pd.Timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def shop(spark):
    """Orders and shipments, ``for_sql_delay(0)``, merged by event time:

    pos 0 o1 a@10, 1 s1 a@11, 2 s2 a@12, 3 o2 b@20, 4 s3 b@22, 5 o3 a@30, 6 o4 a@12 (late: the
    watermark is 22, and s1, s2 are gone), 7 o5 NULL@25, 8 s4 a@33, 9 s5 b@29 (late, fits nothing),
    10 o6 c@40, 11 s6 c@40."""
    import pandas as pd
    orders = pd.DataFrame({"t": [_at(s) for s in (10, 20, 30, 12, 25, 40)],
                           "oid": ["o1", "o2", "o3", "o4", "o5", "o6"], "id": ["a", "b", "a", "a", None, "c"]})
    ships = pd.DataFrame({"st": [_at(s) for s in (11, 12, 22, 33, 29, 40)],
                          "sid": ["s1", "s2", "s3", "s4", "s5", "s6"], "id": ["a", "a", "b", "a", "b", "c"]})
    return (kit.stream(spark.createDataFrame(orders), time="t", watermark=SQL0),
            kit.stream(spark.createDataFrame(ships), time="st", watermark=SQL0), orders, ships)


def _driver(join):
    """``run_key`` per key on the driver over the join's merged arrivals, in merge order."""
    from kit.replay.interleave import Arrival
    by_key = {}
    for r in join.merged.orderBy("_pos").collect():
        row = (r._vl if r._side == 0 else r._vr).asDict()
        by_key.setdefault(r._k0, []).append(Arrival(r._pos, r._side, r._seq, r._ts, row, r._late, r._pt))
    outputs, dropped = [], []
    for key, arrivals in by_key.items():
        condition = (lambda l, r: False) if key is None else None
        result = run_key(arrivals, join.watermarks, join.bounds, join.how, condition)
        outputs += [((o.order[0], o.order[1], o.order[2], key is not None, key or "", o.order[3]), o)
                    for o in result.outputs]
        dropped += [(a.side, a.seq) for a, _ in result.dropped]
    edge = lambda w: None if w in (MIN_TIME, MAX_TIME) else w
    return ([(o.kind, o.emitted_pos, edge(o.watermark), o.left_seq, o.right_seq) for _, o in sorted(outputs)],
            sorted(dropped))


def test_spark_layer_equals_run_key_per_key_on_the_driver(shop):
    from kit.joins.interval import interval_join
    o, s, _, _ = shop
    join = interval_join(o, s, "id", IntervalBounds(Duration.of_seconds(-4), Duration(0)), "full")
    details = join.details().collect()
    got = [(d.kind, d.emitted_pos, d.watermark, d.left_seq, d.right_seq) for d in details]
    assert (got, []) == _driver(join)
    assert join.df.columns == ["t", "oid", "id", "st", "sid", "id_right"]
    assert [(r.oid, r.sid) for r in join.df.collect()] == [   # Flink's emission order
        ("o1", "s1"), ("o1", "s2"), ("o2", "s3"), ("o4", None), ("o3", "s4"), ("o5", None), (None, "s5"),
        ("o6", "s6")]
    # padded: o4 and s5 (late) at once, o5 (NULL key: never joins) at its cleanup timer, 25 + 4 + 1
    base = _at(0).value // 10**6
    assert [r[:3] for r in got if r[0] != "joined"] == [
        ("left_unmatched", 6, base + 22 * S), ("left_unmatched", 8, base + 30 * S),
        ("right_unmatched", 9, base + 30 * S)]


def _plain(spark, query, orders, ships):
    """The same query as a plain Spark join over plain DataFrames (no streams)."""
    return {(r.oid, r.sid) for r in kit.sql(query, Orders=spark.createDataFrame(orders),
                                           Ships=spark.createDataFrame(ships)).collect()}


def test_sql_between_form_gives_the_interval_join_not_the_plain_join(spark, shop):
    o, s, orders, ships = shop
    query = ("SELECT o.oid, s.sid FROM Orders o, Ships s "
             "WHERE o.id = s.id AND o.t BETWEEN s.st - INTERVAL '4' SECOND AND s.st")
    result = kit.sql(query, Orders=o, Ships=s)
    assert result.columns == ["oid", "sid"]
    got = sorted(tuple(r) for r in result.collect())
    assert got == [("o1", "s1"), ("o1", "s2"), ("o2", "s3"), ("o3", "s4"), ("o6", "s6")]
    # Spark alone would join the late o4 with s1 and s2: its times fit, but Flink dropped it
    assert _plain(spark, query, orders, ships) - set(got) == {("o4", "s2")}
    # nothing lost silently: the join lists the rows it dropped (o4, and s5 that is late and fits nothing)
    dropped = [d for d in result.interval_joins[0].details().collect() if d.kind == "dropped"]
    assert [(d.left_seq, d.right_seq) for d in dropped] == [(3, None), (None, 4)]
    assert all(d.reason.startswith("too late") for d in dropped)


def test_sql_never_broadcasts_the_joined_pairs(shop):
    """``kit.sql`` joins each input with the operator's pairs; the planner takes the pairs'
    size for the input's, but they can be many times more (a hot key's ran a broadcast out of
    memory): they are joined by a sort-merge join, whatever their guessed size."""
    import re
    o, s, _, _ = shop
    query = "SELECT o.oid, s.sid FROM Orders o, Ships s WHERE o.id = s.id AND o.t BETWEEN s.st - INTERVAL '4' SECOND AND s.st"
    plan = kit.sql(query, Orders=o, Ships=s)._jdf.queryExecution().executedPlan().toString()
    on_pairs = re.findall(r"(\w+)Join \[(?:cast\()?(__kit_[lr])#\d+L?(?: as bigint\))?\], \[\2#\d+L?\]", plan)
    assert sorted(on_pairs) == [("SortMerge", "__kit_l"), ("SortMerge", "__kit_r")], plan


def test_sql_outer_forms_pad_as_flink_does(spark, shop):
    o, s, orders, ships = shop
    # >= / < : o6 and s6 meet at the same time, which the strict upper bound excludes
    query = ("SELECT o.oid, s.sid FROM Orders o LEFT JOIN Ships s ON o.id = s.id "
             "AND o.t >= s.st - INTERVAL '4' SECOND AND o.t < s.st")
    got = sorted(map(tuple, kit.sql(query, Orders=o, Ships=s).collect()), key=str)
    assert got == sorted([("o1", "s1"), ("o1", "s2"), ("o2", "s3"), ("o3", "s4"), ("o4", None),
                          ("o5", None), ("o6", None)], key=str)
    # FULL with more in ON: o1 meets s2 only, so it is not padded for s1, which is padded alone
    query = ("SELECT o.oid, s.sid FROM Orders o FULL OUTER JOIN Ships s ON o.id = s.id AND s.sid <> 's1' "
             "AND o.t BETWEEN s.st - INTERVAL '4' SECOND AND s.st")
    got = sorted(map(tuple, kit.sql(query, Orders=o, Ships=s).collect()), key=str)
    assert got == sorted([("o1", "s2"), (None, "s1"), ("o2", "s3"), ("o3", "s4"), ("o6", "s6"), ("o4", None),
                          ("o5", None), (None, "s5")], key=str)
    assert ("o4", "s2") in _plain(spark, query, orders, ships)     # the plain join would match the late o4


def test_a_changelog_input_is_refused_on_spark_naming_its_row(spark, shop):
    """An input with an ``op`` column is a changelog: its rows reach the operator with their
    values (an insert-only pair's do not: ``per_key(values=False)``), and its first change that
    is not an insert is refused with the row, as Flink's interval join refuses updates."""
    from pyspark.sql import functions as F

    from kit.joins.interval import interval_join
    o, s, _, _ = shop
    changes = o.source.withColumn("op", F.when(F.col("oid") == "o2", "-U").otherwise("+I"))
    join = interval_join(kit.stream(changes, time="t", watermark=SQL0), s, "id",
                         IntervalBounds(Duration.of_seconds(-4), Duration(0)))
    with pytest.raises(KitError, match=r"\(\{'t': .*'oid': 'o2'.*\}\) is a -U change; the interval join"):
        join.df.collect()


@st.composite
def keyed_inputs(draw):
    """Two sides of ``(key, time ms)`` rows (keys a, b and NULL; times around 0, where Flink's
    cleanup clears a cache), the watermark delays, the bounds, the join type and how the sides
    interleave."""
    side = st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.integers(-20, 60)), max_size=30)
    lower = draw(st.integers(-15, 15))
    width = draw(st.integers(0, 15))
    bounds = IntervalBounds(ms(lower), ms(lower + width), width == 0 or draw(st.booleans()), True)
    return (draw(side), draw(side), draw(st.integers(0, 12)), draw(st.integers(0, 12)), bounds,
            draw(st.sampled_from(HOWS)), draw(st.sampled_from(["event_time", "left_first", "right_first"])))


@settings(max_examples=8, deadline=None)
@given(keyed_inputs())
def test_the_jvm_operator_gives_the_python_replays_rows(spark, case):
    """``kit/jvm/IntervalJoin.java`` against the reference (``RowTimeIntervalJoin`` per key on
    the replay driver): the same outputs with the same order columns, the same dropped rows."""
    import pandas as pd

    from kit import jvm
    from kit.joins.interval import interval_join
    left, right, delay_l, delay_r, bounds, how, interleave = case
    assert jvm.available(spark, "IntervalJoin")

    def stream(rows, delay):
        frame = pd.DataFrame({"id": [k for k, _ in rows], "t": [pd.Timestamp(t, unit="ms") for _, t in rows]})
        df = spark.createDataFrame(frame, "id string, t timestamp") if rows else spark.createDataFrame([], "id string, t timestamp")
        return kit.stream(df, time="t", watermark=WatermarkStrategy.for_sql_delay(Duration(delay)))

    join = interval_join(stream(left, delay_l), stream(right, delay_r), "id", bounds, how, interleave=interleave)
    python, java = (sorted(map(tuple, join._replayed(jvm=on).collect()), key=repr) for on in (False, True))
    assert java == python


def test_the_jvm_operator_fires_the_right_cache_first(spark):
    """Both sides' cleanup timers at 15 (o@10 waits 10 + 4 + 1, s@16 waits 16 - 2 + 1), fired by
    the end of input at the rise to 20: Flink pads the right row first, then the left one."""
    import pandas as pd

    from kit.joins.interval import interval_join

    def stream(rows):
        frame = pd.DataFrame({"id": [k for k, _ in rows], "t": [pd.Timestamp(t, unit="ms") for _, t in rows]})
        return kit.stream(spark.createDataFrame(frame, "id string, t timestamp"), time="t", watermark=SQL0)

    join = interval_join(stream([("a", 10), ("x", 20)]), stream([("a", 16), ("x", 20)]), "id",
                         IntervalBounds(ms(-4), ms(-2)), "full")
    rows = {jvm: sorted(tuple(r) for r in join._replayed(jvm=jvm).where("_k0 = 'a'").select(
        "_index", "_kind", "_timer").collect()) for jvm in (False, True)}
    assert rows[True] == rows[False] == [(0, "right_unmatched", 15), (1, "left_unmatched", 15)]
