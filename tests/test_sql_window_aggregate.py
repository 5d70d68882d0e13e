"""A window aggregation over a TUMBLE or HOP TVF of a stream runs through the window operator's fast
path (kit/sql/window_aggregate.py): the same rows, names, types and late rows as the
reference (the TVF's view of the annotated stream, then Spark's GROUP BY)."""

import datetime as dt
import sys
from decimal import Decimal
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kit
from kit.sql.statement import Statement
from kit.sql.window_aggregate import window_aggregate
from kit.time import Duration, WatermarkStrategy

SPAN = 27720 * 100   # a multiple of every window size drawn below
SQL = sys.modules["kit.sql"]
QUERY = ("SELECT {keys}window_start, window_end, window_time, COUNT(*), COUNT(v) AS cv, SUM(v) AS total, "
         "MIN(v), MAX(v) AS top, AVG(v) AS mean, SUM(b), AVG(b), SUM(d), AVG(d), SUM(t), AVG(t), "
         "AVG(w) AS wmean, SUM(w) AS wsum FROM TABLE({window}) GROUP BY {keys}window_start, window_end, window_time")
BIG = [None, -2, 7, 2 ** 62, 2 ** 63 - 1, -2 ** 63]   # BIGINT sums that wrap around (as Flink's)
MS = "INTERVAL '{}0.{:03d}' SECOND".format   # MS("", 5): 5 ms, MS("-", 5): -5 ms


@st.composite
def cases(draw):
    """A window and 12 small streams one after the other in one input (each shifted by SPAN)."""
    slide = draw(st.integers(2, 6))
    size = slide * draw(st.integers(1, 3))
    rows = []
    for case in range(12):
        t = draw(st.integers(-20, 20))
        for _ in range(draw(st.integers(1, 10))):
            t += draw(st.integers(0, 6))   # forward with disorder, some far behind (late)
            rows.append((f"{case}{draw(st.sampled_from('ab'))}", draw(st.sampled_from(["x", None])),
                         case * SPAN + t - draw(st.sampled_from([0, 0, 3, 9, 25])),
                         draw(st.one_of(st.none(), st.integers(-5, 5), st.sampled_from([2 ** 31 - 1, -2 ** 31]))),
                         draw(st.sampled_from(BIG)), draw(st.sampled_from([None, Decimal("-1.05"), Decimal("2.50")])),
                         draw(st.sampled_from([None, -128, 3, 127])), draw(st.sampled_from([None, -2.0, 1.5]))))
    offset = draw(st.integers(-slide + 1, slide - 1))
    offset = MS("-" if offset < 0 else "", abs(offset))
    window = draw(st.sampled_from([f"TUMBLE(TABLE s, DESCRIPTOR(ts), {MS('', slide)}, {offset})",
                                   f"HOP(TABLE s, DESCRIPTOR(ts), {MS('', slide)}, {MS('', size)}, {offset})"]))
    return dict(rows=rows, window=window,
                delay=draw(st.sampled_from([0, 2, 5])), keys=draw(st.sampled_from(["k, ", "k, j, ", ""])),
                timestamps=draw(st.booleans()))


def _stream(case):
    rows = case["rows"]
    if case["timestamps"]:
        epoch = dt.datetime(2024, 1, 1)
        rows = [(k, j, epoch + dt.timedelta(milliseconds=t), *rest) for k, j, t, *rest in rows]
    df = kit.spark().createDataFrame(rows, f"k string, j string, ts {'timestamp' if case['timestamps'] else 'long'}, "
                                           "v int, b bigint, d decimal(10, 2), t tinyint, w double")
    return kit.stream(df, time="ts", watermark=WatermarkStrategy.for_sql_delay(Duration.of_millis(case["delay"])))


def _sorted(df):
    return sorted((tuple(r) for r in df.collect()), key=repr)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_window_operator_gives_the_references_rows(spark, case):
    query = QUERY.format(keys=case["keys"], window=case["window"])
    s = _stream(case)
    with mock.patch.object(SQL, "window_aggregate", return_value=None):
        expected = kit.sql(query, s=s)
    got = window_aggregate(Statement(query), {"s": s}, lambda name, frame: kit.sql(query, **{name: frame}))
    assert got is not None                                    # the fast path took it
    assert [(f.name, f.dataType, f.nullable) for f in got.schema] == [(f.name, f.dataType, f.nullable) for f in expected.schema]
    want, have = _sorted(expected), _sorted(got)
    assert [r[:-2] for r in have] == [r[:-2] for r in want]
    assert [v for r in have for v in r[-2:]] == pytest.approx([v for r in want for v in r[-2:]])   # AVG(w), SUM(w)
    late, want_late = got.late_rows, expected.late_rows
    assert [(f.name, f.dataType) for f in late.schema] == [(f.name, f.dataType) for f in want_late.schema]
    assert late.collect() == want_late.orderBy("seq").collect()


