"""Flink's MATCH_RECOGNIZE: the CEP NFA the planner builds, simulated row by row.

Rules implemented (learnt from Flink's NFACompiler, NFA, aftermatch/* and the planner's
pattern translation):

Planning (``validate``) -- rejected like Flink:
  * only a concatenation of variables, each with an optional quantifier; alternation,
    groups, PERMUTE, ``{- -}``, anchors, SUBSET, ALL ROWS PER MATCH, PREV/NEXT,
    CLASSIFIER, MATCH_NUMBER, RUNNING/FINAL are "not supported by Flink";
  * a variable used twice; the reluctant optional ``??``; DISTINCT aggregates;
  * a pattern that can match empty (every element optional);
  * a greedy quantifier last (``A B*``, ``A B+``, ``A B{1,3}``); ``B+?``, ``B{2}`` and ``B?``
    are fine (Flink marks ``?`` and ``{n}`` as not greedy).
The NFA, per element ``v{min,max}`` (strict contiguity, Flink's ``next``/``consecutive``):
  * ``min`` mandatory states: TAKE ``v`` -> next state;
  * unbounded: a loop state: TAKE ``v`` -> itself, PROCEED -> next element; for ``*`` an
    entry state: TAKE -> loop, PROCEED (always) -> next element;
  * bounded: ``max - min`` optional states: TAKE -> next optional, PROCEED -> next element;
  * a PROCEED of a greedy element fires only when its own TAKE condition is false, so greedy
    repetitions never give rows back; reluctant and ``?`` PROCEEDs always fire, and both
    branches live on (with SKIP TO NEXT ROW the shorter one is found first).
Per row: every partial match follows PROCEEDs (same row) to reach TAKE edges (a chain, as
the pattern is a concatenation; TAKE edges are tried before the PROCEED of a state); each TAKE
makes a new partial match (one more row); a TAKE into the end, or into a state whose
PROCEEDs reach the end without a greedy state, completes a match. A new partial match may
start at every row.
After a match (completed matches wait, ordered by first row, until no partial match that
started earlier is alive; partial matches still open at the end of input are dropped, and
so are matches still waiting for them):
  * SKIP PAST LAST ROW drops partial/waiting matches starting at or before the match's last
    row; SKIP TO NEXT ROW those starting at or before its first row; SKIP TO FIRST/LAST v
    those starting before that row of ``v`` -- and fails if ``v`` has no row in the match,
    or if that row is the match's first row ("Could not skip to first element of a match.").
WITHIN ``w`` (ms of the time column): before each row at time ``t`` (and, in a stream, at
each watermark ``t``) partial matches that started at ``s`` are dropped when ``t - s >= w``
(the 2.3 runtime) or ``t - s > w`` (the documentation); at the end of input all are dropped,
which releases waiting matches.

``NFA`` keeps all this between calls, so a key's rows can be fed as they are released
(``cep.CepOperator``) or all at once (the reference for a whole partition), and
``run_blocks`` is the same runner generated for one pattern (the fast path; property tests
keep them equal).

Documented behaviour (``semantics="flink"``) vs the 2.3 runtime (``"flink-2.3"``):
  ============================  ==================  =====================
  difference                    "flink" (docs)      "flink-2.3" (runtime)
  ============================  ==================  =====================
  AVG of an integer column      exact (14.5)        truncated (14)
  WITHIN boundary               inclusive (> w)     exclusive (>= w)
  no AFTER MATCH clause         SKIP PAST LAST ROW  SKIP TO NEXT ROW
  ============================  ==================  =====================
"""

from __future__ import annotations

import numpy as np

from .codegen import compile_blocks, compile_source, expand, vector_condition
from .errors import MatchRuntimeError, NotSupportedByFlink, MatchRecognizeError
from .expressions import variables_of, walk
from .spec import (ONE_ROW, STANDARD_AGGREGATES, Aggregate, AfterMatch, Alternation, Anchor, Classifier, Concat, Empty,
                   Exclusion, Label, MatchNumber, Nav, Permute, Quantified, Semantics)

