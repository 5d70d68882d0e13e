"""MATCH_RECOGNIZE under semantics="standard" (ISO/IEC 19075-5 as Trino implements it): a test
per feature on tiny inputs, the seed's navigation tables, property tests against a
brute-force enumerator, and a guard against pathological patterns."""

import itertools
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.match_recognize.errors import MatchRecognizeError, MatchRuntimeError, TooManyThreads
from kit.match_recognize.matcher import run_partition
from kit.match_recognize.measures import trace
from kit.match_recognize.spec import (ALL_ROWS_OMIT, ALL_ROWS_SHOW, ALL_ROWS_WITH_UNMATCHED,
                                      AfterMatch, Aggregate, Alternation, Anchor, Binary,
                                      Classifier, Column, Concat, Exclusion, IsNull, Label,
                                      Literal, MatchNumber, MatchRecognize, Measure, Nav, Permute,
                                      Quantified, Semantics)


def c(ref):
    var, _, name = ref.rpartition(".")
    return Column(name, var or None)


def lit(v):
    return Literal(v, "BIGINT")


def b(op, left, right):
    return Binary(op, c(left) if isinstance(left, str) else left,
                  c(right) if isinstance(right, str) else right)


def seq(*items):
    return Concat(tuple(Label(i) if isinstance(i, str) else i for i in items))


def q(node, mn, mx, greedy=True):
    return Quantified(Label(node) if isinstance(node, str) else node, mn, mx, greedy)


def mr(pattern, define=(), measures=(("cls", Classifier()),), rows=None, after=None, subsets=()):
    kw = {} if rows is None else {"rows_per_match": rows}
    return MatchRecognize(pattern=pattern, measures=tuple(Measure(e, a) for a, e in measures),
                          after_match=AfterMatch(*after) if after else None, define=tuple(define),
                          subsets=tuple(subsets), **kw)


def prices(*values):
    return {"price": np.array(values, dtype=np.int64)}


def std(spec, cols, **kw):
    return run_partition(cols, spec, "standard", **kw)


def labels(result):
    return [(m.rows, m.classifiers) for m in result.matches]


UP = ("U", b(">", "price", Nav("PREV", c("price"), 1)))
DOWN = ("D", b("<", "price", Nav("PREV", c("price"), 1)))


def test_greedy_backtracks_unlike_flink():
    # A B* C with B true everywhere: the standard gives rows back to C
    spec = mr(seq("A", q("B", 0, None), "C"), define=[("C", b(">", "price", lit(12)))],
              measures=[("last", c("C.price"))])
    assert std(spec, prices(11, 12, 13, 14)).rows == [(14,)]


def test_reluctant_takes_fewest():
    spec = mr(seq("A", q("B", 1, None, False)), measures=[("n", Aggregate("COUNT", c("B.price")))])
    assert std(spec, prices(1, 2, 3, 4)).rows == [(1,), (1,)]


def test_alternation_prefers_left():
    spec = mr(Alternation((seq("A", "B"), Label("A"))))
    assert labels(std(spec, prices(1, 2, 3))) == [((0, 1), ("A", "B")), ((2,), ("A",))]


def test_permute_in_lexicographic_order():
    spec = mr(Permute((Label("A"), Label("B"))), define=[("A", b("=", "price", lit(1)))])
    assert labels(std(spec, prices(2, 1))) == [((0, 1), ("B", "A"))]


def test_group_quantifier_and_prev():
    spec = mr(q(seq("U", "D"), 1, None), define=[UP, DOWN])
    assert labels(std(spec, prices(1, 2, 1, 2, 1, 1))) == [((1, 2, 3, 4), ("U", "D", "U", "D"))]


def test_empty_matches_shown_and_omitted():
    spec = mr(q("A", 0, None), define=[("A", b(">", "price", lit(5)))],
              measures=[("n", MatchNumber()), ("cls", Classifier())], rows=ALL_ROWS_SHOW)
    assert std(spec, prices(1, 9, 1)).rows == [(0, 1, None), (1, 2, "A"), (2, 3, None)]
    omit = mr(spec.pattern, spec.define, [(m.alias, m.expr) for m in spec.measures], ALL_ROWS_OMIT)
    assert std(omit, prices(1, 9, 1)).rows == [(1, 2, "A")]