@pytest.mark.parametrize("query", [
    "SELECT k, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
    "WHERE v > 0 GROUP BY k, window_start, window_end",                 # a WHERE
    "SELECT k, window_start, COUNT(DISTINCT v) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
    "GROUP BY k, window_start, window_end",                             # DISTINCT
    "SELECT k, window_start, MIN(w) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
    "GROUP BY k, window_start, window_end",                             # MIN of a DOUBLE (NaN)
    "SELECT k, window_start, COUNT(*) + 1 FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
    "GROUP BY k, window_start, window_end",                             # an expression
    "SELECT window_start, COUNT(*) FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND, "
    "INTERVAL '2' SECOND)) GROUP BY window_start, window_end",          # CUMULATE
    "SELECT k, window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
    "GROUP BY k, window_start",                                         # no window_end: a regular aggregation
    "SELECT k, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
    "GROUP BY k, window_start, window_end ORDER BY COUNT(*)",          # ORDER BY an expression
])
def test_other_queries_run_the_reference(spark, query):
    s = _stream(dict(rows=[("a", "x", 5, 1, 1, None, 1, 1.0)], timestamps=False, delay=0))
    assert window_aggregate(Statement(query), {"s": s}, lambda name, frame: kit.sql(query, **{name: frame})) is None


def test_order_by_and_limit_apply_to_the_operators_rows(spark):
    rows = [("b", None, 7, None, None, None, None, None)] + [("a", "x", t, 1, 1, None, 1, 1.0) for t in (5, 1500, 1600, 2500)]
    s = _stream(dict(rows=rows, timestamps=False, delay=0))
    query = ("SELECT k AS key, window_start AS ws, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), "
             "INTERVAL '1' SECOND)) AS w GROUP BY w.k, window_start, window_end ORDER BY n DESC, ws, key LIMIT 3")
    result = kit.sql(query, s=s)
    assert [tuple(r) for r in result.collect()] == [("a", 1000, 2), ("a", 0, 1), ("b", 0, 1)]
    assert result.columns == ["key", "ws", "n"] and result.late_rows.count() == 0


def test_the_late_rows_are_planned_when_first_read(spark):
    """``late_rows`` costs no plan until read (most results never read it), then is one
    DataFrame; the result stays a DataFrame."""
    s = _stream(dict(rows=[("a", "x", t, 1, 1, None, 1, 1.0) for t in (1500, 5)], timestamps=False, delay=0))
    query = "SELECT k, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND)) " \
            "GROUP BY k, window_start, window_end"
    with mock.patch.object(type(s), "deferred_df", autospec=True, side_effect=type(s).deferred_df) as read:
        result = kit.sql(query, s=s)
        assert read.call_count == 0 and isinstance(result, type(spark.range(1)))
        late = result.late_rows
        assert read.call_count == 1 and result.late_rows is late
    assert [(r.k, r.ts) for r in late.collect()] == [("a", 5)]
    assert [tuple(r) for r in result.orderBy("window_start").collect()] == [("a", 1000, 1)]


def test_a_routed_window_aggregation_takes_the_window_operators_fast_path(spark):
    """kit.sql hands the TVF to the DataStream window, whose own fast path must take it (its
    output names ``kit_a0..`` are not working columns): the replay would give the same rows
    20x slower (a 10M-row TUMBLE: 5 s -> 100 s)."""
    from kit.windows import fast
    s = _stream({"rows": [("a", None, 1, 1, 1, None, 1, 1.0), ("b", "x", 12, 2, 2, None, 2, 2.0)], "timestamps": False, "delay": 0})
    with mock.patch.object(fast, "firings", wraps=fast.firings) as taken:
        kit.sql("SELECT k, window_start, COUNT(*) AS c, SUM(v) AS s FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), "
                "INTERVAL '0.01' SECOND)) GROUP BY k, window_start, window_end", s=s).collect()
    assert taken.call_count == 1