__all__ = ["validate", "compile_nfa", "reaches_final", "NFA", "run_blocks", "default_after_match"]

FINAL = -1


def default_after_match(semantics: str) -> AfterMatch:
    """The AFTER MATCH used when the clause has none."""
    return AfterMatch("TO NEXT ROW") if semantics == "flink-2.3" else AfterMatch("PAST LAST ROW")


def _elements(pattern):
    """The pattern as ``[(var, min, max, greedy, pos)]``, or NotSupportedByFlink."""
    items = pattern.items if isinstance(pattern, Concat) else (pattern,)
    out = []
    for item in items:
        if isinstance(item, Concat):
            out.extend(_elements(item))
        elif isinstance(item, Label):
            out.append((item.name, 1, 1, True, item.pos))
        elif isinstance(item, Quantified) and isinstance(item.node, Label):
            out.append((item.node.name, item.min, item.max, item.greedy, item.pos))
        elif isinstance(item, Quantified):
            raise NotSupportedByFlink("PATTERN", "a quantifier on a group ( ... )", item.pos)
        else:
            what = {Alternation: "alternation '|'", Permute: "PERMUTE", Exclusion: "exclusion {- -}",
                    Anchor: "the anchors ^ and $", Empty: "the empty pattern ()"}.get(type(item), repr(item))
            raise NotSupportedByFlink("PATTERN", what, getattr(item, "pos", None))
    return out


_VALIDATED: list = [None, None]   # the last spec validated and its elements: a task's keys share one spec


def validate(spec, semantics="flink"):
    """Raise the errors Flink's planner raises for ``spec``; return the pattern elements
    (checked once for a spec run on one key after another)."""
    last, elements = _VALIDATED
    if spec is last:
        return elements
    elements = _validate(spec)
    _VALIDATED[:] = spec, elements
    return elements


def _validate(spec):
    if spec.rows_per_match != ONE_ROW:
        raise NotSupportedByFlink("ROWS PER MATCH", spec.rows_per_match, spec.pos)
    if spec.subsets:
        raise NotSupportedByFlink("SUBSET", "SUBSET", spec.pos)
    if spec.order_by and not spec.order_by[0].ascending:
        raise MatchRecognizeError("ORDER BY", "the first ORDER BY column must be an ascending "
                                              "time attribute", spec.order_by[0].pos)
    elements = _elements(spec.pattern)
    seen = set()
    for var, mn, mx, greedy, pos in elements:
        if var in seen:
            raise MatchRecognizeError("PATTERN", f"pattern variable {var} is used twice; Flink "
                                                 "requires unique pattern variables", pos)
        seen.add(var)
        if mn == 0 and mx == 1 and not greedy:
            raise MatchRecognizeError("PATTERN", "Reluctant optional variables are not supported "
                                                 "yet (A?? / A{0,1}?)", pos)
    if all(mn == 0 for _, mn, _, _, _ in elements):
        raise MatchRecognizeError("PATTERN", "Patterns that can produce empty matches are not "
                                             "supported. There must be at least one non-optional "
                                             "state.", spec.pattern.pos if hasattr(spec.pattern, "pos") else None)
    var, mn, mx, greedy, pos = elements[-1]
    if _cep_greedy(mn, mx, greedy):
        raise MatchRecognizeError("PATTERN", "Greedy quantifiers are not allowed as the last "
                                             "element of a Pattern yet. Finish your pattern with "
                                             "either a simple variable or reluctant quantifier.", pos)
    if spec.after_match is not None and spec.after_match.var is not None \
            and spec.after_match.var not in seen:
        raise MatchRecognizeError("AFTER MATCH", f"unknown pattern variable {spec.after_match.var}",
                                  spec.after_match.pos)
    for clause, exprs in (("DEFINE", [e for _, e in spec.define]),
                          ("MEASURES", [m.expr for m in spec.measures])):
        for expr in exprs:
            walk(expr, lambda e, c=clause: _check_expr(e, c))
    return elements