def test_one_row_per_match_outputs_empty_matches():
    spec = mr(q("A", 0, None), define=[("A", b(">", "price", lit(5)))],
              measures=[("n", Aggregate("COUNT", None))])
    assert std(spec, prices(1, 9)).rows == [(0,), (1,)]


def test_with_unmatched_rows():
    spec = mr(seq("U", "D"), define=[UP, DOWN], measures=[("n", MatchNumber())],
              rows=ALL_ROWS_WITH_UNMATCHED)
    assert std(spec, prices(1, 1, 2, 1, 1)).rows == [(0, None), (1, None), (2, 1), (3, 1), (4, None)]


def test_running_and_final():
    spec = mr(q("A", 1, None), measures=[("run", Aggregate("SUM", c("price"))),
                                         ("fin", Semantics("FINAL", Aggregate("SUM", c("price")))),
                                         ("lastfin", Semantics("FINAL", Nav("LAST", c("price"), 0)))],
              rows=ALL_ROWS_SHOW)
    assert std(spec, prices(1, 2, 3)).rows == [(0, 1, 6, 3), (1, 3, 6, 3), (2, 6, 6, 3)]


def test_exclusion_hides_rows_from_all_rows_output():
    spec = mr(seq("A", Exclusion(Label("B")), "C"), rows=ALL_ROWS_SHOW)
    assert std(spec, prices(1, 2, 3)).rows == [(0, "A"), (2, "C")]


def test_exclusion_with_unmatched_rows_is_rejected():
    spec = mr(seq("A", Exclusion(Label("B"))), rows=ALL_ROWS_WITH_UNMATCHED)
    with pytest.raises(MatchRecognizeError, match="not allowed with ALL ROWS PER MATCH WITH UNMATCHED"):
        std(spec, prices(1, 2))


def test_anchors():
    start = mr(seq(Anchor("^"), "A"))
    assert labels(std(start, prices(1, 2))) == [((0,), ("A",))]
    end = mr(seq("A", Anchor("$")))
    assert labels(std(end, prices(1, 2))) == [((1,), ("A",))]


def test_subset_and_nested_navigation():
    spec = mr(seq("A", "B", "C"), subsets=[("S", ("A", "B"))],
              measures=[("s", Aggregate("SUM", c("S.price"))),
                        ("p", Nav("PREV", Nav("LAST", c("C.price"), 0), 2))])
    assert std(spec, prices(1, 2, 4)).rows == [(3, 1)]


def test_next_looks_ahead():
    spec = mr(seq("A"), define=[("A", b("<", "price", Nav("NEXT", c("price"), 1)))])
    assert labels(std(spec, prices(3, 1, 2))) == [((1,), ("A",))]


@pytest.mark.parametrize("after, rows", [
    (("PAST LAST ROW",), [(0, 1, 2)]),
    (("TO NEXT ROW",), [(0, 1, 2), (1, 2), (2, 3)]),
    (("TO LAST", "C"), [(0, 1, 2), (2, 3)]),
    (("TO FIRST", "C"), [(0, 1, 2), (2, 3)]),
])
def test_skip_modes(after, rows):
    spec = mr(seq(q("A", 0, 1), "B", "C"), define=[("A", b("=", "price", lit(0)))], after=after)
    assert [m.rows for m in std(spec, prices(0, 1, 1, 1)).matches] == rows


def test_skip_to_first_row_of_match_is_an_infinite_loop():
    spec = mr(seq(q("A", 1, None), "B"), after=("TO FIRST", "A"))
    with pytest.raises(MatchRuntimeError, match="infinite loop"):
        std(spec, prices(1, 2, 3))


# ---------------------------------------------------------------- the seed's navigation tables


