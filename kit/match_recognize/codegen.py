"""DEFINE and MEASURES compiled to Python source: the fast path of ``expressions.py``.

``compile_fast(expr, env, current)`` returns a function with the signature and results of
``compile_expr(expr, env)`` (the reference), but the common nodes -- columns, FIRST/LAST of
a column, literals, comparisons, AND/OR/NOT, IS NULL, arithmetic, CLASSIFIER(),
MATCH_NUMBER() -- are written inline into one function body instead of a tree of closures,
so a row costs one Python call instead of ten. Any other node (aggregates, CASE, CAST,
PREV/NEXT, function calls, ...) is called through its reference closure. ``current`` is
the variable whose DEFINE this is: its columns are then the row being classified.

    DEFINE PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
    ->  def fast(R, L, m, F):
            return (None if (t0 := c0[R[-1]]) is None else
                    None if (t1 := (c1[R[t2]] if (t2 := last(L, 'PRICE_DOWN', 1)) >= 0 else None)) is None
                    else t0 > t1)
"""

from __future__ import annotations

import functools
import operator
from decimal import Decimal

import numpy as np

from .expressions import ARITHMETIC, Env, compile_expr, first_index_in, last_index, last_index_in
from .spec import Binary, Classifier, Column, IsNull, Literal, MatchNumber, Nav, Semantics, Unary

__all__ = ["compile_fast", "compile_blocks", "compile_source", "expand", "vector_condition"]