def _check_expr(e, clause):
    if isinstance(e, Nav) and e.kind.upper() in ("PREV", "NEXT"):
        raise NotSupportedByFlink(clause, f"the physical offset {e.kind.upper()}()", e.pos)
    if isinstance(e, Classifier):
        raise NotSupportedByFlink(clause, "CLASSIFIER()", e.pos)
    if isinstance(e, MatchNumber):
        raise NotSupportedByFlink(clause, "MATCH_NUMBER()", e.pos)
    if isinstance(e, Semantics):
        raise NotSupportedByFlink(clause, f"{e.kind.upper()} (RUNNING/FINAL)", e.pos)
    if isinstance(e, Aggregate) and e.func.upper() in STANDARD_AGGREGATES:
        raise NotSupportedByFlink(clause, f"the aggregate {e.func.upper()}()", e.pos)
    if isinstance(e, Aggregate) and e.distinct:
        raise MatchRecognizeError(clause, f"DISTINCT aggregates are not supported: "
                                          f"{e.func.upper()}(DISTINCT ...)", e.pos)
    if isinstance(e, (Aggregate, Nav)) and len(variables_of(e.arg if e.arg is not None else ())) > 1:
        what = e.func.upper() if isinstance(e, Aggregate) else e.kind.upper()
        raise MatchRecognizeError(clause, f"{what}() must reference a single pattern variable, "
                                          f"not {', '.join(sorted(variables_of(e.arg)))}", e.pos)


def _cep_greedy(mn, mx, greedy):
    """Flink marks a quantifier greedy unless it is reluctant, ``?`` or an exact ``{n}``."""
    return greedy and not (mn == 0 and mx == 1) and mn != mx


def compile_nfa(elements):
    """States ``(var, take_target, proceed_target|None, proceed_needs_not_take, greedy)``;
    state 0 is the start, FINAL (-1) the end."""
    states = []

    def add(var, take, proceed, not_take, greedy):
        states.append([var, take, proceed, not_take, greedy])
        return len(states) - 1

    sink = FINAL
    for var, mn, mx, greedy, _ in reversed(elements):
        g = _cep_greedy(mn, mx, greedy)
        if mx is None:
            loop = add(var, None, sink, g, g)
            states[loop][1] = loop
            if mn == 0:
                first = add(var, loop, sink, False, g)
            else:
                first = loop
                for _ in range(mn):
                    first = add(var, first, None, False, g)
        else:
            first = sink
            for _ in range(mx - mn):
                first = add(var, first, sink, g, g)
            for _ in range(mn):
                first = add(var, first, None, False, g)
        sink = first
    # renumber so that the start state is 0
    order = list(range(len(states) - 1, -1, -1))
    index = {old: new for new, old in enumerate(order)}
    fix = lambda s: s if s is None or s == FINAL else index[s]  # noqa: E731
    return [(states[o][0], fix(states[o][1]), fix(states[o][2]), states[o][3], states[o][4])
            for o in order], index[sink]