def test_seed_table_row_lists_and_sum():
    cols = prices(10, 15, 20, 31, 35)
    spec = mr(seq("A", q("B", 1, None)),
              define=[("A", b(">=", "A.price", lit(10))),
                      ("B", b("AND", b("AND", b(">", "B.price", "A.price"),
                                       b("<", Aggregate("SUM", c("price")), lit(100))),
                              b("<", Aggregate("SUM", c("B.price")), lit(80))))])
    seen = []
    assert labels(std(spec, cols, trace=seen)) == [((0, 1, 2, 3), ("A", "B", "B", "B"))]
    # the matcher's own trace: row #5 (index 4) was tried as B and failed
    assert [(t["row"], t["variable"], t["result"]) for t in seen if t["rows"][0] == 0] == [
        (0, "A", True), (1, "B", True), (2, "B", True), (3, "B", True), (4, "B", False)]
    steps = trace(cols, [0, 1, 2, 3, 4], ["A", "B", "B", "B", "B"],
                  {"A.price": c("A.price"), "B.price": c("B.price"),
                   "SUM(price)": Aggregate("SUM", c("price")),
                   "SUM(B.price)": Aggregate("SUM", c("B.price"))})
    table = [(s["rows"]["A"], s["rows"]["B"], s["A.price"], s["B.price"], s["SUM(price)"],
              s["SUM(B.price)"]) for s in steps]
    assert table == [([0], [], 10, None, 10, None), ([0], [1], 10, 15, 25, 15),
                     ([0], [1, 2], 10, 20, 45, 35), ([0], [1, 2, 3], 10, 31, 76, 66),
                     ([0], [1, 2, 3, 4], 10, 35, 111, 101)]


def test_seed_table_logical_offsets():
    cols = prices(10, 15, 20, 31, 35)
    b_cond = b("AND", b("OR", IsNull(Nav("LAST", c("B.price"), 1)),
                        b(">", "B.price", Nav("LAST", c("B.price"), 1))),
               b("OR", IsNull(Nav("LAST", c("B.price"), 2)),
                 b(">", "B.price", b("*", lit(2), Nav("LAST", c("B.price"), 2)))))
    spec = mr(seq("A", q("B", 1, None)), define=[("A", b(">=", "A.price", lit(10))), ("B", b_cond)])
    seen = []
    assert labels(std(spec, cols, trace=seen)) == [((0, 1, 2, 3), ("A", "B", "B", "B"))]
    # the matcher's own trace: row #5 (index 4) was tried as B and failed
    assert [(t["row"], t["variable"], t["result"]) for t in seen if t["rows"][0] == 0] == [
        (0, "A", True), (1, "B", True), (2, "B", True), (3, "B", True), (4, "B", False)]
    steps = trace(cols, [0, 1, 2, 3, 4], ["A", "B", "B", "B", "B"],
                  {"l1": Nav("LAST", c("B.price"), 1), "l2": Nav("LAST", c("B.price"), 2), "ok": b_cond})
    assert [(s["l1"], s["l2"], s["ok"]) for s in steps[1:]] == [
        (None, None, True), (15, None, True), (20, 15, True), (31, 20, False)]


@pytest.mark.parametrize("values, labels_, expected", [((10, 15, 20), "ABC", 15), ((10, 20), "AC", 10)])
def test_seed_table_default_variable(values, labels_, expected):
    spec = mr(seq("A", q("B", 0, 1), "C"),
              define=[("B", b("<", "B.price", lit(20))),
                      ("C", b("<", Nav("LAST", c("price"), 1), "C.price"))])
    result = std(spec, prices(*values))
    assert result.matches[0].classifiers == tuple(labels_)
    steps = trace(prices(*values), list(range(len(values))), list(labels_),
                  {"l": Nav("LAST", c("price"), 1)})
    assert steps[-1]["l"] == expected


# ---------------------------------------------------------------- property tests


def _conds(spec):
    """Plain-Python DEFINE for the brute force: each is ``price op constant``."""
    ops = {"<": lambda a, k: a < k, ">": lambda a, k: a > k, "=": lambda a, k: a == k}
    return {v: (lambda a, o=ops[e.op], k=e.right.value: o(a, k)) for v, e in spec.define}


def _sequences(p, n):
    """Every label sequence of at most ``n`` rows that ``p`` can match, in the standard's
    preference order: a concatenation is ordered lexicographically by its parts' choices, an
    alternation by its items, a greedy quantifier prefers one more iteration to stopping (a
    reluctant one the reverse), and an iteration that matches no row ends the loop."""
    return list(dict.fromkeys(_gen(p, n)))


def _gen(p, n):
    if isinstance(p, Label):
        if n >= 1:
            yield (p.name,)
    elif isinstance(p, Concat):
        yield from _cat(p.items, n)
    elif isinstance(p, Alternation):
        for item in p.items:
            yield from _gen(item, n)
    elif isinstance(p, Permute):
        for perm in itertools.permutations(p.items):
            yield from _cat(perm, n)
    elif isinstance(p, Quantified):
        yield from _rep(p.node, p.min, p.max, p.greedy, n)
    else:
        raise AssertionError(p)


