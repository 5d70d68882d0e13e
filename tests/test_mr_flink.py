"""MATCH_RECOGNIZE under semantics="flink" / "flink-2.3": every seed 001 table, every golden
mr_* output of real Flink 2.3, and every planning/runtime error Flink raises."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goldens import load
from kit.match_recognize.errors import MatchRecognizeError, MatchRuntimeError, NotSupportedByFlink
from kit.match_recognize.matcher import run_partition
from kit.match_recognize.spec import (ALL_ROWS_SHOW, AfterMatch, Aggregate, Alternation, Anchor,
                                      Binary, Exclusion, Semantics,
                                      Cast, Classifier, Column, Concat, IsNull, Label, Literal,
                                      MatchNumber, MatchRecognize, MatchRowtime, Measure, Nav,
                                      OrderItem, Permute, Quantified)

# ---------------------------------------------------------------- helpers


def pat(*items):
    return Concat(tuple(Label(i) if isinstance(i, str) else i for i in items))


def q(var, mn, mx, greedy=True):
    return Quantified(Label(var), mn, mx, greedy)


def c(ref):
    """``"A.price"`` -> Column("price", "A"); ``"price"`` -> Column("price")."""
    var, _, name = ref.rpartition(".")
    return Column(name, var or None)


def lit(v):
    return Literal(v, "BIGINT" if isinstance(v, int) else "DOUBLE")


def b(op, left, right):
    return Binary(op, c(left) if isinstance(left, str) else left,
                  c(right) if isinstance(right, str) else right)


def last(ref, n=0):
    return Nav("LAST", c(ref), n)


def first(ref, n=0):
    return Nav("FIRST", c(ref), n)


def mr(pattern, define=(), measures=(), after=None, within_ms=None, rows=None):
    kw = {} if rows is None else {"rows_per_match": rows}
    return MatchRecognize(pattern=pattern, partition_by=("symbol",),
                          order_by=(OrderItem("rowtime"),),
                          measures=tuple(Measure(e, a) for a, e in measures),
                          after_match=AfterMatch(*after) if isinstance(after, tuple) else after,
                          within_ms=within_ms, define=tuple(define), **kw)


def ticker(prices, start="2011-04-01T10:00:00", step_s=1, tax=None):
    n = len(prices)
    return {"symbol": np.array(["ACME"] * n, dtype=object),
            "rowtime": np.datetime64(start, "ms") + np.arange(n) * np.timedelta64(step_s, "s"),
            "price": np.array(prices, dtype=np.int64),
            "tax": np.array(tax or [1] * n, dtype=np.int64)}


def fmt(v):
    if isinstance(v, np.datetime64):
        return str(v.astype("datetime64[ms]")).replace("T", " ")
    return v


def run(spec, cols, semantics="flink", **kw):
    return [tuple(fmt(v) for v in row) for row in run_partition(cols, spec, semantics, **kw).rows]


# ---------------------------------------------------------------- the seed's queries

VSHAPE = mr(pat("START_ROW", q("PRICE_DOWN", 1, None), "PRICE_UP"),
            define=[("PRICE_DOWN", b("OR", b("AND", IsNull(last("PRICE_DOWN.price", 1)),
                                             b("<", "PRICE_DOWN.price", "START_ROW.price")),
                                     b("<", "PRICE_DOWN.price", last("PRICE_DOWN.price", 1)))),
                    ("PRICE_UP", b(">", "PRICE_UP.price", last("PRICE_DOWN.price", 1)))],
            measures=[("start_tstamp", c("START_ROW.rowtime")),
                      ("bottom_tstamp", last("PRICE_DOWN.rowtime")),
                      ("end_tstamp", last("PRICE_UP.rowtime"))],
            after=("TO LAST", "PRICE_UP"))

AGGREGATION = mr(pat(q("A", 1, None), "B"),
                 define=[("A", b("<", Aggregate("AVG", c("A.price")), lit(15)))],
                 measures=[("start_tstamp", first("A.rowtime")), ("end_tstamp", last("A.rowtime")),
                           ("avgPrice", Aggregate("AVG", c("A.price")))],
                 after=("PAST LAST ROW",))


def greedy_reluctant(greedy):
    return mr(pat("A", q("B", 0, None, greedy), "C"),
              define=[("A", b(">", "A.price", lit(10))), ("B", b("<", "B.price", lit(15))),
                      ("C", b(">", "C.price", lit(12)))],
              measures=[("lastPrice", c("C.price"))], after=("PAST LAST ROW",))


def within(ms):
    return mr(pat("A", q("B", 0, None), "C"),
              define=[("B", b(">", "B.price", b("-", "A.price", lit(10)))),
                      ("C", b("<", "C.price", b("-", "A.price", lit(10))))],
              measures=[("dropTime", c("C.rowtime")), ("dropDiff", b("-", "A.price", "C.price"))],
              after=("PAST LAST ROW",), within_ms=ms)


OUTPUT_MODE = dict(pattern=pat(q("A", 1, None), "B"),
                   define=[("A", b("OR", IsNull(last("A.price", 1)), b(">", "A.price", last("A.price", 1)))),
                           ("B", b("<", "B.price", last("A.price")))],
                   measures=[("startPrice", first("A.price")), ("topPrice", last("A.price")),
                             ("lastPrice", c("B.price"))])


def after_match(*after):
    return mr(pat(q("A", 1, None), "C"),
              define=[("A", b("<", Aggregate("SUM", c("A.price")), lit(30)))],
              measures=[("sumPrice", Aggregate("SUM", c("A.price"))),
                        ("startTime", first("rowtime")), ("endTime", last("rowtime"))],
              after=after)


T = "2011-04-01 10:00:0{}.000".format
XYZ = "2018-09-17 10:00:0{}.000".format


def test_vshape_seed_table():
    cols = ticker([12, 17, 19, 21, 25, 18, 15, 14, 24, 25, 19])
    assert run(VSHAPE, cols) == [(T(4), T(7), T(8))]


def test_aggregation_documented_and_runtime():
    cols = ticker([12, 17, 13, 16, 25, 2, 4, 10, 15, 25, 25, 30])
    docs = [(T(0), T(3), 14.5), ("2011-04-01 10:00:05.000", "2011-04-01 10:00:10.000", 13.5)]
    assert run(AGGREGATION, cols, "flink") == docs
    assert run(AGGREGATION, cols, "flink-2.3") == [r[:2] + (int(r[2]),) for r in docs]


@pytest.mark.parametrize("greedy, expected", [(True, [(16,)]), (False, [(13,), (16,)])])
def test_greedy_vs_reluctant(greedy, expected):
    cols = ticker([10, 11, 12, 13, 14, 16])
    assert run(greedy_reluctant(greedy), cols) == expected


def test_trace_of_the_greedy_run():
    seen = []
    run_partition(ticker([10, 11, 12, 13, 14, 16]), greedy_reluctant(True), trace=seen)
    first = [(t["row"], t["variable"], t["result"]) for t in seen if t["rows"][0] == 1]
    # B* is entered by a state that also tries C (Flink's zeroOrMore entry is not greedy);
    # inside the loop C is tried only when B fails: 13 and 14 never get to be C
    assert first == [(1, "A", True), (2, "B", True), (2, "C", False), (3, "B", True),
                     (4, "B", True), (5, "B", False), (5, "C", True)]


def test_greedy_does_not_give_rows_back_and_open_matches_are_dropped():
    cols = ticker([10, 11, 12, 13, 14])   # golden p1: the input without its last row
    assert run(greedy_reluctant(True), cols) == []
    assert run(greedy_reluctant(False), cols) == [(13,)]


def test_within_documented_inclusive_and_runtime_exclusive():
    cols = ticker([20, 17, 18, 11, 14, 9, 15, 14, 24, 1, 19], step_s=20 * 60)
    assert run(within(3_600_000), cols, "flink") == [("2011-04-01 13:00:00.000", 14)]
    assert run(within(3_600_000), cols, "flink-2.3") == [("2011-04-01 13:00:00.000", 13)]
    assert run(within(40 * 60_000), cols, "flink-2.3") == [("2011-04-01 13:00:00.000", 23)]


def test_output_mode_default_after_match():
    cols = ticker([10, 12, 13, 11])
    spec = mr(**OUTPUT_MODE)
    assert run(spec, cols, "flink") == [(10, 13, 11)]
    assert run(spec, cols, "flink-2.3") == [(10, 13, 11), (12, 13, 11), (13, 13, 11)]
    assert run(spec, cols, "standard") == [(10, 13, 11)]


AFTER_INPUT = [7, 9, 10, 5, 10, 7, 14]


@pytest.mark.parametrize("after, expected", [
    (("PAST LAST ROW",), [(26, 1, 4), (17, 5, 7)]),
    (("TO NEXT ROW",), [(26, 1, 4), (24, 2, 5), (25, 3, 6), (22, 4, 7), (17, 5, 7)]),
    (("TO LAST", "A"), [(26, 1, 4), (25, 3, 6), (17, 5, 7)]),
])
def test_after_match_strategies(after, expected):
    cols = ticker(AFTER_INPUT, start="2018-09-17T10:00:01")
    assert run(after_match(*after), cols) == [(s, XYZ(a), XYZ(e)) for s, a, e in expected]


def test_skip_to_first_a_fails_at_run_time():
    cols = ticker(AFTER_INPUT, start="2018-09-17T10:00:01")
    with pytest.raises(MatchRuntimeError, match="Could not skip to first element of a match"):
        run(after_match("TO FIRST", "A"), cols)


def test_skip_to_a_variable_without_rows_fails_at_run_time():
    spec = mr(pat("A", q("B", 0, None), "C"), define=[("B", b(">", "B.price", lit(100)))],
              measures=[("a", c("A.price"))], after=("TO LAST", "B"))
    with pytest.raises(MatchRuntimeError, match="Could not skip to B"):
        run(spec, ticker([1, 2, 3]))


# ---------------------------------------------------------------- real Flink 2.3 goldens


def golden_cases():
    names = ["mr_a_vshape", "mr_b_aggregation", "mr_c_greedy_reluctant", "mr_d_within",
             "mr_e_output_mode", "mr_f_after_match", "mr_p1_greedy_truncated",
             "mr_p2_quantifier_at_end", "mr_p4_vshape_out_of_order_wm5",
             "mr_p6_vshape_two_symbols_same_ts_wm1ms", "mr_p3_vshape_out_of_order_wm0",
             "mr_p5_vshape_two_symbols_same_ts_wm0"]
    for name in names:
        for mode in ("batch", "streaming"):
            g = load(f"{name}_{mode}.json")
            for i, query in enumerate(g["queries"]):
                yield pytest.param(name, mode, i, id=f"{name}_{mode}_{i}")


def _golden_spec(sql):
    """The spec of a golden query, recognised by its text (the SQL parser is elsewhere)."""
    s = " ".join(sql.split())
    if "START_ROW PRICE_DOWN+ PRICE_UP" in s:
        return VSHAPE
    if "PATTERN (A+ B)" in s and "AVG(A.price) < 15" in s:
        if "CAST" in s:
            return mr(AGGREGATION.pattern, AGGREGATION.define,
                      [(m.alias, m.expr) for m in AGGREGATION.measures[:2]]
                      + [("avgPrice", Aggregate("AVG", Cast(c("A.price"), "DOUBLE")))],
                      AGGREGATION.after_match)
        return AGGREGATION
    if "PATTERN (A B* C)" in s and "WITHIN" not in s:
        return greedy_reluctant(True)
    if "PATTERN (A B*? C)" in s:
        return greedy_reluctant(False)
    if "WITHIN" in s:
        minutes = {"'1' HOUR": 60, "'59' MINUTE": 59, "'40' MINUTE": 40}
        return within(next(v for k, v in minutes.items() if k in s) * 60_000)
    if "topPrice" in s:
        after = None
        if "SKIP TO NEXT ROW" in s:
            after = ("TO NEXT ROW",)
        elif "SKIP PAST LAST ROW" in s:
            after = ("PAST LAST ROW",)
        return mr(after=after, **OUTPUT_MODE)
    if "sumPrice" in s:
        for text, after in [("PAST LAST ROW", ("PAST LAST ROW",)), ("TO NEXT ROW", ("TO NEXT ROW",)),
                            ("TO LAST A", ("TO LAST", "A")), ("TO FIRST A", ("TO FIRST", "A"))]:
            if "SKIP " + text in s:
                return after_match(*after)
    if "aPrice" in s:
        b_quant = {"(A B*)": q("B", 0, None), "(A B+)": q("B", 1, None),
                   "(A B+?)": q("B", 1, None, False), "(A B{2})": q("B", 2, 2)}
        node = next(v for k, v in b_quant.items() if f"PATTERN {k}" in s)
        return mr(pat("A", node), define=[("A", b(">", "A.price", lit(10))),
                                          ("B", b("<", "B.price", lit(15)))],
                  measures=[("aPrice", c("A.price")), ("firstB", first("B.price")),
                            ("lastB", last("B.price")), ("nB", Aggregate("COUNT", c("B.price")))],
                  after=("PAST LAST ROW",))
    raise AssertionError(f"no spec for {sql}")


def _golden_delay_ms(ddl):
    text = ddl.split("INTERVAL '")[1].split("'")[0]
    return int(float(text) * 1000)


def _golden_partitions(g, mode):
    """Rows per symbol in processing order: sorted by time (stable); in streaming mode rows
    at or behind the watermark (max seen - delay, a tie is late) are dropped, as Flink does."""
    rows = [dict(zip(g["input_columns"], r)) for r in g["input"]]
    for r in rows:
        r["rowtime"] = np.datetime64(r["rowtime"].replace(" ", "T"), "ms")
    if mode == "streaming":
        delay = np.timedelta64(_golden_delay_ms(g["table_ddl"]), "ms")
        kept, wm = [], None
        for r in rows:
            if wm is not None and r["rowtime"] <= wm:
                continue
            kept.append(r)
            wm = max(wm, r["rowtime"] - delay) if wm is not None else r["rowtime"] - delay
        rows = kept
    parts = {}
    for r in sorted(rows, key=lambda r: r["rowtime"]):
        parts.setdefault(r["symbol"], []).append(r)
    return {sym: {k: np.array([r[k] for r in rs]) if k != "symbol" else np.array([r[k] for r in rs], dtype=object)
                  for k in g["input_columns"]} for sym, rs in parts.items()}


@pytest.mark.parametrize("name, mode, i", list(golden_cases()))
def test_golden(name, mode, i):
    g = load(f"{name}_{mode}.json")
    query = g["queries"][i]
    spec = _golden_spec(query["sql"])
    parts = _golden_partitions(g, mode)
    if "error" in query:
        error = query["error"][-1].split("Exception: ")[-1]
        with pytest.raises(MatchRecognizeError) as info:
            for cols in parts.values():
                run_partition(cols, spec, "flink-2.3")
        assert error.split(".")[0] in str(info.value)
        return
    got = [(sym,) + row for sym, cols in parts.items() for row in run(spec, cols, "flink-2.3")]
    assert got == [tuple(r["values"]) for r in query["rows"]]
    documented = query.get("documented")
    if isinstance(documented, list):
        got_docs = [(sym,) + row for sym, cols in parts.items() for row in run(spec, cols, "flink")]
        assert got_docs == [tuple(r) for r in documented]


# ---------------------------------------------------------------- planning errors


@pytest.mark.parametrize("pattern", [pat("A", q("B", 0, None)), pat("A", q("B", 1, None)),
                                     pat("A", q("B", 1, 3))])
def test_greedy_quantifier_last_is_rejected(pattern):
    with pytest.raises(MatchRecognizeError, match="Greedy quantifiers are not allowed as the last"):
        run_partition(ticker([1]), mr(pattern))


@pytest.mark.parametrize("pattern", [pat("A", q("B", 1, None, False)), pat("A", q("B", 2, 2)),
                                     pat("A", q("B", 0, 1))])
def test_reluctant_exact_and_optional_last_run(pattern):
    run_partition(ticker([1, 2, 3]), mr(pattern))


@pytest.mark.parametrize("pattern", [pat(q("A", 0, None, False)), pat(q("A", 0, 1), q("B", 0, None, False))])
def test_patterns_that_can_match_empty_are_rejected(pattern):
    with pytest.raises(MatchRecognizeError, match="empty matches are not supported"):
        run_partition(ticker([1]), mr(pattern))


def test_reluctant_optional_is_rejected():
    with pytest.raises(MatchRecognizeError, match="Reluctant optional"):
        run_partition(ticker([1]), mr(pat(q("A", 0, 1, False), "B")))


def test_aggregate_across_two_variables_is_rejected():
    spec = mr(pat("A", "B"), measures=[("x", Aggregate("AVG", b("*", "A.price", "B.tax")))])
    with pytest.raises(MatchRecognizeError, match="single pattern variable"):
        run_partition(ticker([1]), spec)


def test_navigation_across_two_variables_is_rejected():
    spec = mr(pat("A", "B"), measures=[("x", Nav("LAST", b("*", "A.price", "B.tax"), 0))])
    with pytest.raises(MatchRecognizeError, match="single pattern variable"):
        run_partition(ticker([1]), spec)


def test_distinct_aggregate_is_rejected():
    spec = mr(pat("A", "B"), measures=[("x", Aggregate("COUNT", c("A.price"), distinct=True))])
    with pytest.raises(MatchRecognizeError, match="DISTINCT"):
        run_partition(ticker([1]), spec)


def test_variable_used_twice_is_rejected():
    with pytest.raises(MatchRecognizeError, match="used twice"):
        run_partition(ticker([1]), mr(pat("A", "B", "A")))


@pytest.mark.parametrize("spec, feature", [
    (mr(Concat((Alternation((Label("A"), Label("B"))), Label("C")))), "alternation"),
    (mr(Concat((Label("A"), Quantified(Concat((Label("B"), Label("C"))), 1, None, False), Label("D")))), "group"),
    (mr(Concat((Permute((Label("A"), Label("B"))), Label("C")))), "PERMUTE"),
    (mr(pat("A", "B"), rows=ALL_ROWS_SHOW), "ALL ROWS PER MATCH"),
    (mr(pat("A", "B"), measures=[("c", Classifier())]), "CLASSIFIER"),
    (mr(pat("A", "B"), measures=[("n", MatchNumber())]), "MATCH_NUMBER"),
    (mr(pat("A", "B"), define=[("B", b(">", "B.price", Nav("PREV", c("B.price"), 1)))]), "PREV"),
    (mr(Concat((Label("A"), Exclusion(Label("B")), Label("C")))), "exclusion"),
    (mr(Concat((Anchor("^"), Label("A")))), "anchors"),
    (MatchRecognize(pattern=pat("A", "B"), subsets=(("S", ("A", "B")),)), "SUBSET"),
    (mr(pat("A", "B"), measures=[("x", Semantics("FINAL", c("A.price")))]), "RUNNING/FINAL"),
])
def test_standard_features_are_not_supported_by_flink(spec, feature):
    with pytest.raises(NotSupportedByFlink, match=feature) as info:
        run_partition(ticker([1, 2]), spec)
    assert 'semantics="standard"' in str(info.value)


def test_a_spec_is_validated_once_for_key_after_key(monkeypatch):
    """A task runs one spec on each of its keys: Flink's checks walk the spec for the first
    key only; a spec that fails them fails on every key."""
    from kit.match_recognize import flink

    calls = []
    monkeypatch.setattr(flink, "_validate", lambda spec, real=flink._validate: calls.append(spec) or real(spec))
    spec = mr(pat("A", q("B", 1, None, False)))
    for prices in ([1, 2, 3], [4, 5], [6, 7, 8]):
        run_partition(ticker(prices), spec)
    assert calls == [spec]
    bad = mr(pat("A", "B", "A"))
    for _ in range(2):
        with pytest.raises(MatchRecognizeError, match="used twice"):
            run_partition(ticker([1]), bad)
    assert calls == [spec, bad, bad]


def test_match_rowtime_is_the_last_row_time():
    spec = mr(pat("A", q("B", 1, None, False)), measures=[("t", MatchRowtime())])
    assert run(spec, ticker([1, 2, 3, 4]), rowtime="rowtime") == [(T(1),), (T(3),)]


def test_order_by_must_start_ascending():
    spec = MatchRecognize(pattern=pat("A", "B"), order_by=(OrderItem("rowtime", ascending=False),))
    with pytest.raises(MatchRecognizeError, match="ORDER BY: the first ORDER BY column must be an ascending"):
        run_partition(ticker([1]), spec)


@pytest.mark.parametrize("semantics", ["flink", "flink-2.3", "standard"])
def test_unknown_variables_are_rejected(semantics):
    with pytest.raises(MatchRecognizeError, match="DEFINE: Z is not a variable"):
        run_partition(ticker([1]), mr(pat("A", "B"), define=[("Z", b(">", "price", lit(1)))]), semantics)
    with pytest.raises(MatchRecognizeError, match="AFTER MATCH: unknown pattern variable Z"):
        run_partition(ticker([1]), mr(pat("A", "B"), after=("TO LAST", "Z")), semantics)
    with pytest.raises(MatchRecognizeError, match="MEASURES: unknown pattern variable 'Z'"):
        run_partition(ticker([1]), mr(pat("A", "B"), measures=[("z", c("Z.price"))]), semantics)


def test_unknown_semantics_is_rejected():
    with pytest.raises(MatchRecognizeError, match="unknown semantics 'trino'"):
        run_partition(ticker([1]), mr(pat("A", "B")), "trino")


def test_within_needs_a_time_column():
    spec = MatchRecognize(pattern=pat("A", "B"), within_ms=10)
    with pytest.raises(MatchRecognizeError, match="WITHIN needs the time column"):
        run_partition(ticker([1]), spec)


# ---------------------------------------------------------------- checked on real Flink

@pytest.mark.parametrize("prices, expected", [
    ([10, 15, 20], [(10, None, 15, 10, 10)]),   # B? does not take 15: C completes first
    ([10, 20], [(10, None, 20, 10, 10)]),
])
def test_optional_variable_navigation_as_real_flink(prices, expected):
    """The seed's ``PATTERN (A B? C)`` navigation example (001, «Logical Offsets») under Flink:
    ``B?`` keeps both branches and the shorter match A C completes first, so B stays empty.
    These rows are what Apache Flink 2.3 returned for this query, in streaming and batch mode
    (run through PyFlink on 2026-11-23; the seed's own table shows the standard A B C)."""
    spec = mr(pat("A", q("B", 0, 1), "C"),
              define=[("B", b("<", "B.price", lit(20))), ("C", b("<", last("price", 1), "C.price"))],
              measures=[("a", c("A.price")), ("b", c("B.price")), ("c", c("C.price")),
                        ("f", first("price")), ("l1", last("price", 1))],
              after=("PAST LAST ROW",))
    assert run(spec, ticker(prices)) == expected


# ---------------------------------------------------------------- the generated runner

_VARS = ("A", "B", "C")
_QUANTIFIERS = [(1, 1, True), (1, None, True), (0, None, True), (0, 1, True), (2, 2, True),
                (1, 2, True), (1, None, False), (0, None, False), (1, 3, False)]


def random_spec(draw, head=False, aggregates=False):
    """A random pattern of A, B, C; ``head``: A once without DEFINE, then B with one (without
    WITHIN the generated runner then starts partial matches inline, B's first row from numpy);
    ``aggregates``: DEFINE may read SUM, MAX or COUNT over a variable's rows so far."""
    n = draw(st.integers(2 if head else 1, 3))
    items = [q(v, *draw(st.sampled_from(_QUANTIFIERS))) for v in _VARS[:n]]
    if head:
        items[0] = q("A", 1, 1)
    column = st.builds(Column, st.just("price"), st.sampled_from(_VARS[:n] + (None,)))
    value = st.one_of(column, st.builds(Nav, st.sampled_from(("FIRST", "LAST")), column, st.integers(0, 2)),
                      st.builds(Literal, st.integers(8, 12), st.just("BIGINT")),
                      *[st.builds(Aggregate, st.sampled_from(("SUM", "MAX", "COUNT")), column)] * aggregates)
    condition = st.one_of(
        st.builds(Binary, st.sampled_from(("<", ">", "<=", ">=", "=")), value, value),
        st.builds(IsNull, value, st.booleans()))
    condition = st.recursive(condition, lambda inner: st.builds(Binary, st.sampled_from(("AND", "OR")),
                                                                inner, inner), max_leaves=3)
    defined = {v: draw(st.booleans()) for v in _VARS[:n]}
    if head:
        defined.update(A=False, B=True)
    define = [(v, draw(condition)) for v in _VARS[:n] if defined[v]]
    skip = draw(st.sampled_from([("PAST LAST ROW",), ("TO NEXT ROW",)] +
                                [(k, v) for k in ("TO FIRST", "TO LAST") for v in _VARS[:n]]))
    return mr(pat(*items), define=define, after=skip, within_ms=draw(st.sampled_from((None, 2000, 4000))),
              measures=[("first_price", first("price")), ("last_price", last("price"))])


def test_within_expires_the_partial_matches_a_plain_start_began():
    """A B+ C, A without DEFINE: the match from row 0 is 5 s long; WITHIN 2 s keeps only the
    one from row 3 (both runners)."""
    spec = mr(pat("A", q("B", 1, None), "C"), define=[("B", b("<", "B.price", lit(10)))],
              measures=[("first", first("price")), ("last", last("price"))], after=("PAST LAST ROW",), within_ms=2000)
    for trace in (None, []):
        assert run(spec, ticker([11, 9, 8, 8, 8, 12]), trace=trace) == [(8, 12)]


@pytest.mark.parametrize("head", [False, True])
@settings(max_examples=300, deadline=None)
@given(st.data(), st.lists(st.integers(8, 12), min_size=0, max_size=14))
def test_generated_runner_equals_the_reference_runner(head, data, prices):
    """``flink.run_blocks`` (the generated loop over blocks) finds the same matches in the
    same order as ``flink.NFA`` (the state table over rows and labels), errors included."""
    spec = random_spec(data.draw, head)
    cols = ticker(prices)
    try:
        fast = run_partition(cols, spec, "flink")
    except (MatchRecognizeError, MatchRuntimeError) as e:
        fast = ("raises", str(e))
    try:
        reference = run_partition(cols, spec, "flink", trace=[])
    except (MatchRecognizeError, MatchRuntimeError) as e:
        reference = ("raises", str(e))
    if isinstance(fast, tuple):
        assert fast == reference
    else:
        assert not isinstance(reference, tuple), reference
        assert fast.rows == reference.rows
        assert [(m.rows, m.classifiers) for m in fast.matches] == \
               [(m.rows, m.classifiers) for m in reference.matches]