class _Matches:
    """The completed matches of one partition: they wait, ordered by first row, until no
    partial match that started earlier is alive, then AFTER MATCH prunes and they are
    emitted. ``partial`` is the runner's list of partial matches, each starting with its
    first row. AFTER MATCH drops the partial and waiting matches that start before ``floor``;
    ``floor`` only rises, as an emitted match starts at or after the last one and its own
    floor is past its first row."""

    def __init__(self, after_match, times, within_ms, within_inclusive):
        self.kind, self.skip_var = after_match.kind.upper(), after_match.var
        self.times, self.within_ms, self.inclusive = times, within_ms, within_inclusive
        self.partial, self.waiting, self.emitted, self.seq, self.floor = [], [], [], 0, 0

    def complete(self, start, R, L):
        self.seq += 1
        self.waiting.append([start, self.seq, R, L])

    def release(self):
        waiting, partial = self.waiting, self.partial
        while waiting:
            waiting.sort(key=lambda w: (w[0], w[1]))
            first = waiting[0]
            if partial and first[0] > min(p[0] for p in partial):
                return
            waiting.pop(0)
            R, L = first[2], first[3]
            if self.kind == "PAST LAST ROW":
                floor = R[-1] + 1
            elif self.kind == "TO NEXT ROW":
                floor = R[0] + 1
            else:
                rows = [r for r, lab in zip(R, L) if lab == self.skip_var]
                if not rows:
                    raise MatchRuntimeError("AFTER MATCH", f"Could not skip to {self.skip_var}. No such "
                                                           f"element in the found match (rows {list(R)})")
                target = rows[0] if self.kind == "TO FIRST" else rows[-1]
                if target == R[0]:
                    raise MatchRuntimeError("AFTER MATCH", "Could not skip to first element of a "
                                                           f"match (SKIP {self.kind} {self.skip_var} would "
                                                           f"restart at row {target}, where the match began)")
                floor = target
            self.floor = floor
            partial[:] = [p for p in partial if p[0] >= floor]
            waiting[:] = [w for w in waiting if w[0] >= floor]
            self.emitted.append((tuple(R), L))

    def expire(self, t):
        """WITHIN, at time ``t`` (before a row at ``t``, or a watermark): drop the partial
        matches started too long ago."""
        partial, times = self.partial, self.times
        if not partial:
            return
        if self.inclusive:
            keep = [p for p in partial if t - times[p[0]] <= self.within_ms]
        else:
            keep = [p for p in partial if t - times[p[0]] < self.within_ms]
        if len(keep) != len(partial):
            partial[:] = keep
            self.release()

    def finish(self):
        """End of input: with WITHIN, every partial match expires and releases the waiting."""
        if self.within_ms is not None:
            self.partial.clear()
            self.release()
        return self.drain()

    def drain(self):
        """The matches emitted since the last drain."""
        emitted, self.emitted = self.emitted, []
        return emitted


def _table(states, conditions):
    """Per state: (var, its DEFINE or None when always true, take target, proceed target or
    None, proceed needs "not take", whether the take target reaches the end)."""
    return [(var, conditions.get(var), take, None if proceed == FINAL else proceed, not_take,
             take != FINAL and reaches_final(states, take))
            for var, take, proceed, not_take, _ in states]


class NFA:
    """Flink's ``NFA`` with its ``NFAState``, resumable: the partial matches, the completed
    ones waiting, AFTER MATCH's floor and WITHIN stay between calls, so a key's rows can be
    fed as they are released (``cep.CepOperator``) or all at once, with the same matches.
    ``conditions[var](R, L, m, F)`` is a variable's compiled DEFINE (True classifies the row;
    none: always true); the rows are those of the columns it reads (``times``: WITHIN's, epoch
    ms), which may grow; ``budget`` (``budget.Budget``) is spent one step per partial match per
    row."""

    def __init__(self, elements, conditions, times, after_match, within_ms=None, within_inclusive=False,
                 *, budget):
        states, self.start_state = compile_nfa(elements)
        self.table = _table(states, conditions)
        self.matches = _Matches(after_match, times, within_ms, within_inclusive)
        self.rows, self.budget, self.within_ms = 0, budget, within_ms

    def advance(self, nrows: int) -> list:
        """Feed rows ``self.rows`` .. ``nrows - 1``: the matches emitted meanwhile, each
        ``(R, L)``. A partial match is ``(start, state, L)``: variables are unique, so a row's
        condition is evaluated at most once per partial match, and with strict contiguity its
        rows are ``range(start, r + 1)``."""
        out, table, start_state, within = self.matches, self.table, self.start_state, self.within_ms is not None
        for r in range(self.rows, nrows):
            if within:
                out.expire(out.times[r])
            new_partial = []
            out.partial.append((r, start_state, ()))
            self.budget.spend(len(out.partial))
            for start, state, L in out.partial:
                R1 = range(start, r + 1)
                while state is not None:   # a concatenation: PROCEEDs form a chain
                    var, condition, take, proceed, not_take, ends = table[state]
                    L1 = L + (var,)
                    ok = condition is None or condition(R1, L1, 0, None) is True
                    state = None if not_take and ok else proceed
                    if ok:
                        if take == FINAL:
                            out.complete(start, R1, L1)
                            break
                        new_partial.append((start, take, L1))
                        if ends:
                            out.complete(start, R1, L1)
            out.partial[:] = new_partial
            if out.waiting:
                out.release()
        self.rows = max(self.rows, nrows)
        return out.drain()

    def advance_time(self, t: int) -> list:
        """Flink's ``advanceTime`` at time ``t`` (a watermark, ms): WITHIN drops the partial
        matches that expired; the matches that releases."""
        if self.within_ms is not None:
            self.matches.expire(t)
        return self.matches.drain()

    def expires(self):
        """With WITHIN, the time at which the oldest open partial match expires; else None."""
        out = self.matches
        if self.within_ms is None or not out.partial:
            return None
        return out.times[min(p[0] for p in out.partial)] + self.within_ms + (1 if out.inclusive else 0)

    def finish(self) -> list:
        """End of input: the matches still to come (open partial matches are dropped)."""
        return self.matches.finish()