def _cat(items, n):
    if not items:
        yield ()
        return
    for x in _gen(items[0], n):
        for y in _cat(items[1:], n - len(x)):
            yield x + y


def _rep(body, low, high, greedy, n):
    if low > 0:                      # a required iteration
        for x in _gen(body, n):
            for y in _rep(body, low - 1, None if high is None else high - 1, greedy, n - len(x)):
                yield x + y
        return
    if high == 0:
        yield ()
        return
    if not greedy:
        yield ()
    for x in _gen(body, n):
        if not x:                    # an empty iteration ends the loop
            yield x
            continue
        for y in _rep(body, 0, None if high is None else high - 1, greedy, n - len(x)):
            yield x + y
    if greedy:
        yield ()


def brute_force(spec, values, after):
    conds = _conds(spec)
    seqs = _sequences(spec.pattern, len(values))
    out, s = [], 0
    while s < len(values):
        best = next((sq for sq in seqs if s + len(sq) <= len(values) and all(
            conds.get(v, lambda a: True)(values[s + i]) for i, v in enumerate(sq))), None)
        if best is None:
            s += 1
            continue
        rows = tuple(range(s, s + len(best)))
        out.append((rows, best))
        if not rows or after == "TO NEXT ROW":
            s += 1
        elif after == "PAST LAST ROW":
            s = rows[-1] + 1
        else:
            hits = [r for r, v in zip(rows, best) if v == "A"]
            if not hits or (hits[0] if after == "TO FIRST" else hits[-1]) == s:
                return "error"
            s = hits[0] if after == "TO FIRST" else hits[-1]
    return out


def patterns(depth=2):
    leaf = st.sampled_from(["A", "B", "C"]).map(Label)
    return st.recursive(leaf, lambda ch: st.one_of(
        st.lists(ch, min_size=2, max_size=3).map(lambda xs: Concat(tuple(xs))),
        st.lists(ch, min_size=2, max_size=2).map(lambda xs: Alternation(tuple(xs))),
        st.lists(ch, min_size=2, max_size=3).map(lambda xs: Permute(tuple(xs))),
        st.tuples(ch, st.sampled_from([(0, 1), (0, None), (1, None), (1, 2), (2, 3)]),
                  st.booleans()).map(lambda t: Quantified(t[0], t[1][0], t[1][1], t[2]))),
        max_leaves=4)


define_st = st.lists(st.tuples(st.sampled_from(["<", ">", "="]), st.integers(0, 3)),
                     min_size=3, max_size=3).map(
    lambda cs: tuple((v, Binary(op, Column("price"), Literal(k, "BIGINT")))
                     for v, (op, k) in zip("ABC", cs)))


@settings(max_examples=150, deadline=None)
@given(pattern=patterns(), define=define_st, values=st.lists(st.integers(0, 3), max_size=7),
       after=st.sampled_from(["PAST LAST ROW", "TO NEXT ROW", "TO FIRST", "TO LAST"]))
def test_matches_agree_with_brute_force(pattern, define, values, after):
    used = {n for n in "ABC" if f"Label(name='{n}'" in repr(pattern)}
    define = tuple(d for d in define if d[0] in used)
    has_a = "A" in used
    if after.startswith("TO ") and after != "TO NEXT ROW" and not has_a:
        after = "PAST LAST ROW"
    spec = mr(pattern, define=define, after=(after, "A") if after in ("TO FIRST", "TO LAST") else (after,))
    expected = brute_force(spec, values, after)
    cols = prices(*values) if values else {"price": np.array([], dtype=np.int64)}
    # trace=[] keeps every thread's full history (no merging of history-free threads)
    for kw in ({}, {"trace": []}):
        try:
            got = [(m.rows, m.classifiers) for m in std(spec, cols, **kw).matches]
        except MatchRuntimeError:
            got = "error"
        assert got == expected


# ---------------------------------------------------------------- pathological patterns


def test_pathological_alternation_finishes():
    spec = mr(seq(q(Alternation((Label("A"), seq("A", "A"))), 0, None), "B"),
              define=[("B", b("<", "price", lit(0)))])
    t = time.perf_counter()
    assert std(spec, prices(*([1] * 10_000))).matches == []
    assert time.perf_counter() - t < 10


