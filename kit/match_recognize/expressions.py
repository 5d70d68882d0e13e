"""DEFINE and MEASURES expressions compiled once to Python closures.

A compiled expression is called as ``f(R, L, m, F)`` where ``R`` is the tuple of row indices
mapped so far (in DEFINE: including the row being classified, which is ``R[-1]``), ``L`` the
tuple of their labels (pattern variables), ``m`` the match number and ``F`` the pair
``(R, L)`` of the whole match (for FINAL; equal to ``(R, L)`` in DEFINE and ONE ROW).

    A.price            value at the last row labelled A (in DEFINE of A: the current row)
    price              value at R[-1] (the universal variable; NULL for an empty match)
    LAST(A.price, n)   n-th last row labelled A (logical offset); NULL out of range
    PREV(A.price, n)   n rows physically before the last A row (any row of the partition)
    SUM(A.price)       over the rows labelled A so far (running in DEFINE)
    CLASSIFIER(U)      the variable of the last row labelled A or C so far (SUBSET U = (A, C))
    PREV(CLASSIFIER()) the variable of the row before; NULL outside the match (``F``; in
                       DEFINE the match so far), as any navigation over CLASSIFIER()
    COUNT(A.*)         the rows labelled A so far; also COUNT(), ARRAY_AGG, MAX_BY/MIN_BY,
                       ARBITRARY/ANY_VALUE (the standard's and Trino's, semantics="standard")

Inside a navigation or an aggregate an expression is evaluated at one row: ``g((row,),
(its variable,), m, F)`` -- the variable so that CLASSIFIER() there is that row's.

>>> from kit.match_recognize.spec import Binary, Column
>>> env = Env({"price": [10, 15, 20]}, variables={"A", "B"})
>>> f = compile_expr(Binary(">", Column("price", "B"), Column("price", "A")), env)
>>> f((0, 1), ("A", "B"), 1, None)
True

A DECIMAL (a column, a literal such as ``1.5``, a CAST) is a Python ``Decimal``, FLOAT and
DOUBLE are floats; the two do not meet in arithmetic or comparisons once ``types.coerce``
has cast the DECIMAL side to DOUBLE, as Flink's planner does.
NULL follows SQL three-valued logic (a comparison with NULL is NULL, and a NULL condition
does not classify the row); integer ``/`` truncates toward zero as BIGINT division does.
Timestamps are epoch milliseconds inside expressions; INTERVAL literals are milliseconds.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Context, Decimal

import numpy as np
from pyspark.sql import types as T

from ..aggregate_types import exact_average, wrap

from .errors import MatchRecognizeError
from .spec import (Aggregate, Between, Binary, Call, Case, Cast, Classifier, Column, InList,
                   IsNull, Literal, MatchNumber, MatchProctime, MatchRowtime, Nav, Semantics,
                   Unary)

__all__ = ["Env", "compile_expr", "variables_of", "walk", "is_timestamp", "to_ms", "to_decimal"]


class Env:
    """What expressions are compiled against: one partition's columns (plain lists), the
    pattern variables, SUBSET names, user aggregates and the time columns.

    ``avg_truncates``: AVG of integers returns an integer (Flink 2.3 runtime: BIGINT AVG).
    ``all_rows``: MEASURES of ALL ROWS PER MATCH, where FIRST counts over the whole match.
    ``reads[0]`` counts the rows the compiled aggregates have read (the matchers' step budget).
    """

    def __init__(self, columns: dict, variables=(), subsets=None, aggregates=None,
                 timestamp_columns=(), rowtime=None, proctime=None, avg_truncates=False,
                 clause="DEFINE", all_rows=False):
        self.columns = columns
        self.variables = set(variables)
        self.subsets = {k: frozenset(v) for k, v in (subsets or {}).items()}
        self.aggregates = {k.upper(): v for k, v in (aggregates or {}).items()}
        self.timestamp_columns = set(timestamp_columns)
        self.rowtime, self.proctime = rowtime, proctime
        self.avg_truncates = avg_truncates
        self.clause = clause
        self.all_rows = all_rows   # MEASURES of ALL ROWS PER MATCH: evaluated at each row of a complete match
        self.reads = [0]
        self.nrows = len(next(iter(columns.values()))) if columns else 0

    def shape(self) -> tuple:
        """What compiling an expression against this Env depends on, besides its rows."""
        return (self.clause, self.all_rows, self.avg_truncates, self.rowtime, self.proctime, tuple(self.columns),
                frozenset(self.variables), frozenset(self.subsets.items()), frozenset(self.timestamp_columns),
                tuple((name, id(f)) for name, f in self.aggregates.items()))

    def column(self, name, pos=None):
        if name in self.columns:
            return self.columns[name]
        for key in self.columns:
            if key.lower() == name.lower():
                return self.columns[key]
        raise MatchRecognizeError(self.clause, f"unknown column {name!r}; the input has "
                                               f"{', '.join(self.columns)}", pos)

    def labels(self, var, pos=None):
        """The set of labels ``var`` stands for (a variable, or a SUBSET's variables)."""
        if var in self.subsets:
            return self.subsets[var]
        if var not in self.variables:
            raise MatchRecognizeError(self.clause, f"unknown pattern variable {var!r}", pos)
        return frozenset((var,))

    def error(self, message, pos=None):
        return MatchRecognizeError(self.clause, message, pos)


def to_ms(value):
    """A timestamp (numpy datetime64, ISO string or epoch ms int) as epoch milliseconds."""
    if value is None or isinstance(value, (int, np.integer)):
        return None if value is None else int(value)
    return int(np.datetime64(value, "ms").astype("int64"))


# ---------------------------------------------------------------- variables referenced


def variables_of(expr) -> set:
    """The pattern variables (or SUBSET names) referenced by column references in ``expr``."""
    out = set()
    walk(expr, lambda e: out.add(e.var) if isinstance(e, (Column, Classifier)) and e.var else None)
    return out


def walk(expr, visit):
    """Call ``visit`` on ``expr`` and every node below it (tuples of nodes included)."""
    visit(expr)
    if isinstance(expr, (tuple, list)):
        for item in expr:
            walk(item, visit)
        return
    for name in getattr(expr, "__dataclass_fields__", ()):
        if name != "pos":
            child = getattr(expr, name)
            if hasattr(child, "__dataclass_fields__") or isinstance(child, (tuple, list)):
                walk(child, visit)


def is_timestamp(expr, env: Env) -> bool:
    """True when ``expr`` yields a timestamp (given back as datetime64 in the output)."""
    if isinstance(expr, Column):
        return expr.name in env.timestamp_columns
    if isinstance(expr, (Nav, Semantics)):
        return is_timestamp(expr.arg, env)
    if isinstance(expr, Aggregate):
        return expr.func.upper() in ("MIN", "MAX") and is_timestamp(expr.arg, env)
    if isinstance(expr, MatchRowtime):
        return env.rowtime in env.timestamp_columns if expr.arg is None else is_timestamp(expr.arg, env)
    if isinstance(expr, Cast):
        return expr.type.upper().startswith("TIMESTAMP")
    if isinstance(expr, Binary) and expr.op in "+-":
        return is_timestamp(expr.left, env) and not is_timestamp(expr.right, env)
    if isinstance(expr, Literal):
        return expr.type.upper() == "TIMESTAMP"
    return False


# ---------------------------------------------------------------- compiler


def compile_expr(expr, env: Env, inner: bool = False):
    """Compile ``expr`` to ``f(R, L, m, F)``. ``inner``: inside FIRST/LAST/PREV/NEXT or an
    aggregate, where every column reference means the row ``R[-1]`` being visited."""
    c = _COMPILERS.get(type(expr))
    if c is None:
        raise env.error(f"unsupported expression {expr!r}", getattr(expr, "pos", None))
    return c(expr, env, inner)


def _literal(e: Literal, env, inner):
    t = e.type.upper()
    v = e.value
    if v is not None:
        if t == "TIMESTAMP" or t == "DATE":
            v = to_ms(v)
        elif t == "DECIMAL":
            v = v if isinstance(v, Decimal) else Decimal(str(v))
        elif t in ("DOUBLE", "FLOAT"):
            v = float(v)
        elif t in ("INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "INTERVAL"):
            v = int(v)
    return lambda R, L, m, F: v


def last_index(L, var, n=0):
    """Index in the labels ``L`` of the ``n``-th last row of ``var`` (0: the last), or -1."""
    i = len(L) - 1
    while i >= 0:
        if L[i] == var:
            if n == 0:
                return i
            n -= 1
        i -= 1
    return -1


def last_index_in(L, labels, n=0):
    """``last_index`` for a set of labels (a SUBSET)."""
    i = len(L) - 1
    while i >= 0:
        if L[i] in labels:
            if n == 0:
                return i
            n -= 1
        i -= 1
    return -1


def first_index_in(L, labels, n=0):
    """Index in ``L`` of the ``n``-th first row labelled one of ``labels`` (0: the first), or -1."""
    for i, label in enumerate(L):
        if label in labels:
            if n == 0:
                return i
            n -= 1
    return -1


def label_at(row, R, L, F):
    """The variable input row ``row`` is mapped to in the match (``F``, or ``(R, L)`` in DEFINE,
    where the match so far is all there is), or None when the row is not in it. A match's
    rows are consecutive, so the row's place is ``row - first row``."""
    rows, labels = F if F is not None else (R, L)
    if not rows or labels is None:
        return None
    i = row - rows[0]
    return labels[i] if 0 <= i < len(labels) else None


def _column(e: Column, env, inner):
    col = env.column(e.name, e.pos)
    if inner or e.var is None:
        return lambda R, L, m, F: col[R[-1]] if R else None
    labels = env.labels(e.var, e.pos)
    if len(labels) == 1:
        (var,) = labels
        return lambda R, L, m, F: col[R[i]] if (i := last_index(L, var)) >= 0 else None
    return lambda R, L, m, F: col[R[i]] if (i := last_index_in(L, labels)) >= 0 else None


def _single_label_set(expr, env, what):
    """The label set an aggregate or navigation ranges over: the one variable its columns
    name, or None (all rows) when they name none."""
    names = variables_of(expr)
    if len(names) > 1:
        raise env.error(f"{what} must reference a single pattern variable, not "
                        f"{', '.join(sorted(names))}", getattr(expr, "pos", None))
    if not names:
        return None
    (var,) = names
    return env.labels(var, getattr(expr, "pos", None))


def _logical_locator(e: Nav, env):
    """For FIRST/LAST: ``loc(R, L) -> row index or None``."""
    if e.offset < 0:
        raise env.error(f"{e.kind} offset must be >= 0, got {e.offset}", e.pos)
    i = _logical_index(e, env)
    return lambda R, L: None if (k := i(R, L)) is None else R[k]


def _logical_index(e: Nav, env):
    """For FIRST/LAST: ``index(R, L) -> place in R of the row it picks, or None``."""
    if any(isinstance(x, Nav) for x in _nodes(e.arg)):
        raise env.error(f"{e.kind}() cannot contain another navigation", e.pos)
    labels = _single_label_set(e.arg, env, f"{e.kind}()")
    n = e.offset
    last = e.kind.upper() == "LAST"
    if labels is None:
        if last:
            return lambda R, L: len(R) - 1 - n if n < len(R) else None
        return lambda R, L: n if n < len(R) else None

    if last and len(labels) == 1:
        (var,) = labels
        find = lambda L: last_index(L, var, n)  # noqa: E731
    elif last:
        find = lambda L: last_index_in(L, labels, n)  # noqa: E731
    else:
        find = lambda L: first_index_in(L, labels, n)  # noqa: E731
    return lambda R, L: i if (i := find(L)) >= 0 else None


def _nodes(expr):
    out = []
    walk(expr, out.append)
    return out


def _nav(e: Nav, env, inner):
    kind = e.kind.upper()
    if inner:
        raise env.error(f"{kind}() cannot be nested here", e.pos)
    if kind in ("FIRST", "LAST"):
        loc = _logical_locator(e, env)
        # FIRST in MEASURES counts from the match's first row over the whole match, so its
        # offset may reach past the current row of ALL ROWS PER MATCH (Trino's rule: the match
        # is complete there); LAST counts back from the current row (RUNNING) or the end
        whole = (lambda R, L, F: F) if kind == "FIRST" and env.all_rows else (lambda R, L, F: (R, L))
        if isinstance(e.arg, Column):
            col = env.column(e.arg.name, e.arg.pos)
            labels = env.labels(e.arg.var, e.arg.pos) if e.arg.var else None
            if kind == "LAST" and labels is not None and len(labels) == 1:
                (var,) = labels
                n = e.offset

                def last_of_var(R, L, m, F):
                    k = n
                    i = len(L) - 1
                    while i >= 0:
                        if L[i] == var:
                            if k == 0:
                                return col[R[i]]
                            k -= 1
                        i -= 1
                    return None
                return last_of_var

            def direct(R, L, m, F):
                row = loc(*whole(R, L, F))
                return None if row is None else col[row]
            return direct
        g = compile_expr(e.arg, env, inner=True)
        index = _logical_index(e, env)

        def f(R, L, m, F):
            R, L = whole(R, L, F)
            i = index(R, L)
            return None if i is None else g((R[i],), (L[i],), m, F)
        return f
    if kind not in ("PREV", "NEXT"):
        raise env.error(f"unknown navigation {kind}", e.pos)
    if e.offset < 0:
        raise env.error(f"{kind} offset must be >= 0, got {e.offset}", e.pos)
    step = -e.offset if kind == "PREV" else e.offset
    arg = e.arg
    final = False
    if isinstance(arg, Semantics) and isinstance(arg.arg, Nav) and arg.arg.kind.upper() in ("FIRST", "LAST"):
        # PREV(RUNNING LAST(x)), PREV(FINAL FIRST(x)): the inner navigation's own semantics
        final = arg.kind.upper() == "FINAL"
        if final and env.clause == "DEFINE":
            raise env.error("FINAL cannot be used in DEFINE", arg.pos)
        arg = arg.arg
    if isinstance(arg, Nav) and arg.kind.upper() in ("FIRST", "LAST"):
        loc = _logical_locator(arg, env)
        arg = arg.arg
    else:
        if any(isinstance(x, Nav) for x in _nodes(arg)):
            raise env.error(f"{kind}() can only contain FIRST() or LAST() as navigation", e.pos)
        labels = _single_label_set(arg, env, f"{kind}()")
        if labels is None:
            loc = lambda R, L: R[-1] if R else None  # noqa: E731
        else:
            loc = lambda R, L: R[i] if (i := last_index_in(L, labels)) >= 0 else None  # noqa: E731
    g = compile_expr(arg, env, inner=True)
    nrows = env.nrows

    def f(R, L, m, F):
        row = loc(*F) if final else loc(R, L)
        if row is None:
            return None
        row += step
        return g((row,), (label_at(row, R, L, F),), m, F) if 0 <= row < nrows else None
    return f


def _aggregate(e: Aggregate, env, inner):
    func = e.func.upper()
    if inner:
        raise env.error(f"aggregate {func}() cannot be nested", e.pos)
    if e.distinct:
        raise env.error(f"DISTINCT aggregates are not supported: {func}(DISTINCT ...)", e.pos)
    args = e.arg if isinstance(e.arg, tuple) else (() if e.arg is None else (e.arg,))
    labels = _single_label_set(args, env, f"aggregate {func}()") if args else None
    if func == "COUNT" and len(args) == 1 and isinstance(args[0], Column) and args[0].name == "*":
        args = ()   # COUNT(A.*), COUNT(U.*): the rows mapped to A (to U's variables)
    reads = env.reads
    labelled = any(isinstance(x, Classifier) for x in _nodes(args))   # CLASSIFIER() inside

    def each(g, R, L, m, F):
        """``g`` at every row the aggregate reads, in row order (given the row's variable when
        an argument asks for CLASSIFIER())."""
        reads[0] += len(R)
        if labelled:
            return [g((r,), (lab,), m, F) for r, lab in zip(R, L) if labels is None or lab in labels]
        if labels is None:
            return [g((r,), None, m, F) for r in R]
        return [g((r,), None, m, F) for r, lab in zip(R, L) if lab in labels]
    gs = [compile_expr(a, env, inner=True) for a in args]
    if func in env.aggregates:
        cls = env.aggregates[func]

        def user(R, L, m, F):
            agg = cls() if isinstance(cls, type) else cls
            acc = agg.create_accumulator()
            picked = zip(*[each(g, R, L, m, F) for g in gs]) if gs else \
                [()] * len(each(lambda *_: None, R, L, m, F))   # no argument: once per row
            for row in picked:
                agg.accumulate(acc, *row)
            return agg.get_value(acc)
        return user
    if func == "COUNT":
        if not gs:
            def rows(R, L, m, F):
                reads[0] += len(R)
                return len(R) if labels is None else sum(1 for lab in L if lab in labels)
            return rows
        g = gs[0]
        return lambda R, L, m, F: sum(1 for v in each(g, R, L, m, F) if v is not None)
    if func in ("MAX_BY", "MIN_BY"):
        if len(gs) != 2:
            raise env.error(f"{func}(x, key) takes two arguments", e.pos)
        better = (lambda a, b: a > b) if func == "MAX_BY" else (lambda a, b: a < b)

        def by(R, L, m, F):
            # the x of the row with the largest (smallest) key; the first such row on ties
            best = key = None
            for x, k in zip(each(gs[0], R, L, m, F), each(gs[1], R, L, m, F)):
                if k is not None and (key is None or better(k, key)):
                    best, key = x, k
            return best
        return by
    if len(gs) != 1:
        raise env.error(f"{func}() takes one argument", e.pos)
    g = gs[0]
    if func == "ARRAY_AGG":
        # the values in row order, NULLs included; NULL when no row is read
        return lambda R, L, m, F: each(g, R, L, m, F) or None
    if func in ("ARBITRARY", "ANY_VALUE"):
        # any non-NULL value: the kit takes the first, so the answer is deterministic
        return lambda R, L, m, F: next((v for v in each(g, R, L, m, F) if v is not None), None)

    def values(R, L, m, F):
        return [v for v in each(g, R, L, m, F) if v is not None]
    if func in ("SUM", "AVG") and e.arg_type is not None:
        return _flink_sum_avg(func, e.arg_type, values, env.avg_truncates)
    if func == "SUM":
        return lambda R, L, m, F: (lambda vs: sum(vs) if vs else None)(values(R, L, m, F))
    if func == "MIN":
        return lambda R, L, m, F: (lambda vs: min(vs) if vs else None)(values(R, L, m, F))
    if func == "MAX":
        return lambda R, L, m, F: (lambda vs: max(vs) if vs else None)(values(R, L, m, F))
    if func == "AVG":
        truncate = env.avg_truncates

        def avg(R, L, m, F):
            vs = values(R, L, m, F)
            if not vs:
                return None
            total = sum(vs)
            if truncate and all(isinstance(v, int) and not isinstance(v, bool) for v in vs):
                return _int_div(total, len(vs))
            return total / len(vs)
        return avg
    raise env.error(f"unknown aggregate function {func}()", e.pos)


def _flink_sum_avg(func: str, dtype, values, truncate: bool):
    """Flink's SUM or AVG over values of Spark type ``dtype``, planned as ``$SUM0 / COUNT``: the
    sum in that type (integers wrapped around, FLOAT in single precision, DECIMAL exact); the
    AVG that sum divided (integers truncated toward zero under ``truncate``, else exact;
    DECIMAL rounded HALF_UP to DECIMAL(38, max(6, s)))."""
    is_float = isinstance(dtype, T.FloatType)
    exact_int = isinstance(dtype, T.IntegralType)

    def total(vs):
        if is_float:
            acc = np.float32(0)
            for v in vs:
                acc = np.float32(acc + np.float32(v))
            return acc
        return wrap(sum(vs), dtype) if exact_int else sum(vs)

    def run(R, L, m, F):
        vs = values(R, L, m, F)
        if not vs:
            return None
        t = total(vs)
        if func == "SUM":
            return float(t) if is_float else t
        if is_float:
            return float(np.float32(t / np.float32(len(vs))))
        if exact_int:
            return exact_average(t, len(vs), dtype) if truncate else sum(vs) / len(vs)   # (as documented: exact)
        if isinstance(dtype, T.DecimalType):
            return exact_average(Decimal(t), len(vs), T.DecimalType(38, max(6, dtype.scale)))
        return t / len(vs)
    return run


def _int_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _div(a, b):
    if b == 0:
        if _is_int(a) and _is_int(b):
            raise MatchRecognizeError("expression", "division by zero")
        return math.copysign(math.inf, a) if a else math.nan
    if _is_int(a) and _is_int(b):
        return _int_div(a, b)
    return a / b


def _mod(a, b):
    if _is_int(a) and _is_int(b):
        if b == 0:
            raise MatchRecognizeError("expression", "division by zero in MOD")
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    if isinstance(a, float) or isinstance(b, float):
        return math.fmod(a, b)
    return a % b   # a DECIMAL: Decimal's % takes the dividend's sign, as SQL's MOD


ARITHMETIC = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": _div, "%": _mod, "||": lambda a, b: f"{a}{b}",
}
_COMPARE = {
    "=": lambda a, b: a == b, "<>": lambda a, b: a != b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def _binary(e: Binary, env, inner):
    op = e.op.upper()
    fa, fb = compile_expr(e.left, env, inner), compile_expr(e.right, env, inner)
    if op == "AND":
        def f_and(R, L, m, F):
            a = fa(R, L, m, F)
            if a is False:
                return False
            b = fb(R, L, m, F)
            if b is False:
                return False
            return None if a is None or b is None else True
        return f_and
    if op == "OR":
        def f_or(R, L, m, F):
            a = fa(R, L, m, F)
            if a is True:
                return True
            b = fb(R, L, m, F)
            if b is True:
                return True
            return None if a is None or b is None else False
        return f_or
    fn = _COMPARE.get(op) or ARITHMETIC.get(op)
    if fn is None:
        raise env.error(f"unknown operator {e.op!r}", e.pos)
    if op == "<":
        def lt(R, L, m, F):
            a = fa(R, L, m, F)
            if a is None:
                return None
            b = fb(R, L, m, F)
            return None if b is None else a < b
        return lt
    if op == ">":
        def gt(R, L, m, F):
            a = fa(R, L, m, F)
            if a is None:
                return None
            b = fb(R, L, m, F)
            return None if b is None else a > b
        return gt

    def f(R, L, m, F):
        a = fa(R, L, m, F)
        if a is None:
            return None
        b = fb(R, L, m, F)
        return None if b is None else fn(a, b)
    return f


def _unary(e: Unary, env, inner):
    g = compile_expr(e.arg, env, inner)
    op = e.op.upper()
    if op == "NOT":
        return lambda R, L, m, F: (lambda v: None if v is None else not v)(g(R, L, m, F))
    if op == "-":
        return lambda R, L, m, F: (lambda v: None if v is None else -v)(g(R, L, m, F))
    if op == "+":
        return g
    raise env.error(f"unknown operator {e.op!r}", e.pos)


def _is_null(e: IsNull, env, inner):
    g = compile_expr(e.arg, env, inner)
    if e.negated:
        return lambda R, L, m, F: g(R, L, m, F) is not None
    return lambda R, L, m, F: g(R, L, m, F) is None


def _between(e: Between, env, inner):
    g, lo, hi = (compile_expr(x, env, inner) for x in (e.arg, e.low, e.high))
    neg = e.negated

    def f(R, L, m, F):
        v, a, b = g(R, L, m, F), lo(R, L, m, F), hi(R, L, m, F)
        ge = None if v is None or a is None else v >= a
        le = None if v is None or b is None else v <= b
        r = False if (ge is False or le is False) else (None if ge is None or le is None else True)
        return r if r is None or not neg else not r
    return f


def _in_list(e: InList, env, inner):
    g = compile_expr(e.arg, env, inner)
    items = [compile_expr(x, env, inner) for x in e.items]
    neg = e.negated

    def f(R, L, m, F):
        v = g(R, L, m, F)
        if v is None:
            return None
        saw_null = False
        for it in items:
            w = it(R, L, m, F)
            if w is None:
                saw_null = True
            elif w == v:
                return not neg
        return None if saw_null else neg
    return f


def _case(e: Case, env, inner):
    operand = compile_expr(e.operand, env, inner) if e.operand is not None else None
    whens = [(compile_expr(w, env, inner), compile_expr(t, env, inner)) for w, t in e.whens]
    other = compile_expr(e.else_, env, inner) if e.else_ is not None else (lambda R, L, m, F: None)

    def f(R, L, m, F):
        if operand is not None:
            v = operand(R, L, m, F)
            for w, t in whens:
                if v is not None and w(R, L, m, F) == v:
                    return t(R, L, m, F)
        else:
            for w, t in whens:
                if w(R, L, m, F) is True:
                    return t(R, L, m, F)
        return other(R, L, m, F)
    return f


def _cast_fn(type_name: str, env, pos):
    t = type_name.upper().split("(")[0].strip()
    if t in ("INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT"):
        return lambda v: int(v) if not isinstance(v, str) else int(float(v))
    if t in ("DECIMAL", "NUMERIC"):
        scale = int(type_name.split(",")[1].rstrip(") ")) if "," in type_name else 0
        return lambda v: to_decimal(v, scale)
    if t in ("DOUBLE", "FLOAT", "REAL"):
        return float
    if t in ("STRING", "VARCHAR", "CHAR"):
        text = lambda v: ("TRUE" if v else "FALSE") if isinstance(v, bool) else str(v)  # noqa: E731
        if t == "VARCHAR" and "(" in type_name:   # VARCHAR(n) keeps the first n characters
            n = int(type_name.split("(")[1].rstrip(") "))
            return lambda v: text(v)[:n]
        return text
    if t == "BOOLEAN":
        return lambda v: v.strip().upper() == "TRUE" if isinstance(v, str) else bool(v)
    if t in ("TIMESTAMP", "DATE", "TIMESTAMP_LTZ"):
        return to_ms
    raise env.error(f"unsupported CAST target type {type_name}", pos)


def _cast(e: Cast, env, inner):
    g = compile_expr(e.arg, env, inner)
    fn = _cast_fn(e.type, env, e.pos)
    return lambda R, L, m, F: (lambda v: None if v is None else fn(v))(g(R, L, m, F))


_WIDE = Context(prec=80)   # room for any DECIMAL(38, s) value at any scale up to 38


def to_decimal(x, scale: int) -> Decimal:
    """A number (int, float, Decimal) as a Decimal of ``scale`` digits after the point,
    rounded half up as Flink rounds a DECIMAL: ``to_decimal(2.345, 2)`` is ``Decimal('2.35')``."""
    d = x if isinstance(x, Decimal) else Decimal(repr(x) if isinstance(x, float) else x)
    return d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_WIDE)


def _round(x, digits=0):
    if isinstance(x, int) and digits >= 0:
        return x
    r = to_decimal(x, digits)
    return r if isinstance(x, Decimal) else int(r) if isinstance(x, int) else float(r)


def _like(value: str, pattern: str) -> bool:
    """SQL ``value LIKE pattern``: ``%`` any run of characters, ``_`` one character."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.S) is not None


def _concat(*vs):
    return None if any(v is None for v in vs) else "".join(str(v) for v in vs)


def _substring(text, start, length=None):
    """SUBSTRING(text, start[, length]) as Trino's substr: ``start`` counts from 1, a negative
    one from the end, 0 gives ''; NULL-free arguments only (the caller checks)."""
    if start == 0 or length is not None and length < 0:
        return ""
    begin = start - 1 if start > 0 else len(text) + start if start < 0 else 0
    if start < 0 and begin < 0:
        return ""
    return text[begin:] if length is None else text[begin:begin + length]


def _concat_ws(separator, *parts):
    """CONCAT_WS: the parts (strings, or the items of arrays) joined by ``separator``, NULLs
    skipped; NULL when the separator is NULL."""
    if separator is None:
        return None
    items = [x for p in parts for x in (p if isinstance(p, list) else [p])]
    return separator.join(str(x) for x in items if x is not None)


_SCALARS = {
    "ABS": (1, abs), "FLOOR": (1, lambda x: math.floor(x) if isinstance(x, float) else x),
    "CEIL": (1, lambda x: math.ceil(x) if isinstance(x, float) else x),
    "CEILING": (1, lambda x: math.ceil(x) if isinstance(x, float) else x),
    "UPPER": (1, str.upper), "LOWER": (1, str.lower),
    "CHAR_LENGTH": (1, len), "CHARACTER_LENGTH": (1, len), "LENGTH": (1, len),
    "MOD": (2, _mod), "POWER": (2, lambda a, b: float(a) ** float(b)), "SQRT": (1, math.sqrt),
    "EXP": (1, math.exp), "LN": (1, math.log), "LOG10": (1, math.log10),
    "ROUND": (None, _round), "LIKE": (2, _like),
    "SUBSTRING": (None, _substring), "SUBSTR": (None, _substring), "TRIM": (1, str.strip),
    "LTRIM": (1, str.lstrip), "RTRIM": (1, str.rstrip), "REPLACE": (3, str.replace),
    "REVERSE": (1, lambda s: s[::-1]),
}


def _call(e: Call, env, inner):
    func = e.func.upper()
    gs = [compile_expr(a, env, inner) for a in e.args]
    if func == "COALESCE":
        def coalesce(R, L, m, F):
            for g in gs:
                v = g(R, L, m, F)
                if v is not None:
                    return v
            return None
        return coalesce
    if func == "CONCAT":
        return lambda R, L, m, F: _concat(*[g(R, L, m, F) for g in gs])
    if func == "ARRAY":
        return lambda R, L, m, F: [g(R, L, m, F) for g in gs]
    if func == "CONCAT_WS":
        if not gs:
            raise env.error("CONCAT_WS(separator, ...) needs a separator", e.pos)
        return lambda R, L, m, F: _concat_ws(*[g(R, L, m, F) for g in gs])
    if func in env.aggregates or func in ("COUNT", "SUM", "AVG", "MIN", "MAX"):
        return _aggregate(Aggregate(func, tuple(e.args) if len(e.args) != 1 else e.args[0],
                                    pos=e.pos), env, inner)
    if func not in _SCALARS:
        raise env.error(f"unknown function {func}()", e.pos)
    arity, fn = _SCALARS[func]
    if arity is not None and arity != len(gs):
        raise env.error(f"{func}() takes {arity} argument(s), got {len(gs)}", e.pos)

    def f(R, L, m, F):
        vs = [g(R, L, m, F) for g in gs]
        return None if any(v is None for v in vs) else fn(*vs)
    return f


def _classifier(e: Classifier, env, inner):
    if e.var is None or inner:
        # inside a navigation or an aggregate, CLASSIFIER(v) is the variable of the row reached
        return lambda R, L, m, F: L[-1] if L else None
    labels = env.labels(e.var, e.pos)
    return lambda R, L, m, F: L[i] if (i := last_index_in(L, labels)) >= 0 else None


def _match_number(e, env, inner):
    return lambda R, L, m, F: m


def _match_rowtime(e: MatchRowtime, env, inner):
    name = e.arg.name if isinstance(e.arg, Column) else env.rowtime
    if name is None:
        raise env.error("MATCH_ROWTIME() needs the time column: pass rowtime=<column>", e.pos)
    col = env.column(name, e.pos)
    return lambda R, L, m, F: col[R[-1]] if R else None


def _match_proctime(e, env, inner):
    if env.proctime is None:
        return lambda R, L, m, F: None
    col = env.column(env.proctime, e.pos)
    return lambda R, L, m, F: col[R[-1]] if R else None


def _semantics(e: Semantics, env, inner):
    g = compile_expr(e.arg, env, inner)
    if e.kind.upper() == "RUNNING":
        return g
    if env.clause == "DEFINE":
        raise env.error("FINAL cannot be used in DEFINE", e.pos)
    return lambda R, L, m, F: g(F[0], F[1], m, F)


_COMPILERS = {
    Literal: _literal, Column: _column, Nav: _nav, Aggregate: _aggregate, Binary: _binary,
    Unary: _unary, IsNull: _is_null, Between: _between, InList: _in_list, Case: _case,
    Cast: _cast, Call: _call, Classifier: _classifier, MatchNumber: _match_number,
    MatchRowtime: _match_rowtime, MatchProctime: _match_proctime, Semantics: _semantics,
}