_COMPARE = {"=": "==", "<>": "!=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@functools.lru_cache(maxsize=256)
def compile_source(source: str, filename: str, mode: str = "exec"):
    """Python's compile, once per source: every partition compiles the same code."""
    return compile(source, filename, mode)



_CHECKED: dict = {}     # (id(expr), Env.shape()) -> expr, compiled without an error before
_GENERATED: dict = {}   # (kind, id(expr), Env.shape(), ...) -> (expr, code, recipes): generated before


def _check(expr, env: Env) -> None:
    """Raise the reference's errors for ``expr`` (``compile_expr``), unchanged; once per
    expression and shape of ``env``: a task runs one spec on key after key."""
    key = (id(expr), env.shape())
    if _CHECKED.get(key) is expr:
        return
    compile_expr(expr, env)
    _remember(_CHECKED, key, expr)


def _remember(cache: dict, key, entry) -> None:
    """``cache[key] = entry``, ``entry`` being or starting with the expression whose id is in
    ``key`` (kept alive with it: the id stays its own); at most 1,024 entries."""
    if len(cache) >= 1024:
        cache.clear()
    cache[key] = entry


def _generated(key, expr, env: Env):
    """``(code, names)`` generated before for ``key`` -- the names bound again to ``env``'s
    columns and closures -- or None."""
    hit = _GENERATED.get(key)
    if hit is None or hit[0] is not expr:
        return None
    _, code, recipes = hit
    return code, {name: (env.column(*recipe[1:]) if recipe[0] == "column" else
                         compile_expr(recipe[1], env) if recipe[0] == "closure" else recipe[1])
                  for name, recipe in recipes.items()}


def compile_fast(expr, env: Env, current: str | None = None):
    """``compile_expr(expr, env)``, generated as one function (see the module docstring);
    generated once per expression and shape of ``env``, then bound to each one's columns."""
    current = current if env.clause == "DEFINE" else None
    key, filename = ("fast", id(expr), env.shape(), current), f"<{env.clause} {current or ''}>"
    hit = _generated(key, expr, env)
    if hit is None:
        _check(expr, env)
        gen = _Generator(env, current)
        try:
            source = f"def fast(R, L, m, F):\n    return {gen.expr(expr)}\n"
            compile_source(source, filename)
        except (RecursionError, SyntaxError, MemoryError):  # too deep for Python's parser
            return compile_expr(expr, env)
        _remember(_GENERATED, key, (expr, source, gen.recipes))
        hit = source, gen.names
    source, names = hit
    namespace = dict(names, last=last_index, last_in=last_index_in, first_in=first_index_in)
    exec(compile_source(source, filename), namespace)  # noqa: S102 -- source built from the expression tree
    fast = namespace["fast"]
    fast.source = source
    return fast


def compile_blocks(expr, env: Env, current: str, elements, tag: str = ""):
    """A DEFINE condition of ``current`` for Flink's contiguous matches, as the Python
    expression ``(code, names)`` over ``r`` and ``M`` (``flink.run_blocks`` writes it into
    its loop; ``names`` are the values the code refers to, each name containing ``tag``).
    It equals ``compile_fast(expr, env, current)(*expand(r, M), 0, None) is True``, where ``M``
    holds the match's blocks ``(variable, first row)`` in pattern order and ``r`` is the row
    being classified, the last row of the last block. Navigation becomes index arithmetic on
    the blocks: no list of labels is built or searched per row. ``elements``: the pattern's
    ``(variable, min)`` in order. Generated once per expression and shape of ``env``.

        PATTERN (START_ROW PRICE_DOWN+ PRICE_UP), DEFINE PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
        ->  ((t1 := c_2_0[r]) is not None and
             (t2 := (c_2_1[t3] if (t3 := M[2][1] - 1 - 1) >= M[1][1] else None)) is not None and t1 > t2)
    """
    key = ("blocks", id(expr), env.shape(), current, tuple(elements), tag)
    hit = _generated(key, expr, env)
    if hit is None:
        _check(expr, env)
        gen = _Blocks(env, current, elements, tag)
        try:
            code = gen.truth(expr)
            compile_source(code, "<DEFINE>", "eval")
        except (RecursionError, SyntaxError, MemoryError):  # too deep for Python's parser
            reference, name = compile_fast(expr, env, current), f"f{tag}"
            return f"({name}(*expand(r, M), 0, None) is True)", {name: reference, "expand": expand}
        _remember(_GENERATED, key, (expr, code, gen.recipes))
        hit = code, gen.names
    code, names = hit
    return code, dict(names, expand=expand, block_last=_block_last, block_first=_block_first)


def expand(r, M):
    """The rows and labels ``(R, L)`` of a match given as blocks ``M`` ending at row ``r``."""
    L = []
    for k, (var, first) in enumerate(M):
        L += [var] * ((M[k + 1][1] if k + 1 < len(M) else r + 1) - first)
    return range(M[0][1], r + 1), tuple(L)


def _block_last(M, r, var, n):
    """The ``n``-th last row of ``var``'s block in ``M``, or -1."""
    for k in range(len(M) - 1, -1, -1):
        if M[k][0] == var:
            i = (M[k + 1][1] - 1 if k + 1 < len(M) else r) - n
            return i if i >= M[k][1] else -1
    return -1


def _block_first(M, r, var, n):
    """The ``n``-th first row of ``var``'s block in ``M``, or -1."""
    for k in range(len(M)):
        if M[k][0] == var:
            i = M[k][1] + n
            return i if i <= (M[k + 1][1] - 1 if k + 1 < len(M) else r) else -1
    return -1


class _Generator:
    def __init__(self, env: Env, current, tag: str = ""):
        self.env, self.current, self.tag = env, current, tag
        self.names = {}     # name in the generated code -> value (columns, constants, closures)
        self.recipes = {}   # name -> how to bind it to another Env's rows: ("column", name, pos),
        self.temps = 0      # ("closure", expr) or ("value", constant)

    def bind(self, value, prefix, recipe=None):
        name = f"{prefix}{self.tag}{len(self.names)}"
        self.names[name] = value
        self.recipes[name] = recipe or ("value", value)
        return name

    def temp(self):
        self.temps += 1
        return f"t{self.temps}"

    CALL = "R, L, m, F"   # the arguments of a reference closure, in the generated code

    def expr(self, e) -> str:
        method = getattr(self, "_" + type(e).__name__.lower(), None)
        code = method(e) if method is not None else None
        if code is None:  # not generated: call the reference closure for this node
            f = self.bind(compile_expr(e, self.env), "f", ("closure", e))
            return f"{f}({self.CALL})"
        return code

    def _literal(self, e: Literal):
        return self.bind(compile_expr(e, self.env)(None, None, None, None), "k")

    def _column(self, e: Column):
        col = self.bind(self.env.column(e.name, e.pos), "c", ("column", e.name, e.pos))
        if e.var is None:
            return self._whole(col, 0, last=True)
        labels = self.env.labels(e.var, e.pos)
        if self.current is not None and self.current in labels:
            return self._row(col)   # in DEFINE of the current variable: the row being classified
        return self._located(col, labels, 0, last=True)

    def _row(self, col):
        return f"{col}[R[-1]]"

    def _whole(self, col, n, last):
        """The ``n``-th last (first) row of the whole match."""
        return f"({col}[R[{f'-1 - {n}' if last else n}]] if {n} < len(R) else None)"

    def _located(self, col, labels, n, last):
        i = self.temp()
        if len(labels) == 1 and last:
            (var,) = labels
            find = f"last(L, {self.bind(var, 'v')}, {n})"
        else:
            find = f"{'last_in' if last else 'first_in'}(L, {self.bind(frozenset(labels), 's')}, {n})"
        return f"({col}[R[{i}]] if ({i} := {find}) >= 0 else None)"

    def _nav(self, e: Nav):
        kind = e.kind.upper()
        if kind not in ("FIRST", "LAST") or not isinstance(e.arg, Column) or e.offset < 0 \
                or (kind == "FIRST" and self.env.all_rows):   # over the whole match: the closure's
            return None
        col = self.bind(self.env.column(e.arg.name, e.arg.pos), "c", ("column", e.arg.name, e.arg.pos))
        if e.arg.var is None:
            return self._whole(col, e.offset, last=kind == "LAST")
        return self._located(col, self.env.labels(e.arg.var, e.arg.pos), e.offset, last=kind == "LAST")

    def truth(self, e, want: bool = True) -> str:
        """Code for ``(value of e) is want`` -- the test a DEFINE needs -- without building
        the three-valued value where the node's shape allows; operands are evaluated exactly
        when ``expr(e)`` evaluates them, so the same errors are raised."""
        if isinstance(e, Semantics) and e.kind.upper() == "RUNNING":
            return self.truth(e.arg, want)
        if isinstance(e, IsNull):
            return f"({self.expr(e.arg)} is {'' if e.negated != want else 'not '}None)"
        if isinstance(e, Unary) and e.op.upper() == "NOT" and _boolean(e.arg):
            return self.truth(e.arg, not want)
        op = e.op.upper() if isinstance(e, Binary) else None
        if op in ("AND", "OR"):
            if (op == "AND") != want:   # AND is False / OR is True: when one side is
                return f"({self.truth(e.left, want)} or {self.truth(e.right, want)})"
            ta, tb = self.temp(), self.temp()   # AND is True / OR is False: both sides, not NULL
            return (f"(({ta} := {self.expr(e.left)}) is not {not want} and ({tb} := {self.expr(e.right)}) "
                    f"is not {not want} and {ta} is not None and {tb} is not None)")
        if op in _COMPARE:
            ta, tb = self.temp(), self.temp()
            test = f"{ta} {_COMPARE[op]} {tb}"
            return (f"(({ta} := {self.expr(e.left)}) is not None and ({tb} := {self.expr(e.right)}) is not None "
                    f"and {test if want else f'not ({test})'})")
        return f"({self.expr(e)} is {want})"

    def _binary(self, e: Binary):
        op = e.op.upper()
        a, b = self.expr(e.left), self.expr(e.right)
        ta, tb = self.temp(), self.temp()
        if op == "AND":
            return (f"(False if ({ta} := {a}) is False else False if ({tb} := {b}) is False "
                    f"else None if {ta} is None or {tb} is None else True)")
        if op == "OR":
            return (f"(True if ({ta} := {a}) is True else True if ({tb} := {b}) is True "
                    f"else None if {ta} is None or {tb} is None else False)")
        if op in _COMPARE:
            value = f"{ta} {_COMPARE[op]} {tb}"
        elif op in ("+", "-", "*"):
            value = f"{ta} {op} {tb}"
        elif op in ARITHMETIC:
            value = f"{self.bind(ARITHMETIC[op], 'op')}({ta}, {tb})"
        else:
            return None
        return f"(None if ({ta} := {a}) is None else None if ({tb} := {b}) is None else {value})"

    def _unary(self, e: Unary):
        op = e.op.upper()
        if op == "+":
            return self.expr(e.arg)
        if op not in ("NOT", "-"):
            return None
        t = self.temp()
        return f"(None if ({t} := {self.expr(e.arg)}) is None else {'not ' if op == 'NOT' else '-'}{t})"

    def _isnull(self, e: IsNull):
        return f"({self.expr(e.arg)} is {'not ' if e.negated else ''}None)"

    def _semantics(self, e: Semantics):
        return self.expr(e.arg) if e.kind.upper() == "RUNNING" else None

    def _classifier(self, e: Classifier):
        return "(L[-1] if L else None)" if e.var is None else None

    def _matchnumber(self, e: MatchNumber):
        return "m"


def _boolean(e) -> bool:
    """Whether ``e``'s value is always True, False or None (NULL)."""
    if isinstance(e, Semantics):
        return e.kind.upper() == "RUNNING" and _boolean(e.arg)
    if isinstance(e, Binary):
        return e.op.upper() in ("AND", "OR") or e.op.upper() in _COMPARE
    return isinstance(e, IsNull) or (isinstance(e, Unary) and e.op.upper() == "NOT")


class _Blocks(_Generator):
    """Code over the blocks ``M`` of a contiguous match (see ``compile_blocks``). A block
    whose place in ``M`` is fixed -- the current variable's (the last), or one in the
    pattern's leading run of mandatory variables -- is read at that place; a variable after
    the current one has no rows yet; any other is looked up."""

    CALL = "*expand(r, M), 0, None"

    def __init__(self, env: Env, current: str, elements, tag: str):
        super().__init__(env, current, tag)
        self.order = {var: k for k, (var, _) in enumerate(elements)}
        self.place = {}
        for k, (var, minimum) in enumerate(elements):
            if minimum < 1:
                break
            self.place[var] = k

    def _row(self, col):
        return f"{col}[r]"

    def _whole(self, col, n, last):
        i = self.temp()
        if last:
            return f"({col}[{i}] if ({i} := r - {n}) >= M[0][1] else None)"
        return f"({col}[{i}] if ({i} := M[0][1] + {n}) <= r else None)"

    def _located(self, col, labels, n, last):
        if len(labels) != 1:
            return None
        (var,) = labels
        if var == self.current:
            first, end = "M[-1][1]", "r"
        elif self.order[var] > self.order[self.current]:
            return "None"                  # a later variable: no rows yet
        elif var in self.place:
            k = self.place[var]
            first, end = f"M[{k}][1]", f"M[{k + 1}][1] - 1"
        else:
            i = self.temp()
            find = f"{'block_last' if last else 'block_first'}(M, r, {self.bind(var, 'v')}, {n})"
            return f"({col}[{i}] if ({i} := {find}) >= 0 else None)"
        i = self.temp()
        if last:
            return f"({col}[{i}] if ({i} := {end} - {n}) >= {first} else None)"
        return f"({col}[{i}] if ({i} := {first} + {n}) <= {end} else None)"

    def _classifier(self, e: Classifier):
        return "M[-1][0]" if e.var is None else None

    def _matchnumber(self, e: MatchNumber):
        return None


def vector_condition(expr, env: Env, current: str, labels: tuple, nrows: int):
    """``compile_fast(expr, env, current)(range(s, s + k), labels, 0, None) is True`` for every
    start row ``s`` at once (``k = len(labels)``; False when ``s + k > nrows``), as a numpy
    bool array of ``nrows``; None when ``expr`` leaves the subset numpy evaluates exactly and
    where the reference cannot raise: comparisons, AND, OR, NOT and IS NULL of number literals,
    columns and FIRST/LAST of columns, whose values are integers or floats (no NULLs) with
    ``|x| < 2**53``, so that an integer and a float compare in float64 as in Python (and no
    integer of a mixed column was rounded to reach its float64 array)."""
    ok = np.zeros(nrows, bool)
    n = nrows - len(labels) + 1
    if n > 0:
        try:
            ok[:n] = _Vector(env, current, labels, n).truth(expr) == 2
        except _Outside:
            return None
    return ok


class _Outside(Exception):
    """The expression leaves ``vector_condition``'s subset."""


_VECTOR_COMPARE = {"=": operator.eq, "<>": operator.ne, "!=": operator.ne, "<": operator.lt,
                   "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_EXACT = 2 ** 53


class _Vector:
    """Values of the rows ``s + i`` for every ``s`` as numpy arrays (a static NULL: None);
    truth values as 0 (FALSE), 1 (NULL), 2 (TRUE): AND is the minimum, OR the maximum, NOT
    ``2 - x``."""

    def __init__(self, env: Env, current: str, labels: tuple, n: int):
        self.env, self.current, self.labels, self.n = env, current, labels, n
        self.columns = {}

    def truth(self, e):
        if isinstance(e, Semantics) and e.kind.upper() == "RUNNING":
            return self.truth(e.arg)
        if isinstance(e, IsNull):
            return 2 * ((self.value(e.arg) is None) != e.negated)
        if isinstance(e, Unary) and e.op.upper() == "NOT":
            return 2 - self.truth(e.arg)
        op = e.op.upper() if isinstance(e, Binary) else None
        if op in ("AND", "OR"):
            return (np.minimum if op == "AND" else np.maximum)(self.truth(e.left), self.truth(e.right))
        if op in _VECTOR_COMPARE:
            a, b = self.value(e.left), self.value(e.right)
            return 1 if a is None or b is None else np.where(_VECTOR_COMPARE[op](a, b), 2, 0)
        raise _Outside

    def value(self, e):
        if isinstance(e, Semantics) and e.kind.upper() == "RUNNING":
            return self.value(e.arg)
        if isinstance(e, Literal):
            v = compile_expr(e, self.env)(None, None, None, None)
            if isinstance(v, Decimal) and float(v) == v:   # a DECIMAL literal a float holds
                v = float(v)
            if v is None or (type(v) in (int, float) and abs(v) < _EXACT):
                return v
        elif isinstance(e, Column):
            if e.var is None or self.current in self.env.labels(e.var):
                return self.row(e.name, len(self.labels) - 1)
            return self.row(e.name, last_index_in(self.labels, self.env.labels(e.var)))
        elif isinstance(e, Nav) and e.kind.upper() in ("FIRST", "LAST") and isinstance(e.arg, Column) \
                and e.offset >= 0:
            last, n, var = e.kind.upper() == "LAST", e.offset, e.arg.var
            if var is None:
                return self.row(e.arg.name, (len(self.labels) - 1 - n if last else n) if n < len(self.labels) else -1)
            find = last_index_in if last else first_index_in
            return self.row(e.arg.name, find(self.labels, self.env.labels(var), n))
        raise _Outside

    def row(self, name, i):
        """Column ``name`` at rows ``s + i``; None when ``i`` is -1 (no such row)."""
        if i < 0:
            return None
        if name not in self.columns:
            col = np.asarray(self.env.column(name))
            if col.dtype.kind not in "if" or not ((col > -_EXACT) & (col < _EXACT)).all():
                raise _Outside
            self.columns[name] = col
        return self.columns[name][i:i + self.n]
