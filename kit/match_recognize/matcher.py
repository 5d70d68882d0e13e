"""Run one partition: ``run_partition(columns, spec, semantics)`` -> PartitionResult.

``semantics="flink"`` / ``"flink-2.3"`` run Flink's CEP NFA (``flink.py``);
``semantics="standard"`` runs ISO/IEC 19075-5 as Trino does: the pattern's program
(``program.py``) executed by a Pike VM that keeps threads in preference order.

Standard matcher, per start row ``s`` (leftmost first):
  * threads ``(pc, labels, excluded)`` are kept in preference order; the rows of a thread
    are ``s .. s+len(labels)-1`` (matches are contiguous), DEFINE is evaluated per thread on
    its own labels;
  * the epsilon closure follows SPLIT/JUMP/anchors depth-first, preferred branch first; the
    first thread reaching MATCH is the best so far and cuts every thread after it; threads
    before it continue and replace it if they match later;
  * deduplication: two threads at the same instruction on the same row are merged (the
    later, less preferred one is dropped) when their futures are identical -- always when
    no DEFINE looks at the match history (only the current row, PREV/NEXT of it,
    CLASSIFIER), otherwise only when their label sequences are equal too. This is exact
    and keeps ``(A | A A)* B`` linear; with history-free DEFINEs (and no WITHIN) the
    (instruction, row) pairs visited by a failed attempt are remembered as dead for later
    start rows, so ``(A+ B+)+ C`` with C never true stays linear too;
  * bounds: at most ``max_threads`` live threads, and the step budget (``budget.py``: thread
    steps, a thread that carries its labels one step more per ``HISTORY_ROWS`` of them, plus
    rows read by DEFINE's aggregates, per partition; the Flink runner spends it too); beyond them TooManyThreads is raised instead of running for minutes (e.g.
    ``(A+ B+)+ C`` whose C looks at the history).
Default AFTER MATCH is SKIP PAST LAST ROW; an empty match moves on one row. WITHIN (not in
the standard) follows Flink's runtime: a thread dies when ``t - t_start >= within``.

>>> import numpy as np
>>> from kit.match_recognize.spec import *
>>> up = Binary(">", Column("price"), Nav("PREV", Column("price"), 1))
>>> spec = MatchRecognize(pattern=Concat((Label("A"), Quantified(Label("B"), 1, None))),
...                       define=(("B", up),), measures=(Measure(Aggregate("COUNT", None), "n"),))
>>> r = run_partition({"price": np.array([3, 1, 2, 3, 1])}, spec, "standard")
>>> r.rows, r.matches[0].rows, r.matches[0].classifiers
([(3,)], (1, 2, 3), ('A', 'B', 'B'))
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import flink
from .budget import HISTORY_ROWS, MAX_THREADS, Budget
from .errors import MatchRecognizeError, MatchRuntimeError, TooManyThreads
from .codegen import compile_fast
from .expressions import Env, walk
from .measures import Measures, prepare_columns
from .program import check_size, compile_pattern, labels_of
from .spec import ONE_ROW, AfterMatch, Aggregate, Classifier, Column, MatchNumber, Nav

__all__ = ["Match", "PartitionResult", "Partition", "run_partition", "SEMANTICS"]

#: Flink as documented, the SQL standard (as Trino implements it), and the Flink 2.3 runtime
#: where it differs from its docs (AVG typing, WITHIN boundary, default AFTER MATCH).
SEMANTICS = ("flink", "standard", "flink-2.3")


@dataclass(frozen=True)
class Match:
    """One match: its number (1, 2, ... per partition), its row indices and the variable each
    row is mapped to; ``excluded[i]`` is True for rows inside ``{- -}``. An empty match has no
    rows and starts at ``start``."""
    number: int
    rows: tuple
    classifiers: tuple
    excluded: tuple = ()
    start: int = None


@dataclass
class PartitionResult:
    """Output of one partition, in emission order.

    ``rows``: ONE ROW PER MATCH -> one tuple of measures (MEASURES order) per match;
    ALL ROWS PER MATCH -> ``(row_index, *measures)`` per output row, where ``row_index`` is
    the input row (for an empty match: the row where it was found; for an unmatched row
    under WITH UNMATCHED ROWS: that row, with all measures None).
    ``columns``: the measure names. Timestamp measures are numpy datetime64[ms].
    """
    rows: list
    matches: list
    columns: list = field(default_factory=list)


def run_partition(columns: dict, spec, semantics: str = "flink", aggregates: dict | None = None,
                  *, rowtime: str | None = None, proctime: str | None = None,
                  max_threads: int = 10_000, step_budget: int | None = None,
                  trace: list | None = None, epoch_ms: bool = False) -> PartitionResult:
    """Match ``spec`` on one partition whose rows are already in processing order.

    ``trace``: a list that receives every DEFINE evaluation, in order, as a dict
    ``{"row", "variable", "rows", "classifiers", "result"}`` (the rows and labels the
    condition saw, the row being classified last) -- the seed's evaluation tables.
    ``step_budget``: the most steps the matcher may take (None: ``budget.py``'s default).
    ``epoch_ms``: TIMESTAMP measures as epoch milliseconds, not ``datetime64`` (``Measures``).
    """
    lists, stamps = prepare_columns(columns)
    # Flink's matches are contiguous blocks of unique variables: its DEFINEs read blocks
    # (``run_blocks``), unless a trace wants every evaluation's rows and labels
    blocks = semantics != "standard" and trace is None
    p = Partition(lists, stamps, spec, semantics, aggregates, rowtime=rowtime, proctime=proctime,
                  step_budget=step_budget, trace=trace, blocks=blocks, epoch_ms=epoch_ms)
    if semantics == "standard":
        return _standard(spec, p.conditions, [1], p.measures, p.after, p.rows, p.times,
                         spec.subset_map, max_threads, p.budget, full_history=trace is not None)
    if blocks:
        found = flink.run_blocks(p.elements, dict(spec.define), p.define_env, p.times, p.rows, p.after,
                                 spec.within_ms, within_inclusive=semantics == "flink", budget=p.budget)
    else:   # the reference: every row released at once
        nfa = p.nfa()
        found = nfa.advance(p.rows) + nfa.finish()
    matches, rows = [], []
    for i, (R, L) in enumerate(found, 1):
        match, row = p.one_row(i, R, L)
        matches.append(match)
        rows.append(row)
    return PartitionResult(rows, matches, p.measures.names)


class Partition:
    """``spec`` checked and compiled against one partition's columns (plain lists, as
    ``measures.prepare_columns`` gives them; ``stamps``: the TIMESTAMP ones): the pattern's
    elements (Flink's semantics), the DEFINE conditions (none when ``blocks``: ``run_blocks``
    compiles its own), the MEASURES, AFTER MATCH, WITHIN's time column and the step budget.
    What is compiled reads the lists by reference: ``extend`` adds rows (a stream's key,
    released a batch at a time: ``cep.CepOperator``)."""

    def __init__(self, lists: dict, stamps, spec, semantics: str = "flink", aggregates: dict | None = None,
                 *, rowtime: str | None = None, proctime: str | None = None, step_budget: int | None = None,
                 trace: list | None = None, blocks: bool = False, epoch_ms: bool = False):
        if semantics not in SEMANTICS:
            raise MatchRecognizeError("MATCH_RECOGNIZE", f"unknown semantics {semantics!r}; "
                                                         f"choose one of {', '.join(SEMANTICS)}")
        check_size(spec.pattern)
        self.lists, self.spec, self.semantics = lists, spec, semantics
        self.rows = len(next(iter(lists.values()))) if lists else 0
        is_flink = semantics != "standard"
        self.elements = flink.validate(spec, semantics) if is_flink else None
        variables = [e[0] for e in self.elements] if is_flink else labels_of(spec.pattern)
        subsets = spec.subset_map
        for name, expr in spec.define:
            if name not in variables:
                raise MatchRecognizeError("DEFINE", f"{name} is not a variable of the PATTERN",
                                          getattr(expr, "pos", None))
        common = dict(variables=variables, subsets=subsets, aggregates=aggregates,
                      timestamp_columns=stamps, rowtime=rowtime, proctime=proctime,
                      avg_truncates=semantics == "flink-2.3")
        self.define_env = Env(lists, clause="DEFINE", **common)
        self.budget = Budget(spec.pattern, self.rows, step_budget, self.define_env.reads)
        self.measures = Measures(spec, Env(lists, clause="MEASURES", all_rows=spec.rows_per_match != ONE_ROW, **common),
                                 epoch_ms)
        self.conditions = {}
        for var, expr in ([] if blocks else spec.define):
            self.conditions[var] = compile_fast(expr, self.define_env, var)
        if trace is not None:
            for var in variables:
                self.conditions[var] = _traced(var, self.conditions.get(var), trace)
        after = spec.after_match or (flink.default_after_match(semantics) if is_flink
                                     else AfterMatch("PAST LAST ROW"))
        if after.var is not None and after.var not in variables and after.var not in subsets:
            raise MatchRecognizeError("AFTER MATCH", f"unknown pattern variable {after.var}", after.pos)
        self.after, self.times = after, None
        if spec.within_ms is not None:
            time_col = rowtime or (spec.order_by[0].column if spec.order_by else None)
            if time_col is None:
                raise MatchRecognizeError("WITHIN", "WITHIN needs the time column: pass rowtime= or "
                                                    "ORDER BY it", spec.pos)
            self.times = self.define_env.column(time_col)

    def nfa(self) -> flink.NFA:
        """Flink's NFA over these rows (and those ``extend`` adds), at row 0."""
        return flink.NFA(self.elements, self.conditions, self.times, self.after, self.spec.within_ms,
                         within_inclusive=self.semantics == "flink", budget=self.budget)

    def extend(self, columns: dict):
        """Add rows: ``columns`` (name -> values, every column of the lists), prepared as the
        first were; a default step budget grows with them."""
        lists, _ = prepare_columns(columns)
        for name, values in lists.items():
            self.lists[name].extend(values)
        added = len(next(iter(lists.values()))) if lists else 0
        self.rows += added
        self.budget.add_rows(added)

    def one_row(self, number: int, R, L) -> tuple:
        """Match ``number`` (rows ``R``, variables ``L``) and its ONE ROW PER MATCH measures."""
        return Match(number, R, L, (False,) * len(R), R[0]), self.measures.one_row(R, L, number)