def test_pathological_nested_loops_finish():
    spec = mr(seq(q(seq(q("A", 1, None), q("B", 1, None)), 1, None), "C"),
              define=[("C", b("<", "price", lit(0)))])
    t = time.perf_counter()
    assert std(spec, prices(*([1] * 10_000))).matches == []
    assert time.perf_counter() - t < 10


def test_pathological_history_dependent_pattern_fails_clearly():
    # C looks at the history, so threads with different label sequences cannot be merged
    spec = mr(seq(q(seq(q("A", 1, None), q("B", 1, None)), 1, None), "C"),
              define=[("C", b("<", Aggregate("SUM", c("A.price")), lit(0)))])
    t = time.perf_counter()
    with pytest.raises(TooManyThreads, match="live threads|step budget"):
        std(spec, prices(*([1] * 10_000)))
    assert time.perf_counter() - t < 10


def test_empty_iteration_ends_the_loop_before_a_less_preferred_row():
    # (A{2,3} | C*?)+ over 7 rows, every condition true. Greedy A{2,3} takes rows 0-2 and 3-5;
    # at row 6 the third iteration's A{2,3} needs two rows and fails, so C*? is tried, and a
    # reluctant C*? prefers zero rows: the iteration is empty, which ends the loop, and the match
    # (rows 0-5) is complete before "C*? takes row 6" is ever preferred. The next search starts
    # at row 6 and finds the same empty iteration: an empty match there.
    spec = mr(q(Alternation((q("A", 2, 3), q("C", 0, None, False))), 1, None))
    assert labels(std(spec, prices(*[1] * 7))) == [(tuple(range(6)), ("A",) * 6), ((), ())]
    # the same when a condition reads the history (threads then keep their label sequences)
    history = mr(spec.pattern, define=[("C", b(">", Aggregate("COUNT", c("A.price")), lit(0)))])
    assert labels(std(history, prices(*[1] * 7))) == [(tuple(range(6)), ("A",) * 6), ((), ())]


# conditions that read the history: subsets, aggregates, classifier navigation
history_conditions = st.sampled_from([
    b("<", Aggregate("SUM", c("S.price")), lit(4)),              # S = (A, C)
    b(">", Aggregate("COUNT", c("A.price")), lit(0)),
    b("=", Nav("PREV", Classifier(), 1), Literal("A", "STRING")),
    b("<>", Nav("LAST", Classifier(), 1), Literal("B", "STRING")),
    b("=", Classifier("S"), Literal("C", "STRING")),
    b(">", c("price"), lit(1)),
])


def brute_force_history(spec, values):
    """The first label sequence in preference order whose every row satisfies its condition,
    evaluated (by the kit's expression compiler) on the rows and labels up to that row."""
    from kit.match_recognize.expressions import Env, compile_expr
    used = {n for n in "ABC" if f"Label(name='{n}'" in repr(spec.pattern)}
    env = Env({"price": list(values)}, variables=used, subsets=spec.subset_map)
    conds = {v: compile_expr(e, env) for v, e in spec.define}
    seqs = _sequences(spec.pattern, len(values))
    out, s = [], 0
    while s < len(values):
        best = next((sq for sq in seqs if s + len(sq) <= len(values) and all(
            v not in conds or conds[v](tuple(range(s, s + i + 1)), sq[:i + 1], len(out) + 1, None) is True
            for i, v in enumerate(sq))), None)
        if best is None:
            s += 1
            continue
        out.append((tuple(range(s, s + len(best))), best))
        s = s + max(len(best), 1)
    return out


@settings(max_examples=100, deadline=None)
@given(pattern=patterns(), conds=st.lists(history_conditions, min_size=3, max_size=3),
       values=st.lists(st.integers(0, 3), max_size=7))
def test_history_conditions_agree_with_brute_force(pattern, conds, values):
    used = {n for n in "ABC" if f"Label(name='{n}'" in repr(pattern)}
    if "A" not in used:
        return
    define = [(v, cond) for v, cond in zip("ABC", conds) if v in used]
    spec = mr(pattern, define=define, subsets=[("S", tuple(v for v in "AC" if v in used))])
    cols = prices(*values) if values else {"price": np.array([], dtype=np.int64)}
    assert [(m.rows, m.classifiers) for m in std(spec, cols).matches] == brute_force_history(spec, values)