def run_blocks(elements, defines: dict, env, times, nrows, after_match, within_ms=None,
               within_inclusive=False, *, budget):
    """``NFA`` fed a whole partition, generated for one pattern: the same matches, several
    times faster.

    ``defines``: the DEFINE expression per variable (``env`` resolves their columns). A
    partial match is ``(start, state, B)`` where ``B`` holds its blocks ``(variable, first
    row)``: taking one more row of the last block's variable leaves ``B`` as it is, so a
    row costs no copy of the match's labels, and the DEFINE conditions
    (``codegen.compile_blocks``) navigate by index arithmetic. The state table becomes one
    branch per state where a partial match can rest, each with its chain of PROCEEDs
    unrolled and the conditions written inline, in one generated loop::

        elif state == 2:                   # resting in PRICE_DOWN+ (a greedy loop)
            M = B                          # one more PRICE_DOWN row
            if <PRICE_DOWN's DEFINE over r, M is TRUE>:
                append((start, 2, M))
                continue                   # greedy: no PROCEED once taken
            M = B + ((V2, r),)             # PROCEED: the row starts a PRICE_UP block
            if <PRICE_UP's DEFINE over r, M is TRUE>:
                complete(start, r, M)

    START_ROW, without DEFINE, is not in the list: the partial match started at the row
    before runs last (see "the head" below), its first PRICE_DOWN found by numpy for all
    rows at once (``codegen.vector_condition``).
    """
    states, start_state = compile_nfa(elements)
    shape = [(var, mn) for var, mn, _, _, _ in elements]
    index = {var: k for k, (var, _) in enumerate(shape)}
    names, code = {}, {}
    for var, expr in defines.items():
        code[var], more = compile_blocks(expr, env, var, shape, tag=f"_{index[var]}_")
        names.update(more)
    def label(var):
        names[f"V{index[var]}"] = var
        return f"V{index[var]}"

    def chain(state, last, test=None):
        """Code for a partial match whose blocks ``B`` end with a ``last`` block (empty: no
        block yet) meeting row ``r`` in ``state``: its TAKE, then its PROCEEDs, unrolled;
        ``test``, when given, is the code of the TAKE's condition (the head's, from numpy: it
        reads no ``M``, which is built only when it holds)."""
        var, take, proceed, not_take, _ = states[state]
        if not last:
            blocks = f"(({label(var)}, r),)"
        elif last == {var}:
            blocks = "B"
        elif var not in last:
            blocks = f"B + (({label(var)}, r),)"
        else:
            blocks = f"B if B[-1][0] == {label(var)} else B + (({label(var)}, r),)"
        step = ["complete(start, r, M)"] if take == FINAL else [f"append((start, {take}, M))"] + (
            ["complete(start, r, M)"] if reaches_final(states, take) else [])
        stops = take == FINAL or not_take      # a taken row ends the chain
        rest = [] if proceed in (None, FINAL) else chain(proceed, last)
        otherwise = (["else:"] + _indent(rest) if rest else []) if stops else rest
        if test is not None:                   # the head's condition from numpy: M is built when it holds
            return [f"if {test}:", f"    M = {blocks}"] + _indent(step) + otherwise
        test = code.get(var)
        if test is None:                       # no DEFINE: always true
            return [f"M = {blocks}"] + step + ([] if stops else rest)
        return [f"M = {blocks}", f"if {test}:"] + _indent(step) + otherwise

    # the head: with a start state without DEFINE nor PROCEED, whose row alone completes no
    # match, the partial match started at r - 1 is (r - 1, take0, ((V, r - 1),)) unless AFTER
    # MATCH dropped it; row r runs it inline after the others (last, as in ``NFA``), not
    # from the list; its TAKE's condition comes from numpy when it can (``ok``), and then
    # rows where no partial match is alive are skipped up to the next start that passes it
    var0, take0, proceed0, _, _ = states[start_state]
    head = (within_ms is None and var0 not in code and proceed0 is None and take0 != FINAL
            and not reaches_final(states, take0))
    var1 = states[take0][0] if head else None
    ok = vector_condition(defines[var1], env, var1, (var0, var1), nrows) \
        if head and var1 in defines and states[take0][2] is None else None
    # where a partial match rests between rows: the TAKE targets, each with the variable
    # of its last block; a new partial match starts at every row in the start state
    before = {}
    for state, (var, take, _, _, _) in enumerate(states):
        if take != FINAL and not (head and state == start_state):
            before.setdefault(take, set()).add(var)
    body = []
    for rest, last in sorted(before.items()):
        body += [f"{'if' if not body else 'elif'} state == {rest}:"] + _indent(chain(rest, last))
    if head:
        starts = ["start = r - 1", "if start >= out.floor:", f"    B = (({label(var0)}, start),)"] + \
            _indent(chain(take0, {var0}, None if ok is None else "ok[start]"))
    else:
        starts = ["start = r"] + chain(start_state, set())
    loop = ["    for r in range(nrows):"] + ([
        "        out.expire(out.times[r])",
        "        partial = out.partial"] if within_ms is not None else [])
    if ok is not None:   # nothing waits when no partial match is alive (release emitted it)
        loop = ["    r = 1", "    while r < nrows:", "        if not partial:",
                "            r = following[r - 1] + 1",
                "            if r >= nrows:", "                break"]
    source = "\n".join(["def runner(nrows, out, complete, budget, ok, following):",
                         "    partial, left, reads = out.partial, budget.left, budget.reads"] + loop + [
        "        new = []",
        "        append = new.append",
        "        left -= len(partial) + 1",   # budget.spend inline: a call a row was ~3 % of the CPU
        "        if left < reads[0]:",
        "            budget.left = left",
        "            budget.spend(0)",
        "        for start, state, B in partial:"] + _indent(body or ["pass"], 3) + _indent(starts, 2) + [
        "        out.partial = partial = new",
        "        if out.waiting:",
        "            out.release()"] + (["        r += 1"] if ok is not None else []) + [
        "    budget.left = left",
        "    return out.finish()", ""])
    exec(compile_source(source, "<MATCH_RECOGNIZE>"), names)  # noqa: S102 -- built above
    out = _Matches(after_match, times, within_ms, within_inclusive)
    return names["runner"](nrows, out, lambda start, r, M: out.complete(start, *expand(r, M)), budget,
                           *((None, None) if ok is None else (ok.tolist(), _following(ok))))


def _indent(lines, depth=1):
    return ["    " * depth + line for line in lines]


def _following(ok):
    """Per row ``x``: the first row ``s >= x`` where ``ok[s]``, or ``len(ok)``."""
    rows = np.where(ok, np.arange(len(ok)), len(ok))
    return np.minimum.accumulate(rows[::-1])[::-1].tolist()


def reaches_final(states, s):
    """Whether state ``s`` reaches the end through always-true PROCEEDs of non-greedy states."""
    stack = [s]
    while stack:
        var, take, proceed, not_take, greedy = states[stack.pop()]
        if greedy or proceed is None or not_take:
            continue
        if proceed == FINAL:
            return True
        stack.append(proceed)
    return False
