"""Flink's CepOperator (kit.match_recognize.cep) and its resumable NFA: rows released in any
batches, or stepped one by one with rising watermarks through the replay driver's
``run_key``, give the matches of the whole-partition run (``run_partition``, the generated
fast path), each output at the watermark that completes it."""

import pickle
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.match_recognize.cep import CepOperator
from kit.match_recognize.errors import MatchRecognizeError, MatchRuntimeError
from kit.match_recognize.matcher import Partition, run_partition
from kit.match_recognize.measures import prepare_columns
from kit.match_recognize.spec import OrderItem
from kit.replay.keyed import MAX_TIME, Context, run_key
from test_mr_flink import b, c, mr, pat, q, random_spec, ticker

COLUMNS = ["symbol", "rowtime", "price", "tax"]


def outcome(f):
    """``f()``'s measures and matches, or the error it raised."""
    try:
        rows, matches = f()
    except (MatchRecognizeError, MatchRuntimeError) as e:
        return "raises", str(e)
    return rows, [(m.number, m.rows, m.classifiers) for m in matches]


def whole(cols, spec, semantics="flink"):
    result = run_partition(cols, spec, semantics)
    return result.rows, result.matches


@pytest.mark.parametrize("semantics", ["flink", "flink-2.3"])
@settings(max_examples=300, deadline=None)
@given(st.data(), st.lists(st.integers(8, 12), min_size=0, max_size=14))
def test_the_nfa_fed_in_any_batches_finds_the_whole_partition_matches(semantics, data, prices):
    """``flink.NFA`` over rows added a batch at a time (``Partition.extend``), WITHIN's time
    advanced to a watermark between the batches, equals ``run_blocks`` over all the rows."""
    spec = random_spec(data.draw, head=data.draw(st.booleans()), aggregates=data.draw(st.booleans()))
    cols = ticker(prices)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(prices)), max_size=5)))

    def stepped():
        lists, stamps = prepare_columns({k: v[:0] for k, v in cols.items()})
        partition = Partition(lists, stamps, spec, semantics)
        nfa, found = partition.nfa(), []
        for lo, hi in zip([0] + cuts, cuts + [len(prices)]):
            partition.extend({k: v[lo:hi] for k, v in cols.items()})
            found += nfa.advance(partition.rows)
            if hi and partition.times is not None:   # a watermark before the next row's time
                found += nfa.advance_time(partition.times[hi - 1] + data.draw(st.integers(0, 999)))
        found += nfa.finish()
        matches = [partition.one_row(i, R, L) for i, (R, L) in enumerate(found, 1)]
        return [row for _, row in matches], [match for match, _ in matches]

    assert outcome(stepped) == outcome(lambda: whole(cols, spec, semantics))


@settings(max_examples=300, deadline=None)
@given(st.data(), st.lists(st.tuples(st.integers(0, 8), st.integers(8, 12)), min_size=0, max_size=14))
def test_cep_operator_through_run_key_equals_the_whole_partition(data, arrivals):
    """Rows (time in s, price) in arrival order, out of order, with a rising watermark: the
    operator stepped by ``run_key`` drops the late rows (time at or below the watermark) and
    outputs the matches of ``run_partition`` over the others in (time, arrival) order, each
    once the watermark is at or past its last row."""
    spec = random_spec(data.draw, aggregates=data.draw(st.booleans()))
    rows = [("ACME", np.datetime64(t * 1000, "ms"), p, 1) for t, p in arrivals]
    marks = [-1]
    for _ in arrivals[1:]:
        marks.append(marks[-1] + data.draw(st.sampled_from((0, 0, 500, 1000, 2000))))
    kept = sorted((r for r, w in zip(rows, marks) if ms(r[1]) > w), key=lambda r: r[1])   # ties: arrival

    def stepped():
        out = run_key(CepOperator(spec, COLUMNS, rowtime="rowtime", timestamps={"rowtime"}), ["ACME"],
                      rows, watermarks=marks)
        assert len([e for e in out if e.match is None]) == len(rows) - len(kept)
        matches = [e for e in out if e.match is not None]
        assert all(e.watermark >= ms(kept[e.match.rows[-1]][1]) for e in matches)
        return [e.row for e in matches], [e.match for e in matches]

    assert outcome(stepped) == outcome(lambda: whole(columns(kept), spec))