def _traced(var, condition, out):
    def traced(R, L, m, F):
        result = True if condition is None else condition(R, L, m, F)
        out.append({"row": R[-1], "variable": var, "rows": tuple(R), "classifiers": tuple(L),
                    "result": result})
        return result
    return traced


# ---------------------------------------------------------------- standard semantics


def _history_dependent(spec) -> bool:
    """Whether a DEFINE condition can see more than the current row (see module doc)."""
    found = []
    for var, expr in spec.define:
        def visit(e, var=var):
            if isinstance(e, (Aggregate, MatchNumber)):
                found.append(e)
            elif isinstance(e, Nav) and (e.kind.upper() in ("FIRST", "LAST") or _reads_classifier(e.arg)):
                found.append(e)   # PREV(CLASSIFIER()): another row's variable
            elif isinstance(e, Classifier) and e.var is not None:
                found.append(e)
            elif isinstance(e, Column) and e.var is not None and e.var != var:
                found.append(e)
        walk(expr, visit)
    return bool(found)


def _reads_classifier(expr) -> bool:
    found = []
    walk(expr, lambda e: found.append(e) if isinstance(e, Classifier) else None)
    return bool(found)


def _standard(spec, conditions, number, measures, after, nrows, times, subsets,
              max_threads, budget, full_history=False):
    code = compile_pattern(spec.pattern)
    if measures.with_unmatched and any(ins[0] == "EXCLUDE" for ins in code):
        raise MatchRecognizeError("PATTERN", "the exclusion syntax {- -} is not allowed with ALL "
                                             "ROWS PER MATCH WITH UNMATCHED ROWS", spec.pos)
    dependent = full_history or _history_dependent(spec)
    true = lambda R, L, m, F: True  # noqa: E731
    cond = {ins[1]: conditions.get(ins[1], true) for ins in code if ins[0] == "LABEL"}
    within = spec.within_ms
    # (pc, row) pairs that a failed attempt visited: with history-free conditions their
    # future does not depend on where the attempt started, so they cannot match either
    dead = set() if not dependent and within is None else None

    def closure(seeds, pos, visited):
        out, seen = [], set()
        for seed in seeds:
            stack = [seed]
            while stack:
                th = stack.pop()
                pc, L, H, d = th
                ins = code[pc]
                op = ins[0]
                key = (pc, L) if dependent else pc
                if op == "LOOP":
                    # its two ways out are two states: back to the head after an iteration
                    # that read rows, out of the loop after an empty one (the head already
                    # seen on this row); merging them would drop the empty iteration's
                    # (preferred) way on to what follows the loop
                    head = ins[1]
                    empty = ((head, L) if dependent else head) in seen
                    key = (key, empty)
                if key in seen:
                    continue
                seen.add(key)
                if dead is not None:
                    if (pc, pos) in dead:
                        continue
                    visited.append((pc, pos))
                if op == "LABEL":
                    out.append(th)
                elif op == "SPLIT":
                    stack.append((ins[2], L, H, d))
                    stack.append((ins[1], L, H, d))
                elif op == "JUMP":
                    stack.append((ins[1], L, H, d))
                elif op == "LOOP":
                    stack.append((pc + 1 if empty else head, L, H, d))
                elif op == "EXCLUDE":
                    stack.append((pc + 1, L, H, d + ins[1]))
                elif op == "BEGIN":
                    if pos == 0:
                        stack.append((pc + 1, L, H, d))
                elif op == "END":
                    if pos == nrows:
                        stack.append((pc + 1, L, H, d))
                else:  # MATCH: everything after this thread is less preferred
                    return out, (H,)
        return out, None

    first = (0, () if dependent else None, None, 0)
    # without anchors and dead states the closure at the start row is the same for all rows
    same_start = dead is None and not any(ins[0] in ("BEGIN", "END") for ins in code)
    start_closure = closure([first], 0, []) if same_start else None

    def attempt(s):
        visited = []
        threads, best = start_closure if same_start else closure([first], s, visited)
        pos = s
        while threads and pos < nrows:
            if within is not None and times[pos] - times[s] >= within:
                break
            R = range(s, pos + 1) if dependent else range(pos, pos + 1)
            cache = {}
            seeds = []
            for pc, L, H, d in threads:
                var = code[pc][1]
                L1 = L + (var,) if dependent else (var,)
                key = L1 if dependent else var
                ok = cache.get(key)
                if ok is None:
                    ok = cache[key] = cond[var](R, L1, number[0], None) is True
                if ok:
                    seeds.append((pc + 1, L1 if dependent else None, (var, d > 0, H), d))
            budget.spend(len(threads) * (1 + (pos - s) // HISTORY_ROWS if dependent else 1))
            pos += 1
            threads, found = closure(seeds, pos, visited)
            if found is not None:
                best = found
            if len(threads) > max_threads:
                raise TooManyThreads("PATTERN", f"more than {max_threads:,} live threads at row {pos} "
                                                "of this partition; simplify the pattern or raise the "
                                                f"bound: config={{'{MAX_THREADS}': n}} in kit.sql, "
                                                "max_threads=n in match_recognize")
        if best is None:
            if dead is not None:
                dead.update(visited)
            return None
        labels, excluded = [], []
        h = best[0]
        while h is not None:
            labels.append(h[0])
            excluded.append(h[1])
            h = h[2]
        return tuple(reversed(labels)), tuple(reversed(excluded))

    rows, matches = [], []
    one_row = spec.rows_per_match == ONE_ROW
    s, covered = 0, -1
    kind = after.kind.upper()
    skip_labels = (frozenset(subsets.get(after.var, (after.var,))) if after.var else None)
    while s < nrows:
        best = attempt(s)
        if best is None:
            if measures.with_unmatched and s > covered:
                rows.append(measures.unmatched(s))
            s += 1
            continue
        m = number[0]
        number[0] += 1
        L, X = best
        R = tuple(range(s, s + len(L)))
        matches.append(Match(m, R, L, X, s))
        if one_row:
            rows.append(measures.one_row(R, L, m))
        else:
            rows.extend(measures.all_rows(R, L, X, m, s))
        if not R:
            covered = max(covered, s)
            s += 1
            continue
        covered = max(covered, R[-1])
        if kind == "PAST LAST ROW":
            s = R[-1] + 1
        elif kind == "TO NEXT ROW":
            s += 1
        else:
            hits = [r for r, lab in zip(R, L) if lab in skip_labels]
            if not hits:
                raise MatchRuntimeError("AFTER MATCH", f"cannot skip to {after.var}: no row of "
                                                       f"match {m} is mapped to it", after.pos)
            target = hits[0] if kind == "TO FIRST" else hits[-1]
            if target == s:
                raise MatchRuntimeError("AFTER MATCH", f"SKIP {kind} {after.var} would restart at "
                                                       f"the first row of match {m} (row {s}): an "
                                                       "infinite loop", after.pos)
            s = target
    return PartitionResult(rows, matches, measures.names)
