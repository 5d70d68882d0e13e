"""A row pattern compiled to a small program (the design of Trino's matcher).

Instructions (tuples):
  ("LABEL", var)      consume the current row if DEFINE of ``var`` holds
  ("SPLIT", a, b)     try ``a`` first, then ``b`` (preference order)
  ("JUMP", a)
  ("LOOP", a)         jump back to the loop head ``a``; after an empty iteration (the head
                      was already visited on this row) leave the loop instead: pc + 1
  ("EXCLUDE", +1/-1)  enter / leave ``{- -}``: rows consumed inside are not output
  ("BEGIN",) ("END",) the anchors ``^`` and ``$``
  ("MATCH",)

    PATTERN (A B+? C)  ->  0 LABEL A; 1 LABEL B; 2 SPLIT 5, 3; 3 LABEL B; 4 LOOP 2;
                           5 LABEL C; 6 MATCH

Quantifiers are unrolled: ``x{2,4}`` is ``x x (x (x)?)?``; an unbounded tail is a loop. An
iteration that matched no row ends the loop (as in Perl and Trino): the matcher sees the
loop head already visited on this row and continues after the loop. PERMUTE(A, B, C) is the
alternation of the permutations in lexicographic order of the listed items.

Both matchers unroll bounded quantifiers (Flink's NFA has a state per repetition), so a
pattern may unroll to at most ``MAX_UNROLLED`` pattern variables (``check_size``):
``B{10000}`` is rejected at planning instead of exhausting memory or running for hours.
"""

from __future__ import annotations

from itertools import permutations
from math import factorial

from .errors import MatchRecognizeError
from .format import to_sql
from .spec import Alternation, Anchor, Concat, Empty, Exclusion, Label, Permute, Quantified

__all__ = ["compile_pattern", "labels_of", "can_be_empty", "check_size", "MAX_UNROLLED"]

#: The most pattern variables a pattern may unroll to (``A{3}`` is 3, ``(A B){2,4}`` is 8,
#: ``PERMUTE(A, B, C)`` is 18): a bound both matchers compile in well under a second.
MAX_UNROLLED = 1000


def labels_of(pattern) -> list:
    """The pattern variables in order of first appearance."""
    out = []

    def visit(p):
        if isinstance(p, Label):
            if p.name not in out:
                out.append(p.name)
        elif isinstance(p, (Concat, Alternation, Permute)):
            for item in p.items:
                visit(item)
        elif isinstance(p, (Quantified, Exclusion)):
            visit(p.node)
    visit(pattern)
    return out


def can_be_empty(p) -> bool:
    if isinstance(p, Label):
        return False
    if isinstance(p, (Anchor, Empty)):
        return True
    if isinstance(p, (Concat, Permute)):
        return all(can_be_empty(i) for i in p.items)
    if isinstance(p, Alternation):
        return any(can_be_empty(i) for i in p.items)
    if isinstance(p, Quantified):
        return p.min == 0 or can_be_empty(p.node)
    if isinstance(p, Exclusion):
        return can_be_empty(p.node)
    raise MatchRecognizeError("PATTERN", f"unknown pattern node {p!r}")


def check_size(pattern) -> int:
    """The number of pattern variables ``pattern`` unrolls to; a MatchRecognizeError at the
    first node that takes it past ``MAX_UNROLLED``."""
    if isinstance(pattern, Label):
        return 1
    if isinstance(pattern, (Anchor, Empty)):
        return 0
    if isinstance(pattern, (Quantified, Exclusion)):
        size = check_size(pattern.node)
        if isinstance(pattern, Quantified):
            size *= max(pattern.min, pattern.min + 1 if pattern.max is None else pattern.max)
    else:
        size = sum(check_size(item) for item in pattern.items)
        if isinstance(pattern, Permute):
            size *= factorial(len(pattern.items))
    if size > MAX_UNROLLED:
        raise MatchRecognizeError("PATTERN", f"{to_sql(pattern)} unrolls to {size:,} pattern variables; "
                                             f"the kit allows at most {MAX_UNROLLED:,}: lower the "
                                             "bounds (or PERMUTE fewer items), or repeat with an unbounded "
                                             "quantifier (+, *, {n,}) and a condition that counts", pattern.pos)
    return size



def compile_pattern(pattern) -> list:
    """The program of ``pattern``, ending with MATCH."""
    code = []
    _emit(pattern, code)
    code.append(("MATCH",))
    return code


def _emit(p, code):
    if isinstance(p, Label):
        code.append(("LABEL", p.name))
    elif isinstance(p, Concat):
        for item in p.items:
            _emit(item, code)
    elif isinstance(p, Alternation):
        jumps = []
        for i, item in enumerate(p.items):
            if i < len(p.items) - 1:
                split = len(code)
                code.append(None)
                _emit(item, code)
                jumps.append(len(code))
                code.append(None)
                code[split] = ("SPLIT", split + 1, len(code))
            else:
                _emit(item, code)
        for j in jumps:
            code[j] = ("JUMP", len(code))
    elif isinstance(p, Permute):
        _emit(Alternation(tuple(Concat(perm) for perm in permutations(p.items)), pos=p.pos), code)
    elif isinstance(p, Quantified):
        _emit_quantified(p, code)
    elif isinstance(p, Exclusion):
        code.append(("EXCLUDE", 1))
        _emit(p.node, code)
        code.append(("EXCLUDE", -1))
    elif isinstance(p, Anchor):
        code.append(("BEGIN",) if p.kind == "^" else ("END",))
    elif isinstance(p, Empty):
        pass
    else:
        raise MatchRecognizeError("PATTERN", f"unknown pattern node {p!r}", getattr(p, "pos", None))


def _split(code, at, body, after, greedy):
    code[at] = ("SPLIT", body, after) if greedy else ("SPLIT", after, body)


def _emit_quantified(p: Quantified, code):
    if p.max is not None and (p.max < p.min or p.max < 0 or p.min < 0):
        raise MatchRecognizeError("PATTERN", f"invalid quantifier {{{p.min},{p.max}}}", p.pos)
    for _ in range(p.min):
        _emit(p.node, code)
    if p.max is None:
        loop = len(code)
        code.append(None)
        _emit(p.node, code)
        code.append(("LOOP", loop))
        _split(code, loop, loop + 1, len(code), p.greedy)
        return
    splits = []
    for _ in range(p.max - p.min):
        splits.append(len(code))
        code.append(None)
        _emit(p.node, code)
    for at in splits:
        _split(code, at, at + 1, len(code), p.greedy)