@settings(max_examples=200, deadline=None)
@given(st.data(), st.lists(st.tuples(st.integers(0, 8), st.integers(8, 12)), min_size=0, max_size=14))
def test_cep_operator_state_pickled_between_rows_gives_the_same_matches(data, arrivals):
    """The key's state pickled and loaded after every row (as the live driver keeps it in
    Spark's state store between micro-batches): the same outputs, at the same watermarks,
    as the operator whose state stayed in memory (WITHIN and aggregates among the specs)."""
    spec = random_spec(data.draw, aggregates=data.draw(st.booleans()))
    if data.draw(st.booleans()):
        spec = replace(spec, within_ms=data.draw(st.sampled_from((1000, 3000))))
    rows = [("ACME", t * 1000, p, 1) for t, p in arrivals]
    marks = [-1]
    for _ in arrivals[1:]:
        marks.append(marks[-1] + data.draw(st.sampled_from((0, 0, 500, 1000, 2000))))

    def run(reload: bool):
        operator, out = CepOperator(spec, COLUMNS, rowtime="rowtime"), []
        ctx = Context(["ACME"], operator.state, out)
        for i, row in enumerate(rows):
            ctx.advance(operator, marks[i])
            ctx.at = i
            operator.process_element(row, ctx)
            if reload:
                ctx._state, ctx._event = pickle.loads(pickle.dumps((ctx._state, ctx._event)))
        ctx.advance(operator, MAX_TIME)
        operator.end_of_input(ctx)
        return [(e.watermark, e.row, e.match) for e in out]

    assert outcome(lambda: (run(True), [])) == outcome(lambda: (run(False), []))


def ms(t):
    return int(t.astype("int64"))


def columns(rows):
    return {c: np.array([r[i] for r in rows], dtype=object) for i, c in enumerate(COLUMNS)}


def test_matches_come_out_at_the_watermark_that_completes_them():
    """A B with B rising: each match is output by the first watermark at or past its B row;
    the row at the watermark (time 4 under watermark 4) is late."""
    spec = mr(pat("A", "B"), define=[("B", b(">", "B.price", "A.price"))],
              measures=[("bottom", c("A.price")), ("top", c("B.price"))])
    times, prices = [1, 2, 3, 5, 4, 6, 7, 8], [5, 3, 4, 9, 1, 12, 8, 10]
    rows = [("ACME", t, p, 1) for t, p in zip(times, prices)]
    marks = [0, 0, 2, 2, 4, 4, 6, 6]
    out = run_key(CepOperator(spec, COLUMNS, rowtime="rowtime"), ["ACME"], rows, watermarks=marks)
    assert [(e.watermark, e.row, e.match is None) for e in out] == [
        (4, (3, 4), False),            # time 2, 3: released when the watermark reaches 3 (at 4)
        (4, ("ACME", 4, 1, 1), True),  # late: time 4 at watermark 4
        (6, (9, 12), False),           # time 5, 6: released at watermark 6
        (MAX_TIME, (8, 10), False)]    # time 7, 8: at the end of input
    kept = sorted((r for r in rows if r[1] != 4), key=lambda r: r[1])
    assert [e.row for e in out if e.match] == whole(columns(kept), spec)[0]


def test_rows_of_one_time_are_released_in_the_order_by_s_other_columns():
    """ORDER BY rowtime, price DESC: rows of one time are released by price, highest first,
    NULLs last, ties in arrival order."""
    spec = replace(mr(pat("A", "B"), define=[("B", b("<", "B.price", "A.price"))],
                      measures=[("a", c("A.tax")), ("b", c("B.tax"))], after=("TO NEXT ROW",)),
                   order_by=(OrderItem("rowtime"), OrderItem("price", False)))
    rows = [("X", 1, 5, 1), ("X", 1, None, 2), ("X", 1, 9, 3), ("X", 1, 5, 4), ("X", 2, 7, 5)]
    out = run_key(CepOperator(spec, COLUMNS, rowtime="rowtime"), ["X"], rows, watermarks=[0] * 5)
    # released: 9 (tax 3), 5 (1), 5 (4), NULL (2), then 7 (5) at time 2
    assert [e.row for e in out] == [(3, 1)]


def test_within_expires_an_open_match_when_the_watermark_passes_its_end():
    """A B+ C WITHIN 4 s: the match from time 2 (complete at 4) waits for the partial match
    from time 0; a timer at that one's expiry (4.001 s) releases it under watermark 4.5 s,
    before any later row is released."""
    spec = mr(pat("A", q("B", 1, None), "C"), define=[("B", b("<", "B.price", "A.price")),
                                                      ("C", b(">", "C.price", "A.price"))],
              measures=[("first", c("A.price"))], after=("TO NEXT ROW",), within_ms=4000)
    times, prices = [0, 1, 2, 3, 4, 10, 11], [10, 5, 7, 6, 8, 1, 1]
    rows = [("X", t * 1000, p, 1) for t, p in zip(times, prices)]
    out = run_key(CepOperator(spec, COLUMNS, rowtime="rowtime"), ["X"], rows,
                  watermarks=[-1, 0, 1000, 2000, 3000, 4000, 4500])
    assert [(e.watermark, e.row) for e in out] == [(4500, (7,))]
    assert whole(columns(sorted(rows, key=lambda r: r[1])), spec)[0] == [(7,)]


def test_standard_semantics_has_no_streaming_form():
    with pytest.raises(ValueError, match="no streaming form"):
        CepOperator(mr(pat("A")), COLUMNS, "standard", rowtime="rowtime")
