"""Flink's resumable NFA: rows released in any batches give the matches of the
whole-partition run (``run_partition``, the generated fast path)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.match_recognize.errors import MatchRecognizeError, MatchRuntimeError
from kit.match_recognize.matcher import Partition, run_partition
from kit.match_recognize.measures import prepare_columns
from test_mr_flink import random_spec, ticker


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
